//! The cockpit end to end: the real binary in a real pseudo-terminal, its screen read
//! through vt100, against a real server on a temporary home with the demo fakes on PATH.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{DemoServer, alive};
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::json;

const RUNS: &str = "/v1/m/sessions/runs";
// A demo brings up six sessions, a factory run, a rig and an intent: on a loaded 2-core CI machine
// (debug build) that took more than 20 s once (ci34, with a release test run alongside).
const WAIT: Duration = Duration::from_secs(45);

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

/// The cockpit running in a PTY of ours.
struct Cockpit {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every byte the cockpit wrote to its terminal.
    raw: Arc<Mutex<Vec<u8>>>,
    size: (u16, u16),
}

impl Cockpit {
    fn open(s: &DemoServer, rows: u16, cols: u16, term: &str) -> Cockpit {
        Cockpit::open_with(s, rows, cols, term, &[])
    }

    fn open_with(
        s: &DemoServer,
        rows: u16,
        cols: u16,
        term: &str,
        env: &[(&str, &str)],
    ) -> Cockpit {
        let mut path = s.shims.as_os_str().to_owned();
        path.push(":/usr/local/bin:/usr/bin:/bin");
        let mut all: Vec<(&str, &str)> = vec![("PATH", path.to_str().unwrap())];
        all.extend_from_slice(env);
        Cockpit::spawn_in(
            &["--home", s.home.path().to_str().unwrap()],
            rows,
            cols,
            term,
            &all,
            None,
        )
    }

    fn spawn(args: &[&str], rows: u16, cols: u16, term: &str, env: &[(&str, &str)]) -> Cockpit {
        Cockpit::spawn_in(args, rows, cols, term, env, None)
    }

