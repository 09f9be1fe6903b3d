//! OpenCode's record, as its own `opencode export <sessionID>` prints it. OpenCode 1.18.33
//! keeps its sessions in a SQLite database (`$XDG_DATA_HOME/opencode/opencode.db`), so
//! proctor does not open its storage: it runs the session's own `opencode` ONCE per request,
//! under the session's profile (the launch's environment allowlist and account home), with
//! a deadline, its output bounded, its external plugins off (`--pure`) and its network
//! switches off (`OPENCODE_DISABLE_AUTOUPDATE`, `…_MODELS_FETCH`, `…_DEFAULT_PLUGINS`,
//! `…_SHARE`, `…_LSP_DOWNLOAD`, `…_PROJECT_CONFIG`), from the account home's folder (never the
//! workspace, whose `.opencode/` an agent writes). No model is called: export reads the
//! database.
//!
//! What the real 1.18.33 does (checked here, offline, a fresh `XDG_DATA_HOME` and `HOME`):
//! - a known session: status 0, `Exporting session: <id>` on stderr and on stdout one JSON
//!   document `{info: {id, directory, title, version, time, …}, messages: [{info: {id, role,
//!   time: {created, completed?}, modelID?, providerID?, tokens?, error?, …}, parts: [{type,
//!   text?, …}]}]}` (recorded: `tests/data/real/records/opencode-1.18.33-export-offline.json`:
//!   two user turns and the two assistant messages that failed to reach a model);
//! - an unknown session (an empty storage): status 1, stderr `Error: Session not found: <id>`
//!   (in colour), nothing on stdout. That is the record being absent (`pending` or
//!   `missing`), never an empty success;
//! - without the network switches, `export` resolves names (DNS queries seen with strace);
//!   with them, strace saw no `connect` at all.
//!
//! A message is a `messages[]` entry of `info.role` `user` or `assistant` with `text` parts
//! (not `synthetic` or `ignored` ones), joined by a newline; the time is `info.time.created`
//! (milliseconds since the epoch).

use std::ffi::OsString;
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Budget, Message, RecordError, Role};

/// How long one export may take.
pub const EXPORT_DEADLINE: Duration = Duration::from_secs(30);

/// The most bytes of an export's stderr kept (for the reason).
const MAX_STDERR: u64 = 64 * 1024;

/// The variables that switch OpenCode's own network uses off for the export.
pub const OFFLINE_VARS: [(&str, &str); 6] = [
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
];

/// How to run the session's `opencode`: the program its run resolved, the launch
/// environment of its profile (without [`OFFLINE_VARS`]: [`export`] adds them) and the
/// folder to run in.
#[derive(Debug, Clone)]
pub struct Exporter {
    pub program: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    pub dir: PathBuf,
    pub deadline: Duration,
}

/// True for an id `opencode export` may be given: 1 to 128 ASCII letters, digits, `_` and
/// `-`, not starting with `-` (never an option, a path or a NUL).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The argv after the program.
pub fn export_args(id: &str) -> Vec<String> {
    vec!["export".into(), "--pure".into(), id.into()]
}

