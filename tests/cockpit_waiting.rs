//! "Waiting for you" in the cockpit (issue 13, point 5), the real binary in a real
//! pseudo-terminal against a real server with the demo fakes: a pipe run whose turn ends while
//! the cockpit is open shows `waiting` on its row and `waiting 1` in the header, the bell and
//! the desktop-notification escape reach the terminal, and the configured `notify_command`
//! runs with the run's JSON on its stdin.

mod common;

use std::time::{Duration, Instant};

use common::DemoServer;
use common::pty::Term;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn cockpit(s: &DemoServer, rows: u16, cols: u16, env: &[(&str, &str)]) -> Term {
    let mut path = s.shims.as_os_str().to_owned();
    path.push(":/usr/local/bin:/usr/bin:/bin");
    let mut set = vec![("PATH", path.to_str().unwrap()), ("TERM", "xterm-256color")];
    set.extend_from_slice(env);
    Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", s.home.path().to_str().unwrap()],
        rows,
        cols,
        &set,
        &[
            "TMUX",
            "TERM_PROGRAM",
            "KITTY_WINDOW_ID",
            "WT_SESSION",
            "ConEmuPID",
            "NO_COLOR",
        ],
    )
}

fn wait_file(path: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(t) = std::fs::read_to_string(path)
            && t.ends_with('\n')
        {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_turn_that_ends_while_the_cockpit_is_open_is_shown_and_told() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let told = s.home.path().join("told.json");
    let config = s.home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("cockpit.toml"),
        format!(
            "notify_command = [\"/usr/bin/tee\", \"{}\"]\n",
            told.display()
        ),
    )
    .unwrap();
    // A pipe run with no turn yet: it works on nothing, and waits for no one.
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "running", |v| v["state"] == "running");
    let t = cockpit(&s, 40, 120, &[]);
    let screen = t.wait_screen("the run listed", |t| t.contains(&run));
    assert!(!screen.contains("waiting"), "{screen}");
    let before = t.text().len();
    // The person's turn, answered by the fake; its end leaves the tool waiting for input.
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "hello"})),
    );
    let screen = t.wait_screen("the row and the header say it waits", |t| {
        t.lines().next().is_some_and(|h| h.contains("waiting 1"))
            && t.contains("waiting for you · protocol")
    });
    assert!(screen.contains(&run), "{screen}");
    // The bell and the OSC 777 notification reached the terminal, after the cockpit opened.
    let raw = t.text();
    let want = format!(
        "\x07\x1b]777;notify;proctor: {run} waits for you;claude: the turn ended, the tool \
         waits for your input\x07"
    );
    let at = raw.find(&want);
    assert!(
        at.is_some_and(|i| i >= before),
        "no notification in {:?}",
        &raw[before..]
    );
    assert_eq!(raw.matches("\x1b]777;notify;").count(), 1, "told once");
    // The configured command ran with the run's JSON on its stdin.
    let got: Value = serde_json::from_str(wait_file(&told).trim()).unwrap();
    let view = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(got["run"], run.as_str(), "{got}");
    assert_eq!(got["tool"], "claude", "{got}");
    assert_eq!(got["source"], "protocol", "{got}");
    assert_eq!(
        got["reason"],
        "the turn ended; the tool waits for your input"
    );
    assert_eq!(got["since"], view["waiting"]["since"], "{got} {view}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn inside_tmux_the_notification_is_wrapped_and_notify_false_silences_it() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let start = || {
        let v = s.expect(
            201,
            "POST",
            RUNS,
            Some(json!({"tool": "codex", "transport": "pipe", "workspace": ws})),
        );
        let run = v["ref"].as_str().unwrap().to_string();
        s.wait_run(&run, "ready", |v| v["state"] == "running");
        run
    };
    let run = start();
    // TMUX set (as inside tmux) and a terminal that speaks OSC 9.
    let t = cockpit(
        &s,
        24,
        80,
        &[
            ("TMUX", "/tmp/tmux-0/default,1,0"),
            ("TERM_PROGRAM", "iTerm.app"),
        ],
    );
    t.wait_screen("the run listed", |t| t.contains(&run));
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "hello"})),
    );
    t.wait_screen("the header's count", |t| {
        t.contains("wait 1") || t.contains("waiting 1")
    });
    let want = format!("\x07\x1bPtmux;\x1b\x1b]9;proctor: {run} waits for you: codex: ");
    t.wait_for(&want);
    drop(t);
    // Off with the setting: the same change in another cockpit says nothing.
    let config = s.home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("cockpit.toml"), "notify = false\n").unwrap();
    let run2 = start();
    let t = cockpit(&s, 24, 80, &[]);
    t.wait_screen("the run listed", |t| t.contains(&run2));
    s.expect(
        202,
        "POST",
        &s.run_path(&run2, "/input"),
        Some(json!({"text": "hello"})),
    );
    t.wait_screen("both wait", |t| {
        t.contains("wait 2") || t.contains("waiting 2")
    });
    assert!(!t.text().contains("notify;"), "silenced");
    assert!(!t.text().contains("\x1b]9;"), "silenced");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    s.expect(200, "POST", &s.run_path(&run2, "/stop"), None);
}

#[test]
fn a_notify_command_that_fails_is_said_in_the_status_line_and_the_cockpit_goes_on() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = s.home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("cockpit.toml"),
        "notify_command = [\"/nonexistent/notifier\", \"--flag\"]\n",
    )
    .unwrap();
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "running", |v| v["state"] == "running");
    let t = cockpit(&s, 40, 120, &[]);
    t.wait_screen("the run listed", |t| t.contains(&run));
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "hello"})),
    );
    let screen = t.wait_screen("the failure in the status line", |t| {
        t.contains("the notify command failed: /nonexistent/notifier")
    });
    // Still drawing: the row says it waits, and the bell and escape were written anyway.
    assert!(screen.contains("waiting for you · protocol"), "{screen}");
    assert!(
        t.text().contains("\x1b]777;notify;"),
        "the escape was written"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
