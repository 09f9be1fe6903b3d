//! Signed key changes: every key after the first, and every revocation, is a statement signed
//! at the terminal by a key the server already trusts.
//!
//! The statement is a DSSE envelope of payload type [`PAYLOAD_TYPE`] (neither an
//! authorisation nor a receipt can stand for it, nor it for them), signed with a registered
//! publish key over the PAE. Its payload ([`Payload`], format [`FORMAT`]) names:
//!
//! - `action`: `add` (a new key), `revoke` (a registered key), or `replace` (both at once: how
//!   the last active key is retired);
//! - `add`: the new key's id and raw public key; `revoke`: the id of the key revoked;
//! - `signer`: the id of the key that signs;
//! - `generation`: the registry generation the change applies to. Every change advances it,
//!   so a signed change applies once: replayed, it names a generation that has passed;
//! - a 32-byte random `nonce`, `signed_at` and `expires_at` (at most [`LIFETIME_SECS`] apart).
//!
//! The server ([`apply`]) checks, under the registry lock, in this order: the signer is
//! registered and not revoked; the signature; the payload's shape; its lifetime; the
//! generation; then the change itself (no re-registration of a revoked key, nothing revoked
//! twice, never zero active keys afterwards). Only then is `data/keys.json` rewritten.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::dsse::{self, Envelope, TrustedKey};
use super::keys::{self, KeyError, RegisteredKey, Registry};
use crate::home::Home;

/// The DSSE payload type of a key change.
pub const PAYLOAD_TYPE: &str = "application/vnd.proctor.key-change+json";
/// The format name inside the payload.
pub const FORMAT: &str = "proctor-key-change/1";
/// How long a signed change lives.
pub const LIFETIME_SECS: i64 = 300;
/// Clock skew tolerated between the signing terminal and the server (one machine).
pub const SKEW_SECS: i64 = 5;

/// A key a change adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub key_id: String,
    /// The raw 32-byte Ed25519 public key, standard base64.
    pub public_key_b64: String,
}

/// What a key change says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub format: String,
    /// `add`, `revoke` or `replace`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Subject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoke: Option<String>,
    /// The id of the signing key.
    pub signer: String,
    /// The registry generation this change applies to.
    pub generation: u64,
    /// 32 random bytes, hex.
    pub nonce: String,
    pub signed_at: String,
    pub expires_at: String,
}

/// What the person asks for.
#[derive(Debug, Clone)]
pub struct Change {
    pub add: Option<VerifyingKey>,
    pub revoke: Option<String>,
}

impl Change {
    pub fn action(&self) -> &'static str {
        match (&self.add, &self.revoke) {
            (Some(_), Some(_)) => "replace",
            (None, Some(_)) => "revoke",
            _ => "add",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(
        "a publish key is already registered; this change must be signed at the terminal by a \
         registered key. Remedy: `proctor key register --path NEW --signed-by OLD`"
    )]
    Unsigned,
    #[error(
        "the change is signed by keyid={} {key_id}, which the server does not know. Remedy: \
         sign with a registered key (`proctor key show` lists yours, `GET /v1/m/authority/keys` \
         the server's)",
        keys::KEY_ID_RECIPE
    )]
    UnknownSigner { key_id: String },
    #[error(
        "the change is signed by keyid={} {key_id}, revoked at {revoked_at}; a revoked key \
         signs nothing new. Remedy: sign with a key that is still registered",
        keys::KEY_ID_RECIPE
    )]
    RevokedSigner { key_id: String, revoked_at: String },
    #[error("the change's signature does not verify against its signer: {0}")]
    BadSignature(String),
    #[error("the change is not well formed: {0}")]
    Malformed(String),
    #[error(
        "the change's lifetime ({signed_at} to {expires_at}) does not hold now ({now}). \
         Remedy: sign a fresh change (the CLI does, each time it runs)"
    )]
    Expired {
        signed_at: String,
        expires_at: String,
        now: String,
    },
    #[error(
        "the change was signed for registry generation {signed_for}, and the registry is at \
         {current}: it was applied already (a replay) or another change came first. Remedy: \
         run the command again; it signs for the current generation"
    )]
    Replayed { signed_for: u64, current: u64 },
    #[error(
        "keyid={} {key_id} was revoked at {revoked_at}; a revoked key is never registered \
         again. Remedy: generate a new key (`proctor key generate --path NEW --signed-by OLD`)",
        keys::KEY_ID_RECIPE
    )]
    SubjectRevoked { key_id: String, revoked_at: String },
    #[error("keyid={} {key_id} is already registered", keys::KEY_ID_RECIPE)]
    AlreadyRegistered { key_id: String },
    #[error(
        "keyid={} {key_id} is not a registered key (or was revoked already)",
        keys::KEY_ID_RECIPE
    )]
    NotRegistered { key_id: String },
    #[error(
        "revoking keyid={} {key_id} would leave no registered key, and the next key would then \
         be nobody's to sign. Remedy: `proctor key rotate` adds a new key and revokes this one \
         in one signed change",
        keys::KEY_ID_RECIPE
    )]
    LastKey { key_id: String },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("random bytes: {0}")]
    Random(String),
}

