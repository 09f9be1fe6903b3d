//! The fakes' prompt scripts: lines of a prompt that start with `!` and name a directive
//! are executed; every other line is text that the deterministic reply quotes.
//!
//! | directive | effect |
//! |---|---|
//! | `!sleep MS` | waits MS milliseconds; an interrupt during the wait ends the turn as interrupted |
//! | `!emit N` | emits N bytes of a fixed pattern as reply text (raw bytes on a PTY), in chunks |
//! | `!ignore-term` | the process ignores SIGTERM from now on (stop must escalate to SIGKILL) |
//! | `!grandchild` | forks a child that sleeps forever in the same process group; reports its pid |
//! | `!exit K` | exits at once with status K (0–255) |
//! | `!write PATH TEXT` | writes TEXT and a newline to PATH (relative to the working folder), 0600 |
//! | `!env NAME` | reports whether NAME is in the environment, and its value |
//! | `!say TEXT` | emits TEXT and a newline at once, as reply text (for narrated demos) |
//! | `!narrate N` | emits a fixed, plausible work log N times, a line every second or so (`proctor demo`) |
//! | `!tool KIND ARG… EXIT` | a tool call in the tool's own shape, started then ended with exit status EXIT (0–255): KIND `bash` (ARG is the command), `edit`, `write` or `read` (ARG is the file), `task` (ARG is a sub-agent's task: the fake claude writes the sub-agent's own transcript too), or another word (ARG is its input); its output is a fixed demo line |
//! | `!think TEXT` | a reasoning summary (claude `thinking` block, codex `reasoning` item, ACP `agent_thought_chunk`) |
//! | `!plan A\|B\|C` | the plan or todo list, the first entry in progress (claude `TodoWrite`, codex `turn/plan/updated`, ACP `plan`) |
//! | `!fail TEXT` | an error in the tool's shape: claude `system/api_retry`, codex `error` with `willRetry: true` (the turn goes on), ACP an error answer to the prompt (the turn fails) |
//! | `!ask KIND WHAT` | asks for a permission in the tool's own shape (KIND `command` or `file`, WHAT the command or path), waits for the answer, and says in the reply what it got (`[permission: allowed]`, `… denied`, `… allowed for the session`); stdio forms only |
//! | `!limit KIND [RESET]` | ends the turn on an account limit in the tool's own shape (KIND `usage` or `rate`; RESET the Unix second it lifts, or `+N` seconds from now): claude a rejected `rate_limit_event` (with a RESET) and an `is_error` `result` (`usage_limit_reached`, or HTTP 429 for `rate`), codex `account/rateLimits/updated` (an exhausted window, with a RESET) and a failed turn typed `usageLimitExceeded` / `rateLimitExceeded`; other forms say it as text |
//! | `!frame JSON` | claude's stream-json form only: writes JSON (one object, on one line) to stdout as a frame of its own, as is (hand-written `system/task_progress` frames, say); the other forms ignore it |
//! | `!hook EVENT MESSAGE` | runs the fake claude's own hook commands for EVENT (from `--settings`), with claude's JSON on stdin (`message` for a `Notification`), as the real claude does |
//! | `!hook-as ID EVENT` | the same with `session_id` ID instead of the session's own: what a process of the run (an agent's command) can make the hook command say; for tests of what the server takes |
//!
//! A line that starts with `!` but is not one of these, or has a bad argument, is text.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::Inbound;

/// Bytes per emitted chunk for `!emit`.
pub const EMIT_CHUNK: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Sleep(u64),
    Emit(u64),
    IgnoreTerm,
    Grandchild,
    Exit(i32),
    Write(PathBuf, String),
    Env(String),
    Say(String),
    Narrate(u32),
    Text(String),
    /// `!tool KIND ARG… EXIT`.
    Tool {
        kind: String,
        arg: String,
        exit: i32,
    },
    Think(String),
    Plan(Vec<String>),
    Fail(String),
    /// `!frame JSON`: one JSON object, compacted.
    Frame(String),
    Ask(AskKind, String),
    Hook(String, String),
    /// `!hook-as ID EVENT`: (session id, event).
    HookAs(String, String),
    /// `!limit KIND [RESET]`.
    Limit(FakeLimit),
}

