//! The conversation, as the tool said it: one typed event model ([`Said`]) for what a pipe
//! session says, decoded from each stdio protocol by a stateful, pure [`Reader`] (no I/O, no
//! clock).
//!
//! The reader sees both directions of the pipes: what the tool wrote (its stdout and stderr)
//! and what proctor wrote to it (its stdin: the handshake, the person's inputs, the replies).
//! From proctor's side it takes the person's turns (claude `user` lines, codex `turn/start`,
//! ACP `session/prompt`) and the ids of proctor's own requests, so that the answers to them
//! (a thread or session id, a prompt's `stopReason`, an error) can be read.
//!
//! | type | claude stream-json | codex app-server | ACP |
//! |---|---|---|---|
//! | `person_turn` | proctor's `user` line | proctor's `turn/start` (codex's `item/started` `userMessage` echo is not shown twice) | proctor's `session/prompt`; `user_message_chunk` (a loaded session's history) |
//! | `agent_text` | `assistant` `text` block | `item/agentMessage/delta`; `item/completed` `agentMessage` without deltas | `agent_message_chunk` |
//! | `reasoning` | `assistant` `thinking` block | `item/reasoning/summaryTextDelta`; `item/completed` `reasoning` `summary` | `agent_thought_chunk` |
//! | `tool_call` | `assistant` `tool_use` (started), `user` `tool_result` (ended or failed: `is_error`; the exit code from its `Exit code N` text) | `item/started` / `item/completed` of `commandExecution` (`command`, `exitCode`, `aggregatedOutput`), `fileChange`, `mcpToolCall`, `dynamicToolCall`, `webSearch`, `imageView` | `tool_call`, `tool_call_update` (`status`, `content`, `locations`, `rawInput.command`) |
//! | `file_change` | — | `item/completed` `fileChange` `changes[]` (`path`, `kind.type`) | `tool_call` content of type `diff` |
//! | `plan` | `TodoWrite` tool call's `todos` | `turn/plan/updated` | `plan` |
//! | `usage` | `result` (`usage`, `total_cost_usd`, `modelUsage.*.contextWindow`) | `thread/tokenUsage/updated` | `usage_update` (`used`, `size`, `cost`); `session/prompt` result `usage` |
//! | `error` | `assistant` with `error` (`is_api_error_message`), `system` `api_retry`, an `is_error` `result` | `error` (`willRetry`, `additionalDetails`), an error answer to proctor's request | an error answer to proctor's request |
//! | `warning` | — | `warning`, `configWarning` | — |
//! | `permission` | `control_request` `can_use_tool` | `*requestApproval`, `applyPatchApproval`, `execCommandApproval` | `session/request_permission` |
//! | `session` | `system` `init` (`session_id`, `model`) | `thread/start` / `thread/resume` result | `session/new` / `session/load` result |
//! | `turn_started` | — | `turn/started` | — |
//! | `turn_ended` | `result` (`terminal_reason`, `subtype`, `is_error`) | `turn/completed` (`turn.status`, `turn.error`) | `session/prompt` result `stopReason` |
//! | `raw` | a line that is not a frame; stderr | the same | the same |
//!
//! What the tool did not say stays unknown (`None`): claude reports no exit code for a
//! command that succeeded, codex no cost, ACP agents often no usage at all.
//!
//! Strings are the tool's own, bounded ([`MAX_TEXT`], [`MAX_OUTPUT`], [`MAX_FIELD`]) but not
//! sanitised: whoever prints them passes them through [`crate::text`] (human output) or
//! `serde_json` (machine output).

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::StdioProtocol;

/// The most characters of one text chunk (agent text, reasoning, a person's turn).
pub const MAX_TEXT: usize = 16 * 1024;
/// The most characters of a tool call's output kept.
pub const MAX_OUTPUT: usize = 4 * 1024;
/// The most characters of a short field (a command, a path, a title, a message).
pub const MAX_FIELD: usize = 1024;
/// The most tool calls the reader follows at once (the oldest is forgotten past it).
const MAX_OPEN_CALLS: usize = 256;

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The tool wrote it on its stdout.
    Stdout,
    /// The tool wrote it on its stderr.
    Stderr,
    /// proctor wrote it to the tool's stdin.
    Stdin,
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Started,
    Ended,
    Failed,
    /// The call was refused (codex `declined`; a permission denied).
    Declined,
}

/// How a turn ended, as the tool said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    Completed,
    Interrupted,
    Failed,
}

/// One entry of a plan or todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanEntry {
    pub text: String,
    /// The tool's word (`pending`, `in_progress`, `inProgress`, `completed`), if it gave one.
    pub status: Option<String>,
}