    /// `proctor args…` in a PTY of `rows`×`cols` with `TERM=term` and `env`, in `cwd` when
    /// given, without the caller's PROCTOR_HOME, PROCTOR_TOKEN and NO_COLOR.
    fn spawn_in(
        args: &[&str],
        rows: u16,
        cols: u16,
        term: &str,
        env: &[(&str, &str)],
        cwd: Option<&std::path::Path>,
    ) -> Cockpit {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_proctor"));
        cmd.args(args);
        if let Some(d) = cwd {
            cmd.cwd(d);
        }
        cmd.env_remove("PROCTOR_HOME");
        cmd.env_remove("PROCTOR_TOKEN");
        cmd.env_remove("NO_COLOR");
        cmd.env("TERM", term);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let sink = screen.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let raw_sink = raw.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        raw_sink.lock().unwrap().extend_from_slice(&buf[..n]);
                        sink.lock().unwrap().process(&buf[..n]);
                    }
                }
            }
        });
        let writer = pair.master.take_writer().unwrap();
        Cockpit {
            master: pair.master,
            writer,
            child,
            screen,
            raw,
            size: (rows, cols),
        }
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Waits until the screen satisfies `pred`; panics with the screen after 20 s.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.text();
            if pred(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    fn resize(&mut self, rows: u16, cols: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        self.screen.lock().unwrap().set_size(nz(rows), nz(cols));
        self.size = (rows, cols);
    }

    /// Waits for the process to end; returns its exit code.
    fn exit_code(&mut self) -> u32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.exit_code();
            }
            assert!(
                Instant::now() < deadline,
                "the cockpit did not exit; screen:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> i32 {
        self.child.process_id().unwrap() as i32
    }

    /// The terminal was given back: normal screen, cursor shown. The process may have exited
    /// a moment before its last bytes reached our parser (a reader thread copies them), so
    /// this waits for them, up to the usual deadline.
    fn assert_restored(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            {
                let p = self.screen.lock().unwrap();
                let s = p.screen();
                if !s.alternate_screen() && !s.hide_cursor() && !s.bracketed_paste() {
                    return;
                }
                if Instant::now() >= deadline {
                    assert!(!s.alternate_screen(), "still on the alternate screen");
                    assert!(!s.hide_cursor(), "the cursor is still hidden");
                    assert!(!s.bracketed_paste(), "bracketed paste is still on");
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cockpit {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

fn start(s: &DemoServer, body: serde_json::Value) -> String {
    let v = s.expect(201, "POST", RUNS, Some(body));
    v["ref"].as_str().unwrap().to_string()
}

/// The size the server's PTY of `run` has.
fn pty_size(s: &DemoServer, run: &str) -> (u16, u16) {
    let v = s.expect(200, "GET", &s.run_path(run, "/screen"), None);
    (
        v["size"]["rows"].as_u64().unwrap() as u16,
        v["size"]["cols"].as_u64().unwrap() as u16,
    )
}

fn wait_pty_size(s: &DemoServer, run: &str, want: (u16, u16)) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = pty_size(s, run);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the PTY of {run} is {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live pane's inner size (rows, cols) for a screen, as the cockpit lays it out with
/// `runs` sessions.
fn live_inner(rows: u16, cols: u16, zoomed: bool, runs: u16) -> (u16, u16) {
    use proctor::tui::ui::{inner, layout};
    let a = layout(
        ratatui::layout::Rect::new(0, 0, cols, rows),
        zoomed,
        proctor::tui::app::Tab::Sessions,
        runs,
    );
    let r = if zoomed { a.live } else { inner(a.live) };
    (r.height, r.width)
}

#[test]
fn refuses_without_a_terminal() {
    let s = DemoServer::start(&[]);
    let out = s
        .home
        .cmd()
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("proctor session list"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn open_list_focus_zoom_and_resize() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let pty = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws, "name": "tests", "rows": 10, "cols": 40}),
    );
    // Its own SessionStart hook names its session first: the pipe run is the newer one.
    s.wait_run(&pty, "its session named", |v| {
        v["conversation_id"].is_string()
    });
    let pipe = start(
        &s,
        json!({"transport": "pipe", "tool": "codex", "workspace": ws, "prompt": "hello from e2e"}),
    );
    s.wait_run(&pipe, "the first turn", |v| v["state"] == "idle");
    let mut c = Cockpit::open(&s, 30, 100, "xterm-256color");
    // Open and list: both runs, their states with a source (the idle pipe run waits for its
    // next turn: issue 13 §5), the demo label.
    let t = c.wait("the list", |t| {
        t.contains(&pty) && t.contains(&pipe) && t.contains("waiting for you · protocol")
    });
    assert!(t.contains("demo"), "{t}");
    assert!(t.contains("role admin") || t.contains("admin"), "{t}");
    // Focus: the newest run (the pipe one) is first; its decoded output shows.
    c.wait("the pipe run's words", |t| {
        t.contains("demo reply #1") && t.contains("hello from e2e")
    });
    c.send(b"j");
    c.wait("the PTY run in the live pane", |t| {
        t.contains("fake Claude Code") && t.contains(&format!("Live {pty}"))
    });
    // Focused, the PTY takes the pane's inner size.
    wait_pty_size(&s, &pty, live_inner(30, 100, false, 2));
    // Zoom: the live pane takes the screen, the PTY follows; and back.
    c.send(b"\r");
    c.wait("zoomed", |t| {
        t.contains("zoomed") && !t.contains("Sessions")
    });
    wait_pty_size(&s, &pty, live_inner(30, 100, true, 2));
    c.send(b"\r");
    c.wait("unzoomed", |t| t.contains("Sessions"));
    wait_pty_size(&s, &pty, live_inner(30, 100, false, 2));
    // Resize the operator's terminal: the layout and the PTY follow.
    c.resize(48, 160);
    c.wait("the wide layout", |t| t.contains("proctor · "));
    wait_pty_size(&s, &pty, live_inner(48, 160, false, 2));
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    c.assert_restored();
}

#[test]
fn attach_type_and_come_back_with_the_prefix() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let mut c = Cockpit::open(&s, 30, 100, "xterm-256color");
    c.wait("the session's screen", |t| t.contains("fake Claude Code"));
    c.send(b"a");
    c.wait("attached", |t| t.contains("ATTACHED"));
    c.send(b"typed through the cockpit\r");
    let t = c.wait("the echo and the reply", |t| {
        t.contains("you said \"typed through the cockpit\"")
    });
    assert!(t.contains("ATTACHED"), "still attached: {t}");
    // The default prefix, ctrl-\, returns; the session keeps running.
    c.send(b"\x1c");
    c.wait("back in the cockpit", |t| {
        t.contains("back in the cockpit") && !t.contains("ATTACHED")
    });
    // Keys are the cockpit's again: `j`/`k` do not reach the session.
    c.send(b"?");
    c.wait("help", |t| t.contains("Keys"));
    c.send(b"\x1b");
    c.wait("help closed", |t| !t.contains("Keys"));
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["state"], "running", "{v}");
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    c.assert_restored();
}

#[test]
fn quit_leaves_server_and_sessions_running_and_reopening_shows_the_same_screen() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let mut c = Cockpit::open(&s, 30, 100, "screen-256color");
    c.wait("the session's screen", |t| t.contains("fake Claude Code"));
    c.send(b"a");
    c.wait("attached", |t| t.contains("ATTACHED"));
    c.send(b"remember me\r");
    c.wait("the reply", |t| t.contains("you said \"remember me\""));
    c.send(b"\x1c");
    c.wait("detached", |t| !t.contains("ATTACHED"));
    let before = c.text();
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    c.assert_restored();
    // The server and the session outlive the cockpit.
    let pid = s.home.server_pid().unwrap();
    assert!(alive(pid), "the server still runs");
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["state"], "running", "{v}");
    // Reopen: the same session screen.
    let c2 = Cockpit::open(&s, 30, 100, "tmux-256color");
    let after = c2.wait("the same screen", |t| {
        t.contains("you said \"remember me\"")
    });
    let live_rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.contains("fake Claude Code") || l.contains("you said"))
            // The pane's border shows the focus, which a new cockpit does not keep.
            .map(|l| {
                let inner: String = l.chars().skip(1).collect();
                inner
                    .trim_end()
                    .trim_end_matches(['│', '┃'])
                    .trim()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(live_rows(&before), live_rows(&after));
}

#[test]
fn sigterm_and_sighup_restore_the_terminal_and_leave_sessions_running() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let mut c = Cockpit::open(&s, 24, 80, "xterm-256color");
        c.wait("the session's screen", |t| t.contains("fake Claude Code"));
        // SAFETY: plain kill(2) on our child.
        unsafe { libc::kill(c.pid(), sig) };
        c.exit_code();
        c.assert_restored();
        let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
        assert_eq!(v["state"], "running", "signal {sig}: {v}");
    }
}

