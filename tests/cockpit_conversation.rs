//! The cockpit's live pane of a pipe session, in a real pseudo-terminal against a real server
//! with the fakes: the person's turn is shown, a tool call is one line with its exit, and the
//! `toggle-tool-output` key (`o` in the live pane) shows the call's output under it.

mod common;

use common::DemoServer;
use common::pty::Term;
use serde_json::json;

const RUNS: &str = "/v1/m/sessions/runs";

#[test]
fn the_live_pane_shows_the_persons_turn_and_expands_a_tool_call() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(
            json!({"transport": "pipe", "tool": "claude", "workspace": ws,
                    "prompt": "!tool bash cargo test 1\nfix the \u{1b}[31mlexer"}),
        ),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.wait_run(&run, "the first turn", |v| v["state"] == "idle");
    let mut path = s.shims.as_os_str().to_owned();
    path.push(":/usr/local/bin:/usr/bin:/bin");
    let home = s.home.path().to_str().unwrap();
    let mut t = Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", home],
        40,
        120,
        &[("PATH", path.to_str().unwrap()), ("TERM", "xterm-256color")],
        &["NO_COLOR"],
    );
    let call = "▸ Bash: cargo test — Run cargo test (exit 1)";
    let screen = t.wait_screen("the conversation in the live pane", |t| {
        t.contains("you: !tool bash cargo test 1") && t.contains(call)
    });
    // The person's turn, its second line, and the agent's reply; the ESC never shows.
    assert!(screen.contains("     fix the lexer"), "{screen}");
    assert!(screen.contains("demo reply #1"), "{screen}");
    assert!(
        !screen.contains("│ demo output of bash cargo test"),
        "{screen}"
    );
    // Focus the live pane, then show the tool calls' output.
    t.send(b"\t");
    t.wait_screen("the live pane focused", |t| t.contains("scroll"));
    t.send(b"o");
    let screen = t.wait_screen("the call's output under it", |t| {
        t.contains("│ Exit code 1") && t.contains("│ demo output of bash cargo test: failed")
    });
    assert!(screen.contains("tool output shown"), "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines.iter().position(|l| l.contains(call)).unwrap();
    assert!(lines[at + 1].contains("│ Exit code 1"), "{screen}");
    // And hides it again.
    t.send(b"o");
    t.wait_screen("the output hidden", |t| {
        !t.contains("│ Exit code 1") && t.contains(call)
    });
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
}
