//! A remote proctor over the user's own SSH (issue 19; docs/remote.md): a real `sshd` on
//! 127.0.0.1 started by the test (tests/common/sshd.rs) and two proctor homes standing for two
//! hosts. The "local" home holds `config/hosts.toml`; the "remote" home is reached only
//! through `ssh … proctor system dial-stdio`, by a wrapper that plays the remote machine's
//! installed proctor (its home and PATH). Skipped, with a message, only when
//! `/usr/sbin/sshd` is absent.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::TestHome;
use common::sshd::{SSHD, Sshd, sh_quote, text};
use serde_json::Value;

const HANG: Duration = Duration::from_secs(60);

/// Two hosts: the client's home and the remote one, with the remote proctor's wrapper.
struct Hosts {
    sshd: Sshd,
    local: TestHome,
    remote: TestHome,
    wrapper: PathBuf,
    _shims: tempfile::TempDir,
}

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
}

impl Hosts {
    fn new() -> Option<Hosts> {
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
        // The remote machine's proctor: its own home, the provider fakes on its PATH.
        let wrapper = remote.path().join("rproctor");
        write_exec(
            &wrapper,
            &format!(
                "#!/bin/sh\necho \"$*\" >> {}\nexec env -u PROCTOR_HOST -u PROCTOR_TOKEN PROCTOR_HOME={} PATH={} {} \"$@\"\n",
                sh_quote(&remote.path().join("invocations").display().to_string()),
                sh_quote(&remote.path().display().to_string()),
                sh_quote(&format!(
                    "{}:{}",
                    shims.path().display(),
                    std::env::var("PATH").unwrap_or_default()
                )),
                sh_quote(&bin.display().to_string()),
            ),
        );
        let h = Hosts {
            sshd,
            local,
            remote,
            wrapper,
            _shims: shims,
        };
        h.hosts_toml("");
        Some(h)
    }

