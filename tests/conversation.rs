//! The conversation of a pipe session, end to end: each fake (claude stream-json, codex
//! app-server, ACP) started through the real server with a prompt that makes it call a tool
//! that fails, think, and report a retried error, then a second input; `session tail --json`
//! shows the person's turns (once each), the tool call with its exit, the reasoning and the
//! error, and `session tail` shows the same as lines, with the tool's escape sequences and
//! bidi controls neutralised.

mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::ShimEnv as Env;
use serde_json::Value;

/// How long a wait may take before the test gives up (a hang, not a speed requirement).
const HANG: Duration = Duration::from_secs(60);

impl Env {
    fn run(&self, args: &[&str]) -> Output {
        let mut c = self.h.cmd();
        c.env("PATH", &self.path_var).current_dir(self.ws.path());
        c.args(args).stdin(Stdio::null()).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "proctor {args:?} failed ({:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `tail --json` until `n` turns have ended; the events.
    fn said_until_turns(&self, run: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + HANG;
        loop {
            let out = self.ok(&["session", "tail", run, "--json"]);
            let said: Vec<Value> = out
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect();
            if said.iter().filter(|s| s["type"] == "turn_ended").count() >= n {
                return said;
            }
            assert!(Instant::now() < deadline, "{n} turns never ended:\n{out}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

const PROMPT: &str = "!think weighing \u{1b}[31mit\n!tool bash cargo test 1\n!fail over\u{1b}[2Jloaded\u{202e}\nhello";

fn of_type<'a>(said: &'a [Value], t: &str) -> Vec<&'a Value> {
    said.iter().filter(|s| s["type"] == t).collect()
}

fn check(tool: &str, kind: &str, exit: Option<i64>, retry: Option<bool>) {
    let e = Env::new();
    let v: Value = serde_json::from_str(&e.ok(&[
        "session",
        "start",
        "--json",
        "--tool",
        tool,
        "--transport",
        "pipe",
        "--",
        PROMPT,
    ]))
    .unwrap();
    assert_eq!(v["demo"], true, "the fakes back this run: {v}");
    let run = v["ref"].as_str().unwrap().to_string();
    e.said_until_turns(&run, 1);
    e.ok(&["session", "input", &run, "and \u{202e}more"]);
    let said = e.said_until_turns(&run, 2);
    let all = serde_json::to_string_pretty(&said).unwrap();

    // The person's turns, each once (codex echoes its userMessage; it is not shown twice).
    let person: Vec<&str> = of_type(&said, "person_turn")
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(person, [PROMPT, "and \u{202e}more"], "{tool}: {all}");
    // The tool call, started then ended with its exit (unknown where the protocol has none).
    let calls = of_type(&said, "tool_call");
    assert_eq!(calls.len(), 2, "{tool}: {all}");
    assert_eq!(calls[0]["status"], "started", "{tool}: {all}");
    let end = calls[1];
    assert_eq!(end["kind"], kind, "{tool}: {all}");
    assert_eq!(end["command"], "cargo test", "{tool}: {all}");
    assert_eq!(end["status"], "failed", "{tool}: {all}");
    assert_eq!(end["exit_code"].as_i64(), exit, "{tool}: {all}");
    assert!(
        end["output"]
            .as_str()
            .is_some_and(|o| o.contains("demo output of bash cargo test")),
        "{tool}: {all}"
    );
    let thought = of_type(&said, "reasoning");
    assert_eq!(thought[0]["text"], "weighing \u{1b}[31mit", "{tool}: {all}");
    let errors = of_type(&said, "error");
    assert!(
        errors
            .iter()
            .any(|e| e["message"] == "over\u{1b}[2Jloaded\u{202e}"
                && e["will_retry"].as_bool() == retry),
        "{tool}: {all}"
    );
    // The person's turn comes before what the agent said in answer.
    let first_person = said
        .iter()
        .position(|s| s["type"] == "person_turn")
        .unwrap();
    let first_call = said.iter().position(|s| s["type"] == "tool_call").unwrap();
    assert!(first_person < first_call, "{tool}: {all}");

    // The same, as lines, sanitised.
    let out = e.run(&["session", "tail", &run]);
    let human = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{human}");
    assert!(
        !human.contains('\u{1b}'),
        "no escape reaches the terminal: {human:?}"
    );
    assert!(!human.contains('\u{202e}'), "no bidi control: {human:?}");
    assert!(
        human.contains("you: !think weighing it\n"),
        "{tool}: {human}"
    );
    assert!(
        human.contains("\n     !tool bash cargo test 1\n"),
        "{tool}: {human}"
    );
    assert!(
        human.contains("you: and \u{27e8}U+202E\u{27e9}more\n"),
        "{tool}: {human}"
    );
    assert!(human.contains("thinking: weighing it\n"), "{tool}: {human}");
    let ended = match exit {
        Some(c) => format!("(exit {c})"),
        None => "(failed)".to_string(),
    };
    assert!(
        human
            .lines()
            .any(|l| l.starts_with(&format!("▸ {kind}: cargo test")) && l.ends_with(&ended)),
        "{tool}: {human}"
    );
    assert!(
        human.contains("! error: overloaded\u{27e8}U+202E\u{27e9}"),
        "{tool}: {human}"
    );
    assert!(human.contains("demo reply #1"), "{tool}: {human}");
    e.ok(&["session", "stop", &run]);
}

#[test]
fn claude_stream_json_conversation() {
    check("claude", "Bash", Some(1), Some(true));
}

#[test]
fn codex_app_server_conversation() {
    check("codex", "commandExecution", Some(1), Some(true));
}

#[test]
fn acp_conversation() {
    check("gemini", "execute", None, None);
}

#[test]
fn acp_conversation_of_the_other_acp_fakes() {
    check("opencode", "execute", None, None);
    check("grok", "execute", None, None);
}
