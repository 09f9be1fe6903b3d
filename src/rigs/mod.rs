//! Rigs (seed 004, terminal rigs): disposable machines an agent drives and a person can take
//! over. Two backends: `vm` (QEMU `microvm`, its own kernel, disk and network stack) and
//! `namespace` (bubblewrap on the host's kernel: a weaker boundary, and it says so). Egress is
//! denied by default; every action goes through one chokepoint ([`Rigs::act`]) that enforces a
//! person's exclusive control lock and writes the rig's audit log; a rig's life is bounded by
//! a hard TTL, an idle ladder and a memory budget. See `docs/rigs.md`.
//!
//! Parts: `model` (the data, shared with the wire), `backend` (the [`Machine`] trait and the
//! launch), `image` (the reproducible base image: `rig image build`), `vm` and `namespace`
//! (the engines), `guest` (the guest agent and its protocol), `relay` (the host-controlled
//! channels of `--allow`), `manager` (the rigs of one server: the chokepoint, the lock, the
//! audit, the TTL, the idle ladder, the budget, the orphan sweep), `store` and `audit` (the
//! records on disk), `workspace` (the tree copied in, the commits fetched back).

pub mod audit;
pub mod backend;
pub mod guest;
pub mod image;
pub mod manager;
pub mod model;
pub mod namespace;
pub mod relay;
pub mod store;
pub mod vm;
pub mod workspace;

pub use backend::{LaunchSpec, Machine};
pub use manager::Rigs;
pub use model::*;

use crate::auth::Actor;

/// Every error of the rigs, each with its HTTP status in `server::rigs_api`.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 400: the message names the field and the remedy.
    #[error("{0}")]
    BadRequest(String),
    /// 423: a person holds the rig's control lock and the caller is an agent.
    #[error("{message}")]
    Locked {
        holder: Actor,
        since: String,
        message: String,
    },
    /// 403: what only a person may do (take the lock) asked by an agent, or another's lock
    /// released.
    #[error("{0}")]
    Forbidden(String),
    /// 409: the rig's state does not allow it (booting, suspended, closed).
    #[error("{0}")]
    Conflict(String),
    /// 413.
    #[error("{0}")]
    TooLarge(String),
    /// 503: the engine is not installed, no image is built, the budget cannot be met.
    #[error("{0}")]
    Unavailable(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
}

impl RigError {
    /// The wire's error code.
    pub fn code(&self) -> &'static str {
        match self {
            RigError::NotFound(_) => "not_found",
            RigError::BadRequest(_) => "bad_request",
            RigError::Locked { .. } => "locked",
            RigError::Forbidden(_) => "forbidden",
            RigError::Conflict(_) => "conflict",
            RigError::TooLarge(_) => "too_large",
            RigError::Unavailable(_) => "unavailable",
            RigError::Internal(_) => "internal",
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> RigError {
        RigError::Internal(e.to_string())
    }
}
