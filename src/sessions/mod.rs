//! Agent sessions ("runs"): their records, their derived state, and each caller's marks.

pub mod marks;
pub mod record;
pub mod manager;

pub use manager::{Sessions, SessionError};
