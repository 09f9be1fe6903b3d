//! `GET /runs/{ref}/activity` and `/activity/agents/{agent}` through the socket, over the
//! native records the fakes write in the real tools' formats (a claude transcript with tool
//! uses, a todo list and a sub-agent's own file), and `proctor session activity`.

mod common;
use common::DemoServer;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

const WORK: &str = "work on it\n!tool bash cargo test 0\n!tool bash false 1\n!plan Fix it|Test it\n!tool task Review the fix 0\n!tool write notes.txt 0";

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

fn kinds(s: &DemoServer, run: &str, kind: &str) -> usize {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .count()
}

/// The account home the run's tool ran with (its `.started` event says it).
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

fn record_dir(s: &DemoServer, run: &str, ws: &str) -> (std::path::PathBuf, String) {
    let conv = s.expect(200, "GET", &s.run_path(run, ""), None)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = account_home(s, run)
        .join("projects")
        .join(proctor::providers::records::claude::project_folder(ws));
    (dir, conv)
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

#[test]
fn a_demo_claude_sessions_activity_is_read_from_its_transcript() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "claude", &ws, WORK);
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["tool"].as_str()),
        (Some("read"), Some("claude")),
        "{v}"
    );
    assert_eq!(v["model"], proctor::providers::fake::DEMO_MODEL, "{v}");
    assert_eq!(
        tasks(&v),
        [
            ("Bash".into(), "cargo test".into(), "completed".into()),
            ("Bash".into(), "false".into(), "failed".into()),
        ],
        "{v}"
    );
    let todos: Vec<(&str, &str)> = v["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["content"].as_str().unwrap(),
                t["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(todos, [("Fix it", "in_progress"), ("Test it", "pending")]);
    assert_eq!(v["files"][0]["path"], "notes.txt", "{v}");
    assert_eq!(v["files"][0]["created"], true, "{v}");
    let agent = &v["agents"][0];
    assert_eq!(
        (
            agent["state"].as_str(),
            agent["description"].as_str(),
            agent["transcript"].as_bool()
        ),
        (Some("completed"), Some("Review the fix"), Some(true)),
        "{v}"
    );
    // The window is the fake's own result-frame report (modelUsage.demo.contextWindow),
    // and the percent follows the last request's tokens.
    let tokens = v["context_tokens"].as_u64().unwrap();
    assert!(tokens > 0, "{v}");
    assert_eq!(v["context_window"], 200_000, "{v}");
    let pct = v["context_percent"].as_f64().unwrap();
    assert!(
        (pct - tokens as f64 * 100.0 / 200_000.0).abs() < 0.06,
        "{v}"
    );
    assert_eq!(v["compactions"], 0);

    // Another turn: the context is the last request's, not the sum of every request's
    // (each demo request's input is the transcript's size so far over 4).
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "more\n!tool bash ls 0"})),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let v = loop {
        let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
        if v["tasks"].as_array().unwrap().len() == 3 {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (dir, conv) = record_dir(&s, &run, &ws);
    let size = std::fs::metadata(dir.join(format!("{conv}.jsonl")))
        .unwrap()
        .len();
    let later = v["context_tokens"].as_u64().unwrap();
    assert!(
        later > tokens && later <= size / 4,
        "{later} {tokens} {size}"
    );

    // The sub-agent's own transcript, in turns.
    let id = agent["id"].as_str().unwrap();
    let t = s.expect(
        200,
        "GET",
        &s.run_path(&run, &format!("/activity/agents/{id}")),
        None,
    );
    assert_eq!(t["transcript"], "read", "{t}");
    assert_eq!(t["turns"][0]["role"], "user", "{t}");
    assert_eq!(t["turns"][0]["text"], "Review the fix", "{t}");
    assert_eq!(t["turns"][1]["role"], "assistant", "{t}");
    // Unknown agents, and ids that would leave the sub-agents' folder: 404.
    for bad in ["nope", "..%2F..%2Fx", "%2E%2E", "x.jsonl"] {
        s.expect(
            404,
            "GET",
            &s.run_path(&run, &format!("/activity/agents/{bad}")),
            None,
        );
    }
    // Audited once per reader per 15 minutes, each route under its own kind.
    assert_eq!(kinds(&s, &run, "sessions.run.activity"), 1);
    assert_eq!(kinds(&s, &run, "sessions.run.activity.agent"), 1);

    // The CLI: sanitised lines, the JSON, a sub-agent's turns.
    let out = s.home.ok(&["session", "activity", &run]);
    assert!(out.contains("transcript read"), "{out}");
    assert!(out.contains("failed     Bash         false"), "{out}");
    assert!(out.contains("[~] Fix it"), "{out}");
    assert!(out.contains("(created)"), "{out}");
    let j = s.home.json(&["session", "activity", &run, "--json"]);
    assert_eq!(j["context_window"], 200_000, "{j}");
    let a = s.home.ok(&["session", "activity", &run, "--agent", id]);
    assert!(a.contains("Review the fix"), "{a}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn codex_reports_its_children_in_the_activity_and_other_tools_are_refused() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "codex", &ws, "hello");
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["transcript"], "read", "{v}");
    assert_eq!(v["tool"], "codex");
    assert!(v["context_percent"].is_null(), "{v}");
    let e = s.expect(422, "GET", &s.run_path(&run, "/activity/agents/x"), None);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("codex"),
        "{e}"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "grok", "workspace": ws, "prompt": "hi"})),
    );
    let grok = v["ref"].as_str().unwrap().to_string();
    let e = s.expect(422, "GET", &s.run_path(&grok, "/activity"), None);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("grok"),
        "{e}"
    );
    s.expect(422, "GET", &s.run_path(&grok, "/activity/agents/a"), None);
    s.expect(404, "GET", &s.run_path("run-9999", "/activity"), None);
    let bad = s.home.run(&["session", "activity", &grok]);
    assert_eq!(bad.status.code(), Some(1));
}