/// The limit `!limit` ends a turn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeLimit {
    /// `usage` (true) or `rate` (false).
    pub usage: bool,
    /// When it lifts (Unix seconds), if the tool is to say so.
    pub resets_at: Option<i64>,
}

impl FakeLimit {
    /// What a terminal shows for it.
    pub fn as_text(&self) -> String {
        let what = if self.usage {
            "You've hit your usage limit"
        } else {
            "API Error: 429 rate limited"
        };
        match self.resets_at {
            Some(r) => format!("{what} · resets at {r}\n"),
            None => format!("{what}\n"),
        }
    }
}

/// What a step asks the tool-specific code to write, in its protocol's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit<'a> {
    /// Reply text (a chunk).
    Text(&'a str),
    /// A tool call, started then ended with `exit`; `output` is what it printed.
    Tool {
        kind: &'a str,
        arg: &'a str,
        exit: i32,
        output: &'a str,
    },
    Think(&'a str),
    Plan(&'a [String]),
    Fail(&'a str),
    /// A raw frame of the tool's own stream (claude stream-json only).
    Frame(&'a str),
}

impl Emit<'_> {
    /// The form of a terminal (the PTY fakes): what a person would read.
    pub fn as_text(&self) -> String {
        match self {
            Emit::Text(t) => t.to_string(),
            Emit::Tool {
                kind,
                arg,
                exit,
                output,
            } => format!("● {kind}({arg})\n  ⎿  {output} (exit {exit})\n"),
            Emit::Think(t) => format!("✻ {t}\n"),
            Emit::Plan(entries) => entries
                .iter()
                .enumerate()
                .map(|(i, e)| format!("{} {e}\n", if i == 0 { "◼" } else { "◻" }))
                .collect(),
            Emit::Fail(t) => format!("  ⎿  API Error: {t} · Retrying…\n"),
            Emit::Frame(_) => String::new(),
        }
    }
}

/// The fixed output of a `!tool` call.
pub fn tool_output(kind: &str, arg: &str, exit: i32) -> String {
    if exit == 0 {
        format!("demo output of {kind} {arg}")
    } else {
        format!("demo output of {kind} {arg}: failed")
    }
}

/// What `!ask` asks a permission for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    /// Running a command.
    Command,
    /// Changing a file.
    File,
}

/// How a stdio fake asks for a permission in its tool's shape.
pub trait Asker {
    /// The lines that ask for `kind`/`what` (the frames the real tool sends before and the
    /// request itself), and the id its answer carries.
    fn request(&self, kind: AskKind, what: &str) -> (Vec<u8>, serde_json::Value);
    /// If `line` answers the request `id`: what was decided, in words (`allowed`, `allowed
    /// for the session`, `denied`, `cancelled`…), and the lines the real tool sends then.
    fn answer(&self, line: &[u8], id: &serde_json::Value) -> Option<(String, Vec<u8>)>;
    /// The lines the real tool sends when an interrupt makes it give up the request `id`
    /// (none: the client answers it, as ACP asks).
    fn abandoned(&self, _id: &serde_json::Value) -> Vec<u8> {
        Vec::new()
    }
}

/// The work log `!narrate` plays: what an agent's session looks like, at a human pace
/// (milliseconds before each line). Every line is the fake's own text, not a model's.
pub const NARRATION: [(u64, &str); 12] = [
    (600, "● Reading src/parser.rs (412 lines)"),
    (500, "● Reading tests/parser_tests.rs (188 lines)"),
    (900, "● Running: cargo test --lib parser"),
    (1400, "    running 14 tests"),
    (300, "    test parser::tests::nested_lists ... ok"),
    (300, "    test parser::tests::escaped_quotes ... FAILED"),
    (500, "    test result: FAILED. 13 passed; 1 failed"),
    (
        1500,
        "● The failure: an escaped quote inside a string ends the token early.",
    ),
    (
        1800,
        "● Editing src/parser.rs: lex_string() skips \\\" before looking for the closing quote",
    ),
    (900, "● Running: cargo test --lib parser"),
    (1600, "    test result: ok. 14 passed; 0 failed"),
    (
        700,
        "● Done: escaped quotes fixed in lex_string (1 file, +6 −2)",
    ),
];

/// Splits a prompt into steps.
pub fn parse(prompt: &str) -> Vec<Step> {
    prompt.lines().map(parse_line).collect()
}

fn parse_line(l: &str) -> Step {
    let text = || Step::Text(l.to_string());
    let Some(rest) = l.strip_prefix('!') else {
        return text();
    };
    let (word, arg) = match rest.split_once(' ') {
        Some((w, a)) => (w, a.trim()),
        None => (rest.trim_end(), ""),
    };
    match word {
        "sleep" => arg.parse().map(Step::Sleep).unwrap_or_else(|_| text()),
        "emit" => arg.parse().map(Step::Emit).unwrap_or_else(|_| text()),
        "ignore-term" if arg.is_empty() => Step::IgnoreTerm,
        "grandchild" if arg.is_empty() => Step::Grandchild,
        "exit" => match arg.parse::<i32>() {
            Ok(k) if (0..=255).contains(&k) => Step::Exit(k),
            _ => text(),
        },
        "write" => match arg.split_once(' ') {
            Some((p, t)) if !p.is_empty() => Step::Write(PathBuf::from(p), t.to_string()),
            _ => text(),
        },
        "env" if !arg.is_empty() && !arg.contains(' ') => Step::Env(arg.to_string()),
        "narrate" => match arg.parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Step::Narrate(n),
            _ => text(),
        },
        "ask" => match arg.split_once(' ') {
            Some(("command", w)) if !w.trim().is_empty() => {
                Step::Ask(AskKind::Command, w.trim().to_string())
            }
            Some(("file", w)) if !w.trim().is_empty() => {
                Step::Ask(AskKind::File, w.trim().to_string())
            }
            _ => text(),
        },
        "say" => Step::Say(
            l["!say".len()..]
                .strip_prefix(' ')
                .unwrap_or("")
                .to_string(),
        ),
        "tool" => {
            let words: Vec<&str> = arg.split_whitespace().collect();
            match words.as_slice() {
                [kind, middle @ .., exit] => match exit.parse::<i32>() {
                    Ok(k) if (0..=255).contains(&k) => Step::Tool {
                        kind: kind.to_string(),
                        arg: middle.join(" "),
                        exit: k,
                    },
                    _ => text(),
                },
                _ => text(),
            }
        }
        "think" if !arg.is_empty() => Step::Think(arg.to_string()),
        "plan" => {
            let entries: Vec<String> = arg
                .split('|')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect();
            if entries.is_empty() {
                text()
            } else {
                Step::Plan(entries)
            }
        }
        "fail" if !arg.is_empty() => Step::Fail(arg.to_string()),
        "frame" => match serde_json::from_str::<serde_json::Value>(arg) {
            Ok(v) if v.is_object() => Step::Frame(v.to_string()),
            _ => text(),
        },
        "limit" => {
            let mut words = arg.split_whitespace();
            let usage = match words.next() {
                Some("usage") => true,
                Some("rate") => false,
                _ => return text(),
            };
            let resets_at = match words.next() {
                None => None,
                Some(w) => match w.strip_prefix('+') {
                    Some(rel) => match rel.parse::<i64>() {
                        Ok(n) => Some(chrono::Utc::now().timestamp() + n),
                        Err(_) => return text(),
                    },
                    None => match w.parse::<i64>() {
                        Ok(n) => Some(n),
                        Err(_) => return text(),
                    },
                },
            };
            if words.next().is_some() {
                return text();
            }
            Step::Limit(FakeLimit { usage, resets_at })
        }
        "hook-as" => match arg.split_once(' ') {
            Some((id, event))
                if !id.is_empty()
                    && !event.is_empty()
                    && event.bytes().all(|b| b.is_ascii_alphanumeric()) =>
            {
                Step::HookAs(id.to_string(), event.to_string())
            }
            _ => text(),
        },
        "hook" => {
            let (event, message) = arg.split_once(' ').unwrap_or((arg, ""));
            if !event.is_empty() && event.bytes().all(|b| b.is_ascii_alphanumeric()) {
                Step::Hook(event.to_string(), message.trim().to_string())
            } else {
                text()
            }
        }
        _ => text(),
    }
}

/// The fixed pattern `!emit` produces: lowercase letters, a newline every 64th byte.
pub fn pattern(offset: u64, len: usize) -> String {
    // The pattern repeats every lcm(64, 26) = 832 bytes: copy slices of one period.
    const PERIOD: usize = 832;
    let period: Vec<u8> = (0..PERIOD)
        .map(|n| {
            if n % 64 == 63 {
                b'\n'
            } else {
                b'a' + (n % 26) as u8
            }
        })
        .collect();
    let mut out = Vec::with_capacity(len);
    let mut pos = (offset % PERIOD as u64) as usize;
    while out.len() < len {
        let take = (PERIOD - pos).min(len - out.len());
        out.extend_from_slice(&period[pos..pos + take]);
        pos = 0;
    }
    // ASCII only, so always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// How a turn's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Ran to the end; the text lines and the notes for the reply.
    Completed {
        text: Vec<String>,
        notes: Vec<String>,
    },
    Interrupted,
    /// Ended on an account limit (`!limit`).
    Limited(FakeLimit),
}

/// What the executor needs from the tool-specific code: where its interrupts come from and
/// how text is emitted.
/// Recognises an interrupt among input lines: `Some(reply)` is an interrupt, with the
/// line that answers it (if the protocol answers one).
pub type Classify = dyn Fn(&[u8]) -> Option<Option<Vec<u8>>>;

pub struct Turn<'a> {
    pub inbox: &'a Receiver<Inbound>,
    /// Lines received during the turn that were not interrupts, handled after it.
    pub deferred: &'a mut VecDeque<Inbound>,
    /// Recognises an interrupt among input lines; `Some(reply)` is an interrupt, with the
    /// line to answer it (if the protocol answers one).
    pub classify: &'a Classify,
    /// The PTY form's Ctrl-C flag.
    pub sigint: Option<&'a AtomicBool>,
    /// Writes an interrupt's answer.
    pub answer: &'a dyn Fn(&[u8]) -> std::io::Result<()>,
    /// How this form asks for a permission (`None`: it cannot, e.g. the PTY form).
    pub ask: Option<&'a dyn Asker>,
}