#[test]
fn a_read_only_token_is_shown_and_never_writes() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws, "rows": 10, "cols": 40}),
    );
    let tok = s.expect(
        201,
        "POST",
        "/v1/tokens",
        Some(json!({"name": "viewer", "role": "read"})),
    );
    let secret = tok["secret"].as_str().unwrap().to_string();
    // The tool's own SessionStart hook names its session (its own events, not the reader's):
    // recorded before the ledger is compared.
    s.wait_run(&run, "its session named", |v| {
        v["conversation_id"].is_string()
    });
    let ledger_before = std::fs::read_to_string(s.home.ledger()).unwrap();
    let mut c = Cockpit::open_with(&s, 30, 100, "xterm-256color", &[("PROCTOR_TOKEN", &secret)]);
    c.wait("read-only", |t| {
        t.contains("read-only") && t.contains("fake Claude Code")
    });
    for (key, action) in [("s", "stop"), ("a", "attach"), ("R", "rename")] {
        c.send(key.as_bytes());
        c.wait(action, |t| {
            t.contains(&format!("{action} needs the write role"))
        });
    }
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    // Nothing was attempted: no resize (the PTY keeps its size), no write recorded.
    assert_eq!(pty_size(&s, &run), (10, 40));
    let ledger_after = std::fs::read_to_string(s.home.ledger()).unwrap();
    let new: Vec<&str> = ledger_after[ledger_before.len()..].lines().collect();
    assert!(
        new.iter().all(|l| !l.contains("\"sessions.run.")),
        "a read token changed a run: {new:?}"
    );
}

/// tmux on its own socket (inside the test's home), killed when dropped.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new("tmux");
        c.arg("-S").arg(&self.socket).args(["-f", "/dev/null"]);
        c
    }

    fn capture(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "ck"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "ck"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }

    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.capture();
            if pred(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} in tmux; the pane:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

