//! The runs API against a real server on a temporary home, with the demo fakes on PATH,
//! over real pipes and real PTYs.

mod common;
use common::{DemoServer, alive, call_as, output_of};
use serde_json::json;

const RUNS: &str = "/v1/m/sessions/runs";

fn start(s: &DemoServer, body: serde_json::Value) -> String {
    let v = s.expect(201, "POST", RUNS, Some(body));
    assert_eq!(
        v["demo"], true,
        "a run backed by a fake is labelled demo: {v}"
    );
    v["ref"].as_str().unwrap().to_string()
}

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

#[test]
fn pipe_run_launch_attach_input_and_conversation_id() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    for tool in ["claude", "codex", "gemini", "grok", "opencode"] {
        let run = start(
            &s,
            json!({"transport": "pipe", "tool": tool, "workspace": ws, "prompt": "first words"}),
        );
        let v = s.wait_run(&run, "the first turn", |v| v["state"] == "idle");
        assert!(
            v["conversation_id"].is_string(),
            "{tool}: the tool's id is recorded: {v}"
        );
        assert!(
            v["exit_code"].is_null(),
            "no exit code before one is observed"
        );
        // Attach from 0 replays from the first frame.
        let ev = s.attach(&run, 0, |e| {
            String::from_utf8_lossy(&output_of(e)).contains("first words")
        });
        assert_eq!(ev[0].data["first"], 1, "{tool}");
        let last: u64 = ev.last().unwrap().id.as_ref().unwrap().parse().unwrap();
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": "second turn"})),
        );
        // Reconnect from last+1: exactly what was missed, nothing before.
        let more = s.attach(&run, last + 1, |e| {
            String::from_utf8_lossy(&output_of(e)).contains("second turn")
        });
        assert_eq!(more[0].data["first"].as_u64(), Some(last + 1), "{tool}");
        let text = String::from_utf8_lossy(&output_of(&more)).to_string();
        assert!(
            !text.contains("first words"),
            "{tool}: replayed old output: {text}"
        );
        assert!(text.contains("demo reply #2"), "{tool}: {text}");
        let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
        assert_eq!(v["state"], "stopped", "{tool}: {v}");
    }
}

