//! The publication authorisation: minted in memory at the operator's terminal, once the
//! revision was typed and the key decrypted; appended to the ledger by the server, which
//! verifies it; spent exactly once.
//!
//! It is a DSSE envelope of payload type [`PAYLOAD_TYPE`] (not the receipts' in-toto type, so
//! neither signature can stand for the other), signed with the publish key over the PAE. The
//! payload binds a random nonce, a short expiry, the revision, the candidate identity, the
//! intent and approval, the ledger head the approval was opened at, and the key id.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::authority::dsse::{self, Envelope, TrustedKey};
use crate::authority::keys;

/// The DSSE payload type of an authorisation.
pub const PAYLOAD_TYPE: &str = "application/vnd.proctor.publish-authorisation+json";
/// The format name inside the payload.
pub const FORMAT: &str = "proctor-publish-authorisation/1";
/// How long an authorisation lives after it is minted.
pub const LIFETIME_SECS: i64 = 120;
/// Clock skew tolerated between the terminal that mints and the server that verifies (both
/// are on one machine today; the margin covers a slow scheduler, not another clock).
pub const SKEW_SECS: i64 = 5;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthorisationError {
    #[error("the authorisation's signature does not verify against the registered key: {0}")]
    Signature(String),
    #[error("the authorisation is not well formed: {0}")]
    Malformed(String),
    #[error("the authorisation names {field} {found}, but this approval is for {expected}")]
    Mismatch {
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error("the authorisation expired at {expires_at} (now {now})")]
    Expired { expires_at: String, now: String },
    #[error(
        "the authorisation's lifetime ({minted_at} to {expires_at}) is not within \
         {LIFETIME_SECS} s of now"
    )]
    BadLifetime {
        minted_at: String,
        expires_at: String,
    },
    #[error("random bytes: {0}")]
    Random(String),
}

/// The ledger position an approval was opened at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LedgerHead {
    /// The seq of the last event at that point.
    pub seq: u64,
    /// SHA-256 (hex) of that line's exact bytes, LF included.
    pub line_sha256: String,
}

/// What an authorisation says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub format: String,
    pub approval: String,
    pub intent: String,
    pub revision: String,
    /// The candidate identity digest (with its recipe).
    pub identity: String,
    pub ledger_head: LedgerHead,
    /// SHA-256 of the signing key's SPKI DER, hex.
    pub key_id: String,
    /// 32 random bytes, hex. Appears only here; the ledger keeps its SHA-256.
    pub nonce: String,
    pub minted_at: String,
    pub expires_at: String,
}

impl Payload {
    /// SHA-256 (hex) of the nonce's text: how the ledger and receipts name it.
    pub fn nonce_sha256(&self) -> String {
        nonce_sha256(&self.nonce)
    }
}

/// SHA-256 (hex) of a nonce's text.
pub fn nonce_sha256(nonce: &str) -> String {
    hex::encode(Sha256::digest(nonce.as_bytes()))
}

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What the operator authorises: everything but the nonce, the times and the key.
#[derive(Debug, Clone)]
pub struct Grant {
    pub approval: String,
    pub intent: String,
    pub revision: String,
    pub identity: String,
    pub ledger_head: LedgerHead,
}

/// Mints an authorisation now: a fresh nonce, an expiry [`LIFETIME_SECS`] ahead, signed with
/// `key`.
pub fn mint(grant: &Grant, key: &SigningKey) -> Result<(Payload, Envelope), AuthorisationError> {
    let mut nonce = [0u8; 32];
    getrandom::fill(&mut nonce).map_err(|e| AuthorisationError::Random(e.to_string()))?;
    let now = Utc::now();
    let key_id = keys::key_id(&key.verifying_key());
    let payload = Payload {
        format: FORMAT.to_string(),
        approval: grant.approval.clone(),
        intent: grant.intent.clone(),
        revision: grant.revision.clone(),
        identity: grant.identity.clone(),
        ledger_head: grant.ledger_head.clone(),
        key_id: key_id.clone(),
        nonce: hex::encode(nonce),
        minted_at: at(now),
        expires_at: at(now + Duration::seconds(LIFETIME_SECS)),
    };
    let bytes =
        serde_json::to_vec(&payload).map_err(|e| AuthorisationError::Malformed(e.to_string()))?;
    Ok((payload, dsse::sign(PAYLOAD_TYPE, &bytes, key, &key_id)))
}

