//! The client side of the server's API: connect over the home's Unix socket, probe the
//! protocol version, start the server when it is absent (under a lock, with a bounded wait),
//! and send JSON requests with the caller's bearer token.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::files;
use crate::home::Home;
use crate::server::{self, PROTOCOL};

/// Environment variable that supplies a bearer token other than the owner's.
pub const TOKEN_ENV: &str = "PROCTOR_TOKEN";
/// How long a client waits for a server it started.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error("no server runs for this home (socket {0}). Start one with `proctor serve`")]
    NotRunning(PathBuf),
    #[error(
        "the server at {socket} speaks protocol {theirs} (version {version}); this client \
         speaks protocol {PROTOCOL}. Remedy: `proctor server stop`, then run the command again"
    )]
    Protocol {
        socket: PathBuf,
        theirs: u64,
        version: String,
    },
    #[error("the server did not come up within {secs} s; its log ({log}) ends with:\n{tail}")]
    StartTimeout {
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error("the server exited while starting ({status}); its log ({log}) ends with:\n{tail}")]
    StartFailed {
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "no token: {path} is missing and {TOKEN_ENV} is unset. The owner token is made when \
         the server first starts; run `proctor serve`"
    )]
    NoToken { path: PathBuf },
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    #[error("request to the server failed: {0}")]
    Http(String),
    #[error("the server answered {status}: {message}")]
    Api {
        status: StatusCode,
        code: String,
        message: String,
    },
}

/// A connection target: the socket and the token to present.
#[derive(Debug, Clone)]
pub struct Client {
    pub socket: PathBuf,
    token: Option<String>,
}

/// What `GET /v1/version` says.
#[derive(Debug, Clone)]
pub struct Probe {
    pub version: String,
    pub protocol: u64,
}

impl Client {
    /// A client for `home` that does not start anything.
    pub fn new(home: &Home) -> Result<Client, ClientError> {
        let socket = home.socket_path();
        server::check_socket_path(&socket)?;
        Ok(Client {
            socket,
            token: None,
        })
    }