/// One thing a session said (or that the person said to it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Said {
    /// The person's turn: what proctor wrote as the operator's input.
    PersonTurn {
        text: String,
    },
    /// The agent's words: a whole message or a streamed chunk (chunks follow each other).
    AgentText {
        text: String,
    },
    /// A reasoning summary (or a chunk of one), where the tool sends it.
    Reasoning {
        text: String,
    },
    /// A tool call: reported when it starts and again when it ends (with what is known
    /// then).
    ToolCall {
        id: String,
        /// The tool's name or kind for it (`Bash`, `commandExecution`, `execute`, …).
        kind: String,
        title: Option<String>,
        command: Option<String>,
        path: Option<String>,
        status: ToolStatus,
        exit_code: Option<i64>,
        /// The call's output, bounded ([`MAX_OUTPUT`]), once it ended.
        output: Option<String>,
    },
    /// A file the tool changed (`add`, `delete`, `update`, or the tool's word).
    FileChange {
        path: String,
        change: String,
    },
    /// The plan or todo list, whole, as it stands now.
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// Usage as the tool reports it; what it did not report is `None`.
    Usage {
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cost_usd: Option<f64>,
        context_used: Option<u64>,
        context_window: Option<u64>,
    },
    /// An error the tool reported (or an error answer to proctor's request).
    Error {
        message: String,
        detail: Option<String>,
        /// Whether the tool said it will retry.
        will_retry: Option<bool>,
        attempt: Option<u64>,
        max_attempts: Option<u64>,
    },
    Warning {
        message: String,
    },
    /// The tool asks for a permission (answered elsewhere).
    Permission {
        method: String,
        what: Option<String>,
    },
    /// The tool reported its conversation (session, thread) id.
    Session {
        id: String,
        model: Option<String>,
    },
    TurnStarted,
    TurnEnded {
        outcome: TurnOutcome,
        /// The tool's own word (`terminal_reason`, `turn.status`, `stopReason`) or message.
        detail: Option<String>,
    },
    /// A line that is not a protocol frame (or a stderr line).
    Raw {
        stderr: bool,
        text: String,
    },
}

/// A tool call being followed.
#[derive(Debug, Clone, Default)]
struct Call {
    kind: String,
    title: Option<String>,
    command: Option<String>,
    path: Option<String>,
    output: String,
    /// A `TodoWrite` call (shown as a plan, its result hidden).
    plan: bool,
}

/// The stateful decoder of one pipe session's lines.
#[derive(Debug, Clone)]
pub struct Reader {
    protocol: Option<StdioProtocol>,
    /// proctor's requests by id: the method.
    requests: HashMap<String, String>,
    /// The person's turns written and not yet echoed by the tool (codex, ACP).
    echo: VecDeque<String>,
    calls: HashMap<String, Call>,
    order: VecDeque<String>,
    /// Items whose text came as deltas (codex): their completed text is not repeated.
    streamed: HashSet<String>,
    /// The last error message of the turn (claude repeats it in its `result`).
    last_error: Option<String>,
}

/// Cuts `s` to `max` characters (with `…`).
fn bound(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => {
            let mut out = s[..i].to_string();
            out.push('…');
            out
        }
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn field(v: &Value, ptr: &str) -> Option<String> {
    str_at(v, ptr).map(|s| bound(s, MAX_FIELD))
}

fn u64_at(v: &Value, ptr: &str) -> Option<u64> {
    v.pointer(ptr).and_then(Value::as_u64)
}

/// A JSON-RPC id as a map key (numbers and strings are both used).
fn id_key(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

/// The text blocks of a content array (or a plain string).
fn texts(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let t: Vec<&str> = items
                .iter()
                .filter(|b| matches!(str_at(b, "/type"), Some("text") | None))
                .filter_map(|b| str_at(b, "/text"))
                .collect();
            (!t.is_empty()).then(|| t.join("\n"))
        }
        _ => None,
    }
}

