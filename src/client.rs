//! The client side of the server's API: connect over the home's Unix socket, probe the
//! protocol version, start the server when it is absent (under a lock, with a bounded wait),
//! and send JSON requests with the caller's bearer token.

use std::collections::VecDeque;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
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
    #[error(
        "the server{} holds this home's lock but has not answered within {secs} s: it is \
         still starting (checking the ledger against the run records, loading the runs; \
         the sweep of what a previous server left runs once it answers). Nothing needs \
         stopping: wait and run the command again. Its log ({log}) ends with:\n{tail}",
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    StillStarting {
        pid: Option<u32>,
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "a live server (pid {pid}) holds this home's ledger ({ledger}) but does not answer at \
         {socket}, where this login looks for it{}. Remedy: stop it with `kill {pid}` (SIGTERM: \
         it stops its runs and records that in the ledger), then run the command again; the \
         next command starts a server at {socket}",
        listening_note(.listening, .socket)
    )]
    Unreachable {
        pid: u32,
        ledger: PathBuf,
        socket: PathBuf,
        /// The Unix socket paths the kernel says that process listens on.
        listening: Vec<PathBuf>,
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
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    #[error(
        "the proctor on host {host} is version {version} (protocol {theirs}); this client is \
         version {ours} (protocol {PROTOCOL}). Remedy: install the same proctor on both \
         machines (then `proctor --host {host} server stop` there)",
        ours = env!("CARGO_PKG_VERSION")
    )]
    RemoteProtocol {
        host: String,
        theirs: u64,
        version: String,
    },
    #[error(
        "the server's answer to {path} does not match this client's contract ({err}); \
         the server and the client are different builds: `proctor server stop`, then run \
         the command again"
    )]
    Contract { path: String, err: String },
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
    /// Set when the server is another host's, reached over ssh ([`crate::remote`]).
    remote: Option<std::sync::Arc<crate::remote::Remote>>,
}

/// What `GET /v1/version` says.
#[derive(Debug, Clone)]
pub struct Probe {
    pub version: String,
    pub protocol: u64,
    /// Runs a previous server left that this one is still sweeping (they show
    /// `recovering`).
    pub recovering: u64,
}

impl Client {
    /// A client for `home` that does not start anything: of the host `PROCTOR_HOST` (or
    /// `--host`) names when set, over ssh, else of the home's own server.
    pub fn new(home: &Home) -> Result<Client, ClientError> {
        let mut c = Client::local(home)?;
        if let Some(h) = std::env::var_os(crate::remote::HOST_ENV).filter(|v| !v.is_empty()) {
            let r = crate::remote::Remote::resolve(&h.to_string_lossy(), &home.config)?;
            c.remote = Some(std::sync::Arc::new(r));
        }
        Ok(c)
    }

    /// A client of the home's own server, whatever `PROCTOR_HOST` says
    /// (`proctor system dial-stdio`).
    pub fn local(home: &Home) -> Result<Client, ClientError> {
        let socket = home.socket_path();
        server::check_socket_path(&socket)?;
        Ok(Client {
            socket,
            token: None,
            remote: None,
        })
    }

    /// A client of the host `name` names, for the cockpit of several hosts:
    /// [`crate::remote::LOCAL`] is the home's own server, anything else a host as `--host`
    /// takes it, its ssh always in batch mode (the terminal is the cockpit's; no token yet:
    /// [`Client::with_token`]).
    pub fn for_host(home: &Home, name: &str) -> Result<Client, ClientError> {
        let mut c = Client::local(home)?;
        if name != crate::remote::LOCAL {
            let mut r = crate::remote::Remote::resolve(name, &home.config)?;
            r.batch = true;
            c.remote = Some(std::sync::Arc::new(r));
        }
        Ok(c)
    }

    /// The remote host this client speaks to, if any.
    pub fn remote_host(&self) -> Option<&str> {
        self.remote.as_deref().map(|r| r.name.as_str())
    }

    /// A transport error: over ssh, what ssh said and the remedy.
    fn http_err(&self, e: &dyn std::fmt::Display) -> ClientError {
        match &self.remote {
            Some(r) => r.down(&e.to_string()).into(),
            None => ClientError::Http(e.to_string()),
        }
    }

