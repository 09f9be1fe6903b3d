//! Codex's rollout: `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl`
//! under the account home (`CODEX_HOME`), one `{timestamp, type, payload}` object per line:
//! `session_meta` first, then `response_item` (what went to and came from the model,
//! including the environment context and instructions codex adds as user items),
//! `event_msg` (what the conversation showed) and `turn_context`.
//!
//! A message is an `event_msg`: what the conversation showed, without the context items
//! codex adds to the model's input. Two shapes:
//! - codex 0.171.0 writes `{type: "item_completed", item: {type: "UserMessage" |
//!   "AgentMessage", content: [{type, text}]}}` (recorded: the user side, from a real
//!   offline turn; the `AgentMessage` side is read in the same shape, not recorded, since
//!   no model answered);
//! - earlier versions (published shape, 0.46) write `{type: "user_message", message}` and
//!   `{type: "agent_message", message}`.
//!
//! A rollout that has any `item_completed` message is read in that shape only (a version
//! writing both would otherwise count each message twice). The time is the line's
//! `timestamp`.
//!
//! codex 0.171.0's app-server names the rollout in its `thread/start` answer (`thread.path`)
//! but writes it only at the first turn: before it, the record is `pending`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Message, Role, json_lines};

/// The rollout of thread `id`, if a file of that name (`.jsonl`, or `.jsonl.zst`: zstd) is
/// under `home/sessions/YYYY/MM/DD/` (whatever it is: [`super::read_file`] refuses what is
/// not a plain file).
pub fn find(home: &Path, id: &str) -> Option<PathBuf> {
    if id.is_empty() || id.contains('/') {
        return None;
    }
    let suffix = format!("-{id}.jsonl");
    let zst = format!("-{id}.jsonl.zst");
    let mut stack = vec![(home.join("sessions"), 0)];
    let mut found: Vec<PathBuf> = Vec::new();
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if depth < 3 {
                if ft.is_dir() {
                    stack.push((p, depth + 1));
                }
            } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("rollout-") && (n.ends_with(&suffix) || n.ends_with(&zst))
            }) {
                found.push(p);
            }
        }
    }
    // One thread, one rollout; should two carry its id, the first by name is read (the
    // plain `.jsonl` before its `.jsonl.zst`).
    found.sort();
    found.into_iter().next()
}

/// The text blocks of an item's `content`, joined by a newline.
fn item_text(content: Option<&Value>) -> Option<String> {
    let blocks = content?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The messages of a rollout, in order.
pub fn messages(bytes: &[u8]) -> Vec<Message> {
    let mut items = Vec::new();
    let mut legacy = Vec::new();
    for v in json_lines(bytes) {
        if v.get("type").and_then(Value::as_str) != Some("event_msg") {
            continue;
        }
        let at = v
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(p) = v.get("payload") else { continue };
        match p.get("type").and_then(Value::as_str) {
            Some("item_completed") => {
                let role = match p.pointer("/item/type").and_then(Value::as_str) {
                    Some("UserMessage") => Role::User,
                    Some("AgentMessage") => Role::Assistant,
                    _ => continue,
                };
                if let Some(text) = item_text(p.pointer("/item/content")) {
                    items.push(Message { role, at, text });
                }
            }
            Some(kind @ ("user_message" | "agent_message")) => {
                let role = if kind == "user_message" {
                    Role::User
                } else {
                    Role::Assistant
                };
                if let Some(text) = p.get("message").and_then(Value::as_str) {
                    legacy.push(Message {
                        role,
                        at,
                        text: text.to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    if items.is_empty() { legacy } else { items }
}
