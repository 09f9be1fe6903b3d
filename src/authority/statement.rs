//! in-toto Statement v1 (https://in-toto.io/Statement/v1) and the verification of a receipt
//! file.
//!
//! A receipt is two files: `<name>` holds the DSSE envelope JSON (payloadType
//! `application/vnd.in-toto+json`, the statement as payload), and `<name>.sig` (the name
//! `ssh-keygen -Y sign` gives) holds the detached SSHSIG over the exact bytes of `<name>`.
//!
//! [`verify_receipt_file`] reports each check as holds / fails / unreachable:
//! - `envelope`: the file is a DSSE envelope;
//! - `payload_type`: it is `application/vnd.in-toto+json`;
//! - `signature`: a signature whose keyid names a trusted key verifies over the PAE;
//! - `sshsig`: the `.sig` beside it verifies over the envelope bytes in namespace
//!   `proctor-receipt` with that key (unreachable when the file is absent);
//! - `statement`: the payload is an in-toto Statement v1;
//! - one check per subject: a `sha256` digest is recomputed from the file when the predicate
//!   names a `subject_root` folder that holds it; a `gitCommit` digest holds when that
//!   object exists as a commit in the repository at `subject_root` (git names objects by
//!   their content, so existence is the check). Otherwise: unreachable, never assumed.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::dsse::{self, Envelope};
use super::keys::key_id;
use super::sshsig;

/// The statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate field naming the folder that subject names are relative to.
pub const SUBJECT_ROOT_FIELD: &str = "subject_root";
/// Largest receipt file read, in bytes.
const MAX_RECEIPT: u64 = 16 * 1024 * 1024;

/// One subject: a name and its digests (`gitCommit`, `sha256`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub name: String,
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    /// A commit, by its full object id.
    pub fn git_commit(name: impl Into<String>, commit: impl Into<String>) -> Subject {
        Subject {
            name: name.into(),
            digest: BTreeMap::from([("gitCommit".to_string(), commit.into())]),
        }
    }

    /// A file, by the SHA-256 (lowercase hex) of its bytes.
    pub fn sha256(name: impl Into<String>, hex: impl Into<String>) -> Subject {
        Subject {
            name: name.into(),
            digest: BTreeMap::from([("sha256".to_string(), hex.into())]),
        }
    }

    /// A file, hashing `bytes`.
    pub fn of_bytes(name: impl Into<String>, bytes: &[u8]) -> Subject {
        Subject::sha256(name, hex::encode(Sha256::digest(bytes)))
    }
}

/// An in-toto Statement v1.
pub fn statement(subjects: Vec<Subject>, predicate_type: &str, predicate: Value) -> Value {
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": predicate_type,
        "predicate": predicate,
    })
}

/// The SSHSIG path of a receipt: `<path>.sig`.
pub fn sig_path(receipt: &Path) -> PathBuf {
    let mut s = receipt.as_os_str().to_os_string();
    s.push(".sig");
    PathBuf::from(s)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Holds,
    Fails,
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `envelope`, `payload_type`, `signature`, `sshsig`, `statement`, or `subject <name>`.
    pub check: String,
    pub outcome: Outcome,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub path: PathBuf,
    /// The id of the trusted key that signed, when one did.
    pub key_id: Option<String>,
    pub checks: Vec<Check>,
    /// The verified statement (only when the signature holds).
    pub statement: Option<Value>,
}

impl VerifyReport {
    /// The receipt verifies: the envelope, payload type, signature, SSHSIG and statement
    /// hold and no check fails (subjects whose files cannot be reached are reported, not
    /// counted against it).
    pub fn ok(&self) -> bool {
        let essential = [
            "envelope",
            "payload_type",
            "signature",
            "sshsig",
            "statement",
        ];
        essential.iter().all(|name| {
            self.checks
                .iter()
                .any(|c| c.check == *name && c.outcome == Outcome::Holds)
        }) && self.checks.iter().all(|c| c.outcome != Outcome::Fails)
    }

