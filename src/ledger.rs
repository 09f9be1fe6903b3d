//! The ledger: proctor's append-only, hash-chained source of truth (`proctor-ledger/1`).
//!
//! One canonical JSON object per line (see [`canonical`]), each with `seq` (from 1,
//! contiguous), `at` (RFC 3339 UTC, milliseconds), `kind` (lowercase dotted) and `prev`
//! (`sha256:` + the SHA-256 of the previous line's bytes including its LF; for line 1, of
//! the empty string). The full definition, with the crash analysis of recovery, is in
//! `docs/formats.md`, "Ledger (proctor-ledger/1)".
//!
//! - [`Ledger::open`] takes the writer's lock, verifies the whole file, moves a torn final
//!   line aside (recording it), and refuses any other damage.
//! - [`Ledger::append`] serialises, writes and fsyncs; it returns the seq only once the
//!   line is durable. Concurrent appenders in one process share one write and one fsync
//!   per batch (group commit).
//! - [`verify`], [`fixed_point`] and [`tail`] only read: they take no lock and never
//!   modify the file.

pub mod canonical;
mod verify;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::files::{self, FilesError};

pub use canonical::ValueError;
pub use verify::{BadLine, FixedPoint, Reason, Verified, parse_prev, valid_at, valid_kind};

/// The format name of a ledger file.
pub const FORMAT: &str = "proctor-ledger/1";
/// The format name of a ledger's fixed point.
pub const FIXED_POINT_FORMAT: &str = "proctor-ledger-fixed-point/1";
/// The kind of the event that records a torn tail moved aside.
pub const RECOVERY_KIND: &str = "ledger.torn_tail_recovered";
/// Field names that belong to the envelope and may not be used by a kind.
pub const RESERVED_FIELDS: [&str; 4] = ["at", "kind", "prev", "seq"];
/// SHA-256 of the empty byte string: the `prev` of line 1 ("the bytes before line 1 are
/// empty").
pub const EMPTY_SHA256: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// What can go wrong with a ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    #[error(
        "no ledger at {path} yet: nothing has been recorded there. Remedy: check the path \
         (or --home); the ledger is created by its first writer"
    )]
    NotFound { path: PathBuf },
    #[error(
        "{path} is already open for writing (by another process such as `proctor serve`, or \
         by another handle in this process); a ledger has one writer at a time. Remedy: stop \
         the other writer, or use the read-only verbs (verify, tail)"
    )]
    Locked { path: PathBuf },
    #[error(
        "{path} is damaged before its tail, at {fault}. proctor repairs only a torn final \
         line and never rewrites history. Remedy: inspect it with `proctor ledger verify`, \
         then restore a copy whose fixed point you trust; keep the damaged file as evidence"
    )]
    Damaged { path: PathBuf, fault: BadLine },
    #[error(
        "invalid event kind {kind:?}: a kind is lowercase dotted segments \
         ([a-z][a-z0-9_]* joined by '.', at least two), e.g. sessions.run.renamed"
    )]
    BadKind { kind: String },
    #[error("the field name {name:?} is reserved for the envelope (seq, at, kind, prev)")]
    ReservedField { name: String },
    #[error("cannot record the time {at:?}: it is not YYYY-MM-DDTHH:MM:SS.mmmZ")]
    BadTime { at: String },
    #[error("invalid event field: {0}")]
    Value(#[from] ValueError),
    #[error(
        "the ledger {path} refuses appends since a write or fsync failed ({cause}); the \
         unacknowledged events may or may not be on disk. Remedy: close and reopen the ledger \
         (restart the writer), which checks the tail and moves a torn line aside"
    )]
    Failed { path: PathBuf, cause: String },
    #[error(
        "the ledger path {path} has no file name in UTF-8; proctor names recovery files after \
         it. Remedy: use a UTF-8 file name"
    )]
    BadPath { path: PathBuf },
}

