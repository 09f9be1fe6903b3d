//! proctor: a terminal cockpit for operators of autonomous coding agents.
//!
//! One module per concept; see `docs/architecture.md`.

pub mod api;
pub mod auth;
pub mod authority;
pub mod cli;
pub mod client;
pub mod demo;
pub mod digest;
pub mod evidence;
pub mod factory;
pub mod files;
pub mod git;
pub mod home;
pub mod ledger;
pub mod log;
pub mod peer;
pub mod process_group;
pub mod providers;
pub mod publish;
pub mod remote;
pub mod rigs;
pub mod runs;
pub mod server;
pub mod sessions;
pub mod text;
pub mod tribunal;
pub mod tui;
pub mod version;
pub mod workspaces;
pub mod worktrees;

// Parts of `evidence` (docs/architecture.md, Layers), under their old paths.
pub use evidence::{candidate, gate, receipts};