    /// A client of the server at `socket`, with no token (`proctor session hook`: the one
    /// route the kernel authorises, for a process of a run, which holds no token).
    pub fn for_socket(socket: PathBuf) -> Client {
        Client {
            socket,
            token: None,
            remote: None,
        }
    }

    /// Loads the token: `PROCTOR_TOKEN`, else the owner token file. Over ssh: the remote
    /// user's owner token, read on the remote side (docs/remote.md).
    pub fn with_token(mut self, home: &Home) -> Result<Client, ClientError> {
        if let Some(r) = &self.remote {
            self.token = Some(r.owner_token()?);
            return Ok(self);
        }
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
        if let Some(r) = &self.remote {
            let (status, body) = self
                .send_shared(r, Method::GET, crate::api::server::VERSION, None, false)
                .await?;
            if !status.is_success() {
                return Err(r
                    .down(&format!("the version probe answered {status}"))
                    .into());
            }
            let info: crate::api::server::VersionInfo =
                serde_json::from_value(body).unwrap_or_default();
            let protocol = u64::from(info.protocol);
            let version = if info.version.is_empty() {
                "?".to_string()
            } else {
                info.version
            };
            if protocol != u64::from(PROTOCOL) {
                return Err(ClientError::RemoteProtocol {
                    host: r.name.clone(),
                    theirs: protocol,
                    version,
                });
            }
            return Ok(Some(Probe {
                version,
                protocol,
                recovering: info.recovering as u64,
            }));
        }
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
            .send(
                stream,
                Method::GET,
                crate::api::server::VERSION,
                None,
                false,
            )
            .await?;
        if !status.is_success() {
            return Err(ClientError::Http(format!(
                "version probe answered {status}"
            )));
        }
        // An answer of any shape reads (its missing fields empty, an unreadable one as
        // protocol 0), so a server of another protocol is still named.
        let info: crate::api::server::VersionInfo =
            serde_json::from_value(body).unwrap_or_default();
        let protocol = u64::from(info.protocol);
        let version = if info.version.is_empty() {
            "?".to_string()
        } else {
            info.version
        };
        if protocol != u64::from(PROTOCOL) {
            return Err(ClientError::Protocol {
                socket: self.socket.clone(),
                theirs: protocol,
                version,
            });
        }
        let recovering = info.recovering as u64;
        Ok(Some(Probe {
            version,
            protocol,
            recovering,
        }))
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
        self.ensure_server_env(home, serve_args, &[]).await
    }

