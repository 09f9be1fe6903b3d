//! Agent sessions ("runs"): their records, their derived state, and each caller's marks.

pub mod activity;
pub mod handoff;
pub mod manager;
pub mod marks;
pub mod messages;
pub mod moving;
pub mod permissions;
pub mod record;
pub mod view;

pub use manager::{HookSaid, SessionError, Sessions, stored_record};
pub use record::State;
pub use view::RunView;
