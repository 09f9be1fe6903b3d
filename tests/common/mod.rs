//! Shared helpers for tests that drive the real binary against a real server.
#![allow(dead_code)]

pub mod factory;
pub mod keys;
pub mod pty;
pub mod rigs;
pub mod sshd;
pub mod tmux;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A test home plus a folder of demo shims first on PATH, and a workspace (the CLI tests'
/// environment: a test file adds its own methods in an `impl ShimEnv` block).
pub struct ShimEnv {
    pub h: TestHome,
    pub _shims: tempfile::TempDir,
    pub path_var: String,
    pub ws: tempfile::TempDir,
}

impl ShimEnv {
    pub fn new() -> ShimEnv {
        let h = TestHome::new();
        let shims = tempfile::tempdir().unwrap();
        proctor::providers::fake::install_shims(
            shims.path(),
            Path::new(env!("CARGO_BIN_EXE_proctor")),
        )
        .unwrap();
        let path_var = format!(
            "{}:{}",
            shims.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        ShimEnv {
            h,
            _shims: shims,
            path_var,
            ws: tempfile::tempdir().unwrap(),
        }
    }
}

/// A temporary home; the server started in it is stopped (SIGKILL if needed) on drop.
pub struct TestHome {
    pub dir: tempfile::TempDir,
    /// The PATH every command of this home runs with (None: the test's own). A start sends
    /// the client's PATH, so the CLI must see the tools the test means (the shims).
    pub path: Option<std::ffi::OsString>,
}

impl TestHome {
    pub fn new() -> TestHome {
        // Unix socket paths are short: keep the home near the root of the temp folder.
        let dir = tempfile::Builder::new()
            .prefix("ph")
            .tempdir_in("/tmp")
            .unwrap();
        TestHome { dir, path: None }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_proctor"));
        c.env_remove("PROCTOR_HOME")
            .env_remove("PROCTOR_TOKEN")
            .arg("--home")
            .arg(self.path());
        if let Some(p) = &self.path {
            c.env("PATH", p);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs the binary in a session of its own (`setsid`): no controlling terminal, as a
    /// script started from cron or a detached agent would be.
    pub fn run_without_terminal(&self, args: &[&str]) -> Output {
        use std::os::unix::process::CommandExt;
        let mut cmd = self.cmd();
        cmd.args(args);
        // SAFETY: setsid in the child before exec (async-signal-safe).
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        cmd.output().unwrap()
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
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

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("run/server.sock")
    }

    pub fn owner_token(&self) -> String {
        std::fs::read_to_string(self.path().join("config/owner.token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Waits until a SIGKILLed server `pid` is gone and its socket takes no connection.
    /// `alive` is false once the main thread is a zombie, but the other threads may still be
    /// exiting with the listening socket open: a client that connects then is accepted and
    /// reset ("connection error"), which is what a test restarting at once saw under load.
    pub fn wait_server_gone(&self, pid: i32) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while alive(pid) || std::os::unix::net::UnixStream::connect(self.socket()).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the killed server {pid} still holds its socket"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    pub fn server_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path().join("run/server.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn ledger(&self) -> PathBuf {
        self.path().join("data/ledger.jsonl")
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        let _ = self.cmd().args(["server", "stop"]).output();
        if let Some(pid) = self.server_pid()
            && alive(pid)
        {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// True while a process with this pid exists (and is not a zombie we could see).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // Field 3 (after the parenthesised name) is the state; Z is a zombie.
            let after = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start())
                .unwrap_or("");
            !after.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// One raw HTTP/1.1 request over the socket with curl-like simplicity: returns the status.
pub fn http_status(socket: &Path, method: &str, path: &str, token: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body = if method == "POST" || method == "PUT" {
        "{}"
    } else {
        ""
    };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: proctor\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // One write; a server that answers (401) and closes before reading the body may make
    // it fail with EPIPE, and the answer is still there to read.
    let _ = s.write_all(req.as_bytes());
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp);
    resp.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A home with the demo shims first on PATH, and a server started with short settings.
pub struct DemoServer {
    pub home: TestHome,
    pub shims: PathBuf,
    pub token: String,
}

impl DemoServer {
    /// A server on this machine's own PATH (no shims), with `env` set (a relative value is
    /// taken inside the home, and created).
    pub fn start_with_env(env: &[(&str, &str)]) -> DemoServer {
        let home = TestHome::new();
        let mut cmd = home.cmd();
        cmd.arg("serve");
        for (k, v) in env {
            let v = if v.starts_with('/') {
                PathBuf::from(v)
            } else {
                home.path().join(v)
            };
            std::fs::create_dir_all(&v).ok();
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = home.owner_token();
        let shims = home.path().join("no-shims");
        DemoServer { home, shims, token }
    }

    pub fn start(serve_args: &[&str]) -> DemoServer {
        let mut home = TestHome::new();
        let shims = home.path().join("shims");
        proctor::providers::fake::install_shims(&shims, Path::new(env!("CARGO_BIN_EXE_proctor")))
            .unwrap();
        let mut args = vec!["serve"];
        args.extend_from_slice(serve_args);
        let out = home
            .cmd()
            .args(&args)
            .env("PATH", Self::path_with(&shims))
            .env("OPENAI_API_KEY", "sk-must-not-leak")
            .env("HTTPS_PROXY", "http://proxy.invalid:3128")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = home.owner_token();
        // The CLI of this home sees the shims too, as an operator's shell that started the
        // server would.
        home.path = Some(Self::path_with(&shims));
        DemoServer { home, shims, token }
    }

    fn path_with(shims: &Path) -> std::ffi::OsString {
        let mut p = shims.as_os_str().to_owned();
        p.push(":/usr/local/bin:/usr/bin:/bin");
        p
    }

    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        call_as(&self.home.socket(), Some(&self.token), method, path, body)
    }

    /// Calls and asserts the status.
    pub fn expect(
        &self,
        status: u16,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let (got, v) = self.call(method, path, body);
        assert_eq!(got, status, "{method} {path}: {v}");
        v
    }

    pub fn run_path(&self, run: &str, tail: &str) -> String {
        format!("/v1/m/sessions/runs/{run}{tail}")
    }

    /// Waits until the run satisfies `pred` (polling GET), or panics after 20 s.
    pub fn wait_run(
        &self,
        run: &str,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let v = self.expect(200, "GET", &self.run_path(run, ""), None);
            if pred(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: {v}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Reads the attach stream from `from` until `done` says so (or the stream ends).
    pub fn attach(
        &self,
        run: &str,
        from: u64,
        done: impl Fn(&[SseEvent]) -> bool,
    ) -> Vec<SseEvent> {
        sse(
            &self.home.socket(),
            &self.token,
            &self.run_path(run, &format!("/attach?from={from}")),
            done,
        )
    }
}

/// One JSON call over the socket; returns the status and the parsed body (Null if empty).
pub fn call_as(
    socket: &Path,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: proctor\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // One write; a server that answers (401) and closes before reading the body may make
    // it fail with EPIPE, and the answer is still there to read.
    let _ = s.write_all(req.as_bytes());
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut payload = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload = dechunk(&payload);
    }
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let v = if payload.is_empty() {
        serde_json::Value::Null
    } else {
        // A stream (attach) is not JSON: hand it back as text.
        serde_json::from_slice(&payload)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&payload).into()))
    };
    (status, v)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
    out
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: serde_json::Value,
}

impl SseEvent {
    /// The decoded bytes of an `output` event: the child's output (a pipe run's `stdin`
    /// frames, what proctor wrote to it, are left out).
    pub fn bytes(&self) -> Vec<u8> {
        use base64::Engine;
        let mut out = Vec::new();
        for f in self.data["frames"].as_array().into_iter().flatten() {
            if f["stream"] == "stdin" {
                continue;
            }
            out.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(f["b64"].as_str().unwrap())
                    .unwrap(),
            );
        }
        out
    }
}

/// All output bytes in a list of events.
pub fn output_of(events: &[SseEvent]) -> Vec<u8> {
    events
        .iter()
        .filter(|e| e.event == "output")
        .flat_map(|e| e.bytes())
        .collect()
}

/// Reads an SSE stream until `done` returns true or the server ends it (20 s at most).
pub fn sse(
    socket: &Path,
    token: &str,
    path: &str,
    done: impl Fn(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: proctor\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => panic!("attach read: {e} after {} events", events.len()),
        };
        raw.extend_from_slice(&buf[..n]);
        let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let body = dechunk_partial(&raw[split + 4..]);
        let text = String::from_utf8_lossy(&body).to_string();
        events = parse_sse(&text);
        if done(&events)
            || events
                .iter()
                .any(|e| e.event == "end" || e.event == "notice" && e.data["notice"] == "not_live")
        {
            break;
        }
    }
    events
}

fn dechunk_partial(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let Ok(size) =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 || b.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

fn parse_sse(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        if !block.ends_with(|_| true) {
            continue;
        }
        let mut event = String::from("message");
        let mut id = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if data.is_empty() {
            continue;
        }
        if let Ok(v) = serde_json::from_str(&data) {
            out.push(SseEvent { event, id, data: v });
        }
    }
    out
}

impl DemoServer {
    /// Creates a token with `role` and returns its secret.
    pub fn json_token(&self, role: &str, name: &str) -> String {
        let v = self
            .home
            .json(&["token", "create", "--role", role, "--name", name, "--json"]);
        v["secret"].as_str().unwrap().to_string()
    }
}

/// Every `.rs` file below `dir`, depth first (the source scans of the architecture and
/// server-state tests).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The receipt files (`data/receipts/*.json`) of a home, sorted.
pub fn receipt_files(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(home.join("data/receipts"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
