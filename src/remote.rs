//! A remote proctor over the user's own SSH (issue 19 §1; docs/remote.md).
//!
//! `--host ssh://[user@]host[:port]`, `PROCTOR_HOST`, or a host named in
//! `<config>/hosts.toml`:
//!
//! ```toml
//! [hosts.build]
//! url = "ssh://me@build.example:2222"
//! proctor = "/home/me/.cargo/bin/proctor"   # the remote proctor (default: `proctor`)
//! ssh_args = ["-F", "/home/me/.ssh/build.conf"] # extra ssh options, argv words
//! ```
//!
//! The client runs the system `ssh` with an argv it builds (never a shell string; `--` before
//! the destination; `BatchMode=yes` unless stdin is a terminal) and the remote command
//! `proctor system dial-stdio`: a byte relay to the remote server's socket. Each connection of
//! the client is one ssh session channel; all of them share ONE ssh connection per host, the
//! OpenSSH control master this module asks for (`ControlMaster=auto`, a private
//! `ControlPath`, `ControlPersist`), so a request costs a channel, not a key exchange.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environment variable that names the host (as `--host` does).
pub const HOST_ENV: &str = "PROCTOR_HOST";
/// The name of this home's own server in a cockpit of several hosts (`--host local`).
pub const LOCAL: &str = "local";
/// The file of named hosts, in the home's config folder.
pub const HOSTS_FILE: &str = "hosts.toml";
/// How long the shared ssh connection outlives its last client.
pub const CONTROL_PERSIST_SECS: u64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(
        "the host {given:?} is not a valid ssh:// URL ({why}). Use ssh://[user@]host[:port] \
         (user and host of letters, digits, '.', '_', '-'; not starting with '-'), or the \
         name of a host in {file}"
    )]
    BadUrl {
        given: String,
        why: &'static str,
        file: String,
    },
    #[error("{file}: {why}")]
    Config { file: String, why: String },
    #[error(
        "the host {host} cannot be reached: {detail}. Remedy: check that `ssh {dest}` logs in \
         without a prompt (a key or an agent, and the host in known_hosts) and that `{proctor}` \
         runs there (set `proctor = \"/path/to/proctor\"` under [hosts.NAME] in {file})"
    )]
    Down {
        host: String,
        dest: String,
        proctor: String,
        file: String,
        detail: String,
    },
    #[error(
        "the word {word:?} cannot be part of a remote command: only letters, digits, '.', '_' \
         and '-' (it reaches the remote shell)"
    )]
    BadWord { word: String },
    #[error("cannot {op}: {err}")]
    Io {
        op: &'static str,
        err: std::io::Error,
    },
}

/// A remote host and how to reach it.
#[derive(Debug)]
pub struct Remote {
    /// How the person named it (a host name from hosts.toml, or the URL).
    pub name: String,
    user: Option<String>,
    host: String,
    port: Option<u16>,
    proctor: String,
    ssh_args: Vec<String>,
    hosts_file: PathBuf,
    control_dir: Option<PathBuf>,
    /// `BatchMode=yes` even when stdin is a terminal: the cockpit's terminal is its own, and
    /// no ssh may prompt on it.
    pub batch: bool,
    /// What the last ssh said on stderr, and whether it has exited.
    last: Mutex<Option<Arc<SshState>>>,
    /// The client's one keep-alive HTTP/1.1 connection to this host (one ssh channel), for
    /// requests that are not event streams; `None` until the first, or after it failed.
    pub link: tokio::sync::Mutex<Option<hyper::client::conn::http1::SendRequest<LinkBody>>>,
    /// The runtime the link's connection runs on: a thread of its own, so that the link
    /// outlives the short runtimes of the CLI's blocking calls (`client::block_on`).
    link_rt: std::sync::OnceLock<tokio::runtime::Handle>,
}

/// The body type of requests on the link.
pub type LinkBody = http_body_util::Full<bytes::Bytes>;

#[derive(Debug, Default)]
struct SshState {
    stderr: Mutex<Vec<u8>>,
    exited: Mutex<Option<String>>,
}

/// A user or host word: letters, digits, `.`, `_`, `-`, not starting with `-`.
fn safe_word(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A word of a remote command: it reaches the remote shell, so only characters no shell
/// interprets.
fn plain_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The remote proctor's path: it reaches the remote shell as one word of the command, so
/// only characters no shell interprets.
fn safe_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.len() <= 4096
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b'+'))
}