#[test]
fn inside_tmux_as_a_person_would() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED inside_tmux_as_a_person_would: tmux is not installed");
        return;
    }
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let tmux = Tmux {
        socket: s.home.path().join("tmux.sock"),
    };
    let script = format!(
        "'{}' --home '{}'; echo COCKPIT-EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_proctor"),
        s.home.path().display()
    );
    let st = tmux
        .cmd()
        .args(["new-session", "-d", "-s", "ck", "-x", "100", "-y", "30"])
        .arg(&script)
        .env_remove("PROCTOR_HOME")
        .env_remove("PROCTOR_TOKEN")
        .env_remove("TMUX")
        .status()
        .unwrap();
    assert!(st.success());
    tmux.wait("the list and the live terminal", |t| {
        t.contains(&run) && t.contains("fake Claude Code")
    });
    tmux.keys(&["a"]);
    tmux.wait("attached", |t| t.contains("ATTACHED"));
    tmux.keys(&["-l", "typed in tmux"]);
    tmux.keys(&["Enter"]);
    tmux.wait("the echo", |t| t.contains("you said \"typed in tmux\""));
    tmux.keys(&["C-\\"]);
    tmux.wait("back", |t| !t.contains("ATTACHED"));
    tmux.keys(&["Enter"]);
    tmux.wait("zoomed", |t| t.contains("zoomed"));
    tmux.keys(&["Escape"]);
    tmux.wait("unzoomed", |t| t.contains("Sessions"));
    tmux.keys(&["q"]);
    tmux.wait("a clean exit", |t| t.contains("COCKPIT-EXIT=0"));
    let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(v["state"], "running", "{v}");
}

/// A git repository with one commit, registered as a workspace whose check policy (one
/// trivial check) is approved; a worktree run of it, stopped, with a change; its candidate
/// bound and checked. Returns (run, candidate, the repository's tempdir).
fn bound_worktree_run(s: &DemoServer) -> (String, String, tempfile::TempDir) {
    const WS: &str = "/v1/m/sessions/workspaces";
    const EV: &str = "/v1/m/evidence";
    let repo = tempfile::Builder::new()
        .prefix("cockpit-repo")
        .tempdir_in("/tmp")
        .unwrap();
    let git = proctor::git::Git::new(repo.path())
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@example.invalid");
    git.run(&["init", "-q", "-b", "main"]).unwrap();
    std::fs::write(repo.path().join("lexer.txt"), "escaped quotes: broken\n").unwrap();
    git.run(&["add", "-A"]).unwrap();
    git.run(&["commit", "-q", "-m", "base"]).unwrap();
    let path = std::fs::canonicalize(repo.path()).unwrap();
    let (code, v) = s.call("POST", WS, Some(json!({"path": path.to_str().unwrap()})));
    assert!(code == 200 || code == 201, "{code} {v}");
    let ws = v["ref"].as_str().unwrap().to_string();
    let policy =
        "[[check]]\nname = \"fixed\"\nargv = [\"grep\", \"-q\", \"fixed\", \"lexer.txt\"]\n";
    s.expect(
        200,
        "PUT",
        &format!("{WS}/{ws}/policy"),
        Some(json!({"policy": policy})),
    );
    s.expect(
        200,
        "POST",
        &format!("{WS}/{ws}/policy/approve"),
        Some(json!({"sha256": proctor::evidence::policy::digest(policy)})),
    );
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true, "name": "lexer fix"})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    let worktree = std::path::PathBuf::from(v["workspace"].as_str().unwrap());
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    std::fs::write(worktree.join("lexer.txt"), "escaped quotes: fixed\n").unwrap();
    let v = s.expect(
        201,
        "POST",
        &format!("{EV}/candidates"),
        Some(json!({"run": run})),
    );
    let cand = v["id"].as_str().unwrap().to_string();
    s.expect(201, "POST", &format!("{EV}/candidates/{cand}/checks"), None);
    (run, cand, repo)
}

