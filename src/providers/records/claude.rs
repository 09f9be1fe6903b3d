//! Claude Code's transcript: `projects/<sanitised cwd>/<session id>.jsonl` under the account
//! home (`CLAUDE_CONFIG_DIR`), one JSON object per line, appended as the conversation goes.
//!
//! A message is a line of `type` `user` or `assistant` whose `message.content` holds text
//! (a string, or an array with `text` blocks, joined by a newline). Lines of other types
//! (`summary`, `file-history-snapshot`, `queue-operation`, `system`, …), sub-agent lines
//! (`isSidechain: true`), meta lines (`isMeta: true`, e.g. the caveat claude writes before
//! a local command) and lines with no text (a `tool_result` sent back, a `tool_use` or
//! `thinking` block alone) are not messages. The time is the line's `timestamp`.
//!
//! Sub-agents write their own files beside it, `<session id>/subagents/agent-<id>.jsonl`
//! ([`subagents`]).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Message, Role, json_lines};

/// The longest sanitised folder name before a hash suffix (Agent SDK `MAX_SANITIZED_LENGTH`).
const MAX_SANITIZED: usize = 200;

/// Claude Code's project folder name for a working folder: every character that is not an
/// ASCII letter or digit becomes `-`; a name over 200 characters is cut and suffixed with a
/// hash (the Agent SDK's `_sanitize_path` / `_simple_hash`).
pub fn project_folder(path: &str) -> String {
    let s: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if s.chars().count() <= MAX_SANITIZED {
        return s;
    }
    let cut: String = s.chars().take(MAX_SANITIZED).collect();
    format!("{cut}-{}", simple_hash(path))
}

/// The JavaScript-style 32-bit string hash in base 36 that Claude Code appends.
fn simple_hash(s: &str) -> String {
    let mut h: i32 = 0;
    for c in s.chars() {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(c as i32);
    }
    let mut n = u64::from(h.unsigned_abs());
    if n == 0 {
        return "0".into();
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The transcript of session `id` run in `cwd`.
pub fn path(home: &Path, cwd: &Path, id: &str) -> PathBuf {
    home.join("projects")
        .join(project_folder(&cwd.to_string_lossy()))
        .join(format!("{id}.jsonl"))
}

/// The sub-agent transcripts of session `id` (names only; read them with
/// [`super::read_file`]), sorted by name.
pub fn subagents(home: &Path, cwd: &Path, id: &str) -> Vec<PathBuf> {
    let dir = home
        .join("projects")
        .join(project_folder(&cwd.to_string_lossy()))
        .join(id)
        .join("subagents");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("agent-") && n.ends_with(".jsonl"))
        })
        .collect();
    out.sort();
    out
}

/// The folder of session `id`'s finished workflow summaries, `<session id>/workflows/`
/// beside its transcript (Claude Code writes `<runId>.json` there when a workflow ends;
/// its `scripts/` sub-folder holds the scripts, not summaries).
pub fn workflows_dir(home: &Path, cwd: &Path, id: &str) -> PathBuf {
    home.join("projects")
        .join(project_folder(&cwd.to_string_lossy()))
        .join(id)
        .join("workflows")
}

