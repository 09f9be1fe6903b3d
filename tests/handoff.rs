//! `GET` and `POST /runs/{ref}/handoff` (issue 18 §2) against a real server over its Unix
//! socket, with the demo fakes on PATH over real pipes: the fakes write their conversations
//! in the real tools' record formats (claude's transcript, codex's rollout) under each
//! profile's own account home, and the new session's first turn is read back from the
//! record the target tool's fake wrote.

mod common;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
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

fn wait_messages(s: &DemoServer, run: &str, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = s.expect(
            200,
            "GET",
            &s.run_path(run, "/messages?role=all&text=1"),
            None,
        );
        if v["items"].as_array().unwrap().len() >= n {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{n} messages: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A pipe run of `profile` that has had two turns (idle, live).
fn two_turns(s: &DemoServer, profile: &str, ws: &str) -> String {
    let run = start(
        s,
        json!({"transport": "pipe", "profile": profile, "workspace": ws,
               "prompt": "first words\n!tool bash cargo test --lib 0"}),
    );
    s.wait_run(&run, "the first turn", |v| v["state"] == "idle");
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "Second TURN"})),
    );
    wait_messages(s, &run, 4);
    s.wait_run(&run, "the second turn", |v| v["state"] == "idle")["ref"]
        .as_str()
        .unwrap()
        .to_string()
}

fn runs_count(s: &DemoServer) -> usize {
    s.expect(200, "GET", &format!("{RUNS}?limit=200"), None)["items"]
        .as_array()
        .unwrap()
        .len()
}

/// The record file the run's tool wrote (the messages route's view of it is the
/// reader's; here the file itself, to make it hostile).
fn record_of(s: &DemoServer, run: &str, home: &Path, ws: &str) -> PathBuf {
    let v = s.expect(200, "GET", &s.run_path(run, ""), None);
    let id = v["conversation_id"].as_str().unwrap();
    match v["tool"].as_str().unwrap() {
        "claude" => proctor::providers::records::claude::path(home, Path::new(ws), id),
        _ => proctor::providers::records::codex::find(home, id).unwrap(),
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o777
}

#[test]
fn the_preview_is_a_digest_of_the_stored_conversation_read_as_it_is_and_audited_once() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let a = profile(&s, "a", "claude");
    let cx = profile(&s, "cx", "codex");
    for (p, home, tool) in [("a", &a, "claude"), ("cx", &cx, "codex")] {
        let run = two_turns(&s, p, &ws);
        // Live (idle): read as it is, nothing stopped.
        let v = s.expect(200, "GET", &s.run_path(&run, "/handoff"), None);
        assert_eq!(v["source_driver"], tool, "{v}");
        assert_eq!(v["turns"], 2, "{tool}: {v}");
        assert_eq!(v["messages"], 4, "{tool}: {v}");
        assert_eq!(v["transcript"], "read");
        let size = std::fs::metadata(record_of(&s, &run, home, &ws))
            .unwrap()
            .len();
        assert_eq!(v["transcript_bytes"], size, "{tool}: {v}");
        let summary = v["summary"].as_str().unwrap();
        assert!(summary.contains("without a model"), "{summary}");
        assert!(
            summary.contains("2 turns from the person, 2 answers from the tool"),
            "{summary}"
        );
        assert!(
            summary.contains("First ask:\nfirst words\n!tool bash cargo test --lib 0"),
            "{summary}"
        );
        assert!(
            summary.contains("Last answer:\ndemo reply #2: you said \"Second TURN\""),
            "{summary}"
        );
        assert_eq!(
            s.expect(200, "GET", &s.run_path(&run, ""), None)["state"],
            "idle",
            "a preview stops nothing"
        );
        // The same digest again, and one audit line for this reader in the window.
        let again = s.expect(200, "GET", &s.run_path(&run, "/handoff"), None);
        assert_eq!(again, v);
        let audits: Vec<Value> = ledger(&s, "sessions.run.handoff_preview")
            .into_iter()
            .filter(|e| e["run"] == run.as_str())
            .collect();
        assert_eq!(audits.len(), 1, "{audits:?}");
        assert_eq!(audits[0]["transcript"], "read");
        // Another reader is audited on its own.
        let other = s.json_token("read", &format!("reader-{tool}"));
        let (code, _) = common::call_as(
            &s.home.socket(),
            Some(&other),
            "GET",
            &s.run_path(&run, "/handoff"),
            None,
        );
        assert_eq!(code, 200);
        assert_eq!(
            ledger(&s, "sessions.run.handoff_preview")
                .into_iter()
                .filter(|e| e["run"] == run.as_str())
                .count(),
            2
        );
        // The CLI prints it, and --json is the answer.
        let out = s.home.ok(&["session", "handoff", &run]);
        assert!(out.contains("First ask:\nfirst words"), "{out}");
        assert!(out.contains("--to PROFILE"), "{out}");
        let j = s
            .home
            .json(&["session", "handoff", &run, "--preview", "--json"]);
        assert_eq!(j["summary"], v["summary"]);
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    }
}