impl ChangeError {
    /// The API's code for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            ChangeError::Unsigned => "key_change_unsigned",
            ChangeError::UnknownSigner { .. } => "key_change_signer_unknown",
            ChangeError::RevokedSigner { .. } => "key_change_signer_revoked",
            ChangeError::BadSignature(_) => "key_change_bad_signature",
            ChangeError::Malformed(_) => "key_change_malformed",
            ChangeError::Expired { .. } => "key_change_expired",
            ChangeError::Replayed { .. } => "key_change_replayed",
            ChangeError::SubjectRevoked { .. } => "key_revoked",
            ChangeError::AlreadyRegistered { .. } => "key_already_registered",
            ChangeError::NotRegistered { .. } => "key_not_registered",
            ChangeError::LastKey { .. } => "last_key",
            ChangeError::Key(_) | ChangeError::Random(_) => "internal",
        }
    }

    /// The HTTP status of this refusal.
    pub fn status(&self) -> u16 {
        match self {
            ChangeError::Unsigned
            | ChangeError::UnknownSigner { .. }
            | ChangeError::RevokedSigner { .. }
            | ChangeError::BadSignature(_) => 403,
            ChangeError::Malformed(_) | ChangeError::Expired { .. } => 422,
            ChangeError::Replayed { .. }
            | ChangeError::SubjectRevoked { .. }
            | ChangeError::AlreadyRegistered { .. }
            | ChangeError::NotRegistered { .. }
            | ChangeError::LastKey { .. } => 409,
            ChangeError::Key(_) | ChangeError::Random(_) => 500,
        }
    }
}

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Signs `change` with `key` for registry `generation`, now.
pub fn sign(
    change: &Change,
    generation: u64,
    key: &SigningKey,
) -> Result<(Payload, Envelope), ChangeError> {
    let mut nonce = [0u8; 32];
    getrandom::fill(&mut nonce).map_err(|e| ChangeError::Random(e.to_string()))?;
    let now = Utc::now();
    let signer = keys::key_id(&key.verifying_key());
    let payload = Payload {
        format: FORMAT.to_string(),
        action: change.action().to_string(),
        add: change.add.as_ref().map(|k| {
            let info = keys::PublicInfo::of(k);
            Subject {
                key_id: info.key_id,
                public_key_b64: info.public_key_b64,
            }
        }),
        revoke: change.revoke.clone(),
        signer: signer.clone(),
        generation,
        nonce: hex::encode(nonce),
        signed_at: at(now),
        expires_at: at(now + Duration::seconds(LIFETIME_SECS)),
    };
    let bytes = serde_json::to_vec(&payload).map_err(|e| ChangeError::Malformed(e.to_string()))?;
    Ok((payload, dsse::sign(PAYLOAD_TYPE, &bytes, key, &signer)))
}

/// What a change did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub payload: Payload,
    /// SHA-256 (hex) of the signed payload's bytes: how the ledger names the change.
    pub payload_sha256: String,
    pub added: Option<RegisteredKey>,
    pub revoked: Option<RegisteredKey>,
    /// The registry's generation after the change.
    pub generation: u64,
}

/// The signer a change names, from its payload, before anything is trusted (for the
/// server's checks that run before [`apply`], such as the passphrase back-off).
pub fn claimed_signer(env: &Envelope) -> Option<String> {
    let bytes = env.payload_bytes().ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["signer"].as_str().map(str::to_string)
}