/// The finished workflow summaries of session `id`: each `<runId>.json` of
/// [`workflows_dir`] (the most recently changed [`super::activity::MAX_SUMMARIES`], oldest
/// first), read under the transcript's rules ([`super::read_file`]: under the account home,
/// no symlinked folder, one name, a plain file, 8 MiB per file, within the request's
/// budget) and parsed ([`super::activity::claude_workflow_summary`]). Each is its run id
/// (the file's name) with the summary, or why it is unreadable: a refused file, a summary
/// naming another run, or one that is not the tool's shape is never an empty success.
pub fn workflow_summaries(
    home: &Path,
    cwd: &Path,
    id: &str,
    budget: &mut super::Budget,
) -> Summaries {
    use super::activity::{MAX_SUMMARIES, claude_workflow_summary};
    let dir = workflows_dir(home, cwd, id);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Summaries::default();
    };
    // A folder an agent filled with names is looked through up to a bound, and what lies
    // past it is said, not skipped in silence.
    let mut entries = entries.flatten();
    let mut found: Vec<(std::time::SystemTime, String, PathBuf)> = entries
        .by_ref()
        .take(MAX_SCAN)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let run = name.strip_suffix(".json")?.to_string();
            if run.is_empty() {
                return None;
            }
            let at = std::fs::symlink_metadata(e.path())
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            Some((at, run, e.path()))
        })
        .collect();
    let more = entries.next().is_some();
    found.sort();
    let over = found.len().saturating_sub(MAX_SUMMARIES);
    found.drain(..over);
    let overflow = more.then(|| {
        format!(
            "{} holds more than {MAX_SCAN} entries: only the first {MAX_SCAN} were looked at",
            dir.display()
        )
    });
    let read = found
        .into_iter()
        .map(|(_, run, path)| {
            let read = match super::read_file(home, &path, budget) {
                Ok(Some(bytes)) => claude_workflow_summary(&bytes).and_then(|w| {
                    if w.run_id == run {
                        Ok(w)
                    } else {
                        Err(format!(
                            "{} names run {}, not the run its name says",
                            path.display(),
                            super::activity::bound(&w.run_id, 64)
                        ))
                    }
                }),
                Ok(None) => Err(format!("{} went away while it was read", path.display())),
                Err(e) => Err(e.to_string()),
            };
            let read = read.map_err(|e| {
                if e.contains(&*path.to_string_lossy()) {
                    e
                } else {
                    format!("{}: {e}", path.display())
                }
            });
            (super::activity::bound(&run, 256), read)
        })
        .collect();
    Summaries { read, overflow }
}

/// What [`workflow_summaries`] found: each summary looked at (its run id, the summary or why
/// it is unreadable), and, when the folder held more entries than are looked at, that.
#[derive(Debug, Default)]
pub struct Summaries {
    pub read: Vec<(String, Result<super::activity::Workflow, String>)>,
    pub overflow: Option<String>,
}

/// The most entries of a session's workflows folder looked at.
const MAX_SCAN: usize = 4096;

/// The text of a `message.content`: a string, or the `text` blocks of an array.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// The messages of a transcript, in order.
pub fn messages(bytes: &[u8]) -> Vec<Message> {
    parse(bytes, false)
}

/// The turns of a sub-agent's own transcript (every line of it is `isSidechain: true`).
pub fn agent_turns(bytes: &[u8]) -> Vec<Message> {
    parse(bytes, true)
}

/// True for an agent id a sub-agent file may be named by (`agent-<id>.jsonl`): 1 to 128
/// ASCII letters, digits, `-` and `_` (so never `..`, `/` or a NUL).
pub fn valid_agent_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The transcript of sub-agent `agent` of session `id`, when `agent` is a valid id.
pub fn agent_path(home: &Path, cwd: &Path, id: &str, agent: &str) -> Option<PathBuf> {
    valid_agent_id(agent).then(|| {
        home.join("projects")
            .join(project_folder(&cwd.to_string_lossy()))
            .join(id)
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"))
    })
}

fn parse(bytes: &[u8], sidechain: bool) -> Vec<Message> {
    let mut out = Vec::new();
    for v in json_lines(bytes) {
        let role = match v.get("type").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let flag = |k: &str| v.get(k).and_then(Value::as_bool) == Some(true);
        if (flag("isSidechain") && !sidechain) || flag("isMeta") || flag("isCompactSummary") {
            continue;
        }
        let Some(text) = v.pointer("/message/content").and_then(content_text) else {
            continue;
        };
        out.push(Message {
            role,
            at: v
                .get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_string),
            text,
        });
    }
    out
}

#[cfg(test)]
mod folder_tests {
    use super::*;

    #[test]
    fn project_folders_follow_the_sdk_rule() {
        assert_eq!(project_folder("/home/u/my.project"), "-home-u-my-project");
        let long = format!("/{}", "a".repeat(300));
        let s = project_folder(&long);
        assert!(s.starts_with(&format!("-{}", "a".repeat(199))));
        assert_eq!(s.chars().nth(200), Some('-'));
        assert!(s.len() > 201);
        assert_eq!(simple_hash(""), "0");
        // "a" = 97 = "2p" in base 36.
        assert_eq!(simple_hash("a"), "2p");
    }
}
