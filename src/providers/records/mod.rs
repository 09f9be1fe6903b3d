//! Native records: each tool's OWN conversation record, read where the tool keeps it under
//! the profile's account home (never a second app-server, never a model).
//!
//! | tool | record of conversation ID (under the account home) | module |
//! |---|---|---|
//! | claude | `projects/<cwd, non-alphanumerics → '-'>/ID.jsonl` (+ `ID/subagents/agent-*.jsonl`) | [`claude`] |
//! | codex | `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-ID.jsonl` (or `.jsonl.zst`, zstd) | [`codex`] |
//! | gemini | `tmp/<project>/chats/session-<time>-<ID[..8]>.jsonl` whose metadata names ID | [`gemini`] |
//! | opencode | what `opencode export ID` prints (run once, offline, under the profile) | [`opencode`] |
//!
//! The formats, and the versions they were checked on, are in `docs/providers.md`
//! ("Native records"). Grok has no reader: [`messages`] answers [`Unsupported`] for it.
//!
//! Every read is bounded and refuses what is not the tool's own plain file: a record is
//! opened with `O_NOFOLLOW` (a symlink is refused), `fstat`ed (a FIFO, socket or device is
//! refused; a hard link, `nlink > 1`, is refused: another name could be a file the record
//! was never meant to show), each folder between the account home and it is `lstat`ed (a
//! symlinked folder is refused), and it is at most [`MAX_FILE`] bytes (8 MiB), with at most
//! [`MAX_REQUEST`] (64 MiB) read for one request ([`Budget`]); a compressed record is at most
//! 8 MiB on disk and once decompressed ([`unzstd`]). A record refused or failing
//! to read is [`TranscriptState::Unreadable`] with the reason: never an empty success.

pub mod activity;
pub mod claude;
pub mod claude_limit;
pub mod codex;
pub mod gemini;
pub mod opencode;

use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Tool;

/// The most bytes of one record file read.
pub const MAX_FILE: u64 = 8 * 1024 * 1024;
/// The most bytes read for one request, over every file it reads.
pub const MAX_REQUEST: u64 = 64 * 1024 * 1024;

/// Where a run's record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptState {
    /// The record was read.
    Read,
    /// The tool has not written it yet (no conversation reported, or the run is live and
    /// the file is not there yet: codex writes its rollout at the first turn, not at
    /// `thread/start`).
    Pending,
    /// It should be there and is not (the run ended, its conversation is known, and no
    /// record of it exists under the account home).
    Missing,
    /// It is there and could not be read: refused (a symlink, a hard link, a special file,
    /// larger than 8 MiB) or failing; the reason says which.
    Unreadable,
}

impl TranscriptState {
    pub fn as_str(self) -> &'static str {
        match self {
            TranscriptState::Read => "read",
            TranscriptState::Pending => "pending",
            TranscriptState::Missing => "missing",
            TranscriptState::Unreadable => "unreadable",
        }
    }
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person (what was sent to the tool).
    User,
    /// The tool's answer.
    Assistant,
}

/// One message of a conversation, in the record's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    /// The record's own time of the message (RFC 3339), when it gives one.
    pub at: Option<String>,
    /// The whole text, as the tool recorded it (not sanitised).
    pub text: String,
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path} is a symbolic link; a native record is read only from the tool's own file")]
    Symlink { path: PathBuf },
    #[error(
        "{path} has {links} names (a hard link); a native record is read only from a file \
         with one name"
    )]
    HardLink { path: PathBuf, links: u64 },
    #[error("{path} is not a regular file (a FIFO, socket or device is never read)")]
    NotRegular { path: PathBuf },
    #[error("{path} is {size} bytes, more than the {max} bytes a record file may be read to")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error("reading {path} would pass the {max} bytes one request may read over all its records")]
    RequestTooLarge { path: PathBuf, max: u64 },
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    /// `opencode export` failed (its status, its last words, the deadline).
    #[error("{0}")]
    Export(String),
    #[error("{what} printed more than the {max} bytes a record may be read to")]
    ExportTooLarge { what: String, max: u64 },
}

/// What one request may still read ([`MAX_REQUEST`] in all), and the most of one file
/// ([`MAX_FILE`], unless the request says otherwise: a handoff takes larger records).
#[derive(Debug, Clone)]
pub struct Budget {
    left: u64,
    per_file: u64,
    /// The whole request's bound, named when it is passed.
    total: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_REQUEST)
    }
}

impl Budget {
    pub fn new(bytes: u64) -> Budget {
        Budget {
            left: bytes,
            per_file: MAX_FILE,
            total: bytes,
        }
    }

