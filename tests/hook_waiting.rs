//! "Waiting for you" from claude's own hooks on a PTY run (issue 13, point 5): the server
//! passes the hooks with `--settings`, claude (here its fake, which runs them as claude does:
//! `/bin/sh -c COMMAND` with the hook's JSON on stdin) runs `proctor session hook`, and the
//! server records the hook for the run the kernel says holds the caller, and for no other.
//! A process outside every run is refused, with or without a token.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{DemoServer, call_as};
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";
const HOOK: &str = "/v1/m/sessions/hook";

fn start(s: &DemoServer, body: Value) -> String {
    let v = s.expect(201, "POST", RUNS, Some(body));
    v["ref"].as_str().unwrap().to_string()
}

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

fn hooks_of(s: &DemoServer, run: &str) -> Vec<Value> {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "sessions.run.hook")
        .map(|e| e["fields"].clone())
        .collect()
}

fn cmdline(pid: u64) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[test]
fn claudes_pty_hooks_mark_their_own_run_waiting_and_no_other() {
    hooks_scenario(&[], "cgroup");
}

/// The same, where the server holds runs as child subreaper (no cgroups): the kernel's ppid
/// chain from the hook's process to the run's leader attributes it.
#[test]
fn under_the_subreaper_fallback_the_ppid_chain_attributes_the_hook() {
    hooks_scenario(&["--no-cgroups"], "subreaper");
}

fn hooks_scenario(serve_args: &[&str], hold: &str) {
    let s = DemoServer::start(serve_args);
    let ws = workspace(&s);
    let other = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let v = s.wait_run(&run, "running", |v| v["state"] == "running");
    assert_eq!(v["waiting"], Value::Null, "{v}");
    assert_eq!(
        v["waiting_known"], true,
        "claude's PTY form reports by its hooks: {v}"
    );
    if v["hold"]["mechanism"] != hold {
        // This machine has no writable cgroup: the subreaper variant covers it.
        eprintln!("held by {} here, not {hold}: {v}", v["hold"]);
        assert_eq!(
            hold, "cgroup",
            "the subreaper fallback is always there: {v}"
        );
    }
    // The tool was started with its hooks: `--settings` naming this server's proctor and socket.
    let argv = cmdline(v["pid"].as_u64().unwrap());
    let at = argv
        .iter()
        .position(|a| a == "--settings")
        .expect("--settings");
    let settings: Value = serde_json::from_str(&argv[at + 1]).unwrap();
    let socket = s.home.socket();
    for event in [
        "SessionStart",
        "Notification",
        "Stop",
        "StopFailure",
        "UserPromptSubmit",
    ] {
        let cmd = settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert!(cmd.contains(" session hook --socket "), "{cmd}");
        assert!(cmd.contains(socket.to_str().unwrap()), "{cmd}");
    }
    // The person types a prompt that makes the fake claude send a Notification, as the real
    // one does when it needs a permission; then its turn ends (the Stop hook).
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "!hook Notification Claude needs your permission to use Bash \u{202e}txt.exe\r"})),
    );
    let v = s.wait_run(&run, "waiting from the Stop hook", |v| {
        v["waiting"]["reason"] == "the turn ended; the tool waits for your input"
    });
    assert_eq!(v["waiting"]["source"], "hook", "{v}");
    assert_eq!(v["state"], "running", "a PTY run's state is its process's");
    let hooks = hooks_of(&s, &run);
    let events: Vec<&str> = hooks.iter().map(|h| h["event"].as_str().unwrap()).collect();
    assert_eq!(
        events,
        ["SessionStart", "UserPromptSubmit", "Notification", "Stop"],
        "{hooks:?}"
    );
    assert_eq!(
        hooks[2]["message"], "Claude needs your permission to use Bash ⟨U+202E⟩txt.exe",
        "{hooks:?}"
    );
    // The Notification's time is when it began waiting.
    let all = s.expect(200, "GET", &s.run_path(&run, "/events"), None);
    let notified_at = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["fields"]["event"] == "Notification")
        .unwrap()["at"]
        .clone();
    assert_eq!(v["waiting"]["since"], notified_at, "{v}");
    let shown = s.home.ok(&["session", "show", &run]);
    assert!(
        shown.contains("waiting       for you since ")
            && shown
                .contains("(the tool's own hook): the turn ended; the tool waits for your input"),
        "{shown}"
    );
    // The other run's processes said only that its session began: nothing of this run's
    // is recorded for it.
    let theirs: Vec<Value> = hooks_of(&s, &other)
        .iter()
        .map(|h| h["event"].clone())
        .collect();
    assert_eq!(theirs, [json!("SessionStart")], "{theirs:?}");
    let o = s.expect(200, "GET", &s.run_path(&other, ""), None);
    assert_eq!(o["waiting"], Value::Null, "{o}");
    // The person types again: UserPromptSubmit clears it (and the turn's Stop sets it anew).
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "!sleep 600000\r"})),
    );
    let v = s.wait_run(&run, "not waiting once the person typed", |v| {
        v["waiting"].is_null()
    });
    assert_eq!(v["state"], "running");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    s.expect(200, "POST", &s.run_path(&other, "/stop"), None);
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(
        v["waiting"],
        Value::Null,
        "a stopped run waits on no one: {v}"
    );
}