impl Turn<'_> {
    fn take(&mut self, item: Inbound) -> std::io::Result<bool> {
        match item {
            Inbound::Line(l) => {
                if let Some(reply) = (self.classify)(&l) {
                    if let Some(r) = reply {
                        (self.answer)(&r)?;
                    }
                    return Ok(true);
                }
                self.deferred.push_back(Inbound::Line(l));
            }
            Inbound::Eof => self.deferred.push_back(Inbound::Eof),
            // The flag is read by `poll`.
            Inbound::Signal => {}
        }
        Ok(false)
    }

    /// Whether an interrupt is already there (queued lines are classified or deferred).
    fn poll(&mut self) -> std::io::Result<bool> {
        loop {
            if self.sigint.is_some_and(|f| f.swap(false, Ordering::SeqCst)) {
                return Ok(true);
            }
            match self.inbox.try_recv() {
                Ok(item) => {
                    if self.take(item)? {
                        return Ok(true);
                    }
                }
                Err(_) => return Ok(false),
            }
        }
    }

    /// Whether an interrupt arrives within `d`.
    fn interrupted_within(&mut self, d: Duration) -> std::io::Result<bool> {
        let deadline = Instant::now() + d;
        loop {
            if self.poll()? {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            // On a PTY the interrupt is a signal, which also sends `Inbound::Signal`.
            let wait = left;
            match self.inbox.recv_timeout(wait) {
                Ok(item) => {
                    if self.take(item)? {
                        return Ok(true);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // stdin is closed: only a signal can still interrupt.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
            }
        }
    }

    /// Waits for the answer to the request `id`: `Some(what was decided)`, or `None` when an
    /// interrupt came first. Other lines are kept for after the turn.
    fn wait_answer(
        &mut self,
        asker: &dyn Asker,
        id: &serde_json::Value,
    ) -> std::io::Result<Option<String>> {
        loop {
            match self.inbox.recv() {
                Ok(Inbound::Signal) => {}
                Ok(Inbound::Line(l)) => {
                    if let Some((word, after)) = asker.answer(&l, id) {
                        if !after.is_empty() {
                            (self.answer)(&after)?;
                        }
                        return Ok(Some(word));
                    }
                    if self.take(Inbound::Line(l))? {
                        let gone = asker.abandoned(id);
                        if !gone.is_empty() {
                            (self.answer)(&gone)?;
                        }
                        return Ok(None);
                    }
                }
                Ok(Inbound::Eof) | Err(_) => {
                    self.deferred.push_back(Inbound::Eof);
                    return Ok(Some("no answer (stdin closed)".into()));
                }
            }
        }
    }

    /// Runs the steps. `emit` writes reply text (a chunk), tool calls, reasoning, plans and
    /// errors in the tool's form.
    pub fn run(
        &mut self,
        steps: &[Step],
        emit: &mut dyn FnMut(Emit<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<Ended> {
        let mut text = Vec::new();
        let mut notes = Vec::new();
        for step in steps {
            if self.poll()? {
                return Ok(Ended::Interrupted);
            }
            match step {
                Step::Text(t) => text.push(t.clone()),
                Step::Sleep(ms) => {
                    if self.interrupted_within(Duration::from_millis(*ms))? {
                        return Ok(Ended::Interrupted);
                    }
                }
                Step::Emit(n) => {
                    let mut done = 0u64;
                    while done < *n {
                        let len = (*n - done).min(EMIT_CHUNK as u64) as usize;
                        emit(Emit::Text(&pattern(done, len)))?;
                        done += len as u64;
                        if self.poll()? {
                            return Ok(Ended::Interrupted);
                        }
                    }
                    notes.push(format!("emitted {n} bytes"));
                }
                Step::IgnoreTerm => {
                    // SAFETY: setting a signal disposition to SIG_IGN has no preconditions.
                    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
                    notes.push("ignoring SIGTERM".into());
                }
                Step::Grandchild => {
                    let pid = spawn_sleeper()?;
                    notes.push(format!("grandchild pid {pid}"));
                }
                Step::Exit(k) => {
                    super::flush_stdout();
                    std::process::exit(*k);
                }
                Step::Write(path, t) => {
                    let mut bytes = t.clone().into_bytes();
                    bytes.push(b'\n');
                    match crate::files::write_atomic(path, &bytes) {
                        Ok(()) => notes.push(format!("wrote {}", path.display())),
                        Err(e) => notes.push(format!("write failed: {e}")),
                    }
                }
                Step::Say(t) => emit(Emit::Text(&format!("{t}\n")))?,
                Step::Narrate(n) => {
                    for _ in 0..*n {
                        for (ms, line) in NARRATION {
                            if self.interrupted_within(Duration::from_millis(ms))? {
                                return Ok(Ended::Interrupted);
                            }
                            emit(Emit::Text(&format!("{line}\n")))?;
                        }
                    }
                    notes.push(format!("narrated {n} time(s)"));
                }
                Step::Ask(kind, what) => {
                    let Some(asker) = self.ask else {
                        notes.push(
                            "permission: not asked (this form has no permission prompt)".into(),
                        );
                        continue;
                    };
                    let (request, id) = asker.request(*kind, what);
                    (self.answer)(&request)?;
                    match self.wait_answer(asker, &id)? {
                        Some(word) => notes.push(format!("permission: {word}")),
                        None => return Ok(Ended::Interrupted),
                    }
                }
                Step::Hook(event, message) => {
                    let extra = if event == "Notification" {
                        serde_json::json!({"message": message, "notification_type": "permission_prompt"})
                    } else {
                        serde_json::json!({})
                    };
                    notes.push(match super::hooks::fire(event, extra) {
                        None => format!("hook {event}: no hooks (no --settings)"),
                        Some((n, failed)) if failed.is_empty() => format!("hook {event}: ran {n}"),
                        Some((n, failed)) => {
                            format!("hook {event}: ran {n}, failed: {}", failed.join("; "))
                        }
                    });
                }
                Step::HookAs(id, event) => {
                    let extra = serde_json::json!({"session_id": id});
                    notes.push(match super::hooks::fire(event, extra) {
                        None => format!("hook {event}: no hooks (no --settings)"),
                        Some((n, failed)) if failed.is_empty() => format!("hook {event}: ran {n}"),
                        Some((n, failed)) => {
                            format!("hook {event}: ran {n}, failed: {}", failed.join("; "))
                        }
                    });
                }
                Step::Env(name) => notes.push(match std::env::var_os(name) {
                    Some(v) => format!("env {name}={}", v.to_string_lossy()),
                    None => format!("env {name} unset"),
                }),
                Step::Tool { kind, arg, exit } => emit(Emit::Tool {
                    kind,
                    arg,
                    exit: *exit,
                    output: &tool_output(kind, arg, *exit),
                })?,
                Step::Think(t) => emit(Emit::Think(t))?,
                Step::Plan(entries) => emit(Emit::Plan(entries))?,
                Step::Fail(t) => emit(Emit::Fail(t))?,
                Step::Frame(f) => emit(Emit::Frame(f))?,
                Step::Limit(l) => return Ok(Ended::Limited(*l)),
            }
        }
        Ok(Ended::Completed { text, notes })
    }
}

/// Forks a child that sleeps until a signal ends it, in this process group.
fn spawn_sleeper() -> std::io::Result<i32> {
    super::flush_stdout();
    // SAFETY: after fork the child only calls async-signal-safe functions (pause, _exit),
    // so forking a multi-threaded process is sound here.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => loop {
            // SAFETY: pause has no preconditions; the loop never returns to Rust code.
            unsafe { libc::pause() };
        },
        pid => Ok(pid),
    }
}

/// The deterministic reply of turn `n`.
pub fn reply(n: u64, text: &[String], notes: &[String]) -> String {
    let mut r = if text.iter().all(|t| t.trim().is_empty()) {
        format!("demo reply #{n}: (no text)")
    } else {
        format!("demo reply #{n}: you said \"{}\"", text.join("\n"))
    };
    for note in notes {
        r.push_str(&format!("\n[{note}]"));
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn say_and_narrate_parse() {
        assert_eq!(
            parse("!say   indented"),
            vec![Step::Say("  indented".into())]
        );
        assert_eq!(parse("!say"), vec![Step::Say(String::new())]);
        assert_eq!(parse("!narrate 2"), vec![Step::Narrate(2)]);
        assert_eq!(parse("!narrate 0"), vec![Step::Text("!narrate 0".into())]);
        assert_eq!(parse("!narrate x"), vec![Step::Text("!narrate x".into())]);
        assert_eq!(
            parse("!hook Notification Claude needs your permission to use Bash"),
            vec![Step::Hook(
                "Notification".into(),
                "Claude needs your permission to use Bash".into()
            )]
        );
        assert_eq!(
            parse("!hook Stop"),
            vec![Step::Hook("Stop".into(), String::new())]
        );
        assert_eq!(parse("!hook"), vec![Step::Text("!hook".into())]);
        assert_eq!(parse("!hook a;b x"), vec![Step::Text("!hook a;b x".into())]);
    }

    use super::*;

    #[test]
    fn directives_and_text() {
        let steps = parse(
            "hello\n!sleep 50\n!emit 3\n!sleep x\n!exit 300\n!exit 7\n!write a.txt hi there\n!env HOME\n!nope\n!ignore-term\n!grandchild",
        );
        assert_eq!(
            steps,
            [
                Step::Text("hello".into()),
                Step::Sleep(50),
                Step::Emit(3),
                Step::Text("!sleep x".into()),
                Step::Text("!exit 300".into()),
                Step::Exit(7),
                Step::Write("a.txt".into(), "hi there".into()),
                Step::Env("HOME".into()),
                Step::Text("!nope".into()),
                Step::IgnoreTerm,
                Step::Grandchild,
            ]
        );
    }

    #[test]
    fn conversation_directives_parse() {
        assert_eq!(
            parse(
                "!tool bash cargo test --lib 1\n!tool read src/a.rs 0\n!tool bash 300\n!tool 1\n!think why\n!plan read | fix|\n!plan |\n!fail overloaded\n!fail"
            ),
            [
                Step::Tool {
                    kind: "bash".into(),
                    arg: "cargo test --lib".into(),
                    exit: 1
                },
                Step::Tool {
                    kind: "read".into(),
                    arg: "src/a.rs".into(),
                    exit: 0
                },
                Step::Text("!tool bash 300".into()),
                Step::Text("!tool 1".into()),
                Step::Think("why".into()),
                Step::Plan(vec!["read".into(), "fix".into()]),
                Step::Text("!plan |".into()),
                Step::Fail("overloaded".into()),
                Step::Text("!fail".into()),
            ]
        );
        assert_eq!(
            parse(
                "!limit usage 1800000000\n!limit rate\n!limit other\n!limit usage x\n!limit rate 1 2"
            ),
            [
                Step::Limit(FakeLimit {
                    usage: true,
                    resets_at: Some(1800000000)
                }),
                Step::Limit(FakeLimit {
                    usage: false,
                    resets_at: None
                }),
                Step::Text("!limit other".into()),
                Step::Text("!limit usage x".into()),
                Step::Text("!limit rate 1 2".into()),
            ]
        );
    }

    #[test]
    fn ask_parses_its_kind_and_what() {
        assert_eq!(
            parse("!ask command cargo test --all\n!ask file src/a.rs\n!ask disk x\n!ask command"),
            [
                Step::Ask(AskKind::Command, "cargo test --all".into()),
                Step::Ask(AskKind::File, "src/a.rs".into()),
                Step::Text("!ask disk x".into()),
                Step::Text("!ask command".into()),
            ]
        );
    }

    #[test]
    fn pattern_is_fixed_and_continuous() {
        let whole = pattern(0, 200);
        assert_eq!(whole.len(), 200);
        assert_eq!(&whole[..3], "abc");
        assert_eq!(whole.as_bytes()[63], b'\n');
        assert_eq!(pattern(0, 100) + &pattern(100, 100), whole);
        let long = pattern(0, 5000);
        assert_eq!(pattern(0, 1000) + &pattern(1000, 4000), long);
        for (i, b) in long.bytes().enumerate() {
            let want = if i % 64 == 63 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            };
            assert_eq!(b, want, "byte {i}");
        }
    }

    #[test]
    fn reply_is_deterministic() {
        assert_eq!(
            reply(2, &["hi".into()], &["emitted 3 bytes".into()]),
            "demo reply #2: you said \"hi\"\n[emitted 3 bytes]"
        );
        assert_eq!(reply(1, &[], &[]), "demo reply #1: (no text)");
    }
}
