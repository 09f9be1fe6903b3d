//! Evidence: what was checked, about which exact candidate, under which policy.
//!
//! A check result names its object (the candidate identity digest) and the policy it was
//! judged under (the policy digest). When either changes, the evidence is stale: kept in
//! history, never reused. See `docs/evidence.md`.

pub mod candidate;
pub mod checks;
pub mod gate;
pub use crate::workspaces::policy;
pub mod receipts;
pub mod store;

/// The recipe of a digest of raw bytes (a file, a captured stream): SHA-256 of the exact
/// bytes, lowercase hex.
pub const BYTES_RECIPE: &str = "bytes-sha256/1";

/// Who asked for a state change: the one actor type of [`crate::auth`].
pub use crate::auth::Actor;

// The numbered stores' helpers live in `files` (support); these names stay for the callers.
pub(crate) use crate::files::{hash_file, numbered, reserve_numbered, valid_id};