#[test]
fn pty_run_echoes_input_and_keeps_a_screen() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws, "rows": 30, "cols": 100}),
    );
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "hello pty\r"})),
    );
    let ev = s.attach(&run, 0, |e| {
        String::from_utf8_lossy(&output_of(e)).contains("demo reply")
    });
    assert!(String::from_utf8_lossy(&output_of(&ev)).contains("hello pty"));
    let screen = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
    assert_eq!(screen["size"], json!({"rows": 30, "cols": 100}));
    assert!(
        screen["text"].as_str().unwrap().contains("demo reply"),
        "{screen}"
    );
    assert!(screen["seq"].as_u64().unwrap() >= 1);
    s.expect(
        200,
        "POST",
        &s.run_path(&run, "/resize"),
        Some(json!({"rows": 40, "cols": 120})),
    );
    let screen = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
    assert_eq!(screen["size"], json!({"rows": 40, "cols": 120}));
    // Interrupt a PTY run: SIGINT to its foreground group; the process stays.
    let v = s.expect(200, "POST", &s.run_path(&run, "/interrupt"), None);
    assert!(v["state"] == "running" || v["state"] == "idle", "{v}");
    let pid = v["pid"].as_i64().unwrap() as i32;
    assert!(alive(pid));
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn interrupt_ends_the_turn_and_the_process_stays() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "codex", "workspace": ws, "prompt": "!sleep 20000"}),
    );
    s.wait_run(&run, "the turn to start", |v| {
        v["state"] == "running" && v["conversation_id"].is_string()
    });
    let v = s.expect(200, "POST", &s.run_path(&run, "/interrupt"), None);
    let pid = v["pid"].as_i64().unwrap() as i32;
    let v = s.wait_run(&run, "the turn to end", |v| v["state"] == "idle");
    assert!(alive(pid));
    let events = s.expect(200, "GET", &s.run_path(&run, "/events"), None);
    let kinds: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"sessions.run.interrupted"), "{kinds:?}");
    assert_eq!(v["pid"].as_i64().unwrap() as i32, pid, "the same process");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn stop_escalates_and_nothing_survives() {
    let s = DemoServer::start(&["--stop-grace-ms", "300"]);
    let ws = workspace(&s);
    for transport in ["pipe", "pty"] {
        let run = start(
            &s,
            json!({"tool": "claude", "transport": transport, "workspace": ws}),
        );
        let text = "!ignore-term\n!grandchild\nready";
        let input = if transport == "pty" {
            format!("{}\r", text.replace('\n', "\r"))
        } else {
            text.to_string()
        };
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": input})),
        );
        let ev = s.attach(&run, 0, |e| {
            String::from_utf8_lossy(&output_of(e)).contains("grandchild pid ")
        });
        let grandchild = grandchild_pid(&output_of(&ev));
        let pid = s.expect(200, "GET", &s.run_path(&run, ""), None)["pid"]
            .as_i64()
            .unwrap() as i32;
        assert!(alive(pid) && alive(grandchild));
        let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
        assert_eq!(
            v["stop"]["sent_kill"], true,
            "{transport}: TERM was ignored, so KILL: {v}"
        );
        assert_eq!(v["signal"], "SIGKILL", "{transport}: the observed end: {v}");
        assert_eq!(v["state"], "stopped");
        assert!(!alive(pid), "{transport}: child gone");
        assert!(!alive(grandchild), "{transport}: grandchild gone");
    }
    // An exit code is observed, not invented.
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "claude", "workspace": ws, "prompt": "!exit 7"}),
    );
    let v = s.wait_run(&run, "the exit", |v| v["state"] == "failed");
    assert_eq!(v["exit_code"], 7);
    // The same on a PTY, whose watcher waits for the end alone.
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "!exit 9\r"})),
    );
    let v = s.wait_run(&run, "the PTY exit", |v| v["state"] == "failed");
    assert_eq!(v["exit_code"], 9);
}

#[test]
fn resume_is_a_new_generation_on_the_same_conversation() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "prompt": "remember me"}),
    );
    let v = s.wait_run(&run, "idle", |v| v["state"] == "idle");
    let conv = v["conversation_id"].clone();
    // Resuming a live run is refused.
    s.expect(409, "POST", &s.run_path(&run, "/resume"), None);
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let v = s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    assert_eq!(v["generation"], 2);
    let v = s.wait_run(&run, "resumed", |v| {
        v["state"] == "idle" || v["state"] == "running"
    });
    assert_eq!(v["conversation_id"], conv);
    assert!(
        v["exit_code"].is_null(),
        "the new generation has no exit yet: {v}"
    );
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "again"})),
    );
    s.wait_run(&run, "the turn", |v| v["state"] == "idle");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // A run whose tool never reported a conversation cannot resume into a new one.
    let pty = start(
        &s,
        json!({"tool": "codex", "transport": "pty", "workspace": ws}),
    );
    s.expect(200, "POST", &s.run_path(&pty, "/stop"), None);
    let (code, v) = s.call("POST", &s.run_path(&pty, "/resume"), None);
    assert_eq!(code, 409, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no stored conversation")
    );
}

