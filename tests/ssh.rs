//! proctor over a real `sshd` on 127.0.0.1, as an operator uses it from wherever they are:
//! one login starts a PTY session, another login with a different environment (no
//! `XDG_RUNTIME_DIR`, as sshd with `UsePAM no` leaves it) tails it as readable text and opens
//! the cockpit with `ssh -t`; the connection is dropped, a new login finds the session still
//! running.
//!
//! The sshd is started by the test on a free port with its own host key and an authorized
//! key made by ssh-keygen in a temporary folder, as the current user. The test is skipped,
//! with a message, only when `/usr/sbin/sshd` is absent.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::sshd::{SSHD, Sshd, sh_quote, text};
use common::tmux::Tmux;
use serde_json::Value;

/// How long a wait may take before the test gives up (a hang, not a speed requirement).
const HANG: Duration = Duration::from_secs(60);
/// The operator's side: an XDG home (no --home), the provider fakes first on PATH.
struct Operator {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    xdg_runtime: PathBuf,
    shims: PathBuf,
}

impl Operator {
    fn new() -> Operator {
        let dir = tempfile::Builder::new()
            .prefix("pop")
            .tempdir_in("/tmp")
            .unwrap();
        let user_home = dir.path().join("u");
        let xdg_runtime = dir.path().join("xrt");
        let shims = dir.path().join("shims");
        use std::os::unix::fs::PermissionsExt;
        for d in [&user_home, &xdg_runtime, &shims] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        proctor::providers::fake::install_shims(&shims, Path::new(env!("CARGO_BIN_EXE_proctor")))
            .unwrap();
        Operator {
            _dir: dir,
            user_home,
            xdg_runtime,
            shims,
        }
    }

    /// The remote command line for `proctor ARGS`: the login's environment is the one sshd
    /// gives, with HOME and PATH set, and XDG_RUNTIME_DIR only when `with_runtime`.
    fn remote(&self, with_runtime: bool, args: &str) -> String {
        let path = format!(
            "{}:{}",
            self.shims.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let runtime = if with_runtime {
            format!(
                "XDG_RUNTIME_DIR={}",
                sh_quote(&self.xdg_runtime.display().to_string())
            )
        } else {
            String::new()
        };
        format!(
            "cd / && env -u XDG_RUNTIME_DIR -u PROCTOR_HOME -u PROCTOR_TOKEN HOME={} PATH={} {runtime} {} {args}",
            sh_quote(&self.user_home.display().to_string()),
            sh_quote(&path),
            sh_quote(env!("CARGO_BIN_EXE_proctor")),
        )
    }
}

/// The rows of a screen's text, trailing blanks and trailing blank rows dropped.
fn rows(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(|l| l.trim_end().to_string()).collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

#[test]
fn a_pty_session_over_ssh_tailed_and_watched_from_other_logins_survives_a_dropped_connection() {
    if !Path::new(SSHD).exists() {
        eprintln!("SKIPPED: {SSHD} is absent (install openssh-server to run the SSH test)");
        return;
    }
    let sshd = Sshd::start();
    let op = Operator::new();
    let stop_server = || {
        // Both logins' views, so a failure leaves no server behind whichever it found.
        for with_runtime in [false, true] {
            let _ = sshd.ssh(&[], &op.remote(with_runtime, "server stop"));
        }
    };
    let run_ok = |with_runtime: bool, args: &str| -> String {
        let out = sshd.ssh(&[], &op.remote(with_runtime, args));
        if !out.status.success() {
            stop_server();
            panic!("ssh … proctor {args}: {}", text(&out));
        }
        String::from_utf8_lossy(&out.stdout).to_string()
    };

    // Login 1 (it has XDG_RUNTIME_DIR) starts a PTY session backed by the fake claude.
    let v: Value = serde_json::from_str(&run_ok(
        true,
        "session start --json --tool claude --transport pty -- hello over ssh",
    ))
    .unwrap();
    assert_eq!(v["demo"], true, "the fakes back this run: {v}");
    let run = v["ref"].as_str().unwrap().to_string();

    // Login 2 has no XDG_RUNTIME_DIR; it finds the same server and tails the run as text.
    let deadline = Instant::now() + HANG;
    let tail = loop {
        let out = run_ok(false, &format!("session tail {run}"));
        if out.contains("demo reply #1") {
            break out;
        }
        assert!(Instant::now() < deadline, "no reply in the tail:\n{out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        tail.contains(r#"demo reply #1: you said "hello over ssh""#),
        "words keep their spaces: {tail:?}"
    );
    assert!(
        !tail.contains('\u{1b}') && !tail.contains('\r'),
        "text, not bytes: {tail:?}"
    );
    // The lines are the screen's rows, as the server's own emulator shows them.
    let home: Value = serde_json::from_str(&run_ok(false, "home --json")).unwrap();
    let socket = PathBuf::from(home["socket"].as_str().unwrap());
    let token = std::fs::read_to_string(op.user_home.join(".config/proctor/owner.token"))
        .unwrap()
        .trim()
        .to_string();
    let (status, screen) = common::call_as(
        &socket,
        Some(&token),
        "GET",
        &format!("/v1/m/sessions/runs/{run}/screen"),
        None,
    );
    assert_eq!(status, 200, "{screen}");
    assert_eq!(
        rows(&tail),
        rows(screen["text"].as_str().unwrap()),
        "tail {tail:?} / screen {screen}"
    );

    // Login 3 opens the cockpit with `ssh -t`, no XDG_RUNTIME_DIR either, and sees the run.
    let mut ssh_t = vec!["ssh".to_string()];
    ssh_t.extend(sshd.args(&["-t"]));
    ssh_t.push(op.remote(false, ""));
    let cmdline = ssh_t
        .iter()
        .map(|a| sh_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let tmux = Tmux::start(120, 40, &format!("exec {cmdline}")).expect("tmux");
    let seen = tmux.wait_for(&run);
    assert!(seen.contains("claude"), "{seen}");
    // Drop the connection: the ssh client dies without a word to the server.
    let ssh_pid = tmux.pane_pid();
    // SAFETY: plain kill(2) of the ssh client this test started in its tmux pane.
    unsafe { libc::kill(ssh_pid, libc::SIGKILL) };
    let deadline = Instant::now() + HANG;
    while common::alive(ssh_pid) {
        assert!(Instant::now() < deadline, "ssh {ssh_pid} never ended");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A new login finds the session still running, its output still there.
    let v: Value =
        serde_json::from_str(&run_ok(false, &format!("session show {run} --json"))).unwrap();
    let state = v["state"].as_str().unwrap_or("").to_string();
    let again = run_ok(false, &format!("session tail {run}"));
    stop_server();
    assert!(
        ["running", "idle"].contains(&state.as_str()),
        "the session survived the dropped connection: {v}"
    );
    assert!(again.contains("demo reply #1"), "{again}");
}
