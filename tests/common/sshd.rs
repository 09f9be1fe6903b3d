//! A real `sshd` on 127.0.0.1 for the tests that log in over SSH (tests/ssh.rs,
//! tests/remote.rs): its own host key and an authorized key made by ssh-keygen in a
//! temporary folder, as the current user, `UsePAM no`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long sshd may take to accept its first login (a hang, not a speed requirement).
const HANG: Duration = Duration::from_secs(60);
pub const SSHD: &str = "/usr/sbin/sshd";

pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A running sshd and what a client needs to log in; killed on drop.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

impl Sshd {
    pub fn start() -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("pssh")
            .tempdir_in("/tmp")
            .unwrap();
        let d = dir.path();
        for f in ["hostkey", "key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(f))
                .output()
                .unwrap();
            assert!(out.status.success(), "ssh-keygen: {}", text(&out));
        }
        std::fs::copy(d.join("key.pub"), d.join("authorized_keys")).unwrap();
        // sshd refuses to start without its privilege separation folder.
        if !Path::new("/run/sshd").is_dir() {
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n\
             UsePAM no\nStrictModes no\nAuthorizedKeysFile {d}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\nLogLevel ERROR\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let s = Sshd { dir, port, child };
        let deadline = Instant::now() + HANG;
        loop {
            let out = s.ssh(&[], "true");
            if out.status.success() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "sshd never accepted a login: {}\nsshd log: {}",
                text(&out),
                std::fs::read_to_string(s.dir.path().join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The ssh client's arguments up to the destination.
    pub fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-i",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(self.dir.path().join("key").display().to_string());
        a.push("-p".into());
        a.push(self.port.to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(format!("{}@127.0.0.1", whoami()));
        a
    }

    pub fn ssh(&self, extra: &[&str], remote: &str) -> Output {
        Command::new("ssh")
            .args(self.args(extra))
            .arg(remote)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Sshd {
    /// The private key that logs in.
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("key")
    }

    /// An ssh_config file (for `ssh -F`) that logs in to this sshd as the current user
    /// with the test's key, trusting its host key.
    pub fn client_config(&self) -> PathBuf {
        let p = self.dir.path().join("ssh_config");
        std::fs::write(
            &p,
            format!(
                "Host *\n  IdentityFile {}\n  IdentitiesOnly yes\n  User {}\n  \
                 StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
                self.key().display(),
                whoami()
            ),
        )
        .unwrap();
        p
    }

    /// Kills the listening sshd (sessions already open keep their own processes).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the sshd again on the same port, with the same keys, after [`Sshd::kill`]; it
    /// returns once a login works.
    pub fn restart(&mut self) {
        let d = self.dir.path();
        self.child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + HANG;
        while !self.ssh(&[], "true").status.success() {
            assert!(Instant::now() < deadline, "sshd did not come back");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
