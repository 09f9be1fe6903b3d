//! The agent factory (seed 000): provider adapters, prompts and verdicts for the worker, the reviewer and the one repair.
pub mod invoke;
pub mod prompt;
