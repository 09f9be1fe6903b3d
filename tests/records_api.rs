//! `GET /runs/{ref}/messages` through the socket, over the native records the fakes write
//! in the real tools' formats (claude's transcript, codex's rollout), and `proctor session
//! messages` over the same server.

mod common;
use common::DemoServer;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

/// A pipe run of `tool` that has had two turns, stopped.
fn two_turns(s: &DemoServer, tool: &str, ws: &str) -> String {
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": tool, "workspace": ws, "prompt": "first words"})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "the first turn", |v| v["state"] == "idle");
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "Second TURN\nwith a second line"})),
    );
    wait_messages(s, &run, 4);
    run
}

fn wait_messages(s: &DemoServer, run: &str, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = s.expect(200, "GET", &s.run_path(run, "/messages?role=all"), None);
        if v["items"].as_array().unwrap().len() >= n {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{n} messages: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn ids(v: &Value) -> Vec<u64> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_u64().unwrap())
        .collect()
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

#[test]
fn a_demo_sessions_messages_are_read_from_the_record_its_fake_wrote() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    for tool in ["claude", "codex"] {
        let run = two_turns(&s, tool, &ws);
        let all = s.expect(200, "GET", &s.run_path(&run, "/messages?role=all"), None);
        assert_eq!(all["transcript"], "read", "{tool}: {all}");
        assert_eq!(ids(&all), [1, 2, 3, 4], "{tool}: {all}");
        assert_eq!(all["items"][0]["role"], "user");
        assert_eq!(all["items"][0]["first_line"], "first words");
        assert_eq!(all["items"][1]["role"], "assistant");
        assert!(all["items"][0]["at"].is_string(), "{tool}: {all}");
        // By default, only what the person sent.
        let mine = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
        assert_eq!(
            (ids(&mine), mine["total"].as_u64()),
            (vec![1, 3], Some(2)),
            "{tool}"
        );
        assert_eq!(mine["items"][1]["first_line"], "Second TURN");
        assert!(mine["items"][1].get("text").is_none());
        // q, case-insensitive, anywhere in the text.
        let q = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?q=second%20line"),
            None,
        );
        assert_eq!(ids(&q), [3], "{tool}: {q}");
        // Pages: limit and cursor, asc and desc.
        let p = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?role=all&limit=3"),
            None,
        );
        assert_eq!((ids(&p), p["next"].as_str()), (vec![1, 2, 3], Some("3")));
        let p = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?role=all&limit=3&cursor=3"),
            None,
        );
        assert_eq!((ids(&p), p["next"].clone()), (vec![4], Value::Null));
        let p = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?role=all&limit=3&order=desc"),
            None,
        );
        assert_eq!((ids(&p), p["next"].as_str()), (vec![2, 3, 4], Some("2")));
        // at: the anchor is the first item.
        let at = all["items"][2]["at"].as_str().unwrap();
        let p = s.expect(
            200,
            "GET",
            &s.run_path(
                &run,
                &format!("/messages?role=all&at={}", at.replace('+', "%2B")),
            ),
            None,
        );
        // (The reply before it may share its millisecond: it is then kept too.)
        let got = ids(&p);
        assert!(
            got.contains(&3) && got.contains(&4) && !got.contains(&1),
            "{tool}: {p}"
        );
        assert!(got[0] >= 2, "{tool}: {p}");
        // One message whole.
        let one = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?id=3&q=nothing"),
            None,
        );
        assert_eq!(one["items"][0]["text"], "Second TURN\nwith a second line");
        assert_eq!(one["items"][0]["later_same"], 0);
        assert_eq!(one["total"], 4);
        s.expect(404, "GET", &s.run_path(&run, "/messages?id=5"), None);
        let t = s.expect(
            200,
            "GET",
            &s.run_path(&run, "/messages?text=1&role=all"),
            None,
        );
        assert!(
            t["items"][1]["text"]
                .as_str()
                .unwrap()
                .starts_with("demo reply #1"),
            "{t}"
        );

        // The ids stay as the transcript grows.
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": "third"})),
        );
        let grown = wait_messages(&s, &run, 6);
        assert_eq!(
            grown["items"].as_array().unwrap()[..4],
            all["items"].as_array().unwrap()[..]
        );
        assert_eq!(ids(&grown), [1, 2, 3, 4, 5, 6]);
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);

        // Audited once per reader per window, whatever the number of reads.
        assert_eq!(kinds(&s, &run, "sessions.run.messages"), 1, "{tool}");
        assert_eq!(kinds(&s, &run, "sessions.run.messages.text"), 1, "{tool}");
    }
}