    fn push(&mut self, check: impl Into<String>, outcome: Outcome, detail: impl Into<String>) {
        self.checks.push(Check {
            check: check.into(),
            outcome,
            detail: detail.into(),
        });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("cannot read the receipt {path}: {err}")]
    Read { path: PathBuf, err: std::io::Error },
    #[error("the receipt {path} is larger than {MAX_RECEIPT} bytes")]
    TooLarge { path: PathBuf },
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, std::io::Error> {
    let f = fs::File::open(path)?;
    let mut bytes = Vec::new();
    f.take(MAX_RECEIPT + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Verifies a receipt file (and its `.sig`) against the trusted keys; see the module doc.
pub fn verify_receipt_file(
    path: &Path,
    trusted: &[VerifyingKey],
) -> Result<VerifyReport, ReceiptError> {
    let bytes = read_bounded(path).map_err(|err| ReceiptError::Read {
        path: path.to_path_buf(),
        err,
    })?;
    if bytes.len() as u64 > MAX_RECEIPT {
        return Err(ReceiptError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let mut report = VerifyReport {
        path: path.to_path_buf(),
        key_id: None,
        checks: Vec::new(),
        statement: None,
    };
    let envelope = match Envelope::from_json(&bytes) {
        Ok(e) => {
            report.push("envelope", Outcome::Holds, "a DSSE envelope");
            e
        }
        Err(e) => {
            report.push("envelope", Outcome::Fails, e.to_string());
            return Ok(report);
        }
    };
    if envelope.payload_type == dsse::PAYLOAD_TYPE {
        report.push("payload_type", Outcome::Holds, dsse::PAYLOAD_TYPE);
    } else {
        report.push(
            "payload_type",
            Outcome::Fails,
            format!(
                "{:?}, expected {:?}",
                envelope.payload_type,
                dsse::PAYLOAD_TYPE
            ),
        );
    }

    // The signature: the trusted key each signature names.
    let named: Vec<&str> = envelope
        .signatures
        .iter()
        .filter_map(|s| s.keyid.as_deref())
        .collect();
    let mut signer = None;
    let mut payload = None;
    for key in trusted {
        let id = key_id(key);
        if !named.contains(&id.as_str()) {
            continue;
        }
        if let Ok(p) = dsse::verify(&envelope, key) {
            signer = Some((*key, id));
            payload = Some(p);
            break;
        }
    }
    match &signer {
        Some((_, id)) => {
            report.push(
                "signature",
                Outcome::Holds,
                format!("Ed25519 over the PAE by keyid=sha256-spki-der/1 {id}"),
            );
            report.key_id = Some(id.clone());
        }
        None => {
            let why = if named.is_empty() {
                "no signature names a keyid".to_string()
            } else if trusted.iter().any(|k| named.contains(&key_id(k).as_str())) {
                "the signature by the trusted key does not verify over the PAE".to_string()
            } else {
                format!("no trusted key has keyid {}", named.join(", "))
            };
            report.push("signature", Outcome::Fails, why);
        }
    }

    // The detached SSHSIG over the exact envelope bytes.
    let sig_file = sig_path(path);
    match (read_bounded(&sig_file), &signer) {
        (Err(e), _) => report.push(
            "sshsig",
            Outcome::Unreachable,
            format!("{}: {e}", sig_file.display()),
        ),
        (Ok(_), None) => report.push(
            "sshsig",
            Outcome::Fails,
            "no trusted signer to check it against",
        ),
        (Ok(sig), Some((key, _))) => {
            let armored = String::from_utf8_lossy(&sig);
            match sshsig::verify(&armored, &bytes, key) {
                Ok(()) => report.push(
                    "sshsig",
                    Outcome::Holds,
                    format!("namespace {}", sshsig::NAMESPACE),
                ),
                Err(e) => report.push("sshsig", Outcome::Fails, e.to_string()),
            }
        }
    }

    // The statement and its subjects: only from a verified payload.
    let Some(payload) = payload else {
        report.push(
            "statement",
            Outcome::Unreachable,
            "the payload is not trusted (its signature does not hold)",
        );
        return Ok(report);
    };
    let statement: Value = match serde_json::from_slice(&payload) {
        Ok(v) => v,
        Err(e) => {
            report.push("statement", Outcome::Fails, format!("not JSON: {e}"));
            return Ok(report);
        }
    };
    if statement["_type"] != STATEMENT_TYPE {
        report.push(
            "statement",
            Outcome::Fails,
            format!("_type is {}, expected {STATEMENT_TYPE}", statement["_type"]),
        );
        return Ok(report);
    }
    let subjects: Vec<Subject> = match serde_json::from_value(statement["subject"].clone()) {
        Ok(s) => s,
        Err(e) => {
            report.push(
                "statement",
                Outcome::Fails,
                format!("bad subject list: {e}"),
            );
            return Ok(report);
        }
    };
    report.push(
        "statement",
        Outcome::Holds,
        format!(
            "in-toto Statement v1, predicateType {}",
            statement["predicateType"].as_str().unwrap_or("?")
        ),
    );
    let root = statement["predicate"][SUBJECT_ROOT_FIELD]
        .as_str()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir());
    for s in &subjects {
        let (outcome, detail) = check_subject(s, root.as_deref());
        report.push(format!("subject {}", s.name), outcome, detail);
    }
    report.statement = Some(statement);
    Ok(report)
}

/// A subject name that stays inside its root: relative, no `..`, no empty name.
fn safe_relative(name: &str) -> Option<&Path> {
    let p = Path::new(name);
    let ok = !name.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
    ok.then_some(p)
}

fn check_subject(s: &Subject, root: Option<&Path>) -> (Outcome, String) {
    if let Some(want) = s.digest.get("sha256") {
        let Some(root) = root else {
            return (
                Outcome::Unreachable,
                "no subject_root in the predicate to find the file in".into(),
            );
        };
        let Some(rel) = safe_relative(&s.name) else {
            return (
                Outcome::Fails,
                "the name leaves the subject root (absolute or ..)".into(),
            );
        };
        let file = root.join(rel);
        return match fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() => match read_bounded(&file) {
                Ok(bytes) => {
                    let got = hex::encode(Sha256::digest(&bytes));
                    if got.eq_ignore_ascii_case(want) {
                        (Outcome::Holds, format!("sha256 {got}"))
                    } else {
                        (
                            Outcome::Fails,
                            format!("sha256 is now {got}, the receipt says {want}"),
                        )
                    }
                }
                Err(e) => (Outcome::Unreachable, format!("{}: {e}", file.display())),
            },
            Ok(_) => (
                Outcome::Unreachable,
                format!("{} is not a regular file", file.display()),
            ),
            Err(e) => (Outcome::Unreachable, format!("{}: {e}", file.display())),
        };
    }
    if let Some(commit) = s.digest.get("gitCommit") {
        let Some(root) = root else {
            return (
                Outcome::Unreachable,
                "no subject_root in the predicate to find the repository in".into(),
            );
        };
        if commit.len() < 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (
                Outcome::Fails,
                format!("{commit:?} is not a full object id"),
            );
        }
        let spec = format!("{commit}^{{commit}}");
        return match crate::git::Git::new(root).text(&["rev-parse", "--verify", "--quiet", &spec]) {
            Ok(found) if found.trim().eq_ignore_ascii_case(commit) => (
                Outcome::Holds,
                format!("commit {commit} exists in {}", root.display()),
            ),
            _ => (
                Outcome::Unreachable,
                format!(
                    "commit {commit} is not in the repository at {}",
                    root.display()
                ),
            ),
        };
    }
    (
        Outcome::Unreachable,
        format!(
            "no digest this verifier can recompute ({})",
            s.digest.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    )
}