#[test]
fn refusals_come_before_any_stop_and_write_nothing() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    profile(&s, "a", "claude");
    let cx = profile(&s, "cx", "codex");
    // grok keeps no conversation proctor reads: 422, for the preview and the POST.
    let grok = start(
        &s,
        json!({"transport": "pipe", "tool": "grok", "workspace": ws, "prompt": "hi"}),
    );
    let e = s.expect(422, "GET", &s.run_path(&grok, "/handoff"), None);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("grok"),
        "{e}"
    );
    s.expect(
        422,
        "POST",
        &s.run_path(&grok, "/handoff"),
        Some(json!({"provider_profile_ref": "cx"})),
    );
    // A run that never started (its tool cannot be executed): 409.
    let bad = s.home.path().join("bad-bin");
    std::fs::create_dir_all(&bad).unwrap();
    let claude = bad.join("claude");
    std::fs::write(&claude, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let never = start(
        &s,
        json!({"transport": "pipe", "tool": "claude", "workspace": ws, "prompt": "hi",
               "path": bad.to_str().unwrap()}),
    );
    let v = s.wait_run(&never, "failed", |v| v["state"] == "failed");
    assert!(v["started_at"].is_null(), "{v}");
    let e = s.expect(409, "GET", &s.run_path(&never, "/handoff"), None);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never started"),
        "{e}"
    );
    s.expect(
        409,
        "POST",
        &s.run_path(&never, "/handoff"),
        Some(json!({"provider_profile_ref": "cx"})),
    );
    s.expect(404, "GET", &s.run_path("run-9999", "/handoff"), None);

    // A live source: every refusal that needs no stop leaves it running.
    let run = two_turns(&s, "a", &ws);
    let before = runs_count(&s);
    for (body, status, needle) in [
        (json!({}), 400, "provider_profile_ref"),
        (
            json!({"provider_profile_ref": ""}),
            400,
            "provider_profile_ref",
        ),
        (
            json!({"provider_profile_ref": "cx", "surprise": 1}),
            400,
            "bad JSON",
        ),
        (
            json!({"provider_profile_ref": "nobody"}),
            422,
            "no target profile nobody",
        ),
        (
            json!({"provider_profile_ref": "cx", "name": "evil\u{1b}]0;x\u{7}name"}),
            400,
            "control",
        ),
        (
            json!({"provider_profile_ref": "cx", "name": "a\u{202e}b"}),
            400,
            "",
        ),
        (
            json!({"provider_profile_ref": "cx", "summary": "nul\u{0}byte"}),
            400,
            "NUL",
        ),
    ] {
        let (code, v) = s.call("POST", &s.run_path(&run, "/handoff"), Some(body.clone()));
        assert_eq!(code, status, "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(needle),
            "{body}: {needle:?} not in {v}"
        );
    }
    // A target whose home a launch refuses (gone): 409.
    let gone = profile(&s, "gone", "codex");
    std::fs::remove_dir(&gone).unwrap();
    let e = s.expect(
        409,
        "POST",
        &s.run_path(&run, "/handoff"),
        Some(json!({"provider_profile_ref": "gone"})),
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot take the session"),
        "{e}"
    );
    assert_eq!(
        s.expect(200, "GET", &s.run_path(&run, ""), None)["state"],
        "idle",
        "nothing was stopped"
    );
    assert_eq!(runs_count(&s), before, "no run was made");
    assert!(
        !cx.join("proctor-handoffs").exists(),
        "no transcript written"
    );
    assert!(ledger(&s, "sessions.run.handed_off").is_empty());
    // The CLI's own usage rule.
    let out = s.home.run(&["session", "handoff", &run, "--summary", "x"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn hostile_records_are_refused_with_422_and_nothing_is_written() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let a = profile(&s, "a", "claude");
    let cx = profile(&s, "cx", "codex");
    let run = two_turns(&s, "a", &ws);
    let record = record_of(&s, &run, &a, &ws);
    let saved = s.home.path().join("saved.jsonl");
    std::fs::copy(&record, &saved).unwrap();
    let before = runs_count(&s);
    let post = |s: &DemoServer| {
        s.call(
            "POST",
            &s.run_path(&run, "/handoff"),
            Some(json!({"provider_profile_ref": "cx"})),
        )
    };

    // A symlink in place of the record (to a file that is not the conversation's): refused
    // before the stop, the preview too.
    let secret = a.join(".credentials.json");
    std::fs::write(&secret, "{\"secret\":1}\n").unwrap();
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&secret, &record).unwrap();
    let e = s.expect(422, "GET", &s.run_path(&run, "/handoff"), None);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{e}"
    );
    let (code, e) = post(&s);
    assert_eq!(code, 422, "{e}");
    assert!(
        !e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was stopped"),
        "refused before the stop: {e}"
    );
    assert_eq!(
        s.expect(200, "GET", &s.run_path(&run, ""), None)["state"],
        "idle",
        "nothing was stopped"
    );
    std::fs::remove_file(&record).unwrap();
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);

    // A record with one line of 33 MiB: refused, naming the 32 MiB rule.
    let mut big = std::fs::read(&saved).unwrap();
    big.extend_from_slice(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"");
    big.resize(big.len() + 33 * 1024 * 1024, b'a');
    big.extend_from_slice(b"\"}}\n");
    std::fs::write(&record, &big).unwrap();
    let (code, e) = post(&s);
    assert_eq!(code, 422, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("32 MiB"),
        "{e}"
    );
    let e = s.expect(422, "GET", &s.run_path(&run, "/handoff"), None);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("32 MiB"),
        "{e}"
    );
    drop(big);

    // A hard link: refused.
    std::fs::remove_file(&record).unwrap();
    std::fs::hard_link(&saved, &record).unwrap();
    let (code, e) = post(&s);
    assert_eq!(code, 422, "{e}");
    std::fs::remove_file(&record).unwrap();

    assert_eq!(runs_count(&s), before, "no run was made");
    assert!(
        !cx.join("proctor-handoffs").exists(),
        "no transcript written"
    );
    assert!(ledger(&s, "sessions.run.handed_off").is_empty());
    // A record that is gone: 409 (nothing to hand off), and still nothing written.
    let (code, e) = post(&s);
    assert_eq!(code, 409, "{e}");
    assert!(!cx.join("proctor-handoffs").exists());
    // Back in place: the handoff goes.
    std::fs::copy(&saved, &record).unwrap();
    let (code, v) = post(&s);
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["stopped_source"], false, "it was stopped already");
    s.expect(
        200,
        "POST",
        &s.run_path(v["run"]["ref"].as_str().unwrap(), "/stop"),
        None,
    );
}