#[test]
fn gate_view_and_receipts_pane_of_a_worktree_run_with_a_bound_candidate() {
    let s = DemoServer::start(&[]);
    let (run, cand, _repo) = bound_worktree_run(&s);
    let branch = format!("proctor/{run}");
    let mut c = Cockpit::open(&s, 40, 160, "xterm-256color");
    // The list: the run's worktree branch and its candidate's gate, awaiting a person.
    c.wait("the worktree run, its branch and its gate", |t| {
        t.contains(&run) && t.contains(&format!("⎇ {branch}")) && t.contains("awaiting")
    });
    // The gate view: prerequisites → task → expected evidence → human decision.
    c.send(b"2");
    let t = c.wait("the gate view", |t| {
        t.contains(&format!("Gate {cand} · {run} ⎇ {branch}")) && t.contains("AWAITING HUMAN")
    });
    for node in [
        "prerequisites",
        "run the policy's checks on these bytes",
        "expected evidence, one per check",
        "a person authorises publication of these exact bytes",
    ] {
        assert!(t.contains(node), "{node}: {t}");
    }
    // (The sentence may wrap between its words.)
    assert!(
        t.contains("not acceptance") || (t.contains("This is not") && t.contains("acceptance")),
        "not acceptance: {t}"
    );
    // The receipts: the binding and the evidence attempt, each verified by the server.
    c.send(b"4");
    let t = c.wait("both receipts, verified", |t| {
        t.contains("candidate.bound")
            && t.contains("evidence.attempt")
            && t.matches("holds").count() >= 2
            && !t.contains("verifying…")
    });
    assert!(t.contains(&cand), "{t}");
    // The selected (newest) receipt's checks, one by one.
    assert!(t.contains("the server's verifier"), "{t}");
    // The worktree moves on: the receipt of the binding no longer holds; `v` says so.
    let wt = s.expect(200, "GET", &s.run_path(&run, ""), None);
    let path = wt["worktree"]["path"].as_str().unwrap().to_string();
    std::fs::write(std::path::Path::new(&path).join("lexer.txt"), "changed\n").unwrap();
    c.send(b"v");
    c.wait("a receipt that fails now", |t| t.contains("fails"));
    // And the gate says the evidence is stale.
    c.send(b"2");
    c.wait("the stale gate", |t| t.contains("EVIDENCE STALE"));
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    c.assert_restored();
}

