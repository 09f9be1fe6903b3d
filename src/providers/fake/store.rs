//! Where the fakes keep their transcripts: the places the real tools use, under the
//! account home. The *place* follows the real tool (see [`super::super::ToolSpec::transcripts`]);
//! the *content* is the real tool's own format for claude, codex and gemini (what
//! [`crate::providers::records`] reads: a demo session has messages), for opencode the
//! entries its `opencode export` prints (the fake's `export` prints them in that document),
//! and the fake's own JSON lines for grok; every line says `"demo":true`. The fake reads them
//! back on resume.
//!
//! | tool | transcript of conversation ID | confirmed |
//! |---|---|---|
//! | claude | `projects/<cwd, non-alphanumerics → '-'>/ID.jsonl` | place and naming (Agent SDK `sessions.py`) |
//! | codex | `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-ID.jsonl` | place and naming (public rollout paths) |
//! | gemini | `tmp/<slug of the folder's name>/chats/session-YYYY-MM-DDThh-mm-ID[..8].jsonl` (+ `tmp/<slug>/.project_root`) | place, naming and lines (0.61.0, recorded) |
//! | grok | `sessions/<cwd, non-alphanumerics → '-'>/ID/transcript.jsonl` | only "one folder per session under sessions/" |
//! | opencode | `storage/session/global/ID.jsonl` (the fake's own; the real 1.18.33 keeps a SQLite `opencode.db`) | what `opencode export` prints (1.18.33, recorded) |

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
        Tool::Gemini => gemini_new_path(home, cwd, id),
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

/// Gemini CLI 0.61.0's project folder name for `cwd` (its `ProjectRegistry.slugify` of the
/// folder's name: lowercase, runs of other characters than letters and digits as one `-`),
/// `-1`, `-2`… when another folder already owns it (its `.project_root` names another path).
/// The folder's `.project_root` is written, as gemini writes it.
fn gemini_project(home: &Path, cwd: &Path) -> PathBuf {
    let name = cwd
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = match slug.trim_matches('-') {
        "" => "project".to_string(),
        s => s.to_string(),
    };
    let root = cwd.to_string_lossy();
    for n in 0..1000 {
        let candidate = if n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        };
        let dir = home.join("tmp").join(&candidate);
        let marker = dir.join(".project_root");
        match std::fs::read_to_string(&marker) {
            Ok(owner) if owner.trim() == root => return dir,
            Ok(_) => continue,
            Err(_) => {
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir);
                let _ = crate::files::write_atomic(&marker, root.as_bytes());
                return dir;
            }
        }
    }
    home.join("tmp").join(slug)
}

/// A new Gemini CLI chat log path for session `id` in `cwd`, named at this minute (UTC) as
/// 0.61.0 names them.
pub fn gemini_new_path(home: &Path, cwd: &Path, id: &str) -> PathBuf {
    let short: String = id.chars().take(8).collect();
    gemini_project(home, cwd).join("chats").join(format!(
        "session-{}-{short}.jsonl",
        chrono::Utc::now().format("%Y-%m-%dT%H-%M")
    ))
}

/// The chat log of gemini session `id`, found as the record reader finds it.
pub fn gemini_find(home: &Path, id: &str) -> Option<PathBuf> {
    crate::providers::records::gemini::candidates(home, id)
        .into_iter()
        .find(|p| {
            std::fs::read(p).is_ok_and(|b| {
                crate::providers::records::json_lines(&b)
                    .next()
                    .is_some_and(|v| v.get("sessionId").and_then(Value::as_str) == Some(id))
            })
        })
}