#[test]
fn secrets_in_the_clients_environment_never_reach_the_child() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "claude", "workspace": ws, "prompt": "!env OPENAI_API_KEY\n!env HTTPS_PROXY\n!env PATH"}),
    );
    let ev = s.attach(&run, 0, |e| {
        String::from_utf8_lossy(&output_of(e)).contains("demo reply")
    });
    let pid = s.expect(200, "GET", &s.run_path(&run, ""), None)["pid"]
        .as_i64()
        .unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains("sk-must-not-leak"), "{environ}");
    assert!(!environ.contains("proxy.invalid"), "{environ}");
    assert!(environ.contains("PATH="));
    let out = String::from_utf8_lossy(&output_of(&ev)).to_string();
    assert!(!out.contains("sk-must-not-leak"), "{out}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn lag_after_eviction_and_exact_reconnect() {
    let s = DemoServer::start(&["--ring-kib", "64"]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "!emit 600000\r"})),
    );
    s.wait_run(&run, "the output", |v| {
        v["output"]["bytes"].as_u64().unwrap_or(0) > 600_000
    });
    let ev = s.attach(&run, 1, |e| e.iter().any(|x| x.event == "output"));
    assert_eq!(ev[0].event, "lag", "{:?}", ev[0]);
    let first = ev[0].data["first_available"].as_u64().unwrap();
    assert!(first > 1);
    let out = ev.iter().find(|e| e.event == "output").unwrap();
    assert_eq!(
        out.data["first"].as_u64(),
        Some(first),
        "resumes at the first frame held"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn pins_snoozes_done_names_archive() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let mut refs = Vec::new();
    for _ in 0..22 {
        let r = start(
            &s,
            json!({"tool": "claude", "transport": "pty", "workspace": ws}),
        );
        s.expect(200, "POST", &s.run_path(&r, "/stop"), None);
        refs.push(r);
    }
    for r in &refs[..21] {
        let v = s.expect(200, "POST", &s.run_path(r, "/pin"), None);
        assert_eq!(v["pinned"], true);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let again = s.expect(200, "POST", &s.run_path(&refs[5], "/pin"), None);
    assert_eq!(again["pinned"], true, "idempotent");
    let list = s.expect(200, "GET", &format!("{RUNS}?limit=200"), None);
    let pinned: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pinned"] == true)
        .map(|r| r["ref"].as_str().unwrap())
        .collect();
    assert_eq!(pinned.len(), 20, "at most 20 pins");
    assert!(
        !pinned.contains(&refs[0].as_str()),
        "the oldest pin dropped"
    );
    // Pinned runs outside the page come along (newest-first page of 2).
    let page = s.expect(200, "GET", &format!("{RUNS}?limit=2"), None);
    assert_eq!(
        page["items"].as_array().unwrap().len(),
        2 + 20
            - page["items"].as_array().unwrap()[..2]
                .iter()
                .filter(|r| r["pinned"] == true)
                .count()
    );
    let cursor = s.expect(
        200,
        "GET",
        &format!("{RUNS}?limit=2&pagination=cursor"),
        None,
    );
    assert_eq!(
        cursor["items"].as_array().unwrap().len(),
        2,
        "cursor pagination adds none"
    );
    // Another caller's list is untouched.
    let other = s.json_token("read", "viewer");
    let (_, theirs) = call_as(
        &s.home.socket(),
        Some(&other),
        "GET",
        &format!("{RUNS}?limit=200"),
        None,
    );
    assert!(
        theirs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["pinned"] == false)
    );

    let r = &refs[21];
    let (code, _) = s.call(
        "POST",
        &s.run_path(r, "/snooze"),
        Some(json!({"until": "2001-01-01T00:00:00Z"})),
    );
    assert_eq!(code, 400, "until must be in the future");
    s.expect(
        400,
        "POST",
        &s.run_path(r, "/snooze"),
        Some(json!({"until": "tomorrow"})),
    );
    let v = s.expect(
        200,
        "POST",
        &s.run_path(r, "/snooze"),
        Some(json!({"until": "2999-01-01T00:00:00Z"})),
    );
    assert_eq!(v["snoozed_until"], "2999-01-01T00:00:00.000Z");
    let v = s.expect(200, "POST", &s.run_path(r, "/done"), None);
    assert_eq!(v["done"], true);

    for bad in ["evil\u{202E}txt", "zero\u{200B}width", &"x".repeat(201)] {
        let (code, v) = s.call("PUT", &s.run_path(r, "/name"), Some(json!({"name": bad})));
        assert_eq!(code, 400, "{v}");
    }
    s.expect(400, "PUT", &s.run_path(r, "/name"), Some(json!({})));
    let before = ledger_kinds(&s);
    let v = s.expect(
        200,
        "PUT",
        &s.run_path(r, "/name"),
        Some(json!({"name": "  fix the parser  "})),
    );
    assert_eq!(v["name"], "fix the parser");
    s.expect(
        200,
        "PUT",
        &s.run_path(r, "/name"),
        Some(json!({"name": "fix the parser"})),
    );
    let v = s.expect(200, "POST", &s.run_path(r, "/archive"), None);
    let at = v["archived_at"].clone();
    assert!(at.is_string());
    let v = s.expect(200, "POST", &s.run_path(r, "/archive"), None);
    assert_eq!(v["archived_at"], at, "archiving again keeps archived_at");
    let after = ledger_kinds(&s);
    let new: Vec<&String> = after[before.len()..].iter().collect();
    assert_eq!(
        new,
        ["sessions.run.renamed", "sessions.run.archived"],
        "no-ops record nothing"
    );
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert!(
        !ledger.contains("fix the parser"),
        "the ledger records the ref, not the name"
    );
    let v = s.expect(200, "DELETE", &s.run_path(r, "/archive"), None);
    assert!(v["archived_at"].is_null());

    // Cleanup and delete.
    s.expect(409, "DELETE", &s.run_path(r, ""), None);
    s.expect(200, "POST", &s.run_path(r, "/cleanup"), None);
    s.expect(409, "POST", &s.run_path(r, "/pin"), None);
    s.expect(200, "DELETE", &s.run_path(r, ""), None);
    s.expect(404, "GET", &s.run_path(r, ""), None);
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    assert_eq!(v["ref"], "run-0023", "refs are never reused");
    s.expect(200, "POST", &s.run_path("run-0023", "/stop"), None);
}