#[test]
fn hostile_records_are_unreadable_never_an_empty_activity() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "claude", &ws, WORK);
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let (dir, conv) = record_dir(&s, &run, &ws);
    let record = dir.join(format!("{conv}.jsonl"));
    let saved = s.home.path().join("saved.jsonl");
    std::fs::rename(&record, &saved).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["transcript"], "missing", "{v}");

    // A symlink: refused, and nothing is reported as done.
    std::os::unix::fs::symlink(&saved, &record).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("symbolic link"),
        "{v}"
    );
    assert!(v["tasks"].as_array().unwrap().is_empty(), "{v}");
    std::fs::remove_file(&record).unwrap();

    // A huge record (9 MiB of tool uses): refused whole, not cut.
    let mut big = std::fs::read(&saved).unwrap();
    let line = format!(
        "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"Bash\",\"input\":{{\"command\":\"{}\"}}}}]}}}}\n",
        "x".repeat(4096)
    );
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(line.as_bytes());
    }
    std::fs::write(&record, &big).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("8388608"), "{v}");
    std::fs::rename(&saved, &record).unwrap();

    // A sub-agent file replaced by a symlink to a file outside: refused, not followed.
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    let id = v["agents"][0]["id"].as_str().unwrap().to_string();
    let sub = dir
        .join(&conv)
        .join("subagents")
        .join(format!("agent-{id}.jsonl"));
    let secret = s.home.path().join("secret.jsonl");
    std::fs::write(
        &secret,
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"secret\"}}\n",
    )
    .unwrap();
    std::fs::remove_file(&sub).unwrap();
    std::os::unix::fs::symlink(&secret, &sub).unwrap();
    let t = s.expect(
        200,
        "GET",
        &s.run_path(&run, &format!("/activity/agents/{id}")),
        None,
    );
    assert_eq!(t["transcript"], "unreadable", "{t}");
    assert!(t["turns"].as_array().unwrap().is_empty(), "{t}");
    assert!(!t.to_string().contains("secret\""), "{t}");
}

#[test]
fn claude_workflow_snapshots_come_from_its_live_task_progress_frames() {
    // Hand-written frames in claude 2.1.332's shapes (tests/data/records/
    // claude-task-progress-2.1.332-shape.jsonl), sent by the fake claude as its own
    // stream-json output: the server sees them as it sees the real tool's.
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let frames = include_str!("data/records/claude-task-progress-2.1.332-shape.jsonl");
    let script: Vec<String> = frames
        .lines()
        .filter(|l| l.contains("\"task_"))
        .map(|l| format!("!frame {l}"))
        .collect();
    let run = start(
        &s,
        "claude",
        &ws,
        &format!("run the review\n{}", script.join("\n")),
    );
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    let w = v["workflows"].as_array().unwrap();
    assert_eq!(w.len(), 2, "{v}");
    assert_eq!(w[0]["run_id"], "wf-1");
    assert_eq!(w[0]["name"], "review");
    assert_eq!(w[0]["tool_use_id"], "toolu_w1");
    assert_eq!(w[0]["duration_ms"], 5400, "the latest snapshot: {v}");
    assert_eq!(
        (
            &w[0]["agents_total"],
            &w[0]["agents_done"],
            &w[0]["agents_failed"]
        ),
        (&json!(4), &json!(2), &json!(1))
    );
    let phases: Vec<(i64, String, String)> = w[0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["index"].as_i64().unwrap(),
                p["title"].as_str().unwrap().to_string(),
                p["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        vec![
            (0, "Read".into(), "scheduled".into()),
            (1, "Judge".into(), "failed".into()),
            (2, "Report".into(), "scheduled".into()),
        ],
        "an agent's completion does not complete its phase: {v}"
    );
    assert_eq!(w[0]["phases"][1]["agents_total"], 3);
    assert!(w[1]["name"].is_null(), "{v}");
    // The CLI shows them, sanitised.
    let out = s.home.ok(&["session", "activity", &run]);
    assert!(out.contains("workflows (live):"), "{out}");
    assert!(
        out.contains("review wf-1: agents 2 done, 1 failed of 4, 5.4 s"),
        "{out}"
    );
    // A codex session has none.
    let cx = start(&s, "codex", &ws, "hi");
    let v = s.expect(200, "GET", &s.run_path(&cx, "/activity"), None);
    assert_eq!(v["workflows"], json!([]), "{v}");
    for r in [&run, &cx] {
        s.expect(200, "POST", &s.run_path(r, "/stop"), None);
    }
}