#[test]
fn a_process_outside_every_run_cannot_mark_a_run_waiting_with_or_without_a_token() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    s.wait_run(&run, "running", |v| v["state"] == "running");
    let socket = s.home.socket();
    let body = json!({"event": "Notification", "message": "forged"});
    for token in [None, Some(s.token.as_str())] {
        let (status, v) = call_as(&socket, token, "POST", HOOK, Some(body.clone()));
        assert_eq!(status, 403, "{v}");
        assert_eq!(v["error"]["code"], "not_a_run", "{v}");
    }
    // The verb claude runs, run from here (outside every run): refused, exit 1 (never 2,
    // which claude would read as "block"), nothing on stdout.
    let mut child = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(["session", "hook", "--socket"])
        .arg(&socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"session_id":"0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0c","hook_event_name":"Notification","message":"forged"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no live run holds this caller"), "{err}");
    // A body over 16 KiB is refused before anything else.
    let big = json!({"event": "Notification", "message": "x".repeat(20_000)});
    let (status, v) = call_as(&socket, None, "POST", HOOK, Some(big));
    assert_eq!(status, 413, "{v}");
    // A body cannot even name a run, and an event proctor does not take is refused.
    let (status, v) = call_as(
        &socket,
        None,
        "POST",
        HOOK,
        Some(json!({"event": "Stop", "run": run})),
    );
    assert_eq!(status, 400, "{v}");
    let (status, v) = call_as(
        &socket,
        None,
        "POST",
        HOOK,
        Some(json!({"event": "PreToolUse"})),
    );
    assert_eq!(status, 400, "{v}");
    // Only the run's own claude said anything (its SessionStart).
    assert!(
        hooks_of(&s, &run)
            .iter()
            .all(|h| h["event"] == "SessionStart" && h["message"].is_null()),
        "{:?}",
        hooks_of(&s, &run)
    );
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["waiting"], Value::Null, "{v}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn a_pty_form_without_hooks_says_its_waiting_state_is_unknown() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "codex", "transport": "pty", "workspace": ws}),
    );
    let v = s.wait_run(&run, "running", |v| v["state"] == "running");
    assert_eq!(v["waiting_known"], false, "{v}");
    let shown = s.home.ok(&["session", "show", &run]);
    assert!(
        shown.contains("waiting       unknown: this tool's PTY form has no way to say it waits"),
        "{shown}"
    );
    assert_eq!(v["waiting"], Value::Null, "{v}");
    assert!(
        !cmdline(v["pid"].as_u64().unwrap())
            .iter()
            .any(|a| a == "--settings"),
        "no hooks for a tool that has none"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