fn ledger_kinds(s: &DemoServer) -> Vec<String> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn errors_name_the_problem() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let (code, v) = s.call(
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "cursor", "workspace": ws})),
    );
    assert_eq!(code, 422, "{v}");
    let (code, v) = s.call(
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "claude", "workspace": "relative/dir"})),
    );
    assert_eq!(code, 422, "{v}");
    let (code, _) = s.call(
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "claude", "workspace": ws, "shell": "sh -c x"})),
    );
    assert_eq!(code, 400, "unknown fields are refused, not ignored");
    s.expect(404, "GET", &s.run_path("run-9999", ""), None);
    // A tool that is not installed: 422 naming it.
    let empty = s.home.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    s.home.ok(&["server", "stop"]);
    let out = s
        .home
        .cmd()
        .args(["serve"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (code, v) = s.call(
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "codex", "workspace": ws})),
    );
    assert_eq!(code, 422, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("codex"),
        "{v}"
    );
}

#[test]
fn a_killed_server_leaves_lost_runs_and_no_processes() {
    let s = DemoServer::start(&["--stop-grace-ms", "300"]);
    let ws = workspace(&s);
    // A pipe run: a PTY child would get SIGHUP when the dead server's master closes.
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pipe", "workspace": ws, "prompt": "!grandchild"}),
    );
    let ev = s.attach(&run, 0, |e| {
        String::from_utf8_lossy(&output_of(e)).contains("grandchild pid ")
    });
    let grandchild = grandchild_pid(&output_of(&ev));
    let pid = s.expect(200, "GET", &s.run_path(&run, ""), None)["pid"]
        .as_i64()
        .unwrap() as i32;
    let server = s.home.server_pid().unwrap();
    unsafe { libc::kill(server, libc::SIGKILL) };
    s.home.wait_server_gone(server);
    // The child may end on its own (its stdin closed with the server); the grandchild
    // it left in its group stays until a server sweeps it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        alive(grandchild),
        "the grandchild outlives a crashed server until the sweep"
    );
    let restart = s
        .home
        .cmd()
        .args(["serve"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    // The sweep runs once the socket listens; the run shows `recovering` until then.
    let v = s.wait_run(&run, "the sweep", |v| v["state"] != "recovering");
    assert_eq!(v["state"], "lost", "{v}");
    assert!(v["exit_code"].is_null(), "nothing fabricated: {v}");
    assert!(
        !alive(pid) && !alive(grandchild),
        "the orphan's process group is gone"
    );
    let ev = s.attach(&run, 1, |_| false);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        (ev[0].event.as_str(), &ev[0].data["notice"]),
        ("notice", &json!("not_live"))
    );
    let verify = s.home.run(&["ledger", "verify"]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// The pid the fake reports for `!grandchild` ("grandchild pid N").
fn grandchild_pid(out: &[u8]) -> i32 {
    let out = String::from_utf8_lossy(out);
    out.split("grandchild pid ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in {out}"))
}

#[test]
fn every_run_route_answers_401_and_403_by_role() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let tokens: Vec<(&str, String)> = ["read", "write", "admin"]
        .iter()
        .map(|r| (*r, s.json_token(r, &format!("t-{r}"))))
        .collect();
    let rank = |r: &str| {
        ["read", "write", "admin"]
            .iter()
            .position(|x| *x == r)
            .unwrap()
    };
    let p = |t: &str| format!("{RUNS}/{run}{t}");
    // (method, path, body, least role). Bodies are valid enough to pass the authorizer;
    // what the handler then answers (409 for a stopped run, …) is not under test here.
    let routes: Vec<(&str, String, Option<serde_json::Value>, &str)> = vec![
        ("GET", RUNS.to_string(), None, "read"),
        ("GET", p(""), None, "read"),
        ("GET", p("/events"), None, "read"),
        ("GET", p("/attach?from=1"), None, "read"),
        ("GET", p("/screen"), None, "read"),
        ("POST", p("/pin"), None, "read"),
        ("DELETE", p("/pin"), None, "read"),
        (
            "POST",
            p("/snooze"),
            Some(json!({"until": "2999-01-01T00:00:00Z"})),
            "read",
        ),
        ("DELETE", p("/snooze"), None, "read"),
        ("POST", p("/done"), None, "read"),
        ("DELETE", p("/done"), None, "read"),
        (
            "POST",
            RUNS.to_string(),
            Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
            "write",
        ),
        ("POST", p("/input"), Some(json!({"text": "x"})), "write"),
        ("POST", p("/interrupt"), None, "write"),
        ("POST", p("/stop"), None, "write"),
        ("POST", p("/resume"), None, "write"),
        (
            "POST",
            p("/resize"),
            Some(json!({"rows": 10, "cols": 10})),
            "write",
        ),
        ("PUT", p("/name"), Some(json!({"name": "n"})), "write"),
        ("POST", p("/archive"), None, "write"),
        ("DELETE", p("/archive"), None, "write"),
        ("POST", p("/cleanup"), None, "admin"),
        ("DELETE", p(""), None, "admin"),
    ];
    for (m, path, body, least) in &routes {
        let (code, _) = call_as(&s.home.socket(), None, m, path, body.clone());
        assert_eq!(code, 401, "{m} {path} without a token");
        let (code, _) = call_as(
            &s.home.socket(),
            Some("proctor_0000"),
            m,
            path,
            body.clone(),
        );
        assert_eq!(code, 401, "{m} {path} with a bad token");
        for (role, tok) in &tokens {
            let (code, v) = call_as(&s.home.socket(), Some(tok), m, path, body.clone());
            if rank(role) < rank(least) {
                assert_eq!(code, 403, "{m} {path} as {role}: {v}");
            } else {
                assert!(
                    code != 401 && code != 403,
                    "{m} {path} as {role}: {code} {v}"
                );
            }
        }
    }
    // Stop the runs the write calls started.
    let list = s.expect(200, "GET", RUNS, None);
    for r in list["items"].as_array().unwrap() {
        s.call(
            "POST",
            &s.run_path(r["ref"].as_str().unwrap(), "/stop"),
            None,
        );
    }
}

