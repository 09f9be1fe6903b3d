//! Publication: the only path from a candidate to a privileged effect (issue 6).
//!
//! - [`intent`]: an intent to publish one bound candidate as one commit on one remote branch,
//!   AWAITING_AUTHORITY only when the evidence passes for that exact candidate.
//! - [`approve`]: the approval flow, one library function driven by a [`approve::Prompter`]
//!   (the CLI's `proctor publish approve` and the cockpit's modal share it).
//! - [`unlock`]: the passphrase prompt with the server's back-off, shared by every place
//!   that decrypts the publish key.
//! - [`adapter`]: the three effects and nothing else: move the local branch ref, push with
//!   a lease, open a pull request through [`forge`]. There is no merge capability.
//!
//! See `docs/publish.md` for the flow and `docs/security.md` for its threat model.

pub mod adapter;
pub mod approve;
pub mod authorisation;
pub mod demo_forge;
pub mod forge;
pub mod intent;
pub mod machine;
pub mod receipt;
pub mod unlock;
pub mod views;