/// The exit code claude writes at the start of a failed Bash result (`Exit code 1`).
fn claude_exit_code(output: &str) -> Option<i64> {
    let rest = output
        .trim_start()
        .strip_prefix("Error: ")
        .unwrap_or(output.trim_start());
    let rest = rest.strip_prefix("Exit code ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Reader {
    /// A reader of `protocol`'s lines; `None` shows every line as it is (raw).
    pub fn new(protocol: Option<StdioProtocol>) -> Reader {
        Reader {
            protocol,
            requests: HashMap::new(),
            echo: VecDeque::new(),
            calls: HashMap::new(),
            order: VecDeque::new(),
            streamed: HashSet::new(),
            last_error: None,
        }
    }

    /// A reader for the tool named `tool` (`claude`, `codex`, …); raw for an unknown name.
    pub fn for_tool(tool: &str) -> Reader {
        Reader::new(
            super::Tool::parse(tool)
                .ok()
                .map(|t| t.spec().stdio_protocol),
        )
    }

    /// Whether lines are decoded (a known protocol).
    pub fn decodes(&self) -> bool {
        self.protocol.is_some()
    }

    /// What one line (without or with its `\n`) means.
    pub fn read(&mut self, dir: Direction, line: &[u8]) -> Vec<Said> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut out = Vec::new();
        let raw = |stderr| Said::Raw {
            stderr,
            text: bound(&String::from_utf8_lossy(line), MAX_TEXT),
        };
        if dir == Direction::Stderr {
            out.push(raw(true));
            return out;
        }
        let frame = serde_json::from_slice::<Value>(line)
            .ok()
            .filter(Value::is_object);
        let (Some(protocol), Some(v)) = (self.protocol, frame) else {
            // What proctor writes is always a frame; a stray line from proctor is not shown.
            if dir == Direction::Stdout && !line.is_empty() {
                out.push(raw(false));
            }
            return out;
        };
        match (protocol, dir) {
            (StdioProtocol::ClaudeStreamJson, Direction::Stdin) => self.claude_in(&v, &mut out),
            (StdioProtocol::ClaudeStreamJson, _) => self.claude_out(&v, &mut out),
            (StdioProtocol::CodexAppServer, Direction::Stdin) => self.codex_in(&v, &mut out),
            (StdioProtocol::CodexAppServer, _) => self.codex_out(&v, &mut out),
            (StdioProtocol::Acp, Direction::Stdin) => self.acp_in(&v, &mut out),
            (StdioProtocol::Acp, _) => self.acp_out(&v, &mut out),
        }
        out
    }

    fn remember_request(&mut self, v: &Value) {
        if let (Some(id), Some(m)) = (v.get("id").and_then(id_key), str_at(v, "/method")) {
            if self.requests.len() >= MAX_OPEN_CALLS {
                self.requests.clear();
            }
            self.requests.insert(id, m.to_string());
        }
    }

    fn person(&mut self, text: String, echoed: bool, out: &mut Vec<Said>) {
        let text = bound(&text, MAX_TEXT);
        if echoed {
            if self.echo.len() >= 16 {
                self.echo.pop_front();
            }
            self.echo.push_back(text.clone());
        }
        out.push(Said::PersonTurn { text });
    }

    /// A user message the tool reported: shown unless it is the echo of proctor's input.
    fn echo_or_person(&mut self, text: String, out: &mut Vec<Said>) {
        let text = bound(&text, MAX_TEXT);
        if self.echo.front() == Some(&text) {
            self.echo.pop_front();
            return;
        }
        out.push(Said::PersonTurn { text });
    }

    fn start_call(&mut self, id: &str, call: Call, out: &mut Vec<Said>) {
        if self.order.len() >= MAX_OPEN_CALLS
            && let Some(old) = self.order.pop_front()
        {
            self.calls.remove(&old);
        }
        out.push(Said::ToolCall {
            id: bound(id, MAX_FIELD),
            kind: call.kind.clone(),
            title: call.title.clone(),
            command: call.command.clone(),
            path: call.path.clone(),
            status: ToolStatus::Started,
            exit_code: None,
            output: None,
        });
        self.order.push_back(id.to_string());
        self.calls.insert(id.to_string(), call);
    }

    fn add_output(&mut self, id: &str, text: &str) {
        if let Some(c) = self.calls.get_mut(id)
            && c.output.chars().count() < MAX_OUTPUT
        {
            c.output.push_str(text);
        }
    }

    /// Ends a call: what was learnt when it started, updated by `update`.
    fn end_call(
        &mut self,
        id: &str,
        status: ToolStatus,
        exit_code: Option<i64>,
        update: Call,
        out: &mut Vec<Said>,
    ) {
        let known = self.calls.remove(id);
        self.order.retain(|o| o != id);
        let was_plan = known.as_ref().is_some_and(|c| c.plan);
        if was_plan {
            return;
        }
        let c = known.unwrap_or_default();
        let or = |a: Option<String>, b: Option<String>| a.or(b);
        let output = if update.output.is_empty() {
            c.output
        } else {
            update.output
        };
        out.push(Said::ToolCall {
            id: bound(id, MAX_FIELD),
            kind: if update.kind.is_empty() {
                c.kind
            } else {
                update.kind
            },
            title: or(update.title, c.title),
            command: or(update.command, c.command),
            path: or(update.path, c.path),
            status,
            exit_code,
            output: (!output.is_empty()).then(|| bound(&output, MAX_OUTPUT)),
        });
    }

    fn error(&mut self, message: &str, detail: Option<String>, out: &mut Vec<Said>) {
        let message = bound(message, MAX_FIELD);
        self.last_error = Some(message.clone());
        out.push(Said::Error {
            message,
            detail,
            will_retry: None,
            attempt: None,
            max_attempts: None,
        });
    }

    // ---- claude stream-json ----

    fn claude_in(&mut self, v: &Value, out: &mut Vec<Said>) {
        if str_at(v, "/type") == Some("user")
            && let Some(t) = texts(v.pointer("/message/content"))
        {
            self.last_error = None;
            self.person(t, false, out);
        }
    }

    fn claude_out(&mut self, v: &Value, out: &mut Vec<Said>) {
        match str_at(v, "/type") {
            Some("system") => match str_at(v, "/subtype") {
                Some("init") => {
                    if let Some(id) = field(v, "/session_id") {
                        out.push(Said::Session {
                            id,
                            model: field(v, "/model"),
                        });
                    }
                }
                Some("api_retry") => {
                    let message = str_at(v, "/error")
                        .map(str::to_string)
                        .or_else(|| u64_at(v, "/error_status").map(|s| format!("HTTP {s}")))
                        .unwrap_or_else(|| "API request failed".into());
                    out.push(Said::Error {
                        message: bound(&message, MAX_FIELD),
                        detail: None,
                        will_retry: Some(true),
                        attempt: u64_at(v, "/attempt"),
                        max_attempts: u64_at(v, "/max_retries"),
                    });
                }
                _ => {}
            },
            Some("assistant") => {
                let api_error = v.get("is_api_error_message").and_then(Value::as_bool)
                    == Some(true)
                    || v.get("error").is_some_and(Value::is_string);
                let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
                    return;
                };
                for b in blocks {
                    match str_at(b, "/type") {
                        Some("text") => {
                            let t = str_at(b, "/text").unwrap_or("");
                            if api_error {
                                self.error(t, field(v, "/error"), out);
                            } else {
                                out.push(Said::AgentText {
                                    text: bound(t, MAX_TEXT),
                                });
                            }
                        }
                        Some("thinking") => {
                            if let Some(t) = str_at(b, "/thinking").filter(|t| !t.is_empty()) {
                                out.push(Said::Reasoning {
                                    text: bound(t, MAX_TEXT),
                                });
                            }
                        }
                        Some("tool_use") => self.claude_tool_use(b, out),
                        _ => {}
                    }
                }
            }
            Some("user") => {
                let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
                    return;
                };
                for b in blocks {
                    if str_at(b, "/type") != Some("tool_result") {
                        continue;
                    }
                    let Some(id) = str_at(b, "/tool_use_id") else {
                        continue;
                    };
                    let output = texts(b.get("content")).unwrap_or_default();
                    let failed = b.get("is_error").and_then(Value::as_bool) == Some(true);
                    let (status, code) = if failed {
                        (ToolStatus::Failed, claude_exit_code(&output))
                    } else {
                        (ToolStatus::Ended, None)
                    };
                    let update = Call {
                        output,
                        ..Call::default()
                    };
                    self.end_call(id, status, code, update, out);
                }
            }
            Some("result") => {
                let input = u64_at(v, "/usage/input_tokens");
                let output = u64_at(v, "/usage/output_tokens");
                let cost = v.get("total_cost_usd").and_then(Value::as_f64);
                let windows: Vec<u64> = v
                    .get("modelUsage")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.values()
                            .filter_map(|u| u64_at(u, "/contextWindow"))
                            .collect()
                    })
                    .unwrap_or_default();
                let window = (windows.len() == 1).then(|| windows[0]);
                if input.is_some() || output.is_some() || cost.is_some() || window.is_some() {
                    out.push(Said::Usage {
                        input_tokens: input,
                        output_tokens: output,
                        cost_usd: cost,
                        context_used: None,
                        context_window: window,
                    });
                }
                let terminal = str_at(v, "/terminal_reason");
                let subtype = str_at(v, "/subtype");
                let is_error = v.get("is_error").and_then(Value::as_bool) == Some(true);
                let outcome = if terminal.is_some_and(|t| t.starts_with("aborted")) {
                    TurnOutcome::Interrupted
                } else if is_error || subtype.is_some_and(|s| s != "success") {
                    TurnOutcome::Failed
                } else {
                    TurnOutcome::Completed
                };
                if outcome == TurnOutcome::Failed
                    && let Some(r) = str_at(v, "/result").filter(|r| !r.is_empty())
                    && self.last_error.as_deref() != Some(&bound(r, MAX_FIELD))
                {
                    self.error(r, terminal.map(str::to_string), out);
                }
                self.last_error = None;
                out.push(Said::TurnEnded {
                    outcome,
                    detail: terminal.or(subtype).map(|s| bound(s, MAX_FIELD)),
                });
            }
            Some("control_request") if str_at(v, "/request/subtype") == Some("can_use_tool") => {
                let tool = str_at(v, "/request/tool_name").unwrap_or("a tool");
                let input = v.pointer("/request/input");
                let arg = input.and_then(|i| {
                    str_at(i, "/command")
                        .or_else(|| str_at(i, "/file_path"))
                        .or_else(|| str_at(i, "/path"))
                });
                let what = match arg {
                    Some(a) => format!("{tool}: {a}"),
                    None => tool.to_string(),
                };
                out.push(Said::Permission {
                    method: "can_use_tool".into(),
                    what: Some(bound(&what, MAX_FIELD)),
                });
            }
            _ => {}
        }
    }

    fn claude_tool_use(&mut self, b: &Value, out: &mut Vec<Said>) {
        let id = str_at(b, "/id").unwrap_or("");
        let name = str_at(b, "/name").unwrap_or("tool");
        let input = b.get("input").cloned().unwrap_or(Value::Null);
        if name == "TodoWrite" {
            let entries = input
                .get("todos")
                .and_then(Value::as_array)
                .map(|todos| {
                    todos
                        .iter()
                        .filter_map(|t| {
                            Some(PlanEntry {
                                text: bound(str_at(t, "/content")?, MAX_FIELD),
                                status: field(t, "/status"),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Said::Plan { entries });
            let call = Call {
                plan: true,
                ..Call::default()
            };
            self.calls.insert(id.to_string(), call);
            self.order.push_back(id.to_string());
            return;
        }
        let call = Call {
            kind: bound(name, MAX_FIELD),
            title: field(&input, "/description"),
            command: field(&input, "/command").or_else(|| field(&input, "/pattern")),
            path: field(&input, "/file_path")
                .or_else(|| field(&input, "/notebook_path"))
                .or_else(|| field(&input, "/path"))
                .or_else(|| field(&input, "/url")),
            ..Call::default()
        };
        self.start_call(id, call, out);
    }

    // ---- codex app-server ----

    fn codex_in(&mut self, v: &Value, out: &mut Vec<Said>) {
        self.remember_request(v);
        if str_at(v, "/method") == Some("turn/start")
            && let Some(t) = texts(v.pointer("/params/input"))
        {
            self.person(t, true, out);
        }
    }

    fn answer_of<'a>(&mut self, v: &'a Value) -> Option<(String, Result<&'a Value, &'a Value>)> {
        if v.get("method").is_some() {
            return None;
        }
        let key = v.get("id").and_then(id_key)?;
        let method = self.requests.remove(&key)?;
        match (v.get("error"), v.get("result")) {
            (Some(e), _) => Some((method, Err(e))),
            (None, Some(r)) => Some((method, Ok(r))),
            (None, None) => None,
        }
    }

    fn codex_out(&mut self, v: &Value, out: &mut Vec<Said>) {
        if let Some((method, answer)) = self.answer_of(v) {
            match answer {
                Ok(r) if matches!(method.as_str(), "thread/start" | "thread/resume") => {
                    if let Some(id) = field(r, "/thread/id") {
                        out.push(Said::Session {
                            id,
                            model: field(r, "/model"),
                        });
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let m = str_at(e, "/message").unwrap_or("error");
                    self.error(m, Some(method), out);
                }
            }
            return;
        }
        let Some(method) = str_at(v, "/method") else {
            return;
        };
        let p = v.get("params").cloned().unwrap_or(Value::Null);
        if v.get("id").is_some() {
            // A request from the tool.
            if method.ends_with("requestApproval")
                || matches!(method, "applyPatchApproval" | "execCommandApproval")
            {
                let what = field(&p, "/command")
                    .or_else(|| field(&p, "/reason"))
                    .or_else(|| field(&p, "/grantRoot"))
                    .or_else(|| field(&p, "/itemId"));
                out.push(Said::Permission {
                    method: bound(method, MAX_FIELD),
                    what,
                });
            }
            return;
        }
        match method {
            "turn/started" => out.push(Said::TurnStarted),
            "turn/completed" => {
                let status = str_at(&p, "/turn/status").unwrap_or("completed");
                let outcome = match status {
                    "interrupted" => TurnOutcome::Interrupted,
                    "failed" => TurnOutcome::Failed,
                    _ => TurnOutcome::Completed,
                };
                let detail = field(&p, "/turn/error/message").or_else(|| Some(status.into()));
                out.push(Said::TurnEnded { outcome, detail });
            }
            "item/started" => self.codex_item(&p, false, out),
            "item/completed" => self.codex_item(&p, true, out),
            "item/agentMessage/delta" => {
                if let Some(item) = str_at(&p, "/itemId") {
                    self.streamed.insert(item.to_string());
                }
                if let Some(d) = str_at(&p, "/delta") {
                    out.push(Said::AgentText {
                        text: bound(d, MAX_TEXT),
                    });
                }
            }
            "item/reasoning/summaryTextDelta" => {
                if let Some(item) = str_at(&p, "/itemId") {
                    self.streamed.insert(item.to_string());
                }
                if let Some(d) = str_at(&p, "/delta") {
                    out.push(Said::Reasoning {
                        text: bound(d, MAX_TEXT),
                    });
                }
            }
            "item/commandExecution/outputDelta" | "item/fileChange/outputDelta" => {
                if let (Some(item), Some(d)) = (str_at(&p, "/itemId"), str_at(&p, "/delta")) {
                    self.add_output(item, d);
                }
            }
            "turn/plan/updated" => {
                let entries = p
                    .get("plan")
                    .and_then(Value::as_array)
                    .map(|steps| {
                        steps
                            .iter()
                            .filter_map(|s| {
                                Some(PlanEntry {
                                    text: bound(str_at(s, "/step")?, MAX_FIELD),
                                    status: field(s, "/status"),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Said::Plan { entries });
            }
            "thread/tokenUsage/updated" => out.push(Said::Usage {
                input_tokens: u64_at(&p, "/tokenUsage/total/inputTokens"),
                output_tokens: u64_at(&p, "/tokenUsage/total/outputTokens"),
                cost_usd: None,
                context_used: None,
                context_window: u64_at(&p, "/tokenUsage/modelContextWindow"),
            }),
            "error" => {
                let message = str_at(&p, "/error/message").unwrap_or("error");
                let message = bound(message, MAX_FIELD);
                self.last_error = Some(message.clone());
                out.push(Said::Error {
                    message,
                    detail: field(&p, "/error/additionalDetails"),
                    will_retry: p.get("willRetry").and_then(Value::as_bool),
                    attempt: None,
                    max_attempts: None,
                });
            }
            "warning" => {
                if let Some(m) = field(&p, "/message") {
                    out.push(Said::Warning { message: m });
                }
            }
            "configWarning" => {
                if let Some(m) = field(&p, "/summary") {
                    out.push(Said::Warning { message: m });
                }
            }
            _ => {}
        }
    }

    fn codex_item(&mut self, p: &Value, completed: bool, out: &mut Vec<Said>) {
        let Some(item) = p.get("item") else {
            return;
        };
        let id = str_at(item, "/id").unwrap_or("");
        let status_of = |item: &Value| match str_at(item, "/status") {
            Some("failed") => ToolStatus::Failed,
            Some("declined") => ToolStatus::Declined,
            _ => ToolStatus::Ended,
        };
        match str_at(item, "/type").unwrap_or("") {
            "userMessage" if !completed => {
                if let Some(t) = texts(item.get("content")) {
                    self.echo_or_person(t, out);
                }
            }
            "agentMessage" if completed => {
                if !self.streamed.remove(id)
                    && let Some(t) = str_at(item, "/text")
                {
                    out.push(Said::AgentText {
                        text: bound(t, MAX_TEXT),
                    });
                }
            }
            "reasoning" if completed => {
                if !self.streamed.remove(id)
                    && let Some(s) = item.get("summary").and_then(Value::as_array)
                {
                    let t: Vec<&str> = s.iter().filter_map(Value::as_str).collect();
                    if !t.is_empty() {
                        out.push(Said::Reasoning {
                            text: bound(&t.join("\n"), MAX_TEXT),
                        });
                    }
                }
            }
            "plan" if completed => {
                let text = str_at(item, "/text").unwrap_or("");
                let entries = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| PlanEntry {
                        text: bound(l, MAX_FIELD),
                        status: None,
                    })
                    .collect();
                out.push(Said::Plan { entries });
            }
            kind @ ("commandExecution" | "fileChange" | "mcpToolCall" | "dynamicToolCall"
            | "webSearch" | "imageView") => {
                let paths: Vec<&str> = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().filter_map(|c| str_at(c, "/path")).collect())
                    .unwrap_or_default();
                let title = match kind {
                    "mcpToolCall" => match (str_at(item, "/server"), str_at(item, "/tool")) {
                        (Some(s), Some(t)) => Some(bound(&format!("{s}/{t}"), MAX_FIELD)),
                        _ => None,
                    },
                    "dynamicToolCall" => field(item, "/tool"),
                    "webSearch" => field(item, "/query"),
                    "fileChange" if paths.len() > 1 => Some(format!("{} files", paths.len())),
                    _ => None,
                };
                let call = Call {
                    kind: kind.to_string(),
                    title,
                    command: field(item, "/command"),
                    path: paths
                        .first()
                        .map(|p| bound(p, MAX_FIELD))
                        .or_else(|| field(item, "/path")),
                    output: String::new(),
                    plan: false,
                };
                if !completed {
                    self.start_call(id, call, out);
                    return;
                }
                let output = str_at(item, "/aggregatedOutput")
                    .or_else(|| str_at(item, "/error/message"))
                    .unwrap_or("")
                    .to_string();
                let exit = item.get("exitCode").and_then(Value::as_i64);
                let update = Call { output, ..call };
                self.end_call(id, status_of(item), exit, update, out);
                if let Some(changes) = item.get("changes").and_then(Value::as_array) {
                    for c in changes {
                        if let Some(path) = field(c, "/path") {
                            let change = field(c, "/kind/type").unwrap_or_else(|| "change".into());
                            out.push(Said::FileChange { path, change });
                        }
                    }
                }
            }
            _ => {}
        }
    }

    // ---- ACP ----

    fn acp_in(&mut self, v: &Value, out: &mut Vec<Said>) {
        self.remember_request(v);
        if str_at(v, "/method") == Some("session/prompt")
            && let Some(t) = texts(v.pointer("/params/prompt"))
        {
            self.person(t, true, out);
        }
    }

    fn acp_out(&mut self, v: &Value, out: &mut Vec<Said>) {
        if let Some((method, answer)) = self.answer_of(v) {
            match answer {
                Ok(r) if matches!(method.as_str(), "session/new" | "session/load") => {
                    let model = r
                        .get("configOptions")
                        .and_then(Value::as_array)
                        .and_then(|o| {
                            o.iter()
                                .find(|o| str_at(o, "/id") == Some("model"))
                                .and_then(|o| field(o, "/currentValue"))
                        });
                    let id = field(r, "/sessionId");
                    if let Some(id) = id {
                        out.push(Said::Session { id, model });
                    }
                }
                Ok(r) if method == "session/prompt" => {
                    if r.get("usage").is_some() {
                        out.push(Said::Usage {
                            input_tokens: u64_at(r, "/usage/inputTokens"),
                            output_tokens: u64_at(r, "/usage/outputTokens"),
                            cost_usd: None,
                            context_used: None,
                            context_window: None,
                        });
                    }
                    let reason = str_at(r, "/stopReason");
                    let outcome = match reason {
                        Some("cancelled") => TurnOutcome::Interrupted,
                        Some("refusal") | None => TurnOutcome::Failed,
                        _ => TurnOutcome::Completed,
                    };
                    out.push(Said::TurnEnded {
                        outcome,
                        detail: reason.map(|r| bound(r, MAX_FIELD)),
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    let m = str_at(e, "/message").unwrap_or("error");
                    self.error(m, Some(method.clone()), out);
                    if method == "session/prompt" {
                        out.push(Said::TurnEnded {
                            outcome: TurnOutcome::Failed,
                            detail: Some(bound(m, MAX_FIELD)),
                        });
                    }
                }
            }
            return;
        }
        let Some(method) = str_at(v, "/method") else {
            return;
        };
        let p = v.get("params").cloned().unwrap_or(Value::Null);
        if v.get("id").is_some() {
            if method == "session/request_permission" {
                let what = field(&p, "/toolCall/title")
                    .or_else(|| field(&p, "/toolCall/rawInput/command"))
                    .or_else(|| field(&p, "/toolCall/locations/0/path"));
                out.push(Said::Permission {
                    method: method.into(),
                    what,
                });
            }
            return;
        }
        if method != "session/update" {
            return;
        }
        let Some(u) = p.get("update") else {
            return;
        };
        let chunk = || str_at(u, "/content/text").map(|t| bound(t, MAX_TEXT));
        match str_at(u, "/sessionUpdate").unwrap_or("") {
            "user_message_chunk" => {
                if let Some(t) = chunk() {
                    self.echo_or_person(t, out);
                }
            }
            "agent_message_chunk" => {
                if let Some(text) = chunk() {
                    out.push(Said::AgentText { text });
                }
            }
            "agent_thought_chunk" => {
                if let Some(text) = chunk() {
                    out.push(Said::Reasoning { text });
                }
            }
            "tool_call" | "tool_call_update" => self.acp_tool(u, out),
            "plan" => {
                let entries = u
                    .get("entries")
                    .and_then(Value::as_array)
                    .map(|e| {
                        e.iter()
                            .filter_map(|e| {
                                Some(PlanEntry {
                                    text: bound(str_at(e, "/content")?, MAX_FIELD),
                                    status: field(e, "/status"),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Said::Plan { entries });
            }
            "usage_update" => {
                let usd = (str_at(u, "/cost/currency").unwrap_or("USD") == "USD")
                    .then(|| u.pointer("/cost/amount").and_then(Value::as_f64))
                    .flatten();
                out.push(Said::Usage {
                    input_tokens: None,
                    output_tokens: None,
                    cost_usd: usd,
                    context_used: u64_at(u, "/used"),
                    context_window: u64_at(u, "/size"),
                });
            }
            _ => {}
        }
    }

    fn acp_tool(&mut self, u: &Value, out: &mut Vec<Said>) {
        let Some(id) = str_at(u, "/toolCallId") else {
            return;
        };
        let mut output = String::new();
        let mut diffs = Vec::new();
        for c in u
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match str_at(c, "/type") {
                Some("content") => {
                    if let Some(t) = str_at(c, "/content/text") {
                        if !output.is_empty() {
                            output.push('\n');
                        }
                        output.push_str(t);
                    }
                }
                Some("diff") => {
                    if let Some(p) = field(c, "/path") {
                        let change = if c.get("oldText").is_none_or(Value::is_null) {
                            "add"
                        } else {
                            "update"
                        };
                        diffs.push(Said::FileChange {
                            path: p,
                            change: change.into(),
                        });
                    }
                }
                _ => {}
            }
        }
        let call = Call {
            kind: field(u, "/kind").unwrap_or_default(),
            title: field(u, "/title"),
            command: field(u, "/rawInput/command"),
            path: field(u, "/locations/0/path"),
            output: String::new(),
            plan: false,
        };
        let status = match str_at(u, "/status") {
            Some("completed") => Some(ToolStatus::Ended),
            Some("failed") => Some(ToolStatus::Failed),
            _ => None,
        };
        let known = self.calls.contains_key(id);
        if !known && str_at(u, "/sessionUpdate") == Some("tool_call") {
            let mut start = call.clone();
            if start.kind.is_empty() {
                start.kind = "other".into();
            }
            self.start_call(id, start, out);
        } else if let Some(c) = self.calls.get_mut(id) {
            // An update while running: keep what it adds.
            let Call {
                kind,
                title,
                command,
                path,
                ..
            } = call.clone();
            if !kind.is_empty() {
                c.kind = kind;
            }
            c.title = title.or(c.title.take());
            c.command = command.or(c.command.take());
            c.path = path.or(c.path.take());
        }
        let followed = self.calls.contains_key(id);
        self.add_output(id, &output);
        if let Some(status) = status {
            // ACP reports no exit code (its `rawOutput` is the agent's own): unknown.
            // A call seen only at its end keeps the output of that frame.
            let update = Call {
                output: if followed { String::new() } else { output },
                ..call
            };
            self.end_call(id, status, None, update, out);
        }
        out.extend(diffs);
    }
}

/// What a line of the conversation is, for its style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Voice {
    /// The person's turn.
    Person,
    Agent,
    Reasoning,
    /// A tool call (its line names the call's id).
    Tool,
    /// A file change, a plan, usage, a session id, a turn boundary.
    Note,
    Error,
    Warning,
    Permission,
    /// A stdout line that is not a frame.
    Raw,
    Stderr,
}

/// One line of the conversation as text (the tool's words, not yet sanitised: the printer
/// passes `text` through [`crate::text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub voice: Voice,
    pub text: String,
    /// The tool call this line shows (its id), for a view that updates it in place.
    pub call: Option<String>,
}

impl Line {
    fn new(voice: Voice, text: impl Into<String>) -> Line {
        Line {
            voice,
            text: text.into(),
            call: None,
        }
    }
}

/// The one-line form of a tool call: `▸ Bash: cargo test (exit 1)`.
pub fn tool_line(
    kind: &str,
    title: Option<&str>,
    command: Option<&str>,
    path: Option<&str>,
    status: ToolStatus,
    exit_code: Option<i64>,
) -> String {
    let what = command.or(path).or(title);
    let mut s = match what {
        Some(w) => format!("▸ {kind}: {w}"),
        None => format!("▸ {kind}"),
    };
    if let (Some(t), Some(_)) = (title, command.or(path))
        && !t.is_empty()
    {
        s.push_str(&format!(" — {t}"));
    }
    let end = match (status, exit_code) {
        (ToolStatus::Started, _) => " …".to_string(),
        (ToolStatus::Ended | ToolStatus::Failed, Some(c)) => format!(" (exit {c})"),
        (ToolStatus::Ended, None) => " (done)".to_string(),
        (ToolStatus::Failed, None) => " (failed)".to_string(),
        (ToolStatus::Declined, _) => " (declined)".to_string(),
    };
    s.push_str(&end);
    s
}

fn plan_mark(status: Option<&str>) -> &'static str {
    match status {
        Some("completed") => "✓",
        Some("in_progress" | "inProgress") => "▸",
        Some(_) => "○",
        None => "·",
    }
}

/// Lines of text from [`Said`] events: streamed text (the agent's words, reasoning) is
/// joined into whole lines; every other event is one line (a person's turn, one per line of
/// what they wrote).
#[derive(Debug, Default, Clone)]
pub struct Lines {
    agent: String,
    reasoning: String,
}

impl Lines {
    pub fn new() -> Lines {
        Lines::default()
    }

    fn flush_into(&mut self, out: &mut Vec<Line>) {
        for (voice, buf) in [
            (Voice::Reasoning, &mut self.reasoning),
            (Voice::Agent, &mut self.agent),
        ] {
            if !buf.is_empty() {
                let t = std::mem::take(buf);
                out.push(Line::new(voice, prefix(voice, &t)));
            }
        }
    }

    /// The whole lines `said` completes.
    pub fn push(&mut self, said: &Said) -> Vec<Line> {
        let mut out = Vec::new();
        let streamed = |buf: &mut String, voice: Voice, t: &str, out: &mut Vec<Line>| {
            buf.push_str(t);
            while let Some(i) = buf.find('\n') {
                let l: String = buf.drain(..=i).collect();
                out.push(Line::new(voice, prefix(voice, l.trim_end_matches('\n'))));
            }
        };
        match said {
            Said::AgentText { text } => {
                if !self.reasoning.is_empty() {
                    let t = std::mem::take(&mut self.reasoning);
                    out.push(Line::new(Voice::Reasoning, prefix(Voice::Reasoning, &t)));
                }
                streamed(&mut self.agent, Voice::Agent, text, &mut out);
            }
            Said::Reasoning { text } => {
                if !self.agent.is_empty() {
                    let t = std::mem::take(&mut self.agent);
                    out.push(Line::new(Voice::Agent, t));
                }
                streamed(&mut self.reasoning, Voice::Reasoning, text, &mut out);
            }
            other => {
                self.flush_into(&mut out);
                out.extend(describe(other));
            }
        }
        out
    }

    /// The streamed text not ended by a line feed yet (shown as it stands).
    pub fn pending(&self) -> Vec<Line> {
        let mut out = Vec::new();
        if !self.reasoning.is_empty() {
            out.push(Line::new(
                Voice::Reasoning,
                prefix(Voice::Reasoning, &self.reasoning),
            ));
        }
        if !self.agent.is_empty() {
            out.push(Line::new(Voice::Agent, self.agent.clone()));
        }
        out
    }

    /// Ends the streamed text (end of output, or a gap).
    pub fn finish(&mut self) -> Vec<Line> {
        let mut out = Vec::new();
        self.flush_into(&mut out);
        out
    }
}

fn prefix(voice: Voice, t: &str) -> String {
    match voice {
        Voice::Reasoning => format!("thinking: {t}"),
        _ => t.to_string(),
    }
}

/// The lines of one event that is not streamed text.
pub fn describe(said: &Said) -> Vec<Line> {
    let one = |voice, text: String| vec![Line::new(voice, text)];
    match said {
        Said::PersonTurn { text } => text
            .split('\n')
            .enumerate()
            .map(|(i, l)| {
                Line::new(
                    Voice::Person,
                    format!("{}{l}", if i == 0 { "you: " } else { "     " }),
                )
            })
            .collect(),
        Said::AgentText { text } => one(Voice::Agent, text.clone()),
        Said::Reasoning { text } => one(Voice::Reasoning, prefix(Voice::Reasoning, text)),
        Said::ToolCall {
            id,
            kind,
            title,
            command,
            path,
            status,
            exit_code,
            ..
        } => vec![Line {
            voice: Voice::Tool,
            text: tool_line(
                kind,
                title.as_deref(),
                command.as_deref(),
                path.as_deref(),
                *status,
                *exit_code,
            ),
            call: Some(id.clone()),
        }],
        Said::FileChange { path, change } => one(Voice::Note, format!("✎ {change} {path}")),
        Said::Plan { entries } => one(
            Voice::Note,
            format!(
                "plan: {}",
                entries
                    .iter()
                    .map(|e| format!("{} {}", plan_mark(e.status.as_deref()), e.text))
                    .collect::<Vec<_>>()
                    .join(" · ")
            ),
        ),
        Said::Usage {
            input_tokens,
            output_tokens,
            cost_usd,
            context_used,
            context_window,
        } => {
            let mut parts = Vec::new();
            if let Some(n) = input_tokens {
                parts.push(format!("in {n}"));
            }
            if let Some(n) = output_tokens {
                parts.push(format!("out {n}"));
            }
            if let Some(c) = cost_usd {
                parts.push(format!("${c:.4}"));
            }
            match (context_used, context_window) {
                (Some(u), Some(w)) => parts.push(format!("context {u}/{w}")),
                (Some(u), None) => parts.push(format!("context {u}")),
                (None, Some(w)) => parts.push(format!("context window {w}")),
                (None, None) => {}
            }
            if parts.is_empty() {
                return Vec::new();
            }
            one(Voice::Note, format!("usage: {}", parts.join(" · ")))
        }
        Said::Error {
            message,
            detail,
            will_retry,
            attempt,
            max_attempts,
        } => {
            let mut s = format!("! error: {message}");
            if let Some(d) = detail {
                s.push_str(&format!(" — {d}"));
            }
            match (attempt, max_attempts) {
                (Some(a), Some(m)) => s.push_str(&format!(" (attempt {a}/{m})")),
                (Some(a), None) => s.push_str(&format!(" (attempt {a})")),
                _ => {}
            }
            if *will_retry == Some(true) {
                s.push_str(" (will retry)");
            }
            one(Voice::Error, s)
        }
        Said::Warning { message } => one(Voice::Warning, format!("! warning: {message}")),
        Said::Permission { method, what } => one(
            Voice::Permission,
            match what {
                Some(w) => format!("? permission asked ({method}): {w}"),
                None => format!("? permission asked ({method})"),
            },
        ),
        Said::Session { id, model } => one(
            Voice::Note,
            match model {
                Some(m) => format!("── session {id} ({m})"),
                None => format!("── session {id}"),
            },
        ),
        Said::TurnStarted => one(Voice::Note, "── turn started".into()),
        Said::TurnEnded { outcome, detail } => {
            let o = match outcome {
                TurnOutcome::Completed => "completed",
                TurnOutcome::Interrupted => "interrupted",
                TurnOutcome::Failed => "failed",
            };
            one(
                Voice::Note,
                match detail {
                    Some(d) if d != o => format!("── turn ended: {o} ({d})"),
                    _ => format!("── turn ended: {o}"),
                },
            )
        }
        Said::Raw { stderr, text } => one(
            if *stderr { Voice::Stderr } else { Voice::Raw },
            text.clone(),
        ),
    }
}

#[cfg(test)]
mod tests;
