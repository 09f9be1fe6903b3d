//! The back-off after wrong passphrases for a publish key, recorded by the server.
//!
//! Each wrong passphrase typed into proctor (`publish approve`, the cockpit's approval dialog,
//! `proctor key register|revoke|rotate`) is reported to the server, which counts it per key id
//! in `data/passphrase.json` and records `authority.passphrase.wrong` {key_id, attempt,
//! wait_ms, not_before} in the ledger. Before proctor shows a passphrase prompt it asks the
//! server for the key's record and waits until `not_before`; the wait comes from the server's
//! record, so restarting the client does not reset it. The server also refuses an
//! authorisation or a key change signed by that key before `not_before`.
//!
//! The wait after `n` wrong passphrases is [`wait_ms`]: none for the first
//! [`FREE_ATTEMPTS`], then the base (1 s by default, `proctor serve
//! --passphrase-backoff-ms`) doubling with each further one, capped at [`CAP_FACTOR`] times
//! the base (a minute by default).
//!
//! A right passphrase resets the count: the client proves it by signing
//! [`RIGHT_FORMAT`] {key_id, failures, last_wrong_at} with the key it just decrypted; the
//! server verifies that signature against the registered key and that the record it names is
//! the current one (a proof cannot be replayed over later failures).
//!
//! This bounds guesses made through proctor only. A process that can read `publish.p8` can
//! guess offline, bounded by nothing but scrypt's cost (N=2^17, r=8).

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::dsse::{self, Envelope, TrustedKey};
use super::keys::{self, KeyError};
use crate::files;
use crate::home::Home;

/// Wrong passphrases allowed before any wait.
pub const FREE_ATTEMPTS: u32 = 3;
/// The default base wait, in milliseconds.
pub const DEFAULT_BASE_MS: u64 = 1000;
/// The wait never exceeds this many times the base.
pub const CAP_FACTOR: u64 = 60;
/// The DSSE payload type of the proof of a right passphrase.
pub const RIGHT_PAYLOAD_TYPE: &str = "application/vnd.proctor.passphrase-right+json";
/// Its format name.
pub const RIGHT_FORMAT: &str = "proctor-passphrase-right/1";

/// The wait before the next prompt after `failures` wrong passphrases in a row.
pub fn wait_ms(failures: u32, base_ms: u64) -> u64 {
    if failures < FREE_ATTEMPTS {
        return 0;
    }
    let doublings = (failures - FREE_ATTEMPTS).min(32);
    let cap = base_ms.saturating_mul(CAP_FACTOR);
    base_ms.saturating_mul(1u64 << doublings).min(cap)
}

/// The record of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Wrong passphrases in a row.
    pub failures: u32,
    /// When the last one was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wrong_at: Option<String>,
    /// The wait that follows it.
    pub wait_ms: u64,
    /// No prompt before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
}

impl Record {
    /// How long is left to wait at `now`, in milliseconds.
    pub fn remaining_ms(&self, now: DateTime<Utc>) -> u64 {
        let Some(nb) = self
            .not_before
            .as_deref()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        else {
            return 0;
        };
        let left = nb.with_timezone(&Utc) - now;
        left.num_milliseconds().max(0) as u64
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PassphraseError {
    #[error(
        "keyid=sha256-spki-der/1 {0} is not a registered key; wrong passphrases are counted \
         only for keys the server knows"
    )]
    UnknownKey(String),
    #[error("the proof of a right passphrase does not hold: {0}")]
    BadProof(String),
    #[error(
        "the proof names {found} wrong passphrase(s), and the server's record has {current}: \
         it is not the current record. Remedy: type the passphrase again"
    )]
    StaleProof { found: u32, current: u32 },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("{path}: {reason}")]
    Malformed { path: PathBuf, reason: String },
}

/// `data/passphrase.json`.
pub fn state_path(home: &Home) -> PathBuf {
    home.data.join("passphrase.json")
}

type State = BTreeMap<String, Record>;

fn read_state(home: &Home) -> Result<State, PassphraseError> {
    let path = state_path(home);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| PassphraseError::Malformed {
            path,
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::new()),
        Err(err) => Err(KeyError::Io {
            op: "read",
            path,
            err,
        }
        .into()),
    }
}

fn write_state(home: &Home, st: &State) -> Result<(), PassphraseError> {
    let path = state_path(home);
    files::ensure_private_dir(&files::parent_of(&path)).map_err(KeyError::from)?;
    let bytes = serde_json::to_vec_pretty(st).map_err(|e| KeyError::Encode(e.to_string()))?;
    files::write_atomic(&path, &bytes).map_err(KeyError::from)?;
    Ok(())
}

fn registered_key(home: &Home, key_id: &str) -> Result<VerifyingKey, PassphraseError> {
    keys::read_registry(home)?
        .find(key_id)
        .ok_or_else(|| PassphraseError::UnknownKey(key_id.to_string()))?
        .verifying_key()
        .map_err(Into::into)
}

/// The record of `key_id` (an empty one when nothing was reported).
pub fn record(home: &Home, key_id: &str) -> Result<Record, PassphraseError> {
    Ok(read_state(home)?.remove(key_id).unwrap_or_default())
}