    /// Loads the token: `PROCTOR_TOKEN`, else the owner token file.
    pub fn with_token(mut self, home: &Home) -> Result<Client, ClientError> {
        if let Some(t) = std::env::var_os(TOKEN_ENV).filter(|v| !v.is_empty()) {
            self.token = Some(t.to_string_lossy().trim().to_string());
            return Ok(self);
        }
        let path = home.owner_token_path();
        let f = match files::open_private_read(&path) {
            Ok(f) => f,
            Err(files::FilesError::Io { err, .. })
                if err.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(ClientError::NoToken { path });
            }
            Err(e) => return Err(e.into()),
        };
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::BufReader::new(f), &mut s).map_err(|err| {
            ClientError::Io {
                op: "read",
                path: path.clone(),
                err,
            }
        })?;
        self.token = Some(s.trim().to_string());
        Ok(self)
    }

    /// The bearer token this client presents, if one was loaded (for clients that open their
    /// own streams, such as the cockpit).
    pub fn bearer(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Probes the server: `Ok(None)` when nothing listens, an error when it speaks another
    /// protocol.
    pub async fn probe(&self) -> Result<Option<Probe>, ClientError> {
        let stream = match tokio::net::UnixStream::connect(&self.socket).await {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None);
            }
            Err(err) => {
                return Err(ClientError::Io {
                    op: "connect to",
                    path: self.socket.clone(),
                    err,
                });
            }
        };
        let (status, body) = self
            .send(stream, Method::GET, "/v1/version", None, false)
            .await?;
        if !status.is_success() {
            return Err(ClientError::Http(format!(
                "version probe answered {status}"
            )));
        }
        let protocol = body["protocol"].as_u64().unwrap_or(0);
        let version = body["version"].as_str().unwrap_or("?").to_string();
        if protocol != u64::from(PROTOCOL) {
            return Err(ClientError::Protocol {
                socket: self.socket.clone(),
                theirs: protocol,
                version,
            });
        }
        Ok(Some(Probe { version, protocol }))
    }

    /// Makes sure a server runs for `home`, starting one if needed. Returns the probe and
    /// whether this call started it.
    pub async fn ensure_server(&self, home: &Home) -> Result<(Probe, bool), ClientError> {
        self.ensure_server_with(home, &[]).await
    }

    /// As [`Client::ensure_server`], passing `serve_args` to a server this call starts.
    pub async fn ensure_server_with(
        &self,
        home: &Home,
        serve_args: &[String],
    ) -> Result<(Probe, bool), ClientError> {
        if let Some(p) = self.probe().await? {
            return Ok((p, false));
        }
        home.ensure().map_err(server::ServerError::from)?;
        // Only one client starts a server; the others wait on the lock and then find it.
        let lock_path = home.start_lock_path();
        let lock = files::open_private_append(&lock_path)?;
        let lock = tokio::task::spawn_blocking(move || lock.lock().map(|_| lock))
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?
            .map_err(|err| ClientError::Io {
                op: "lock",
                path: lock_path.clone(),
                err,
            })?;
        if let Some(p) = self.probe().await? {
            drop(lock);
            return Ok((p, false));
        }
        let mut child = spawn_detached_server(home, serve_args)?;
        let started = Instant::now();
        let log = home.server_log_path();
        loop {
            if let Some(p) = self.probe().await? {
                drop(lock);
                return Ok((p, true));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(ClientError::StartFailed {
                    status: status.to_string(),
                    tail: log_tail(&log),
                    log,
                });
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(ClientError::StartTimeout {
                    secs: START_TIMEOUT.as_secs(),
                    tail: log_tail(&log),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Sends one JSON request; a non-2xx answer becomes [`ClientError::Api`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    ClientError::NotRunning(self.socket.clone())
                }
                _ => ClientError::Io {
                    op: "connect to",
                    path: self.socket.clone(),
                    err: e,
                },
            })?;
        let (status, value) = self.send(stream, method, path, body, true).await?;
        if status.is_success() {
            return Ok(value);
        }
        Err(ClientError::Api {
            status,
            code: value["error"]["code"].as_str().unwrap_or("").to_string(),
            message: value["error"]["message"]
                .as_str()
                .unwrap_or("(no message)")
                .to_string(),
        })
    }

    async fn send(
        &self,
        stream: tokio::net::UnixStream,
        method: Method,
        path: &str,
        body: Option<Value>,
        auth: bool,
    ) -> Result<(StatusCode, Value), ClientError> {
        let http = |e: &dyn std::fmt::Display| ClientError::Http(e.to_string());
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "proctor");
        if auth && let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let bytes = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(&v).map_err(|e| http(&e))?)
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(bytes)).map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| http(&e))?
            .to_bytes();
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).map_err(|e| http(&e))?
        };
        Ok((status, value))
    }
}

/// Starts `proctor serve --foreground` fully detached: its own session (no controlling
/// terminal), stdin from /dev/null, stdout and stderr appended to the server log (0600).
fn spawn_detached_server(
    home: &Home,
    serve_args: &[String],
) -> Result<std::process::Child, ClientError> {
    let exe = std::env::current_exe().map_err(|err| ClientError::Io {
        op: "find",
        path: PathBuf::from("the proctor executable"),
        err,
    })?;
    let log_path = home.server_log_path();
    let log = files::open_private_append(&log_path)?;
    let log2 = log.try_clone().map_err(|err| ClientError::Io {
        op: "duplicate",
        path: log_path.clone(),
        err,
    })?;
    let mut cmd = std::process::Command::new(&exe);
    // An XDG home is resolved by the child the same way; a single-folder home is passed on.
    if let Some(root) = &home.root {
        cmd.arg("--home").arg(root);
    }
    cmd.args(["serve", "--foreground"])
        .args(serve_args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .current_dir("/");
    // SAFETY: setsid is async-signal-safe; it gives the server its own session, so it has
    // no controlling terminal and the client's hang-up never reaches it.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|err| ClientError::Io {
        op: "start",
        path: exe,
        err,
    })
}

/// The last lines of a log, through the sanitiser.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(8);
    crate::text::multi_line(&lines[start..].join("\n"))
}

/// Runs an async client action on a small runtime (the CLI is synchronous).
pub fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| ClientError::Io {
            op: "start the async runtime for",
            path: PathBuf::from("the client"),
            err,
        })?;
    Ok(rt.block_on(f))
}