/// Verifies an authorisation for `grant` against the registered key at time `now`: the
/// signature over the PAE, every bound field, and the lifetime. Returns the payload.
pub fn verify(
    envelope: &Envelope,
    registered: &VerifyingKey,
    grant: &Grant,
    now: DateTime<Utc>,
) -> Result<Payload, AuthorisationError> {
    let key_id = keys::key_id(registered);
    let trusted = [TrustedKey {
        keyid: key_id.clone(),
        key: *registered,
    }];
    let bytes = dsse::verify_with(envelope, &[PAYLOAD_TYPE], &trusted, 1)
        .map_err(|e| AuthorisationError::Signature(e.to_string()))?;
    let p: Payload =
        serde_json::from_slice(&bytes).map_err(|e| AuthorisationError::Malformed(e.to_string()))?;
    let check = |field: &'static str, found: &str, expected: &str| {
        if found == expected {
            Ok(())
        } else {
            Err(AuthorisationError::Mismatch {
                field,
                found: found.to_string(),
                expected: expected.to_string(),
            })
        }
    };
    check("format", &p.format, FORMAT)?;
    check("approval", &p.approval, &grant.approval)?;
    check("intent", &p.intent, &grant.intent)?;
    check("revision", &p.revision, &grant.revision)?;
    check("identity", &p.identity, &grant.identity)?;
    check("key", &p.key_id, &key_id)?;
    check(
        "ledger head",
        &format!("{}:{}", p.ledger_head.seq, p.ledger_head.line_sha256),
        &format!(
            "{}:{}",
            grant.ledger_head.seq, grant.ledger_head.line_sha256
        ),
    )?;
    if p.nonce.len() != 64 || !p.nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AuthorisationError::Malformed(
            "the nonce is not 32 bytes of hex".into(),
        ));
    }
    let parse = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| AuthorisationError::Malformed(format!("time {s:?}: {e}")))
    };
    let minted = parse(&p.minted_at)?;
    let expires = parse(&p.expires_at)?;
    let skew = Duration::seconds(SKEW_SECS);
    if expires <= minted
        || expires - minted > Duration::seconds(LIFETIME_SECS)
        || minted > now + skew
    {
        return Err(AuthorisationError::BadLifetime {
            minted_at: p.minted_at.clone(),
            expires_at: p.expires_at.clone(),
        });
    }
    if now >= expires {
        return Err(AuthorisationError::Expired {
            expires_at: p.expires_at.clone(),
            now: at(now),
        });
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        Grant {
            approval: "apr-1".into(),
            intent: "int-0001".into(),
            revision: "a".repeat(40),
            identity: "candidate-identity-sha256/1 ff".into(),
            ledger_head: LedgerHead {
                seq: 9,
                line_sha256: "0".repeat(64),
            },
        }
    }

    #[test]
    fn minted_then_verified_and_every_binding_holds() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let (p, env) = mint(&grant(), &key).unwrap();
        assert_eq!(env.payload_type, PAYLOAD_TYPE);
        let now = Utc::now();
        assert_eq!(
            verify(&env, &key.verifying_key(), &grant(), now).unwrap(),
            p
        );
        // Another key, another revision, another head, later than the expiry.
        assert!(matches!(
            verify(&env, &other.verifying_key(), &grant(), now),
            Err(AuthorisationError::Signature(_))
        ));
        let mut g = grant();
        g.revision = "b".repeat(40);
        assert!(matches!(
            verify(&env, &key.verifying_key(), &g, now),
            Err(AuthorisationError::Mismatch {
                field: "revision",
                ..
            })
        ));
        let mut g = grant();
        g.ledger_head.seq = 10;
        assert!(matches!(
            verify(&env, &key.verifying_key(), &g, now),
            Err(AuthorisationError::Mismatch {
                field: "ledger head",
                ..
            })
        ));
        let later = now + Duration::seconds(LIFETIME_SECS + 1);
        assert!(matches!(
            verify(&env, &key.verifying_key(), &grant(), later),
            Err(AuthorisationError::Expired { .. })
        ));
        // Two mints never share a nonce.
        let (q, _) = mint(&grant(), &key).unwrap();
        assert_ne!(p.nonce, q.nonce);
        assert_eq!(p.nonce_sha256().len(), 64);
    }

    #[test]
    fn a_receipt_signature_cannot_stand_for_an_authorisation() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let (p, _) = mint(&grant(), &key).unwrap();
        let bytes = serde_json::to_vec(&p).unwrap();
        let kid = keys::key_id(&key.verifying_key());
        let env = dsse::sign(dsse::PAYLOAD_TYPE, &bytes, &key, &kid);
        assert!(matches!(
            verify(&env, &key.verifying_key(), &grant(), Utc::now()),
            Err(AuthorisationError::Signature(_))
        ));
    }
}
