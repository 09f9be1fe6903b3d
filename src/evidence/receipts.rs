//! Receipts: one canonical JSON file per bound candidate and per evidence attempt, binding
//! every digest that names what happened (each with its recipe) and the ledger's fixed
//! point at that moment. `verify` recomputes every digest it can reach and says, for each,
//! whether it holds, differs or is unreachable.
//!
//! Receipts are `data/receipts/rcpt-NNNN.json` (0600), reserved with O_EXCL before they are
//! written, so two never share a name and a reserved path is never written through a
//! planted file. The format is in `docs/evidence.md` ("Receipts"). Signed receipts (DSSE
//! envelopes, issue 6) are recognised by [`classify`] and handed to their own verifier.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::candidate::{self, Candidate, IDENTITY_RECIPE};
use crate::evidence::store::Entry;
use crate::evidence::{self, BYTES_RECIPE, policy::POLICY_DIGEST_RECIPE};
use crate::files::{self, FilesError};
use crate::git::Git;
use crate::home::Home;
use crate::ledger::{self, FixedPoint, Ledger};

/// The format of a receipt file.
pub const FORMAT: &str = "proctor-receipt/1";
/// The kind of the receipt written when a candidate is bound.
pub const KIND_CANDIDATE: &str = "candidate.bound";
/// The kind of the receipt written for each evidence attempt.
pub const KIND_EVIDENCE: &str = "evidence.attempt";
/// The recipe of a ledger prefix: SHA-256 of the first `bytes` bytes of the ledger file,
/// which hold `events` complete lines.
pub const LEDGER_PREFIX_RECIPE: &str = "ledger-prefix-sha256/1";

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error("{path} is not a receipt: {detail}")]
    NotAReceipt { path: String, detail: String },
    #[error("{0}")]
    Internal(String),
}

/// `data/receipts`: one file per receipt.
pub fn receipts_dir(home: &Home) -> PathBuf {
    home.data.join("receipts")
}

/// Reserves the next receipt id: creates `data/receipts/rcpt-NNNN.json` empty, O_EXCL,
/// 0600. `kind` is what the caller will write there (checked to be a plain name).
pub fn reserve(home: &Home, kind: &str) -> Result<(String, PathBuf), ReceiptError> {
    if kind.is_empty()
        || !kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    {
        return Err(ReceiptError::Internal(format!(
            "{kind:?} is not a receipt kind"
        )));
    }
    Ok(evidence::reserve_numbered(
        &receipts_dir(home),
        "rcpt-",
        ".json",
    )?)
}

/// What verify recomputes for one digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// The identity document stored in a candidate's file (its digest recomputed from the
    /// stored document).
    CandidateDocument { candidate: String },
    /// The identity of the candidate's worktree, recomputed now from the disk.
    Worktree { candidate: String },
    /// A file's exact bytes; `path` is relative to the home's data folder.
    File { path: String },
    /// A git object that must exist in `repo` with this type (git addresses objects by the
    /// hash of their content).
    GitObject { repo: String, object_type: String },
}

/// One digest a receipt binds, with its recipe and where verify finds its bytes again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub name: String,
    pub recipe: String,
    pub digest: String,
    pub source: Source,
}

/// The ledger's fixed point when the receipt was written, and the event that records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerPoint {
    /// `proctor-ledger-fixed-point/1`.
    pub format: String,
    /// [`LEDGER_PREFIX_RECIPE`].
    pub recipe: String,
    pub bytes: u64,
    pub events: u64,
    pub sha256: String,
    /// The seq of the event that records this receipt, and its kind.
    pub event_seq: u64,
    pub event_kind: String,
}

/// A plain (unsigned) receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub format: String,
    pub id: String,
    pub kind: String,
    pub subject: String,
    pub at: String,
    pub digests: Vec<Binding>,
    pub ledger: LedgerPoint,
    /// Kind-specific facts (run, attempt, result), for the reader.
    #[serde(default)]
    pub facts: Value,
}

/// The fixed point of the ledger's complete lines now (a line being appended is not
/// counted).
pub fn ledger_prefix(path: &Path) -> Result<FixedPoint, ReceiptError> {
    let mut f = files::open_private_read(path)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| FilesError::io("read", path, e))?;
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let prefix = &bytes[..end];
    Ok(FixedPoint {
        format: ledger::FIXED_POINT_FORMAT.to_string(),
        bytes: end as u64,
        events: prefix.iter().filter(|&&b| b == b'\n').count() as u64,
        sha256: hex::encode(Sha256::digest(prefix)),
    })
}

