//! The fake `codex`.
//!
//! `codex app-server` form: JSON-RPC lines without `"jsonrpc"`; `initialize`, then
//! `thread/start` / `thread/resume`, `turn/start` (streamed as `turn/started`,
//! `item/started`, `item/agentMessage/delta`, `item/completed`, `turn/completed`) and
//! `turn/interrupt`. Without `app-server` it is the interactive form (`codex`,
//! `codex resume ID`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;

use serde_json::{Value, json};

use super::script::{self, Emit, Ended, Turn};
use super::store::{self, Transcript};
use super::{DEMO_MODEL, DEMO_NAME, Failure, Inbound};
use crate::providers::Tool;

pub(super) fn main(args: &[String], answer: super::headless::Answerer) -> Result<i32, Failure> {
    match args.first().map(String::as_str) {
        Some("exec") => super::headless::codex_exec(answer, &args[1..]),
        Some("--version" | "-V") => {
            super::write_out(format!("{}\n", super::headless::version_line("codex")).as_bytes())?;
            Ok(0)
        }
        Some("app-server") => {
            let rest = &args[1..];
            let ok = rest.is_empty() || rest == ["--listen", "stdio://"];
            if !ok {
                return Err(Failure::new(
                    2,
                    format!(
                        "{DEMO_NAME}: the fake codex app-server serves only stdio \
                         (`codex app-server` or `--listen stdio://`)"
                    ),
                ));
            }
            Server::new()?.serve()
        }
        None => super::pty::main(Tool::Codex, None),
        Some("resume") => match args.get(1) {
            Some(id) if args.len() == 2 => super::pty::main(Tool::Codex, Some(id)),
            _ => Err(Failure::new(2, "error: usage: codex resume <SESSION_ID>")),
        },
        Some(other) => Err(Failure::new(
            2,
            format!(
                "error: unrecognized subcommand '{other}' ({DEMO_NAME} fakes `app-server`, `resume` and the bare TUI)"
            ),
        )),
    }
}

struct Thread {
    id: String,
    cwd: PathBuf,
    transcript: Transcript,
}

struct Server {
    home: PathBuf,
    initialized: bool,
    thread: Option<Thread>,
    turns: u64,
}

fn response(id: &Value, result: Value) -> Value {
    json!({"id": id, "result": result})
}

fn error(id: &Value, code: i64, message: String) -> Value {
    json!({"id": id, "error": {"code": code, "message": message}})
}

fn note(method: &str, params: Value) -> std::io::Result<()> {
    super::write_json(&json!({"method": method, "params": params}))
}

/// A tool call, a reasoning summary, a plan or a retried error, in the shapes codex 0.171's
/// own schema gives (`codex app-server generate-json-schema`: `ThreadItem`
/// `commandExecution` / `fileChange` / `reasoning`, `TurnPlanUpdatedNotification`,
/// `ErrorNotification`).
fn write_conversation(
    tid: &str,
    turn_id: &str,
    item_id: &str,
    cwd: &str,
    e: Emit<'_>,
) -> std::io::Result<()> {
    let at = |item: Value| json!({"threadId": tid, "turnId": turn_id, "item": item});
    match e {
        Emit::Text(_) => Ok(()),
        Emit::Tool {
            kind,
            arg,
            exit,
            output,
        } if matches!(kind, "edit" | "write") => {
            let change = |status: &str| {
                json!({"type": "fileChange", "id": item_id, "status": status, "changes": [{
                    "path": arg, "diff": "",
                    "kind": if kind == "write" { json!({"type": "add"}) }
                            else { json!({"type": "update", "move_path": null}) },
                }]})
            };
            note("item/started", at(change("inProgress")))?;
            note(
                "item/fileChange/outputDelta",
                json!({"threadId": tid, "turnId": turn_id, "itemId": item_id, "delta": output}),
            )?;
            let status = if exit == 0 { "completed" } else { "failed" };
            note("item/completed", at(change(status)))
        }
        Emit::Tool {
            kind,
            arg,
            exit,
            output,
        } => {
            // codex reads files with shell commands.
            let command = if kind == "read" {
                format!("cat {arg}")
            } else {
                arg.to_string()
            };
            let item = |status: &str, out: Value, code: Value| {
                json!({"type": "commandExecution", "id": item_id, "command": command, "cwd": cwd,
                       "commandActions": [], "status": status, "aggregatedOutput": out,
                       "exitCode": code, "processId": null, "durationMs": null})
            };
            note(
                "item/started",
                at(item("inProgress", Value::Null, Value::Null)),
            )?;
            let out = format!("{output}\n");
            note(
                "item/commandExecution/outputDelta",
                json!({"threadId": tid, "turnId": turn_id, "itemId": item_id, "delta": out}),
            )?;
            let status = if exit == 0 { "completed" } else { "failed" };
            note("item/completed", at(item(status, json!(out), json!(exit))))
        }
        Emit::Think(t) => {
            let item = |summary: Value| json!({"type": "reasoning", "id": item_id, "summary": summary, "content": []});
            note("item/started", at(item(json!([]))))?;
            note(
                "item/reasoning/summaryTextDelta",
                json!({"threadId": tid, "turnId": turn_id, "itemId": item_id, "delta": t,
                       "summaryIndex": 0}),
            )?;
            note("item/completed", at(item(json!([t]))))
        }
        Emit::Plan(entries) => {
            let plan: Vec<Value> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    json!({"step": e, "status": if i == 0 { "inProgress" } else { "pending" }})
                })
                .collect();
            note(
                "turn/plan/updated",
                json!({"threadId": tid, "turnId": turn_id, "explanation": null, "plan": plan}),
            )
        }
        Emit::Frame(_) => Ok(()),
        Emit::Fail(t) => note(
            "error",
            json!({"threadId": tid, "turnId": turn_id, "willRetry": true, "error": {
                "message": t, "codexErrorInfo": null, "additionalDetails": null}}),
        ),
    }
}