/// The approval dialog in a real terminal, on `proctor demo`'s home (a worktree run, its
/// candidate checked, an intent awaiting authority) with a publish key: the terminal rules
/// pass, a paste and an arrow key are ignored, the typed revision and the passphrase go to the
/// shared flow, which mints and spends the authorisation; the demo forge opens the pull
/// request, and the outcome and its receipt are shown (the whole demo path, from the demo key
/// offer on, is tests/demo_publish.rs).
#[test]
fn the_approval_dialog_in_a_real_terminal_on_the_demo() {
    const PASS: &str = "correct horse battery staple";
    let h = common::TestHome::new();
    let out = h.run(&["demo", "--no-cockpit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home = proctor::home::Home::resolve(Some(h.path())).unwrap();
    proctor::authority::keys::generate(
        &proctor::authority::keys::default_key_path(&home),
        PASS.as_bytes(),
    )
    .unwrap();
    // Registration is an authority route: the binary at a terminal, as a person.
    let mut t = common::pty::Term::proctor(h.path(), &["key", "register"]);
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    drop(t);
    let s = DemoServer {
        shims: h.path().join("state/demo-shims"),
        token: h.owner_token(),
        home: h,
    };
    let v = s.expect(200, "GET", "/v1/m/publish/intents", None);
    let intent = &v["items"][0];
    assert_eq!(intent["state"], "awaiting_authority", "{v}");
    let rev = intent["revision"].as_str().unwrap().to_string();
    let mut c = Cockpit::open(&s, 40, 160, "xterm-256color");
    c.wait("the awaiting count", |t| t.contains("awaiting authority 1"));
    c.send(b"3");
    c.wait("the intent", |t| t.contains("AWAITING_AUTHORITY"));
    c.send(b"P");
    c.wait("the revision prompt", |t| {
        t.contains("Authorise publication int-0001") && t.contains("Revision: ▏")
    });
    // A bracketed paste of the very revision, and an arrow key: ignored.
    c.send(format!("\x1b[200~{rev}\x1b[201~").as_bytes());
    c.wait("the paste ignored", |t| {
        t.contains("paste is ignored here") && t.contains("Revision: ▏")
    });
    c.send(b"\x1b[D");
    c.send(rev.as_bytes());
    c.wait("the typed revision", |t| {
        t.contains(&format!("Revision: {rev}▏"))
    });
    c.send(b"\r");
    c.wait("the passphrase prompt", |t| {
        t.contains("Passphrase for the publish key: ▏")
    });
    c.send(PASS.as_bytes());
    let t = c.wait("the masked passphrase", |t| t.contains("(hidden)▏"));
    assert!(!t.contains(PASS) && !t.contains("correct"), "{t}");
    c.send(b"\r");
    let t = c.wait("the flow's end", |t| {
        t.contains("REFUSED (") || t.contains("PUBLISHED")
    });
    assert!(t.contains("PUBLISHED int-0001"), "{t}");
    assert!(t.contains("receipt ") && t.contains("rcpt-"), "{t}");
    // The authorisation was minted and spent exactly once, by the shared flow.
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert_eq!(
        ledger.matches("\"publish.authorisation.minted\"").count(),
        1
    );
    assert_eq!(ledger.matches("\"publish.authorisation.spent\"").count(), 1);
    c.send(b"\r");
    c.wait("back in the list", |t| t.contains("Publication intents"));
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    c.assert_restored();
}

#[test]
fn nothing_a_hostile_pty_child_writes_reaches_the_cockpits_terminal() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    // The server finds `claude` on its PATH at each start: this one is hostile. On `g` it
    // writes the clipboard, sets titles and asks the terminal for reports.
    let log = s.home.path().join("received");
    let script = format!(
        "#!/bin/sh\n\
         PATH=/usr/bin:/bin\n\
         stty raw -echo\n\
         printf 'hostile ready\\r\\n'\n\
         while :; do\n\
           c=$(dd bs=1 count=1 2>/dev/null | od -An -tx1)\n\
           [ -n \"$c\" ] || exit 0\n\
           echo \"$c\" >> '{}'\n\
           case \"$c\" in *67*)\n\
             printf '\\033]52;c;cHduZWQ=\\007\\033]2;agent title\\007\\033[6n\\033[c'\n\
             printf '\\033]11;?\\007\\033P$qm\\033\\\\after the queries\\r\\n';;\n\
           esac\n\
         done\n",
        log.display()
    );
    let shim = s.shims.join("claude");
    std::fs::remove_file(&shim).unwrap();
    std::fs::write(&shim, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws}),
    );
    let mut c = Cockpit::open(&s, 30, 100, "xterm-256color");
    c.wait("the session's screen", |t| t.contains("hostile ready"));
    c.send(b"a");
    c.wait("attached", |t| t.contains("ATTACHED"));
    let before = c.raw.lock().unwrap().len();
    c.send(b"g");
    c.wait("the hostile output drawn in the pane", |t| {
        t.contains("after the queries")
    });
    c.send(b"\x1c");
    c.wait("back in the cockpit", |t| !t.contains("ATTACHED"));
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
    let raw = c.raw.lock().unwrap()[before..].to_vec();
    let has = |needle: &[u8]| raw.windows(needle.len()).any(|w| w == needle);
    for (what, seq) in [
        ("the clipboard write", &b"\x1b]52"[..]),
        ("the title", b"agent title"),
        ("the cursor position query", b"\x1b[6n"),
        ("the device attributes query", b"\x1b[c"),
        ("the colour query", b"\x1b]11;?"),
        ("the DECRQSS query", b"\x1bP$q"),
    ] {
        assert!(
            !has(seq),
            "{what} reached the terminal: {:?}",
            String::from_utf8_lossy(&raw)
        );
    }
    let received = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        received.split_whitespace().collect::<Vec<_>>(),
        ["67"],
        "the child got the key typed and nothing else"
    );
}

/// The server of a demo home, stopped when dropped (a failing test leaves nothing running).
struct StopsDemo(std::path::PathBuf);

