//! The fake ACP agents: `gemini --acp`, `grok agent stdio`, `opencode acp`.
//!
//! JSON-RPC 2.0 lines: `initialize`, `session/new` (→ `sessionId`), `session/load`
//! (replays the stored conversation as `session/update` notifications, then answers `{}`;
//! an unknown id is refused with the error that the TypeScript ACP library sends for a
//! thrown error: code -32603 "Internal error", `data.details`), `session/prompt` (streams
//! `agent_message_chunk` updates, answers `{stopReason}`), and the `session/cancel`
//! notification (the pending prompt answers `cancelled`). Without the stdio argv it is the
//! interactive form.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;

use serde_json::{Value, json};

use super::script::{self, Emit, Ended, Turn};
use super::store::{self, Transcript};
use super::{DEMO_NAME, Failure, Inbound};
use crate::providers::Tool;
use crate::providers::protocol::ACP_PROTOCOL_VERSION;

/// Whether `args` are the tool's stdio (ACP) form.
fn is_stdio_form(tool: Tool, args: &[String]) -> Option<bool> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match (tool, a.as_slice()) {
        (_, []) => Some(false),
        (Tool::Gemini, ["--acp"] | ["--experimental-acp"]) => Some(true),
        // `grok agent [--always-approve] [--no-leader] stdio`
        (Tool::Grok, ["agent", flags @ .., "stdio"])
            if flags
                .iter()
                .all(|f| matches!(*f, "--always-approve" | "--no-leader")) =>
        {
            Some(true)
        }
        (Tool::Opencode, ["acp"]) => Some(true),
        _ => None,
    }
}

/// The interactive form's resume argument, if `args` are `--resume ID` (gemini, grok) or
/// `--session ID` / `-s ID` (opencode).
fn pty_resume(tool: Tool, args: &[String]) -> Option<&str> {
    match (tool, args) {
        (Tool::Gemini | Tool::Grok, [flag, id]) if flag == "--resume" || flag == "-r" => Some(id),
        (Tool::Opencode, [flag, id]) if flag == "--session" || flag == "-s" => Some(id),
        _ => None,
    }
}

pub(super) fn main(
    tool: Tool,
    args: &[String],
    answer: super::headless::Answerer,
) -> Result<i32, Failure> {
    if tool == Tool::Opencode && args.first().is_some_and(|a| a == "export") {
        return export(&args[1..]);
    }
    if tool == Tool::Gemini {
        if matches!(args, [v] if v == "--version" || v == "-v") {
            super::write_out(format!("{}\n", super::headless::version_line("gemini")).as_bytes())?;
            return Ok(0);
        }
        if args.iter().any(|a| a == "-p" || a == "--prompt") {
            return super::headless::gemini(answer, args);
        }
    }
    match is_stdio_form(tool, args) {
        Some(true) => Agent::new(tool)?.serve(),
        Some(false) => super::pty::main(tool, None),
        None => match pty_resume(tool, args) {
            Some(id) => super::pty::main(tool, Some(id)),
            None => Err(Failure::new(
                2,
                format!(
                    "{DEMO_NAME}: the fake {} serves its ACP form ({}) and its interactive \
                     form; it does not fake `{}`",
                    tool.name(),
                    crate::providers::launch(tool, crate::providers::Transport::Pipe, None)
                        .map(|l| l.args.join(" "))
                        .unwrap_or_default(),
                    args.join(" ")
                ),
            )),
        },
    }
}

/// `opencode export [--pure] ID` as 1.18.33 answers it: `Exporting session: ID` on stderr,
/// then the session's document on stdout, status 0; an unknown session is
/// `Error: Session not found: ID` on stderr, status 1 (the real one colours `Error:`).
fn export(args: &[String]) -> Result<i32, Failure> {
    let ids: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [id] = ids.as_slice() else {
        return Err(Failure::new(
            1,
            format!("{DEMO_NAME}: the fake opencode export takes one session id"),
        ));
    };
    let home = super::account_home(Tool::Opencode).map_err(|m| Failure::new(1, m))?;
    eprintln!("Exporting session: {id}");
    let found = super::usable_id(id)
        .then(|| store::find(Tool::Opencode, &home, std::path::Path::new("/"), id))
        .flatten();
    let Some(t) = found else {
        return Err(Failure::new(1, format!("Error: Session not found: {id}")));
    };
    let bytes = std::fs::read(&t.path)?;
    // A storage that is not the fake's own (its first line is the session's info) fails as
    // a damaged database does: an error, no output.
    let head = crate::providers::records::json_lines(&bytes).next();
    if head.is_none_or(|v| v.get("session").is_none()) {
        return Err(Failure::new(
            1,
            format!("Error: the storage of session {id} is damaged (demo)"),
        ));
    }
    let mut out = store::opencode_export(&bytes);
    out.push(b'\n');
    super::write_out(&out)?;
    Ok(0)
}

