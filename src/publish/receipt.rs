//! The publication receipt: a DSSE envelope (payload type `application/vnd.in-toto+json`)
//! holding an in-toto Statement v1, written into the receipt file reserved before any
//! authority is spent.
//!
//! - subjects: the revision (`gitCommit`) and each changed file of the candidate (`sha256`,
//!   as the candidate identity bound them; names relative to `subject_root`, the worktree);
//! - predicate ([`PREDICATE_TYPE`]): the outcome (and the refusal, named), the intent, the
//!   candidate identity with its recipe, the commit recipe, the evidence the gate counted, the
//!   authorisation (nonce digest, minted, expiry and spent times, key id, ledger head), the
//!   ledger's fixed point, what was done (local ref, push, pull request) and what is not
//!   proven.
//!
//! The server writes each stage's statement unsigned (`signatures: []`) into the reserved
//! file as soon as it is known, so a client that dies still leaves a receipt; the person's
//! key then signs the same payload at the terminal (DSSE over the PAE, plus a detached
//! SSHSIG over the file bytes in `<file>.sig`), and the server replaces the file with the
//! signed envelope after checking that the payload is the one it wrote. A receipt of a
//! refusal that happened before the key was decrypted stays unsigned: no key was there to
//! sign it, and it grants nothing. Redacted receipts (every refusal) carry no secret and no
//! body text: they name the refusal.

use std::io::Read;
use std::path::Path;

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::adapter::Effects;
use super::intent::Intent;
use crate::authority::dsse::{self, Envelope};
use crate::authority::statement::{self, SUBJECT_ROOT_FIELD, Subject};
use crate::files::{self, FilesError};
use crate::ledger::{self, Ledger};

/// The predicate type of a publication receipt.
pub const PREDICATE_TYPE: &str = "urn:proctor:predicate:publish:v1";
/// The format name inside the predicate.
pub const FORMAT: &str = "proctor-publish-receipt/1";
/// The receipt kind given to [`crate::receipts::reserve`].
pub const KIND: &str = "publish";
/// The recipe of the ledger prefix a receipt binds.
pub const LEDGER_PREFIX_RECIPE: &str = "ledger-prefix-sha256/1";

/// What the receipt does not show. Always present, never shortened.
pub const NOT_PROVEN: [&str; 6] = [
    "the worker ran as the host user: it was not confined, and nothing here attests what it \
     did outside its worktree (network, secrets, other files)",
    "passing checks and this authorisation do not show that the change is correct; they \
     bind a person's decision to these exact bytes",
    "nothing was merged: proctor has no merge capability; a merge is a separate decision \
     taken on the forge",
    "a process that owns a pseudo-terminal can type like a person; the barrier is the \
     passphrase it does not know, not the terminal",
    "the push and the pull request used the credentials the server could reach; the \
     remote's and the forge's own access rules were not observed",
    "the forge's answer (pull request number and URL) is the forge's word, recorded as \
     received",
];

/// The ledger at one point: its fixed point and its last line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerPoint {
    pub format: String,
    pub recipe: String,
    pub bytes: u64,
    pub events: u64,
    pub sha256: String,
    /// SHA-256 (hex) of the last line's bytes (LF included): the ledger head.
    pub last_line_sha256: String,
}

/// The fixed point of the ledger's durable prefix: the first `ledger.len()` bytes, which end
/// on a line boundary and are exactly `events` lines.
pub fn ledger_point(ledger: &Ledger) -> Result<LedgerPoint, FilesError> {
    let path = ledger.path();
    let len = ledger.len();
    let f = files::open_private_read(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| FilesError::io("read", path, e))?;
    let events = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let last_start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let last_line = &bytes[last_start..];
    Ok(LedgerPoint {
        format: ledger::FIXED_POINT_FORMAT.to_string(),
        recipe: LEDGER_PREFIX_RECIPE.to_string(),
        bytes: bytes.len() as u64,
        events,
        sha256: hex::encode(Sha256::digest(&bytes)),
        last_line_sha256: hex::encode(Sha256::digest(last_line)),
    })
}

/// How an approval ended (or where it stands when the receipt is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Reserved, and nothing else recorded yet: what the file says if the client vanished.
    Incomplete,
    /// Refused before any effect.
    Refused,
    /// An authorisation was spent and the adapter stopped before the end.
    Failed,
    /// The three effects were done.
    Published,
}

/// A refusal, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub code: String,
    pub message: String,
}