fn write_reserved(path: &Path, receipt: &Receipt) -> Result<(), ReceiptError> {
    let v = serde_json::to_value(receipt).map_err(|e| ReceiptError::Internal(e.to_string()))?;
    let mut bytes =
        ledger::canonical::to_vec(&v).map_err(|e| ReceiptError::Internal(e.to_string()))?;
    bytes.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FilesError::io("open the reserved receipt", path, e))?;
    let meta = f
        .metadata()
        .map_err(|e| FilesError::io("inspect", path, e))?;
    if !meta.is_file() || meta.len() != 0 {
        return Err(ReceiptError::Internal(format!(
            "the reserved receipt {} is no longer the empty file that was reserved",
            path.display()
        )));
    }
    f.write_all(&bytes)
        .map_err(|e| FilesError::io("write", path, e))?;
    f.sync_all().map_err(|e| FilesError::io("fsync", path, e))?;
    files::fsync_dir(&files::parent_of(path))?;
    Ok(())
}

fn point(ledger: &Ledger, seq: u64, kind: &str) -> Result<LedgerPoint, ReceiptError> {
    let fp = ledger_prefix(ledger.path())?;
    Ok(LedgerPoint {
        format: fp.format,
        recipe: LEDGER_PREFIX_RECIPE.to_string(),
        bytes: fp.bytes,
        events: fp.events,
        sha256: fp.sha256,
        event_seq: seq,
        event_kind: kind.to_string(),
    })
}