struct Session {
    id: String,
    cwd: PathBuf,
    transcript: Transcript,
}

struct Agent {
    tool: Tool,
    home: PathBuf,
    session: Option<Session>,
    turns: u64,
}

fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, code: i64, message: &str, details: Option<String>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = details {
        e["data"] = json!({"details": d});
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

fn update(session_id: &str, update: Value) -> Result<(), Failure> {
    Ok(super::write_json(&json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }))?)
}

/// Reply text, a tool call, a thought or a plan, as `session/update` kinds
/// (agent-client-protocol `SessionUpdate`: `agent_message_chunk`, `tool_call`,
/// `tool_call_update`, `agent_thought_chunk`, `plan`).
fn write_conversation(session_id: &str, call_id: &str, e: Emit<'_>) -> Result<(), Failure> {
    match e {
        Emit::Text(t) => update(session_id, chunk("agent_message_chunk", t)),
        Emit::Tool {
            kind,
            arg,
            exit,
            output,
        } => {
            let acp_kind = match kind {
                "bash" => "execute",
                "edit" | "write" => "edit",
                "read" => "read",
                _ => "other",
            };
            let mut start = json!({"sessionUpdate": "tool_call", "toolCallId": call_id,
                "title": format!("{kind} {arg}"), "kind": acp_kind, "status": "pending"});
            if acp_kind == "execute" {
                start["rawInput"] = json!({"command": arg});
            } else {
                start["locations"] = json!([{"path": arg}]);
            }
            update(session_id, start)?;
            update(
                session_id,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                   "status": "in_progress",
                   "content": [{"type": "content", "content": {"type": "text", "text": output}}]}),
            )?;
            let status = if exit == 0 { "completed" } else { "failed" };
            update(
                session_id,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                       "status": status}),
            )
        }
        Emit::Think(t) => update(session_id, chunk("agent_thought_chunk", t)),
        Emit::Plan(entries) => {
            let entries: Vec<Value> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    json!({"content": e, "priority": "medium",
                       "status": if i == 0 { "in_progress" } else { "pending" }})
                })
                .collect();
            update(
                session_id,
                json!({"sessionUpdate": "plan", "entries": entries}),
            )
        }
        Emit::Fail(_) | Emit::Frame(_) => Ok(()),
    }
}

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// An interrupt is the `session/cancel` notification; it has no answer of its own.
fn classify(line: &[u8]) -> Option<Option<Vec<u8>>> {
    let v: Value = serde_json::from_slice(line).ok()?;
    (v.get("method")?.as_str()? == "session/cancel").then_some(None)
}

/// `!ask` in ACP's shape: a `tool_call` update (pending), then `session/request_permission`
/// with the four option kinds; once answered, a `tool_call_update`.
struct AcpAsker {
    session: String,
    asked: std::cell::Cell<u64>,
    call: std::cell::RefCell<String>,
}