fn notify(method: &str, params: Value) -> Result<(), Failure> {
    Ok(super::write_json(
        &json!({"method": method, "params": params}),
    )?)
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// An interrupt is a `turn/interrupt` request; it is answered `{}` at once.
fn classify(line: &[u8]) -> Option<Option<Vec<u8>>> {
    let v: Value = serde_json::from_slice(line).ok()?;
    if v.get("method")?.as_str()? == "turn/interrupt" {
        let mut r = serde_json::to_vec(&response(v.get("id")?, json!({}))).ok()?;
        r.push(b'\n');
        return Some(Some(r));
    }
    None
}

/// `!ask` in codex's shape: an `item/started` (a `commandExecution` or `fileChange` item),
/// then `item/commandExecution/requestApproval` or `item/fileChange/requestApproval`; once
/// answered, the item's `item/completed`.
struct CodexAsker {
    thread: String,
    turn: String,
    cwd: String,
    asked: std::cell::Cell<u64>,
    /// The item asked about last, completed once answered.
    item: std::cell::RefCell<Value>,
}

fn lines(frames: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend(serde_json::to_vec(f).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

impl script::Asker for CodexAsker {
    fn request(&self, kind: script::AskKind, what: &str) -> (Vec<u8>, Value) {
        let n = self.asked.get() + 1;
        self.asked.set(n);
        let id = json!(1000 + n);
        let started = chrono::Utc::now().timestamp_millis();
        let (item, method, params) = match kind {
            script::AskKind::Command => {
                let item_id = format!("call_demo_{n}");
                (
                    json!({"type": "commandExecution", "id": item_id, "command": what,
                           "commandActions": [], "cwd": self.cwd, "status": "inProgress",
                           "aggregatedOutput": null, "exitCode": null, "durationMs": null}),
                    "item/commandExecution/requestApproval",
                    json!({"threadId": self.thread, "turnId": self.turn, "itemId": item_id,
                           "startedAtMs": started, "command": what, "cwd": self.cwd,
                           "reason": "demo: the script asked to run it"}),
                )
            }
            script::AskKind::File => {
                let item_id = format!("patch_demo_{n}");
                (
                    json!({"type": "fileChange", "id": item_id, "status": "inProgress",
                           "changes": [{"path": what, "kind": {"type": "add"}, "diff": "+demo\n"}]}),
                    "item/fileChange/requestApproval",
                    json!({"threadId": self.thread, "turnId": self.turn, "itemId": item_id,
                           "startedAtMs": started, "reason": "demo: the script asked to write it",
                           "grantRoot": null}),
                )
            }
        };
        *self.item.borrow_mut() = item.clone();
        let out = lines(&[
            json!({"method": "item/started", "params": {"threadId": self.thread, "turnId": self.turn, "item": item}}),
            json!({"id": id, "method": method, "params": params}),
        ]);
        (out, id)
    }

    fn answer(&self, line: &[u8], id: &Value) -> Option<(String, Vec<u8>)> {
        let v: Value = serde_json::from_slice(line).ok()?;
        if v.get("id")? != id || v.get("method").is_some() {
            return None;
        }
        let (word, status) = match v.pointer("/result/decision").and_then(Value::as_str) {
            Some("accept") => ("allowed", "completed"),
            Some("acceptForSession") => ("allowed for the session", "completed"),
            Some("decline") => ("denied", "declined"),
            Some("cancel") => ("cancelled", "declined"),
            _ => ("refused (error)", "failed"),
        };
        let mut item = self.item.borrow().clone();
        item["status"] = json!(status);
        let after = lines(&[json!({"method": "item/completed",
            "params": {"threadId": self.thread, "turnId": self.turn, "item": item}})]);
        Some((word.to_string(), after))
    }

    fn abandoned(&self, id: &Value) -> Vec<u8> {
        lines(&[json!({"method": "serverRequest/resolved",
            "params": {"threadId": self.thread, "requestId": id}})])
    }
}

impl Server {
    fn new() -> Result<Server, Failure> {
        let home = super::account_home(Tool::Codex).map_err(|m| Failure::new(1, m))?;
        Ok(Server {
            home,
            initialized: false,
            thread: None,
            turns: 0,
        })
    }

    fn thread_json(&self, t: &Thread) -> Value {
        json!({
            "id": t.id,
            "preview": "",
            "ephemeral": false,
            "modelProvider": DEMO_MODEL,
            "createdAt": now_secs(),
            "updatedAt": now_secs(),
            "status": {"type": "idle"},
            "path": t.transcript.path.to_string_lossy(),
            "cwd": t.cwd.to_string_lossy(),
            "cliVersion": format!("{}-demo", env!("CARGO_PKG_VERSION")),
            "turns": [],
        })
    }

    fn thread_result(&self, t: &Thread) -> Value {
        json!({
            "thread": self.thread_json(t),
            "model": DEMO_MODEL,
            "modelProvider": DEMO_MODEL,
            "cwd": t.cwd.to_string_lossy(),
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
                super::write_json(
                    &json!({"id": null, "error": {"code": -32700, "message": "Parse error"}}),
                )?;
                continue;
            };
            let (Some(method), id) = (v.get("method").and_then(Value::as_str), v.get("id")) else {
                continue; // a response to nothing proctor's fake asked: ignored
            };
            let Some(id) = id else {
                continue; // notifications: `initialized` and others need no answer
            };
            let params = v.get("params").cloned().unwrap_or(Value::Null);
            let answer = self.request(method, id, &params, &inbox, &mut deferred)?;
            if let Some(a) = answer {
                super::write_json(&a)?;
            }
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
        if method == "initialize" {
            if self.initialized {
                return Ok(Some(error(id, -32600, "Already initialized".into())));
            }
            self.initialized = true;
            return Ok(Some(response(
                id,
                json!({
                    "userAgent": format!("{DEMO_NAME}/{} (demo; not codex)", env!("CARGO_PKG_VERSION")),
                    "codexHome": self.home.to_string_lossy(),
                    "platformFamily": "unix",
                    "platformOs": std::env::consts::OS,
                }),
            )));
        }
        if !self.initialized {
            return Ok(Some(error(id, -32600, "Not initialized".into())));
        }
        match method {
            "thread/start" => {
                let cwd = match params.get("cwd").and_then(Value::as_str) {
                    Some(c) => PathBuf::from(c),
                    None => super::current_dir().map_err(|m| Failure::new(1, m))?,
                };
                let tid = super::new_uuid()?;
                let transcript = Transcript::open(store::codex_new_path(&self.home, &tid))?;
                transcript.append(&json!({
                    "timestamp": chrono::Utc::now().to_rfc3339(),
                    "type": "session_meta",
                    "payload": {"id": tid, "cwd": cwd.to_string_lossy(), "originator": DEMO_NAME, "demo": true},
                }))?;
                let t = Thread {
                    id: tid,
                    cwd,
                    transcript,
                };
                let result = self.thread_result(&t);
                let started = json!({"thread": self.thread_json(&t)});
                self.thread = Some(t);
                super::write_json(&response(id, result))?;
                notify("thread/started", started)?;
                Ok(None)
            }
            "thread/resume" => {
                let tid = params.get("threadId").and_then(Value::as_str).unwrap_or("");
                let found = super::usable_id(tid)
                    .then(|| store::codex_find(&self.home, tid))
                    .flatten();
                let Some(path) = found else {
                    return Ok(Some(error(
                        id,
                        -32600,
                        format!("no rollout found for thread id {tid}"),
                    )));
                };
                let cwd = match params.get("cwd").and_then(Value::as_str) {
                    Some(c) => PathBuf::from(c),
                    None => super::current_dir().map_err(|m| Failure::new(1, m))?,
                };
                let t = Thread {
                    id: tid.to_string(),
                    cwd,
                    transcript: Transcript { path },
                };
                let result = self.thread_result(&t);
                self.thread = Some(t);
                Ok(Some(response(id, result)))
            }
            "turn/start" => self.turn(id, params, inbox, deferred),
            "turn/interrupt" => Ok(Some(error(
                id,
                -32600,
                "there is no active turn to interrupt".into(),
            ))),
            _ => Ok(Some(error(
                id,
                -32601,
                format!("Method not found: {method}"),
            ))),
        }
    }

    fn turn(
        &mut self,
        id: &Value,
        params: &Value,
        inbox: &Receiver<Inbound>,
        deferred: &mut VecDeque<Inbound>,
    ) -> Result<Option<Value>, Failure> {
        let tid = params.get("threadId").and_then(Value::as_str).unwrap_or("");
        let Some(thread) = self.thread.as_ref().filter(|t| t.id == tid) else {
            return Ok(Some(error(id, -32600, format!("thread not found: {tid}"))));
        };
        let text = params
            .get("input")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        self.turns += 1;
        let n = self.turns;
        let turn_id = format!("turn_{}", super::new_uuid()?);
        let item_id = format!("msg_{n}");
        let tid = thread.id.clone();
        let turn_obj =
            |status: &str| json!({"id": turn_id, "items": [], "status": status, "error": null});
        thread
            .transcript
            .message(Tool::Codex, &tid, &thread.cwd, "user", &text)?;
        super::write_json(&response(id, json!({"turn": turn_obj("inProgress")})))?;
        notify(
            "turn/started",
            json!({"threadId": tid, "turn": turn_obj("inProgress")}),
        )?;
        notify(
            "item/started",
            json!({"threadId": tid, "turnId": turn_id,
                   "item": {"type": "agentMessage", "id": item_id, "text": ""}}),
        )?;
        let steps = script::parse(&text);
        let answer = |b: &[u8]| super::write_out(b);
        let asker = CodexAsker {
            thread: tid.clone(),
            turn: turn_id.clone(),
            cwd: thread.cwd.to_string_lossy().into_owned(),
            asked: std::cell::Cell::new(n * 100),
            item: std::cell::RefCell::new(Value::Null),
        };
        let mut turn = Turn {
            inbox,
            deferred,
            classify: &classify,
            sigint: None,
            answer: &answer,
            ask: Some(&asker),
        };
        let mut full = String::new();
        let mut items = 0u32;
        let cwd = thread.cwd.to_string_lossy().into_owned();
        let mut emit = |e: Emit<'_>| match e {
            Emit::Text(chunk) => {
                full.push_str(chunk);
                super::write_json(&json!({"method": "item/agentMessage/delta", "params": {
                    "threadId": tid, "turnId": turn_id, "itemId": item_id, "delta": chunk}}))
            }
            other => {
                items += 1;
                let call_id = format!("item_{n}_{items}");
                // codex keeps its tool calls in its rollout.
                if let Emit::Tool {
                    kind,
                    arg,
                    exit,
                    output,
                } = other
                {
                    thread.transcript.tool_call(
                        Tool::Codex,
                        &tid,
                        &thread.cwd,
                        &call_id,
                        kind,
                        arg,
                        exit,
                        output,
                    )?;
                }
                write_conversation(&tid, &turn_id, &call_id, &cwd, other)
            }
        };
        let ended = turn.run(&steps, &mut emit)?;
        let mut reply = None;
        let mut limited = None;
        let status = match ended {
            Ended::Completed { text, notes } => {
                let r = script::reply(n, &text, &notes);
                emit(Emit::Text(&r))?;
                reply = Some(r);
                "completed"
            }
            Ended::Interrupted => "interrupted",
            Ended::Limited(l) => {
                limited = Some(l);
                "failed"
            }
        };
        notify(
            "item/completed",
            json!({"threadId": tid, "turnId": turn_id,
                   "item": {"type": "agentMessage", "id": item_id, "text": full}}),
        )?;
        // The transcript keeps the reply, not the bulk of `!emit` (noted in the reply).
        if let Some(r) = reply {
            thread
                .transcript
                .message(Tool::Codex, &tid, &thread.cwd, "assistant", &r)?;
        }
        let mut turn_done = turn_obj(status);
        if let Some(l) = limited {
            // codex 0.171's shapes (`codex app-server generate-json-schema`): the account's
            // windows first (an exhausted `primary` window when a reset is scripted), the
            // final `error` notification, then the failed turn typed by `codexErrorInfo`.
            if let Some(reset) = l.resets_at {
                notify(
                    "account/rateLimits/updated",
                    json!({"rateLimits": {
                        "primary": {"usedPercent": 100, "windowDurationMins": 300, "resetsAt": reset},
                        "secondary": null, "credits": null, "planType": "plus"}}),
                )?;
            }
            let (message, info) = if l.usage {
                (
                    "You've hit your usage limit. Upgrade to Pro or try again later.",
                    "usageLimitExceeded",
                )
            } else {
                (
                    "Rate limit reached. Please try again later.",
                    "rateLimitExceeded",
                )
            };
            let err =
                json!({"message": message, "codexErrorInfo": info, "additionalDetails": null});
            notify(
                "error",
                json!({"threadId": tid, "turnId": turn_id, "willRetry": false, "error": err}),
            )?;
            turn_done["error"] = err;
        }
        notify(
            "turn/completed",
            json!({"threadId": tid, "turn": turn_done}),
        )?;
        Ok(None)
    }
}
