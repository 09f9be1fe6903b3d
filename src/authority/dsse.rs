//! DSSE v1 envelopes (Dead Simple Signing Envelope, secure-systems-lab/dsse, protocol.md and
//! envelope.md), signed with pure Ed25519 over the pre-authentication encoding.
//!
//! ```text
//! PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//! ```
//! where `LEN` is the ASCII decimal byte length (of the UTF-8 type, of the raw body) and `SP`
//! is one space. The envelope is JSON `{payloadType, payload (base64), signatures: [{keyid,
//! sig (base64)}]}`. Readers accept standard and URL-safe base64, padded or not; proctor
//! writes standard, padded base64. proctor's `keyid` is the SHA-256 of the key's DER
//! SubjectPublicKeyInfo (recipe `sha256-spki-der/1`, [`crate::authority::keys::key_id`]).

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// base64 of the serialized body.
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// Optional, unauthenticated hint of which key signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyid: Option<String>,
    /// base64 of the signature over PAE(payloadType, payload).
    pub sig: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DsseError {
    #[error("payload type {found:?} is not one this verifier accepts (expected {expected})")]
    PayloadType { found: String, expected: String },
    #[error("the payload is not valid base64")]
    PayloadEncoding,
    #[error("the envelope has no signature")]
    Unsigned,
    #[error(
        "{valid} distinct trusted key(s) signed this envelope validly; {threshold} needed \
         (signatures checked: {checked})"
    )]
    Threshold {
        valid: usize,
        threshold: usize,
        checked: usize,
    },
    #[error("the envelope is not valid JSON: {0}")]
    Json(String),
}

/// The pre-authentication encoding, exactly as DSSE v1 defines it.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// Decodes base64 in either alphabet, with or without padding (DSSE verifiers must accept
/// both).
pub fn decode_b64(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let cfg = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, cfg);
    let url = GeneralPurpose::new(&base64::alphabet::URL_SAFE, cfg);
    if s.contains(['-', '_']) {
        url.decode(s)
    } else {
        standard.decode(s)
    }
}

fn encode_b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Signs `payload` as `payload_type` with one Ed25519 signature over the PAE.
pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey, keyid: &str) -> Envelope {
    let sig: Signature = key.sign(&pae(payload_type, payload));
    Envelope {
        payload_type: payload_type.to_string(),
        payload: encode_b64(payload),
        signatures: vec![EnvelopeSignature {
            keyid: Some(keyid.to_string()),
            sig: encode_b64(&sig.to_bytes()),
        }],
    }
}

/// A key a verifier trusts, with the id a signature may name it by.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub keyid: String,
    pub key: VerifyingKey,
}

/// The general DSSE verification (protocol.md): the payload type must be supported; each
/// signature is checked against the trusted keys its `keyid` names (all of them when it names
/// none) over the PAE; the envelope is accepted when at least `threshold` DISTINCT trusted
/// keys signed validly. Returns the payload.
pub fn verify_with(
    envelope: &Envelope,
    supported_payload_types: &[&str],
    trusted: &[TrustedKey],
    threshold: usize,
) -> Result<Vec<u8>, DsseError> {
    if !supported_payload_types.contains(&envelope.payload_type.as_str()) {
        return Err(DsseError::PayloadType {
            found: envelope.payload_type.clone(),
            expected: supported_payload_types.join(" or "),
        });
    }
    let payload = decode_b64(&envelope.payload).map_err(|_| DsseError::PayloadEncoding)?;
    if envelope.signatures.is_empty() {
        return Err(DsseError::Unsigned);
    }
    let message = pae(&envelope.payload_type, &payload);
    let mut accepted: BTreeSet<[u8; 32]> = BTreeSet::new();
    for s in &envelope.signatures {
        let Ok(raw) = decode_b64(&s.sig) else {
            continue;
        };
        let Ok(sig) = Signature::from_slice(&raw) else {
            continue;
        };
        for t in trusted {
            if s.keyid.as_deref().is_some_and(|id| id != t.keyid) {
                continue;
            }
            if t.key.verify(&message, &sig).is_ok() {
                accepted.insert(t.key.to_bytes());
            }
        }
    }
    if accepted.len() < threshold.max(1) {
        return Err(DsseError::Threshold {
            valid: accepted.len(),
            threshold: threshold.max(1),
            checked: envelope.signatures.len(),
        });
    }
    Ok(payload)
}

/// proctor's verification: payload type [`PAYLOAD_TYPE`], one valid signature by `key`
/// (a signature that names a keyid must name this key's id). Returns the payload.
pub fn verify(envelope: &Envelope, key: &VerifyingKey) -> Result<Vec<u8>, DsseError> {
    let trusted = [TrustedKey {
        keyid: super::keys::key_id(key),
        key: *key,
    }];
    verify_with(envelope, &[PAYLOAD_TYPE], &trusted, 1)
}

impl Envelope {
    /// Compact JSON (the bytes a receipt file holds and its SSHSIG covers, plus a newline
    /// added by the writer).
    pub fn to_json(&self) -> String {
        // Serialising plain strings cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Result<Envelope, DsseError> {
        serde_json::from_slice(bytes).map_err(|e| DsseError::Json(e.to_string()))
    }

    /// The decoded payload, unverified.
    pub fn payload_bytes(&self) -> Result<Vec<u8>, DsseError> {
        decode_b64(&self.payload).map_err(|_| DsseError::PayloadEncoding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_counts_bytes_not_characters() {
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
        assert_eq!(pae("é", b"ab"), "DSSEv1 2 é 2 ab".as_bytes());
    }

    #[test]
    fn sign_then_verify_and_tampering_fails() {
        let key = SigningKey::from_bytes(&[3u8; 32]);
        let vk = key.verifying_key();
        let id = super::super::keys::key_id(&vk);
        let env = sign(PAYLOAD_TYPE, b"{\"a\":1}", &key, &id);
        assert_eq!(verify(&env, &vk).unwrap(), b"{\"a\":1}");
        let back = Envelope::from_json(env.to_json().as_bytes()).unwrap();
        assert_eq!(back, env);

        let mut t = env.clone();
        t.payload = encode_b64(b"{\"a\":2}");
        assert!(matches!(verify(&t, &vk), Err(DsseError::Threshold { .. })));

        let mut t = env.clone();
        t.signatures[0].keyid = Some("0".repeat(64));
        assert!(matches!(verify(&t, &vk), Err(DsseError::Threshold { .. })));

        let mut t = env.clone();
        t.payload_type = "application/json".into();
        assert!(matches!(
            verify(&t, &vk),
            Err(DsseError::PayloadType { .. })
        ));

        let other = SigningKey::from_bytes(&[4u8; 32]).verifying_key();
        assert!(verify(&env, &other).is_err());
    }
}