impl Drop for StopsDemo {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
                .arg("--home")
                .arg(&self.0)
                .args(["server", "stop"])
                .output();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `proctor demo` whose cockpit panics (a hidden test-only key): the terminal is given back
/// before the panic message is printed, and the demo's server is stopped and its throwaway
/// home removed all the same.
#[test]
fn a_panic_in_the_demos_cockpit_still_stops_its_server_and_removes_its_home() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cockpit::spawn(
        &["demo", "--test-panic-on-key=Z"],
        30,
        100,
        "xterm-256color",
        &[("TMPDIR", tmp.path().to_str().unwrap())],
    );
    c.wait("the demo's sessions", |t| t.contains("run-0006"));
    let homes: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("proctor-demo-")
        })
        .collect();
    assert_eq!(homes.len(), 1, "{homes:?}");
    let root = homes[0].clone();
    let _stop = StopsDemo(root.clone());
    let pid: i32 = std::fs::read_to_string(root.join("run/server.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "the demo's server {pid} runs");
    c.send(b"Z");
    assert_eq!(
        c.exit_code(),
        101,
        "a panic's exit code; screen:\n{}",
        c.text()
    );
    c.assert_restored();
    // The message comes after the terminal was given back (the alternate screen left). The
    // process may have exited a moment before its last bytes reached the reader thread:
    // wait for the stop's line, up to the usual deadline.
    let deadline = Instant::now() + WAIT;
    let after = loop {
        let raw = String::from_utf8_lossy(&c.raw.lock().unwrap()).into_owned();
        let left = raw
            .rfind("\x1b[?1049l")
            .expect("the alternate screen was left");
        let after = raw[left..].to_string();
        if after.contains("throwaway home removed") || Instant::now() >= deadline {
            break after;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        after.contains("panicked") && after.contains("test-panic-on-key"),
        "{after}"
    );
    assert!(
        after.contains("the demo's server was stopped and its throwaway home removed"),
        "{after}"
    );
    assert!(
        !root.exists(),
        "the throwaway home {} is left",
        root.display()
    );
    assert!(!alive(pid), "the demo's server {pid} is left running");
}

/// The new-session dialog with a first prompt, for the interactive form of every tool (their
/// fakes, in the server's PTY): the prompt reaches the tool as a submitted turn, and what the
/// person types next is a turn of its own, not appended to the first.
#[test]
fn a_new_pty_sessions_first_prompt_is_a_turn_for_every_tool() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let mut path = s.shims.as_os_str().to_owned();
    path.push(":/usr/local/bin:/usr/bin:/bin");
    let mut c = Cockpit::spawn_in(
        &["--home", s.home.path().to_str().unwrap()],
        40,
        120,
        "xterm-256color",
        &[("PATH", path.to_str().unwrap())],
        Some(std::path::Path::new(&ws)),
    );
    c.wait("the empty list", |t| t.contains("Sessions"));
    for (i, tool) in ["claude", "codex", "gemini", "grok", "opencode"]
        .into_iter()
        .enumerate()
    {
        c.send(b"n");
        c.wait("the new-session dialog", |t| t.contains("New session"));
        for _ in 0..i {
            c.send(b"\x1b[C");
        }
        c.wait("the profile", |t| t.contains(&format!("‹ {tool} ›")));
        c.send(b"\t\t\t");
        c.send(format!("first {tool}").as_bytes());
        c.wait("the typed prompt", |t| t.contains(&format!("first {tool}")));
        c.send(b"\r");
        let t = c.wait("the first turn answered", |t| {
            t.contains(&format!("demo reply #1: you said \"first {tool}\""))
        });
        assert!(!t.contains("New session"), "{t}");
        c.send(b"a");
        c.wait("attached", |t| t.contains("ATTACHED"));
        c.send(format!("second {tool}\r").as_bytes());
        let t = c.wait("the second turn", |t| t.contains("demo reply #2: you said"));
        assert!(
            t.contains(&format!("demo reply #2: you said \"second {tool}\"")),
            "typed input joined the first prompt: {t}"
        );
        c.send(b"\x1c");
        c.wait("back in the cockpit", |t| !t.contains("ATTACHED"));
    }
    // Five runs, one of each tool, each with two turns in its transcript of the screen.
    let v = s.expect(200, "GET", RUNS, None);
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 5, "{v}");
    for r in items {
        let run = r["ref"].as_str().unwrap();
        let screen = s.expect(200, "GET", &s.run_path(run, "/screen"), None);
        let text = screen.to_string();
        assert!(text.contains("demo reply #2"), "{run}: {text}");
    }
    c.send(b"q");
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn term_dumb_is_refused_with_a_pointer_to_session_list() {
    let s = DemoServer::start(&[]);
    let mut c = Cockpit::open(&s, 24, 80, "dumb");
    assert_eq!(c.exit_code(), 2, "{}", c.text());
    let t = c.wait("the refusal", |t| t.contains("session list"));
    assert!(
        t.contains("TERM=dumb") && t.contains("proctor session list"),
        "{t}"
    );
    assert!(!c.screen.lock().unwrap().screen().alternate_screen());
    // The demo too, before it sets anything up.
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Cockpit::spawn(
        &["demo"],
        24,
        80,
        "dumb",
        &[("TMPDIR", tmp.path().to_str().unwrap())],
    );
    assert_eq!(d.exit_code(), 2, "{}", d.text());
    let t = d.wait("the demo's refusal", |t| t.contains("session list"));
    assert!(t.contains("--no-cockpit"), "{t}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// Every character on the screen, with the ones that are not ASCII.
fn non_ascii(t: &str) -> Vec<char> {
    let mut v: Vec<char> = t.chars().filter(|c| !c.is_ascii()).collect();
    v.dedup();
    v
}

#[test]
fn term_linux_draws_ascii_borders_and_glyphs() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"tool": "claude", "transport": "pty", "workspace": ws, "name": "a long name to cut in the narrow list"}),
    );
    for (rows, cols) in [(24, 80), (40, 120)] {
        let mut c = Cockpit::open(&s, rows, cols, "linux");
        let t = c.wait("the list and the live terminal", |t| {
            t.contains(&run) && t.contains("fake Claude Code")
        });
        assert_eq!(non_ascii(&t), Vec::<char>::new(), "{cols}x{rows}:\n{t}");
        assert!(t.contains("+-") && t.contains('|'), "ASCII borders: {t}");
        for (open, what) in [
            (&b"?"[..], "Keys"),
            (b":", "Run an action"),
            (b"n", "New session"),
            (b"s", "Stop "),
            (b"/", "esc back"),
        ] {
            c.send(open);
            let t = c.wait(what, |t| t.contains(what));
            assert_eq!(
                non_ascii(&t),
                Vec::<char>::new(),
                "{what} {cols}x{rows}:\n{t}"
            );
            c.send(b"\x1b");
            c.wait("closed", |t| !t.contains(what));
        }
        c.send(b"q");
        assert_eq!(c.exit_code(), 0);
        c.assert_restored();
    }
}