    /// As [`Client::ensure_server_with`], with `env` set in a server this call starts
    /// (`proctor demo` puts its provider fakes first on the server's PATH this way).
    pub async fn ensure_server_env(
        &self,
        home: &Home,
        serve_args: &[String],
        env: &[(String, std::ffi::OsString)],
    ) -> Result<(Probe, bool), ClientError> {
        if let Some(p) = self.probe().await? {
            return Ok((p, false));
        }
        if let Some(r) = &self.remote {
            // The remote `dial-stdio` starts its server itself; a probe that found none is
            // a link that failed.
            return Err(r.down("no answer").into());
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
        let log = home.server_log_path();
        // A server that holds the home's lock and does not answer yet is starting: wait
        // for it (never start a second one, never advise stopping it). One that listens
        // already, but not where we look, is named.
        if server::server_lock_held(home) {
            let started = Instant::now();
            loop {
                if let Some(p) = self.probe().await? {
                    drop(lock);
                    return Ok((p, false));
                }
                if !server::server_lock_held(home) {
                    break;
                }
                if let Some(e) = self.unreachable(home, true) {
                    return Err(e);
                }
                if started.elapsed() > START_TIMEOUT {
                    return Err(ClientError::StillStarting {
                        pid: server::read_lock_pid(&home.server_lock_path()),
                        secs: START_TIMEOUT.as_secs(),
                        tail: log_tail(&log),
                        log,
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // A live process writes this home's ledger without holding our lock: a server
        // whose socket is elsewhere. A second server would only fail on the ledger's lock.
        if let Some(e) = self.unreachable(home, false) {
            return Err(e);
        }
        let mut child = spawn_detached_server(home, serve_args, env)?;
        let started = Instant::now();
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

    /// The error for a live server that holds `home`'s ledger but does not answer at our
    /// socket: who holds the ledger's lock and where it listens, as the kernel reports them
    /// (`/proc/locks`, its descriptors, `/proc/net/unix`). With `listening_only`, a holder
    /// that listens on no socket yet (it is still starting) is not an error.
    fn unreachable(&self, home: &Home, listening_only: bool) -> Option<ClientError> {
        let ledger = home.ledger_path();
        let pid = ledger_writer(&ledger)?;
        let listening = listening_sockets(pid);
        if listening_only && listening.is_empty() {
            return None;
        }
        // It has just bound our socket: the next probe reaches it.
        if listening.contains(&self.socket) && self.socket.exists() {
            return None;
        }
        Some(ClientError::Unreachable {
            pid,
            ledger,
            socket: self.socket.clone(),
            listening,
        })
    }

    /// [`Client::call`] from synchronous code (the CLI), on a small runtime of its own.
    pub fn call_blocking(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        block_on(self.call(method, path, body))?
    }

    /// Sends one JSON request; a non-2xx answer becomes [`ClientError::Api`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let (status, value) = match &self.remote {
            Some(r) => self.send_shared(r, method, path, body, true).await?,
            None => {
                let stream = self.connect().await?;
                self.send(stream, method, path, body, true).await?
            }
        };
        if status.is_success() {
            return Ok(value);
        }
        Err(api_error(status, &value))
    }

    /// Sends one request with a typed body and reads a typed answer (the types of
    /// [`crate::api`]). A non-2xx answer becomes [`ClientError::Api`]; an answer that does
    /// not match the type, [`ClientError::Contract`].
    pub async fn request<B: serde::Serialize + ?Sized, T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let body = match body {
            Some(b) => Some(serde_json::to_value(b).map_err(|e| ClientError::Contract {
                path: path.to_string(),
                err: e.to_string(),
            })?),
            None => None,
        };
        let v = self.call(method, path, body).await?;
        serde_json::from_value(v).map_err(|e| ClientError::Contract {
            path: path.to_string(),
            err: e.to_string(),
        })
    }

    /// `GET path`, read as `T`.
    pub async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.request::<(), T>(Method::GET, path, None).await
    }

    /// [`Client::request`] from synchronous code (the CLI).
    pub fn request_blocking<B: serde::Serialize + ?Sized, T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        block_on(self.request(method, path, body))?
    }

    /// [`Client::get`] from synchronous code (the CLI).
    pub fn get_blocking<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<T, ClientError> {
        block_on(self.get(path))?
    }

    /// Opens a server-sent event stream (`GET path`, `Accept: text/event-stream`). A non-2xx
    /// answer becomes [`ClientError::Api`], like [`Client::call`]; a 2xx answer that is not an
    /// event stream is a [`ClientError::Http`]. Read the events with [`EventStream::next`].
    pub async fn stream(&self, path: &str) -> Result<EventStream, ClientError> {
        let http = |e: &dyn std::fmt::Display| self.http_err(e);
        let stream = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, "proctor")
            .header(header::ACCEPT, "text/event-stream");
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::new())).map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| http(&e))?
                .to_bytes();
            let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            return Err(api_error(status, &value));
        }
        let is_sse = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Err(ClientError::Http(format!(
                "{path} answered {status} but not with an event stream"
            )));
        }
        Ok(EventStream {
            body: resp.into_body(),
            parser: SseParser::default(),
            ready: VecDeque::new(),
            done: false,
        })
    }

    async fn connect(&self) -> Result<tokio::net::UnixStream, ClientError> {
        if let Some(r) = &self.remote {
            return Ok(r.dial()?);
        }
        tokio::net::UnixStream::connect(&self.socket)
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
        let http = |e: &dyn std::fmt::Display| self.http_err(e);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(conn);
        self.exchange(&mut sender, method, path, body, auth).await
    }

    /// One request over a host's shared link ([`crate::remote::Remote::link`]): the one
    /// HTTP/1.1 keep-alive connection of this client to that host, made again when it
    /// closed. Requests take turns on it; event streams have channels of their own.
    async fn send_shared(
        &self,
        r: &crate::remote::Remote,
        method: Method,
        path: &str,
        body: Option<Value>,
        auth: bool,
    ) -> Result<(StatusCode, Value), ClientError> {
        let http = |e: &dyn std::fmt::Display| self.http_err(e);
        let mut link = r.link.lock().await;
        // A reused link the server closed while idle (its head timeout) as a GET went out:
        // the GET is sent once more on a new one. Nothing else is sent twice.
        let mut tries = if method == Method::GET { 2 } else { 1 };
        loop {
            tries -= 1;
            let fresh = link.as_ref().is_none_or(|s| s.is_closed());
            if fresh {
                let (stream, handle) = r.dial_on_link()?;
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| http(&e))?;
                handle.spawn(conn);
                *link = Some(sender);
            }
            let Some(sender) = link.as_mut() else {
                return Err(r.down("no link").into());
            };
            let out = match sender.ready().await {
                Ok(()) => {
                    self.exchange(sender, method.clone(), path, body.clone(), auth)
                        .await
                }
                Err(e) => Err(http(&e)),
            };
            if out.is_err() {
                *link = None;
                if !fresh && tries > 0 {
                    continue;
                }
            }
            return out;
        }
    }

    async fn exchange(
        &self,
        sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        method: Method,
        path: &str,
        body: Option<Value>,
        auth: bool,
    ) -> Result<(StatusCode, Value), ClientError> {
        let http = |e: &dyn std::fmt::Display| self.http_err(e);
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

/// The error a non-2xx answer carries (`{"error": {"code", "message"}}`).
fn api_error(status: StatusCode, value: &Value) -> ClientError {
    match crate::api::ErrorBody::deserialize(value) {
        Ok(b) => ClientError::Api {
            status,
            code: b.error.code,
            message: b.error.message,
        },
        Err(_) => ClientError::Api {
            status,
            code: String::new(),
            message: "(no message)".to_string(),
        },
    }
}

/// One server-sent event, as the WHATWG HTML standard ("Server-sent events", section
/// 9.2.6, "Interpreting an event stream") dispatches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when the event named none.
    pub event: String,
    /// The `data:` lines, joined with LF.
    pub data: String,
    /// The last event id seen on the stream so far (this event's `id:` or an earlier one).
    pub id: Option<String>,
}

