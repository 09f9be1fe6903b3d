//! The cockpit's permission dialog end to end: the real binary in a real pseudo-terminal,
//! against a real server with the fakes, whose tools ask in the real tools' shapes.

mod common;

use common::DemoServer;
use common::pty::Term;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn start(s: &DemoServer, tool: &str, prompt: &str) -> String {
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": tool, "workspace": ws, "prompt": prompt})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "its permission request", |v| {
        v["permissions_open"] == 1
    });
    run
}

fn decided(s: &DemoServer, run: &str) -> Vec<Value> {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "sessions.run.permission_decided")
        .cloned()
        .collect()
}

fn wait_decided(s: &DemoServer, run: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(e) = decided(s, run).first() {
            return e["fields"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no decision on {run}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn cockpit(s: &DemoServer, rows: u16, cols: u16) -> Term {
    let mut path = s.shims.as_os_str().to_owned();
    path.push(":/usr/local/bin:/usr/bin:/bin");
    Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", s.home.path().to_str().unwrap()],
        rows,
        cols,
        &[("PATH", path.to_str().unwrap()), ("TERM", "xterm-256color")],
        &["NO_COLOR"],
    )
}

/// Presses `w` until the dialog of `run` opens, as a person would press it again: the
/// cockpit knows that a run waits from its last listing, which may predate the request.
fn open_dialog(c: &mut Term, run: &str) -> String {
    let title = format!("{run} asks permission (");
    for _ in 0..200 {
        c.type_keys("w");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let t = c.screen();
        if t.contains(&title) {
            return t;
        }
    }
    c.wait_screen("the permission dialog", |t| t.contains(&title))
}

#[test]
fn the_dialog_allows_one_request_and_denies_another() {
    let s = DemoServer::start(&[]);
    let first = start(&s, "codex", "!ask command cargo test --workspace");
    let mut c = cockpit(&s, 24, 80);
    c.wait_screen("the list", |t| t.contains(&first));
    let t = open_dialog(&mut c, &first);
    assert!(t.contains(&format!("{first} asks permission (1)")), "{t}");
    assert!(t.contains("commandExecution"), "{t}");
    assert!(t.contains("cargo test --workspace"), "{t}");
    assert!(
        t.contains("demo: the script asked to run it"),
        "the reason: {t}"
    );
    assert!(t.contains("allow for the session"), "codex offers it: {t}");
    // Nothing is decided until a key says so.
    assert!(decided(&s, &first).is_empty());
    c.type_keys("a");
    let f = wait_decided(&s, &first);
    assert_eq!(f["decision"], "allow", "{f}");
    assert_eq!(f["for_session"], false, "{f}");
    assert_eq!(f["by"]["principal"], "person", "{f}");
    c.wait_screen("the answer on the status line", |t| {
        t.contains(&format!("{first}: permission 1 allowed")) && !t.contains("asks permission (")
    });
    // The tool got it: its reply says so.
    s.wait_run(&first, "the turn's end", |v| v["state"] == "idle");
    let v = s.expect(200, "GET", &s.run_path(&first, "/permissions"), None);
    assert_eq!(v["items"][0]["state"], "allowed", "{v}");

    // Another run (an ACP agent) asks; the focused run asks nothing now, so `w` goes to it.
    let second = start(&s, "gemini", "!ask file secrets.env");
    c.wait_screen("the second run", |t| t.contains(&second));
    let t = open_dialog(&mut c, &second);
    assert!(t.contains("secrets.env") && t.contains("edit"), "{t}");
    // Esc leaves it open for later.
    c.send(b"\x1b");
    c.wait_screen("closed", |t| !t.contains("asks permission ("));
    assert!(decided(&s, &second).is_empty());
    open_dialog(&mut c, &second);
    c.type_keys("d");
    let f = wait_decided(&s, &second);
    assert_eq!(f["decision"], "deny", "{f}");
    c.wait_screen("denied", |t| {
        t.contains(&format!("{second}: permission 1 denied"))
    });
    let v = s.expect(200, "GET", &s.run_path(&second, "/permissions"), None);
    assert_eq!(v["items"][0]["state"], "denied", "{v}");
    c.type_keys("q");
    assert_eq!(c.exit_code(), 0);
}