#[test]
fn terminal_sizes_are_capped_on_start_resume_and_resize() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let runs_before = s.expect(200, "GET", RUNS, None);
    // The attack: any write token asked for 65535 x 65535 (137 GB of emulator cells).
    for (rows, cols, named) in [
        (65535, 65535, "rows 65535"),
        (24, 4_000_000_000u64, "cols 4000000000"),
        (501, 80, "rows 501"),
        (24, 1001, "cols 1001"),
        (0, 80, "rows 0"),
    ] {
        let v = s.expect(
            422,
            "POST",
            RUNS,
            Some(
                json!({"tool": "claude", "transport": "pty", "workspace": ws,
                "rows": rows, "cols": cols}),
            ),
        );
        let msg = v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
            + v["message"].as_str().unwrap_or_default();
        assert!(msg.contains(named), "{v}");
        assert!(
            msg.contains("500 rows") && msg.contains("1000 columns") || rows == 0,
            "{v}"
        );
    }
    assert_eq!(
        s.expect(200, "GET", RUNS, None)["items"],
        runs_before["items"],
        "a refused start creates nothing"
    );
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws, "rows": 500, "cols": 1000}),
    );
    let screen = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
    assert_eq!(screen["size"], json!({"rows": 500, "cols": 1000}));
    for (rows, cols) in [(65535, 65535), (501, 80), (24, 1001), (70000, 80)] {
        s.expect(
            422,
            "POST",
            &s.run_path(&run, "/resize"),
            Some(json!({"rows": rows, "cols": cols})),
        );
    }
    let screen = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
    assert_eq!(screen["size"], json!({"rows": 500, "cols": 1000}));
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "before the stop\r"})),
    );
    s.attach(&run, 0, |e| {
        String::from_utf8_lossy(&output_of(e)).contains("demo reply")
    });
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    // The screen route still answers after the end (the emulator itself is released:
    // tests/runs.rs proves that on the Run).
    let screen = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
    assert!(
        screen["text"].as_str().unwrap().contains("demo reply"),
        "{screen}"
    );
    s.expect(
        422,
        "POST",
        &s.run_path(&run, "/resume"),
        Some(json!({"rows": 65535, "cols": 65535})),
    );
}