    /// Writes the local home's hosts.toml: `box` (the remote home) plus `extra`.
    fn hosts_toml(&self, extra: &str) {
        let config = self.local.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::set_permissions(self.local.path(), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o700)).unwrap();
        let f = config.join("hosts.toml");
        std::fs::write(
            &f,
            format!(
                "[hosts.box]\nurl = \"ssh://127.0.0.1:{port}\"\nproctor = \"{w}\"\n\
                 ssh_args = [\"-F\", \"{cfg}\"]\n{extra}",
                port = self.sshd.port,
                w = self.wrapper.display(),
                cfg = self.sshd.client_config().display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// `proctor --host HOST ARGS` from the local home, with no terminal on stdin.
    fn at(&self, host: &str, args: &[&str]) -> Output {
        self.local
            .cmd()
            .current_dir("/")
            .arg("--host")
            .arg(host)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, host: &str, args: &[&str]) -> String {
        let out = self.at(host, args);
        assert!(
            out.status.success(),
            "--host {host} {args:?}: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

#[test]
fn dial_stdio_relays_one_http_exchange_and_starts_the_remote_server() {
    let Some(h) = Hosts::new() else { return };
    assert!(!h.remote.socket().exists(), "no remote server yet");
    let mut cmd = Command::new("ssh");
    cmd.args(h.sshd.args(&[]))
        .arg(format!(
            "{} system dial-stdio",
            sh_quote(&h.wrapper.display().to_string())
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"GET /v1/version HTTP/1.1\r\nHost: proctor\r\nConnection: close\r\n\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout.starts_with("HTTP/1.1 200"),
        "stdout is the server's answer and nothing else: {stdout:?}"
    );
    let body = &stdout[stdout.find("\r\n\r\n").unwrap() + 4..];
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["protocol"], proctor::server::PROTOCOL, "{v}");
    assert!(
        h.remote.socket().exists(),
        "dial-stdio started the remote server"
    );
}

#[test]
fn verbs_over_ssh_reach_the_remote_home_and_only_it() {
    let Some(h) = Hosts::new() else { return };
    let v: Value = serde_json::from_str(&h.ok(
        "box",
        &[
            "session",
            "start",
            "--json",
            "--tool",
            "claude",
            "--transport",
            "pty",
            "--",
            "hello over the link",
        ],
    ))
    .unwrap();
    let run = v["ref"].as_str().unwrap().to_string();
    // The run is the remote home's: its server holds it, the local home has none.
    assert!(h.remote.socket().exists());
    assert!(!h.local.socket().exists(), "no local server was started");
    let list: Value = h.remote.json(&["session", "list", "--json"]);
    assert!(list.to_string().contains(&run), "{list}");
    let over: Value = serde_json::from_str(&h.ok("box", &["session", "list", "--json"])).unwrap();
    assert!(over.to_string().contains(&run), "{over}");

    // tail over the link shows the tool's reply.
    let deadline = Instant::now() + HANG;
    loop {
        let out = h.ok("box", &["session", "tail", &run]);
        if out.contains(r#"demo reply #1: you said "hello over the link""#) {
            break;
        }
        assert!(Instant::now() < deadline, "no reply in the tail:\n{out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // PROCTOR_HOST names the host as --host does.
    let out = h
        .local
        .cmd()
        .current_dir("/")
        .env("PROCTOR_HOST", "box")
        .args(["session", "show", &run, "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // stop over the link.
    h.ok("box", &["session", "stop", &run]);
    let deadline = Instant::now() + HANG;
    loop {
        let v: Value = h.remote.json(&["session", "show", &run, "--json"]);
        let state = v["state"].as_str().unwrap_or("").to_string();
        if state == "stopped" {
            break;
        }
        assert!(Instant::now() < deadline, "never stopped: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // resume over the link: a pipe run (its tool reports its conversation), stopped and
    // resumed through ssh, runs again in the remote home.
    let v: Value = serde_json::from_str(&h.ok(
        "box",
        &[
            "session",
            "start",
            "--json",
            "--tool",
            "claude",
            "--transport",
            "pipe",
            "--",
            "hello pipe",
        ],
    ))
    .unwrap();
    let piped = v["ref"].as_str().unwrap().to_string();
    let state_of = |r: &str| -> String {
        let v: Value = h.remote.json(&["session", "show", r, "--json"]);
        v["state"].as_str().unwrap_or("").to_string()
    };
    let deadline = Instant::now() + HANG;
    while state_of(&piped) != "idle" {
        assert!(
            Instant::now() < deadline,
            "never idle: {}",
            state_of(&piped)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    h.ok("box", &["session", "stop", &piped]);
    assert_eq!(state_of(&piped), "stopped");
    h.ok("box", &["session", "resume", &piped, "--json"]);
    let state = state_of(&piped);
    assert!(
        ["starting", "running", "idle"].contains(&state.as_str()),
        "resumed: {state}"
    );
    h.ok("box", &["session", "stop", &piped]);
}

#[test]
fn a_remote_proctor_of_another_protocol_is_refused_with_both_versions_named() {
    let Some(h) = Hosts::new() else { return };
    // The other host's proctor answers the version probe as another release would.
    let old = h.remote.path().join("oldproctor");
    write_exec(
        &old,
        "#!/bin/sh\nread -r line\nbody='{\"name\":\"proctor\",\"version\":\"0.0.1-other\",\
         \"protocol\":999,\"recovering\":0}'\nprintf 'HTTP/1.1 200 OK\\r\\ncontent-type: \
         application/json\\r\\ncontent-length: %s\\r\\nconnection: close\\r\\n\\r\\n%s' \
         \"${#body}\" \"$body\"\n",
    );
    h.hosts_toml(&format!(
        "[hosts.old]\nurl = \"ssh://127.0.0.1:{}\"\nproctor = \"{}\"\nssh_args = [\"-F\", \"{}\"]\n",
        h.sshd.port,
        old.display(),
        h.sshd.client_config().display()
    ));
    let out = h.at("old", &["session", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(err.contains("host old"), "{err}");
    assert!(err.contains("0.0.1-other") && err.contains("999"), "{err}");
    assert!(err.contains(env!("CARGO_PKG_VERSION")), "{err}");
}

#[test]
fn a_host_that_is_down_is_named_with_the_remedy() {
    let local = TestHome::new();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("ssh://127.0.0.1:{port}");
    let out = local
        .cmd()
        .args(["--host", &url, "session", "list"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        err.contains(&format!("host {url} cannot be reached")),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "what ssh said: {err}");
    assert!(err.contains("Remedy"), "{err}");
    assert!(!local.socket().exists(), "no local server was started");
}

#[test]
fn hostile_host_strings_are_refused_before_any_ssh() {
    let local = TestHome::new();
    let marker = local.path().join("pwned");
    let m = marker.display().to_string();
    for host in [
        format!("-oProxyCommand=touch {m}"),
        format!("ssh://-oProxyCommand=touch {m}"),
        format!("ssh://127.0.0.1;touch {m}"),
        format!("ssh://127.0.0.1 touch {m}"),
        format!("ssh://$(touch {m})@127.0.0.1"),
        format!("ssh://me@127.0.0.1:22`touch {m}`"),
    ] {
        for by_env in [false, true] {
            let mut cmd = local.cmd();
            if by_env {
                cmd.env("PROCTOR_HOST", &host);
            } else {
                cmd.arg(format!("--host={host}"));
            }
            let out = cmd
                .args(["session", "list"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{host:?} accepted: {}", text(&out));
            assert!(err.contains("not a valid ssh:// URL"), "{host:?}: {err}");
            std::thread::sleep(Duration::from_millis(50));
            assert!(!marker.exists(), "{host:?} ran a command");
        }
    }
}

#[test]
fn the_requests_of_one_command_share_one_ssh_channel() {
    let Some(h) = Hosts::new() else { return };
    // `session list`: the version probe, then the list; `server status`: the probe, then
    // the status. Each command reads the token once and opens one link for its requests.
    for args in [
        &["session", "list", "--json"][..],
        &["server", "status", "--json"],
    ] {
        let _ = std::fs::remove_file(h.remote.path().join("invocations"));
        h.ok("box", args);
        let log = std::fs::read_to_string(h.remote.path().join("invocations")).unwrap();
        let count = |w: &str| log.lines().filter(|l| *l == w).count();
        assert_eq!(count("system dial-stdio"), 1, "{args:?}: {log}");
        assert_eq!(count("system owner-token"), 1, "{args:?}: {log}");
    }
}
