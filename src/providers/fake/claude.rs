//! The fake `claude`.
//!
//! stdio form (`-p --verbose --input-format stream-json --output-format stream-json
//! [--resume=ID]`): reads user lines, answers each with `system/init` (first turn only),
//! `assistant` frames and a `result` frame; answers `control_request`s (an `interrupt`
//! ends the turn in progress). Without `-p` it is the interactive form ([`super::pty`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::script::{self, Emit, Ended, Turn};
use super::store::{self, Transcript};
use super::{DEMO_MODEL, DEMO_NAME, Failure, Inbound};
use crate::providers::Tool;
use crate::providers::protocol::CLAUDE_NO_CONVERSATION;

/// The context window the fake reports in `modelUsage` (a demo figure, not a model's).
pub const DEMO_CONTEXT_WINDOW: u64 = 200_000;
const DEMO_MAX_OUTPUT: u64 = 32_000;
/// The tools listed in the fake's init frame (names of Claude Code's built-in tools).
const TOOLS: [&str; 6] = ["Bash", "Edit", "Glob", "Grep", "Read", "Write"];

struct Args {
    print: bool,
    verbose: bool,
    input_format: Option<String>,
    output_format: Option<String>,
    resume: Option<String>,
    /// `--permission-prompt-tool stdio`: permission requests go to stdin/stdout.
    permission_prompt_stdio: bool,
    settings: Option<String>,
    /// `--model`: the headless form's scripted model.
    model: Option<String>,
    version: bool,
}

fn parse_args(args: &[String]) -> Result<Args, Failure> {
    let mut a = Args {
        print: false,
        verbose: false,
        input_format: None,
        output_format: None,
        resume: None,
        permission_prompt_stdio: false,
        settings: None,
        model: None,
        version: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Failure::new(1, format!("error: option '{name}' argument missing")))
        };
        match arg.as_str() {
            "-p" | "--print" => a.print = true,
            "--verbose" => a.verbose = true,
            "--input-format" => a.input_format = Some(value("--input-format <format>")?),
            "--output-format" => a.output_format = Some(value("--output-format <format>")?),
            "-r" | "--resume" => a.resume = Some(value("-r, --resume [value]")?),
            "--permission-prompt-tool" => {
                a.permission_prompt_stdio = value("--permission-prompt-tool <tool>")? == "stdio"
            }
            s if s.starts_with("--resume=") => a.resume = Some(s["--resume=".len()..].to_string()),
            "--settings" => a.settings = Some(value("--settings <file-or-json>")?),
            "-v" | "--version" => a.version = true,
            "--model" => a.model = Some(value("--model <model>")?),
            // The headless juror's flags (read-only tools, no persistence): accepted as the
            // real tool accepts them; the fake has no tools to restrict.
            "--tools" => drop(value("--tools <tools...>")?),
            "--allowed-tools" | "--allowedTools" => {
                drop(value("--allowedTools, --allowed-tools <tools...>")?)
            }
            "--disallowed-tools" | "--disallowedTools" => {
                drop(value("--disallowedTools, --disallowed-tools <tools...>")?)
            }
            "--permission-mode" => {
                let m = value("--permission-mode <mode>")?;
                let ok = [
                    "acceptEdits",
                    "auto",
                    "bypassPermissions",
                    "manual",
                    "dontAsk",
                    "plan",
                    "default",
                ];
                if !ok.contains(&m.as_str()) {
                    return Err(Failure::new(
                        1,
                        format!(
                            "error: option '--permission-mode <mode>' argument '{m}' is invalid. Allowed choices are {}.",
                            ok.join(", ")
                        ),
                    ));
                }
            }
            "--no-session-persistence" | "--strict-mcp-config" | "--disable-slash-commands" => {}
            s if s.starts_with("--settings=") => {
                a.settings = Some(s["--settings=".len()..].to_string())
            }
            s if s.starts_with("--input-format=") => {
                a.input_format = Some(s["--input-format=".len()..].to_string())
            }
            s if s.starts_with("--output-format=") => {
                a.output_format = Some(s["--output-format=".len()..].to_string())
            }
            other => {
                return Err(Failure::new(1, format!("error: unknown option '{other}'")));
            }
        }
    }
    Ok(a)
}

