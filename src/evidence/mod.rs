//! Evidence: what was checked, about which exact candidate, under which policy.
//!
//! A check result names its object (the candidate identity digest) and the policy it was
//! judged under (the policy digest). When either changes, the evidence is stale: kept in
//! history, never reused.

pub mod policy;