/// `ssh://[user@]host[:port]` → (user, host, port).
pub fn parse_url(
    url: &str,
    file: &Path,
) -> Result<(Option<String>, String, Option<u16>), RemoteError> {
    let bad = |why| RemoteError::BadUrl {
        given: url.to_string(),
        why,
        file: file.display().to_string(),
    };
    let rest = url
        .strip_prefix("ssh://")
        .ok_or_else(|| bad("no ssh:// scheme"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (user, hostport) = match rest.split_once('@') {
        Some((u, h)) => {
            if !safe_word(u) {
                return Err(bad("the user is not a plain name"));
            }
            (Some(u.to_string()), h)
        }
        None => (None, rest),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => {
            let port: u16 = p
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?;
            (h, Some(port))
        }
        None => (hostport, None),
    };
    if !safe_word(host) {
        return Err(bad("the host is not a plain name or address"));
    }
    Ok((user, host.to_string(), port))
}

impl Remote {
    /// The host `given` names: an `ssh://` URL, or a name in `<config>/hosts.toml`.
    pub fn resolve(given: &str, config_dir: &Path) -> Result<Remote, RemoteError> {
        let hosts_file = config_dir.join(HOSTS_FILE);
        let file = hosts_file.display().to_string();
        let mut proctor = "proctor".to_string();
        let mut ssh_args = Vec::new();
        let url = if given.starts_with("ssh://") {
            given.to_string()
        } else {
            if !safe_word(given) {
                return Err(RemoteError::BadUrl {
                    given: given.to_string(),
                    why: "neither an ssh:// URL nor a host name",
                    file,
                });
            }
            let text = match std::fs::read_to_string(&hosts_file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(RemoteError::Config {
                        file,
                        why: format!(
                            "no host {given:?}: the file does not exist. Remedy: write a \
                             [hosts.{given}] table with its `url = \"ssh://[user@]host[:port]\"` \
                             there, or give the URL itself (`--host ssh://{given}`)"
                        ),
                    });
                }
                Err(err) => {
                    return Err(RemoteError::Io {
                        op: "read the hosts file",
                        err,
                    });
                }
            };
            let table: toml::Table =
                text.parse()
                    .map_err(|e: toml::de::Error| RemoteError::Config {
                        file: file.clone(),
                        why: e.message().to_string(),
                    })?;
            let entry = table
                .get("hosts")
                .and_then(|h| h.get(given))
                .and_then(|e| e.as_table())
                .ok_or_else(|| RemoteError::Config {
                    file: file.clone(),
                    why: format!(
                        "no host {given:?}: no [hosts.{given}] table. Remedy: add one with its \
                         `url = \"ssh://[user@]host[:port]\"`, or give the URL itself \
                         (`--host ssh://{given}`)"
                    ),
                })?;
            let cfg = |why: String| RemoteError::Config {
                file: file.clone(),
                why,
            };
            for (k, v) in entry {
                match (k.as_str(), v) {
                    ("url", toml::Value::String(_)) => {}
                    ("proctor", toml::Value::String(p)) => {
                        if !safe_path(p) {
                            return Err(cfg(format!(
                                "[hosts.{given}] proctor {p:?}: only letters, digits and \
                                 . _ - / + (it reaches the remote shell as one word)"
                            )));
                        }
                        proctor = p.clone();
                    }
                    ("ssh_args", toml::Value::Array(words)) => {
                        for w in words {
                            let w = w.as_str().ok_or_else(|| {
                                cfg(format!("[hosts.{given}] ssh_args: strings only"))
                            })?;
                            ssh_args.push(w.to_string());
                        }
                    }
                    (k, _) => {
                        return Err(cfg(format!(
                            "[hosts.{given}] {k}: unknown key or wrong type (url, proctor, \
                             ssh_args)"
                        )));
                    }
                }
            }
            entry
                .get("url")
                .and_then(|u| u.as_str())
                .ok_or_else(|| cfg(format!("[hosts.{given}] has no url")))?
                .to_string()
        };
        let (user, host, port) = parse_url(&url, &hosts_file)?;
        Ok(Remote {
            name: given.to_string(),
            user,
            host,
            port,
            proctor,
            ssh_args,
            hosts_file,
            control_dir: control_dir(),
            batch: false,
            last: Mutex::new(None),
            link: tokio::sync::Mutex::new(None),
            link_rt: std::sync::OnceLock::new(),
        })
    }

    /// `[user@]host` as the person would type it after `ssh`.
    pub fn dest(&self) -> String {
        let mut d = String::new();
        if let Some(u) = &self.user {
            d.push_str(u);
            d.push('@');
        }
        d.push_str(&self.host);
        if let Some(p) = self.port {
            d = format!("-p {p} {d}");
        }
        d
    }

    /// The ssh argv, up to and including the remote command's words.
    pub fn ssh_command(&self, remote: &[&str]) -> Command {
        let batch = self.batch || !std::io::IsTerminal::is_terminal(&std::io::stdin());
        self.build(batch, false, remote)
    }

    /// The ssh argv of a command a person runs at their own terminal on the host
    /// (`proctor --host H publish approve ID`): `ssh -t`, never `BatchMode` (ssh may ask the
    /// person for their own login's passphrase on this terminal; proctor reads nothing), so
    /// that sshd allocates a PTY there and the remote proctor runs at a controlling terminal
    /// on the remote machine. Every word of `remote` reaches the remote shell, so each must
    /// be a plain word (letters, digits, `.`, `_`, `-`): anything else is refused before any
    /// ssh runs.
    pub fn terminal_command(&self, remote: &[&str]) -> Result<Command, RemoteError> {
        if let Some(bad) = remote.iter().find(|w| !plain_word(w)) {
            return Err(RemoteError::BadWord {
                word: bad.to_string(),
            });
        }
        Ok(self.build(false, true, remote))
    }

    fn build(&self, batch: bool, tty: bool, remote: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        if batch {
            cmd.args(["-o", "BatchMode=yes"]);
        }
        if tty {
            cmd.arg("-t");
        }
        if let Some(dir) = &self.control_dir {
            cmd.args(["-o", "ControlMaster=auto", "-o"]);
            cmd.arg(format!("ControlPath={}/%C", dir.display()));
            cmd.args(["-o", &format!("ControlPersist={CONTROL_PERSIST_SECS}")]);
        }
        cmd.args(&self.ssh_args);
        if let Some(u) = &self.user {
            cmd.arg("-l").arg(u);
        }
        if let Some(p) = self.port {
            cmd.arg("-p").arg(p.to_string());
        }
        cmd.arg("--")
            .arg(&self.host)
            .arg(&self.proctor)
            .args(remote);
        cmd.env_remove(HOST_ENV);
        cmd
    }

    /// Opens one connection to the remote server: an ssh channel running
    /// `proctor system dial-stdio`, its stdio one end of a socket pair; the other end is
    /// returned, registered with the current tokio runtime.
    pub fn dial(&self) -> Result<tokio::net::UnixStream, RemoteError> {
        let io = |op| move |err| RemoteError::Io { op, err };
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(io("make a socket pair"))?;
        let theirs_in: OwnedFd = theirs.try_clone().map_err(io("duplicate a socket"))?.into();
        let theirs_out: OwnedFd = theirs.into();
        let mut cmd = self.ssh_command(&["system", "dial-stdio"]);
        cmd.stdin(Stdio::from(theirs_in))
            .stdout(Stdio::from(theirs_out))
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(io("run ssh"))?;
        let state = Arc::new(SshState::default());
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(state.clone());
        if let Some(mut err) = child.stderr.take() {
            let s = state.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut v = s.stderr.lock().unwrap_or_else(|e| e.into_inner());
                    if v.len() < 64 * 1024 {
                        v.extend_from_slice(&buf[..n]);
                    }
                }
            });
        }
        std::thread::spawn(move || {
            let status = child.wait();
            *state.exited.lock().unwrap_or_else(|e| e.into_inner()) = Some(match status {
                Ok(s) => s.to_string(),
                Err(e) => e.to_string(),
            });
        });
        ours.set_nonblocking(true)
            .map_err(io("set a socket non-blocking"))?;
        tokio::net::UnixStream::from_std(ours).map_err(io("register a socket"))
    }

    /// As [`Remote::dial`], the stream registered with the link's own runtime (started on
    /// first use), whose handle is returned to spawn the connection on.
    pub fn dial_on_link(
        &self,
    ) -> Result<(tokio::net::UnixStream, tokio::runtime::Handle), RemoteError> {
        let handle = match self.link_rt.get() {
            Some(h) => h.clone(),
            None => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| RemoteError::Io {
                        op: "start the link's runtime",
                        err,
                    })?;
                let h = rt.handle().clone();
                std::thread::Builder::new()
                    .name("proctor-link".into())
                    .spawn(move || rt.block_on(std::future::pending::<()>()))
                    .map_err(|err| RemoteError::Io {
                        op: "start the link's thread",
                        err,
                    })?;
                let _ = self.link_rt.set(h.clone());
                h
            }
        };
        let _in = handle.enter();
        Ok((self.dial()?, handle))
    }

    /// The error for a link that failed: what the last ssh said (waiting up to 2 s for it to
    /// exit and say it), else `fallback`.
    pub fn down(&self, fallback: &str) -> RemoteError {
        let state = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut detail = String::new();
        if let Some(s) = state {
            let deadline = Instant::now() + Duration::from_secs(2);
            while s.exited.lock().unwrap_or_else(|e| e.into_inner()).is_none()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(20));
            let err = s.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let err = String::from_utf8_lossy(&err);
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            detail = lines
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join("; ");
            if let Some(st) = s.exited.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                if detail.is_empty() {
                    detail = format!("ssh ended ({st})");
                } else {
                    detail = format!("ssh ended ({st}): {detail}");
                }
            }
        }
        if detail.is_empty() {
            detail = fallback.to_string();
        }
        RemoteError::Down {
            host: self.name.clone(),
            dest: self.dest(),
            proctor: self.proctor.clone(),
            file: self.hosts_file.display().to_string(),
            detail: crate::text::one_line(&detail, 600),
        }
    }

    /// The remote user's owner token, read on the remote side by
    /// `proctor system owner-token` (it crosses inside the ssh channel, never in argv).
    pub fn owner_token(&self) -> Result<String, RemoteError> {
        let mut cmd = self.ssh_command(&["system", "owner-token"]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd
            .output()
            .map_err(|err| RemoteError::Io { op: "run ssh", err })?;
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || token.is_empty() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(RemoteError::Down {
                host: self.name.clone(),
                dest: self.dest(),
                proctor: self.proctor.clone(),
                file: self.hosts_file.display().to_string(),
                detail: crate::text::one_line(
                    &format!(
                        "reading its owner token failed ({}): {}",
                        out.status,
                        err.trim()
                    ),
                    600,
                ),
            });
        }
        Ok(token)
    }
}