    /// `bytes` in all, at most `per_file` of one file (a handoff: 256 MiB for both, seed
    /// 002).
    pub fn with_file_max(bytes: u64, per_file: u64) -> Budget {
        Budget {
            left: bytes,
            per_file,
            total: bytes,
        }
    }

    /// The most bytes this request reads over all its records.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The most bytes of one file this request reads.
    pub fn file_max(&self) -> u64 {
        self.per_file
    }

    fn take(&mut self, n: u64) {
        self.left = self.left.saturating_sub(n);
    }
}

/// Reads the record file at `path`, under the account home `home`: `Ok(None)` when there is
/// nothing at that path, the bytes when it is a plain file of one name within the bounds,
/// and an error naming the refusal otherwise. Each folder between `home` and the file must
/// be a real folder (a symlinked one is refused).
pub fn read_file(
    home: &Path,
    path: &Path,
    budget: &mut Budget,
) -> Result<Option<Vec<u8>>, RecordError> {
    if let Ok(rest) = path.strip_prefix(home) {
        let mut at = home.to_path_buf();
        let parts: Vec<_> = rest.components().collect();
        for c in parts.iter().take(parts.len().saturating_sub(1)) {
            at.push(c);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(RecordError::Symlink { path: at });
                }
                Ok(m) if !m.is_dir() => return Err(RecordError::NotRegular { path: at }),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(err) => return Err(RecordError::Io { path: at, err }),
            }
        }
    }
    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(RecordError::Symlink {
                path: path.to_path_buf(),
            });
        }
        Err(err) => {
            return Err(RecordError::Io {
                path: path.to_path_buf(),
                err,
            });
        }
    };
    let meta = file.metadata().map_err(|err| RecordError::Io {
        path: path.to_path_buf(),
        err,
    })?;
    if !meta.is_file() {
        return Err(RecordError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if meta.nlink() > 1 {
        return Err(RecordError::HardLink {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    if meta.len() > budget.per_file {
        return Err(RecordError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            max: budget.per_file,
        });
    }
    read_bounded(file, path, meta.len(), budget).map(Some)
}

/// Reads at most [`MAX_FILE`] bytes (the file may grow while it is read: what passes the
/// bound is refused, not cut) within the request's budget.
fn read_bounded(
    file: File,
    path: &Path,
    size: u64,
    budget: &mut Budget,
) -> Result<Vec<u8>, RecordError> {
    if size > budget.left {
        return Err(RecordError::RequestTooLarge {
            path: path.to_path_buf(),
            max: budget.total,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(budget.per_file + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| RecordError::Io {
            path: path.to_path_buf(),
            err,
        })?;
    let n = bytes.len() as u64;
    if n > budget.per_file {
        return Err(RecordError::TooLarge {
            path: path.to_path_buf(),
            size: n,
            max: budget.per_file,
        });
    }
    if n > budget.left {
        return Err(RecordError::RequestTooLarge {
            path: path.to_path_buf(),
            max: budget.total,
        });
    }
    budget.left -= n;
    Ok(bytes)
}

/// The bytes of a zstd-compressed record (codex's `.jsonl.zst` rollouts) that
/// [`read_file`] read: at most [`MAX_FILE`] bytes once decompressed (more is refused, not
/// cut), counted in the request's budget too.
pub fn unzstd(path: &Path, compressed: &[u8], budget: &mut Budget) -> Result<Vec<u8>, RecordError> {
    let io = |err: std::io::Error| RecordError::Io {
        path: path.to_path_buf(),
        err,
    };
    let decoder = zstd::stream::read::Decoder::new(compressed).map_err(io)?;
    let mut out = Vec::new();
    decoder
        .take(budget.per_file + 1)
        .read_to_end(&mut out)
        .map_err(io)?;
    let n = out.len() as u64;
    if n > budget.per_file {
        return Err(RecordError::TooLarge {
            path: path.to_path_buf(),
            size: n,
            max: budget.per_file,
        });
    }
    if n > budget.left {
        return Err(RecordError::RequestTooLarge {
            path: path.to_path_buf(),
            max: budget.total,
        });
    }
    budget.left -= n;
    Ok(out)
}

/// The lines of a JSON-lines record as JSON values. A line that is not JSON is skipped (a
/// torn last line the tool is still writing, or a kind of line this reader does not know);
/// skipping is the same on every read, so positions stay stable as the record grows.
pub(crate) fn json_lines(bytes: &[u8]) -> impl Iterator<Item = serde_json::Value> + '_ {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
}

/// Which run's record to read.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub tool: Tool,
    /// The profile's account home.
    pub home: &'a Path,
    /// The folder the tool ran in.
    pub cwd: &'a Path,
    /// The conversation id the tool reported, if it did.
    pub conversation_id: Option<&'a str>,
    /// True while the run's process may still write the record.
    pub live: bool,
    /// How to run the session's `opencode export` (opencode only; without it an opencode
    /// record is unreadable).
    pub exporter: Option<&'a opencode::Exporter>,
}

/// A record as read: its state, the file (when one was found), why it is unreadable, and
/// its messages (empty unless `state` is `read`).
#[derive(Debug, Clone)]
pub struct Read {
    pub state: TranscriptState,
    pub path: Option<PathBuf>,
    pub reason: Option<String>,
    pub messages: Vec<Message>,
}

/// The tool keeps no record this reader takes messages from.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} sessions have no messages proctor reads: messages are read from Claude Code's \
     transcript, Codex's rollout, Gemini CLI's chat log and OpenCode's export only"
)]
pub struct Unsupported(pub Tool);

/// True when [`messages`] reads the tool's record.
pub fn has_messages(tool: Tool) -> bool {
    matches!(
        tool,
        Tool::Claude | Tool::Codex | Tool::Gemini | Tool::Opencode
    )
}

/// A tool's reader of its record's bytes.
type Parser = fn(&[u8]) -> Vec<Message>;

/// A record's bytes as read for one request: its state, the file (when one was found),
/// why it is unreadable, and its (decompressed) bytes when `state` is `read`.
#[derive(Debug, Clone)]
pub struct Raw {
    pub state: TranscriptState,
    pub path: Option<PathBuf>,
    pub reason: Option<String>,
    pub bytes: Option<Vec<u8>>,
}

/// Reads the run's record (claude's transcript, codex's rollout, gemini's chat log,
/// opencode's export) within the budget.
pub fn raw(t: &Target<'_>, budget: &mut Budget) -> Result<Raw, Unsupported> {
    let absent = |path: Option<PathBuf>| Raw {
        state: if t.live || t.conversation_id.is_none() {
            TranscriptState::Pending
        } else {
            TranscriptState::Missing
        },
        path,
        reason: None,
        bytes: None,
    };
    let Some(id) = t.conversation_id else {
        return if has_messages(t.tool) {
            Ok(absent(None))
        } else {
            Err(Unsupported(t.tool))
        };
    };
    let path = match t.tool {
        Tool::Claude => Some(claude::path(t.home, t.cwd, id)),
        Tool::Codex => codex::find(t.home, id),
        Tool::Gemini => {
            return Ok(match gemini::find(t.home, id, budget) {
                Ok(Some((path, bytes))) => read_ok(path, bytes),
                Ok(None) => absent(None),
                Err(e) => unreadable(None, e),
            });
        }
        Tool::Opencode => {
            let Some(x) = t.exporter else {
                return Ok(unreadable(
                    None,
                    RecordError::Export("no way to run opencode export was given".into()),
                ));
            };
            return Ok(match opencode::export(x, id, budget) {
                Ok(Some(bytes)) => Raw {
                    state: TranscriptState::Read,
                    path: None,
                    reason: None,
                    bytes: Some(bytes),
                },
                Ok(None) => absent(None),
                Err(e) => unreadable(None, e),
            });
        }
        other => return Err(Unsupported(other)),
    };
    let Some(path) = path else {
        return Ok(absent(None));
    };
    let zst = path.extension().is_some_and(|e| e == "zst");
    let read = read_file(t.home, &path, budget).and_then(|b| match b {
        Some(b) if zst => unzstd(&path, &b, budget).map(Some),
        other => Ok(other),
    });
    Ok(match read {
        Ok(None) => absent(Some(path)),
        Ok(Some(bytes)) => read_ok(path, bytes),
        Err(e) => unreadable(Some(path), e),
    })
}

fn read_ok(path: PathBuf, bytes: Vec<u8>) -> Raw {
    Raw {
        state: TranscriptState::Read,
        path: Some(path),
        reason: None,
        bytes: Some(bytes),
    }
}

fn unreadable(path: Option<PathBuf>, e: RecordError) -> Raw {
    Raw {
        state: TranscriptState::Unreadable,
        reason: Some(e.to_string()),
        path,
        bytes: None,
    }
}

/// The messages of the run's conversation, read from the tool's own record.
pub fn messages(t: &Target<'_>, budget: &mut Budget) -> Result<Read, Unsupported> {
    let parse: Parser = match t.tool {
        Tool::Codex => codex::messages,
        Tool::Gemini => gemini::messages,
        Tool::Opencode => opencode::messages,
        _ => claude::messages,
    };
    let r = raw(t, budget)?;
    Ok(Read {
        state: r.state,
        messages: r.bytes.as_deref().map(parse).unwrap_or_default(),
        path: r.path,
        reason: r.reason,
    })
}

#[cfg(test)]
mod tests;