pub(super) fn main(args: &[String], answer: super::headless::Answerer) -> Result<i32, Failure> {
    let a = parse_args(args)?;
    if a.version {
        super::write_out(format!("{}\n", super::headless::version_line("claude")).as_bytes())?;
        return Ok(0);
    }
    // The headless form: one prompt on stdin, one result object (`--output-format json`).
    if a.print && a.output_format.as_deref() == Some("json") && a.input_format.is_none() {
        return super::headless::claude(answer, a.model.as_deref());
    }
    let home = super::account_home(Tool::Claude).map_err(|m| Failure::new(1, m))?;
    let cwd = super::current_dir().map_err(|m| Failure::new(1, m))?;
    if let Some(id) = &a.resume
        && (!super::usable_id(id)
            || Transcript::existing(store::path_for(Tool::Claude, &home, &cwd, id)).is_none())
    {
        return Err(Failure::new(1, format!("{CLAUDE_NO_CONVERSATION} {id}")));
    }
    if let Some(settings) = &a.settings {
        super::hooks::configure(settings).map_err(|m| Failure::new(1, m))?;
    }
    if !a.print {
        return super::pty::main(Tool::Claude, a.resume.as_deref());
    }
    if a.output_format.as_deref() == Some("stream-json") && !a.verbose {
        return Err(Failure::new(
            1,
            "Error: When using --print, --output-format=stream-json requires --verbose",
        ));
    }
    if a.input_format.as_deref() != Some("stream-json")
        || a.output_format.as_deref() != Some("stream-json")
    {
        return Err(Failure::new(
            2,
            format!(
                "{DEMO_NAME}: the fake claude serves only the stream-json form \
                 (-p --verbose --input-format stream-json --output-format stream-json)"
            ),
        ));
    }
    if super::stdin_is_tty() {
        return Err(Failure::new(
            1,
            "Error: Input must be provided either through stdin or as a prompt argument when \
             using --print",
        ));
    }
    let session_id = match a.resume {
        Some(id) => id,
        None => super::new_uuid()?,
    };
    let transcript = Transcript::open(store::path_for(Tool::Claude, &home, &cwd, &session_id))?;
    Session {
        session_id,
        announced: announced(&home, &cwd),
        cwd,
        transcript,
        init_sent: false,
        turns: 0,
        permission_prompt_stdio: a.permission_prompt_stdio,
    }
    .serve()
}

struct Session {
    session_id: String,
    /// What the init frame announces: the MCP servers and skills configured ([`announced`]).
    announced: (Vec<Value>, Vec<String>),
    cwd: PathBuf,
    transcript: Transcript,
    init_sent: bool,
    turns: u64,
    /// Launched with `--permission-prompt-tool stdio`: `!ask` sends `can_use_tool`.
    permission_prompt_stdio: bool,
}

/// What the init frame announces, as Claude Code 2.1.332 reads it (checked with the real
/// one, tests/data/real/probe/claude-2.1.332-init-announced.stdout.jsonl): each user-scope
/// MCP server of the account home's `.claude.json` `mcpServers` as `{name, status, source:
/// "user"}` (the fake starts none, so each is `failed`, as the real one says of a server
/// that does not answer), and the skills of the account home's `skills/<name>/SKILL.md`
/// then the project's `.claude/skills/<name>/SKILL.md` (the fake has no built-in ones),
/// which are its slash commands too.
fn announced(home: &std::path::Path, cwd: &std::path::Path) -> (Vec<Value>, Vec<String>) {
    let mut servers = Vec::new();
    if let Ok(text) = std::fs::read_to_string(home.join(".claude.json"))
        && let Ok(v) = serde_json::from_str::<Value>(&text)
        && let Some(m) = v.get("mcpServers").and_then(Value::as_object)
    {
        for name in m.keys().take(100) {
            servers.push(json!({"name": name, "status": "failed", "source": "user"}));
        }
    }
    let mut skills: Vec<String> = Vec::new();
    for dir in [home.join("skills"), cwd.join(".claude").join("skills")] {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("SKILL.md").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        for n in names {
            if !skills.contains(&n) && skills.len() < 100 {
                skills.push(n);
            }
        }
    }
    (servers, skills)
}

