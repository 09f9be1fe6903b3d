//! Detached SSH signatures (OpenSSH PROTOCOL.sshsig), so that anyone can check a receipt with
//! a tool they already have:
//!
//! ```text
//! ssh-keygen -Y verify -f allowed_signers -I proctor -n proctor-receipt -s receipt.sig < receipt
//! ```
//! with `allowed_signers` holding `proctor ssh-ed25519 AAAA…` (the line of `proctor key show`).
//!
//! The signed data is `"SSHSIG" ‖ string(namespace) ‖ string("") ‖ string("sha512") ‖
//! string(SHA-512(message))`; the blob is `"SSHSIG" ‖ uint32(1) ‖ string(public key blob) ‖
//! string(namespace) ‖ string("") ‖ string("sha512") ‖ string(ssh-ed25519 signature)`,
//! armored between `-----BEGIN SSH SIGNATURE-----` and `-----END SSH SIGNATURE-----`.

use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest, Sha256, Sha512};

use super::keys::{put_ssh_string, ssh_public_blob};

/// The namespace proctor's receipts are signed in (`-n` of `ssh-keygen -Y verify`).
pub const NAMESPACE: &str = "proctor-receipt";
/// The principal name proctor's documentation uses in allowed_signers (`-I`).
pub const PRINCIPAL: &str = "proctor";

const MAGIC: &[u8; 6] = b"SSHSIG";
const VERSION: u32 = 1;
const BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const END: &str = "-----END SSH SIGNATURE-----";
const HASH: &str = "sha512";
const LINE: usize = 70;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SshsigError {
    #[error("not an armored SSH signature ({0})")]
    Armor(String),
    #[error("malformed SSHSIG blob: {0}")]
    Malformed(String),
    #[error("SSHSIG version {0} is not supported (expected 1)")]
    Version(u32),
    #[error("the signature's namespace is {found:?}, expected {expected:?}")]
    Namespace { found: String, expected: String },
    #[error("the signature was made by another key than the trusted one")]
    OtherKey,
    #[error("hash algorithm {0:?} is not supported (sha512 or sha256)")]
    Hash(String),
    #[error("the signature does not match the message")]
    BadSignature,
}

fn hash(alg: &str, message: &[u8]) -> Result<Vec<u8>, SshsigError> {
    match alg {
        "sha512" => Ok(Sha512::digest(message).to_vec()),
        "sha256" => Ok(Sha256::digest(message).to_vec()),
        other => Err(SshsigError::Hash(other.to_string())),
    }
}

fn signed_data(namespace: &str, alg: &str, digest: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(128);
    v.extend_from_slice(MAGIC);
    put_ssh_string(&mut v, namespace.as_bytes());
    put_ssh_string(&mut v, b"");
    put_ssh_string(&mut v, alg.as_bytes());
    put_ssh_string(&mut v, digest);
    v
}

/// Signs `message` in [`NAMESPACE`]; returns the armored signature (with a final newline).
pub fn sign(message: &[u8], key: &SigningKey) -> String {
    sign_in(message, key, NAMESPACE)
}

