//! Where the fakes keep their transcripts: the places the real tools use, under the
//! account home. The *place* follows the real tool (see [`super::super::ToolSpec::transcripts`]);
//! the *content* is the real tool's own format for claude and codex (what
//! [`crate::providers::records`] reads: a demo session has messages), and the fake's own JSON
//! lines for the others; every line says `"demo":true`. The fake reads them back on resume.
//!
//! | tool | transcript of conversation ID | confirmed |
//! |---|---|---|
//! | claude | `projects/<cwd, non-alphanumerics → '-'>/ID.jsonl` | place and naming (Agent SDK `sessions.py`) |
//! | codex | `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-ID.jsonl` | place and naming (public rollout paths) |
//! | gemini | `tmp/<sha256(cwd) hex>/chats/session-ID.jsonl` | the `tmp/<project>/chats` folder; the real file is one JSON document with another name |
//! | grok | `sessions/<cwd, non-alphanumerics → '-'>/ID/transcript.jsonl` | only "one folder per session under sessions/" |
//! | opencode | `storage/session/global/ID.jsonl` | only the `storage/session` folder |

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::providers::Tool;

use crate::providers::records::claude::project_folder as sanitize;

/// The transcript path of conversation `id` for the tools whose path does not depend on
/// time (all but codex).
pub fn path_for(tool: Tool, home: &Path, cwd: &Path, id: &str) -> PathBuf {
    let cwd_s = cwd.to_string_lossy();
    match tool {
        Tool::Claude => home
            .join("projects")
            .join(sanitize(&cwd_s))
            .join(format!("{id}.jsonl")),
        Tool::Gemini => home
            .join("tmp")
            .join(hex::encode(Sha256::digest(cwd_s.as_bytes())))
            .join("chats")
            .join(format!("session-{id}.jsonl")),
        Tool::Grok => home
            .join("sessions")
            .join(sanitize(&cwd_s))
            .join(id)
            .join("transcript.jsonl"),
        Tool::Opencode => home
            .join("storage")
            .join("session")
            .join("global")
            .join(format!("{id}.jsonl")),
        Tool::Codex => codex_new_path(home, id),
    }
}

/// A new codex rollout path, dated now (local time, as codex names them).
pub fn codex_new_path(home: &Path, id: &str) -> PathBuf {
    let now = chrono::Local::now();
    home.join("sessions")
        .join(now.format("%Y").to_string())
        .join(now.format("%m").to_string())
        .join(now.format("%d").to_string())
        .join(format!(
            "rollout-{}-{id}.jsonl",
            now.format("%Y-%m-%dT%H-%M-%S")
        ))
}

/// The codex rollout of thread `id`, if one exists under `home/sessions/YYYY/MM/DD/`.
pub fn codex_find(home: &Path, id: &str) -> Option<PathBuf> {
    let suffix = format!("-{id}.jsonl");
    let mut stack = vec![(home.join("sessions"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && depth < 3 {
                stack.push((p, depth + 1));
            } else if ft.is_file()
                && depth == 3
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&suffix))
            {
                return Some(p);
            }
        }
    }
    None
}

/// An append-only transcript file (0600, never through a symlink).
#[derive(Debug, Clone)]
pub struct Transcript {
    pub path: PathBuf,
}

impl Transcript {
    /// Opens (creating folders 0700 and the file 0600 when absent) the transcript at `path`.
    pub fn open(path: PathBuf) -> std::io::Result<Transcript> {
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        crate::files::open_private_append(&path).map_err(std::io::Error::other)?;
        Ok(Transcript { path })
    }

    /// The transcript at `path` if it exists.
    pub fn existing(path: PathBuf) -> Option<Transcript> {
        path.is_file().then_some(Transcript { path })
    }

    /// Appends one record.
    pub fn append(&self, v: &Value) -> std::io::Result<()> {
        let mut f = crate::files::open_private_append(&self.path).map_err(std::io::Error::other)?;
        let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
        line.push(b'\n');
        f.write_all(&line)
    }