fn uuid() -> String {
    super::new_uuid().unwrap_or_else(|_| "00000000-0000-4000-8000-000000000000".into())
}

/// The text of a user message: a string, or the text blocks of a content array.
fn user_text(v: &Value) -> Option<String> {
    match v.pointer("/message/content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

fn control_success(request_id: &Value) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": {}},
    })
}

/// An interrupt is a `control_request` whose `request.subtype` is `interrupt`.
fn classify(line: &[u8]) -> Option<Option<Vec<u8>>> {
    let v: Value = serde_json::from_slice(line).ok()?;
    if v.get("type")?.as_str()? == "control_request"
        && v.pointer("/request/subtype")?.as_str()? == "interrupt"
    {
        let mut reply = serde_json::to_vec(&control_success(v.get("request_id")?)).ok()?;
        reply.push(b'\n');
        return Some(Some(reply));
    }
    None
}

/// `!ask` in claude's shape: a `can_use_tool` control request (Bash for a command, Write
/// for a file), with a suggestion to allow such calls from now on.
struct ClaudeAsker {
    asked: std::cell::Cell<u64>,
}

impl script::Asker for ClaudeAsker {
    fn request(&self, kind: script::AskKind, what: &str) -> (Vec<u8>, Value) {
        let n = self.asked.get() + 1;
        self.asked.set(n);
        let id = json!(format!("demo-perm-{n}"));
        let (tool, input) = match kind {
            script::AskKind::Command => (
                "Bash",
                json!({"command": what, "description": "demo: the script asked to run it"}),
            ),
            script::AskKind::File => ("Write", json!({"file_path": what, "content": "demo\n"})),
        };
        let frame = json!({
            "type": "control_request",
            "request_id": id,
            "request": {
                "subtype": "can_use_tool",
                "tool_name": tool,
                "input": input,
                "permission_suggestions": [{
                    "type": "addRules",
                    "rules": [{"toolName": tool, "ruleContent": what}],
                    "behavior": "allow",
                    "destination": "localSettings",
                }],
                "tool_use_id": format!("toolu_demo_{n}"),
            },
        });
        let mut line = serde_json::to_vec(&frame).unwrap_or_default();
        line.push(b'\n');
        (line, id)
    }

    fn answer(&self, line: &[u8], id: &Value) -> Option<(String, Vec<u8>)> {
        let v: Value = serde_json::from_slice(line).ok()?;
        if v.get("type")?.as_str()? != "control_response"
            || v.pointer("/response/request_id")? != id
        {
            return None;
        }
        let word = match (
            v.pointer("/response/subtype").and_then(Value::as_str),
            v.pointer("/response/response/behavior")
                .and_then(Value::as_str),
        ) {
            (Some("success"), Some("allow"))
                if v.pointer("/response/response/updatedPermissions").is_some() =>
            {
                "allowed for the session"
            }
            (Some("success"), Some("allow")) => "allowed",
            (Some("success"), Some("deny")) => "denied",
            _ => "refused (error)",
        };
        Some((word.to_string(), Vec::new()))
    }

    fn abandoned(&self, id: &Value) -> Vec<u8> {
        let mut line =
            serde_json::to_vec(&json!({"type": "control_cancel_request", "request_id": id}))
                .unwrap_or_default();
        line.push(b'\n');
        line
    }
}