/// Verifies `env` against the registry and applies it (server side), under the registry lock.
/// `lock` is the server's registry lock; `by` is the token id of the caller.
pub fn apply(
    home: &Home,
    lock: &std::sync::Mutex<()>,
    env: &Envelope,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Applied, ChangeError> {
    keys::with_registry(home, lock, |reg| {
        let applied = check_and_apply(reg, env, by, now)?;
        Ok((applied, true))
    })
}

fn check_and_apply(
    reg: &mut Registry,
    env: &Envelope,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Applied, ChangeError> {
    // 1. The signer, by the id it claims: registered and not revoked.
    let claimed = claimed_signer(env)
        .ok_or_else(|| ChangeError::Malformed("the payload names no signer".into()))?;
    let signer = reg
        .find(&claimed)
        .cloned()
        .ok_or_else(|| ChangeError::UnknownSigner {
            key_id: claimed.clone(),
        })?;
    if let Some(revoked_at) = &signer.revoked_at {
        return Err(ChangeError::RevokedSigner {
            key_id: claimed,
            revoked_at: revoked_at.clone(),
        });
    }
    // 2. The signature, by that key, over the PAE.
    let trusted = [TrustedKey {
        keyid: signer.key_id.clone(),
        key: signer.verifying_key()?,
    }];
    let bytes = dsse::verify_with(env, &[PAYLOAD_TYPE], &trusted, 1)
        .map_err(|e| ChangeError::BadSignature(e.to_string()))?;
    // 3. The payload's shape.
    let p: Payload =
        serde_json::from_slice(&bytes).map_err(|e| ChangeError::Malformed(e.to_string()))?;
    if p.format != FORMAT {
        return Err(ChangeError::Malformed(format!(
            "format {:?}, expected {FORMAT:?}",
            p.format
        )));
    }
    let expected_action = match (&p.add, &p.revoke) {
        (Some(_), Some(_)) => "replace",
        (None, Some(_)) => "revoke",
        (Some(_), None) => "add",
        (None, None) => {
            return Err(ChangeError::Malformed(
                "the change neither adds nor revokes a key".into(),
            ));
        }
    };
    if p.action != expected_action {
        return Err(ChangeError::Malformed(format!(
            "action {:?} does not match what the change holds ({expected_action})",
            p.action
        )));
    }
    if p.nonce.len() != 64 || !p.nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ChangeError::Malformed(
            "the nonce is not 32 bytes of hex".into(),
        ));
    }
    let new_key = match &p.add {
        Some(s) => {
            let k = keys::verifying_key_from_b64(&s.public_key_b64)
                .map_err(|e| ChangeError::Malformed(format!("the added key: {e}")))?;
            if keys::key_id(&k) != s.key_id {
                return Err(ChangeError::Malformed(
                    "the added key's key_id does not match its public key".into(),
                ));
            }
            Some(k)
        }
        None => None,
    };
    // 4. Its lifetime.
    let parse = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| ChangeError::Malformed(format!("time {s:?}: {e}")))
    };
    let signed = parse(&p.signed_at)?;
    let expires = parse(&p.expires_at)?;
    if expires <= signed
        || expires - signed > Duration::seconds(LIFETIME_SECS)
        || signed > now + Duration::seconds(SKEW_SECS)
        || now >= expires
    {
        return Err(ChangeError::Expired {
            signed_at: p.signed_at.clone(),
            expires_at: p.expires_at.clone(),
            now: at(now),
        });
    }
    // 5. The generation: a change applies once.
    if p.generation != reg.generation {
        return Err(ChangeError::Replayed {
            signed_for: p.generation,
            current: reg.generation,
        });
    }
    // 6. The change itself.
    if let Some(k) = &new_key {
        let id = keys::key_id(k);
        if let Some(existing) = reg.find(&id) {
            return Err(match &existing.revoked_at {
                Some(r) => ChangeError::SubjectRevoked {
                    key_id: id,
                    revoked_at: r.clone(),
                },
                None => ChangeError::AlreadyRegistered { key_id: id },
            });
        }
    }
    if let Some(target) = &p.revoke {
        if !reg.active().any(|k| &k.key_id == target) {
            return Err(ChangeError::NotRegistered {
                key_id: target.clone(),
            });
        }
        let remaining = reg.active().filter(|k| &k.key_id != target).count();
        if remaining == 0 && new_key.is_none() {
            return Err(ChangeError::LastKey {
                key_id: target.clone(),
            });
        }
    }
    let stamp = at(now);
    let added = new_key.map(|k| {
        let mut r = Registry::record_for(&k, by, &stamp);
        r.signed_by = Some(p.signer.clone());
        reg.items.push(r.clone());
        r
    });
    let revoked = match &p.revoke {
        Some(target) => reg.items.iter_mut().find(|k| &k.key_id == target).map(|k| {
            k.revoked_at = Some(stamp.clone());
            k.revoked_signed_by = Some(p.signer.clone());
            k.clone()
        }),
        None => None,
    };
    reg.generation += 1;
    Ok(Applied {
        payload_sha256: hex::encode(Sha256::digest(&bytes)),
        payload: p,
        added,
        revoked,
        generation: reg.generation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    fn registry_with(k: &SigningKey) -> Registry {
        let mut reg = Registry::default();
        reg.items.push(Registry::record_for(
            &k.verifying_key(),
            "owner",
            "2026-01-01T00:00:00.000Z",
        ));
        reg.generation = 1;
        reg
    }

    fn add(k: &SigningKey) -> Change {
        Change {
            add: Some(k.verifying_key()),
            revoke: None,
        }
    }

    #[test]
    fn a_signed_add_applies_once_and_names_its_signer() {
        let (old, new) = (key(1), key(2));
        let mut reg = registry_with(&old);
        let (_, env) = sign(&add(&new), 1, &old).unwrap();
        let a = check_and_apply(&mut reg, &env, "owner", Utc::now()).unwrap();
        let added = a.added.unwrap();
        assert_eq!(added.key_id, keys::key_id(&new.verifying_key()));
        assert_eq!(
            added.signed_by.as_deref(),
            Some(keys::key_id(&old.verifying_key()).as_str())
        );
        assert_eq!(reg.generation, 2);
        let e = check_and_apply(&mut reg, &env, "owner", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "key_change_replayed", "{e}");
    }

    #[test]
    fn refusals_each_name_themselves() {
        let (old, new, stranger) = (key(1), key(2), key(3));
        let mut reg = registry_with(&old);
        // Signed by a key the registry does not hold.
        let (_, env) = sign(&add(&new), 1, &stranger).unwrap();
        let e = check_and_apply(&mut reg, &env, "o", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "key_change_signer_unknown");
        // Claims the registered signer but is signed by another key.
        let (p, _) = sign(&add(&new), 1, &old).unwrap();
        let forged = dsse::sign(
            PAYLOAD_TYPE,
            &serde_json::to_vec(&p).unwrap(),
            &stranger,
            &p.signer,
        );
        let e = check_and_apply(&mut reg, &forged, "o", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "key_change_bad_signature");
        // Expired.
        let (_, env) = sign(&add(&new), 1, &old).unwrap();
        let later = Utc::now() + Duration::seconds(LIFETIME_SECS + 1);
        let e = check_and_apply(&mut reg, &env, "o", later).unwrap_err();
        assert_eq!(e.code(), "key_change_expired");
        // The last key.
        let revoke_old = Change {
            add: None,
            revoke: Some(keys::key_id(&old.verifying_key())),
        };
        let (_, env) = sign(&revoke_old, 1, &old).unwrap();
        let e = check_and_apply(&mut reg, &env, "o", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "last_key");
        assert_eq!(reg.generation, 1, "nothing applied");
        // Replace: add and revoke at once; the revoked key then signs nothing.
        let replace = Change {
            add: Some(new.verifying_key()),
            revoke: Some(keys::key_id(&old.verifying_key())),
        };
        let (_, env) = sign(&replace, 1, &old).unwrap();
        let a = check_and_apply(&mut reg, &env, "o", Utc::now()).unwrap();
        assert!(a.revoked.unwrap().revoked_at.is_some());
        let (_, env) = sign(&add(&stranger), 2, &old).unwrap();
        let e = check_and_apply(&mut reg, &env, "o", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "key_change_signer_revoked");
        // A revoked key is never registered again.
        let (_, env) = sign(&add(&old), 2, &new).unwrap();
        let e = check_and_apply(&mut reg, &env, "o", Utc::now()).unwrap_err();
        assert_eq!(e.code(), "key_revoked");
    }
}