/// An incremental parser of the `text/event-stream` format: feed it bytes as they arrive, in
/// chunks cut anywhere, and it returns the events completed so far.
///
/// Per the standard: lines end with CRLF, LF or CR (a CRLF cut between two chunks counts
/// once); a leading byte order mark is dropped; a line starting with `:` is a comment; a
/// field's value loses one leading space; `data` lines are joined with LF; an `id` containing
/// NUL is ignored; `retry` takes ASCII digits only; a blank line dispatches the event unless
/// its data buffer is empty; an event left unterminated at the end of the stream is dropped.
/// Lines are decoded as UTF-8 with replacement characters.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl SseParser {
    /// Feeds a chunk; returns the events it completes, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.process_line(&line) {
                        out.push(ev);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        out
    }

    /// The last event id the stream set (`None` when none, or when it was reset).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection time the stream asked for, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    fn process_line(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let decoded = String::from_utf8_lossy(raw);
        let mut line: &str = &decoded;
        if !self.started {
            self.started = true;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.to_string());
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the LF after the last data line
        Some(SseEvent {
            event: if event.is_empty() {
                "message".to_string()
            } else {
                event
            },
            data,
            id: self.last_id.clone(),
        })
    }
}

/// An open event stream from [`Client::stream`].
pub struct EventStream {
    body: hyper::body::Incoming,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    done: bool,
}

impl EventStream {
    /// The next event; `Ok(None)` once the server has closed the stream. Cancel-safe: a
    /// call dropped before it completes (in `tokio::select!`) loses nothing.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ClientError> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Ok(Some(ev));
            }
            if self.done {
                return Ok(None);
            }
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(ClientError::Http(format!("the event stream broke: {e}")));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.ready.extend(self.parser.feed(&data));
                    }
                }
            }
        }
    }

    /// The last event id the stream set.
    pub fn last_event_id(&self) -> Option<&str> {
        self.parser.last_event_id()
    }
}