    /// Appends a user or assistant message in `tool`'s own record format (see
    /// [`crate::providers::records`]): a claude transcript line, a codex rollout's
    /// `response_item` and `event_msg` `item_completed` lines; the other tools' fakes keep
    /// the fake's own lines (`{type, message: {role, content}}`). Every line says
    /// `"demo": true`.
    pub fn message(
        &self,
        tool: Tool,
        id: &str,
        cwd: &Path,
        role: &str,
        text: &str,
    ) -> std::io::Result<()> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        match tool {
            Tool::Claude => {
                let content = if role == "assistant" {
                    json!([{"type": "text", "text": text}])
                } else {
                    json!(text)
                };
                self.claude_line(id, cwd, role, content, json!({}))
            }
            Tool::Codex => {
                let (kind, block, item) = if role == "assistant" {
                    ("assistant", "output_text", "AgentMessage")
                } else {
                    ("user", "input_text", "UserMessage")
                };
                self.append(&json!({
                    "timestamp": now,
                    "type": "response_item",
                    "payload": {"type": "message", "role": kind,
                                "content": [{"type": block, "text": text}]},
                    "demo": true,
                }))?;
                self.append(&json!({
                    "timestamp": now,
                    "type": "event_msg",
                    "payload": {"type": "item_completed", "thread_id": id,
                                "item": {"type": item, "id": super::new_uuid().unwrap_or_default(),
                                         "content": [{"type": "text", "text": text}]}},
                    "demo": true,
                }))
            }
            _ => self.append(&json!({
                "type": role,
                "sessionId": id,
                "cwd": cwd.to_string_lossy(),
                "timestamp": now,
                "message": {"role": role, "content": text},
                "demo": true,
            })),
        }
    }

    /// Appends a Claude Code transcript line of `role` (`user` or `assistant`) whose
    /// `message.content` is `content` (text, `tool_use` or `tool_result` blocks), with the
    /// top-level fields of `extra` (e.g. `toolUseResult`). An assistant line carries the
    /// demo model and a `usage` whose input is the transcript's size so far over 4 (it
    /// grows as the conversation does, like a real request's context).
    pub fn claude_line(
        &self,
        id: &str,
        cwd: &Path,
        role: &str,
        content: Value,
        extra: Value,
    ) -> std::io::Result<()> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut message = json!({"role": role, "content": content});
        if role == "assistant" {
            let so_far = std::fs::metadata(&self.path).map_or(0, |m| m.len());
            message["model"] = json!(super::DEMO_MODEL);
            message["type"] = json!("message");
            message["stop_reason"] = json!("end_turn");
            message["usage"] = json!({
                "input_tokens": so_far / 4,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": message["content"].to_string().len() / 4,
            });
        }
        let mut line = json!({
            "parentUuid": null,
            "isSidechain": false,
            "userType": "external",
            "cwd": cwd.to_string_lossy(),
            "sessionId": id,
            "version": super::DEMO_NAME,
            "type": role,
            "message": message,
            "uuid": super::new_uuid().unwrap_or_default(),
            "timestamp": now,
            "demo": true,
        });
        if let (Some(l), Some(e)) = (line.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                l.insert(k.clone(), v.clone());
            }
        }
        self.append(&line)
    }

    /// Writes sub-agent `agent`'s own transcript beside this one, as Claude Code does
    /// (`<session>/subagents/agent-<agent>.jsonl`, every line `isSidechain: true` with its
    /// `agentId`): the task's prompt and the agent's answer.
    pub fn claude_subagent(
        &self,
        id: &str,
        cwd: &Path,
        agent: &str,
        prompt: &str,
        answer: &str,
    ) -> std::io::Result<()> {
        let path = self
            .path
            .with_extension("")
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"));
        let sub = Transcript::open(path)?;
        for (role, content) in [
            ("user", json!(prompt)),
            ("assistant", json!([{"type": "text", "text": answer}])),
        ] {
            sub.claude_line(
                id,
                cwd,
                role,
                content,
                json!({"isSidechain": true, "agentId": agent}),
            )?;
        }
        Ok(())
    }

    /// The (role, text) of every message, in order, read by the native-record readers
    /// (a codex rollout's events, else claude's lines, which the other fakes' lines are).
    pub fn messages(&self) -> std::io::Result<Vec<(String, String)>> {
        use std::io::Read;
        let mut f = crate::files::open_private_read(&self.path).map_err(std::io::Error::other)?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let mut m = crate::providers::records::codex::messages(&bytes);
        if m.is_empty() {
            m = crate::providers::records::claude::messages(&bytes);
        }
        Ok(m.into_iter()
            .map(|m| {
                let role = match m.role {
                    crate::providers::records::Role::User => "user",
                    crate::providers::records::Role::Assistant => "assistant",
                };
                (role.to_string(), m.text)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_rollouts_are_found_by_id() {
        let t = tempfile::tempdir().unwrap();
        let p = codex_new_path(t.path(), "abc");
        Transcript::open(p.clone()).unwrap();
        assert_eq!(codex_find(t.path(), "abc"), Some(p));
        assert_eq!(codex_find(t.path(), "bc"), None);
        assert_eq!(codex_find(t.path(), "zzz"), None);
    }

    #[test]
    fn transcripts_round_trip() {
        let t = tempfile::tempdir().unwrap();
        let path = path_for(Tool::Gemini, t.path(), Path::new("/w"), "s1");
        let tr = Transcript::open(path.clone()).unwrap();
        tr.message(Tool::Gemini, "s1", Path::new("/w"), "user", "hi")
            .unwrap();
        tr.message(
            Tool::Gemini,
            "s1",
            Path::new("/w"),
            "assistant",
            "demo reply",
        )
        .unwrap();
        assert_eq!(
            Transcript::existing(path).unwrap().messages().unwrap(),
            [
                ("user".to_string(), "hi".to_string()),
                ("assistant".to_string(), "demo reply".to_string())
            ]
        );
    }

    #[test]
    fn claude_and_codex_fakes_write_what_the_record_readers_read() {
        use crate::providers::records::{self, Role};
        let t = tempfile::tempdir().unwrap();
        for tool in [Tool::Claude, Tool::Codex] {
            let path = path_for(tool, t.path(), Path::new("/w"), "s1");
            let tr = Transcript::open(path.clone()).unwrap();
            tr.message(tool, "s1", Path::new("/w"), "user", "hi")
                .unwrap();
            tr.message(tool, "s1", Path::new("/w"), "assistant", "demo reply")
                .unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let m = match tool {
                Tool::Claude => records::claude::messages(&bytes),
                _ => records::codex::messages(&bytes),
            };
            let got: Vec<(Role, &str)> = m.iter().map(|m| (m.role, m.text.as_str())).collect();
            assert_eq!(
                got,
                [(Role::User, "hi"), (Role::Assistant, "demo reply")],
                "{tool:?}"
            );
            assert!(m.iter().all(|m| m.at.is_some()));
            // The fake's resume reads the same lines back.
            assert_eq!(tr.messages().unwrap().len(), 2);
        }
    }
}