/// Runs `opencode export --pure ID` once: `Ok(None)` when OpenCode says the session is not
/// found, its stdout (at most the budget's [`Budget::file_max`] bytes, [`super::MAX_FILE`]
/// unless the request says otherwise, counted in the budget) when it exits 0,
/// and an error naming why otherwise (another status, a signal, the deadline, too much
/// output, output that is not one JSON object).
pub fn export(x: &Exporter, id: &str, budget: &mut Budget) -> Result<Option<Vec<u8>>, RecordError> {
    let what = || format!("`{} export {id}`", x.program.display());
    if !valid_id(id) {
        return Err(RecordError::Export(format!(
            "{:?} is not an OpenCode session id",
            crate::text::one_line(id, 80)
        )));
    }
    let mut child = Command::new(&x.program)
        .args(export_args(id))
        .current_dir(&x.dir)
        .env_clear()
        .envs(x.env.iter().map(|(k, v)| (k, v)))
        .envs(OFFLINE_VARS)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| RecordError::Export(format!("cannot run {}: {e}", what())))?;
    let pgid = child.id();
    let file_max = budget.file_max();
    let limit = file_max.min(budget_left(budget));
    let out = child.stdout.take().map(|s| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let r = s.take(limit + 1).read_to_end(&mut b);
            if b.len() as u64 > limit {
                // Past the bound: refused at once, not waited for.
                let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
            }
            (b, r.is_ok())
        })
    });
    let err = child.stderr.take().map(|s| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = s.take(MAX_STDERR).read_to_end(&mut b);
            b
        })
    });
    let end = Instant::now() + x.deadline;
    let mut pause = Duration::from_millis(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(e) => {
                let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                return Err(RecordError::Export(format!("waiting for {}: {e}", what())));
            }
        }
        let now = Instant::now();
        if now >= end {
            break None;
        }
        std::thread::sleep(pause.min(end - now));
        pause = (pause * 2).min(Duration::from_millis(100));
    };
    // The leader is gone or late; what it left in its group goes too.
    let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.wait();
            return Err(RecordError::Export(format!(
                "{} did not finish within {} s and was killed",
                what(),
                x.deadline.as_secs()
            )));
        }
    };
    let (stdout, read_ok) = out
        .and_then(|h| h.join().ok())
        .unwrap_or((Vec::new(), false));
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let said = last_words(&stderr);
    let n = stdout.len() as u64;
    if n > file_max {
        return Err(RecordError::ExportTooLarge {
            what: what(),
            max: file_max,
        });
    }
    if n > budget_left(budget) {
        return Err(RecordError::RequestTooLarge {
            path: PathBuf::from(what()),
            max: budget.total(),
        });
    }
    if !status.success() {
        if said.contains("Session not found") {
            return Ok(None);
        }
        let how = match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        };
        return Err(RecordError::Export(format!(
            "{} {how}{}",
            what(),
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        )));
    }
    if !read_ok {
        return Err(RecordError::Export(format!(
            "reading the output of {} failed",
            what()
        )));
    }
    if !serde_json::from_slice::<Value>(&stdout).is_ok_and(|v| v.is_object()) {
        return Err(RecordError::Export(format!(
            "{} printed {n} bytes that are not one JSON object",
            what()
        )));
    }
    budget.take(n);
    Ok(Some(stdout))
}

fn budget_left(b: &Budget) -> u64 {
    b.left
}

/// The last line of `stderr` that says something, without its escape sequences, one line.
fn last_words(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    crate::text::one_line(line, 300)
}

/// An export's time (milliseconds since the epoch) in RFC 3339.
pub fn time_of(ms: Option<i64>) -> Option<String> {
    let ms = ms?;
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The text parts of a message, joined by a newline (not `synthetic` or `ignored` ones).
pub fn parts_text(parts: Option<&Value>) -> Option<String> {
    let texts: Vec<&str> = parts?
        .as_array()?
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter(|p| {
            p.get("synthetic").and_then(Value::as_bool) != Some(true)
                && p.get("ignored").and_then(Value::as_bool) != Some(true)
        })
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The messages of an export, in order.
pub fn messages(bytes: &[u8]) -> Vec<Message> {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = match m.pointer("/info/role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let Some(text) = parts_text(m.get("parts")) else {
            continue;
        };
        out.push(Message {
            role,
            at: time_of(m.pointer("/info/time/created").and_then(Value::as_i64)),
            text,
        });
    }
    out
}

/// The folder an export runs in: the account home when it is a folder, else `/`.
pub fn run_dir(home: &Path) -> PathBuf {
    if home.is_dir() {
        home.to_path_buf()
    } else {
        PathBuf::from("/")
    }
}
