//! The blind tribunal (seed 001): up to eight jurors, one lens each, seated by tier on ladders
//! of model families other than the builder's, each judging one blind envelope of the
//! candidate's current bytes; strict verdicts bound to the candidate identity; rounds until
//! unanimous. See `docs/tribunal.md`.
//!
//! Parts: `model` (the data, shared with the wire), `config` (`config/tribunal.toml`: lenses,
//! tiers, ladders, families; the builder's exclusion), `jurors` (the closed backends and
//! their probes), `fleet` (fake jurors on loopback, labelled demo), `envelope` (built from the
//! current files, zero author traces), `verdict` (reading an answer strictly), `engine` (the
//! checks the tribunal runs itself: new tests, regression, anti-false-green, red-first),
//! `round` (seating, routing, the round's folder and record), `store` (rounds on disk).

pub mod config;
pub mod engine;
pub mod envelope;
/// SHIMS of other parts' functions for the faces (helper E): deleted by the integrator.
pub mod fleet;
pub mod jurors;
pub mod model;
pub mod round;
pub mod store;
pub mod verdict;

pub use model::*;