/// The private folder of the control sockets: `$XDG_RUNTIME_DIR/proctor-ssh`, else
/// `/tmp/proctor-ssh-<uid>`, made 0700 and refused unless it is ours and private. `None`
/// (no shared connection: one ssh per connection) when neither can be had.
fn control_dir() -> Option<PathBuf> {
    // SAFETY: geteuid(2) cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(|d| PathBuf::from(d).join("proctor-ssh"))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/proctor-ssh-{uid}")));
    // The socket path is this folder plus a 40-character hash: keep it under sun_path.
    if base.as_os_str().len() > 60 {
        return None;
    }
    crate::files::ensure_private_dir(&base).ok()?;
    crate::files::check_dir_is_private(&base).ok()?;
    let m = std::fs::symlink_metadata(&base).ok()?;
    if std::os::unix::fs::MetadataExt::uid(&m) != uid || !m.is_dir() {
        return None;
    }
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_hostile_ones_are_refused() {
        let f = Path::new("/x/hosts.toml");
        assert_eq!(
            parse_url("ssh://me@build.example:2222", f).unwrap(),
            (Some("me".into()), "build.example".into(), Some(2222))
        );
        assert_eq!(
            parse_url("ssh://127.0.0.1", f).unwrap(),
            (None, "127.0.0.1".into(), None)
        );
        for bad in [
            "ssh://-oProxyCommand=touch /tmp/x",
            "ssh://-p",
            "ssh://host name",
            "ssh://host;touch /tmp/x",
            "ssh://$(touch /tmp/x)",
            "ssh://me@-oProxyCommand=x",
            "ssh://host:0",
            "ssh://host:99999",
            "ssh://",
            "host",
        ] {
            assert!(parse_url(bad, f).is_err(), "{bad} was accepted");
        }
    }

    /// The terminal command is `ssh -t`, never in batch mode, every remote word after `--`
    /// and the host; a word a shell would read is refused before any ssh is built.
    #[test]
    fn the_terminal_command_is_ssh_t_and_refuses_shell_words() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Remote::resolve("ssh://me@build.example:2222", dir.path()).unwrap();
        r.batch = true;
        let cmd = r
            .terminal_command(&["--host", "local", "publish", "approve", "int-0001"])
            .unwrap();
        let argv: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(cmd.get_program(), "ssh");
        assert!(argv.iter().any(|a| a == "-t"), "{argv:?}");
        assert!(!argv.iter().any(|a| a.contains("BatchMode")), "{argv:?}");
        let dd = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            &argv[dd..],
            [
                "--",
                "build.example",
                "proctor",
                "--host",
                "local",
                "publish",
                "approve",
                "int-0001"
            ]
        );
        for bad in [
            "int-0001;touch x",
            "$(id)",
            "a b",
            "`id`",
            "",
            "x\ny",
            "'q'",
        ] {
            assert!(
                matches!(
                    r.terminal_command(&["publish", "approve", bad]),
                    Err(RemoteError::BadWord { .. })
                ),
                "{bad:?} was accepted"
            );
        }
    }
}
