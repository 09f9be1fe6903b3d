//! Publish authority: the operator's key, the controlling-terminal prompt, and the signed
//! receipts (DSSE envelopes holding in-toto statements, with a detached SSHSIG).
//!
//! - [`tty`]: the only source of a revision or a passphrase (`/dev/tty`, foreground, flushed).
//! - [`keys`]: the Ed25519 publish key, encrypted PKCS#8 v2 under scrypt + AES-256-CBC.
//! - [`keychange`]: later keys and revocations, signed by a registered key.
//! - [`passphrase`]: the recorded back-off after wrong passphrases.
//! - [`dsse`]: DSSE v1 envelopes, Ed25519 over the PAE.
//! - [`sshsig`]: detached SSH signatures that `ssh-keygen -Y verify` accepts.
//! - [`statement`]: in-toto Statement v1, and the verification of a receipt file.

pub mod dsse;
pub mod keychange;
pub mod keys;
pub mod passphrase;
pub mod sshsig;
pub mod statement;
pub mod tty;
pub mod views;
