//! `GET /v1/m/sessions/changes`: the stream that tells a client the list, a run's events or
//! the factory runs may have changed, so that the cockpit fetches them when they moved
//! instead of polling them every second (issue 17 §3).

mod common;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{DemoServer, SseEvent, call_as, http_status, sse};
use serde_json::json;

const CHANGES: &str = "/v1/m/sessions/changes";

fn counts(e: &SseEvent) -> (u64, u64, u64) {
    let n = |k: &str| {
        e.data[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {:?}", e.data))
    };
    (n("ledger"), n("factory"), n("marks"))
}

fn start_run(s: &DemoServer) -> String {
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "running", |v| v["state"] == "running");
    run
}

fn wait_for(flag: &AtomicBool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_change_stream_says_a_fact_once_it_can_be_read_and_a_mark_once_set() {
    let s = DemoServer::start(&[]);
    let run = start_run(&s);
    let socket = s.home.socket();
    let token = s.token.clone();
    let opened = Arc::new(AtomicBool::new(false));
    // What a client that refetches on the event reads: the run's name, read at once from
    // inside the stream's reader when the ledger's count first moves.
    let seen_name: Arc<Mutex<Option<String>>> = Arc::default();
    let path = s.run_path(&run, "");
    let reader = {
        let (opened, seen_name, socket, token) = (
            opened.clone(),
            seen_name.clone(),
            socket.clone(),
            token.clone(),
        );
        std::thread::spawn(move || {
            sse(&socket, &token, CHANGES, |evs| {
                let Some(first) = evs.first() else {
                    return false;
                };
                opened.store(true, Ordering::SeqCst);
                let first = counts(first);
                let ledger = evs.iter().any(|e| counts(e).0 > first.0);
                let marks = evs.iter().any(|e| counts(e).2 > first.2);
                let mut name = seen_name.lock().unwrap();
                if ledger && name.is_none() {
                    let (_, v) = call_as(&socket, Some(&token), "GET", &path, None);
                    *name = Some(v["name"].as_str().unwrap_or("").to_string());
                }
                ledger && marks
            })
        })
    };
    wait_for(&opened, "the stream's first event");
    s.expect(
        200,
        "PUT",
        &s.run_path(&run, "/name"),
        Some(json!({"name": "renamed-by-another-client"})),
    );
    s.expect(200, "POST", &s.run_path(&run, "/pin"), None);
    let evs = reader.join().unwrap();
    assert_eq!(evs[0].event, "changes", "{evs:?}");
    assert_eq!(
        seen_name.lock().unwrap().as_deref(),
        Some("renamed-by-another-client"),
        "a client that reads when the ledger's count moves reads the change: {evs:?}"
    );
    // Counts only grow.
    for w in evs.windows(2) {
        let (a, b) = (counts(&w[0]), counts(&w[1]));
        assert!(b.0 >= a.0 && b.1 >= a.1 && b.2 >= a.2, "{evs:?}");
    }
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn the_change_stream_needs_a_token_and_a_read_token_may_follow_it() {
    let s = DemoServer::start(&[]);
    let socket = s.home.socket();
    assert_eq!(http_status(&socket, "GET", CHANGES, None), 401);
    assert_eq!(
        http_status(&socket, "GET", CHANGES, Some("not-a-token")),
        401
    );
    let c = s.home.json(&[
        "token", "create", "--role", "read", "--name", "viewer", "--json",
    ]);
    let secret = c["secret"].as_str().unwrap();
    let evs = sse(&socket, secret, CHANGES, |evs| !evs.is_empty());
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].event, "changes");
    let (ledger, _, _) = counts(&evs[0]);
    assert!(
        ledger > 0,
        "the server's own start is in the ledger: {evs:?}"
    );
}