fn rpc_lines(frames: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend(serde_json::to_vec(f).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

/// The options the fake offers, one of each kind.
const ASK_OPTIONS: [(&str, &str, &str); 4] = [
    ("allow-once", "Allow", "allow_once"),
    ("allow-always", "Always allow", "allow_always"),
    ("reject-once", "Reject", "reject_once"),
    ("reject-always", "Always reject", "reject_always"),
];

impl script::Asker for AcpAsker {
    fn request(&self, kind: script::AskKind, what: &str) -> (Vec<u8>, Value) {
        let n = self.asked.get() + 1;
        self.asked.set(n);
        let id = json!(1000 + n);
        let call_id = format!("call_demo_{n}");
        *self.call.borrow_mut() = call_id.clone();
        let (title, kind, raw, locations) = match kind {
            script::AskKind::Command => (
                format!("demo: run `{what}`"),
                "execute",
                json!({"command": what}),
                json!([]),
            ),
            script::AskKind::File => (
                format!("demo: write {what}"),
                "edit",
                json!({"path": what}),
                json!([{"path": what}]),
            ),
        };
        let call = json!({"toolCallId": call_id, "title": title, "kind": kind,
                          "rawInput": raw, "locations": locations});
        let mut update = call.clone();
        update["sessionUpdate"] = json!("tool_call");
        update["status"] = json!("pending");
        let options: Vec<Value> = ASK_OPTIONS
            .iter()
            .map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind}))
            .collect();
        let out = rpc_lines(&[
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": self.session, "update": update}}),
            json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission",
                   "params": {"sessionId": self.session, "toolCall": call, "options": options}}),
        ]);
        (out, id)
    }

    fn answer(&self, line: &[u8], id: &Value) -> Option<(String, Vec<u8>)> {
        let v: Value = serde_json::from_slice(line).ok()?;
        if v.get("id")? != id || v.get("method").is_some() {
            return None;
        }
        let word = match (
            v.pointer("/result/outcome/outcome").and_then(Value::as_str),
            v.pointer("/result/outcome/optionId")
                .and_then(Value::as_str),
        ) {
            (Some("selected"), Some("allow-once")) => "allowed",
            (Some("selected"), Some("allow-always")) => "allowed for the session",
            (Some("selected"), Some("reject-once")) => "denied",
            (Some("selected"), Some("reject-always")) => "denied always",
            (Some("cancelled"), _) => "cancelled",
            _ => "refused (error)",
        };
        let status = if word.starts_with("allowed") {
            "completed"
        } else {
            "failed"
        };
        let after = rpc_lines(&[json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": self.session, "update": {
                "sessionUpdate": "tool_call_update", "toolCallId": *self.call.borrow(),
                "status": status}}})]);
        Some((word.to_string(), after))
    }
}

impl Agent {
    fn new(tool: Tool) -> Result<Agent, Failure> {
        let home = super::account_home(tool).map_err(|m| Failure::new(1, m))?;
        Ok(Agent {
            tool,
            home,
            session: None,
            turns: 0,
        })
    }

    fn new_session_id(&self) -> std::io::Result<String> {
        let u = super::new_uuid()?;
        Ok(match self.tool {
            Tool::Opencode => format!("ses_{}", u.replace('-', "")),
            _ => u,
        })
    }

