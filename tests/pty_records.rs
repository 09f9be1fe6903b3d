//! A PTY run of claude reads as a stdio one does (issue 18, PTY runs): its conversation id
//! comes from claude's own hooks (`session_id` of the JSON claude writes on a hook's stdin,
//! attributed to the run by the kernel), its record is found under the profile's account
//! home from that id, and so `/messages`, `/activity`, `POST /move`, `/handoff` and the
//! run's `limit` work for it. Against a real server on a temp home, with the demo fakes on
//! PATH (the fake claude runs its hooks through `/bin/sh -c` with claude's JSON on stdin,
//! and writes its transcript where claude 2.1.332 does).

mod common;
use std::path::{Path, PathBuf};

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
    std::fs::canonicalize(&w)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

fn profile(s: &DemoServer, name: &str, tool: &str) -> PathBuf {
    let home = s.home.path().join(format!("acct-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    s.home.ok(&[
        "profile",
        "add",
        name,
        "--tool",
        tool,
        "--account-home",
        home.to_str().unwrap(),
    ]);
    std::fs::canonicalize(home).unwrap()
}

fn ledger(s: &DemoServer, kind: &str, run: &str) -> Vec<Value> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == kind && v["run"] == run)
        .collect()
}

fn hooks(s: &DemoServer, run: &str) -> Vec<String> {
    ledger(s, "sessions.run.hook", run)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

/// Types a line into the PTY run and waits for the hook that ends its turn.
fn type_line(s: &DemoServer, run: &str, line: &str, ends_with: &str) {
    let before = hooks(s, run).iter().filter(|h| *h == ends_with).count();
    s.expect(
        202,
        "POST",
        &s.run_path(run, "/input"),
        Some(json!({"text": format!("{line}\r")})),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while hooks(s, run).iter().filter(|h| *h == ends_with).count() <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "no {ends_with} hook after {line:?}: {:?}",
            hooks(s, run)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn messages(s: &DemoServer, run: &str) -> Value {
    s.expect(
        200,
        "GET",
        &s.run_path(run, "/messages?role=all&text=1"),
        None,
    )
}

fn texts(v: &Value) -> Vec<(String, String)> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn is_uuid(s: &str) -> bool {
    proctor::providers::is_claude_session_id(s)
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
fn a_pty_claude_run_learns_its_conversation_from_its_hooks_and_reads_its_record() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let home = profile(&s, "a", "claude");
    let run = start(
        &s,
        json!({"transport": "pty", "profile": "a", "workspace": ws}),
    );
    // claude's SessionStart hook names its session: the run's conversation.
    let v = s.wait_run(&run, "a conversation id", |v| {
        v["conversation_id"].is_string()
    });
    let id = v["conversation_id"].as_str().unwrap().to_string();
    assert!(is_uuid(&id), "{v}");
    let conv = ledger(&s, "sessions.run.conversation", &run);
    assert_eq!(conv.len(), 1, "{conv:?}");
    assert_eq!(conv[0]["conversation_id"], id.as_str());
    assert_eq!(conv[0]["source"], "hook");
    assert_eq!(conv[0]["event"], "SessionStart");
    assert_eq!(conv[0]["hook_source"], "startup");
    assert_eq!(conv[0]["generation"], 1);
    // Two turns: each hook carries the same id again, which adds nothing.
    type_line(&s, &run, "first words", "Stop");
    type_line(&s, &run, "Second TURN", "Stop");
    assert_eq!(ledger(&s, "sessions.run.conversation", &run).len(), 1);
    // The record is read from the profile's home, found by the id (never a hook's path).
    let record = proctor::providers::records::claude::path(&home, Path::new(&ws), &id);
    assert!(record.is_file(), "{record:?}");
    let m = messages(&s, &run);
    assert_eq!(m["transcript"], "read", "{m}");
    let t = texts(&m);
    assert_eq!(t.len(), 4, "{m}");
    assert_eq!(t[0], ("user".into(), "first words".into()));
    assert_eq!(t[2], ("user".into(), "Second TURN".into()));
    assert!(t[3].1.contains("you said \"Second TURN\""), "{m}");
    let a = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(a["transcript"], "read", "{a}");
    assert_eq!(a["model"], "demo", "{a}");
    let h = s.expect(200, "GET", &s.run_path(&run, "/handoff"), None);
    assert_eq!(h["turns"], 2, "{h}");

    // /clear: claude starts a new session (SessionStart, source clear): the run's
    // conversation is the new one, the old one named as `previous`.
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "/clear\r"})),
    );
    let v = s.wait_run(&run, "the new conversation", |v| {
        v["conversation_id"].as_str().is_some_and(|c| c != id)
    });
    let cleared = v["conversation_id"].as_str().unwrap().to_string();
    assert!(is_uuid(&cleared));
    let conv = ledger(&s, "sessions.run.conversation", &run);
    assert_eq!(conv.len(), 2, "{conv:?}");
    assert_eq!(conv[1]["hook_source"], "clear");
    assert_eq!(conv[1]["previous"], id.as_str());
    type_line(&s, &run, "after the clear", "Stop");
    let t = texts(&messages(&s, &run));
    assert_eq!(t.len(), 2, "only the new conversation's: {t:?}");
    assert_eq!(t[0].1, "after the clear");

    // Stopped, then resumed: `claude --resume <id>` on the latest conversation; its
    // SessionStart (source resume) names the same id for the new generation.
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    s.wait_run(&run, "stopped", |v| v["state"] == "stopped");
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    let v = s.wait_run(&run, "running again", |v| {
        v["state"] == "running" && v["generation"] == 2
    });
    let argv = cmdline(v["pid"].as_u64().unwrap());
    let at = argv.iter().position(|a| a == "--resume").expect("--resume");
    assert_eq!(argv[at + 1], cleared, "{argv:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while ledger(&s, "sessions.run.conversation", &run).len() < 3 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let conv = ledger(&s, "sessions.run.conversation", &run);
    assert_eq!(conv[2]["conversation_id"], cleared.as_str());
    assert_eq!(conv[2]["hook_source"], "resume");
    assert_eq!(conv[2]["generation"], 2);
    type_line(&s, &run, "resumed words", "Stop");
    let t = texts(&messages(&s, &run));
    assert_eq!(t.len(), 4, "{t:?}");
    assert_eq!(t[2].1, "resumed words");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn a_session_id_is_taken_only_from_a_process_of_the_run_and_only_as_a_fresh_uuid() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    profile(&s, "a", "claude");
    let other = start(
        &s,
        json!({"transport": "pty", "profile": "a", "workspace": ws}),
    );
    let run = start(
        &s,
        json!({"transport": "pty", "profile": "a", "workspace": ws}),
    );
    let theirs = s.wait_run(&other, "a conversation", |v| {
        v["conversation_id"].is_string()
    })["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ours =
        s.wait_run(&run, "a conversation", |v| v["conversation_id"].is_string())["conversation_id"]
            .as_str()
            .unwrap()
            .to_string();
    // A same-user process outside every run, with or without a token, with a well-formed
    // id: refused, nothing recorded.
    let socket = s.home.socket();
    let forged = "0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0c";
    for token in [None, Some(s.token.as_str())] {
        let (status, v) = call_as(
            &socket,
            token,
            "POST",
            HOOK,
            Some(json!({"event": "SessionStart", "session_id": forged, "source": "startup"})),
        );
        assert_eq!(status, 403, "{v}");
        // A malformed one is refused by its shape before anything else.
        let (status, v) = call_as(
            &socket,
            token,
            "POST",
            HOOK,
            Some(json!({"event": "Stop", "session_id": "../../../etc/passwd"})),
        );
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["code"], "bad_session_id", "{v}");
    }
    // A process of the run (what an agent's command can do: run the hook command with its
    // own JSON): a malformed id, an oversized one, a path, an uppercase UUID: each refused
    // whole (not even the event is recorded), the run's conversation unchanged.
    let before = hooks(&s, &run).len();
    for bad in [
        "../../../../etc/passwd".to_string(),
        "a".repeat(300),
        ours.to_uppercase(),
        format!("{ours}/../x"),
    ] {
        type_line(&s, &run, &format!("!hook-as {bad} Notification"), "Stop");
    }
    let got = hooks(&s, &run);
    assert_eq!(
        got[before..],
        ["UserPromptSubmit", "Stop"].repeat(4),
        "no Notification recorded: {got:?}"
    );
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["conversation_id"], ours.as_str(), "{v}");
    assert_eq!(ledger(&s, "sessions.run.conversation", &run).len(), 1);
    // Another run's conversation: not taken (409 to the hook); the run's conversation is
    // unknown (never the other run's) until claude's own next hook names its own again.
    type_line(&s, &run, &format!("!hook-as {theirs} Notification"), "Stop");
    // (The Stop hook's own conversation line follows its hook line in the ledger.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ledger(&s, "sessions.run.conversation", &run).len() < 3 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let conv = ledger(&s, "sessions.run.conversation", &run);
    assert_eq!(conv.len(), 3, "{conv:?}");
    assert_eq!(conv[1]["refused"], theirs.as_str());
    assert!(conv[1]["conversation_id"].is_null(), "{conv:?}");
    assert_eq!(conv[1]["previous"], ours.as_str());
    assert_eq!(conv[2]["conversation_id"], ours.as_str(), "{conv:?}");
    assert_eq!(conv[2]["event"], "Stop");
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["conversation_id"], ours.as_str(), "{v}");
    let o = s.expect(200, "GET", &s.run_path(&other, ""), None);
    assert_eq!(o["conversation_id"], theirs.as_str(), "{o}");
    // Its messages are still its own record's.
    let t = texts(&messages(&s, &run));
    assert!(
        t.iter().all(|(_, text)| !text.is_empty()) && t[0].1.starts_with("!hook-as "),
        "{t:?}"
    );
    for r in [&run, &other] {
        s.expect(200, "POST", &s.run_path(r, "/stop"), None);
    }
}