/// Starts `proctor serve --foreground` fully detached: its own session (no controlling
/// terminal), stdin from /dev/null, stdout and stderr appended to the server log (0600).
fn spawn_detached_server(
    home: &Home,
    serve_args: &[String],
    env: &[(String, std::ffi::OsString)],
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
    // The server and its runs speak to this home's own server, never to a remote one.
    cmd.env_remove(crate::remote::HOST_ENV);
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
    for (k, v) in env {
        cmd.env(k, v);
    }
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

/// What [`ClientError::Unreachable`] says about where the server listens.
fn listening_note(listening: &[PathBuf], socket: &Path) -> String {
    let shown = |p: &Path| crate::text::one_line(&p.display().to_string(), 300);
    match listening {
        [] => "; it listens on no Unix socket".to_string(),
        l if l.iter().any(|p| p == socket) => format!(
            "; it listens on {} but that file is gone (removed while it ran)",
            shown(socket)
        ),
        l => format!(
            "; it listens on {}",
            l.iter().map(|p| shown(p)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The pid that holds the write lock (`flock`, exclusive) of the ledger at `path`, as
/// `/proc/locks` reports it, checked against the process's open files (it has the ledger
/// open). `None` when no live process holds it.
pub fn ledger_writer(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(path).ok()?.ino();
    let real = std::fs::canonicalize(path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 4696 fe:00:10018981 0 EOF`; waiters carry `->`.
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
            return None;
        }
        let pid: u32 = f[4].parse().ok()?;
        let lock_ino: u64 = f[5].rsplit(':').next()?.parse().ok()?;
        (lock_ino == ino && has_open(pid, &real)).then_some(pid)
    })
}

/// Whether process `pid` has `file` open.
fn has_open(pid: u32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == file))
}

/// The paths of the Unix sockets process `pid` listens on (`/proc/net/unix`: the name a
/// socket was bound to, shown even once the file is removed).
pub fn listening_sockets(pid: u32) -> Vec<PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: std::collections::HashSet<String> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy();
            t.strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    // `Num RefCount Protocol Flags Type St Inode Path`; flag 0x10000 is a listening socket.
    const ACCEPTING: u32 = 0x0001_0000;
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().take(7).collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            // The path is the rest of the line (it may hold spaces); abstract names
            // (`@…`) are not files.
            let path = &line[line.find(" /")? + 1..];
            (flags & ACCEPTING != 0 && inodes.contains(*f.get(6)?)).then(|| PathBuf::from(path))
        })
        .collect()
}

/// The last lines of a log, through the sanitiser.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(8);
    crate::text::multi_line(&lines[start..].join("\n"))
}

/// The tribunal's calls (`/v1/m/tribunal`), typed by the contract (`api::tribunal`).
impl Client {
    /// The registry and each rung's probe (`probe = false`: nothing is probed).
    pub async fn tribunal_seats(
        &self,
        probe: bool,
    ) -> Result<crate::api::tribunal::SeatsReport, ClientError> {
        self.get(&crate::api::tribunal::seats(probe)).await
    }

    /// Convenes a round; the answer comes when every seat decided.
    pub async fn tribunal_convene(
        &self,
        req: &crate::api::tribunal::ConveneRequest,
    ) -> Result<crate::api::tribunal::Round, ClientError> {
        self.request(Method::POST, crate::api::tribunal::ROUNDS, Some(req))
            .await
    }

    /// Starts an agent-factory run (answered at once; the server runs it to its end).
    pub async fn factory_start(
        &self,
        req: &crate::api::factory::StartRequest,
    ) -> Result<crate::api::factory::FactoryRun, ClientError> {
        self.request(Method::POST, crate::api::factory::RUNS, Some(req))
            .await
    }

    /// Every factory run, oldest first.
    pub async fn factory_runs(&self) -> Result<Vec<crate::api::factory::FactoryRun>, ClientError> {
        self.get::<crate::api::factory::RunList>(crate::api::factory::RUNS)
            .await
            .map(|l| l.items)
    }

    /// One factory run.
    pub async fn factory_run(
        &self,
        id: &str,
    ) -> Result<crate::api::factory::FactoryRun, ClientError> {
        use crate::api::factory as f;
        self.get(&f::path(f::RUN, id)).await
    }

    /// A finished factory run's receipt.
    pub async fn factory_receipt(
        &self,
        id: &str,
    ) -> Result<crate::api::factory::ReceiptView, ClientError> {
        use crate::api::factory as f;
        self.get(&f::path(f::RUN_RECEIPT, id)).await
    }

    /// The rounds, oldest first, of a candidate and/or a run (one in progress included).
    pub async fn tribunal_rounds(
        &self,
        candidate: Option<&str>,
        run: Option<&str>,
    ) -> Result<Vec<crate::api::tribunal::Round>, ClientError> {
        self.get::<crate::api::tribunal::RoundList>(&crate::api::tribunal::rounds(candidate, run))
            .await
            .map(|l| l.items)
    }

    /// One round.
    pub async fn tribunal_round(
        &self,
        id: &str,
    ) -> Result<crate::api::tribunal::Round, ClientError> {
        use crate::api::tribunal as t;
        self.get(&t::path(t::ROUND, id)).await
    }

    /// The envelope a round judged.
    pub async fn tribunal_envelope(
        &self,
        id: &str,
    ) -> Result<crate::api::tribunal::EnvelopeView, ClientError> {
        use crate::api::tribunal as t;
        self.get(&t::path(t::ROUND_ENVELOPE, id)).await
    }

    /// Records a workspace's red-first commit.
    pub async fn tribunal_record_red(
        &self,
        req: &crate::api::tribunal::RedRequest,
    ) -> Result<crate::api::tribunal::RedRecord, ClientError> {
        self.request(Method::POST, crate::api::tribunal::RED, Some(req))
            .await
    }

    /// The red-first commits, oldest first (of one workspace).
    pub async fn tribunal_reds(
        &self,
        workspace: Option<&str>,
    ) -> Result<Vec<crate::api::tribunal::RedRecord>, ClientError> {
        self.get::<crate::api::tribunal::RedList>(&crate::api::tribunal::red(workspace))
            .await
            .map(|l| l.items)
    }
}

/// The rigs' calls (`/v1/m/rigs`, [`crate::api::rigs`]).
impl Client {
    /// Every rig (open ones first) and the engines' availability.
    pub async fn rigs(&self) -> Result<crate::api::rigs::ListItems, ClientError> {
        self.get(crate::api::rigs::RIGS).await
    }

    /// Opens a rig; the answer is the booting view.
    pub async fn rig_open(
        &self,
        req: &crate::api::rigs::OpenRequest,
    ) -> Result<crate::api::rigs::RigView, ClientError> {
        self.request(Method::POST, crate::api::rigs::RIGS, Some(req))
            .await
    }

    /// One rig.
    pub async fn rig(&self, id: &str) -> Result<crate::api::rigs::RigView, ClientError> {
        use crate::api::rigs as r;
        self.get(&r::path(r::RIG, id)).await
    }

    /// A bodiless `POST` (or `DELETE`) on one of a rig's routes (close, lock, unlock,
    /// suspend, resume), answered by the rig after it.
    pub async fn rig_verb(
        &self,
        method: Method,
        template: &str,
        id: &str,
    ) -> Result<crate::api::rigs::RigView, ClientError> {
        use crate::api::rigs as r;
        self.request::<(), _>(method, &r::path(template, id), None)
            .await
    }

    pub async fn rig_exec(
        &self,
        id: &str,
        req: &crate::api::rigs::ExecRequest,
    ) -> Result<crate::api::rigs::ExecResult, ClientError> {
        use crate::api::rigs as r;
        self.request(Method::POST, &r::path(r::EXEC, id), Some(req))
            .await
    }

    pub async fn rig_type(
        &self,
        id: &str,
        req: &crate::api::rigs::TypeRequest,
    ) -> Result<crate::api::rigs::RigView, ClientError> {
        use crate::api::rigs as r;
        self.request(Method::POST, &r::path(r::INPUT, id), Some(req))
            .await
    }

    pub async fn rig_resize(
        &self,
        id: &str,
        rows: u16,
        cols: u16,
    ) -> Result<crate::api::rigs::RigView, ClientError> {
        use crate::api::rigs as r;
        self.request(
            Method::POST,
            &r::path(r::RESIZE, id),
            Some(&r::SizeBody { rows, cols }),
        )
        .await
    }

    pub async fn rig_screen(&self, id: &str) -> Result<crate::runs::ScreenSnapshot, ClientError> {
        use crate::api::rigs as r;
        self.get(&r::path(r::SCREEN, id)).await
    }

    pub async fn rig_audit(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<crate::api::rigs::AuditPage, ClientError> {
        self.get(&crate::api::rigs::audit(id, after, limit)).await
    }

    pub async fn rig_fetch(&self, id: &str) -> Result<crate::api::rigs::FetchReport, ClientError> {
        use crate::api::rigs as r;
        self.request::<(), _>(Method::POST, &r::path(r::FETCH, id), None)
            .await
    }

    /// A file of the guest's, as raw bytes (at most `model::FILE_MAX`).
    pub async fn rig_get_file(&self, id: &str, path: &str) -> Result<Vec<u8>, ClientError> {
        self.raw(Method::GET, &crate::api::rigs::files(id, path, None), None)
            .await
    }

    /// Copies bytes into the guest at `path` with `mode`.
    pub async fn rig_put_file(
        &self,
        id: &str,
        path: &str,
        mode: u32,
        bytes: Vec<u8>,
    ) -> Result<(), ClientError> {
        self.raw(
            Method::PUT,
            &crate::api::rigs::files(id, path, Some(mode)),
            Some(bytes),
        )
        .await
        .map(|_| ())
    }

    /// `GET path`, its answer's body written to `out` as it arrives (not held in memory);
    /// returns how many bytes were written (`dest` names `out` in an error). A non-2xx answer becomes [`ClientError::Api`]
    /// (nothing is written); a body cut short is a [`ClientError::Http`].
    pub async fn download(
        &self,
        path: &str,
        out: &mut (impl std::io::Write + Send),
        dest: &Path,
    ) -> Result<u64, ClientError> {
        let http = |e: &dyn std::fmt::Display| ClientError::Http(e.to_string());
        let stream = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, "proctor");
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::new())).map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let status = resp.status();
        let mut body = resp.into_body();
        if !status.is_success() {
            let bytes = body.collect().await.map_err(|e| http(&e))?.to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(api_error(status, &value));
        }
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| http(&e))?;
            if let Ok(data) = frame.into_data() {
                out.write_all(&data).map_err(|err| ClientError::Io {
                    op: "write",
                    path: dest.to_path_buf(),
                    err,
                })?;
                n += data.len() as u64;
            }
        }
        Ok(n)
    }

    /// One request with a raw body (`application/octet-stream`) whose answer is read as raw
    /// bytes; a non-2xx answer becomes [`ClientError::Api`].
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, ClientError> {
        let http = |e: &dyn std::fmt::Display| self.http_err(e);
        let stream = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "proctor");
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/octet-stream");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| http(&e))?
            .to_bytes();
        if !status.is_success() {
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(api_error(status, &value));
        }
        Ok(bytes.to_vec())
    }
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

/// The approval flow's calls to the server ([`crate::publish::approve::Server`]), made with
/// the contract's paths and types.
impl crate::publish::approve::Server for Client {
    fn open_approval(
        &self,
        intent: &str,
    ) -> Result<crate::api::publish::OpenedApproval, crate::publish::approve::ServerError> {
        flow(self.request_blocking::<(), _>(
            Method::POST,
            &crate::api::publish::approvals(intent),
            None,
        ))
    }

    fn check_approval(
        &self,
        approval: &str,
    ) -> Result<crate::api::publish::CheckView, crate::publish::approve::ServerError> {
        flow(self.request_blocking::<(), _>(
            Method::POST,
            &crate::api::publish::check(approval),
            None,
        ))
    }

    fn refuse_approval(
        &self,
        approval: &str,
        req: &crate::api::publish::RefusalRequest,
    ) -> Result<crate::api::publish::RefusalAnswer, crate::publish::approve::ServerError> {
        flow(self.request_blocking(
            Method::POST,
            &crate::api::publish::refusal(approval),
            Some(req),
        ))
    }

    fn authorise(
        &self,
        approval: &str,
        req: &crate::api::publish::EnvelopeRequest,
    ) -> Result<crate::api::publish::MintedAnswer, crate::publish::approve::ServerError> {
        flow(self.request_blocking(
            Method::POST,
            &crate::api::publish::authorisation(approval),
            Some(req),
        ))
    }

    fn spend(
        &self,
        approval: &str,
        req: &crate::api::publish::EnvelopeRequest,
    ) -> Result<crate::api::publish::SpendAnswer, crate::publish::approve::ServerError> {
        flow(self.request_blocking(
            Method::POST,
            &crate::api::publish::spend(approval),
            Some(req),
        ))
    }

    fn sign_receipt(
        &self,
        approval: &str,
        req: &crate::api::publish::ReceiptRequest,
    ) -> Result<crate::api::publish::SignedReceipt, crate::publish::approve::ServerError> {
        flow(self.request_blocking(
            Method::POST,
            &crate::api::publish::receipt(approval),
            Some(req),
        ))
    }

    fn passphrase_record(
        &self,
        key_id: &str,
    ) -> Result<crate::api::authority::RecordView, crate::publish::approve::ServerError> {
        flow(self.get_blocking(&crate::api::authority::passphrase(key_id)))
    }

    fn passphrase_wrong(
        &self,
        key_id: &str,
    ) -> Result<crate::api::authority::RecordView, crate::publish::approve::ServerError> {
        flow(self.request_blocking::<(), _>(
            Method::POST,
            &crate::api::authority::passphrase_wrong(key_id),
            None,
        ))
    }

    fn passphrase_right(
        &self,
        key_id: &str,
        req: &crate::api::authority::RightRequest,
    ) -> Result<crate::api::authority::RecordView, crate::publish::approve::ServerError> {
        flow(self.request_blocking(
            Method::POST,
            &crate::api::authority::passphrase_right(key_id),
            Some(req),
        ))
    }
}

/// A client's answer as the approval flow names it: the server's refusal, an answer that
/// does not match the contract, or a server that could not be reached.
fn flow<T>(r: Result<T, ClientError>) -> Result<T, crate::publish::approve::ServerError> {
    use crate::publish::approve::ServerError;
    r.map_err(|e| match e {
        ClientError::Api {
            status,
            code,
            message,
        } => ServerError::Refused {
            status: status.to_string(),
            code,
            message,
        },
        e @ ClientError::Contract { .. } => ServerError::Answer(e.to_string()),
        other => ServerError::Unreachable(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(str::to_string),
        }
    }

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        chunks.iter().flat_map(|c| p.feed(c)).collect()
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let input = b"\xef\xbb\xbf: keep-alive\n\nevent: output\nid: 7\ndata: {\"a\":\ndata:1}\n\n\
                      data\n\nevent: end\ndata: x\n\n";
        assert_eq!(
            all(&[input]),
            [
                ev("output", "{\"a\":\n1}", Some("7")),
                ev("message", "", Some("7")),
                ev("end", "x", Some("7")),
            ]
        );
    }

    #[test]
    fn every_split_point_and_line_ending_gives_the_same_events() {
        let want = vec![
            ev("output", "one\ntwo", Some("3")),
            ev("lag", " spaced", Some("3")),
        ];
        for eol in ["\n", "\r", "\r\n"] {
            let text = format!(
                "event: output{eol}id:3{eol}data: one{eol}data: two{eol}{eol}event:lag{eol}data:  spaced{eol}{eol}"
            );
            let bytes = text.as_bytes();
            assert_eq!(all(&[bytes]), want, "{eol:?} in one chunk");
            for cut in 0..=bytes.len() {
                assert_eq!(
                    all(&[&bytes[..cut], &bytes[cut..]]),
                    want,
                    "{eol:?} cut at {cut}"
                );
            }
            let singles: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(all(&singles), want, "{eol:?} byte by byte");
        }
    }

    #[test]
    fn no_data_no_event_and_unterminated_events_are_dropped() {
        assert_eq!(all(&[b"event: lonely\n\n"]), []);
        assert_eq!(all(&[b"data: half"]), []);
        // The event name does not leak into the next event.
        assert_eq!(
            all(&[b"event: a\n\ndata: b\n\n"]),
            [ev("message", "b", None)]
        );
    }

    #[test]
    fn id_with_nul_is_ignored_empty_id_resets_and_retry_needs_digits() {
        let mut p = SseParser::default();
        let evs = p.feed(
            b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nretry: 12x\nretry: 250\nid\ndata: c\n\n",
        );
        assert_eq!(
            evs,
            [
                ev("message", "a", Some("1")),
                ev("message", "b", Some("1")),
                ev("message", "c", None),
            ]
        );
        assert_eq!(p.retry(), Some(250));
        assert_eq!(p.last_event_id(), None);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(
            all(&[b"data: a\xffb\n\n"]),
            [ev("message", "a\u{fffd}b", None)]
        );
    }
}
