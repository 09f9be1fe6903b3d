//! Gemini CLI's chat log: `tmp/<project>/chats/session-<YYYY-MM-DDThh-mm>-<id[..8]>.jsonl`
//! under the account home (`$GEMINI_CLI_HOME/.gemini`), where `<project>` is the project's
//! short name in `projects.json` (0.61.0: the folder's name, slugified; earlier versions the
//! SHA-256 of its path, which 0.61.0 migrates), and `<id>` the ACP `sessionId` proctor
//! recorded as the conversation.
//!
//! One JSON object per line, as 0.61.0's `ChatRecordingService` appends them (recorded:
//! `tests/data/real/records/gemini-0.61.0-acp-stub-model.jsonl`):
//! - a metadata line `{sessionId, projectHash, startTime, lastUpdated, kind}` first (again at
//!   each start of the service);
//! - message records `{id, timestamp, type: user|gemini|info|error|warning, content, …}`;
//!   a record whose `id` was seen before REPLACES that message in place (gemini appends the
//!   whole message again as its tool calls, tokens or text arrive);
//! - `{"$set": {…}}` metadata updates; one carrying `messages` replaces them all;
//! - `{"$rewindTo": id}`: that message and every later one are dropped (all of them when the
//!   id is unknown).
//!
//! Earlier versions wrote one JSON document `session-….json` (`{sessionId, …, messages}`):
//! read too.
//!
//! A message is a `user` record whose text is not what gemini itself leaves out of the
//! conversation when it resumes (`isIgnoredUserContent`: empty, or starting with `/`, `?`,
//! `<session_context>` or `<hook_context>`; a `functionResponse` alone has no text), or a
//! `gemini` record with text (its `content`: a string or parts, without the `thought` parts).
//! The time is the record's `timestamp`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Budget, Message, RecordError, Role, json_lines, read_file};

/// True for a conversation id gemini could have named a log by: 8 to 128 ASCII letters,
/// digits and `-` (a UUID), so never `/`, `..` or a NUL.
pub fn valid_id(id: &str) -> bool {
    (8..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The most project folders and chat files looked at for one session.
const MAX_ENTRIES: usize = 10_000;

/// The chat logs that may be session `id`'s, by name: `tmp/*/chats/session-*-<id[..8]>.jsonl`
/// (or `.json`), sorted. Whatever they are ([`read_file`] refuses what is not a plain file).
pub fn candidates(home: &Path, id: &str) -> Vec<PathBuf> {
    if !valid_id(id) {
        return Vec::new();
    }
    let short = &id[..8];
    let (jsonl, json) = (format!("-{short}.jsonl"), format!("-{short}.json"));
    let mut out = Vec::new();
    let mut seen = 0usize;
    let Ok(projects) = std::fs::read_dir(home.join("tmp")) else {
        return out;
    };
    for p in projects.flatten() {
        seen += 1;
        if seen > MAX_ENTRIES {
            break;
        }
        let Ok(files) = std::fs::read_dir(p.path().join("chats")) else {
            continue;
        };
        for f in files.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                break;
            }
            let name = f.file_name();
            let Some(n) = name.to_str() else { continue };
            if n.starts_with("session-") && (n.ends_with(&jsonl) || n.ends_with(&json)) {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// The session id a log names (its first metadata line, or the document's `sessionId`).
fn session_of(bytes: &[u8]) -> Option<String> {
    if let Ok(v) = serde_json::from_slice::<Value>(bytes)
        && let Some(s) = v.get("sessionId").and_then(Value::as_str)
    {
        return Some(s.to_string());
    }
    json_lines(bytes).find_map(|v| {
        v.get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// Finds and reads session `id`'s log: `Ok(None)` when no log names it. A candidate that
/// cannot be read (refused or failing) makes the record unreadable: which session it holds
/// cannot be known.
pub fn find(
    home: &Path,
    id: &str,
    budget: &mut Budget,
) -> Result<Option<(PathBuf, Vec<u8>)>, RecordError> {
    for path in candidates(home, id) {
        match read_file(home, &path, budget)? {
            Some(bytes) if session_of(&bytes).as_deref() == Some(id) => {
                return Ok(Some((path, bytes)));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The conversation's message records in order, once gemini's own rules are applied
/// (replacement by id, `$set.messages`, `$rewindTo`).
pub fn records(bytes: &[u8]) -> Vec<Value> {
    // One JSON document (earlier versions' `.json`).
    if let Ok(v) = serde_json::from_slice::<Value>(bytes)
        && v.get("id").is_none()
        && let Some(m) = v.get("messages").and_then(Value::as_array)
    {
        let mut out = Log::default();
        for r in m {
            out.put(r.clone());
        }
        return out.messages;
    }
    let mut log = Log::default();
    for v in json_lines(bytes) {
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            match log.messages.iter().position(|m| id_of(m) == Some(to)) {
                Some(i) => log.messages.truncate(i),
                None => log.messages.clear(),
            }
        } else if v.get("id").and_then(Value::as_str).is_some() {
            log.put(v);
        } else if let Some(set) = v.get("$set").filter(|s| s.is_object()) {
            if let Some(m) = set.get("messages").and_then(Value::as_array) {
                log.messages.clear();
                for r in m {
                    log.put(r.clone());
                }
            }
        } else if v.get("sessionId").is_some()
            && let Some(m) = v.get("messages").and_then(Value::as_array)
        {
            for r in m {
                log.put(r.clone());
            }
        }
    }
    log.messages
}

#[derive(Default)]
struct Log {
    messages: Vec<Value>,
}

impl Log {
    fn put(&mut self, r: Value) {
        let Some(id) = id_of(&r).map(str::to_string) else {
            return;
        };
        match self.messages.iter().position(|m| id_of(m) == Some(&id)) {
            Some(i) => self.messages[i] = r,
            None => self.messages.push(r),
        }
    }
}

fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

/// The text of a record's `content`: a string, or its parts' `text` (not `thought` parts),
/// joined as gemini joins them (no separator).
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("thought").is_none_or(|t| t == &Value::Bool(false)))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        Some(p @ Value::Object(_)) => content_text(Some(&Value::Array(vec![p.clone()]))),
        _ => String::new(),
    }
}

/// What gemini leaves out of a conversation it resumes (`isIgnoredUserContent`).
fn ignored_user(text: &str) -> bool {
    let t = text.trim();
    t.is_empty()
        || t.starts_with('/')
        || t.starts_with('?')
        || t.starts_with("<session_context>")
        || t.starts_with("<hook_context>")
}

/// The messages of a chat log, in order.
pub fn messages(bytes: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    for r in records(bytes) {
        let role = match r.get("type").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("gemini") => Role::Assistant,
            _ => continue,
        };
        let text = content_text(r.get("content"));
        let skip = match role {
            Role::User => ignored_user(&text),
            Role::Assistant => text.trim().is_empty(),
        };
        if skip {
            continue;
        }
        out.push(Message {
            role,
            at: r
                .get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_string),
            text,
        });
    }
    out
}