#[test]
fn a_limit_in_a_pty_record_shows_once_and_clears_with_the_next_good_turn() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    profile(&s, "acct", "claude");
    let reset = chrono::Utc::now().timestamp() + 3600;
    let reset_s = chrono::DateTime::from_timestamp(reset, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run = start(
        &s,
        json!({"transport": "pty", "profile": "acct", "workspace": ws}),
    );
    s.wait_run(&run, "a conversation", |v| v["conversation_id"].is_string());
    type_line(&s, &run, "hello", "Stop");
    assert!(s.expect(200, "GET", &s.run_path(&run, ""), None)["limit"].is_null());
    // The turn ends on the plan's limit: claude writes its API error line, then StopFailure.
    type_line(&s, &run, &format!("!limit usage {reset}"), "StopFailure");
    let v = s.wait_run(&run, "the limit", |v| !v["limit"].is_null());
    assert_eq!(
        v["limit"],
        json!({"kind": "usage", "resets_at": reset_s, "account_ref": "acct"}),
        "{v}"
    );
    assert_eq!(
        v["waiting"]["reason"], "the turn ended; the tool waits for your input",
        "a turn that ended on an API error waits for input too: {v}"
    );
    let facts = |s: &DemoServer| ledger(s, "sessions.run.limit_reached", &run);
    assert_eq!(facts(&s).len(), 1);
    assert_eq!(facts(&s)[0]["source"], "record");
    // The same fact again adds nothing.
    type_line(&s, &run, &format!("!limit usage {reset}"), "StopFailure");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(facts(&s).len(), 1, "{:?}", facts(&s));
    // A rate limit without a reset: a new fact.
    type_line(&s, &run, "!limit rate", "StopFailure");
    let v = s.wait_run(&run, "the rate limit", |v| v["limit"]["kind"] == "rate");
    assert_eq!(
        v["limit"],
        json!({"kind": "rate", "account_ref": "acct"}),
        "{v}"
    );
    assert_eq!(facts(&s).len(), 2);
    // The next good turn (claude's Stop hook) clears it.
    type_line(&s, &run, "all good now", "Stop");
    let v = s.wait_run(&run, "cleared", |v| v["limit"].is_null());
    assert_eq!(v["state"], "running", "{v}");
    assert_eq!(facts(&s).len(), 2);
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn a_stopped_pty_run_moves_with_its_conversation_and_a_live_one_hands_off() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let a = profile(&s, "a", "claude");
    let b = profile(&s, "b", "claude");
    let run = start(
        &s,
        json!({"transport": "pty", "profile": "a", "workspace": ws}),
    );
    let id =
        s.wait_run(&run, "a conversation", |v| v["conversation_id"].is_string())["conversation_id"]
            .as_str()
            .unwrap()
            .to_string();
    type_line(&s, &run, "words to carry", "Stop");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    s.wait_run(&run, "stopped", |v| v["state"] == "stopped");
    let v = s.expect(
        200,
        "POST",
        &s.run_path(&run, "/move"),
        Some(json!({"provider_profile_ref": "b"})),
    );
    assert_eq!(v["profile"], "b");
    assert_eq!(v["conversation_id"], id.as_str());
    let moved = ledger(&s, "sessions.run.moved", &run);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0]["files"], 1, "{moved:?}");
    let src = proctor::providers::records::claude::path(&a, Path::new(&ws), &id);
    let dst = proctor::providers::records::claude::path(&b, Path::new(&ws), &id);
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    // Read from the target's home now, and resumed there on the same conversation.
    let t = texts(&messages(&s, &run));
    assert_eq!(t[0].1, "words to carry", "{t:?}");
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    s.wait_run(&run, "running on b", |v| v["state"] == "running");
    type_line(&s, &run, "on the other account", "Stop");
    let t = texts(&messages(&s, &run));
    assert_eq!(t.len(), 4, "{t:?}");
    assert_eq!(t[2].1, "on the other account");
    assert!(
        std::fs::read(&src).unwrap().len() < std::fs::read(&dst).unwrap().len(),
        "the source home is only read; the target's copy grows"
    );

    // Handed off while running: stopped first, its PTY record read (the transcript file
    // holds both accounts' turns), a PTY claude of profile a started with the first turn.
    let (code, h) = s.call(
        "POST",
        &s.run_path(&run, "/handoff"),
        Some(json!({"provider_profile_ref": "a", "summary": "REVIEWED: go on."})),
    );
    assert_eq!(code, 201, "{h}");
    assert_eq!(h["stopped_source"], true, "{h}");
    assert_eq!(h["run"]["handoff_of"], run.as_str(), "{h}");
    let new = h["run"]["ref"].as_str().unwrap().to_string();
    let body = std::fs::read_to_string(h["transcript_path"].as_str().unwrap()).unwrap();
    assert!(body.contains("source tool: claude\n"), "{body}");
    assert!(body.contains(&format!("conversation: {id}\n")), "{body}");
    assert!(body.contains("words to carry"), "{body}");
    assert!(body.contains("on the other account"), "{body}");
    // The first turn is typed into the new PTY run (its text, then Enter). The demo's
    // line-oriented fake takes each typed line as a prompt of its own (the real claude
    // keeps a multi-line prompt whole), so its record never shows the whole first turn:
    // the state is `unknown` (tried, not confirmed) with `first_turn`, never `delivered`
    // on a guess; the record shows that the turn reached the new session.
    assert_eq!(h["summary_state"], "unknown", "{h}");
    assert!(
        h["first_turn"]
            .as_str()
            .unwrap()
            .starts_with("REVIEWED: go on.\n"),
        "{h}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let m = messages(&s, &new);
        if let Some(first) = m["items"].as_array().unwrap().first() {
            assert_eq!(first["text"], "REVIEWED: go on.", "{m}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{m}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    s.expect(200, "POST", &s.run_path(&new, "/stop"), None);
}
