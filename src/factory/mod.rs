//! The factory (seed 000): the coordination tracer and the agent factory.
pub mod engine;
pub mod invoke;
pub mod otel;
pub mod prompt;
pub mod provider;
