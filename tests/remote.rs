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
        // The remote machine's proctor: its own home, its `bin` folder (a test's stand-in
        // tools) then the provider fakes on its PATH.
        let wrapper = remote.path().join("rproctor");
        let rbin = remote.path().join("bin");
        std::fs::create_dir_all(&rbin).unwrap();
        write_exec(
            &wrapper,
            &format!(
                "#!/bin/sh\necho \"$*\" >> {}\nexec env -u PROCTOR_HOST -u PROCTOR_TOKEN PROCTOR_HOME={} PATH={} {} \"$@\"\n",
                sh_quote(&remote.path().join("invocations").display().to_string()),
                sh_quote(&remote.path().display().to_string()),
                sh_quote(&format!(
                    "{}:{}:{}",
                    rbin.display(),
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

// ---------------------------------------------------------------------------------------------
// A dead connection is a notice; tail and attach reconnect from last+1 (issue 19 §1, §3)
// ---------------------------------------------------------------------------------------------

/// `line 0001\n` … `line N\n`: what the counting tool prints.
fn sequence(n: u32) -> String {
    (1..=n).map(|i| format!("line {i:04}\n")).collect()
}

/// Writes a stand-in `claude` into `dir` (not the real tool: nothing claims it is): it prints
/// `ready`, waits for a line when `wait_first`, then prints `line 0001` … `line N`, one
/// every `pause` seconds, and exits 0.
fn counting_tool(dir: &Path, n: u32, pause: &str, wait_first: bool) {
    let wait = if wait_first {
        "printf 'ready\\n'\nread go\n"
    } else {
        ""
    };
    write_exec(
        &dir.join("claude"),
        &format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\n{wait}i=1\nwhile [ $i -le {n} ]; do printf 'line %04d\\n' $i; \
             i=$((i+1)); sleep {pause}; done\n"
        ),
    );
}

/// A command run with its stdout and stderr collected as they come.
struct Watch {
    child: std::process::Child,
    out: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    err: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Watch {
    fn spawn(mut cmd: Command) -> Watch {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pump = |mut r: Box<dyn std::io::Read + Send>| {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = buf.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = r.read(&mut b) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&b[..n]);
                }
            });
            buf
        };
        let out = pump(Box::new(child.stdout.take().unwrap()));
        let err = pump(Box::new(child.stderr.take().unwrap()));
        Watch { child, out, err }
    }

    fn out(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn err(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    fn wait_until(&self, what: &str, pred: impl Fn(&Watch) -> bool) {
        let deadline = Instant::now() + HANG;
        while !pred(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\nstdout:\n{}\nstderr:\n{}",
                self.out(),
                self.err()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit; its code, with everything read.
    fn exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + HANG;
        let st = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "did not exit\nstdout:\n{}\nstderr:\n{}",
                self.out(),
                self.err()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(200));
        st.code()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes whose parent is `parent` and whose command line holds `word`.
fn children_with(parent: u32, word: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces, so read after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if ppid == Some(parent) && cmdline.contains(word) {
            found.push(pid);
        }
    }
    found
}

/// Drops the link of the client `pid`: kills every ssh it runs for a connection
/// (`ssh … system dial-stdio`: the requests' link and the stream's). Returns how many.
fn kill_links(pid: u32) -> usize {
    let ssh = children_with(pid, "dial-stdio");
    for p in &ssh {
        // SAFETY: kill(2) of a process this test's client started.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    ssh.len()
}

/// The transcript of a run's first generation in `home` (`stdout.raw` or `pty.raw`).
fn transcript(home: &Path, run: &str, file: &str) -> Vec<u8> {
    std::fs::read(home.join(format!("data/runs/{run}/gen-1/{file}"))).unwrap()
}

impl Hosts {
    /// Starts a run of the counting tool on the remote host; returns its ref.
    fn start_counting(&self, transport: &str, n: u32, pause: &str, wait_first: bool) -> String {
        counting_tool(&self.remote.path().join("bin"), n, pause, wait_first);
        let v: Value = serde_json::from_str(&self.ok(
            "box",
            &[
                "session",
                "start",
                "--json",
                "--tool",
                "claude",
                "--transport",
                transport,
            ],
        ))
        .unwrap();
        v["ref"].as_str().unwrap().to_string()
    }

    fn tail(&self, run: &str, extra: &[&str]) -> Watch {
        let mut cmd = self.local.cmd();
        cmd.current_dir("/")
            .args(["--host", "box", "session", "tail", "--follow", "--raw"])
            .args(extra)
            .arg(run);
        Watch::spawn(cmd)
    }

    fn wait_ended(&self, run: &str) {
        let deadline = Instant::now() + HANG;
        loop {
            let v: Value = self.remote.json(&["session", "show", run, "--json"]);
            if v["ended_at"].is_string() {
                return;
            }
            assert!(Instant::now() < deadline, "{run} never ended: {v}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn tail_follow_over_ssh_reconnects_when_the_link_dies_and_loses_and_repeats_nothing() {
    let Some(h) = Hosts::new() else { return };
    let n = 250;
    let run = h.start_counting("pipe", n, "0.03", false);
    let mut w = h.tail(&run, &[]);
    w.wait_until("line 40", |w| w.out().contains("line 0040"));
    assert!(kill_links(w.child.id()) >= 1, "the tail had an ssh link");
    w.wait_until("the notice", |w| w.err().contains("reconnecting"));
    w.wait_until("the reconnection", |w| w.err().contains("reconnected"));
    let at_reconnect = w.out().len();
    assert_eq!(w.exit(), Some(0), "stderr:\n{}", w.err());
    let (out, err) = (w.out(), w.err());
    assert!(
        at_reconnect < out.len(),
        "output came after the reconnection (the link died mid-run)"
    );
    assert_eq!(
        err.matches("reconnecting to continue from seq").count(),
        1,
        "{err}"
    );
    assert_eq!(
        err.matches("reconnected; continuing from seq").count(),
        1,
        "{err}"
    );
    assert!(err.contains(&format!("[{run} exited: code 0]")), "{err}");
    assert!(out == sequence(n), "no gap, no repeat:\n{out}");
    assert_eq!(
        out.as_bytes(),
        transcript(h.remote.path(), &run, "stdout.raw"),
        "byte for byte the run's transcript"
    );
}

#[test]
fn tail_with_no_reconnect_exits_1_naming_the_seq_that_continues_exactly() {
    let Some(h) = Hosts::new() else { return };
    let n = 150;
    let run = h.start_counting("pipe", n, "0.03", false);
    let mut w = h.tail(&run, &["--no-reconnect"]);
    w.wait_until("line 30", |w| w.out().contains("line 0030"));
    assert!(kill_links(w.child.id()) >= 1);
    assert_eq!(w.exit(), Some(1), "stderr:\n{}", w.err());
    let (first, err) = (w.out(), w.err());
    assert!(!err.contains("reconnect"), "{err}");
    let hint = "`proctor --host box session tail --from ";
    let at = err
        .find(hint)
        .unwrap_or_else(|| panic!("the remedy: {err}"));
    let rest = &err[at + hint.len()..];
    let seq: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    assert!(
        rest[seq.len()..].starts_with(&format!(" {run}` continues from here")),
        "{err}"
    );
    h.wait_ended(&run);
    let second = h.ok("box", &["session", "tail", "--raw", "--from", &seq, &run]);
    assert_eq!(
        format!("{first}{second}"),
        sequence(n),
        "what was printed, then what --from {seq} prints, is the whole output once"
    );
}

#[test]
fn a_reconnection_that_meets_another_protocol_is_refused() {
    let Some(h) = Hosts::new() else { return };
    let run = h.start_counting("pipe", 400, "0.03", false);
    let mut w = h.tail(&run, &[]);
    w.wait_until("line 20", |w| w.out().contains("line 0020"));
    // The remote host's proctor is replaced by another release's, then the link drops.
    let old = h.remote.path().join("oldproctor");
    write_exec(
        &old,
        "#!/bin/sh\nread -r line\nbody='{\"name\":\"proctor\",\"version\":\"0.0.1-other\",\
         \"protocol\":999,\"recovering\":0}'\nprintf 'HTTP/1.1 200 OK\\r\\ncontent-type: \
         application/json\\r\\ncontent-length: %s\\r\\nconnection: close\\r\\n\\r\\n%s' \
         \"${#body}\" \"$body\"\n",
    );
    let moved = h.remote.path().join("rproctor.real");
    std::fs::rename(&h.wrapper, &moved).unwrap();
    write_exec(
        &h.wrapper,
        &format!(
            "#!/bin/sh\nexec {} \"$@\"\n",
            sh_quote(&old.display().to_string())
        ),
    );
    assert!(kill_links(w.child.id()) >= 1);
    assert_eq!(w.exit(), Some(1), "stderr:\n{}", w.err());
    let err = w.err();
    assert!(err.contains("reconnecting"), "{err}");
    assert!(!err.contains("reconnected"), "{err}");
    assert!(
        err.contains("0.0.1-other") && err.contains("protocol 999"),
        "both versions named: {err}"
    );
    assert!(err.contains(env!("CARGO_PKG_VERSION")), "{err}");
    // The real proctor back, for the home's teardown.
    std::fs::rename(&moved, &h.wrapper).unwrap();
}

/// `line NNNN` numbers in `text`, with attach's own notices (saved-cursor spans naming the
/// reconnection) taken out first.
fn numbers_shown(text: &str) -> Vec<u32> {
    let mut t = text.to_string();
    while let Some(a) = t.find("\x1b7") {
        let Some(len) = t[a..].find("\x1b8") else {
            break;
        };
        assert!(
            t[a..a + len].contains("reconnect"),
            "a notice of attach's own"
        );
        t.replace_range(a..a + len + 2, "");
    }
    let mut got = Vec::new();
    let mut rest = t.as_str();
    while let Some(i) = rest.find("line ") {
        let digits: String = rest[i + 5..].chars().take(4).collect();
        if digits.len() == 4
            && digits.chars().all(|c| c.is_ascii_digit())
            && let Ok(n) = digits.parse()
        {
            got.push(n);
        }
        rest = &rest[i + 5..];
    }
    got
}

#[test]
fn attach_over_ssh_in_a_terminal_reconnects_when_the_link_dies_without_a_redraw() {
    let Some(h) = Hosts::new() else { return };
    let n = 200;
    let run = h.start_counting("pty", n, "0.03", true);
    let deadline = Instant::now() + HANG;
    while !h.ok("box", &["session", "tail", &run]).contains("ready") {
        assert!(Instant::now() < deadline, "the tool never said ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let local = h.local.path().display().to_string();
    let mut t = common::pty::Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &local, "--host", "box", "session", "attach", &run],
        50,
        160,
        &[],
        &["PROCTOR_HOST"],
    );
    t.wait_for("ready");
    t.type_keys("go\r");
    t.wait_for("line 0040");
    assert!(kill_links(t.pid()) >= 1, "the attach had an ssh link");
    t.wait_for("reconnecting to continue from seq");
    t.wait_for("reconnected; continuing from seq");
    let out = t.wait_for(&format!("[{run} exited: code 0]"));
    assert_eq!(t.exit_code(), 0, "{out}");
    let out = t.text();
    assert_eq!(out.matches("reconnecting to continue").count(), 1, "{out}");
    assert_eq!(out.matches("reconnected; continuing").count(), 1, "{out}");
    // The screen was drawn once, on attach (a redraw at the reconnection would show
    // `ready` and the lines before it again), and every line reached the terminal once,
    // in order.
    assert_eq!(out.matches("ready").count(), 1, "no redraw: {out:?}");
    assert_eq!(
        numbers_shown(&out),
        (1..=n).collect::<Vec<_>>(),
        "each line once, none missing"
    );
    let raw = transcript(h.remote.path(), &run, "pty.raw");
    let raw = String::from_utf8_lossy(&raw);
    assert_eq!(numbers_shown(&raw), (1..=n).collect::<Vec<_>>());
}

#[test]
fn a_local_tail_follow_waits_through_a_server_restart_then_says_what_became_of_the_run() {
    // A server that dies takes its runs with it: the next server sweeps them (`lost`). The
    // tail keeps what it printed (a prefix of the output, no gap, no repeat), says the
    // connection was lost, reconnects to the new server and says that it holds no output.
    let mut home = TestHome::new();
    let tools = tempfile::tempdir().unwrap();
    let shims = tempfile::tempdir().unwrap();
    proctor::providers::fake::install_shims(shims.path(), Path::new(env!("CARGO_BIN_EXE_proctor")))
        .unwrap();
    counting_tool(tools.path(), 400, "0.03", false);
    let ws = tempfile::tempdir().unwrap();
    home.path = Some(
        format!(
            "{}:{}:{}",
            tools.path().display(),
            shims.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
        .into(),
    );
    let out = home
        .cmd()
        .current_dir(ws.path())
        .args([
            "session",
            "start",
            "--json",
            "--tool",
            "claude",
            "--transport",
            "pipe",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = v["ref"].as_str().unwrap().to_string();
    let mut cmd = home.cmd();
    cmd.args(["session", "tail", "--follow", "--raw", &run]);
    let mut w = Watch::spawn(cmd);
    w.wait_until("line 30", |w| w.out().contains("line 0030"));
    let pid = home.server_pid().unwrap();
    // SAFETY: kill(2) of the server this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    home.wait_server_gone(pid);
    w.wait_until("the notice", |w| w.err().contains("reconnecting"));
    home.ok(&["serve"]);
    assert_eq!(w.exit(), Some(1), "stderr:\n{}", w.err());
    let (out, err) = (w.out(), w.err());
    assert_eq!(
        err.matches("reconnecting to continue from seq").count(),
        1,
        "{err}"
    );
    assert!(err.contains("reconnected; continuing from seq"), "{err}");
    assert!(err.contains("no output held by this server"), "{err}");
    assert!(out.contains("line 0030"), "{out}");
    assert!(
        sequence(400).starts_with(&out),
        "a prefix of the output, no gap, no repeat:\n{out}"
    );
    let raw = transcript(home.path(), &run, "stdout.raw");
    assert!(
        raw.starts_with(out.as_bytes()),
        "the transcript begins with it"
    );
}

/// Pipe attach over ssh (a stdio run's output followed in a terminal): the link killed
/// mid-run, one notice, reconnected, every line shown once and in order, the run's exit
/// status at the end.
#[test]
fn pipe_attach_over_ssh_reconnects_when_the_link_dies_and_shows_each_line_once() {
    let Some(h) = Hosts::new() else { return };
    let n = 200;
    let run = h.start_counting("pipe", n, "0.03", false);
    let local = h.local.path().display().to_string();
    let mut t = common::pty::Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &local, "--host", "box", "session", "attach", &run],
        50,
        160,
        &[],
        &["PROCTOR_HOST"],
    );
    t.wait_for("line 0040");
    // The remote owner token crossed inside the ssh channel only: never in the argv of
    // this machine's ssh, nor of the remote proctor (its wrapper logs every argv).
    let token = h.remote.owner_token();
    let links = children_with(t.pid(), "dial-stdio");
    assert!(!links.is_empty());
    for pid in &links {
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&argv).contains(token.trim()),
            "the token in ssh's argv"
        );
    }
    assert!(kill_links(t.pid()) >= 1, "the attach had an ssh link");
    t.wait_for("reconnecting to continue from seq");
    t.wait_for("reconnected; continuing from seq");
    let out = t.wait_for(&format!("[{run} exited: code 0]"));
    assert_eq!(t.exit_code(), 0, "{out}");
    let out = t.text();
    assert_eq!(out.matches("reconnecting to continue").count(), 1, "{out}");
    assert_eq!(out.matches("reconnected; continuing").count(), 1, "{out}");
    assert_eq!(
        numbers_shown(&out),
        (1..=n).collect::<Vec<_>>(),
        "each line once, none missing: {out}"
    );
    let invocations =
        std::fs::read_to_string(h.remote.path().join("invocations")).unwrap_or_default();
    assert!(invocations.contains("system dial-stdio"), "{invocations}");
    assert!(
        !invocations.contains(token.trim()),
        "the token in the remote proctor's argv"
    );
}

/// The cockpit's live pane over ssh (`proctor --host box`, a real PTY): the cockpit's ssh
/// links killed while box's PTY run prints numbered lines; the pane reconnects from the seq
/// after its last, as `session attach` does: at the end it shows the run's last lines, each
/// once and in order (a stream taken again from an earlier seq would print lines twice, one
/// taken from a later seq would leave a gap in the lines around the drop, which the pane
/// still shows).
#[test]
fn the_cockpits_live_pane_over_ssh_reconnects_without_repeating_or_losing_a_line() {
    let Some(h) = Hosts::new() else { return };
    let local = h.local.path().display().to_string();
    // The pane shows the last 42 lines: the drop at line 90 stays in view.
    let n = 120;
    let run = h.start_counting("pty", n, "0.05", true);
    let deadline = Instant::now() + HANG;
    while !h.ok("box", &["session", "tail", &run]).contains("ready") {
        assert!(Instant::now() < deadline, "the tool never said ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut t = common::pty::Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &local, "--host", "box"],
        48,
        160,
        &[("TERM", "xterm-256color")],
        &["PROCTOR_HOST"],
    );
    t.wait_screen("box's run in the live pane", |s| {
        s.contains(&run) && s.contains("ready")
    });
    h.ok("box", &["session", "input", &run, "go"]);
    t.wait_screen("line 90 in the pane", |s| s.contains("line 0090"));
    assert!(kill_links(t.pid()) >= 1, "the cockpit had ssh links");
    let s = t.wait_screen("the last line in the pane", |s| {
        s.contains(&format!("line {n:04}"))
    });
    let shown = numbers_shown(&s);
    let first = *shown.first().unwrap();
    assert!(
        first < 88,
        "the lines around the drop are in view: {shown:?}\n{s}"
    );
    assert_eq!(
        shown,
        (first..=n).collect::<Vec<_>>(),
        "each line once, in order, none missing:\n{s}"
    );
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
}
