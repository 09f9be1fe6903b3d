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

/// Adds profile `name` (claude) with its own account home inside the test home.
fn claude_profile(s: &DemoServer, name: &str) -> std::path::PathBuf {
    let home = s.home.path().join(format!("acct-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    s.home.ok(&[
        "profile",
        "add",
        name,
        "--tool",
        "claude",
        "--account-home",
        home.to_str().unwrap(),
    ]);
    std::fs::canonicalize(home).unwrap()
}

fn skill(dir: &std::path::Path, name: &str) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: a test skill\n---\nDo it.\n"),
    )
    .unwrap();
}

/// The `system/init` frame of a stdout of claude's stream-json form.
fn init_frame(stdout: &str) -> Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "system" && v["subtype"] == "init")
        .expect("an init frame")
}

#[test]
fn claude_announces_its_mcp_servers_and_skills_and_the_activity_lists_them() {
    // The real claude 2.1.332, run with no login in the same setting (an account home whose
    // `.claude.json` names one user MCP server `probe` that does not answer, a home skill
    // and a project skill), announced them in its init frame: recorded in
    // tests/data/real/probe/claude-2.1.332-init-announced.stdout.jsonl.
    let real = init_frame(include_str!(
        "data/real/probe/claude-2.1.332-init-announced.stdout.jsonl"
    ));
    assert_eq!(
        real["mcp_servers"],
        json!([{"name": "probe", "status": "failed", "source": "user"}])
    );
    assert_eq!(real["skills"][0], "homeskill");
    assert_eq!(real["skills"][1], "wsskill");

    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let home = claude_profile(&s, "a");
    std::fs::write(
        home.join(".claude.json"),
        r#"{"mcpServers":{"probe":{"type":"stdio","command":"/bin/false","args":[]}}}"#,
    )
    .unwrap();
    skill(&home.join("skills"), "homeskill");
    skill(&std::path::Path::new(&ws).join(".claude/skills"), "wsskill");
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "profile": "a", "workspace": ws,
                    "prompt": "hi"})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "the first turn", |v| v["state"] == "idle");

    // The fake's init frame announces what the real one did, in the same shape.
    let out = std::fs::read_to_string(
        s.home
            .path()
            .join(format!("data/runs/{run}/gen-1/stdout.raw")),
    )
    .unwrap();
    let fake = init_frame(&out);
    assert_eq!(fake["mcp_servers"], real["mcp_servers"], "{fake}");
    assert_eq!(fake["skills"], json!(["homeskill", "wsskill"]), "{fake}");

    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["transcript"], "read", "{v}");
    assert_eq!(
        v["mcp_servers"],
        json!([{"name": "probe", "calls": 0, "status": "failed", "source": "user"}]),
        "announced, never called: {v}"
    );
    assert_eq!(v["skills"], json!(["homeskill", "wsskill"]), "{v}");
    assert_eq!(v["skills_used"], json!([]), "{v}");
    assert_eq!(v["unreadable"], 0, "{v}");
    // The CLI shows them.
    let text = s.home.ok(&["session", "activity", &run]);
    assert!(text.contains("probe (failed, 0 calls)"), "{text}");
    assert!(text.contains("homeskill, wsskill"), "{text}");
    // A new launch announces again: the server is gone from the home, the init frame of
    // the resumed launch says so, and nothing of the previous launch's list remains.
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    std::fs::write(home.join(".claude.json"), "{}").unwrap();
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "again"})),
    );
    s.wait_run(&run, "the resumed turn", |_| {
        std::fs::read_to_string(
            s.home
                .path()
                .join(format!("data/runs/{run}/gen-2/stdout.raw")),
        )
        .is_ok_and(|t| t.contains("\"subtype\":\"init\""))
    });
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["mcp_servers"], json!([]), "{v}");
    assert_eq!(v["skills"], json!(["homeskill", "wsskill"]), "{v}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

/// A finished workflow's summary in claude 2.1.332's shape (its writer, read from its
/// published code: `{runId, taskId, workflowName, status, durationMs, agentCount,
/// workflowProgress, …}`).
fn summary(run_id: &str, status: &str) -> String {
    summary_with(run_id, status, "done")
}

/// [`summary`], its last phase's one agent in state `reporter`.
fn summary_with(run_id: &str, status: &str, reporter: &str) -> String {
    json!({
        "runId": run_id, "timestamp": "2026-12-07T12:00:00.000Z", "taskId": "t1",
        "script": "export default …", "scriptPath": "/x/review.js", "args": {},
        "result": "ok", "agentCount": 4, "logs": [], "durationMs": 9100, "error": null,
        "summary": "review", "workflowName": "review", "title": "Review", "status": status,
        "startTime": 1, "phases": [], "defaultModel": "m1",
        "workflowProgress": [
            {"type": "workflow_phase", "index": 0, "title": "Read"},
            {"type": "workflow_phase", "index": 1, "title": "Judge"},
            {"type": "workflow_phase", "index": 2, "title": "Report"},
            {"type": "workflow_agent", "index": 0, "label": "reader", "state": "done", "phaseIndex": 0},
            {"type": "workflow_agent", "index": 1, "label": "judge A", "state": "done", "phaseIndex": 1},
            {"type": "workflow_agent", "index": 2, "label": "judge B", "state": "error", "phaseIndex": 1},
            {"type": "workflow_agent", "index": 3, "label": "reporter", "state": reporter, "phaseIndex": 2}
        ],
        "totalTokens": 300, "totalToolCalls": 12
    })
    .to_string()
}

fn phase_states(w: &Value) -> Vec<String> {
    w["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_finished_workflows_own_summary_gives_final_phase_states_and_a_hostile_one_is_unreadable() {
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
    let (dir, conv) = record_dir(&s, &run, &ws);
    let wf = dir.join(&conv).join("workflows");
    std::fs::create_dir_all(wf.join("scripts")).unwrap();
    std::fs::write(wf.join("scripts/review-wf-1.js"), "not a summary").unwrap();
    std::fs::write(wf.join("wf-1.json"), summary("wf-1", "completed")).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    let w = v["workflows"].as_array().unwrap();
    assert_eq!(w.len(), 2, "{v}");
    assert_eq!(w[0]["run_id"], "wf-1");
    assert_eq!(w[0]["summary"], "read", "{v}");
    assert_eq!(w[0]["state"], "completed");
    assert_eq!(w[0]["tool_use_id"], "toolu_w1", "kept from the live frames");
    assert_eq!(w[0]["duration_ms"], 9100);
    assert_eq!(
        (
            &w[0]["agents_total"],
            &w[0]["agents_done"],
            &w[0]["agents_failed"]
        ),
        (&json!(4), &json!(3), &json!(1))
    );
    assert_eq!(
        phase_states(&w[0]),
        ["completed", "failed", "completed"],
        "the final summary completes its phases: {v}"
    );
    assert_eq!(w[1]["summary"], "none", "still live: {v}");
    assert!(w[1]["state"].is_null());
    assert_eq!(v["unreadable"], 0, "{v}");
    // A killed workflow: the phases whose agents all finished are completed, the others
    // stopped.
    std::fs::write(wf.join("wf-1.json"), summary("wf-1", "killed")).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["workflows"][0]["state"], "stopped", "{v}");
    assert_eq!(
        phase_states(&v["workflows"][0]),
        ["completed", "failed", "completed"]
    );
    std::fs::write(
        wf.join("wf-1.json"),
        summary_with("wf-1", "failed", "start"),
    )
    .unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["workflows"][0]["state"], "failed", "{v}");
    assert_eq!(
        phase_states(&v["workflows"][0]),
        ["completed", "failed", "stopped"],
        "{v}"
    );
    std::fs::write(wf.join("wf-1.json"), summary("wf-1", "completed")).unwrap();

    // Hostile summaries, each unreadable (never an empty success), the live progress kept.
    let outside = s.home.path().join("elsewhere.json");
    std::fs::write(&outside, summary("wf-2", "completed")).unwrap();
    std::os::unix::fs::symlink(&outside, wf.join("wf-2.json")).unwrap();
    let check = |what: &str, needle: &str| {
        let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
        assert_eq!(v["unreadable"], 1, "{what}: {v}");
        let why = v["unreadable_reasons"][0].as_str().unwrap();
        assert!(why.contains(needle), "{what}: {why}");
        let bad: Vec<&Value> = v["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["summary"] == "unreadable")
            .collect();
        assert_eq!(bad.len(), 1, "{what}: {v}");
        assert!(bad[0]["summary_reason"].as_str().unwrap().contains(needle));
        assert_eq!(
            v["workflows"][0]["summary"], "read",
            "the others still read: {v}"
        );
        assert_eq!(v["transcript"], "read");
    };
    check("a symlink", "symbolic link");
    std::fs::remove_file(wf.join("wf-2.json")).unwrap();
    std::fs::hard_link(&outside, wf.join("wf-2.json")).unwrap();
    check("a hard link", "hard link");
    std::fs::remove_file(wf.join("wf-2.json")).unwrap();
    let c = std::ffi::CString::new(wf.join("wf-2.json").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    check("a FIFO", "not a regular file");
    std::fs::remove_file(wf.join("wf-2.json")).unwrap();
    let f = std::fs::File::create(wf.join("wf-2.json")).unwrap();
    f.set_len(8 * 1024 * 1024 + 1).unwrap();
    check("over 8 MiB", "more than the 8388608 bytes");
    std::fs::write(
        wf.join("wf-2.json"),
        "{\"runId\":\"wf-2\",\"status\":\"running\"}",
    )
    .unwrap();
    check("not an end", "not an end this reader knows");
    std::fs::write(wf.join("wf-2.json"), summary("wf-9", "completed")).unwrap();
    check("another run's", "names run wf-9");
    // The live snapshot whose summary is unreadable keeps its live progress.
    std::fs::write(wf.join("wf-1.json"), "{not json").unwrap();
    std::fs::remove_file(wf.join("wf-2.json")).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["unreadable"], 1, "{v}");
    assert_eq!(v["workflows"][0]["summary"], "unreadable", "{v}");
    assert!(v["workflows"][0]["state"].is_null());
    assert_eq!(
        v["workflows"][0]["duration_ms"], 5400,
        "the live snapshot: {v}"
    );
    assert_eq!(
        phase_states(&v["workflows"][0]),
        ["scheduled", "failed", "scheduled"]
    );
    // The CLI says it.
    let text = s.home.ok(&["session", "activity", &run]);
    assert!(text.contains("unreadable"), "{text}");
    // A folder filled with names is looked through up to a bound, and the rest is said.
    std::fs::write(wf.join("wf-1.json"), summary("wf-1", "completed")).unwrap();
    for i in 0..4100 {
        std::fs::write(wf.join(format!("junk-{i}.txt")), "").unwrap();
    }
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["unreadable"], 1, "{v}");
    assert!(
        v["unreadable_reasons"][0]
            .as_str()
            .unwrap()
            .contains("more than 4096 entries"),
        "{v}"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn gaps_in_the_live_output_read_are_unreadable_never_a_silent_complete() {
    // Past the 8 MiB read: the workflow frames before the tail are missing, and said so.
    let s = DemoServer::start(&["--transcript-mib", "32"]);
    let ws = workspace(&s);
    let frames = include_str!("data/records/claude-task-progress-2.1.332-shape.jsonl");
    let script: Vec<String> = frames
        .lines()
        .filter(|l| l.contains("\"task_"))
        .map(|l| format!("!frame {l}"))
        .collect();
    let prompt = format!("run the review\n{}\n!emit 9437184", script.join("\n"));
    let run = start(&s, "claude", &ws, &prompt);
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["unreadable"], 1, "{v}");
    let why = v["unreadable_reasons"][0].as_str().unwrap();
    assert!(why.contains("only its last 8 MiB are read"), "{why}");
    assert_eq!(
        v["transcript"], "read",
        "the transcript itself was read: {v}"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);

    // Past the transcript's cap: the frames after it were never kept.
    let s = DemoServer::start(&["--transcript-mib", "1"]);
    let ws = workspace(&s);
    let prompt = format!("run the review\n!emit 2097152\n{}", script.join("\n"));
    let run = start(&s, "claude", &ws, &prompt);
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["unreadable"], 1, "{v}");
    let why = v["unreadable_reasons"][0].as_str().unwrap();
    assert!(why.contains("transcript cap"), "{why}");
    assert_eq!(v["workflows"], json!([]), "none of them was kept: {v}");
    // Stopped, the recorded end says the same.
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["unreadable"], 1, "{v}");
}

#[test]
fn codex_plans_come_from_the_live_bridge_while_it_holds_the_run_and_never_after() {
    // The fake codex, like a Code Mode call, keeps no plan in its rollout: the plan is only
    // in the `turn/plan/updated` notification the server's bridge received.
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(&s, "codex", &ws, "plan it\n!plan Read it|Fix it|Test it");
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(
        v["todos"],
        json!([
            {"content": "Read it", "status": "in_progress"},
            {"content": "Fix it", "status": "pending"},
            {"content": "Test it", "status": "pending"}
        ]),
        "{v}"
    );
    // A later plan replaces it.
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "!plan Ship it"})),
    );
    s.wait_run(&run, "the second plan", |_| {
        s.expect(200, "GET", &s.run_path(&run, "/activity"), None)["todos"]
            == json!([{"content": "Ship it", "status": "in_progress"}])
    });
    // The bridge gone, only what Codex itself kept is read: no plan.
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let v = s.expect(200, "GET", &s.run_path(&run, "/activity"), None);
    assert_eq!(v["todos"], json!([]), "{v}");
}
