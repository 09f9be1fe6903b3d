//! proctor: a terminal cockpit for operators of autonomous coding agents.
//!
//! One module per concept; see `docs/architecture.md`.

pub mod cli;
pub mod files;
pub mod home;
pub mod providers;
pub mod text;