/// The transcript of conversation `id` of `tool`, if the fake wrote one.
pub fn find(tool: Tool, home: &Path, cwd: &Path, id: &str) -> Option<Transcript> {
    let path = match tool {
        Tool::Codex => codex_find(home, id)?,
        Tool::Gemini => gemini_find(home, id)?,
        _ => path_for(tool, home, cwd, id),
    };
    Transcript::existing(path)
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

    /// The transcript at `path`, not created until its first record (claude 2.1.332's
    /// interactive form writes its transcript only with the first message).
    pub fn lazy(path: PathBuf) -> Transcript {
        Transcript { path }
    }

    /// Appends one record (creating the folders 0700 and the file 0600 when absent).
    pub fn append(&self, v: &Value) -> std::io::Result<()> {
        if let Some(parent) = self.path.parent()
            && !parent.is_dir()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        let mut f = crate::files::open_private_append(&self.path).map_err(std::io::Error::other)?;
        let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
        line.push(b'\n');
        f.write_all(&line)
    }

    /// True while nothing was written.
    fn is_empty(&self) -> bool {
        !std::fs::metadata(&self.path).is_ok_and(|m| m.len() > 0)
    }

    /// The first line of a new gemini chat log or opencode session: gemini's metadata
    /// `{sessionId, projectHash, startTime, lastUpdated, kind}`, opencode's session `info`.
    pub fn head(&self, tool: Tool, id: &str, cwd: &Path) -> std::io::Result<()> {
        if !self.is_empty() {
            return Ok(());
        }
        let now = chrono::Utc::now();
        let cwd_s = cwd.to_string_lossy();
        match tool {
            Tool::Gemini => self.append(&json!({
                "sessionId": id,
                "projectHash": hex::encode(Sha256::digest(cwd_s.as_bytes())),
                "startTime": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "lastUpdated": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "kind": "main",
                "demo": true,
            })),
            Tool::Opencode => self.append(&json!({
                "session": {
                    "id": id, "slug": "demo-session", "projectID": "global",
                    "directory": cwd_s, "title": "proctor demo session",
                    "agent": "build",
                    "model": {"id": super::DEMO_MODEL, "providerID": "demo"},
                    "version": super::DEMO_NAME,
                    "time": {"created": now.timestamp_millis(), "updated": now.timestamp_millis()},
                },
                "demo": true,
            })),
            _ => Ok(()),
        }
    }

    /// Records a tool call of the fake's script in `tool`'s own shape (gemini: a `gemini`
    /// record with `toolCalls`; opencode: an assistant message with a `tool` part; codex: a
    /// rollout's call and its end event). The other tools' fakes record theirs elsewhere
    /// (claude) or not at all.
    #[allow(clippy::too_many_arguments)]
    pub fn tool_call(
        &self,
        tool: Tool,
        id: &str,
        cwd: &Path,
        call_id: &str,
        kind: &str,
        arg: &str,
        exit: i32,
        output: &str,
    ) -> std::io::Result<()> {
        self.head(tool, id, cwd)?;
        let now = chrono::Utc::now();
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let ms = now.timestamp_millis();
        match tool {
            Tool::Gemini => {
                let (name, args, display) = match kind {
                    "bash" => (
                        "run_shell_command",
                        json!({"command": arg, "description": format!("Run {arg}")}),
                        json!(output),
                    ),
                    "write" | "edit" => (
                        if kind == "write" {
                            "write_file"
                        } else {
                            "replace"
                        },
                        json!({"file_path": arg, "content": ""}),
                        json!({"fileName": arg, "filePath": cwd.join(arg).to_string_lossy(),
                               "isNewFile": kind == "write",
                               "diffStat": {"model_added_lines": 1, "model_removed_lines": 0,
                                            "user_added_lines": 0, "user_removed_lines": 0}}),
                    ),
                    "read" => ("read_file", json!({"file_path": arg}), json!("")),
                    other => (other, json!({"description": arg}), json!(output)),
                };
                let result_text = if name == "run_shell_command" {
                    format!("Output: {output}\nExit Code: {exit}")
                } else {
                    output.to_string()
                };
                let status = if exit == 0 || name == "run_shell_command" {
                    "success"
                } else {
                    "error"
                };
                self.append(&json!({
                    "id": super::new_uuid()?, "timestamp": at, "type": "gemini", "content": "",
                    "toolCalls": [{
                        "id": call_id, "name": name, "args": args,
                        "result": [{"functionResponse": {"id": call_id, "name": name,
                                    "response": {"output": result_text}}}],
                        "status": status, "timestamp": at, "resultDisplay": display,
                        "displayName": name, "description": arg,
                    }],
                    "thoughts": [], "model": super::DEMO_MODEL, "demo": true,
                }))
            }
            Tool::Opencode => {
                let (name, input, metadata) = match kind {
                    "bash" => (
                        "bash",
                        json!({"command": arg, "description": format!("Run {arg}")}),
                        json!({"output": output, "exit": exit, "description": format!("Run {arg}")}),
                    ),
                    "write" => (
                        "write",
                        json!({"filePath": cwd.join(arg).to_string_lossy(), "content": ""}),
                        json!({"filepath": cwd.join(arg).to_string_lossy(), "exists": false}),
                    ),
                    "edit" => (
                        "edit",
                        json!({"filePath": cwd.join(arg).to_string_lossy(),
                               "oldString": "", "newString": ""}),
                        json!({"filediff": {"file": cwd.join(arg).to_string_lossy(),
                                            "additions": 1, "deletions": 0}}),
                    ),
                    "read" => (
                        "read",
                        json!({"filePath": cwd.join(arg).to_string_lossy()}),
                        json!({}),
                    ),
                    other => (other, json!({"description": arg}), json!({})),
                };
                let state = if exit == 0 || name == "bash" {
                    json!({"status": "completed", "input": input, "output": output,
                           "title": arg, "metadata": metadata,
                           "time": {"start": ms, "end": ms}})
                } else {
                    json!({"status": "error", "input": input, "error": output,
                           "metadata": metadata, "time": {"start": ms, "end": ms}})
                };
                let mid = format!("msg_demo_{}", super::new_uuid()?.replace('-', ""));
                self.append(&json!({
                    "info": self.opencode_assistant(id, cwd, &mid, ms),
                    "parts": [{"type": "tool", "callID": call_id, "tool": name, "state": state,
                               "id": format!("prt_demo_{call_id}"), "sessionID": id,
                               "messageID": mid}],
                    "demo": true,
                }))
            }
            Tool::Codex => {
                // codex's rollout shapes (docs/providers.md, "Codex rollouts"): a shell call
                // is a `function_call` of `exec_command` ended by an `exec_command_end`
                // event; a file change is a `custom_tool_call` of `apply_patch` ended by a
                // `patch_apply_end` event.
                let (item, end) = match kind {
                    "edit" | "write" => {
                        let head = if kind == "write" { "Add" } else { "Update" };
                        let patch = format!(
                            "*** Begin Patch\n*** {head} File: {arg}\n+{output}\n*** End Patch\n"
                        );
                        (
                            json!({"type": "custom_tool_call", "status": "completed",
                                   "call_id": call_id, "name": "apply_patch", "input": patch}),
                            json!({"type": "patch_apply_end", "call_id": call_id,
                                   "success": exit == 0, "stdout": output, "stderr": ""}),
                        )
                    }
                    _ => {
                        let cmd = match kind {
                            "bash" => arg.to_string(),
                            "read" => format!("cat {arg}"),
                            other => format!("{other} {arg}"),
                        };
                        (
                            json!({"type": "function_call", "name": "exec_command",
                                   "arguments": json!({"cmd": cmd}).to_string(),
                                   "call_id": call_id}),
                            json!({"type": "exec_command_end", "call_id": call_id,
                                   "exit_code": exit, "aggregated_output": output}),
                        )
                    }
                };
                self.append(
                    &json!({"timestamp": at, "type": "response_item", "payload": item, "demo": true}),
                )?;
                self.append(
                    &json!({"timestamp": at, "type": "event_msg", "payload": end, "demo": true}),
                )
            }
            _ => Ok(()),
        }
    }

    /// An opencode assistant message's `info` (1.18.33's fields), with the demo model and
    /// tokens that grow with the session as a real request's context would.
    fn opencode_assistant(&self, id: &str, cwd: &Path, mid: &str, ms: i64) -> Value {
        let so_far = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        json!({
            "role": "assistant", "mode": "build", "agent": "build",
            "path": {"cwd": cwd.to_string_lossy(), "root": cwd.to_string_lossy()},
            "cost": 0,
            "tokens": {"input": so_far / 4, "output": 8, "reasoning": 0,
                       "cache": {"read": 0, "write": 0}},
            "modelID": super::DEMO_MODEL, "providerID": "demo",
            "time": {"created": ms, "completed": ms},
            "finish": "stop",
            "id": mid, "sessionID": id,
        })
    }

    /// Appends a user or assistant message in `tool`'s own record format (see
    /// [`crate::providers::records`]): a claude transcript line, a codex rollout's
    /// `response_item` and `event_msg` `item_completed` lines, a gemini chat log's message
    /// record (and its `$set` of `lastUpdated`), an opencode export's message entry
    /// (`{info, parts}`); grok's fake keeps the fake's own lines (`{type, message: {role,
    /// content}}`). Every line says `"demo": true`.
    pub fn message(
        &self,
        tool: Tool,
        id: &str,
        cwd: &Path,
        role: &str,
        text: &str,
    ) -> std::io::Result<()> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        self.head(tool, id, cwd)?;
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
            Tool::Gemini => {
                let mut r = json!({
                    "id": super::new_uuid()?,
                    "timestamp": now,
                    "type": if role == "assistant" { "gemini" } else { "user" },
                    "demo": true,
                });
                if role == "assistant" {
                    let so_far = std::fs::metadata(&self.path).map_or(0, |m| m.len());
                    r["content"] = json!(text);
                    r["thoughts"] = json!([]);
                    r["tokens"] = json!({"input": so_far / 4, "output": text.len() / 4,
                                         "cached": 0, "thoughts": 0, "tool": 0,
                                         "total": so_far / 4 + text.len() as u64 / 4});
                    r["model"] = json!(super::DEMO_MODEL);
                } else {
                    r["content"] = json!([{"text": text}]);
                }
                self.append(&r)?;
                self.append(&json!({"$set": {"lastUpdated": now}, "demo": true}))
            }
            Tool::Opencode => {
                let ms = chrono::Utc::now().timestamp_millis();
                let mid = format!("msg_demo_{}", super::new_uuid()?.replace('-', ""));
                let info = if role == "assistant" {
                    self.opencode_assistant(id, cwd, &mid, ms)
                } else {
                    json!({"role": "user", "time": {"created": ms}, "agent": "build",
                           "model": {"providerID": "demo", "modelID": super::DEMO_MODEL},
                           "summary": {"diffs": []}, "id": mid, "sessionID": id})
                };
                self.append(&json!({
                    "info": info,
                    "parts": [{"type": "text", "text": text,
                               "id": format!("prt_demo_{}", super::new_uuid()?.replace('-', "")),
                               "sessionID": id, "messageID": mid}],
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

    /// Appends the synthetic assistant line Claude Code 2.1.332 writes for a turn that ended
    /// on a limit (its `createAssistantAPIErrorMessage`): `isApiErrorMessage`, `error:
    /// "rate_limit"`, and for the plan's allocation used up `apiError:
    /// "usage_limit_reached"` (the binary's code), for HTTP 429 `apiErrorStatus: 429` and
    /// `apiErrorType: "rate_limit_error"` (recorded: tests/data/real/records); a reset time
    /// goes in `apiErrorParams.rate_limit_info` (a rejected window, Unix seconds), the model
    /// is `<synthetic>`.
    pub fn claude_limit(
        &self,
        id: &str,
        cwd: &Path,
        l: &super::script::FakeLimit,
        words: &str,
    ) -> std::io::Result<()> {
        let mut extra = json!({
            "isApiErrorMessage": true,
            "error": "rate_limit",
            "message": {
                "id": super::new_uuid().unwrap_or_default(),
                "type": "message",
                "role": "assistant",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": words}],
                "stop_reason": "stop_sequence",
                "stop_sequence": "",
                "usage": {"input_tokens": 0, "output_tokens": 0,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            },
        });
        if l.usage {
            extra["apiError"] = json!("usage_limit_reached");
        } else {
            // As recorded from claude 2.1.332 against a stub answering 429.
            extra["apiErrorStatus"] = json!(429);
            extra["apiErrorType"] = json!("rate_limit_error");
            extra["apiErrorIsTransient"] = json!(false);
        }
        if let Some(reset) = l.resets_at {
            extra["apiErrorParams"] = json!({"rate_limit_info": {
                "status": "rejected",
                "resetsAt": reset,
                "rateLimitType": "five_hour",
            }});
        }
        self.claude_line(id, cwd, "assistant", json!([]), extra)
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
            m = crate::providers::records::gemini::messages(&bytes);
        }
        if m.is_empty() {
            m = crate::providers::records::opencode::messages(&opencode_export(&bytes));
        }
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

/// The document `opencode export` prints for the fake's session file: `{info, messages}`
/// from its `session` line and its message entries (the `demo` marks dropped, as the real
/// export has none).
pub fn opencode_export(bytes: &[u8]) -> Vec<u8> {
    let mut info = Value::Null;
    let mut messages = Vec::new();
    for mut v in crate::providers::records::json_lines(bytes) {
        if let Some(o) = v.as_object_mut() {
            o.remove("demo");
        }
        if let Some(s) = v.get("session") {
            info = s.clone();
        } else if v.get("info").is_some() && v.get("parts").is_some() {
            messages.push(v);
        }
    }
    serde_json::to_vec_pretty(&json!({"info": info, "messages": messages})).unwrap_or_default()
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
