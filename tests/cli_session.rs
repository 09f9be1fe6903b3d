//! `proctor session …` against a real server on a temporary home, with the provider fakes on
//! PATH as the tools (demo shims), through the real binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::{ShimEnv as Env, TestHome};
use serde_json::Value;

/// How long a wait for the server or a fake may take before the test gives up (a hang, not
/// a speed requirement).
const HANG: Duration = Duration::from_secs(60);

impl Env {
    fn cmd(&self) -> Command {
        let mut c = self.h.cmd();
        c.env("PATH", &self.path_var).current_dir(self.ws.path());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).stdin(Stdio::null()).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "proctor {args:?} failed ({:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// Runs a command that must fail with `code`; returns its stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(
            out.status.code(),
            Some(code),
            "proctor {args:?}: stdout {}\nstderr {err}",
            String::from_utf8_lossy(&out.stdout)
        );
        err
    }

    /// Starts a run; returns its ref.
    fn start(&self, args: &[&str]) -> String {
        let mut all = vec!["session", "start", "--json"];
        all.extend_from_slice(args);
        let v = self.json(&all);
        assert_eq!(v["demo"], true, "the fakes back this run: {v}");
        v["ref"].as_str().unwrap().to_string()
    }

    /// Polls `tail REF` (without --follow) until its stdout contains `needle`.
    fn tail_until(&self, run: &str, needle: &str) -> String {
        let deadline = Instant::now() + HANG;
        loop {
            let out = self.ok(&["session", "tail", run]);
            if out.contains(needle) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "`{needle}` never appeared in the output of {run}:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn show(&self, run: &str) -> Value {
        self.json(&["session", "show", run, "--json"])
    }

    fn wait_state(&self, run: &str, states: &[&str]) -> Value {
        let deadline = Instant::now() + HANG;
        loop {
            let v = self.show(run);
            if states.contains(&v["state"].as_str().unwrap_or("")) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{run} never reached {states:?}: {v}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_pipe_session_from_start_to_its_observed_exit() {
    let e = Env::new();
    let run = e.start(&[
        "--transport",
        "pipe",
        "--tool",
        "claude",
        "--name",
        "first run",
        "--",
        "hello",
        "there",
    ]);
    assert_eq!(run, "run-0001");

    // The list shows it as a demo, with its name.
    let list = e.ok(&["session", "list"]);
    let row = list
        .lines()
        .find(|l| l.starts_with("run-0001"))
        .unwrap_or_else(|| panic!("no row for run-0001:\n{list}"));
    assert!(row.contains("claude (demo)"), "{row}");
    assert!(row.contains("first run"), "{row}");
    assert!(row.contains("pipe"), "{row}");
    let page = e.json(&["session", "list", "--json"]);
    assert_eq!(page["items"][0]["ref"], "run-0001");
    assert_eq!(page["items"][0]["demo"], true);
    let show = e.ok(&["session", "show", "1"]);
    assert!(show.contains("claude (demo)"), "{show}");
    assert!(show.contains("its output is a demo"), "{show}");

    // tail prints the fake's reply to the first prompt.
    e.tail_until(&run, r#"demo reply #1: you said "hello there""#);
    e.wait_state(&run, &["idle"]);

    // A second turn; --from skips what was already read.
    let next = e.show(&run)["output"]["next_seq"].as_u64().unwrap();
    let sent = e.ok(&["session", "input", &run, "second turn"]);
    assert!(sent.contains("a turn"), "{sent}");
    e.tail_until(&run, r#"demo reply #2: you said "second turn""#);
    let from = e.ok(&["session", "tail", &run, "--from", &next.to_string()]);
    assert!(from.contains("demo reply #2"), "{from}");
    assert!(!from.contains("demo reply #1"), "{from}");

    // stdin as the text.
    let mut child = e
        .cmd()
        .args(["session", "input", &run, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"third from stdin\n").unwrap();
    }
    assert!(child.wait().unwrap().success());
    e.tail_until(&run, r#"demo reply #3: you said "third from stdin""#);

    // events lists the lifecycle.
    let events = e.ok(&["session", "events", &run]);
    for kind in ["created", "started", "turn_ended"] {
        assert!(events.contains(kind), "{kind} missing:\n{events}");
    }

    // A follower sees the run end on its own and exits with its code.
    let follower = e
        .cmd()
        .args(["session", "tail", "--follow", &run])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    e.ok(&["session", "input", &run, "!exit 3"]);
    let out = follower.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("[run-0001 exited: code 3]"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("demo reply #1"),
        "the follower printed the output from the start"
    );
    // The record follows the observed exit (the server records it as it ends the stream).
    let v = e.wait_state(&run, &["failed"]);
    assert_eq!(v["exit_code"].as_i64(), Some(3), "{v}");

    // Input to an ended run: the server's 409, named.
    let err = e.fails(&["session", "input", &run, "too late"], 1);
    assert!(err.contains("409"), "{err}");
    assert!(err.contains("not live"), "{err}");
}

#[test]
fn tail_follow_after_stop_exits_with_the_signal_status() {
    let e = Env::new();
    let run = e.start(&["--transport", "pipe", "--tool", "codex", "--", "hi"]);
    e.tail_until(&run, "demo reply #1");
    let stopped = e.ok(&["session", "stop", &run]);
    assert!(stopped.contains("stopped"), "{stopped}");
    let v = e.show(&run);
    assert_eq!(v["state"], "stopped");
    let out = e.run(&["session", "tail", "--follow", &run]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // What the server observed decides the status: 128 + the signal, or the code.
    let (line, status) = match (v["signal"].as_str(), v["exit_code"].as_i64()) {
        (Some("SIGTERM"), _) => ("[run-0001 exited: signal SIGTERM]".to_string(), 143),
        (Some("SIGKILL"), _) => ("[run-0001 exited: signal SIGKILL]".to_string(), 137),
        (None, Some(c)) => (format!("[run-0001 exited: code {c}]"), c as i32),
        other => panic!("unexpected exit {other:?}: {v}"),
    };
    assert_eq!(out.status.code(), Some(status), "{stderr}");
    assert!(stderr.contains(&line), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo reply #1"));
    // Without --follow the same tail exits 0 and still reports the exit.
    let out = e.run(&["session", "tail", &run]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&line));
}

#[test]
fn names_marks_archive_cleanup_and_delete() {
    let e = Env::new();
    let run = e.start(&["--transport", "pipe", "--tool", "gemini"]);

    // Names: a direction override is refused with the server's message; "" clears.
    let err = e.fails(&["session", "rename", &run, "\u{202e}evil"], 1);
    assert!(err.contains("400"), "{err}");
    assert!(err.contains("U+202E"), "{err}");
    assert!(
        !err.contains('\u{202e}'),
        "the refused name never reaches the terminal raw: {err:?}"
    );
    let err = e.fails(&["session", "rename", &run, &"x".repeat(201)], 1);
    assert!(err.contains("400"), "{err}");
    e.ok(&["session", "rename", &run, "  a fine name "]);
    assert_eq!(e.show(&run)["name"], "a fine name");
    let cleared = e.ok(&["session", "rename", &run, ""]);
    assert!(cleared.contains("no name"), "{cleared}");
    assert_eq!(e.show(&run)["name"], Value::Null);

    // Pin and done are the caller's, and idempotent.
    let pinned = e.ok(&["session", "pin", &run]);
    assert!(pinned.contains("pinned (at"), "{pinned}");
    e.ok(&["session", "pin", &run]);
    assert_eq!(e.show(&run)["pinned"], true);
    e.ok(&["session", "unpin", &run]);
    assert_eq!(e.show(&run)["pinned"], false);
    e.ok(&["session", "done", &run]);
    assert_eq!(e.show(&run)["done"], true);
    e.ok(&["session", "undone", &run]);
    assert_eq!(e.show(&run)["done"], false);

    // Snooze: the past is refused by the server (400), nonsense by the CLI (2).
    let err = e.fails(
        &["session", "snooze", &run, "--until", "2020-01-01T00:00:00Z"],
        1,
    );
    assert!(
        err.contains("400") && err.contains("not in the future"),
        "{err}"
    );
    let err = e.fails(&["session", "snooze", &run, "--until", "tomorrow"], 2);
    assert!(err.contains("30m"), "{err}");
    let before = chrono::Utc::now();
    let v = e.json(&["session", "snooze", &run, "--until", "2h", "--json"]);
    let until = chrono::DateTime::parse_from_rfc3339(v["snoozed_until"].as_str().unwrap()).unwrap();
    let delta = until.signed_duration_since(before).num_seconds();
    assert!((7100..=7300).contains(&delta), "2h from now: {delta} s");
    // A snoozed run leaves the human list (counted), not --all or --json.
    let list = e.ok(&["session", "list"]);
    assert!(!list.contains("run-0001"), "{list}");
    assert!(list.contains("1 snoozed"), "{list}");
    assert!(e.ok(&["session", "list", "--all"]).contains("run-0001"));
    e.ok(&["session", "unsnooze", &run]);
    assert!(e.show(&run)["snoozed_until"].is_null());

    // Archive: idempotent, recorded once, left out of the list.
    let a1 = e.json(&["session", "archive", &run, "--json"]);
    let a2 = e.json(&["session", "archive", &run, "--json"]);
    assert!(a1["archived_at"].is_string());
    assert_eq!(a1["archived_at"], a2["archived_at"]);
    let ledger = std::fs::read_to_string(e.h.ledger()).unwrap();
    assert_eq!(
        ledger
            .lines()
            .filter(|l| l.contains("sessions.run.archived") && l.contains("run-0001"))
            .count(),
        1
    );
    let list = e.ok(&["session", "list"]);
    assert!(
        !list.contains("run-0001") && list.contains("1 archived"),
        "{list}"
    );
    e.ok(&["session", "unarchive", &run]);
    assert!(e.show(&run)["archived_at"].is_null());

    // Cleanup needs a stopped run; delete needs a cleaned one.
    let err = e.fails(&["session", "cleanup", &run], 1);
    assert!(err.contains("409"), "{err}");
    let err = e.fails(&["session", "delete", &run], 1);
    assert!(
        err.contains("409") && err.contains("cleaned before delete"),
        "{err}"
    );
    e.ok(&["session", "stop", &run]);
    let cleaned = e.ok(&["session", "cleanup", &run]);
    assert!(cleaned.contains("cleaned up"), "{cleaned}");
    e.ok(&["session", "cleanup", &run]);
    assert_eq!(e.show(&run)["state"], "cleaned");
    // A cleaned run's output is not held: tail says so and exits 1.
    let err = e.fails(&["session", "tail", &run], 1);
    assert!(err.contains("no output held"), "{err}");
    let deleted = e.ok(&["session", "delete", &run]);
    assert!(deleted.contains("run-0001 deleted"), "{deleted}");
    let err = e.fails(&["session", "show", &run], 1);
    assert!(err.contains("404"), "{err}");
    // A malformed ref never reaches the server.
    let err = e.fails(&["session", "show", "../x"], 2);
    assert!(err.contains("not a run ref"), "{err}");
}

#[test]
fn a_pty_session_echoes_through_the_sanitiser() {
    let e = Env::new();
    let run = e.start(&["--tool", "claude", "--transport", "pty", "--", "hi", "pty"]);
    let out = e.tail_until(&run, r#"demo reply #1: you said "hi pty""#);
    assert!(out.contains("interactive form"), "the banner: {out}");
    assert!(
        out.lines()
            .any(|l| l.contains("hi pty") && !l.contains("reply")),
        "the echo: {out}"
    );
    assert!(
        !out.contains('\r') && !out.contains('\u{1b}'),
        "sanitised: no CR, no escapes: {out:?}"
    );
    // input types the text and presses Enter.
    e.ok(&["session", "input", &run, "again"]);
    e.tail_until(&run, r#"demo reply #2: you said "again""#);
    // --raw gives the terminal's bytes, CRs included.
    let raw = e.run(&["session", "tail", &run, "--raw"]);
    assert!(
        raw.stdout.windows(2).any(|w| w == b"\r\n"),
        "raw keeps CRLF"
    );
    e.ok(&["session", "stop", &run]);
}

#[test]
fn a_lag_notice_when_output_was_evicted() {
    let e = Env::new();
    // 6 MB through a 4 MiB ring: the beginning is evicted.
    let run = e.start(&[
        "--transport",
        "pipe",
        "--tool",
        "claude",
        "--",
        "!emit 6000000",
    ]);
    e.wait_state(&run, &["idle"]);
    let out = e.run(&["session", "tail", &run]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("output before seq") && stderr.contains("was evicted"),
        "{stderr}"
    );
    assert!(!out.stdout.is_empty());
    e.ok(&["session", "stop", &run]);
}

#[test]
fn attach_refuses_a_non_terminal_stdin() {
    let e = Env::new();
    let run = e.start(&["--tool", "codex", "--transport", "pty"]);
    let err = e.fails(&["session", "attach", &run], 2);
    assert!(err.contains("stdin is not a terminal"), "{err}");
    assert!(err.contains("tail --follow"), "{err}");
    let err = e.fails(&["session", "attach", &run, "--detach-key", "ctrl-c"], 2);
    assert!(err.contains("--detach-key"), "{err}");
    e.ok(&["session", "stop", &run]);
}

#[test]
fn start_needs_a_tool_or_profile_and_a_real_workspace() {
    let e = Env::new();
    let err = e.fails(&["session", "start"], 2);
    assert!(err.contains("--profile") || err.contains("--tool"), "{err}");
    let err = e.fails(
        &[
            "session",
            "start",
            "--tool",
            "claude",
            "--workspace",
            "/nonexistent/x",
        ],
        2,
    );
    assert!(err.contains("workspace"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Interactive attach, driven through tmux
// ---------------------------------------------------------------------------------------------

fn wait_file(p: &Path) -> String {
    let deadline = Instant::now() + HANG;
    loop {
        if let Ok(s) = std::fs::read_to_string(p)
            && s.ends_with('\n')
        {
            return s;
        }
        assert!(Instant::now() < deadline, "{} never written", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

#[test]
fn attach_types_into_a_pty_run_detaches_and_restores_the_terminal() {
    let e = Env::new();
    let run = e.start(&[
        "--tool",
        "claude",
        "--transport",
        "pty",
        "--",
        "before attach",
    ]);
    e.tail_until(&run, "demo reply #1");
    let files = tempfile::tempdir().unwrap();
    let f = |n: &str| -> PathBuf { files.path().join(n) };
    let proctor = format!(
        "{} --home {}",
        sh_quote(Path::new(env!("CARGO_BIN_EXE_proctor"))),
        sh_quote(e.h.path())
    );
    let shell = format!(
        "env -u PROCTOR_HOME -u PROCTOR_TOKEN PATH='{}' PS1='READY$ ' sh",
        e.path_var.replace('\'', "'\\''")
    );
    let Some(t) = Tmux::start(100, 30, &shell) else {
        eprintln!("skipped: tmux is not installed, so there is no terminal to attach from");
        return;
    };
    t.wait_for("READY$");
    t.keys(&[
        &format!(
            "stty -g > {}; {proctor} session attach {run}",
            sh_quote(&f("before"))
        ),
        "Enter",
    ]);
    // The run's screen is drawn: what it printed before we attached.
    t.wait_for(r#"demo reply #1: you said "before attach""#);
    t.keys(&["typed in tmux", "Enter"]);
    t.wait_for(r#"demo reply #2: you said "typed in tmux""#);
    t.keys(&["C-\\"]);
    let s = t.wait_for("[detached from run-0001; it keeps running]");
    assert!(
        s.contains("detach with Ctrl-\\"),
        "the detach key was named:\n{s}"
    );
    assert!(
        !s.contains("demo reply #2"),
        "the alternate screen is gone, the shell's screen is back:\n{s}"
    );
    t.keys(&[&format!("stty -g > {}", sh_quote(&f("after"))), "Enter"]);
    assert_eq!(
        wait_file(&f("before")),
        wait_file(&f("after")),
        "the terminal's modes are restored after detach"
    );
    assert_eq!(e.show(&run)["state"], "running", "detaching leaves the run");

    // Attach again; the run ends while attached: its exit is printed and the shell is back.
    t.keys(&[&format!("clear; {proctor} session attach {run}"), "Enter"]);
    t.wait_for(r#"demo reply #2: you said "typed in tmux""#);
    t.keys(&["!exit 4", "Enter"]);
    t.wait_for("[run-0001 exited: code 4]");
    t.keys(&[&format!("stty -g > {}", sh_quote(&f("after2"))), "Enter"]);
    assert_eq!(wait_file(&f("before")), wait_file(&f("after2")));
    let s = t.wait_for("READY$ stty");
    assert!(s.contains("READY$"), "{s}");
}

#[test]
fn attach_to_a_pipe_run_sends_lines_as_turns() {
    let e = Env::new();
    let run = e.start(&["--transport", "pipe", "--tool", "claude", "--", "first"]);
    e.tail_until(&run, "demo reply #1");
    let proctor = format!(
        "{} --home {}",
        sh_quote(Path::new(env!("CARGO_BIN_EXE_proctor"))),
        sh_quote(e.h.path())
    );
    let shell = format!(
        "env -u PROCTOR_HOME -u PROCTOR_TOKEN PATH='{}' PS1='READY$ ' sh",
        e.path_var.replace('\'', "'\\''")
    );
    let Some(t) = Tmux::start(100, 30, &shell) else {
        eprintln!("skipped: tmux is not installed, so there is no terminal to attach from");
        return;
    };
    t.wait_for("READY$");
    t.keys(&[&format!("{proctor} session attach {run}"), "Enter"]);
    t.wait_for(r#"demo reply #1: you said \"first\""#);
    t.keys(&["a typed turn", "Enter"]);
    t.wait_for(r#"demo reply #2: you said \"a typed turn\""#);
    t.keys(&["C-\\"]);
    t.wait_for("[detached from run-0001; it keeps running]");
    let s = t.wait_for("READY$");
    assert!(s.trim_end().ends_with("READY$"), "{s}");
    e.ok(&["session", "stop", &run]);
}

/// A `claude` that acts as a hostile agent in a PTY: on the key `g` it writes the operator's
/// clipboard (OSC 52), sets the window title, and asks the terminal for the cursor position,
/// its device attributes and its background colour, whose answers a terminal types back as
/// keystrokes. It logs every byte it receives, in hex, to `log`.
fn hostile_claude(dir: &Path, log: &Path) {
    let script = format!(
        "#!/bin/sh\n\
         PATH=/usr/bin:/bin\n\
         stty raw -echo\n\
         printf 'hostile ready\\r\\n'\n\
         while :; do\n\
           c=$(dd bs=1 count=1 2>/dev/null | od -An -tx1)\n\
           [ -n \"$c\" ] || exit 0\n\
           echo \"$c\" >> {log}\n\
           case \"$c\" in *67*)\n\
             printf '\\033]52;c;cHduZWQ=\\007\\033]2;agent title\\007\\033]0;icon and title\\033\\\\'\n\
             printf '\\033[6n\\033[c\\033[>c\\033]11;?\\007\\033P$qm\\033\\\\'\n\
             printf '\\033[31mafter the queries\\033[0m\\r\\n';;\n\
           esac\n\
         done\n",
        log = sh_quote(log)
    );
    install_claude(dir, &script);
}

/// What a terminal answers to the queries in `out` (the replies it would type into the
/// program attached to it).
fn terminal_replies(out: &str) -> Vec<&'static str> {
    let mut replies = Vec::new();
    for (query, reply) in [
        ("\x1b[6n", "\x1b[1;1R"),
        ("\x1b[c", "\x1b[?62;22c"),
        ("\x1b[>c", "\x1b[>1;10;0c"),
        ("\x1b]11;?", "\x1b]11;rgb:0000/0000/0000\x1b\\"),
        ("\x1bP$qm", "\x1bP1$r0m\x1b\\"),
        ("\x1b]52;c;?", "\x1b]52;c;c2VjcmV0\x1b\\"),
    ] {
        if out.contains(query) {
            replies.push(reply);
        }
    }
    replies
}

#[test]
fn attach_drops_clipboard_writes_titles_and_queries_and_the_child_gets_no_reply() {
    let mut e = Env::new();
    let hostile = tempfile::tempdir().unwrap();
    let log = hostile.path().join("received");
    hostile_claude(hostile.path(), &log);
    e.path_var = format!("{}:{}", hostile.path().display(), e.path_var);
    let v = e.json(&[
        "session",
        "start",
        "--json",
        "--tool",
        "claude",
        "--transport",
        "pty",
    ]);
    let run = v["ref"].as_str().unwrap().to_string();
    e.tail_until(&run, "hostile ready");

    let mut t = common::pty::Term::proctor(e.h.path(), &["session", "attach", &run]);
    t.wait_for("hostile ready");
    t.send(b"g");
    let out = t.wait_for("after the queries");
    // Act as the operator's terminal would: answer every query that reached it.
    for reply in terminal_replies(&out) {
        t.send(reply.as_bytes());
    }
    t.send(b"z");
    let deadline = Instant::now() + HANG;
    let received = loop {
        let r = std::fs::read_to_string(&log).unwrap_or_default();
        if r.contains("7a") {
            break r;
        }
        assert!(Instant::now() < deadline, "the child never got `z`: {r}");
        std::thread::sleep(Duration::from_millis(50));
    };
    t.send(b"\x1c");
    t.wait_for("[detached from");
    let out = t.text();
    assert_eq!(
        received.split_whitespace().collect::<Vec<_>>(),
        ["67", "7a"],
        "the child got exactly the keys typed, no terminal reply"
    );

    for (what, seq) in [
        ("the clipboard write", "\x1b]52"),
        ("the title", "\x1b]2;"),
        ("the icon title", "\x1b]0;"),
        ("the cursor position query", "\x1b[6n"),
        ("the device attributes query", "\x1b[c"),
        ("the secondary attributes query", "\x1b[>c"),
        ("the colour query", "\x1b]11;?"),
        ("the DECRQSS query", "\x1bP$q"),
    ] {
        assert!(
            !out.contains(seq),
            "{what} reached the operator's terminal: {out:?}"
        );
    }
    assert!(
        out.contains("\x1b[31mafter the queries\x1b[0m"),
        "what stays in the pane passes byte for byte: {out:?}"
    );
    assert!(
        out.contains("1 clipboard write, 2 title changes, 5 terminal queries"),
        "the operator is told what was dropped: {out:?}"
    );

    // The setting lets clipboard writes through (never reads), and nothing else.
    std::fs::write(
        e.h.path().join("config/cockpit.toml"),
        "[attach]\nclipboard = \"allow\"\n",
    )
    .unwrap();
    let mut t = common::pty::Term::proctor(e.h.path(), &["session", "attach", &run]);
    t.wait_for("after the queries");
    t.send(b"g");
    let out = t.wait_for_n("after the queries", 2);
    t.send(b"\x1c");
    t.wait_for("[detached from");
    assert!(out.contains("\x1b]52;c;cHduZWQ=\x07"), "{out:?}");
    assert!(
        !out.contains("\x1b]2;") && !out.contains("\x1b[6n"),
        "{out:?}"
    );
    e.ok(&["session", "stop", &run]);
}

#[test]
fn a_terminal_larger_than_a_run_may_be_starts_and_attaches_at_the_limits() {
    let e = Env::new();
    e.ok(&["session", "list"]); // the server, with the shims on its PATH
    let screen_size = |run: &str| {
        let (status, v) = common::call_as(
            &e.h.socket(),
            Some(&e.h.owner_token()),
            "GET",
            &format!("/v1/m/sessions/runs/{run}/screen"),
            None,
        );
        assert_eq!(status, 200, "{v}");
        (
            v["size"]["rows"].as_u64().unwrap(),
            v["size"]["cols"].as_u64().unwrap(),
        )
    };
    let home = e.h.path().to_str().unwrap().to_string();
    // The start sends its PATH: the shims' one, as the operator's shell would have.
    let path = format!("PATH={}", e.path_var);
    let mut t = common::pty::Term::spawn(
        "/usr/bin/env",
        &[
            &path,
            env!("CARGO_BIN_EXE_proctor"),
            "--home",
            &home,
            "session",
            "start",
            "--json",
            "--tool",
            "claude",
            "--transport",
            "pty",
        ],
        600,
        1200,
    );
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    let out = t.text();
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    let run = v["ref"].as_str().unwrap().to_string();
    assert_eq!(
        screen_size(&run),
        (500, 1000),
        "start sent the clamped size"
    );
    let (status, v) = common::call_as(
        &e.h.socket(),
        Some(&e.h.owner_token()),
        "POST",
        &format!("/v1/m/sessions/runs/{run}/resize"),
        Some(serde_json::json!({"rows": 24, "cols": 80})),
    );
    assert_eq!(status, 200, "{v}");
    let mut t = common::pty::Term::spawn(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &home, "session", "attach", &run],
        700,
        1300,
    );
    t.wait_for("fake Claude Code");
    assert_eq!(
        screen_size(&run),
        (500, 1000),
        "attach resized within the limits"
    );
    t.send(b"\x1c");
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    e.ok(&["session", "stop", &run]);
}

#[test]
fn without_transport_the_cli_and_the_api_start_a_pty_run_and_help_says_so() {
    let e = Env::new();
    let help = e.ok(&["session", "start", "--help"]);
    assert!(
        help.contains("[default: pty]"),
        "`--help` names the default: {help}"
    );
    // The CLI without --transport.
    let run = e.start(&["--tool", "claude"]);
    assert_eq!(e.show(&run)["transport"], "pty");
    e.ok(&["session", "stop", &run]);
    // The API without the field: the same default.
    let (status, v) = common::call_as(
        &e.h.socket(),
        Some(&e.h.owner_token()),
        "POST",
        "/v1/m/sessions/runs",
        Some(serde_json::json!({
            "tool": "codex",
            "workspace": e.ws.path().to_str().unwrap(),
        })),
    );
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["transport"], "pty", "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    e.ok(&["session", "stop", &run]);
}

/// Writes `script` as an executable named `claude` in `dir`: a stand-in tool for one test,
/// not the real one (nothing claims it is Claude Code).
fn install_claude(dir: &Path, script: &str) {
    let p = dir.join("claude");
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Env {
    /// Starts a PTY run of a `claude` that `install` writes into a folder put first on
    /// this environment's PATH; returns the run's ref and the folder (kept while it lives).
    fn start_stand_in(
        &mut self,
        install: fn(&Path),
        prompt: &[&str],
    ) -> (String, tempfile::TempDir) {
        let tool = tempfile::tempdir().unwrap();
        install(tool.path());
        self.path_var = format!("{}:{}", tool.path().display(), self.path_var);
        let mut args = vec![
            "session",
            "start",
            "--json",
            "--tool",
            "claude",
            "--transport",
            "pty",
        ];
        if !prompt.is_empty() {
            args.push("--");
            args.extend_from_slice(prompt);
        }
        let v = self.json(&args);
        (v["ref"].as_str().unwrap().to_string(), tool)
    }
}

/// A `claude` that draws with cursor movements in its PTY, as interactive tools do: a gap
/// made by "cursor forward", then a jump to row 5; it waits for one line, then exits 3.
fn cursor_claude(dir: &Path) {
    let script = "#!/bin/sh\n\
         PATH=/usr/bin:/bin\n\
         printf 'Welcome\\033[1Cto\\033[5;1HClaude \\033[1;31mCode\\033[0m v2\\r\\n'\n\
         read line\n\
         printf 'bye %s\\r\\n' \"$line\"\n\
         exit 3\n";
    install_claude(dir, script);
}

#[test]
fn a_pty_tail_shows_the_screen_as_lines_of_text() {
    let mut e = Env::new();
    let (run, _tool) = e.start_stand_in(cursor_claude, &[]);
    let out = e.tail_until(&run, "Code");
    // Words keep their spaces; lines end where the screen's rows end, blank rows included.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["Welcome to", "", "", "", "Claude Code v2"],
        "{out:?}"
    );
    // --color keeps the colours and attributes, as SGR the text module writes.
    let coloured = e.ok(&["session", "tail", &run, "--color"]);
    assert!(
        coloured.contains("\u{1b}[0;1;31mCode\u{1b}[0m"),
        "{coloured:?}"
    );
    // --raw is the child's bytes.
    let raw = e.run(&["session", "tail", &run, "--raw"]);
    assert!(
        String::from_utf8_lossy(&raw.stdout).contains("Welcome\u{1b}[1Cto\u{1b}[5;1H"),
        "{raw:?}"
    );
    // --follow renders the same way and keeps the run's exit status.
    let follower = e
        .cmd()
        .args(["session", "tail", "--follow", &run])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    e.ok(&["session", "input", &run, "now"]);
    let out = follower.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "Welcome to", "{stdout:?}");
    assert_eq!(lines[4], "Claude Code v2", "{stdout:?}");
    assert!(lines.contains(&"bye now"), "{stdout:?}");
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
}

/// A login's environment for an XDG home (no --home, no PROCTOR_HOME): `HOME` and, when
/// given, `XDG_RUNTIME_DIR`; every other XDG variable unset, as sshd leaves them.
fn xdg_login(home: &Path, runtime: Option<&Path>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_proctor"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home);
    if let Some(r) = runtime {
        c.env("XDG_RUNTIME_DIR", r);
    }
    c.stdin(Stdio::null());
    c
}

#[test]
fn logins_with_and_without_xdg_runtime_dir_find_the_same_server() {
    let t = tempfile::Builder::new()
        .prefix("px")
        .tempdir_in("/tmp")
        .unwrap();
    let user_home = t.path().join("u");
    let runtime = t.path().join("xdgrun");
    for d in [&user_home, &runtime] {
        std::fs::create_dir(d).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // The first login has XDG_RUNTIME_DIR (pam_systemd sets it) and starts the server.
    let first = xdg_login(&user_home, Some(&runtime))
        .args(["server", "status", "--json"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1), "no server yet");
    let out = xdg_login(&user_home, Some(&runtime))
        .args(["serve"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let status = |rt: Option<&Path>| -> Value {
        let out = xdg_login(&user_home, rt)
            .args(["server", "status", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "server status from a login (XDG_RUNTIME_DIR {rt:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let a = status(Some(&runtime));
    // The second login (sshd with `UsePAM no`) has no XDG_RUNTIME_DIR.
    let b = status(None);
    let stop = || {
        let _ = xdg_login(&user_home, None)
            .args(["server", "stop"])
            .output();
    };
    if a["pid"] != b["pid"] || a["socket"] != b["socket"] {
        stop();
        panic!("two logins, two servers: {a} / {b}");
    }
    // A verb that needs the server works from the second login too.
    let out = xdg_login(&user_home, None)
        .args(["token", "list"])
        .output()
        .unwrap();
    stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `proctor home` says where the socket is, the same for both logins.
    let home_a = xdg_login(&user_home, Some(&runtime))
        .args(["home", "--json"])
        .output()
        .unwrap();
    let home_b = xdg_login(&user_home, None)
        .args(["home", "--json"])
        .output()
        .unwrap();
    let va: Value = serde_json::from_slice(&home_a.stdout).unwrap();
    let vb: Value = serde_json::from_slice(&home_b.stdout).unwrap();
    assert_eq!(va["socket"], vb["socket"], "{va} / {vb}");
    assert_eq!(va["socket"], a["socket"], "{va} / {a}");
}

#[test]
fn a_live_server_whose_socket_is_gone_is_named_with_its_pid_and_socket() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let pid = h.server_pid().unwrap();
    std::fs::remove_file(h.socket()).unwrap();
    let out = h.run(&["token", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    assert!(
        err.contains(&h.socket().display().to_string()),
        "names the socket: {err}"
    );
    assert!(
        err.contains(&format!("kill {pid}")),
        "names the remedy: {err}"
    );
    assert!(common::alive(pid), "the server is left alone");
    // SAFETY: plain kill(2) of the server this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

#[test]
fn tail_follow_on_a_terminal_shows_the_live_screen_then_the_final_one_once() {
    let mut e = Env::new();
    let (run, _tool) = e.start_stand_in(cursor_claude, &[]);
    e.tail_until(&run, "Code");
    let mut t = common::pty::Term::proctor(e.h.path(), &["session", "tail", "--follow", &run]);
    // While the run is live, its screen is shown under a header, before anything is final.
    t.wait_for("live screen");
    t.wait_for("Claude Code v2");
    e.ok(&["session", "input", &run, "now"]);
    assert_eq!(t.exit_code(), 3, "{}", t.text());
    // What a person sees at the end: the final screen once, the live view gone.
    let mut vt = vt100::Parser::new(
        std::num::NonZeroU16::new(50).unwrap(),
        std::num::NonZeroU16::new(160).unwrap(),
        0,
    );
    vt.process(t.text().as_bytes());
    let seen = vt.screen().contents();
    let lines: Vec<&str> = seen.lines().map(str::trim_end).collect();
    assert!(!seen.contains("live screen"), "{seen}");
    assert_eq!(
        lines.iter().filter(|l| **l == "Welcome to").count(),
        1,
        "{seen}"
    );
    assert_eq!(
        lines.iter().filter(|l| **l == "bye now").count(),
        1,
        "{seen}"
    );
    let at = lines.iter().position(|l| *l == "Welcome to").unwrap();
    assert_eq!(lines[at + 4], "Claude Code v2", "{seen}");
    assert!(seen.contains(&format!("[{run} exited: code 3]")), "{seen}");
}

#[test]
fn a_ledger_writer_listening_elsewhere_is_named_and_no_second_server_starts() {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let h = TestHome::new();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(h.path().join("data"))
        .unwrap();
    // This test stands in for a server whose socket is somewhere this login does not look:
    // it holds the ledger's write lock and listens on another socket.
    let ledger = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .append(true)
        .mode(0o600)
        .open(h.ledger())
        .unwrap();
    ledger.lock().unwrap();
    let elsewhere = tempfile::Builder::new()
        .prefix("pel")
        .tempdir_in("/tmp")
        .unwrap();
    let other = elsewhere.path().join("server.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&other).unwrap();
    let out = h.run(&["token", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let me = std::process::id();
    assert!(err.contains(&format!("pid {me}")), "{err}");
    assert!(err.contains(&other.display().to_string()), "{err}");
    assert!(err.contains(&h.socket().display().to_string()), "{err}");
    assert!(err.contains(&format!("kill {me}")), "{err}");
    // No server was started to fail on the lock.
    assert!(!h.path().join("state/server.log").exists(), "{err}");
    drop(ledger);
}

/// A `claude` that starts as interactive tools do: it draws a banner, switches its terminal
/// to raw mode with TCSAFLUSH (which discards keys typed before it was up), draws its
/// prompt, then reads keys until Enter, twice.
fn raw_mode_claude(dir: &Path) {
    let script = r"#!/usr/bin/python3
import os, termios, tty
os.write(1, b'Raw Claude v1\r\n')
tty.setraw(0, termios.TCSAFLUSH)
for turn in (1, 2):
    os.write(1, b'> ')
    line = b''
    while True:
        c = os.read(0, 1)
        if not c or c == b'\r':
            break
        line += c
    os.write(1, b'turn %d: %s\r\n' % (turn, line))
";
    install_claude(dir, script);
}

#[test]
fn a_pty_runs_first_prompt_is_typed_once_the_tool_is_up_then_submitted() {
    let mut e = Env::new();
    let (run, _tool) = e.start_stand_in(raw_mode_claude, &["fix", "the", "lexer"]);
    // Typed after the tool switched to raw mode (not discarded), then Enter: one turn.
    let out = e.tail_until(&run, "turn 1:");
    assert!(out.contains("turn 1: fix the lexer"), "{out:?}");
    // What is typed next is a turn of its own, not joined onto the first.
    e.ok(&["session", "input", &run, "and the parser"]);
    let out = e.tail_until(&run, "turn 2:");
    assert!(out.contains("turn 2: and the parser"), "{out:?}");
}

#[test]
fn an_unknown_state_is_a_usage_error_naming_the_states_and_help_lists_them() {
    let e = Env::new();
    let out = e.run(&["session", "list", "--state", "runing"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "no list for a bad state: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for st in [
        "starting",
        "running",
        "idle",
        "stopped",
        "failed",
        "lost",
        "cleaned",
        "recovering",
    ] {
        assert!(err.contains(st), "{st} missing from {err}");
    }
    let help = e.ok(&["session", "list", "--help"]);
    assert!(
        help.contains("possible values") && help.contains("recovering"),
        "{help}"
    );
    // A valid state still lists.
    let v: Value =
        serde_json::from_str(&e.ok(&["session", "list", "--state", "running", "--json"])).unwrap();
    assert!(v.is_object(), "{v}");
}

#[test]
fn an_unknown_run_says_how_to_list_runs() {
    let e = Env::new();
    for verb in ["show", "stop", "events"] {
        let out = e.run(&["session", verb, "run-9999"]);
        assert_eq!(out.status.code(), Some(1), "{verb}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("run-9999"), "{verb}: {err}");
        assert!(err.contains("proctor session list"), "{verb}: {err}");
    }
}

/// The threads of the server process, from `/proc`.
fn threads_of(pid: i32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_servers_threads_do_not_grow_with_its_runs() {
    // Issue 17 §2: one event loop for every run. Before it, each PTY run held four threads
    // (its reader, its screen, its waiter and the manager's watcher): 24 more runs were 96
    // more threads. A few may come and go with requests (the runtimes' blocking pools).
    let e = Env::new();
    let first = e.start(&["--tool", "claude", "--name", "one"]);
    e.tail_until(&first, ">");
    let pid = e.h.server_pid().unwrap();
    let with_one = threads_of(pid);
    // Started 8 at a time, as a script or the factory would: concurrent requests grow the
    // server's pool of request threads.
    let mut runs = Vec::new();
    for batch in 0..3 {
        let started: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let e = &e;
                    s.spawn(move || {
                        e.start(&["--tool", "claude", "--name", &format!("idle {batch}.{i}")])
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        runs.extend(started);
    }
    for r in &runs {
        e.tail_until(r, ">");
    }
    // Concurrent requests may add request threads for a while (18 here, with 9 for one run):
    // what must not grow is what the runs themselves hold.
    let with_many = threads_of(pid);
    // Once the burst of starts is over, the request threads it made leave: idle, 25 runs
    // hold no more threads than one did (the goal's "no more than with one"). Before, the
    // rigs' ticker woke an idle request thread every second, so they never timed out.
    let mut settled = with_many;
    for _ in 0..100 {
        settled = threads_of(pid);
        if settled <= with_one {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        settled <= with_one,
        "{with_one} threads with one run, {with_many} just after starting 24 more, still \
         {settled} after 20 s idle"
    );
    // And they all still answer: input reaches the last one, its end is recorded.
    let last = runs.last().unwrap();
    e.ok(&["session", "stop", last]);
    let v = e.json(&["session", "show", last, "--json"]);
    assert_eq!(v["state"], "stopped", "{v}");
}

/// The context switches of the server's thread named `name` (`/proc/PID/task/*/comm`).
fn switches_of_thread(pid: i32, name: &str) -> Option<u64> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let dir = t.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim() != name {
            continue;
        }
        let st = std::fs::read_to_string(dir.join("status")).ok()?;
        let mut n = 0;
        for l in st.lines() {
            if let Some(v) = l
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                n += v.trim().parse::<u64>().ok()?;
            }
        }
        return Some(n);
    }
    None
}

#[test]
fn idle_runs_in_cgroups_are_not_scanned_on_a_clock() {
    // Issue 17: the keeper scanned every process on the machine and every run's cgroup
    // members every 200 ms: with 1,000 idle runs, a quarter of a core. Under cgroups the
    // kernel attributes a run's processes whenever asked; the keeper only reaps adopted
    // zombies, when a child's exit is signalled. Counted in wakeups, not in time.
    let e = Env::new();
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(e.start(&["--tool", "claude", "--name", &format!("idle {i}")]));
    }
    for r in &runs {
        e.tail_until(r, ">");
    }
    let v = e.json(&["session", "show", &runs[0], "--json"]);
    if v["hold"]["mechanism"] != "cgroup" {
        eprintln!("NOT PROVEN here: no cgroup holds the runs ({v}); the keeper scans on the clock");
        return;
    }
    let pid = e.h.server_pid().unwrap();
    let before = switches_of_thread(pid, "run-keeper").expect("the keeper thread");
    std::thread::sleep(Duration::from_secs(3));
    let idle = switches_of_thread(pid, "run-keeper").unwrap() - before;
    assert!(
        idle <= 3,
        "the keeper woke {idle} times in 3 s with 4 idle runs"
    );
    // A child's exit still wakes it: a stopped run's end is recorded, its cgroup emptied.
    e.ok(&["session", "stop", &runs[0]]);
    let v = e.json(&["session", "show", &runs[0], "--json"]);
    assert_eq!(v["state"], "stopped", "{v}");
}

#[test]
fn a_server_started_under_a_low_descriptor_limit_still_holds_many_runs() {
    // Each run holds several descriptors (its PTY master and two duplicates, a pidfd, its
    // transcript). Under a soft limit of 96, as a client started from a restricted shell
    // would pass on, the 12th run or so failed with EMFILE; the server raises its soft limit
    // to the hard one.
    use std::os::unix::process::CommandExt;
    let e = Env::new();
    let mut cmd = e.cmd();
    cmd.args([
        "session", "start", "--json", "--tool", "claude", "--name", "first",
    ])
    .stdin(Stdio::null());
    // SAFETY: setrlimit in the child before exec (a plain system call).
    unsafe {
        cmd.pre_exec(|| {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            lim.rlim_cur = 96;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = e.h.server_pid().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        soft > 96,
        "the server kept the client's soft limit: {limits}"
    );
    let runs: Vec<String> = (0..30)
        .map(|i| e.start(&["--tool", "claude", "--name", &format!("r{i}")]))
        .collect();
    for r in &runs {
        e.tail_until(r, ">");
    }
}

#[test]
fn the_servers_threads_do_not_grow_with_its_stdio_runs() {
    // Issue 17 §2 for pipe runs: a stdio run's protocol is followed by a task on the event
    // loop, its lines handled on the loop's blocking pool. Before, each held a thread of its
    // own (`watch-run-NNNN`): 24 more runs were 24 more threads (measured: 10 with one run,
    // 35 with 25); after, 10 and 12 (the loop's blocking pool, whose threads end when idle).
    let e = Env::new();
    let first = e.start(&[
        "--transport",
        "pipe",
        "--tool",
        "claude",
        "--name",
        "one",
        "--",
        "hello",
    ]);
    e.tail_until(&first, "demo reply #1");
    e.wait_state(&first, &["idle"]);
    let pid = e.h.server_pid().unwrap();
    let with_one = threads_of(pid);
    let mut runs = Vec::new();
    for i in 0..24 {
        // The three stdio protocols: claude's stream-json, codex's app-server, ACP.
        let tool = ["claude", "codex", "gemini"][i % 3];
        let name = format!("idle {i}");
        runs.push(e.start(&[
            "--transport",
            "pipe",
            "--tool",
            tool,
            "--name",
            &name,
            "--",
            "hello",
        ]));
    }
    for r in &runs {
        e.tail_until(r, "demo reply #1");
        e.wait_state(r, &["idle"]);
    }
    let with_many = threads_of(pid);
    eprintln!("{with_one} threads with one stdio run, {with_many} with 25");
    assert!(
        with_many <= with_one + 6,
        "{with_one} threads with one stdio run, {with_many} with 25"
    );
    // And every one still speaks its protocol: a second turn reaches the first and the
    // last, their replies come back, and a stop records the end.
    for r in [&first, runs.last().unwrap()] {
        e.ok(&["session", "input", r, "second words"]);
        e.tail_until(r, "demo reply #2");
    }
    let last = runs.last().unwrap();
    e.ok(&["session", "stop", last]);
    let v = e.json(&["session", "show", last, "--json"]);
    assert_eq!(v["state"], "stopped", "{v}");
}
