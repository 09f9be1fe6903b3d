//! Issue 18 §2 against a real server, with the demo fakes on PATH over real pipes: the
//! limit facts the tools' frames carry (`!limit` makes a fake end its turn on one, in its
//! tool's shape), and `POST /runs/{ref}/move` between two claude profiles with every
//! refusal and what it leaves on disk.

mod common;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::DemoServer;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

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

/// Adds profile `name` of `tool` with its own account home inside the test home.
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

fn ledger(s: &DemoServer, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn turn(s: &DemoServer, run: &str, text: &str, turns_before: usize) -> Value {
    s.expect(
        202,
        "POST",
        &s.run_path(run, "/input"),
        Some(json!({"text": text})),
    );
    let events = |s: &DemoServer| {
        ledger(s, "sessions.run.turn_ended")
            .into_iter()
            .filter(|e| e["run"] == run)
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while events(s) <= turns_before {
        assert!(
            std::time::Instant::now() < deadline,
            "no turn end for {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.wait_run(run, "idle", |v| v["state"] == "idle")
}

#[test]
fn limit_facts_from_the_tools_frames_reach_the_run_view_once_each_and_clear() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    profile(&s, "acct", "claude");
    let now = chrono::Utc::now().timestamp();
    let reset = now + 3600;
    let reset_s = chrono::DateTime::from_timestamp(reset, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run = start(
        &s,
        json!({"transport": "pipe", "profile": "acct", "workspace": ws,
               "prompt": format!("!limit usage {reset}")}),
    );
    let v = s.wait_run(&run, "the limit", |v| !v["limit"].is_null());
    assert_eq!(
        v["limit"],
        json!({"kind": "usage", "resets_at": reset_s, "account_ref": "acct"}),
        "{v}"
    );
    let facts = |s: &DemoServer| {
        ledger(s, "sessions.run.limit_reached")
            .into_iter()
            .filter(|e| e["run"] == run.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(facts(&s).len(), 1);
    let shown = s.home.ok(&["session", "show", &run]);
    assert!(
        shown.contains(&format!(
            "usage (the plan's allocation is used up) under profile acct, resets at {reset_s}"
        )),
        "{shown}"
    );
    // The same fact again adds no event; a limit is not a block.
    let v = turn(&s, &run, &format!("!limit usage {reset}"), 1);
    assert_eq!(facts(&s).len(), 1, "{:?}", facts(&s));
    assert_eq!(v["state"], "idle", "{v}");
    assert!(v["blocked"].is_null(), "{v}");
    // Another fact: a rate limit without a reset (claude's HTTP 429).
    let v = turn(&s, &run, "!limit rate", 2);
    assert_eq!(
        v["limit"],
        json!({"kind": "rate", "account_ref": "acct"}),
        "{v}"
    );
    assert_eq!(facts(&s).len(), 2);
    // A reset more than a year away is omitted.
    let far = now + 400 * 86_400;
    let v = turn(&s, &run, &format!("!limit usage {far}"), 3);
    assert_eq!(
        v["limit"],
        json!({"kind": "usage", "account_ref": "acct"}),
        "{v}"
    );
    assert_eq!(facts(&s).len(), 3);
    // The next successful turn clears it; the list shows the same.
    let v = turn(&s, &run, "all good", 4);
    assert!(v["limit"].is_null(), "{v}");
    let list = s.expect(200, "GET", RUNS, None);
    let row = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ref"] == run.as_str())
        .unwrap();
    assert!(row["limit"].is_null(), "{row}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);

    // codex: a failed turn typed usageLimitExceeded, the reset from its windows.
    profile(&s, "cx", "codex");
    let run = start(
        &s,
        json!({"transport": "pipe", "profile": "cx", "workspace": ws,
               "prompt": format!("!limit usage {reset}")}),
    );
    let v = s.wait_run(&run, "the limit", |v| !v["limit"].is_null());
    assert_eq!(
        v["limit"],
        json!({"kind": "usage", "resets_at": reset_s, "account_ref": "cx"}),
        "{v}"
    );
    let list = s.expect(200, "GET", RUNS, None);
    let row = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ref"] == run.as_str())
        .unwrap();
    assert_eq!(row["limit"]["kind"], "usage", "{row}");
    // A rate limit while the window is still exhausted: its reset is that window's (the
    // windows are the account's, kept across turns).
    let v = turn(&s, &run, "!limit rate", 1);
    assert_eq!(
        v["limit"],
        json!({"kind": "rate", "resets_at": reset_s, "account_ref": "cx"})
    );
    let v = turn(&s, &run, "fine now", 2);
    assert!(v["limit"].is_null(), "{v}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

/// Every path under `root`, relative, with its bytes for files: what a home holds.
fn tree(root: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
                out.push((rel, None));
            } else {
                out.push((rel, std::fs::read(&p).ok()));
            }
        }
    }
    out.sort();
    out
}

fn refused(s: &DemoServer, run: &str, target: &str, status: u16, needle: &str) {
    let (code, v) = s.call(
        "POST",
        &s.run_path(run, "/move"),
        Some(json!({"provider_profile_ref": target})),
    );
    assert_eq!(code, status, "move {run} to {target}: {v}");
    let m = v["error"]["message"].as_str().unwrap_or("");
    assert!(m.contains(needle), "{needle:?} not in {m}");
}

#[test]
fn move_carries_one_conversation_between_profiles_and_refusals_write_nothing() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let a = profile(&s, "a", "claude");
    let b = profile(&s, "b", "claude");
    profile(&s, "cx", "codex");
    // What must never travel: a login, a setting, another conversation.
    std::fs::write(a.join(".credentials.json"), b"{\"secret\":1}\n").unwrap();
    std::fs::write(a.join("settings.json"), b"{}\n").unwrap();
    let run = start(
        &s,
        json!({"transport": "pipe", "profile": "a", "workspace": ws, "prompt": "remember me"}),
    );
    let v = s.wait_run(&run, "idle", |v| v["state"] == "idle");
    let id = v["conversation_id"].as_str().unwrap().to_string();
    let project = a
        .join("projects")
        .join(ws.replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    let transcript = project.join(format!("{id}.jsonl"));
    assert!(transcript.is_file(), "{}", transcript.display());
    std::fs::write(project.join("another-conversation.jsonl"), b"{}\n").unwrap();
    // A running (here idle) run is refused.
    refused(&s, &run, "b", 409, "only a stopped or failed session moves");
    // The turn ends on a limit: the move clears it.
    let v = turn(&s, &run, "!limit usage", 1);
    assert_eq!(v["limit"]["account_ref"], "a");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // Sub-agent and tool-result files, in the conversation's own folder.
    std::fs::create_dir_all(project.join(&id).join("subagents")).unwrap();
    std::fs::create_dir_all(project.join(&id).join("tool-results")).unwrap();
    std::fs::write(
        project.join(&id).join("subagents/agent-a1b2.jsonl"),
        b"{\"isSidechain\":true}\n",
    )
    .unwrap();
    std::fs::write(
        project.join(&id).join("tool-results/toolu_01.txt"),
        b"a long tool output\n",
    )
    .unwrap();
    let a_before = tree(&a);
    let b_before = tree(&b);

    // Refusals, each naming its cause, each leaving both homes as they were.
    refused(&s, &run, "cx", 409, "runs codex, not claude");
    refused(&s, &run, "nobody", 422, "no usable target profile nobody");
    refused(&s, &run, "a", 409, "already under profile a");
    // A row whose home is not its profile's: profile a now names another home.
    let store = s.home.path().join("config/profiles.json");
    let saved = std::fs::read(&store).unwrap();
    let other = s.home.path().join("acct-a-elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let edited = String::from_utf8(saved.clone())
        .unwrap()
        .replace(a.to_str().unwrap(), other.to_str().unwrap());
    assert_ne!(edited.as_bytes(), &saved[..], "the store names a's home");
    std::fs::write(&store, edited).unwrap();
    refused(&s, &run, "b", 409, "which is not its profile a's");
    std::fs::write(&store, &saved).unwrap();
    // A conversation that is not in the run's account home.
    let aside = s.home.path().join("aside.jsonl");
    std::fs::rename(&transcript, &aside).unwrap();
    refused(&s, &run, "b", 409, "is not in its account home");
    std::fs::rename(&aside, &transcript).unwrap();
    // Hostile: a symlinked transcript in the source.
    std::fs::rename(&transcript, &aside).unwrap();
    std::os::unix::fs::symlink(a.join(".credentials.json"), &transcript).unwrap();
    refused(&s, &run, "b", 422, "link");
    std::fs::remove_file(&transcript).unwrap();
    std::fs::rename(&aside, &transcript).unwrap();
    // Hostile: a target home where the file already exists (another version).
    let b_project = b.join("projects").join(project.file_name().unwrap());
    std::fs::create_dir_all(&b_project).unwrap();
    let theirs = b_project.join(format!("{id}.jsonl"));
    std::fs::write(&theirs, b"{\"another\":\"version\"}\n").unwrap();
    let b_with_theirs = tree(&b);
    refused(&s, &run, "b", 409, "already holds a version");
    assert_eq!(tree(&b), b_with_theirs, "a refusal writes nothing");
    std::fs::remove_dir_all(b.join("projects")).unwrap();
    assert_eq!(tree(&a), a_before, "the source is only read");
    assert_eq!(tree(&b), b_before);
    assert!(ledger(&s, "sessions.run.moved").is_empty());
    // Hostile: another tool's session.
    let cx_run = start(
        &s,
        json!({"transport": "pipe", "profile": "cx", "workspace": ws, "prompt": "hi"}),
    );
    s.wait_run(&cx_run, "idle", |v| v["state"] == "idle");
    s.expect(200, "POST", &s.run_path(&cx_run, "/stop"), None);
    refused(&s, &cx_run, "cx", 422, "only a Claude Code session moves");

    // The move, through the CLI.
    let out = s
        .home
        .ok(&["session", "move", &run, "--profile", "b", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["profile"], "b", "{v}");
    assert_eq!(v["state"], "stopped");
    assert_eq!(v["conversation_id"], id.as_str(), "the same conversation");
    assert!(v["limit"].is_null(), "a move clears the limit: {v}");
    let moved = ledger(&s, "sessions.run.moved");
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0]["from"], "a");
    assert_eq!(moved[0]["to"], "b");
    assert_eq!(moved[0]["files"], 3, "{}", moved[0]);
    assert_eq!(tree(&a), a_before, "the source is only read");
    let got: Vec<String> = tree(&b).into_iter().map(|(p, _)| p).collect();
    let dir = format!(
        "projects/{}",
        project.file_name().unwrap().to_string_lossy()
    );
    assert_eq!(
        got,
        [
            "projects".to_string(),
            dir.clone(),
            format!("{dir}/{id}"),
            format!("{dir}/{id}.jsonl"),
            format!("{dir}/{id}/subagents"),
            format!("{dir}/{id}/subagents/agent-a1b2.jsonl"),
            format!("{dir}/{id}/tool-results"),
            format!("{dir}/{id}/tool-results/toolu_01.txt"),
        ],
        "that one conversation, never a login, a setting or another conversation"
    );
    assert_eq!(
        std::fs::read(b.join(format!("{dir}/{id}.jsonl"))).unwrap(),
        std::fs::read(&transcript).unwrap()
    );
    let mode = |p: PathBuf| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(b.join(format!("{dir}/{id}.jsonl"))), 0o600);
    assert_eq!(
        mode(b.join(format!("{dir}/{id}/subagents/agent-a1b2.jsonl"))),
        0o600
    );
    assert_eq!(mode(b.join(format!("{dir}/{id}"))), 0o700);
    assert_eq!(mode(b.join(&dir)), 0o700);

    // Resume runs under the target: claude finds its conversation in b's home.
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    s.wait_run(&run, "resumed", |v| {
        v["state"] == "idle" || v["state"] == "running"
    });
    let started = ledger(&s, "sessions.run.started");
    assert_eq!(
        started.last().unwrap()["account_home"],
        b.to_str().unwrap(),
        "{:?}",
        started.last()
    );
    turn(&s, &run, "still there?", 2);
    assert_ne!(
        std::fs::read(b.join(format!("{dir}/{id}.jsonl"))).unwrap(),
        std::fs::read(&transcript).unwrap(),
        "the turn was written in b's home"
    );
    assert_eq!(
        tree(&a),
        a_before,
        "a's copy is untouched by the resumed run"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // Back to a: a holds a different version it did not get from a move of this run.
    refused(&s, &run, "a", 409, "already holds a version");
    assert_eq!(tree(&a), a_before);

    // A failed run moves and keeps its reason; a run with no conversation moves with
    // nothing to carry.
    let failed = start(
        &s,
        json!({"transport": "pipe", "profile": "a", "workspace": ws, "prompt": "!exit 3"}),
    );
    let before = s.wait_run(&failed, "failed", |v| v["state"] == "failed");
    let v = s.expect(
        200,
        "POST",
        &s.run_path(&failed, "/move"),
        Some(json!({"provider_profile_ref": "b"})),
    );
    assert_eq!(v["state"], "failed");
    assert_eq!(v["reason"], before["reason"]);
    assert_eq!(v["exit_code"], before["exit_code"]);
    // A PTY run learns its conversation from claude's own hooks (SessionStart names it at
    // startup), but claude writes its transcript only with the first message: stopped
    // before one, it has no conversation yet and moves with nothing to carry, keeping the
    // id (tests/pty_records.rs moves one with its transcript).
    let pty = start(
        &s,
        json!({"transport": "pty", "profile": "a", "workspace": ws}),
    );
    let id = s.wait_run(&pty, "its conversation", |v| {
        v["conversation_id"].is_string()
    })["conversation_id"]
        .clone();
    s.expect(200, "POST", &s.run_path(&pty, "/stop"), None);
    s.wait_run(&pty, "stopped", |v| v["state"] == "stopped");
    let v = s.expect(
        200,
        "POST",
        &s.run_path(&pty, "/move"),
        Some(json!({"provider_profile_ref": "b"})),
    );
    assert_eq!(v["profile"], "b");
    assert_eq!(v["conversation_id"], id);
    let last = ledger(&s, "sessions.run.moved").pop().unwrap();
    assert_eq!(last["run"], pty.as_str());
    assert_eq!(last["conversation_id"], id);
    assert_eq!(last["files"], 0, "{last}");
    assert!(
        !proctor::providers::records::claude::path(&a, Path::new(&ws), id.as_str().unwrap())
            .exists(),
        "no transcript before the first message"
    );
}