/// While `key_id` must still wait after wrong passphrases, the sentence that says so and
/// until when (nothing it signs is accepted before); `None` once the wait is over.
pub fn backoff_message(home: &Home, key_id: &str) -> Result<Option<String>, PassphraseError> {
    let r = record(home, key_id)?;
    let left = r.remaining_ms(Utc::now());
    if left == 0 {
        return Ok(None);
    }
    Ok(Some(format!(
        "keyid={} {key_id} had {} wrong passphrase(s) in a row; nothing it signs is accepted \
         before {} ({left} ms from now). Remedy: wait, then type the passphrase again",
        keys::KEY_ID_RECIPE,
        r.failures,
        r.not_before.as_deref().unwrap_or("?")
    )))
}

/// What the server says about one key's record (`GET /v1/m/authority/passphrase/{key_id}`,
/// and the answers of `…/wrong` and `…/right`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RecordView {
    pub key_id: String,
    /// Wrong passphrases in a row.
    pub failures: u32,
    pub last_wrong_at: Option<String>,
    /// The wait that follows the last one.
    pub wait_ms: u64,
    /// No prompt before this time.
    pub not_before: Option<String>,
    /// How long is left to wait now.
    pub remaining_ms: u64,
    pub free_attempts: u32,
    pub base_ms: u64,
    pub cap_ms: u64,
}

impl RecordView {
    /// The view of `r` at `now`, for a server whose first wait is `base_ms`.
    pub fn of(key_id: &str, r: &Record, base_ms: u64, now: DateTime<Utc>) -> RecordView {
        RecordView {
            key_id: key_id.to_string(),
            failures: r.failures,
            last_wrong_at: r.last_wrong_at.clone(),
            wait_ms: r.wait_ms,
            not_before: r.not_before.clone(),
            remaining_ms: r.remaining_ms(now),
            free_attempts: FREE_ATTEMPTS,
            base_ms,
            cap_ms: base_ms.saturating_mul(CAP_FACTOR),
        }
    }

    /// The record it shows (what a proof of the right passphrase names).
    pub fn record(&self) -> Record {
        Record {
            failures: self.failures,
            last_wrong_at: self.last_wrong_at.clone(),
            wait_ms: self.wait_ms,
            not_before: self.not_before.clone(),
        }
    }
}

/// Counts one more wrong passphrase for `key_id` at `now`; returns the new record. The caller
/// serialises the read-modify-write (the server holds its authority lock).
pub fn record_wrong(
    home: &Home,
    key_id: &str,
    base_ms: u64,
    now: DateTime<Utc>,
) -> Result<Record, PassphraseError> {
    registered_key(home, key_id)?;
    let mut st = read_state(home)?;
    let r = st.entry(key_id.to_string()).or_default();
    r.failures = r.failures.saturating_add(1);
    r.wait_ms = wait_ms(r.failures, base_ms);
    r.last_wrong_at = Some(at(now));
    r.not_before =
        Some(at(now
            + Duration::milliseconds(
                r.wait_ms.min(i64::MAX as u64) as i64
            )));
    let out = r.clone();
    write_state(home, &st)?;
    Ok(out)
}

/// What a client signs after a right passphrase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RightProof {
    pub format: String,
    pub key_id: String,
    /// The failures of the record it resets.
    pub failures: u32,
    #[serde(default)]
    pub last_wrong_at: Option<String>,
    pub signed_at: String,
}

/// Signs the proof that `key` was just decrypted, for the record `r`.
pub fn sign_right(key: &SigningKey, r: &Record) -> Envelope {
    let key_id = keys::key_id(&key.verifying_key());
    let p = RightProof {
        format: RIGHT_FORMAT.into(),
        key_id: key_id.clone(),
        failures: r.failures,
        last_wrong_at: r.last_wrong_at.clone(),
        signed_at: at(Utc::now()),
    };
    let bytes = serde_json::to_vec(&p).unwrap_or_default();
    dsse::sign(RIGHT_PAYLOAD_TYPE, &bytes, key, &key_id)
}

/// Resets `key_id`'s record after a verified proof; returns the failures it cleared. The
/// caller serialises (as for [`record_wrong`]).
pub fn record_right(home: &Home, key_id: &str, proof: &Envelope) -> Result<u32, PassphraseError> {
    let key = registered_key(home, key_id)?;
    let trusted = [TrustedKey {
        keyid: key_id.to_string(),
        key,
    }];
    let bytes = dsse::verify_with(proof, &[RIGHT_PAYLOAD_TYPE], &trusted, 1)
        .map_err(|e| PassphraseError::BadProof(e.to_string()))?;
    let p: RightProof =
        serde_json::from_slice(&bytes).map_err(|e| PassphraseError::BadProof(e.to_string()))?;
    if p.format != RIGHT_FORMAT || p.key_id != key_id {
        return Err(PassphraseError::BadProof(
            "the proof is for another format or key".into(),
        ));
    }
    let mut st = read_state(home)?;
    let current = st.get(key_id).cloned().unwrap_or_default();
    if current.failures != p.failures || current.last_wrong_at != p.last_wrong_at {
        return Err(PassphraseError::StaleProof {
            found: p.failures,
            current: current.failures,
        });
    }
    if st.remove(key_id).is_some() {
        write_state(home, &st)?;
    }
    Ok(current.failures)
}

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_start_after_three_double_and_are_capped() {
        let w: Vec<u64> = (0..12).map(|n| wait_ms(n, 1000)).collect();
        assert_eq!(
            w,
            [
                0, 0, 0, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000
            ]
        );
        assert_eq!(wait_ms(u32::MAX, 1000), 60000);
        assert_eq!(wait_ms(u32::MAX, u64::MAX), u64::MAX);
    }
}
