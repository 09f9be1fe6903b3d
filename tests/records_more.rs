//! `GET /runs/{ref}/messages` and `/activity` of Gemini CLI and OpenCode sessions through the
//! socket: the fakes write gemini's chat log in 0.61.0's lines and answer `opencode export`
//! with 1.18.33's document (checked against the recorded ones in the unit tests), and the
//! server reads them as it reads the real tools' (issue 18 §1). Missing, pending and
//! unreadable records; a symlinked gemini log; the 8 MiB bound on a log and on an export.

mod common;
use common::DemoServer;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

const WORK: &str = "work on it\n!tool bash cargo test 0\n!tool bash false 1\n!tool task Review the fix 0\n!tool write notes.txt 0";

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

fn start(s: &DemoServer, tool: &str, ws: &str, prompt: &str) -> String {
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": tool, "workspace": ws, "prompt": prompt})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "the first turn", |v| v["state"] == "idle");
    run
}

fn wait_messages(s: &DemoServer, run: &str, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = s.expect(200, "GET", &s.run_path(run, "/messages?role=all"), None);
        if v["items"].as_array().unwrap().len() >= n {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{n} messages: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn kinds(s: &DemoServer, run: &str, kind: &str) -> usize {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .count()
}

fn account_home(s: &DemoServer, run: &str) -> std::path::PathBuf {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    let started = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "sessions.run.started")
        .unwrap()
        .clone();
    std::path::PathBuf::from(started["fields"]["account_home"].as_str().unwrap())
}

fn conversation(s: &DemoServer, run: &str) -> String {
    s.expect(200, "GET", &s.run_path(run, ""), None)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn tasks(v: &Value) -> Vec<(String, String, String)> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tool"].as_str().unwrap().to_string(),
                t["command"].as_str().unwrap_or("").to_string(),
                t["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn s3(a: &str, b: &str, c: &str) -> (String, String, String) {
    (a.into(), b.into(), c.into())
}

#[test]
fn gemini_and_opencode_sessions_have_messages_and_activity_from_their_own_records() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    for (tool, shell) in [("gemini", "run_shell_command"), ("opencode", "bash")] {
        let run = start(&s, tool, &ws, WORK);
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": "Second TURN\nwith a second line"})),
        );
        let all = wait_messages(&s, &run, 4);
        assert_eq!(all["transcript"], "read", "{tool}: {all}");
        let items = all["items"].as_array().unwrap();
        let roles: Vec<&str> = items.iter().map(|i| i["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["user", "assistant", "user", "assistant"],
            "{tool}: {all}"
        );
        assert_eq!(items[0]["first_line"], "work on it", "{tool}");
        assert!(
            items[1]["first_line"]
                .as_str()
                .unwrap()
                .starts_with("demo reply #1"),
            "{tool}: {all}"
        );
        assert!(items.iter().all(|i| i["at"].is_string()), "{tool}: {all}");
        let mine = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?q=SECOND%20line"),
            None,
        );
        assert_eq!(mine["total"], 1, "{tool}: {mine}");
        let one = s.expect(200, "GET", &s.run_path(&run, "/messages?id=3"), None);
        assert_eq!(one["items"][0]["text"], "Second TURN\nwith a second line");

        let a = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
        assert_eq!(
            (a["transcript"].as_str(), a["tool"].as_str()),
            (Some("read"), Some(tool)),
            "{a}"
        );
        let t = tasks(&a);
        assert!(
            t.contains(&s3(shell, "cargo test", "completed")),
            "{tool}: {t:?}"
        );
        assert!(t.contains(&s3(shell, "false", "failed")), "{tool}: {t:?}");
        let failed = a["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["command"] == "false")
            .unwrap()
            .clone();
        assert_eq!(failed["exit_code"], 1, "{tool}: {failed}");
        let files = a["files"].as_array().unwrap();
        assert_eq!(files.len(), 1, "{tool}: {a}");
        assert!(
            files[0]["path"]
                .as_str()
                .unwrap()
                .ends_with("/ws/notes.txt"),
            "{a}"
        );
        assert_eq!(files[0]["created"], true, "{tool}: {a}");
        assert!(
            a["context_tokens"].as_u64().is_some_and(|t| t > 0),
            "{tool}: {a}"
        );
        assert!(
            a["context_window"].is_null() && a["context_percent"].is_null(),
            "{a}"
        );
        if tool == "opencode" {
            // OpenCode's `task` tool is a sub-agent; gemini's record has none.
            assert_eq!(a["agents"][0]["description"], "Review the fix", "{a}");
            assert_eq!(a["model"], "demo/demo", "{a}");
        } else {
            assert!(a["agents"].as_array().unwrap().is_empty(), "{a}");
            assert_eq!(a["model"], "demo", "{a}");
        }
        // The ids stay as the record grows.
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": "third"})),
        );
        let grown = wait_messages(&s, &run, 6);
        assert_eq!(grown["items"].as_array().unwrap()[..4], items[..], "{tool}");
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
        // A stopped session is read the same way.
        let after = s.expect(200, "GET", &s.run_path(&run, "/messages?role=all"), None);
        assert_eq!(after["total"], 6, "{tool}: {after}");
        assert_eq!(kinds(&s, &run, "sessions.run.messages"), 1, "{tool}");
        assert_eq!(kinds(&s, &run, "sessions.run.activity"), 1, "{tool}");
        // The CLI reads the same route.
        let out = s.home.ok(&["session", "messages", &run, "--all"]);
        assert!(out.contains("transcript read; total 6"), "{tool}: {out}");
    }
}