#[test]
fn tools_without_a_record_reader_and_invalid_parameters_are_refused() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "grok", "workspace": ws, "prompt": "hi"})),
    );
    let grok = v["ref"].as_str().unwrap().to_string();
    let e = s.expect(422, "GET", &s.run_path(&grok, "/messages"), None);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("grok"),
        "{e}"
    );
    let run = two_turns(&s, "claude", &ws);
    let q257 = "a".repeat(257);
    for bad in [
        format!("q={q257}"),
        "limit=201".into(),
        "limit=1000000000000000000000".into(),
        "cursor=abc".into(),
        "id=x".into(),
        "at=yesterday".into(),
        "order=sideways".into(),
        "role=tool".into(),
        "text=yes".into(),
    ] {
        let e = s.expect(
            400,
            "GET",
            &s.run_path(&run, &format!("/messages?{bad}")),
            None,
        );
        assert_eq!(e["error"]["code"], "bad_request", "{bad}: {e}");
    }
    s.expect(
        200,
        "GET",
        &s.run_path(&run, &format!("/messages?q={}", "a".repeat(256))),
        None,
    );
    s.expect(404, "GET", &s.run_path("run-9999", "/messages"), None);
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

#[test]
fn a_hostile_record_is_unreadable_never_an_empty_success() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = two_turns(&s, "claude", &ws);
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let conv = s.expect(200, "GET", &s.run_path(&run, ""), None)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = account_home(&s, &run)
        .join("projects")
        .join(proctor::providers::records::claude::project_folder(&ws));
    let record = dir.join(format!("{conv}.jsonl"));
    assert!(record.is_file(), "{}", record.display());
    let saved = s.home.path().join("saved.jsonl");
    std::fs::rename(&record, &saved).unwrap();

    // Gone after the run ended: missing.
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("missing"), Some(0))
    );

    // A symlink to it: refused.
    std::os::unix::fs::symlink(&saved, &record).unwrap();
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
    std::fs::remove_file(&record).unwrap();

    // A hard link: refused.
    std::fs::hard_link(&saved, &record).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    std::fs::remove_file(&record).unwrap();

    // A FIFO: refused at once (the open does not wait for a writer).
    let c = std::ffi::CString::new(record.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    std::fs::remove_file(&record).unwrap();

    // 9 MiB: refused.
    let mut big = std::fs::read(&saved).unwrap();
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(
            b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"pad\"}}\n",
        );
    }
    std::fs::write(&record, &big).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(v["transcript"], "unreadable", "{v}");
    assert!(v["reason"].as_str().unwrap().contains("8388608"), "{v}");

    // Back in place: read again.
    std::fs::rename(&saved, &record).unwrap();
    let v = s.expect(200, "GET", &s.run_path(&run, "/messages"), None);
    assert_eq!(
        (v["transcript"].as_str(), v["total"].as_u64()),
        (Some("read"), Some(2))
    );
}

#[test]
fn the_cli_prints_the_messages_sanitised() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(
            json!({"transport": "pipe", "tool": "codex", "workspace": ws,
                    "prompt": "look \u{1b}]0;pwned\u{7} here \u{202e}"}),
        ),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    wait_messages(&s, &run, 2);
    let out = s.home.ok(&["session", "messages", &run, "--all"]);
    assert!(out.contains("look"), "{out}");
    assert!(out.contains("demo reply #1"), "{out}");
    assert!(out.contains("transcript read; total 2"), "{out}");
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    let whole = s.home.ok(&["session", "messages", &run, "--id", "1"]);
    assert!(whole.starts_with("#1 user"), "{whole}");
    let j = s.home.json(&["session", "messages", &run, "--json"]);
    assert_eq!(j["total"], 1, "{j}");
    let bad = s
        .home
        .run(&["session", "messages", &run, "--limit", "5000"]);
    assert_eq!(
        bad.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // --role is the route's `role`: the tool's answers only, everything, or a word the
    // server refuses (400, naming the words it takes).
    let j = s
        .home
        .json(&["session", "messages", &run, "--role", "assistant", "--json"]);
    let roles: Vec<&str> = j["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["assistant"], "{j}");
    let all = s
        .home
        .json(&["session", "messages", &run, "--role", "all", "--json"]);
    assert_eq!(all["items"].as_array().unwrap().len(), 2, "{all}");
    let bad = s
        .home
        .run(&["session", "messages", &run, "--role", "robot"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("role is user, assistant or all"), "{err}");
    let both = s
        .home
        .run(&["session", "messages", &run, "--role", "user", "--all"]);
    assert_eq!(both.status.code(), Some(2), "--all is --role all: not both");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