/// The path of `p` relative to the home's data folder, as a receipt stores it.
fn rel(home: &Home, p: &Path) -> String {
    p.strip_prefix(&home.data)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

fn identity_bindings(cand: &Candidate) -> Vec<Binding> {
    vec![
        Binding {
            name: "identity".into(),
            recipe: IDENTITY_RECIPE.into(),
            digest: cand.identity.digest.clone(),
            source: Source::CandidateDocument {
                candidate: cand.id.clone(),
            },
        },
        Binding {
            name: "worktree".into(),
            recipe: IDENTITY_RECIPE.into(),
            digest: cand.identity.digest.clone(),
            source: Source::Worktree {
                candidate: cand.id.clone(),
            },
        },
    ]
}

/// Writes the receipt of a bound candidate into its reserved file.
pub fn write_candidate_receipt(
    home: &Home,
    ledger: &Ledger,
    id: &str,
    path: &Path,
    cand: &Candidate,
    seq: u64,
) -> Result<Receipt, ReceiptError> {
    let dir = cand.dir(home);
    let git_id = format!("git-object-id/{}", cand.identity.object_format);
    let mut digests = identity_bindings(cand);
    digests.extend([
        Binding {
            name: "status".into(),
            recipe: BYTES_RECIPE.into(),
            digest: cand.identity.status.sha256.clone(),
            source: Source::File {
                path: rel(home, &dir.join("status.bin")),
            },
        },
        Binding {
            name: "patch".into(),
            recipe: BYTES_RECIPE.into(),
            digest: cand.identity.patch.sha256.clone(),
            source: Source::File {
                path: rel(home, &dir.join("patch.bin")),
            },
        },
        Binding {
            name: "base".into(),
            recipe: git_id.clone(),
            digest: cand.identity.base.clone(),
            source: Source::GitObject {
                repo: cand.repo.clone(),
                object_type: "commit".into(),
            },
        },
        Binding {
            name: "worktree_tree".into(),
            recipe: git_id,
            digest: cand.identity.worktree_tree.clone(),
            source: Source::GitObject {
                repo: cand.repo.clone(),
                object_type: "tree".into(),
            },
        },
    ]);
    let receipt = Receipt {
        format: FORMAT.into(),
        id: id.into(),
        kind: KIND_CANDIDATE.into(),
        subject: cand.id.clone(),
        at: ledger::now_at(),
        digests,
        ledger: point(ledger, seq, candidate::BOUND_KIND)?,
        facts: serde_json::json!({
            "run": cand.run_ref,
            "boundary": run_boundary(home, &cand.run_ref),
            "worktree": cand.worktree,
            "branch": cand.branch,
            "inventory": cand.identity.inventory,
            "files": cand.identity.files.len(),
        }),
    };
    write_reserved(path, &receipt)?;
    Ok(receipt)
}

/// What a run on the host ran behind (the sessions' `RunBoundary` default says it with these
/// words).
pub const HOST_BOUNDARY: &str = "host user: not confined (the provider runs as the server's \
     user, with its files, network and credentials)";

/// The boundary the run's provider process ran behind, as its record names it
/// (`data/runs/<ref>/run.json`'s `boundary`, the sessions' `RunBoundary`; read as JSON, since
/// the sessions use the evidence through the workspaces). A record without one is a run on
/// the host: not confined.
fn run_boundary(home: &Home, run_ref: &str) -> Value {
    let host = serde_json::json!({"kind": "host", "rig": null, "detail": HOST_BOUNDARY});
    if !files::valid_id(run_ref, "run-") {
        return host;
    }
    std::fs::read(home.data.join("runs").join(run_ref).join("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("boundary").cloned())
        .filter(Value::is_object)
        .unwrap_or(host)
}

/// Writes the receipt of an evidence attempt into its reserved file.
#[allow(clippy::too_many_arguments)]
pub fn write_evidence_receipt(
    home: &Home,
    ledger: &Ledger,
    id: &str,
    path: &Path,
    cand: &Candidate,
    entry: &Entry,
    entry_sha256: &str,
    seq: u64,
) -> Result<Receipt, ReceiptError> {
    let ev_dir = evidence::store::entry_dir(home, &entry.id);
    let mut digests = identity_bindings(cand);
    digests.push(Binding {
        name: "policy".into(),
        recipe: POLICY_DIGEST_RECIPE.into(),
        digest: entry.policy.digest.clone(),
        source: Source::File {
            path: rel(home, &ev_dir.join("policy.toml")),
        },
    });
    digests.push(Binding {
        name: "entry".into(),
        recipe: BYTES_RECIPE.into(),
        digest: entry_sha256.to_string(),
        source: Source::File {
            path: rel(home, &evidence::store::entry_path(home, &entry.id)),
        },
    });
    for c in &entry.checks {
        for (stream, out) in [("stdout", &c.stdout), ("stderr", &c.stderr)] {
            if let Some(out) = out {
                digests.push(Binding {
                    name: format!("check.{}.{stream}", c.name),
                    recipe: BYTES_RECIPE.into(),
                    digest: out.sha256.clone(),
                    source: Source::File {
                        path: rel(home, &ev_dir.join(&out.file)),
                    },
                });
            }
        }
        for a in &c.artifacts {
            if let (Some(sha), Some(kept)) = (&a.sha256, &a.kept) {
                digests.push(Binding {
                    name: format!("check.{}.artifact.{}", c.name, a.path),
                    recipe: BYTES_RECIPE.into(),
                    digest: sha.clone(),
                    source: Source::File {
                        path: rel(home, &ev_dir.join(kept)),
                    },
                });
            }
        }
    }
    let receipt = Receipt {
        format: FORMAT.into(),
        id: id.into(),
        kind: KIND_EVIDENCE.into(),
        subject: entry.id.clone(),
        at: ledger::now_at(),
        digests,
        ledger: point(ledger, seq, evidence::store::RECORDED_KIND)?,
        facts: serde_json::json!({
            "candidate": cand.id,
            "run": cand.run_ref,
            "boundary": run_boundary(home, &cand.run_ref),
            "attempt": entry.attempt,
            "result": entry.result,
            "checker": entry.checker,
            "checks": entry.checks.iter().map(|c| serde_json::json!({
                "name": c.name, "passed": c.passed, "exit_code": c.exit_code,
                "signal": c.signal, "timed_out": c.timed_out,
            })).collect::<Vec<_>>(),
        }),
    };
    write_reserved(path, &receipt)?;
    Ok(receipt)
}

/// One line of `receipt list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ReceiptItem)]
pub struct Listed {
    pub id: String,
    /// Absent for a reserved receipt that was never written (or is unreadable).
    pub kind: Option<String>,
    pub subject: Option<String>,
    pub at: Option<String>,
    /// The file, absolute.
    #[serde(default)]
    pub file: String,
    /// Why the file could not be read as a receipt (`null` when it could).
    pub problem: Option<String>,
}

/// Every receipt file, oldest first.
pub fn list(home: &Home) -> Result<Vec<Listed>, ReceiptError> {
    let dir = receipts_dir(home);
    let ids = evidence::numbered(&dir, "rcpt-", ".json")?;
    Ok(ids
        .into_iter()
        .map(|(_, id)| {
            let file = dir.join(format!("{id}.json"));
            let mut l = Listed {
                id,
                kind: None,
                subject: None,
                at: None,
                file: file.to_string_lossy().into_owned(),
                problem: None,
            };
            match read_bytes(&file).and_then(|b| classify(&file, &b)) {
                Ok(Form::Plain(r)) => {
                    l.kind = Some(r.kind);
                    l.subject = Some(r.subject);
                    l.at = Some(r.at);
                }
                Ok(Form::Envelope(v)) => {
                    l.kind = Some("signed".into());
                    l.problem = v
                        .get("payloadType")
                        .and_then(Value::as_str)
                        .map(|t| format!("DSSE envelope ({t})"));
                }
                Err(e) => l.problem = Some(e.to_string()),
            }
            l
        })
        .collect())
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, ReceiptError> {
    let mut f = files::open_private_read(path)?;
    let mut b = Vec::new();
    f.read_to_end(&mut b)
        .map_err(|e| FilesError::io("read", path, e))?;
    Ok(b)
}

/// A receipt file's form.
#[derive(Debug, Clone)]
pub enum Form {
    Plain(Box<Receipt>),
    /// A DSSE envelope (`payloadType`, `payload`, `signatures`): a signed receipt.
    Envelope(Value),
}

/// Tells a plain receipt from a signed one (a DSSE envelope).
pub fn classify(path: &Path, bytes: &[u8]) -> Result<Form, ReceiptError> {
    let shown = || path.to_string_lossy().into_owned();
    if bytes.is_empty() {
        return Err(ReceiptError::NotAReceipt {
            path: shown(),
            detail: "empty: reserved, never written".into(),
        });
    }
    let v: Value = serde_json::from_slice(bytes).map_err(|e| ReceiptError::NotAReceipt {
        path: shown(),
        detail: format!("not JSON: {e}"),
    })?;
    if v.get("payloadType").is_some() && v.get("signatures").is_some() {
        return Ok(Form::Envelope(v));
    }
    if v.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(ReceiptError::NotAReceipt {
            path: shown(),
            detail: format!("its format is not {FORMAT}"),
        });
    }
    serde_json::from_value(v)
        .map(|r| Form::Plain(Box::new(r)))
        .map_err(|e| ReceiptError::NotAReceipt {
            path: shown(),
            detail: e.to_string(),
        })
}

/// The verdict on one recomputed digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Holds {
    Holds,
    Differs,
    Unreachable,
}

impl Holds {
    pub fn as_str(self) -> &'static str {
        match self {
            Holds::Holds => "holds",
            Holds::Differs => "differs",
            Holds::Unreachable => "unreachable",
        }
    }
}

/// One recomputation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ReceiptCheck)]
pub struct Check {
    pub name: String,
    pub recipe: String,
    /// The digest the receipt states.
    pub expected: String,
    /// The digest recomputed now, when one could be.
    pub found: Option<String>,
    pub state: Holds,
    pub detail: String,
}

/// What verify found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ReceiptReport)]
pub struct Report {
    pub file: String,
    pub id: String,
    pub kind: String,
    pub subject: String,
    pub at: String,
    pub checks: Vec<Check>,
    /// No check differs (unreachable ones are listed, not counted as holding).
    pub ok: bool,
}

/// Verifies a receipt file against the home's files: dispatches on its form.
pub fn verify_file(home: &Home, path: &Path) -> Result<Report, ReceiptError> {
    let bytes = read_bytes(path)?;
    match classify(path, &bytes)? {
        Form::Plain(r) => Ok(verify_plain(home, path, &bytes, &r)),
        Form::Envelope(_) => Ok(verify_envelope(home, path)),
    }
}

/// Verifies a signed receipt (a DSSE envelope and its detached SSHSIG, issue 6) with the
/// keys this home's server trusts, then the ledger prefix its statement binds.
pub fn verify_envelope(home: &Home, path: &Path) -> Report {
    use crate::authority::statement::{self, Outcome};
    let mut checks = Vec::new();
    // Every key the registry ever held, revoked ones included: a revocation stops a key
    // signing anything new, not the receipts it signed before (the standing is reported).
    let all = match crate::authority::keys::receipt_keys(home) {
        Ok(k) => k,
        Err(e) => {
            checks.push(Check {
                name: "trusted keys".into(),
                recipe: String::new(),
                expected: "the publish keys registered with this home".into(),
                found: None,
                state: Holds::Unreachable,
                detail: e.to_string(),
            });
            Vec::new()
        }
    };
    let trusted: Vec<_> = all.iter().map(|(k, _)| *k).collect();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut report = Report {
        file: path.to_string_lossy().into_owned(),
        id: stem,
        kind: "publication".into(),
        subject: String::new(),
        at: String::new(),
        checks: Vec::new(),
        ok: false,
    };
    let k = match statement::verify_receipt_file(path, &trusted) {
        Ok(k) => k,
        Err(e) => {
            checks.push(Check {
                name: "envelope".into(),
                recipe: String::new(),
                expected: "a readable DSSE envelope".into(),
                found: None,
                state: Holds::Differs,
                detail: e.to_string(),
            });
            report.checks = checks;
            return report;
        }
    };
    let signed_ok = k.ok();
    for c in &k.checks {
        let recipe = match c.check.as_str() {
            "signature" => "dsse-v1-pae-ed25519",
            "sshsig" => "sshsig-ed25519-sha512",
            "payload_type" => "dsse-payload-type",
            _ if c.check.starts_with("subject") => "sha256 | gitCommit",
            _ => "",
        };
        checks.push(Check {
            name: c.check.clone(),
            recipe: recipe.into(),
            expected: match c.check.as_str() {
                "signature" | "sshsig" => k
                    .key_id
                    .as_ref()
                    .map(|id| format!("keyid=sha256-spki-der/1 {id}"))
                    .unwrap_or_else(|| "a key this home trusts".into()),
                _ => String::new(),
            },
            found: None,
            state: match c.outcome {
                Outcome::Holds => Holds::Holds,
                Outcome::Fails => Holds::Differs,
                Outcome::Unreachable => Holds::Unreachable,
            },
            detail: c.detail.clone(),
        });
    }
    // A key revoked since: the receipt was signed while it was registered only if its
    // statement was written before the revocation.
    if let Some(rec) = k
        .key_id
        .as_ref()
        .and_then(|id| all.iter().find(|(_, r)| &r.key_id == id))
        .map(|(_, r)| r)
        .filter(|r| r.revoked_at.is_some())
    {
        let revoked_at = rec.revoked_at.clone().unwrap_or_default();
        let written = k
            .statement
            .as_ref()
            .and_then(|st| st["predicate"]["written_at"].as_str())
            .unwrap_or_default()
            .to_string();
        let before = !written.is_empty() && written < revoked_at;
        checks.push(Check {
            name: "key standing".into(),
            recipe: String::new(),
            expected: format!("written before the key's revocation at {revoked_at}"),
            found: Some(written.clone()),
            state: if before { Holds::Holds } else { Holds::Differs },
            detail: format!(
                "keyid=sha256-spki-der/1 {} was revoked at {revoked_at} (signed by {}); this \
                 receipt was written at {}",
                rec.key_id,
                rec.revoked_signed_by.as_deref().unwrap_or("?"),
                if written.is_empty() {
                    "an unknown time"
                } else {
                    &written
                }
            ),
        });
    }
    // The statement is believed only once the signature holds.
    if let Some(st) = k.statement.as_ref().filter(|_| signed_ok) {
        let p = &st["predicate"];
        report.kind = format!("publication.{}", p["outcome"].as_str().unwrap_or("unknown"));
        report.subject = p["intent"]["id"].as_str().unwrap_or_default().to_string();
        report.at = p["written_at"].as_str().unwrap_or_default().to_string();
        if let Some(id) = p["receipt"].as_str() {
            report.id = id.to_string();
        }
        checks.push(verify_ledger_point(home, &p["ledger"]));
    }
    report.ok = signed_ok && checks.iter().all(|c| c.state != Holds::Differs);
    report.checks = checks;
    report
}

/// Recomputes the ledger prefix a signed receipt's statement names (`{recipe, bytes, events,
/// sha256}`).
fn verify_ledger_point(home: &Home, l: &Value) -> Check {
    let (Some(bytes), Some(events), Some(sha)) = (
        l["bytes"].as_u64(),
        l["events"].as_u64(),
        l["sha256"].as_str(),
    ) else {
        return Check {
            name: "ledger".into(),
            recipe: LEDGER_PREFIX_RECIPE.into(),
            expected: String::new(),
            found: None,
            state: Holds::Differs,
            detail: "the statement names no ledger fixed point".into(),
        };
    };
    let mut c = Check {
        name: "ledger".into(),
        recipe: LEDGER_PREFIX_RECIPE.into(),
        expected: sha.to_string(),
        found: None,
        state: Holds::Unreachable,
        detail: String::new(),
    };
    let path = home.ledger_path();
    let mut prefix = Vec::new();
    match files::open_private_read(&path) {
        Ok(f) => {
            if let Err(e) = f.take(bytes).read_to_end(&mut prefix) {
                c.detail = e.to_string();
                return c;
            }
        }
        Err(e) => {
            c.detail = e.to_string();
            return c;
        }
    }
    let found = hex::encode(Sha256::digest(&prefix));
    let n = prefix.iter().filter(|&&b| b == b'\n').count() as u64;
    c.found = Some(found.clone());
    if (prefix.len() as u64) == bytes && found == sha && n == events {
        c.state = Holds::Holds;
        c.detail = format!("the ledger's first {events} events are unchanged");
    } else {
        c.state = Holds::Differs;
        c.detail = format!(
            "the ledger's first {bytes} bytes differ from those the receipt saw ({events} events then)"
        );
    }
    c
}

/// Recomputes every digest of a plain receipt.
pub fn verify_plain(home: &Home, path: &Path, bytes: &[u8], r: &Receipt) -> Report {
    let mut checks = Vec::new();
    // The file itself: exactly the canonical form of what it says.
    let canonical = serde_json::to_value(r)
        .ok()
        .and_then(|v| ledger::canonical::to_vec(&v).ok())
        .map(|mut b| {
            b.push(b'\n');
            b
        });
    let file_sha = hex::encode(Sha256::digest(bytes));
    checks.push(match canonical {
        Some(c) if c == bytes => Check {
            name: "receipt".into(),
            recipe: BYTES_RECIPE.into(),
            expected: file_sha.clone(),
            found: Some(file_sha),
            state: Holds::Holds,
            detail: "the file is the canonical form of its content".into(),
        },
        _ => Check {
            name: "receipt".into(),
            recipe: BYTES_RECIPE.into(),
            expected: "canonical JSON".into(),
            found: Some(file_sha),
            state: Holds::Differs,
            detail: "the file is not in canonical form: it was edited after it was written".into(),
        },
    });
    for b in &r.digests {
        checks.push(verify_binding(home, b));
    }
    checks.push(verify_ledger(home, r));
    let ok = checks.iter().all(|c| c.state != Holds::Differs);
    Report {
        file: path.to_string_lossy().into_owned(),
        id: r.id.clone(),
        kind: r.kind.clone(),
        subject: r.subject.clone(),
        at: r.at.clone(),
        checks,
        ok,
    }
}

fn check(b: &Binding, found: Option<String>, state: Holds, detail: impl Into<String>) -> Check {
    Check {
        name: b.name.clone(),
        recipe: b.recipe.clone(),
        expected: b.digest.clone(),
        found,
        state,
        detail: detail.into(),
    }
}

fn compare(b: &Binding, found: String, what: &str) -> Check {
    if found == b.digest {
        check(
            b,
            Some(found),
            Holds::Holds,
            format!("{what}: recomputed, equal"),
        )
    } else {
        check(
            b,
            Some(found),
            Holds::Differs,
            format!("{what}: recomputed, different"),
        )
    }
}

/// A path stored in a receipt, resolved under the data folder; `None` when it would leave
/// it.
fn data_path(home: &Home, rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    Some(home.data.join(p))
}

fn verify_binding(home: &Home, b: &Binding) -> Check {
    match &b.source {
        Source::File { path } => {
            let Some(full) = data_path(home, path) else {
                return check(
                    b,
                    None,
                    Holds::Unreachable,
                    format!("{path}: not a path inside the home"),
                );
            };
            match evidence::hash_file(&full) {
                Ok(Some((_, sha))) => compare(b, sha, path),
                Ok(None) => check(
                    b,
                    None,
                    Holds::Unreachable,
                    format!("{path}: no longer there"),
                ),
                Err(e) => check(b, None, Holds::Unreachable, format!("{path}: {e}")),
            }
        }
        Source::CandidateDocument { candidate } => match candidate::load(home, candidate) {
            Ok(Some(c)) => match c.identity.recompute_digest() {
                Ok(d) => compare(b, d, &format!("the identity document of {candidate}")),
                Err(e) => check(b, None, Holds::Unreachable, e.to_string()),
            },
            Ok(None) => check(
                b,
                None,
                Holds::Unreachable,
                format!("{candidate}: no such candidate file"),
            ),
            Err(e) => check(b, None, Holds::Unreachable, e.to_string()),
        },
        Source::Worktree { candidate } => match candidate::load(home, candidate) {
            Ok(Some(c)) => match candidate::derive(&c.worktree_info()) {
                Ok(now) => compare(b, now.digest, &format!("the worktree of {candidate} now")),
                Err(e) if e.is_refusal() && e.code() != "worktree_missing" => check(
                    b,
                    None,
                    Holds::Differs,
                    format!("the worktree of {candidate} no longer gives an identity: {e}"),
                ),
                Err(e) => check(b, None, Holds::Unreachable, e.to_string()),
            },
            Ok(None) => check(
                b,
                None,
                Holds::Unreachable,
                format!("{candidate}: no such candidate file"),
            ),
            Err(e) => check(b, None, Holds::Unreachable, e.to_string()),
        },
        Source::GitObject { repo, object_type } => {
            let git = Git::new(repo);
            match git.text(&["cat-file", "-t", &b.digest]) {
                Ok(t) if t == *object_type => check(
                    b,
                    Some(b.digest.clone()),
                    Holds::Holds,
                    format!("a {t} with this id exists in the repository"),
                ),
                Ok(t) => check(
                    b,
                    Some(b.digest.clone()),
                    Holds::Differs,
                    format!("the object is a {t}, not a {object_type}"),
                ),
                Err(e) => check(
                    b,
                    None,
                    Holds::Unreachable,
                    format!("not found in {repo}: {e}"),
                ),
            }
        }
    }
}

fn verify_ledger(home: &Home, r: &Receipt) -> Check {
    let l = &r.ledger;
    let mut c = Check {
        name: "ledger".into(),
        recipe: l.recipe.clone(),
        expected: l.sha256.clone(),
        found: None,
        state: Holds::Unreachable,
        detail: String::new(),
    };
    let path = home.ledger_path();
    let mut f = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(e) => {
            c.detail = e.to_string();
            return c;
        }
    };
    let mut prefix = Vec::new();
    if let Err(e) = (&mut f).take(l.bytes).read_to_end(&mut prefix) {
        c.detail = e.to_string();
        return c;
    }
    if (prefix.len() as u64) < l.bytes {
        c.state = Holds::Differs;
        c.detail = format!(
            "the ledger holds {} bytes, fewer than the {} the receipt saw: it was truncated or replaced",
            prefix.len(),
            l.bytes
        );
        return c;
    }
    let sha = hex::encode(Sha256::digest(&prefix));
    let events = prefix.iter().filter(|&&b| b == b'\n').count() as u64;
    c.found = Some(sha.clone());
    if sha != l.sha256 || events != l.events {
        c.state = Holds::Differs;
        c.detail = format!(
            "the first {} bytes of the ledger differ from those the receipt saw ({} events then, {events} now)",
            l.bytes, l.events
        );
        return c;
    }
    // The prefix holds the event that records this receipt.
    let named = prefix
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .find(|v| v.get("seq").and_then(Value::as_u64) == Some(l.event_seq));
    match named {
        Some(v)
            if v.get("kind").and_then(Value::as_str) == Some(l.event_kind.as_str())
                && v.get("receipt").and_then(Value::as_str) == Some(r.id.as_str()) =>
        {
            c.state = Holds::Holds;
            c.detail = format!(
                "the ledger's first {} events are unchanged; event {} ({}) names this receipt",
                l.events, l.event_seq, l.event_kind
            );
        }
        _ => {
            c.state = Holds::Differs;
            c.detail = format!(
                "the ledger prefix is unchanged but its event {} is not a {} naming {}",
                l.event_seq, l.event_kind, r.id
            );
        }
    }
    c
}

#[cfg(test)]
mod tests;