impl Session {
    fn serve(mut self) -> Result<i32, Failure> {
        let inbox = super::spawn_reader();
        let mut deferred: VecDeque<Inbound> = VecDeque::new();
        loop {
            let Some(line) = super::next_line(&inbox, &mut deferred) else {
                return Ok(0);
            };
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                eprintln!(
                    "Error parsing streaming input line: {}",
                    crate::text::one_line(&String::from_utf8_lossy(&line), 200)
                );
                continue;
            };
            match v.get("type").and_then(Value::as_str) {
                Some("user") => {
                    let text = user_text(&v).unwrap_or_default();
                    self.turn(&text, &inbox, &mut deferred)?;
                }
                Some("control_request") => {
                    // interrupt with no turn in progress, initialize, or anything else:
                    // acknowledged.
                    super::write_json(&control_success(
                        v.get("request_id").unwrap_or(&Value::Null),
                    ))?;
                }
                _ => {}
            }
        }
    }

    fn init_frame(&self) -> Value {
        json!({
            "type": "system",
            "subtype": "init",
            "cwd": self.cwd.to_string_lossy(),
            "session_id": self.session_id,
            "tools": TOOLS,
            "mcp_servers": self.announced.0,
            "model": DEMO_MODEL,
            "permissionMode": "default",
            "slash_commands": self.announced.1,
            "apiKeySource": "none",
            "claude_code_version": format!("{}-demo", env!("CARGO_PKG_VERSION")),
            "output_style": "default",
            "agents": [],
            "skills": self.announced.1,
            "plugins": [],
            "uuid": uuid(),
        })
    }

    fn assistant_frame(&self, n: u64, text: &str) -> Value {
        json!({
            "type": "assistant",
            "message": {
                "id": format!("msg_demo_{n}"),
                "type": "message",
                "role": "assistant",
                "model": DEMO_MODEL,
                "content": [{"type": "text", "text": text}],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": uuid(),
        })
    }

    fn content_frame(&self, n: u64, content: Value) -> Value {
        let mut f = self.assistant_frame(n, "");
        f["message"]["content"] = content;
        f
    }

    fn tool_result_frame(&self, tool_use_id: &str, content: &str, is_error: bool) -> Value {
        json!({
            "type": "user",
            "message": {"role": "user", "content": [{
                "tool_use_id": tool_use_id,
                "type": "tool_result",
                "content": content,
                "is_error": is_error,
            }]},
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": uuid(),
        })
    }

    /// A tool call, a thinking block, a todo list or an API retry, in stream-json's shapes
    /// (claude-agent-sdk-python `types.py`: `ToolUseBlock`, `ToolResultBlock`,
    /// `ThinkingBlock`; the `system` `api_retry` message).
    fn write_conversation(&self, n: u64, call: u32, e: Emit<'_>) -> std::io::Result<()> {
        let id = format!("toolu_demo_{n}_{call}");
        match e {
            Emit::Text(t) => super::write_json(&self.assistant_frame(n, t)),
            Emit::Tool {
                kind,
                arg,
                exit,
                output,
            } => {
                let (name, input) = match kind {
                    "bash" => (
                        "Bash".to_string(),
                        json!({"command": arg, "description": format!("Run {arg}")}),
                    ),
                    "edit" => (
                        "Edit".to_string(),
                        json!({"file_path": arg, "old_string": "", "new_string": ""}),
                    ),
                    "write" => (
                        "Write".to_string(),
                        json!({"file_path": arg, "content": ""}),
                    ),
                    "read" => ("Read".to_string(), json!({"file_path": arg})),
                    "task" => (
                        "Task".to_string(),
                        json!({"description": arg, "prompt": arg,
                               "subagent_type": "general-purpose"}),
                    ),
                    other => {
                        let mut c = other.chars();
                        let name = c
                            .next()
                            .map(|f| f.to_uppercase().chain(c).collect())
                            .unwrap_or_default();
                        (name, json!({"command": arg}))
                    }
                };
                let uses = json!([{"type": "tool_use", "id": id, "name": name, "input": input}]);
                super::write_json(&self.content_frame(n, uses.clone()))?;
                let content = if exit == 0 {
                    output.to_string()
                } else {
                    format!("Exit code {exit}\n{output}")
                };
                super::write_json(&self.tool_result_frame(&id, &content, exit != 0))?;
                // The same in the transcript, as Claude Code keeps it: the tool use, its
                // result with the structured `toolUseResult`, and a Task's sub-agent file.
                let agent = format!("demo{n}x{call}");
                let structured = match kind {
                    "write" => json!({"type": "create", "filePath": arg, "content": "",
                                      "structuredPatch": []}),
                    "edit" => json!({"filePath": arg, "oldString": "", "newString": "",
                                     "structuredPatch": []}),
                    "task" => json!({"status": if exit == 0 { "completed" } else { "failed" },
                                     "prompt": arg, "agentId": agent,
                                     "content": [{"type": "text", "text": output}]}),
                    _ => json!({"stdout": output, "stderr": "", "interrupted": false}),
                };
                if kind == "task" {
                    self.transcript.claude_subagent(
                        &self.session_id,
                        &self.cwd,
                        &agent,
                        arg,
                        output,
                    )?;
                }
                self.transcript.claude_line(
                    &self.session_id,
                    &self.cwd,
                    "assistant",
                    uses,
                    json!({}),
                )?;
                self.transcript.claude_line(
                    &self.session_id,
                    &self.cwd,
                    "user",
                    json!([{"tool_use_id": id, "type": "tool_result", "content": content,
                            "is_error": exit != 0}]),
                    json!({"toolUseResult": structured}),
                )
            }
            Emit::Think(t) => super::write_json(&self.content_frame(
                n,
                json!([{"type": "thinking", "thinking": t, "signature": "demo"}]),
            )),
            Emit::Plan(entries) => {
                let todos: Vec<Value> = entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        json!({"content": e, "status": if i == 0 { "in_progress" } else { "pending" },
                               "activeForm": e})
                    })
                    .collect();
                let uses = json!([{"type": "tool_use", "id": id, "name": "TodoWrite",
                                   "input": {"todos": todos}}]);
                super::write_json(&self.content_frame(n, uses.clone()))?;
                let done = "Todos have been modified successfully.";
                super::write_json(&self.tool_result_frame(&id, done, false))?;
                self.transcript.claude_line(
                    &self.session_id,
                    &self.cwd,
                    "assistant",
                    uses,
                    json!({}),
                )?;
                self.transcript.claude_line(
                    &self.session_id,
                    &self.cwd,
                    "user",
                    json!([{"tool_use_id": id, "type": "tool_result", "content": done}]),
                    json!({"toolUseResult": {"oldTodos": [], "newTodos": todos}}),
                )
            }
            Emit::Frame(f) => {
                let mut bytes = f.as_bytes().to_vec();
                bytes.push(b'\n');
                super::write_out(&bytes)
            }
            Emit::Fail(t) => super::write_json(&json!({
                "type": "system",
                "subtype": "api_retry",
                "attempt": 1,
                "max_retries": 10,
                "retry_delay_ms": 500,
                "error_status": null,
                "error": t,
                "session_id": self.session_id,
                "uuid": uuid(),
            })),
        }
    }

    /// A turn that ends on an account limit, in claude's shapes: a rejected
    /// `rate_limit_event` (when a reset is scripted), the API error as a `<synthetic>`
    /// assistant message (`error` `usage_limit_reached` or `rate_limit`), then the `result`
    /// of the API error (`is_error`, `terminal_reason` `api_error`, `api_error_status` 429
    /// for a rate limit). The shapes: claude-agent-sdk-python `types.py`
    /// (`RateLimitEvent`, `AssistantMessageError`), docs/providers.md.
    fn limited(&self, n: u64, l: script::FakeLimit, started: Instant) -> Result<(), Failure> {
        if let Some(reset) = l.resets_at {
            super::write_json(&json!({
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": reset,
                    "rateLimitType": "five_hour",
                    "overageStatus": "rejected",
                    "overageDisabledReason": "org_level_disabled",
                    "isUsingOverage": false,
                },
                "uuid": uuid(),
                "session_id": self.session_id,
            }))?;
        }
        let words = l.as_text().trim_end().to_string();
        let (error, status) = if l.usage {
            ("usage_limit_reached", Value::Null)
        } else {
            ("rate_limit", json!(429))
        };
        let mut synthetic = self.assistant_frame(n, &words);
        synthetic["message"]["model"] = json!("<synthetic>");
        synthetic["error"] = json!(error);
        synthetic["is_api_error_message"] = json!(true);
        super::write_json(&synthetic)?;
        let mut result = json!({
            "type": "result",
            "subtype": "success",
            "is_error": true,
            "duration_ms": started.elapsed().as_millis() as u64,
            "duration_api_ms": 0,
            "num_turns": n,
            "result": words,
            "stop_reason": "stop_sequence",
            "terminal_reason": "api_error",
            "session_id": self.session_id,
            "total_cost_usd": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            "modelUsage": {},
            "permission_denials": [],
            "uuid": uuid(),
        });
        if !status.is_null() {
            result["api_error_status"] = status;
        }
        super::write_json(&result)?;
        Ok(())
    }

    fn turn(
        &mut self,
        text: &str,
        inbox: &std::sync::mpsc::Receiver<Inbound>,
        deferred: &mut VecDeque<Inbound>,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        self.turns += 1;
        let n = self.turns;
        if !self.init_sent {
            super::write_json(&self.init_frame())?;
            self.init_sent = true;
        }
        self.transcript
            .message(Tool::Claude, &self.session_id, &self.cwd, "user", text)?;
        let steps = script::parse(text);
        let answer = |b: &[u8]| super::write_out(b);
        let asker = ClaudeAsker {
            asked: std::cell::Cell::new(n * 100),
        };
        let mut turn = Turn {
            inbox,
            deferred,
            classify: &classify,
            sigint: None,
            answer: &answer,
            ask: self
                .permission_prompt_stdio
                .then_some(&asker as &dyn script::Asker),
        };
        let session_id = self.session_id.clone();
        let me = &*self;
        let mut calls = 0u32;
        let mut emit = |e: Emit<'_>| match e {
            Emit::Text(chunk) => super::write_json(&me.assistant_frame(n, chunk)),
            other => {
                calls += 1;
                me.write_conversation(n, calls, other)
            }
        };
        let ended = turn.run(&steps, &mut emit)?;
        let (reply, subtype, is_error, terminal) = match &ended {
            Ended::Completed { text, notes } => {
                let r = script::reply(n, text, notes);
                super::write_json(&self.assistant_frame(n, &r))?;
                (r, "success", false, "completed")
            }
            Ended::Interrupted => (
                String::new(),
                "error_during_execution",
                true,
                "aborted_streaming",
            ),
            Ended::Limited(l) => return self.limited(n, *l, started),
        };
        if matches!(ended, Ended::Completed { .. }) {
            self.transcript
                .message(Tool::Claude, &session_id, &self.cwd, "assistant", &reply)?;
        }
        let input_tokens = text.len() as u64 / 4;
        let output_tokens = reply.len() as u64 / 4;
        super::write_json(&json!({
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": started.elapsed().as_millis() as u64,
            "duration_api_ms": 0,
            "num_turns": n,
            "result": reply,
            "stop_reason": if is_error { Value::Null } else { json!("end_turn") },
            "terminal_reason": terminal,
            "session_id": session_id,
            "total_cost_usd": 0,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
            "modelUsage": {
                DEMO_MODEL: {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "cacheReadInputTokens": 0,
                    "cacheCreationInputTokens": 0,
                    "webSearchRequests": 0,
                    "costUSD": 0,
                    "contextWindow": DEMO_CONTEXT_WINDOW,
                    "maxOutputTokens": DEMO_MAX_OUTPUT,
                }
            },
            "permission_denials": [],
            "uuid": uuid(),
        }))?;
        Ok(())
    }
}