/// The threads of a process, from `/proc`; `None` once it is gone.
fn threads_of(pid: i32) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

#[test]
fn stopping_many_runs_holds_no_thread_per_run() {
    // Issue 17 §2: stop escalation runs on timers. The server's shutdown stops every run at
    // once; each child here ignores SIGTERM, so each stop waits out the grace and sends
    // SIGKILL. Before, the shutdown held a thread per run through the grace (measured: 31
    // threads before the stop, 20 of them the pipe runs' followers, 57 at most during it);
    // after, 14 and 16 or 17. One run in five is a PTY run, its `!ignore-term` typed as keys.
    const N: usize = 25;
    let s = DemoServer::start(&["--stop-grace-ms", "1500"]);
    let ws = workspace(&s);
    let runs: Vec<String> = (0..N)
        .map(|i| {
            let transport = if i % 5 == 0 { "pty" } else { "pipe" };
            let mut body = json!({"tool": "claude", "transport": transport, "workspace": ws});
            if transport == "pipe" {
                body["prompt"] = json!("!ignore-term\nready");
            }
            start(&s, body)
        })
        .collect();
    let mut pids = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        if i % 5 == 0 {
            s.expect(
                202,
                "POST",
                &s.run_path(run, "/input"),
                Some(json!({"text": "!ignore-term\rready\r"})),
            );
        }
        let ev = s.attach(run, 0, |e| {
            String::from_utf8_lossy(&output_of(e)).contains("ignoring SIGTERM")
        });
        assert!(
            String::from_utf8_lossy(&output_of(&ev)).contains("ignoring SIGTERM"),
            "{run}"
        );
        let pid = s.expect(200, "GET", &s.run_path(run, ""), None)["pid"]
            .as_i64()
            .unwrap() as i32;
        assert!(alive(pid), "{run}");
        pids.push(pid);
    }
    let server = s.home.server_pid().unwrap();
    let before = threads_of(server).unwrap();
    let stop = {
        let mut cmd = s.home.cmd();
        cmd.args(["server", "stop"]);
        std::thread::spawn(move || cmd.output().unwrap())
    };
    let mut most = before;
    let mut names = String::new();
    while let Some(n) = threads_of(server) {
        if n > most {
            names = std::fs::read_dir(format!("/proc/{server}/task"))
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            std::fs::read_to_string(e.path().join("comm"))
                                .ok()
                                .map(|c| c.trim().to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
        }
        most = most.max(n);
        if !alive(server) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = stop.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    eprintln!("{before} threads before the stop of {N} runs, {most} at most during it: {names}");
    assert!(
        most <= before + 6,
        "{before} threads before the stop of {N} runs, {most} at most during it: {names}"
    );
    for (run, pid) in runs.iter().zip(&pids) {
        assert!(!alive(*pid), "{run}: process {pid} is gone");
    }
    // Each stop escalated, and each end was recorded before the server went.
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    for run in &runs {
        let exited = ledger
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["kind"] == "sessions.run.exited" && v.to_string().contains(run.as_str()))
            .unwrap_or_else(|| panic!("{run}: no exit recorded"));
        assert!(exited.to_string().contains("SIGKILL"), "{run}: {exited}");
    }
}