/// The files in `home/proctor-handoffs/`.
fn transcripts(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(home.join("proctor-handoffs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_round_trip_claude_to_codex_and_back_delivers_each_first_turn() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let a = profile(&s, "a", "claude");
    let cx = profile(&s, "cx", "codex");
    let b = profile(&s, "b", "claude");
    let src = two_turns(&s, "a", &ws);
    // A turn in progress: the source's tool is working, and the handoff stops it first.
    s.expect(
        202,
        "POST",
        &s.run_path(&src, "/input"),
        Some(json!({"text": "!sleep 60"})),
    );
    // (claude's stdio form has no turn-start frame: the turn shows in its record.)
    wait_messages(&s, &src, 5);

    let summary = "REVIEWED: fix the parser.\nThe tests pass; the docs are left.";
    let (code, h) = s.call(
        "POST",
        &s.run_path(&src, "/handoff"),
        Some(json!({"provider_profile_ref": "cx", "summary": summary, "name": "parser, part 2"})),
    );
    assert_eq!(code, 201, "{h}");
    assert_eq!(h["stopped_source"], true, "{h}");
    assert_eq!(h["summary_state"], "delivered", "{h}");
    assert!(h["first_turn"].is_null(), "only when not delivered: {h}");
    let new = h["run"]["ref"].as_str().unwrap().to_string();
    assert_eq!(h["run"]["handoff_of"], src.as_str(), "{h}");
    assert_eq!(h["run"]["tool"], "codex");
    assert_eq!(h["run"]["profile"], "cx");
    assert_eq!(h["run"]["workspace"], ws.as_str());
    assert_eq!(h["run"]["name"], "parser, part 2");
    // The source was stopped as POST /stop does.
    let v = s.expect(200, "GET", &s.run_path(&src, ""), None);
    assert_eq!(v["state"], "stopped", "{v}");
    assert!(
        ledger(&s, "sessions.run.stop_requested")
            .iter()
            .any(|e| e["run"] == src.as_str()),
        "stopped through the stop path"
    );
    // The transcript: under the target's account home, its own name, 0600 in 0700.
    let files = transcripts(&cx);
    assert_eq!(files.len(), 1, "{files:?}");
    let t = &files[0];
    assert_eq!(h["transcript_path"], t.to_str().unwrap());
    assert!(
        t.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{src}-")),
        "{t:?}"
    );
    assert_eq!(mode(t), 0o600);
    assert_eq!(mode(&cx.join("proctor-handoffs")), 0o700);
    assert!(
        transcripts(&a).is_empty(),
        "nothing written in the source home"
    );
    let body = std::fs::read_to_string(t).unwrap();
    assert!(
        body.contains("format: proctor-handoff-transcript/1\n"),
        "{body}"
    );
    assert!(body.contains(&format!("source run: {src}\n")), "{body}");
    assert!(body.contains("source tool: claude\n"));
    assert!(body.contains("unreadable records: 0\n"), "{body}");
    let first = "first words\n!tool bash cargo test --lib 0";
    assert!(
        body.contains(&format!(
            "## message 1 user {}",
            "" // the time follows
        )) && body.contains(&format!(" {} bytes\n{first}\n", first.len())),
        "{body}"
    );
    assert!(
        body.contains("demo reply #2: you said \"Second TURN\""),
        "{body}"
    );
    assert!(body.contains("!sleep 60"), "the turn in progress: {body}");
    assert!(body.contains("## tool calls (abbreviated)\n"), "{body}");
    assert!(
        body.contains("cargo test --lib"),
        "the tool call, abbreviated: {body}"
    );
    // The first turn reached codex: its own rollout holds it (summary, then the path).
    let m = wait_messages(&s, &new, 1);
    let got = m["items"][0]["text"].as_str().unwrap();
    assert_eq!(m["items"][0]["role"], "user");
    assert!(got.starts_with(summary), "{got}");
    assert!(got.contains(t.to_str().unwrap()), "{got}");
    // The ledger: handoff_of on the new run's creation, handed_off on the source's.
    let created = ledger(&s, "sessions.run.created");
    let c = created.iter().find(|e| e["run"] == new.as_str()).unwrap();
    assert_eq!(c["handoff_of"], src.as_str(), "{c}");
    let handed = ledger(&s, "sessions.run.handed_off");
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0]["run"], src.as_str());
    assert_eq!(handed[0]["to_run"], new.as_str());
    assert_eq!(handed[0]["to_profile"], "cx");
    assert_eq!(handed[0]["summary"], "reviewed");
    assert_eq!(handed[0]["stopped"], true);
    assert_eq!(handed[0]["transcript"], t.to_str().unwrap());

    // Back: codex -> claude (profile b), with the digest (no summary), through the CLI.
    s.wait_run(&new, "idle", |v| v["state"] == "idle");
    let out = s
        .home
        .ok(&["session", "handoff", &new, "--to", "b", "--json"]);
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back["summary_state"], "delivered", "{back}");
    assert_eq!(
        back["stopped_source"], true,
        "an idle source is live: stopped"
    );
    let third = back["run"]["ref"].as_str().unwrap().to_string();
    assert_eq!(back["run"]["handoff_of"], new.as_str());
    assert_eq!(back["run"]["tool"], "claude");
    let files = transcripts(&b);
    assert_eq!(files.len(), 1);
    let body = std::fs::read_to_string(&files[0]).unwrap();
    assert!(body.contains("source tool: codex\n"), "{body}");
    assert!(body.contains(summary), "{body}");
    let m = wait_messages(&s, &third, 1);
    let got = m["items"][0]["text"].as_str().unwrap();
    assert!(got.starts_with("Handoff of a codex session"), "{got}");
    assert!(
        got.contains("First ask:\nREVIEWED: fix the parser."),
        "{got}"
    );
    assert!(got.contains(files[0].to_str().unwrap()), "{got}");
    assert_eq!(
        ledger(&s, "sessions.run.handed_off")[1]["summary"],
        "generated"
    );
    // The CLI's words for a person.
    s.wait_run(&third, "idle", |v| v["state"] == "idle");
    let out = s.home.ok(&[
        "session",
        "handoff",
        &third,
        "--to",
        "a",
        "--summary",
        "go on",
    ]);
    assert!(out.contains("handed off to run-"), "{out}");
    assert!(out.contains("first turn: delivered"), "{out}");
    for r in [&new, &third] {
        s.expect(200, "POST", &s.run_path(r, "/stop"), None);
    }
    let last = ledger(&s, "sessions.run.handed_off").pop().unwrap();
    s.expect(
        200,
        "POST",
        &s.run_path(last["to_run"].as_str().unwrap(), "/stop"),
        None,
    );
}