impl LedgerError {
    pub(crate) fn io(op: &'static str, path: &Path, err: io::Error) -> Self {
        LedgerError::Io {
            op,
            path: path.to_path_buf(),
            err,
        }
    }
}

/// The outcome of [`verify`] when it does not succeed.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The file was read; this is its first bad line.
    #[error("{path} is not a valid ledger: {fault}")]
    Bad {
        path: PathBuf,
        fault: BadLine,
        /// How many lines before the bad one verified.
        intact_events: u64,
    },
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] LedgerError),
}

/// Serialises one ledger line (canonical JSON and its LF).
///
/// Refuses a malformed `kind`, a field named like an envelope field, a time not in the
/// ledger's form, and any value that has no exact canonical form (floats, excessive depth).
pub fn encode_line(
    seq: u64,
    at: &str,
    kind: &str,
    prev: &[u8; 32],
    fields: &Map<String, Value>,
) -> Result<Vec<u8>, LedgerError> {
    if !valid_kind(kind) {
        return Err(LedgerError::BadKind {
            kind: kind.to_string(),
        });
    }
    if let Some(name) = RESERVED_FIELDS.iter().find(|n| fields.contains_key(**n)) {
        return Err(LedgerError::ReservedField {
            name: (*name).to_string(),
        });
    }
    if !valid_at(at) {
        return Err(LedgerError::BadTime { at: at.to_string() });
    }
    let seq_v = Value::from(seq);
    let at_v = Value::String(at.to_string());
    let kind_v = Value::String(kind.to_string());
    let prev_v = Value::String(format!("sha256:{}", hex::encode(prev)));
    let mut entries: Vec<(&str, &Value)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .chain([
            ("seq", &seq_v),
            ("at", &at_v),
            ("kind", &kind_v),
            ("prev", &prev_v),
        ])
        .collect();
    let mut out = Vec::with_capacity(160);
    canonical::write_object_entries(&mut out, &mut entries)?;
    out.push(b'\n');
    Ok(out)
}

/// The current time in the ledger's form: RFC 3339 UTC with milliseconds.
pub fn now_at() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A torn tail moved aside, or a moved-aside file recorded late.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Recovery {
    /// The seq of the `ledger.torn_tail_recovered` event that records it.
    pub seq: u64,
    /// Size of the moved bytes.
    pub bytes: u64,
    /// `sha256:<hex>` of the moved bytes.
    pub sha256: String,
    /// The sibling file (a name in the ledger's folder) that holds them.
    pub moved_to: String,
    /// Byte offset in the ledger where the torn tail started (absent when recorded late).
    pub offset: Option<u64>,
    /// Why the tail was torn: `missing_final_lf` or `invalid_json` (absent when late).
    pub reason: Option<Reason>,
    /// The file was moved aside by an earlier open that stopped before recording it.
    pub recorded_after_restart: bool,
}

/// What [`Ledger::open`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The ledger file did not exist and was created.
    pub created: bool,
    /// Events that verified when the ledger was opened (before any recovery event).
    pub events: u64,
    /// Torn tails moved aside and recorded during this open.
    pub recovered: Vec<Recovery>,
}

struct State {
    next_seq: u64,
    prev: [u8; 32],
    /// Lines serialised but not yet written (in seq order).
    pending: Vec<u8>,
    /// Highest seq known to be written and fsync'd.
    durable: u64,
    /// One appender is writing a batch (outside the lock).
    writing: bool,
    /// Bytes known to be in the file.
    len: u64,
    failed: Option<String>,
}

/// An open ledger: the single writer of its file.
pub struct Ledger {
    path: PathBuf,
    file: File,
    state: Mutex<State>,
    flushed: Condvar,
    /// The seq of the latest durable event, for whoever waits on the ledger to move (the
    /// server's change stream, `GET /v1/m/sessions/changes`).
    head: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish()
    }
}

