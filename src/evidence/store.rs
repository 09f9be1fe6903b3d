//! Evidence entries: one file per attempt, `data/evidence/ev-NNNN.json` (canonical JSON),
//! with what it captured under `data/evidence/ev-NNNN/` (the policy text it ran, each
//! check's bounded stdout and stderr, the required artifacts). Entries are written once and
//! never rewritten: a later attempt is a new entry, and an entry for bytes or a policy that
//! changed stays in history as stale.

use std::io::Read;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Actor;
use crate::files::{self, FilesError};
use crate::home::Home;

/// The format of an evidence entry file.
pub const ENTRY_FORMAT: &str = "proctor-evidence/1";
/// The ledger kind recorded for each attempt.
pub const RECORDED_KIND: &str = "evidence.recorded";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("{0:?} is not an evidence id: give ev-0001")]
    BadId(String),
    #[error("the evidence file {path} is unreadable: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}

/// A digest with its recipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DigestRef {
    pub recipe: String,
    pub digest: String,
}

/// The policy an attempt ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = EvidencePolicy)]
pub struct PolicyRef {
    /// `policy-text-sha256/1`.
    pub recipe: String,
    pub digest: String,
    /// The workspace whose approved policy it was.
    pub workspace: String,
    /// The policy text as run, kept beside the entry (relative to the entry's folder).
    pub file: String,
}

/// A bounded capture of one output stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = CheckOutput)]
pub struct Output {
    /// The file that holds the kept bytes, relative to the entry's folder.
    pub file: String,
    /// Bytes kept (at most the check's `max_output_bytes`).
    pub bytes: u64,
    /// Bytes the stream carried in all (kept or not).
    pub observed_bytes: u64,
    /// SHA-256 of the kept bytes (`bytes-sha256/1`).
    pub sha256: String,
    pub recipe: String,
    /// More was written than kept.
    pub truncated: bool,
}

/// A required artifact as found after its check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = CheckArtifact)]
pub struct Artifact {
    pub path: String,
    /// A regular file was found at the path.
    pub present: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<String>,
    /// The copy kept beside the entry (relative to the entry's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// The path was already in the candidate's bytes before any check ran: the check did
    /// not necessarily produce it.
    pub present_before: bool,
    /// Why it does not count (missing, not a regular file, unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One command actually run, as observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckRecord {
    pub name: String,
    /// The argv of the policy, exactly as run (no shell).
    pub argv: Vec<String>,
    /// The program the first word resolved to, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    pub deadline_secs: u64,
    pub max_output_bytes: u64,
    /// The process started.
    pub started: bool,
    /// Why it could not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_error: Option<String>,
    /// The exit code the OS reported (absent when killed by a signal or never started).
    pub exit_code: Option<i32>,
    /// The signal that ended it, as the OS reported (`SIGKILL`).
    pub signal: Option<String>,
    pub duration_ms: u64,
    /// The deadline passed: its process group got SIGTERM, then SIGKILL after the grace.
    pub timed_out: bool,
    /// Processes of its group still alive after it exited were killed.
    pub stray_processes_killed: bool,
    pub stdout: Option<Output>,
    pub stderr: Option<Output>,
    pub artifacts: Vec<Artifact>,
    /// Exit code 0, in time, every required artifact present.
    pub passed: bool,
    /// Why it did not pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// The private copy the checks ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = CheckCheckout)]
pub struct Checkout {
    pub path: String,
    /// Its `candidate-inventory/1` digest before any check started: equal to the
    /// candidate's.
    pub inventory: DigestRef,
    pub verified: bool,
    /// Removed after the checks.
    pub removed: bool,
}

/// One evidence attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = EvidenceEntry)]
pub struct Entry {
    pub format: String,
    /// `ev-0001`.
    pub id: String,
    /// 1 for the candidate's first attempt, then 2, …
    pub attempt: u64,
    pub candidate: String,
    pub run_ref: String,
    /// The candidate identity judged (`candidate-identity-sha256/1`).
    pub identity: DigestRef,
    pub policy: PolicyRef,
    /// The caller that ran the checks.
    #[schema(value_type = Object)]
    pub checker: Actor,
    pub started_at: String,
    pub ended_at: String,
    pub checkout: Checkout,
    /// Names of the environment variables the checks got (values not recorded).
    pub env: Vec<String>,
    pub checks: Vec<CheckRecord>,
    /// `passed` when every check passed, else `failed`.
    pub result: String,
    /// The receipt written for the attempt.
    pub receipt: String,
}

impl Entry {
    pub fn passed(&self) -> bool {
        self.result == "passed"
    }
}

/// `data/evidence`.
pub fn evidence_dir(home: &Home) -> PathBuf {
    home.data.join("evidence")
}

/// `data/evidence/<id>.json`.
pub fn entry_path(home: &Home, id: &str) -> PathBuf {
    evidence_dir(home).join(format!("{id}.json"))
}

/// `data/evidence/<id>/`: the captured bytes.
pub fn entry_dir(home: &Home, id: &str) -> PathBuf {
    evidence_dir(home).join(id)
}

/// Reads entry `id`; `Ok(None)` when it does not exist.
pub fn load(home: &Home, id: &str) -> Result<Option<Entry>, StoreError> {
    if !super::valid_id(id, "ev-") {
        return Err(StoreError::BadId(id.to_string()));
    }
    let path = entry_path(home, id);
    let mut f = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| FilesError::io("read", &path, e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            path,
            detail: e.to_string(),
        })
}

/// Every entry, oldest first.
pub fn list(home: &Home) -> Result<Vec<Entry>, StoreError> {
    let dir = evidence_dir(home);
    let ids = super::numbered(&dir, "ev-", ".json")?;
    let mut out = Vec::with_capacity(ids.len());
    for (_, id) in ids {
        if let Some(e) = load(home, &id)? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Every entry of one candidate, oldest first.
pub fn for_candidate(home: &Home, candidate: &str) -> Result<Vec<Entry>, StoreError> {
    Ok(list(home)?
        .into_iter()
        .filter(|e| e.candidate == candidate)
        .collect())
}

/// Writes an entry once (canonical JSON and LF, 0600, atomically) and returns the SHA-256
/// of the bytes written.
pub fn write(home: &Home, entry: &Entry) -> Result<String, StoreError> {
    use sha2::{Digest, Sha256};
    let v = serde_json::to_value(entry).map_err(|e| StoreError::Corrupt {
        path: entry_path(home, &entry.id),
        detail: e.to_string(),
    })?;
    let mut bytes = crate::ledger::canonical::to_vec(&v).map_err(|e| StoreError::Corrupt {
        path: entry_path(home, &entry.id),
        detail: e.to_string(),
    })?;
    bytes.push(b'\n');
    files::write_atomic(&entry_path(home, &entry.id), &bytes)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}
