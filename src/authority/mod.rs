//! Publish authority: the operator's key, the controlling-terminal prompt, and the signed
//! receipts (DSSE envelopes holding in-toto statements, with a detached SSHSIG).
//!
//! - [`tty`]: the only source of a revision or a passphrase (`/dev/tty`, foreground, flushed).
//! - [`keys`]: the Ed25519 publish key, encrypted PKCS#8 v2 under scrypt + AES-256-CBC.

pub mod keys;
pub mod tty;
