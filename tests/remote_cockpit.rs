//! The cockpit following two hosts at once (issue 19 §2, §3; docs/remote.md): the real
//! binary in a real pseudo-terminal, its screen read through vt100, following this home
//! (`local`) and another home reached over a real `sshd` on 127.0.0.1 (`box`;
//! tests/common/sshd.rs), both holding a `run-0001`. Skipped, with a message, only when
//! `/usr/sbin/sshd` is absent.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::TestHome;
use common::pty::Term;
use common::sshd::{SSHD, Sshd, sh_quote, text};
use serde_json::Value;

const HANG: Duration = Duration::from_secs(60);

struct Two {
    sshd: Sshd,
    local: TestHome,
    remote: TestHome,
    path_var: String,
    _shims: tempfile::TempDir,
}

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn private(p: &Path) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

impl Two {
    fn new() -> Option<Two> {
        if !Path::new(SSHD).exists() {
            eprintln!("SKIPPED: {SSHD} is absent (install openssh-server to run the remote test)");
            return None;
        }
        let sshd = Sshd::start();
        let local = TestHome::new();
        let remote = TestHome::new();
        let shims = tempfile::Builder::new()
            .prefix("prs")
            .tempdir_in("/tmp")
            .unwrap();
        let bin = Path::new(env!("CARGO_BIN_EXE_proctor"));
        proctor::providers::fake::install_shims(shims.path(), bin).unwrap();
        let path_var = format!(
            "{}:{}",
            shims.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // The other machine's installed proctor: its own home, the fakes on its PATH.
        let wrapper = remote.path().join("rproctor");
        write_exec(
            &wrapper,
            &format!(
                "#!/bin/sh\nexec env -u PROCTOR_HOST -u PROCTOR_TOKEN PROCTOR_HOME={} PATH={} {} \"$@\"\n",
                sh_quote(&remote.path().display().to_string()),
                sh_quote(&path_var),
                sh_quote(&bin.display().to_string()),
            ),
        );
        let config = local.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        private(local.path());
        private(&config);
        let f = config.join("hosts.toml");
        std::fs::write(
            &f,
            format!(
                "[hosts.box]\nurl = \"ssh://127.0.0.1:{port}\"\nproctor = \"{w}\"\n\
                 ssh_args = [\"-F\", \"{cfg}\"]\n",
                port = sshd.port,
                w = wrapper.display(),
                cfg = sshd.client_config().display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        Some(Two {
            sshd,
            local,
            remote,
            path_var,
            _shims: shims,
        })
    }

    /// `proctor [--host HOST] ARGS` from the local home, no terminal, the fakes on PATH.
    fn at(&self, host: Option<&str>, args: &[&str]) -> Output {
        let mut c = self.local.cmd();
        c.current_dir("/").env("PATH", &self.path_var);
        if let Some(h) = host {
            c.arg("--host").arg(h);
        }
        c.args(args).stdin(Stdio::null()).output().unwrap()
    }

    fn start(&self, host: Option<&str>, prompt: &str) -> String {
        let out = self.at(
            host,
            &[
                "session",
                "start",
                "--json",
                "--tool",
                "claude",
                "--transport",
                "pipe",
                "--",
                prompt,
            ],
        );
        assert!(out.status.success(), "start on {host:?}: {}", text(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["ref"].as_str().unwrap().to_string()
    }
}

fn state(home: &TestHome, run: &str) -> String {
    let v: Value = home.json(&["session", "show", run, "--json"]);
    v["state"].as_str().unwrap_or("").to_string()
}

fn wait_state(home: &TestHome, run: &str, want: &str) {
    let deadline = Instant::now() + HANG;
    while state(home, run) != want {
        assert!(
            Instant::now() < deadline,
            "{run} never {want}: {}",
            state(home, run)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The row of the list that shows `host` and `run` (the HOST column, then REF).
fn row<'a>(screen: &'a str, host: &str, run: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let words: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || c == '│' || c == '┃')
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .any(|w| w[0].trim_start_matches('›') == host && w[1] == run)
            || words
                .windows(3)
                .any(|w| w[0] == "›" && w[1] == host && w[2] == run)
    })
}

/// `proctor --host box --host local` in a 48×160 terminal: both hosts' `run-0001` listed
/// under their HOST, one header line per host (reachable, version, live/idle counts); a
/// stop from the cockpit reaches the selected run's own host only; the sshd killed (and
/// the shared ssh connection ended, as a dropped network would): box's line says
/// unreachable since when and why, its row stays, greyed and `stale`, never live; sshd
/// back on its port: box answers again by itself.
#[test]
fn the_cockpit_follows_two_hosts_and_sends_each_action_to_its_own() {
    let Some(mut two) = Two::new() else { return };
    // One run-0001 on each host.
    let remote_run = two.start(Some("box"), "hello box");
    let local_run = two.start(None, "hello local");
    assert_eq!(remote_run, "run-0001");
    assert_eq!(local_run, "run-0001");
    wait_state(&two.remote, &remote_run, "idle");
    wait_state(&two.local, &local_run, "idle");

    // The control connection lives in a folder of the test's (XDG_RUNTIME_DIR/proctor-ssh).
    let xdg = tempfile::Builder::new()
        .prefix("prx")
        .tempdir_in("/tmp")
        .unwrap();
    private(xdg.path());
    let xdg_s = xdg.path().display().to_string();
    let home = two.local.path().display().to_string();
    let mut t = Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &home, "--host", "box", "--host", "local"],
        48,
        160,
        &[
            ("PATH", two.path_var.as_str()),
            ("XDG_RUNTIME_DIR", xdg_s.as_str()),
            ("TERM", "xterm-256color"),
        ],
        &["PROCTOR_HOST"],
    );
    let screen = t.wait_screen("both hosts and their runs", |s| {
        s.contains("box    reachable · proctor ")
            && s.contains("local  reachable · proctor ")
            && row(s, "box", "run-0001").is_some()
            && row(s, "local", "run-0001").is_some()
            && s.contains("HOST")
    });
    eprintln!("two hosts, 160x48:\n{screen}");
    assert!(
        screen.contains("box    reachable · proctor ")
            && screen.contains(" · 0 live · 1 idle · 1 runs"),
        "{screen}"
    );
    for host in ["box", "local"] {
        let r = row(&screen, host, "run-0001").unwrap();
        // Idle after its turn: the list says it waits for the person.
        assert!(r.contains("waiting for you"), "{host}: {r}");
    }

    // Select box's run-0001 and stop it from the cockpit.
    let deadline = Instant::now() + HANG;
    loop {
        let s = t.screen();
        if row(&s, "box", "run-0001").is_some_and(|r| r.contains('›')) {
            break;
        }
        assert!(Instant::now() < deadline, "cannot select box's run:\n{s}");
        t.send(b"j");
        std::thread::sleep(Duration::from_millis(300));
        let s = t.screen();
        if row(&s, "box", "run-0001").is_some_and(|r| r.contains('›')) {
            break;
        }
        t.send(b"k");
        t.send(b"k");
        std::thread::sleep(Duration::from_millis(300));
    }
    t.send(b"s");
    t.wait_screen("the stop dialog naming box's run", |s| {
        s.contains("Stop box/run-0001?")
    });
    t.send(b"\t\r");
    wait_state(&two.remote, "run-0001", "stopped");
    assert_eq!(
        state(&two.local, "run-0001"),
        "idle",
        "the stop went to box only"
    );
    t.wait_screen("box's run stopped in the list", |s| {
        row(s, "box", "run-0001").is_some_and(|r| r.contains("stopped"))
            && row(s, "local", "run-0001").is_some_and(|r| r.contains("waiting"))
    });

    // box drops: its sshd killed and the shared connection ended.
    two.sshd.kill();
    let mut exit = Command::new("ssh");
    exit.args(["-F"])
        .arg(two.sshd.client_config())
        .arg("-o")
        .arg(format!("ControlPath={xdg_s}/proctor-ssh/%C"))
        .args(["-p", &two.sshd.port.to_string(), "-O", "exit", "127.0.0.1"])
        .stdin(Stdio::null());
    let out = exit.output().unwrap();
    assert!(out.status.success(), "the control master: {}", text(&out));
    let screen = t.wait_screen("box unreachable and its row stale", |s| {
        s.contains("box    unreachable since ")
            && row(s, "box", "run-0001").is_some_and(|r| r.contains("stale"))
            && row(s, "local", "run-0001").is_some_and(|r| r.contains("waiting"))
    });
    eprintln!("box down, 160x48:\n{screen}");
    let line = screen
        .lines()
        .find(|l| l.contains("box    unreachable since "))
        .unwrap();
    // What ssh said, first (the line names the host already).
    assert!(line.contains("ssh"), "{line}");
    assert!(screen.contains("local  reachable · proctor "), "{screen}");

    // sshd back on its port: box comes back by itself.
    two.sshd.restart();
    let screen = t.wait_screen("box reachable again", |s| {
        s.contains("box    reachable · proctor ")
            && row(s, "box", "run-0001").is_some_and(|r| r.contains("stopped"))
            && !s.contains("stale")
    });
    assert!(!screen.contains("unreachable"), "{screen}");
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
    let _ = std::fs::remove_dir_all(PathBuf::from(&xdg_s).join("proctor-ssh"));
}

/// Several `--host` are for the cockpit: a verb refuses them (exit 2), and a host named
/// twice is refused.
#[test]
fn several_hosts_are_for_the_cockpit_only() {
    let home = TestHome::new();
    let out = home
        .cmd()
        .args(["--host", "a", "--host", "b", "session", "list"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("for the cockpit only"),
        "{}",
        text(&out)
    );
    let out = home
        .cmd()
        .args(["--host", "local", "--host", "local"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("named twice"),
        "{}",
        text(&out)
    );
}

/// `proctor --host box` alone: the cockpit is box's. The header names box (not this
/// machine), the list holds box's run and not this home's, the live pane shows box's
/// run's output, and `s` stops box's run while this home's stays idle.
#[test]
fn the_cockpit_on_one_remote_host_shows_and_drives_that_hosts_runs() {
    let Some(two) = Two::new() else { return };
    let remote_run = two.start(Some("box"), "hello from box only");
    let local_run = two.start(None, "hello here");
    wait_state(&two.remote, &remote_run, "idle");
    wait_state(&two.local, &local_run, "idle");
    let xdg = tempfile::Builder::new()
        .prefix("prx")
        .tempdir_in("/tmp")
        .unwrap();
    private(xdg.path());
    let xdg_s = xdg.path().display().to_string();
    let home = two.local.path().display().to_string();
    let mut t = Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &home, "--host", "box"],
        24,
        80,
        &[
            ("PATH", two.path_var.as_str()),
            ("XDG_RUNTIME_DIR", xdg_s.as_str()),
            ("TERM", "xterm-256color"),
        ],
        &["PROCTOR_HOST"],
    );
    let screen = t.wait_screen("box's run and its reply in the live pane", |s| {
        s.contains("run-0001") && s.contains("hello from box only")
    });
    eprintln!("one remote host, 80x24:\n{screen}");
    let header = screen.lines().next().unwrap_or("");
    assert!(
        header.contains("box") && header.contains("over ssh"),
        "the header names the host: {header}"
    );
    assert!(!screen.contains("hello here"), "{screen}");
    assert!(!screen.contains("HOST"), "{screen}");
    t.send(b"s");
    t.wait_screen("the stop dialog", |s| s.contains("Stop run-0001?"));
    t.send(b"\t\r");
    wait_state(&two.remote, &remote_run, "stopped");
    assert_eq!(
        state(&two.local, &local_run),
        "idle",
        "the stop went to box"
    );
    t.wait_screen("box's run stopped in the list", |s| s.contains("stopped"));
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
    let _ = std::fs::remove_dir_all(PathBuf::from(&xdg_s).join("proctor-ssh"));
}