/// As [`sign`], in another namespace.
pub fn sign_in(message: &[u8], key: &SigningKey, namespace: &str) -> String {
    let digest = Sha512::digest(message);
    let sig: Signature = key.sign(&signed_data(namespace, HASH, &digest));
    let mut ssh_sig = Vec::with_capacity(83);
    put_ssh_string(&mut ssh_sig, b"ssh-ed25519");
    put_ssh_string(&mut ssh_sig, &sig.to_bytes());
    let mut blob = Vec::with_capacity(200);
    blob.extend_from_slice(MAGIC);
    blob.extend_from_slice(&VERSION.to_be_bytes());
    put_ssh_string(&mut blob, &ssh_public_blob(&key.verifying_key()));
    put_ssh_string(&mut blob, namespace.as_bytes());
    put_ssh_string(&mut blob, b"");
    put_ssh_string(&mut blob, HASH.as_bytes());
    put_ssh_string(&mut blob, &ssh_sig);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&blob);
    let mut out = String::with_capacity(b64.len() + 80);
    out.push_str(BEGIN);
    out.push('\n');
    for chunk in b64.as_bytes().chunks(LINE) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SshsigError> {
        if self.0.len() < n {
            return Err(SshsigError::Malformed("truncated".into()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, SshsigError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Result<&'a [u8], SshsigError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn text(&mut self) -> Result<String, SshsigError> {
        String::from_utf8(self.string()?.to_vec())
            .map_err(|_| SshsigError::Malformed("a name is not UTF-8".into()))
    }
}

/// The parsed blob.
#[derive(Debug)]
pub struct Parsed {
    pub public_key: VerifyingKey,
    pub namespace: String,
    pub hash_algorithm: String,
    signature: Signature,
}

/// Parses an armored signature.
pub fn parse(armored: &str) -> Result<Parsed, SshsigError> {
    let text = armored.trim();
    let body = text
        .strip_prefix(BEGIN)
        .ok_or_else(|| SshsigError::Armor(format!("no {BEGIN} line")))?
        .strip_suffix(END)
        .ok_or_else(|| SshsigError::Armor(format!("no {END} line")))?;
    let b64: String = body.split_ascii_whitespace().collect();
    let blob = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| SshsigError::Armor(format!("bad base64: {e}")))?;
    let mut r = Reader(&blob);
    if r.take(6)? != MAGIC {
        return Err(SshsigError::Malformed("no SSHSIG magic".into()));
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(SshsigError::Version(version));
    }
    let pk_blob = r.string()?;
    let namespace = r.text()?;
    let _reserved = r.string()?;
    let hash_algorithm = r.text()?;
    let sig_blob = r.string()?;
    if !r.0.is_empty() {
        return Err(SshsigError::Malformed("trailing bytes".into()));
    }
    let mut pk = Reader(pk_blob);
    if pk.string()? != b"ssh-ed25519" {
        return Err(SshsigError::Malformed("the key is not ssh-ed25519".into()));
    }
    let raw: [u8; 32] = pk
        .string()?
        .try_into()
        .map_err(|_| SshsigError::Malformed("bad ed25519 key length".into()))?;
    let public_key = VerifyingKey::from_bytes(&raw)
        .map_err(|_| SshsigError::Malformed("not an Ed25519 point".into()))?;
    let mut s = Reader(sig_blob);
    if s.string()? != b"ssh-ed25519" {
        return Err(SshsigError::Malformed(
            "the signature is not ssh-ed25519".into(),
        ));
    }
    let signature = Signature::from_slice(s.string()?)
        .map_err(|_| SshsigError::Malformed("bad ed25519 signature length".into()))?;
    Ok(Parsed {
        public_key,
        namespace,
        hash_algorithm,
        signature,
    })
}

/// Verifies an armored signature over `message` in [`NAMESPACE`] by `key`.
pub fn verify(armored: &str, message: &[u8], key: &VerifyingKey) -> Result<(), SshsigError> {
    verify_in(armored, message, key, NAMESPACE)
}

/// As [`verify`], in another namespace.
pub fn verify_in(
    armored: &str,
    message: &[u8],
    key: &VerifyingKey,
    namespace: &str,
) -> Result<(), SshsigError> {
    let p = parse(armored)?;
    if p.namespace != namespace {
        return Err(SshsigError::Namespace {
            found: p.namespace,
            expected: namespace.to_string(),
        });
    }
    if p.public_key != *key {
        return Err(SshsigError::OtherKey);
    }
    let digest = hash(&p.hash_algorithm, message)?;
    key.verify(
        &signed_data(&p.namespace, &p.hash_algorithm, &digest),
        &p.signature,
    )
    .map_err(|_| SshsigError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_round_trip_and_refusals() {
        let key = SigningKey::from_bytes(&[1u8; 32]);
        let vk = key.verifying_key();
        let armored = sign(b"hello\n", &key);
        assert!(armored.starts_with("-----BEGIN SSH SIGNATURE-----\n"));
        assert!(
            armored
                .lines()
                .all(|l| l.len() <= 70 || l.starts_with("-----"))
        );
        verify(&armored, b"hello\n", &vk).unwrap();
        assert_eq!(
            verify(&armored, b"hello!\n", &vk),
            Err(SshsigError::BadSignature)
        );
        let other = SigningKey::from_bytes(&[2u8; 32]).verifying_key();
        assert_eq!(
            verify(&armored, b"hello\n", &other),
            Err(SshsigError::OtherKey)
        );
        assert!(matches!(
            verify_in(&armored, b"hello\n", &vk, "file"),
            Err(SshsigError::Namespace { .. })
        ));
        assert!(matches!(
            verify("garbage", b"hello\n", &vk),
            Err(SshsigError::Armor(_))
        ));
    }
}