/// The gemini log of `conv` under `home` (the one file whose name ends with its first 8
/// characters).
fn gemini_log(home: &std::path::Path, conv: &str) -> std::path::PathBuf {
    let mut found = Vec::new();
    for p in std::fs::read_dir(home.join("tmp")).unwrap().flatten() {
        for f in std::fs::read_dir(p.path().join("chats"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let n = f.file_name().to_string_lossy().to_string();
            if n.ends_with(&format!("-{}.jsonl", &conv[..8])) {
                found.push(f.path());
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

#[test]
fn a_gemini_log_that_is_gone_a_link_or_too_large_is_never_an_empty_success() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "gemini", &ws, "first words");
    let conv = conversation(&s, &run);
    let log = gemini_log(&account_home(&s, &run), &conv);
    let saved = s.home.path().join("saved.jsonl");
    std::fs::rename(&log, &saved).unwrap();
    // Live and not there: pending.
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "pending", "{v}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // Ended and not there: missing.
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("missing"), Some(0))
    );
    let a = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(a["transcript"], "missing", "{a}");

    // A hostile agent puts a link to another file in its place: refused, not followed.
    std::os::unix::fs::symlink(&saved, &log).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(
        v["total"].is_null() && v["items"].as_array().unwrap().is_empty(),
        "{v}"
    );
    assert!(
        v["reason"].as_str().unwrap().contains("symbolic link"),
        "{v}"
    );
    let a = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(a["transcript"], "unreadable", "{a}");
    std::fs::remove_file(&log).unwrap();

    // 9 MiB: refused whole.
    let mut big = std::fs::read(&saved).unwrap();
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(b"{\"$set\":{\"lastUpdated\":\"2026-01-01T00:00:00.000Z\"}}\n");
    }
    std::fs::write(&log, &big).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("8388608"), "{v}");

    // A decoy that names another session with the same 8 first characters is not read.
    std::fs::remove_file(&log).unwrap();
    let decoy = String::from_utf8_lossy(&std::fs::read(&saved).unwrap()).replace(
        &conv,
        &format!("{}-0000-4000-8000-000000000000", &conv[..8]),
    );
    std::fs::write(&log, decoy).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "missing", "{v}");

    // Back in place: read.
    std::fs::rename(&saved, &log).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages?role=all"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("read"), Some(2)),
        "{v}"
    );
}

#[test]
fn an_opencode_export_that_finds_nothing_fails_or_is_too_large_is_never_an_empty_success() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "opencode", &ws, "first words");
    let conv = conversation(&s, &run);
    // The fake's own storage, which its `opencode export` reads.
    let file = account_home(&s, &run)
        .join("storage/session/global")
        .join(format!("{conv}.jsonl"));
    assert!(file.is_file(), "{}", file.display());
    let saved = s.home.path().join("saved.jsonl");
    std::fs::rename(&file, &saved).unwrap();
    // Live and OpenCode does not have it: pending.
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "pending", "{v}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // Ended: missing ("Session not found" from the export itself).
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("missing"), Some(0)),
        "{v}"
    );

    // The export fails (its storage is damaged): unreadable, with its words.
    std::fs::write(&file, b"not the storage\n").unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    let why = v["reason"].as_str().unwrap();
    assert!(
        why.contains("export") && why.contains("exited with status 1") && why.contains("damaged"),
        "{why}"
    );
    let a = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(a["transcript"], "unreadable", "{a}");

    // The export prints more than 8 MiB: refused whole.
    let mut big = std::fs::read(&saved).unwrap();
    let line = format!(
        "{{\"info\":{{\"role\":\"user\",\"id\":\"m\",\"time\":{{\"created\":1}}}},\"parts\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}\n",
        "x".repeat(8192)
    );
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(line.as_bytes());
    }
    std::fs::write(&file, &big).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("8388608"), "{v}");

    // Back: read, once per request.
    std::fs::rename(&saved, &file).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages?role=all"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("read"), Some(2)),
        "{v}"
    );
}