/// The authorisation, as a receipt shows it (never the nonce itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthorisationView {
    pub nonce_sha256: String,
    pub key_id: String,
    pub key_id_recipe: String,
    pub ledger_head: super::authorisation::LedgerHead,
    pub minted_at: String,
    pub expires_at: String,
    /// The ledger seq of `publish.authorisation.minted`.
    pub minted_seq: u64,
    pub spent_at: Option<String>,
    /// The ledger seq of `publish.authorisation.spent`.
    pub spent_seq: Option<u64>,
}

/// Everything a receipt states.
pub struct Facts<'a> {
    pub receipt_id: &'a str,
    pub approval: &'a str,
    pub intent: &'a Intent,
    pub outcome: Outcome,
    pub refusal: Option<Refusal>,
    /// The candidate's changed files `(path, sha256)` as its identity bound them.
    pub files: Vec<(String, String)>,
    /// The evidence the gate counted, as it reported it.
    pub evidence: Value,
    pub authorisation: Option<AuthorisationView>,
    pub effects: Effects,
    pub ledger: LedgerPoint,
    pub written_at: String,
}

/// The in-toto statement of a receipt.
pub fn statement_of(f: &Facts<'_>) -> Value {
    let redacted = f.outcome != Outcome::Published;
    let i = f.intent;
    let mut subjects = vec![Subject::git_commit("revision", &i.revision)];
    subjects.extend(
        f.files
            .iter()
            .map(|(path, sha)| Subject::sha256(path.clone(), sha.clone())),
    );
    let predicate = json!({
        "format": FORMAT,
        "receipt": f.receipt_id,
        "written_at": f.written_at,
        "outcome": f.outcome,
        "redacted": redacted,
        "refusal": f.refusal,
        SUBJECT_ROOT_FIELD: i.worktree,
        "approval": f.approval,
        "intent": {
            "id": i.id,
            "run": i.run,
            "branch": i.branch,
            "remote": i.remote,
            "expected_tip": i.expected_tip,
            "title": i.title,
            // The body is agent text: a redacted receipt keeps only its digest.
            "body": if redacted { Value::Null } else { json!(i.body) },
            "body_sha256": hex::encode(Sha256::digest(i.body.as_bytes())),
            "forge": i.forge,
        },
        "candidate": {
            "id": i.candidate.id,
            "identity": {
                "recipe": i.candidate.recipe,
                "digest": i.candidate.digest,
                "base": i.candidate.base,
                "index_tree": i.candidate.index_tree,
                "worktree_tree": i.candidate.worktree_tree,
            },
        },
        "revision": {
            "id": i.revision,
            "recipe": "git-commit-tree/1",
            "commit": i.commit,
        },
        "evidence": f.evidence,
        "authorisation": f.authorisation,
        "ledger": f.ledger,
        "done": f.effects,
        "not_proven": NOT_PROVEN,
    });
    statement::statement(subjects, PREDICATE_TYPE, predicate)
}

/// The statement's payload bytes (compact JSON).
pub fn payload_of(statement: &Value) -> Vec<u8> {
    serde_json::to_vec(statement).unwrap_or_default()
}

/// An unsigned envelope of `payload`: what the server writes before the key signs.
pub fn unsigned(payload: &[u8]) -> Envelope {
    Envelope {
        payload_type: dsse::PAYLOAD_TYPE.to_string(),
        payload: base64::engine::general_purpose::STANDARD.encode(payload),
        signatures: Vec::new(),
    }
}

/// The exact bytes of a receipt file holding `envelope` (its SSHSIG covers these).
pub fn file_bytes(envelope: &Envelope) -> Vec<u8> {
    let mut b = envelope.to_json().into_bytes();
    b.push(b'\n');
    b
}

/// Replaces the receipt file's content (atomically, 0600).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), FilesError> {
    files::write_atomic(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_point_is_the_durable_prefix_and_its_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let (ledger, _) = Ledger::open(&path).unwrap();
        ledger.append("test.one", &serde_json::Map::new()).unwrap();
        ledger.append("test.two", &serde_json::Map::new()).unwrap();
        let p = ledger_point(&ledger).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(p.bytes, bytes.len() as u64);
        assert_eq!(p.events, 2);
        assert_eq!(p.sha256, hex::encode(Sha256::digest(&bytes)));
        let fp = ledger::fixed_point(&path).unwrap();
        assert_eq!(
            (fp.bytes, fp.events, fp.sha256),
            (p.bytes, p.events, p.sha256)
        );
        let last = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap();
        assert_eq!(
            p.last_line_sha256,
            hex::encode(Sha256::digest(&bytes[last + 1..]))
        );
    }
}