#[test]
fn stop_requests_waiting_out_their_grace_hold_no_thread_each() {
    // Issue 17 §2: a `POST /stop` waits out the grace on the reactor's timers. Before, each
    // request held a thread of the server's blocking pool for its whole stop: ten stops of
    // children that ignore SIGTERM, asked 150 ms apart within one grace, were ten more
    // threads at once. The stops' short steps (recording the request, the attribution pass,
    // reading the recorded exit) still use the pool, one after the other here.
    const N: usize = 10;
    let s = DemoServer::start(&["--stop-grace-ms", "3000"]);
    let ws = workspace(&s);
    let runs: Vec<String> = (0..N)
        .map(|_| {
            start(
                &s,
                json!({"tool": "claude", "transport": "pipe", "workspace": ws,
                       "prompt": "!ignore-term\nready"}),
            )
        })
        .collect();
    for run in &runs {
        s.attach(run, 0, |e| {
            String::from_utf8_lossy(&output_of(e)).contains("ignoring SIGTERM")
        });
    }
    let server = s.home.server_pid().unwrap();
    // Settled: the pool's threads from the starts have left (they live 3 s idle).
    std::thread::sleep(std::time::Duration::from_secs(4));
    let before = threads_of(server).unwrap();
    let socket = s.home.socket();
    let stops: Vec<_> = runs
        .iter()
        .map(|run| {
            let (socket, token, path) = (socket.clone(), s.token.clone(), s.run_path(run, "/stop"));
            let h = std::thread::spawn(move || call_as(&socket, Some(&token), "POST", &path, None));
            std::thread::sleep(std::time::Duration::from_millis(150));
            h
        })
        .collect();
    let mut most = before;
    while !stops.iter().all(|h| h.is_finished()) {
        most = most.max(threads_of(server).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for (run, h) in runs.iter().zip(stops) {
        let (status, v) = h.join().unwrap();
        assert_eq!(status, 200, "{run}: {v}");
        assert_eq!(
            v["stop"]["sent_kill"], true,
            "{run}: TERM ignored, so KILL: {v}"
        );
        assert_eq!(v["state"], "stopped", "{run}: {v}");
    }
    eprintln!("{before} threads before {N} stops, {most} at most during them");
    // Measured: 8 before, 12 at most (the short steps of stops asked while another's were
    // still running, on a loaded machine). Holding a thread per stop would be 10 more.
    assert!(
        most <= before + N / 2 + 2,
        "{before} threads before {N} overlapping stops, {most} at most during them"
    );
}