impl Ledger {
    /// Opens (creating if absent) the ledger at `path` for appending.
    ///
    /// Takes an exclusive lock (refused with [`LedgerError::Locked`] if another process or
    /// handle holds it), verifies every line, moves a torn final line aside and records it,
    /// records any moved-aside file that an interrupted earlier open did not record, and
    /// refuses damage anywhere else ([`LedgerError::Damaged`]).
    pub fn open(path: &Path) -> Result<(Ledger, Opened), LedgerError> {
        let name = path
            .file_name()
            .and_then(OsStr::to_str)
            .ok_or_else(|| LedgerError::BadPath {
                path: path.to_path_buf(),
            })?
            .to_string();
        let dir = files::parent_of(path);
        let existed = match fs::symlink_metadata(path) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(LedgerError::io("inspect", path, e)),
        };
        if !existed {
            files::ensure_private_dir(&dir)?;
        }
        let file = files::open_private_append(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(LedgerError::Locked {
                    path: path.to_path_buf(),
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(LedgerError::io("lock", path, e)),
        }
        if !existed {
            file.sync_all()
                .map_err(|e| LedgerError::io("fsync", path, e))?;
            files::fsync_dir(&dir)?;
        }
        let len = file
            .metadata()
            .map_err(|e| LedgerError::io("inspect", path, e))?
            .len();
        let walk = verify::walk(&file, path, len)?;
        let torn = match walk.fault {
            None => None,
            Some(f)
                if f.reason == Reason::MissingFinalLf
                    || (f.reason == Reason::InvalidJson && f.end == len) =>
            {
                Some(f)
            }
            Some(fault) => {
                return Err(LedgerError::Damaged {
                    path: path.to_path_buf(),
                    fault,
                });
            }
        };

        let referenced: BTreeSet<String> = walk
            .recovery_lines
            .iter()
            .filter_map(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
            .filter_map(|m| m.get("moved_to")?.as_str().map(str::to_string))
            .collect();
        let mut orphans: Vec<String> = list_torn_siblings(&dir, &name)?
            .into_iter()
            .filter(|n| !referenced.contains(n))
            .collect();

        let ledger = Ledger {
            path: path.to_path_buf(),
            file,
            state: Mutex::new(State {
                next_seq: walk.events + 1,
                prev: walk.last_hash,
                pending: Vec::new(),
                durable: walk.events,
                writing: false,
                len: walk.good_bytes,
                failed: None,
            }),
            flushed: Condvar::new(),
            head: tokio::sync::watch::Sender::new(walk.events),
        };
        let mut opened = Opened {
            created: !existed,
            events: walk.events,
            recovered: Vec::new(),
        };

        if let Some(fault) = torn {
            let r = ledger.move_tail_aside(&dir, &name, &fault, len, &mut orphans)?;
            opened.recovered.push(r);
        }
        for orphan in orphans {
            let (bytes, sha) = hash_file(&dir.join(&orphan))?;
            let mut fields = Map::new();
            fields.insert("bytes".into(), bytes.into());
            fields.insert(
                "sha256".into(),
                format!("sha256:{}", hex::encode(sha)).into(),
            );
            fields.insert("moved_to".into(), orphan.clone().into());
            fields.insert("recorded_after_restart".into(), true.into());
            let seq = ledger.append(RECOVERY_KIND, &fields)?;
            opened.recovered.push(Recovery {
                seq,
                bytes,
                sha256: format!("sha256:{}", hex::encode(sha)),
                moved_to: orphan,
                offset: None,
                reason: None,
                recorded_after_restart: true,
            });
        }
        Ok((ledger, opened))
    }

    /// Moves the torn tail `[fault.offset, len)` to a sibling file, truncates, records it.
    /// The order (copy durable, then truncate durable, then record) is what makes a crash
    /// at any step lose nothing; see docs/formats.md.
    fn move_tail_aside(
        &self,
        dir: &Path,
        name: &str,
        fault: &BadLine,
        len: u64,
        orphans: &mut Vec<String>,
    ) -> Result<Recovery, LedgerError> {
        let tail_len = usize::try_from(len - fault.offset).map_err(|_| {
            LedgerError::io("read", &self.path, io::Error::other("torn tail too large"))
        })?;
        let mut tail = vec![0u8; tail_len];
        self.file
            .read_exact_at(&mut tail, fault.offset)
            .map_err(|e| LedgerError::io("read", &self.path, e))?;
        let sha: [u8; 32] = Sha256::digest(&tail).into();

        // An earlier open may have copied these very bytes and stopped before truncating.
        let mut reused = None;
        for (i, o) in orphans.iter().enumerate() {
            let (bytes, osha) = hash_file(&dir.join(o))?;
            if bytes == tail.len() as u64 && osha == sha {
                reused = Some(i);
                break;
            }
        }
        let moved_to = match reused {
            Some(i) => orphans.remove(i),
            None => write_sibling(dir, name, fault.line, &tail)?,
        };
        // The copy is durable (file and folder fsync'd): now the ledger may lose the bytes.
        self.file
            .set_len(fault.offset)
            .map_err(|e| LedgerError::io("truncate", &self.path, e))?;
        self.file
            .sync_all()
            .map_err(|e| LedgerError::io("fsync", &self.path, e))?;

        let sha_text = format!("sha256:{}", hex::encode(sha));
        let mut fields = Map::new();
        fields.insert("bytes".into(), (tail.len() as u64).into());
        fields.insert("sha256".into(), sha_text.clone().into());
        fields.insert("moved_to".into(), moved_to.clone().into());
        fields.insert("offset".into(), fault.offset.into());
        fields.insert("reason".into(), fault.reason.as_str().into());
        let seq = self.append(RECOVERY_KIND, &fields)?;
        Ok(Recovery {
            seq,
            bytes: tail.len() as u64,
            sha256: sha_text,
            moved_to,
            offset: Some(fault.offset),
            reason: Some(fault.reason),
            recorded_after_restart: false,
        })
    }

    /// The ledger's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seq of the last durable event (0 for an empty ledger).
    pub fn last_seq(&self) -> u64 {
        self.lock_state().map(|s| s.durable).unwrap_or(0)
    }

    /// Bytes known to be durable in the file.
    pub fn len(&self) -> u64 {
        self.lock_state().map(|s| s.len).unwrap_or(0)
    }

    /// True when the ledger holds no event.
    pub fn is_empty(&self) -> bool {
        self.last_seq() == 0
    }

    fn lock_state(&self) -> Result<MutexGuard<'_, State>, LedgerError> {
        self.state.lock().map_err(|_| LedgerError::Failed {
            path: self.path.clone(),
            cause: "an appender panicked".into(),
        })
    }

    /// Appends one event and returns its seq once the line is written and fsync'd.
    ///
    /// Thread-safe. While one appender writes and fsyncs, others queue their lines; the next
    /// one to find the writer idle writes the whole queue with one `write` and one
    /// `fdatasync` (group commit), and every appender in that batch is acknowledged after
    /// it. If a write or fsync fails, this and every later append fail
    /// ([`LedgerError::Failed`]): reopen to recover.
    pub fn append(&self, kind: &str, fields: &Map<String, Value>) -> Result<u64, LedgerError> {
        let mut st = self.lock_state()?;
        if let Some(cause) = &st.failed {
            return Err(self.failed(cause));
        }
        let seq = st.next_seq;
        let line = encode_line(seq, &now_at(), kind, &st.prev, fields)?;
        st.prev = Sha256::digest(&line).into();
        st.next_seq += 1;
        st.pending.extend_from_slice(&line);
        loop {
            if st.durable >= seq {
                drop(st);
                // Said once the event is durable: whoever reads after this sees it.
                self.head.send_if_modified(|h| {
                    let newer = seq > *h;
                    if newer {
                        *h = seq;
                    }
                    newer
                });
                return Ok(seq);
            }
            if let Some(cause) = &st.failed {
                return Err(self.failed(cause));
            }
            if st.writing {
                st = self.flushed.wait(st).map_err(|_| LedgerError::Failed {
                    path: self.path.clone(),
                    cause: "an appender panicked".into(),
                })?;
                continue;
            }
            st.writing = true;
            let batch = std::mem::take(&mut st.pending);
            let last = st.next_seq - 1;
            drop(st);
            let result = (&self.file)
                .write_all(&batch)
                .and_then(|()| self.file.sync_data());
            st = self.lock_state()?;
            st.writing = false;
            match result {
                Ok(()) => {
                    st.durable = last;
                    st.len += batch.len() as u64;
                }
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.flushed.notify_all();
        }
    }

    /// The seq of the latest durable event, changed at every append (a receiver that waits
    /// on it wakes once the appended event can be read).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.head.subscribe()
    }

    fn failed(&self, cause: &str) -> LedgerError {
        LedgerError::Failed {
            path: self.path.clone(),
            cause: cause.to_string(),
        }
    }
}

/// Names of `<name>.torn.*` files in `dir` (moved-aside tails), sorted.
fn list_torn_siblings(dir: &Path, name: &str) -> Result<Vec<String>, LedgerError> {
    let prefix = format!("{name}.torn.");
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| LedgerError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LedgerError::io("list", dir, e))?;
        if let Some(n) = entry.file_name().to_str()
            && n.starts_with(&prefix)
        {
            out.push(n.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Size and SHA-256 of a file, read without following a symlink.
fn hash_file(path: &Path) -> Result<(u64, [u8; 32]), LedgerError> {
    let mut f = files::open_private_read(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| LedgerError::io("read", path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
    }
    Ok((total, h.finalize().into()))
}

/// Writes `bytes` to a new sibling `<name>.torn.<seq>.<utc>` (never replacing a file) and
/// makes it durable: temp file written and fsync'd, linked to its final name, folder
/// fsync'd. Returns the final name.
fn write_sibling(dir: &Path, name: &str, seq: u64, bytes: &[u8]) -> Result<String, LedgerError> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.torn-tmp.{}.{nanos:x}", std::process::id()));
    let result = (|| {
        let mut f = files::create_private_new(&tmp)?;
        f.write_all(bytes)
            .map_err(|e| LedgerError::io("write", &tmp, e))?;
        f.sync_all()
            .map_err(|e| LedgerError::io("fsync", &tmp, e))?;
        drop(f);
        for attempt in 0..1000u32 {
            let final_name = if attempt == 0 {
                format!("{name}.torn.{seq}.{stamp}")
            } else {
                format!("{name}.torn.{seq}.{stamp}.{attempt}")
            };
            let target = dir.join(&final_name);
            match fs::hard_link(&tmp, &target) {
                Ok(()) => return Ok(final_name),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(LedgerError::io("link the recovery file", &target, e)),
            }
        }
        Err(LedgerError::io(
            "name the recovery file in",
            dir,
            io::Error::other("1000 candidate names already exist"),
        ))
    })();
    let removed = fs::remove_file(&tmp);
    let final_name = result?;
    removed.map_err(|e| LedgerError::io("remove", &tmp, e))?;
    files::fsync_dir(dir)?;
    Ok(final_name)
}

/// Opens a ledger for reading (no lock, no modification).
fn open_read(path: &Path) -> Result<File, LedgerError> {
    files::open_private_read(path).map_err(|e| match e {
        FilesError::Io { err, .. } if err.kind() == io::ErrorKind::NotFound => {
            LedgerError::NotFound {
                path: path.to_path_buf(),
            }
        }
        other => LedgerError::Files(other),
    })
}

/// Verifies the ledger at `path` from its first byte to its last: every line complete,
/// valid UTF-8, canonical JSON, with a well-formed envelope, seq contiguous from 1 and the
/// prev chain intact. On success, the fixed point of the exact bytes read. Takes no lock
/// and never modifies the file.
///
/// The file's length is read once at the start; bytes appended during the walk are not
/// part of the result.
pub fn verify(path: &Path) -> Result<Verified, VerifyError> {
    let file = open_read(path)?;
    let len = file
        .metadata()
        .map_err(|e| LedgerError::io("inspect", path, e))?
        .len();
    let w = verify::walk(&file, path, len)?;
    match w.fault {
        Some(fault) => Err(VerifyError::Bad {
            path: path.to_path_buf(),
            fault,
            intact_events: w.events,
        }),
        None => Ok(Verified {
            fixed_point: verify::fixed_point_of(&w),
            last_line_sha256: w.last_hash,
        }),
    }
}

/// The fixed point of the exact bytes of `path`, without verifying them: `events` counts
/// the LF-terminated lines. Use [`verify`] to know that those lines are a valid ledger.
pub fn fixed_point(path: &Path) -> Result<FixedPoint, LedgerError> {
    let mut f = open_read(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let (mut bytes, mut events) = (0u64, 0u64);
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| LedgerError::io("read", path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
        events += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    Ok(FixedPoint {
        format: FIXED_POINT_FORMAT.to_string(),
        bytes,
        events,
        sha256: hex::encode(h.finalize()),
    })
}

/// One line shown by [`tail`].
#[derive(Debug, Clone, PartialEq)]
pub enum TailLine {
    /// A JSON object (not verified: run [`verify`] for that).
    Event(Map<String, Value>),
    /// A line that is not a JSON object; its bytes, lossily decoded.
    Unreadable { text: String, problem: String },
}

/// The end of a ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct Tail {
    /// The last complete lines, oldest first.
    pub lines: Vec<TailLine>,
    /// Bytes after the last LF (a torn tail), not shown as a line.
    pub torn_tail_bytes: u64,
}

/// The last `n` complete lines of the ledger at `path`, read from the end. Does not verify
/// and takes no lock.
pub fn tail(path: &Path, n: usize) -> Result<Tail, LedgerError> {
    let file = open_read(path)?;
    let len = file
        .metadata()
        .map_err(|e| LedgerError::io("inspect", path, e))?
        .len();
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    let mut block: u64 = 64 << 10;
    // Read backwards until the buffer holds n complete lines plus the LF before them.
    while start > 0 {
        let new_start = start.saturating_sub(block);
        let mut chunk = vec![
            0u8;
            usize::try_from(start - new_start).map_err(|_| LedgerError::io(
                "read",
                path,
                io::Error::other("block too large")
            ))?
        ];
        file.read_exact_at(&mut chunk, new_start)
            .map_err(|e| LedgerError::io("read", path, e))?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = new_start;
        let body = match buf.last() {
            Some(b'\n') => &buf[..buf.len() - 1],
            _ => &buf[..],
        };
        if body.iter().filter(|&&b| b == b'\n').count() > n {
            break;
        }
        block = block.saturating_mul(2);
    }
    let complete = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let torn_tail_bytes = (buf.len() - complete) as u64;
    let mut lines: Vec<&[u8]> = buf[..complete]
        .split_inclusive(|&b| b == b'\n')
        .map(|l| &l[..l.len() - 1])
        .collect();
    if start > 0 && !lines.is_empty() {
        // The first piece may be the end of a longer line.
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(n);
    let lines = lines[skip..]
        .iter()
        .map(|l| match serde_json::from_slice::<Value>(l) {
            Ok(Value::Object(m)) => TailLine::Event(m),
            Ok(_) => TailLine::Unreadable {
                text: String::from_utf8_lossy(l).into_owned(),
                problem: "not a JSON object".into(),
            },
            Err(e) => TailLine::Unreadable {
                text: String::from_utf8_lossy(l).into_owned(),
                problem: format!("invalid JSON: {e}"),
            },
        })
        .collect();
    Ok(Tail {
        lines,
        torn_tail_bytes,
    })
}

#[cfg(test)]
mod tests;
