//! Shared helpers for tests that drive the real binary against a real server.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary home; the server started in it is stopped (SIGKILL if needed) on drop.
pub struct TestHome {
    pub dir: tempfile::TempDir,
}

impl TestHome {
    pub fn new() -> TestHome {
        // Unix socket paths are short: keep the home near the root of the temp folder.
        let dir = tempfile::Builder::new()
            .prefix("ph")
            .tempdir_in("/tmp")
            .unwrap();
        TestHome { dir }
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
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
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
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: proctor\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp.split_whitespace().nth(1).unwrap().parse().unwrap()
}
