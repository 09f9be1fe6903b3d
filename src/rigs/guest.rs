//! The guest agent and its protocol: the one channel through which the host runs programs
//! and moves files in a rig. The agent is this binary (`proctor rig guest-agent`, hidden),
//! running unprivileged-by-design inside the guest; the host reaches it over a Unix socket
//! only the host holds (a VM: QEMU's virtio-serial port `proctor.agent` as
//! `<rig>/agent.sock`; a namespace rig: the agent listens on `/proctor/run/agent.sock`,
//! bind-mounted from `<rig>/run/`).
//!
//! Frames: a 4-byte big-endian length, then that many bytes of JSON ([`Frame`]), at most
//! [`FRAME_MAX`]. Every request carries an `id`; the agent answers each in its own thread,
//! so answers may come out of order and the client matches them by `id`. What the agent
//! sends is untrusted (it comes from the guest): the client bounds every size it reads.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::RigError;
use super::model::{EXEC_OUTPUT_MAX, ExecRequest, ExecResult, FILE_MAX};

/// The largest frame either side reads (a 16 MiB file in base64, and its envelope).
pub const FRAME_MAX: usize = 24 << 20;

/// The protocol's version: the host refuses an agent that answers `hello` with another.
pub const PROTOCOL: u32 = 1;

/// One frame either way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame<T> {
    pub id: u64,
    #[serde(flatten)]
    pub body: T,
}

/// What the host asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Hello,
    Exec(ExecRequest),
    /// Writes a file (parents created with 0755, the file with `mode`).
    Put {
        path: String,
        data_b64: String,
        mode: u32,
    },
    /// Reads a regular file (never through a symlink's target outside the guest: the guest's
    /// own filesystem is all there is); more than `max` bytes is refused.
    Get {
        path: String,
        max: usize,
    },
    /// Powers the guest off (VM: `poweroff -f` after a sync; namespace: the agent exits,
    /// and the sandbox with it).
    Shutdown,
}

/// What the agent answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Response {
    Hello {
        protocol: u32,
        /// The guest's `uname -srm` as the agent reads it.
        kernel: String,
        /// The agent's pid in the guest.
        pid: u32,
    },
    Exec(ExecResult),
    Done,
    Data {
        data_b64: String,
    },
    /// `code`: `not_found`, `too_large`, `not_regular`, `io`, `bad_request`.
    Error {
        code: String,
        message: String,
    },
}

/// Writes one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, frame: &Frame<T>) -> std::io::Result<()> {
    let body = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
    if body.len() > FRAME_MAX {
        return Err(std::io::Error::other(format!(
            "frame of {} bytes is over the {FRAME_MAX}-byte bound",
            body.len()
        )));
    }
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(&body)?;
    w.flush()
}

/// Reads one frame (`Ok(None)` at a clean end of stream). A length over [`FRAME_MAX`] or a
/// body that is not the expected JSON is an error, and nothing of it is allocated first.
pub fn read_frame<T: serde::de::DeserializeOwned>(
    r: &mut impl Read,
) -> std::io::Result<Option<Frame<T>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_MAX {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes is over the {FRAME_MAX}-byte bound"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(std::io::Error::other)
}

/// The host's side of the channel: one connection, a reader thread that hands each answer to
/// the caller waiting on its `id`. Cloneable; every method blocks only its own caller.
#[derive(Clone)]
pub struct AgentClient {
    inner: std::sync::Arc<ClientInner>,
}

type Waiter = std::sync::mpsc::SyncSender<Result<Response, String>>;

#[derive(Default)]
struct Pending {
    waiters: std::collections::HashMap<u64, Waiter>,
    /// Set once the channel is dead: why.
    dead: Option<String>,
}