    fn serve(mut self) -> Result<i32, Failure> {
        let inbox = super::spawn_reader();
        let mut deferred: VecDeque<Inbound> = VecDeque::new();
        loop {
            let Some(line) = super::next_line(&inbox, &mut deferred) else {
                return Ok(0);
            };
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                super::write_json(&error(&Value::Null, -32700, "Parse error", None))?;
                continue;
            };
            let (Some(method), Some(id)) = (v.get("method").and_then(Value::as_str), v.get("id"))
            else {
                continue; // notifications (a cancel with nothing running) and responses
            };
            let params = v.get("params").cloned().unwrap_or(Value::Null);
            if let Some(a) = self.request(method, id, &params, &inbox, &mut deferred)? {
                super::write_json(&a)?;
            }
        }
    }

    fn cwd_of(params: &Value) -> Result<PathBuf, Failure> {
        match params.get("cwd").and_then(Value::as_str) {
            Some(c) => Ok(PathBuf::from(c)),
            None => super::current_dir().map_err(|m| Failure::new(1, m)),
        }
    }

    fn request(
        &mut self,
        method: &str,
        id: &Value,
        params: &Value,
        inbox: &Receiver<Inbound>,
        deferred: &mut VecDeque<Inbound>,
    ) -> Result<Option<Value>, Failure> {
        match method {
            "initialize" => {
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_u64)
                    .unwrap_or(ACP_PROTOCOL_VERSION);
                let mut answer = json!({
                    "protocolVersion": asked.min(ACP_PROTOCOL_VERSION),
                    "agentCapabilities": {
                        "loadSession": true,
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                    },
                    "authMethods": [],
                    "agentInfo": {
                        "name": DEMO_NAME,
                        "title": format!("proctor demo agent (fake {}, not the real tool)", self.tool.spec().display_name),
                        "version": env!("CARGO_PKG_VERSION"),
                    },
                });
                // opencode 1.18.33 sends neither `agentInfo.title` nor
                // `promptCapabilities.audio` (tests/data/real/opencode-1.18.33.jsonl): its
                // fake is labelled demo by `agentInfo.name` alone.
                if self.tool == Tool::Opencode {
                    if let Some(o) = answer["agentInfo"].as_object_mut() {
                        o.remove("title");
                    }
                    if let Some(o) =
                        answer["agentCapabilities"]["promptCapabilities"].as_object_mut()
                    {
                        o.remove("audio");
                    }
                }
                Ok(Some(response(id, answer)))
            }
            "session/new" => {
                let cwd = Self::cwd_of(params)?;
                let sid = self.new_session_id()?;
                let transcript =
                    Transcript::open(store::path_for(self.tool, &self.home, &cwd, &sid))?;
                // Gemini CLI and OpenCode record the session as it is created.
                transcript.head(self.tool, &sid, &cwd)?;
                self.session = Some(Session {
                    id: sid.clone(),
                    cwd,
                    transcript,
                });
                Ok(Some(response(id, json!({"sessionId": sid}))))
            }
            "session/load" => {
                let cwd = Self::cwd_of(params)?;
                let sid = params
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let found = super::usable_id(sid)
                    .then(|| store::find(self.tool, &self.home, &cwd, sid))
                    .flatten();
                let Some(transcript) = found else {
                    return Ok(Some(error(
                        id,
                        -32603,
                        "Internal error",
                        Some(format!("Session not found: {sid}")),
                    )));
                };
                for (role, text) in transcript.messages()? {
                    let kind = if role == "user" {
                        "user_message_chunk"
                    } else {
                        "agent_message_chunk"
                    };
                    update(sid, chunk(kind, &text))?;
                }
                self.session = Some(Session {
                    id: sid.to_string(),
                    cwd,
                    transcript,
                });
                Ok(Some(response(id, json!({}))))
            }
            "session/prompt" => self.prompt(id, params, inbox, deferred),
            _ => Ok(Some(error(id, -32601, "Method not found", None))),
        }
    }

    fn prompt(
        &mut self,
        id: &Value,
        params: &Value,
        inbox: &Receiver<Inbound>,
        deferred: &mut VecDeque<Inbound>,
    ) -> Result<Option<Value>, Failure> {
        let sid = params
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.turns += 1;
        let n = self.turns;
        let Some(session) = self.session.as_ref().filter(|s| s.id == sid) else {
            return Ok(Some(error(
                id,
                -32603,
                "Internal error",
                Some(format!("Session not found: {sid}")),
            )));
        };
        let text = params
            .get("prompt")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        session
            .transcript
            .message(self.tool, &session.id, &session.cwd, "user", &text)?;
        let steps = script::parse(&text);
        let answer = |b: &[u8]| super::write_out(b);
        let asker = AcpAsker {
            session: session.id.clone(),
            asked: std::cell::Cell::new(n * 100),
            call: std::cell::RefCell::new(String::new()),
        };
        let mut turn = Turn {
            inbox,
            deferred,
            classify: &classify,
            sigint: None,
            answer: &answer,
            ask: Some(&asker),
        };
        let failed = std::cell::RefCell::new(None::<String>);
        let mut calls = 0u32;
        let mut emit = |e: Emit<'_>| {
            if let Emit::Fail(t) = e {
                // ACP has no error notification: the prompt's answer is the error.
                *failed.borrow_mut() = Some(t.to_string());
                return Ok(());
            }
            calls += 1;
            let call_id = format!("call_{n}_{calls}");
            // Gemini CLI and OpenCode keep their tool calls in their own record.
            if let Emit::Tool {
                kind,
                arg,
                exit,
                output,
            } = e
            {
                session.transcript.tool_call(
                    self.tool,
                    &session.id,
                    &session.cwd,
                    &call_id,
                    kind,
                    arg,
                    exit,
                    output,
                )?;
            }
            write_conversation(&session.id, &call_id, e)
                .map_err(|f| std::io::Error::other(f.message))
        };
        // The transcript keeps the reply, not the bulk of `!emit` (noted in the reply).
        let stop = match turn.run(&steps, &mut emit)? {
            Ended::Completed { text, notes } => {
                let r = script::reply(n, &text, &notes);
                emit(Emit::Text(&r))?;
                session.transcript.message(
                    self.tool,
                    &session.id,
                    &session.cwd,
                    "assistant",
                    &r,
                )?;
                "end_turn"
            }
            Ended::Interrupted => "cancelled",
            // ACP has no limit frame: an error answer, in words.
            Ended::Limited(l) => {
                return Ok(Some(error(id, -32603, l.as_text().trim_end(), None)));
            }
        };
        if let Some(message) = failed.into_inner()
            && stop != "cancelled"
        {
            return Ok(Some(error(id, -32603, &message, None)));
        }
        Ok(Some(response(id, json!({"stopReason": stop}))))
    }
}
