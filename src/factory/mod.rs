//! The factory (seed 000): the coordination tracer (`bus`, `smoke`) and the agent factory
//! (the engine, its provider adapters, prompts and verdicts, the tribunal as a reviewer, the
//! OpenTelemetry export).
pub mod bus;
pub mod engine;
pub mod invoke;
pub mod otel;
pub mod prompt;
pub mod provider;
pub mod rig;
pub mod smoke;