struct ClientInner {
    writer: std::sync::Mutex<std::os::unix::net::UnixStream>,
    pending: std::sync::Arc<std::sync::Mutex<Pending>>,
    next: std::sync::atomic::AtomicU64,
    /// The guest's kernel line and the agent's pid, from `hello`.
    hello: std::sync::Mutex<(String, u32)>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Maps an agent's error answer to the rigs' error.
pub fn agent_error(code: &str, message: &str) -> RigError {
    let msg = format!("guest agent: {}", crate::text::one_line(message, 500));
    match code {
        "not_found" => RigError::NotFound(msg),
        "too_large" => RigError::TooLarge(msg),
        "not_regular" | "bad_request" => RigError::BadRequest(msg),
        _ => RigError::Internal(msg),
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AgentClient {
    /// Connects to `socket` (retrying until `deadline`: a booting VM's QEMU may not listen
    /// yet, and its guest's agent may not be up), then checks `hello`'s protocol.
    pub fn connect(
        socket: &std::path::Path,
        deadline: std::time::Instant,
    ) -> Result<AgentClient, RigError> {
        AgentClient::connect_while(socket, deadline, || None)
    }

    /// [`AgentClient::connect`], giving up early when `ended` says why the engine that would
    /// serve the agent is gone (a sandbox that failed at its start answers nothing, ever).
    pub fn connect_while(
        socket: &std::path::Path,
        deadline: std::time::Instant,
        ended: impl Fn() -> Option<String>,
    ) -> Result<AgentClient, RigError> {
        use std::time::{Duration, Instant};
        let mut last;
        loop {
            match std::os::unix::net::UnixStream::connect(socket) {
                Ok(stream) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let client = AgentClient::over(stream)?;
                    match client.call(Request::Hello, left.max(Duration::from_millis(200))) {
                        Ok(Response::Hello {
                            protocol,
                            kernel,
                            pid,
                        }) => {
                            if protocol != PROTOCOL {
                                return Err(RigError::Internal(format!(
                                    "the guest agent speaks protocol {protocol}, this host \
                                     speaks {PROTOCOL}: the guest's proctor binary is another \
                                     version. Remedy: relaunch the rig with this binary"
                                )));
                            }
                            *lock(&client.inner.hello) = (kernel.chars().take(256).collect(), pid);
                            return Ok(client);
                        }
                        Ok(other) => {
                            return Err(RigError::Internal(format!(
                                "the guest agent answered hello with {other:?}"
                            )));
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(e) => last = e.to_string(),
            }
            if let Some(why) = ended() {
                return Err(RigError::Unavailable(format!(
                    "the guest agent at {} will not answer: {why}",
                    socket.display()
                )));
            }
            if Instant::now() >= deadline {
                return Err(RigError::Unavailable(format!(
                    "the guest agent at {} did not answer before the boot deadline ({last})",
                    socket.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client over an already connected stream (no `hello` sent).
    pub fn over(stream: std::os::unix::net::UnixStream) -> Result<AgentClient, RigError> {
        let mut reader = stream.try_clone().map_err(RigError::internal)?;
        let pending = std::sync::Arc::new(std::sync::Mutex::new(Pending::default()));
        let p2 = std::sync::Arc::clone(&pending);
        std::thread::Builder::new()
            .name("rig-agent-reader".into())
            .spawn(move || {
                let why = loop {
                    match read_frame::<Response>(&mut reader) {
                        Ok(Some(f)) => {
                            if let Some(w) = lock(&p2).waiters.remove(&f.id) {
                                let _ = w.try_send(Ok(f.body));
                            }
                        }
                        Ok(None) => break "the guest agent closed the channel".to_string(),
                        Err(e) => break format!("the guest agent's channel failed: {e}"),
                    }
                };
                let mut p = lock(&p2);
                p.dead = Some(why.clone());
                for (_, w) in p.waiters.drain() {
                    let _ = w.try_send(Err(why.clone()));
                }
            })
            .map_err(RigError::internal)?;
        Ok(AgentClient {
            inner: std::sync::Arc::new(ClientInner {
                writer: std::sync::Mutex::new(stream),
                pending,
                next: std::sync::atomic::AtomicU64::new(1),
                hello: std::sync::Mutex::new((String::new(), 0)),
            }),
        })
    }

    /// The guest's kernel line (`uname -srm`) and the agent's pid, as `hello` said.
    pub fn hello(&self) -> (String, u32) {
        lock(&self.inner.hello).clone()
    }

    /// Sends one request and waits for its answer (at most `timeout`).
    pub fn call(&self, req: Request, timeout: std::time::Duration) -> Result<Response, RigError> {
        let id = self
            .inner
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        {
            let mut p = lock(&self.inner.pending);
            if let Some(why) = &p.dead {
                return Err(RigError::Unavailable(why.clone()));
            }
            p.waiters.insert(id, tx);
        }
        let op = match &req {
            Request::Hello => "hello",
            Request::Exec(_) => "exec",
            Request::Put { .. } => "put",
            Request::Get { .. } => "get",
            Request::Shutdown => "shutdown",
        };
        let sent = {
            let mut w = lock(&self.inner.writer);
            let _ = w.set_write_timeout(Some(timeout.max(std::time::Duration::from_secs(1))));
            write_frame(&mut *w, &Frame { id, body: req })
        };
        if let Err(e) = sent {
            lock(&self.inner.pending).waiters.remove(&id);
            return Err(RigError::Unavailable(format!(
                "cannot send {op} to the guest agent: {e}"
            )));
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(why)) => Err(RigError::Unavailable(why)),
            Err(_) => {
                lock(&self.inner.pending).waiters.remove(&id);
                Err(RigError::Internal(format!(
                    "the guest agent gave no answer to {op} within {} s",
                    timeout.as_secs_f64()
                )))
            }
        }
    }

    /// Runs a program in the guest; the wait is the request's deadline plus a margin.
    pub fn exec(&self, req: &ExecRequest) -> Result<ExecResult, RigError> {
        let secs = exec_timeout(req);
        match self.call(
            Request::Exec(req.clone()),
            std::time::Duration::from_secs(secs + 15),
        )? {
            Response::Exec(r) => {
                use base64::Engine;
                let b = base64::engine::general_purpose::STANDARD;
                // Bounded: what the agent says comes from the guest.
                for s in [&r.stdout_b64, &r.stderr_b64] {
                    if s.len() > EXEC_OUTPUT_MAX.div_ceil(3) * 4 + 4 || b.decode(s).is_err() {
                        return Err(RigError::Internal(
                            "the guest agent returned an exec output over its bound or not \
                             base64"
                                .into(),
                        ));
                    }
                }
                Ok(r)
            }
            Response::Error { code, message } => Err(agent_error(&code, &message)),
            other => Err(RigError::Internal(format!(
                "the guest agent answered exec with {other:?}"
            ))),
        }
    }

    /// Writes a file in the guest.
    pub fn put(&self, path: &str, bytes: &[u8], mode: u32) -> Result<(), RigError> {
        use base64::Engine;
        if bytes.len() > FILE_MAX {
            return Err(RigError::TooLarge(format!(
                "{} bytes is over the {FILE_MAX}-byte bound of a file copied in",
                bytes.len()
            )));
        }
        let req = Request::Put {
            path: path.to_string(),
            data_b64: base64::engine::general_purpose::STANDARD.encode(bytes),
            mode,
        };
        match self.call(req, std::time::Duration::from_secs(60))? {
            Response::Done => Ok(()),
            Response::Error { code, message } => Err(agent_error(&code, &message)),
            other => Err(RigError::Internal(format!(
                "the guest agent answered put with {other:?}"
            ))),
        }
    }

    /// Reads a regular file from the guest, at most `max` bytes.
    pub fn get(&self, path: &str, max: usize) -> Result<Vec<u8>, RigError> {
        use base64::Engine;
        let max = max.min(FILE_MAX);
        let req = Request::Get {
            path: path.to_string(),
            max,
        };
        match self.call(req, std::time::Duration::from_secs(60))? {
            Response::Data { data_b64 } => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(data_b64.as_bytes())
                    .map_err(|e| RigError::Internal(format!("the guest agent's data: {e}")))?;
                if data.len() > max {
                    return Err(RigError::TooLarge(format!(
                        "the guest sent {} bytes of {path}, over the {max}-byte bound",
                        data.len()
                    )));
                }
                Ok(data)
            }
            Response::Error { code, message } => Err(agent_error(&code, &message)),
            other => Err(RigError::Internal(format!(
                "the guest agent answered get with {other:?}"
            ))),
        }
    }

    /// Asks the guest to power off (the answer comes before it does).
    pub fn shutdown(&self, timeout: std::time::Duration) -> Result<(), RigError> {
        match self.call(Request::Shutdown, timeout)? {
            Response::Done => Ok(()),
            Response::Error { code, message } => Err(agent_error(&code, &message)),
            other => Err(RigError::Internal(format!(
                "the guest agent answered shutdown with {other:?}"
            ))),
        }
    }
}

/// An exec's deadline in seconds: default 60, at most 3600, at least 1.
pub fn exec_timeout(req: &ExecRequest) -> u64 {
    req.timeout_secs.unwrap_or(60).clamp(1, 3600)
}

/// Where the agent listens or which device it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentChannel {
    /// A character device (a VM's virtio-serial port): one stream, reopened if it ends.
    Device(std::path::PathBuf),
    /// A Unix socket to listen on (a namespace rig): one connection at a time.
    Listen(std::path::PathBuf),
}

/// `proctor rig guest-agent`: serves the protocol on `channel` until `shutdown` or the
/// channel's end. Runs inside the guest.
pub fn serve(channel: &AgentChannel) -> Result<(), RigError> {
    match channel {
        AgentChannel::Listen(path) => {
            let _ = std::fs::remove_file(path);
            let l = std::os::unix::net::UnixListener::bind(path)
                .map_err(|e| RigError::Internal(format!("bind {}: {e}", path.display())))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            loop {
                let (s, _) = l.accept().map_err(RigError::internal)?;
                let w = s.try_clone().map_err(RigError::internal)?;
                serve_stream(s, Box::new(w));
            }
        }
        AgentChannel::Device(path) => loop {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| RigError::Internal(format!("open {}: {e}", path.display())))?;
            let w = f.try_clone().map_err(RigError::internal)?;
            serve_stream(f, Box::new(w));
            std::thread::sleep(std::time::Duration::from_millis(200));
        },
    }
}

type SharedWriter = std::sync::Arc<std::sync::Mutex<Box<dyn Write + Send>>>;

/// Serves one stream until it ends or carries a frame that cannot be resynchronised.
pub fn serve_stream(mut r: impl Read, w: Box<dyn Write + Send>) {
    let w: SharedWriter = std::sync::Arc::new(std::sync::Mutex::new(w));
    loop {
        let mut len = [0u8; 4];
        if r.read_exact(&mut len).is_err() {
            return;
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > FRAME_MAX {
            // The stream cannot be resynchronised: answer and drop it.
            answer(
                &w,
                0,
                error(
                    "bad_request",
                    &format!("a frame of {len} bytes is over the bound"),
                ),
            );
            return;
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let frame: Frame<Request> = match serde_json::from_slice(&body) {
            Ok(f) => f,
            Err(e) => {
                let id = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("id").and_then(|i| i.as_u64()))
                    .unwrap_or(0);
                answer(&w, id, error("bad_request", &format!("a bad request: {e}")));
                continue;
            }
        };
        let w2 = std::sync::Arc::clone(&w);
        let _ = std::thread::Builder::new()
            .name(format!("agent-req-{}", frame.id))
            .spawn(move || {
                let shutdown = matches!(frame.body, Request::Shutdown);
                let resp = handle(frame.body);
                answer(&w2, frame.id, resp);
                if shutdown {
                    power_off();
                }
            });
    }
}

fn answer(w: &SharedWriter, id: u64, body: Response) {
    let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
    let _ = write_frame(&mut *g, &Frame { id, body });
}

fn error(code: &str, message: &str) -> Response {
    Response::Error {
        code: code.into(),
        message: message.into(),
    }
}

fn power_off() {
    // SAFETY: plain system calls without pointers.
    unsafe {
        libc::sync();
        if libc::reboot(libc::LINUX_REBOOT_CMD_POWER_OFF) != 0 {
            // No CAP_SYS_BOOT: end every other process of the namespace instead.
            libc::kill(-1, libc::SIGKILL);
        }
    }
    std::process::exit(0);
}

fn uname() -> String {
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        let f = |p: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(p.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

/// Answers one request (in the guest).
pub fn handle(req: Request) -> Response {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    match req {
        Request::Hello => Response::Hello {
            protocol: PROTOCOL,
            kernel: uname(),
            pid: std::process::id(),
        },
        Request::Exec(e) => match run_exec(&e) {
            Ok(r) => Response::Exec(r),
            Err(r) => r,
        },
        Request::Put {
            path,
            data_b64,
            mode,
        } => {
            let Ok(data) = b64.decode(data_b64.as_bytes()) else {
                return error("bad_request", "data_b64 is not base64");
            };
            if data.len() > FILE_MAX {
                return error("too_large", &format!("over the {FILE_MAX}-byte bound"));
            }
            match put_file(&path, &data, mode) {
                Ok(()) => Response::Done,
                Err(e) => e,
            }
        }
        Request::Get { path, max } => match get_file(&path, max.min(FILE_MAX)) {
            Ok(d) => Response::Data {
                data_b64: b64.encode(d),
            },
            Err(e) => e,
        },
        Request::Shutdown => Response::Done,
    }
}

fn io_error(what: &str, path: &str, e: std::io::Error) -> Response {
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        "not_found"
    } else {
        "io"
    };
    error(code, &format!("{what} {path}: {e}"))
}

fn put_file(path: &str, data: &[u8], mode: u32) -> Result<(), Response> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let p = std::path::Path::new(path);
    if !p.is_absolute() || p.file_name().is_none() {
        return Err(error(
            "bad_request",
            &format!("{path:?} is not an absolute file path"),
        ));
    }
    let parent = p.parent().unwrap_or(std::path::Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .map_err(|e| io_error("create the folder of", path, e))?;
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    let tmp = parent.join(format!(".{name}.proctor-{}.tmp", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(data)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
        f.sync_all()?;
        std::fs::rename(&tmp, p)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error("write", path, e));
    }
    Ok(())
}

fn get_file(path: &str, max: usize) -> Result<Vec<u8>, Response> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::symlink_metadata(path).map_err(|e| io_error("read", path, e))?;
    if !meta.file_type().is_file() {
        return Err(error(
            "not_regular",
            &format!("{path} is not a regular file (a symlink, folder, FIFO or device)"),
        ));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_error("open", path, e))?;
    let m = f.metadata().map_err(|e| io_error("stat", path, e))?;
    if !m.file_type().is_file() {
        return Err(error(
            "not_regular",
            &format!("{path} is not a regular file"),
        ));
    }
    if m.len() > max as u64 {
        return Err(error(
            "too_large",
            &format!("{path} has {} bytes, over the {max}-byte bound", m.len()),
        ));
    }
    let mut out = Vec::new();
    f.take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| io_error("read", path, e))?;
    if out.len() > max {
        return Err(error(
            "too_large",
            &format!("{path} grew over the {max}-byte bound"),
        ));
    }
    Ok(out)
}

/// Reads a stream to its end, keeping at most `EXEC_OUTPUT_MAX` bytes.
fn capture(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut truncated = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = EXEC_OUTPUT_MAX - out.len();
                    if n > room {
                        truncated = true;
                    }
                    out.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        (out, truncated)
    })
}

fn run_exec(req: &ExecRequest) -> Result<ExecResult, Response> {
    use base64::Engine;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    let b64 = base64::engine::general_purpose::STANDARD;
    let Some(prog) = req.argv.first() else {
        return Err(error("bad_request", "exec needs a program: argv is empty"));
    };
    let stdin = match &req.stdin_b64 {
        Some(s) => Some(
            b64.decode(s.as_bytes())
                .map_err(|_| error("bad_request", "stdin_b64 is not base64"))?,
        ),
        None => None,
    };
    let cwd = match &req.cwd {
        Some(c) => std::path::PathBuf::from(c),
        None => ["/work", "/root", "/"]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.is_dir())
            .unwrap_or_else(|| "/".into()),
    };
    let mut child = Command::new(prog)
        .args(&req.argv[1..])
        .current_dir(&cwd)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| io_error("start", prog, e))?;
    let pgid = child.id() as i32;
    if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    let out = capture(child.stdout.take().expect("piped"));
    let err = capture(child.stderr.take().expect("piped"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(exec_timeout(req));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(io_error("wait for", prog, e)),
        }
        if std::time::Instant::now() >= deadline && !timed_out {
            timed_out = true;
            // SAFETY: signals the exec's own process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // What the exec left in its group holds the pipes open: it ends at the deadline.
    while !(out.is_finished() && err.is_finished()) {
        if std::time::Instant::now() >= deadline {
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (o, ot) = out.join().unwrap_or_default();
    let (e, et) = err.join().unwrap_or_default();
    Ok(ExecResult {
        exit_code: status.code(),
        signal: status.signal().map(crate::runs::signal_name),
        timed_out,
        stdout_b64: b64.encode(o),
        stderr_b64: b64.encode(e),
        truncated: ot || et,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    /// A client whose other end is driven by the test.
    fn pair() -> (AgentClient, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (AgentClient::over(a).unwrap(), b)
    }

    #[test]
    fn an_oversized_length_is_refused_before_any_allocation() {
        let mut bytes = ((FRAME_MAX + 1) as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        let e = read_frame::<Response>(&mut &bytes[..]).unwrap_err();
        assert!(e.to_string().contains("over the"), "{e}");
    }

    #[test]
    fn answers_out_of_order_reach_their_callers() {
        let (c, mut agent) = pair();
        let c2 = c.clone();
        let t1 = std::thread::spawn(move || c2.call(Request::Hello, Duration::from_secs(10)));
        let first: Frame<Request> = read_frame(&mut agent).unwrap().unwrap();
        let c3 = c.clone();
        let t2 = std::thread::spawn(move || c3.call(Request::Shutdown, Duration::from_secs(10)));
        let second: Frame<Request> = read_frame(&mut agent).unwrap().unwrap();
        assert_ne!(first.id, second.id);
        // Answer the second first.
        let (hello_id, shut_id) = if matches!(first.body, Request::Hello) {
            (first.id, second.id)
        } else {
            (second.id, first.id)
        };
        write_frame(
            &mut agent,
            &Frame {
                id: shut_id,
                body: Response::Done,
            },
        )
        .unwrap();
        let hello = Response::Hello {
            protocol: PROTOCOL,
            kernel: "Linux".into(),
            pid: 9,
        };
        write_frame(
            &mut agent,
            &Frame {
                id: hello_id,
                body: hello.clone(),
            },
        )
        .unwrap();
        assert_eq!(t2.join().unwrap().unwrap(), Response::Done);
        assert_eq!(t1.join().unwrap().unwrap(), hello);
    }

    #[test]
    fn a_call_times_out_and_a_dead_channel_fails_every_waiter() {
        let (c, agent) = pair();
        let e = c
            .call(Request::Hello, Duration::from_millis(100))
            .unwrap_err();
        assert!(e.to_string().contains("no answer"), "{e}");
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.call(Request::Hello, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(100));
        drop(agent);
        // Closed with unread requests: a reset or an end, either way a dead channel.
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.code(), "unavailable", "{e}");
        let e = c.call(Request::Hello, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.code(), "unavailable", "{e}");
    }

    #[test]
    fn a_bad_frame_is_answered_and_the_stream_goes_on() {
        let (mut host, guest) = UnixStream::pair().unwrap();
        let w = guest.try_clone().unwrap();
        std::thread::spawn(move || serve_stream(guest, Box::new(w)));
        let body = br#"{"id":5,"op":"fly"}"#;
        host.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
        host.write_all(body).unwrap();
        let f: Frame<Response> = read_frame(&mut host).unwrap().unwrap();
        assert_eq!(f.id, 5);
        assert!(matches!(f.body, Response::Error { ref code, .. } if code == "bad_request"));
        write_frame(
            &mut host,
            &Frame {
                id: 6,
                body: Request::Hello,
            },
        )
        .unwrap();
        let f: Frame<Response> = read_frame(&mut host).unwrap().unwrap();
        assert_eq!(f.id, 6);
        assert!(matches!(
            f.body,
            Response::Hello {
                protocol: PROTOCOL,
                ..
            }
        ));
    }

    #[test]
    fn a_get_over_the_bound_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        let r = handle(Request::Get {
            path: p.to_string_lossy().into(),
            max: 4,
        });
        assert!(matches!(r, Response::Error { ref code, .. } if code == "too_large"));
    }
}