/// The Activity view on the demo, in a real terminal: `7` shows the codex session's context
/// line and its tasks read from the fake's rollout; `/` searches its messages for a word its
/// transcript holds (any case), the hits are listed with their roles, and Enter shows a text.
#[test]
fn the_activity_view_and_a_message_search_on_the_demo() {
    let h = common::TestHome::new();
    let out = h.run(&["demo", "--no-cockpit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = DemoServer {
        shims: h.path().join("state/demo-shims"),
        token: h.owner_token(),
        home: h,
    };
    for (rows, cols) in [(24, 80), (48, 160)] {
        let mut c = Cockpit::open(&s, rows, cols, "xterm-256color");
        // Every demo session listed (a short screen shows some of them).
        c.wait("the list", |t| t.contains("Sessions 6"));
        // Focus the codex session: filter the list down to it.
        c.send(b"/explain\r");
        c.wait("the filtered list", |t| {
            t.contains("explain the failing") && !t.contains("release notes")
        });
        c.send(b"7");
        let t = c.wait("the context line", |t| {
            t.contains("Activity run-0003") && t.contains("context ") && t.contains("Tasks ")
        });
        assert!(t.contains("transcript read"), "{t}");
        // The fake's script ran shell commands: codex's rollout lists them as tasks.
        assert!(t.contains("cargo test --lib lexer"), "{t}");
        c.send(b"/");
        c.wait("the search prompt", |t| {
            t.contains("Search the messages of run-0003")
        });
        // Case-insensitive: the person's ask and the fake's reply both hold "failing".
        c.send(b"FAILING\r");
        let t = c.wait("the hits", |t| {
            t.contains("Search \"FAILING\": ") && t.contains("found") && t.contains("assistant")
        });
        assert!(t.contains("user"), "{t}");
        c.send(b"\r");
        c.wait("the message's text", |t| {
            t.contains("run-0003 · message ") && t.contains("the failing test")
        });
        c.send(b"\x1b");
        c.wait("the search again", |t| !t.contains("run-0003 · message "));
        c.send(b"\x1b");
        c.wait("the activity again", |t| {
            t.contains("Tasks ") && !t.contains("Search \"")
        });
        c.send(b"q");
        assert_eq!(c.exit_code(), 0);
        c.assert_restored();
    }
}
