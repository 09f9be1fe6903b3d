//! The server: one per home. It owns the ledger's write lock, the token store and (later)
//! every child process, and speaks HTTP/1.1 with JSON over a Unix socket in the home's
//! runtime folder (0700). Clients start it when it is absent (see [`crate::client`]).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::auth::{AuthError, Tokens};
use crate::files::{self, FilesError};
use crate::home::{Home, HomeError};
use crate::ledger::{Ledger, LedgerError};

mod api;
mod authority_api;
mod evidence_api;
mod factory_api;
mod hook_api;
mod listen;
mod publish_api;
mod rigs_api;
mod runs_api;
pub mod start_check;
#[cfg(test)]
mod testkit;
mod tribunal_api;
mod workspaces_api;

pub use authority_api::AuthoritySettings;
pub use listen::Limits;

pub use crate::log::log;
pub use crate::version::{PROTOCOL, VERSION};
/// `sun_path` holds 108 bytes on Linux, the final NUL included.
pub const MAX_SOCKET_PATH: usize = crate::home::MAX_SOCKET_PATH;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Home(#[from] HomeError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("cannot load the sessions: {0}")]
    Sessions(String),
    #[error(transparent)]
    StartCheck(#[from] start_check::StartCheckError),
    #[error("a server already runs for this home{}; stop it with `proctor server stop`", .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    AlreadyRunning { pid: Option<u32> },
    #[error(
        "the socket path {path} is {len} bytes long; a Unix socket path holds at most \
         {MAX_SOCKET_PATH}. Remedy: use a shorter --home (or PROCTOR_HOME)"
    )]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ServerError + 'a {
    move |err| ServerError::Io {
        op,
        path: path.to_path_buf(),
        err,
    }
}

/// Refuses a socket path that does not fit in `sockaddr_un`.
pub fn check_socket_path(path: &Path) -> Result<(), ServerError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(ServerError::SocketPathTooLong {
            path: path.to_path_buf(),
            len,
        });
    }
    Ok(())
}

/// State shared by every request.
pub struct Shared {
    pub home: Home,
    pub pid: u32,
    pub started_at: String,
    pub tokens: Mutex<Tokens>,
    pub ledger: Arc<Ledger>,
    pub sessions: Arc<crate::sessions::Sessions>,
    /// The server's own pid, euid and executable, for the peer checks.
    pub me: crate::peer::ServerSelf,
    pub authority: authority_api::AuthorityState,
    /// The publication state machine (open approvals, minted and spent authorisations, the
    /// judged intents): `publish::machine`.
    pub publish: publish_api::PublishState,
    /// The evidence checks in progress on this home's candidates.
    pub checks: crate::evidence::checks::InProgress,
    /// This home's workspace registry: its mutation lock and the events it could not write.
    pub workspaces: crate::workspaces::Store,
    /// The tribunal's rounds in progress and the holds of the server's probes.
    pub tribunal: tribunal_api::TribunalState,
    /// The factory runs in progress (their latest records).
    pub factory: factory_api::FactoryState,
    /// The rigs of this server (`crate::rigs`): their manager.
    pub rigs: Arc<crate::rigs::Rigs>,
    /// The rig engines' availability, probed once.
    pub rig_engines: rigs_api::EnginesCache,
    /// Counts the callers' marks set or cleared (the change stream's `marks`).
    pub marks_changed: tokio::sync::watch::Sender<u64>,
    shutdown: tokio::sync::Notify,
}

impl Shared {
    /// Appends to the ledger; a failed append is logged and reported to the caller.
    pub fn record(&self, kind: &str, fields: Value) -> Result<u64, LedgerError> {
        let map = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.ledger.append(kind, &map)
    }

    pub fn request_shutdown(&self) {
        self.shutdown.notify_one();
    }
}

/// The lock the running server holds for its whole life. Its content is the server's pid.
pub struct ServerLock {
    _file: File,
}

/// Reads the pid recorded in a server lock file, if any.
pub fn read_lock_pid(path: &Path) -> Option<u32> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

/// True while some process holds the home's server lock (a server is alive, even if it
/// has already closed its socket).
pub fn server_lock_held(home: &Home) -> bool {
    let Ok(file) = files::open_private_read(&home.server_lock_path()) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// Takes the home's server lock, or says which server holds it.
pub fn take_server_lock(home: &Home) -> Result<ServerLock, ServerError> {
    let path = home.server_lock_path();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(files::FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io_err("open", &path))?;
    file.set_permissions(std::fs::Permissions::from_mode(files::FILE_MODE))
        .map_err(io_err("set the mode of", &path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(ServerError::AlreadyRunning {
                pid: read_lock_pid(&path),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io_err("lock", &path)(e)),
    }
    file.set_len(0).map_err(io_err("truncate", &path))?;
    file.rewind().map_err(io_err("rewind", &path))?;
    writeln!(file, "{}", std::process::id()).map_err(io_err("write", &path))?;
    file.sync_all().map_err(io_err("fsync", &path))?;
    Ok(ServerLock { _file: file })
}

/// Runs the server in this process until it is asked to stop (API call, SIGTERM or SIGINT).
pub fn run_foreground(
    home: Home,
    settings: crate::sessions::manager::Settings,
    limits: Limits,
    authority: AuthoritySettings,
) -> Result<(), ServerError> {
    // Every descendant of a run stays in this process's tree, however it forks: the peer
    // checks rely on it (see crate::peer).
    crate::peer::become_subreaper().map_err(io_err(
        "become a child subreaper (prctl) for",
        Path::new("/proc/self"),
    ))?;
    home.ensure()?;
    let socket = home.socket_path();
    check_socket_path(&socket)?;
    let _lock = take_server_lock(&home)?;
    if let Some((before, after)) = crate::runs::raise_open_files_limit()
        && before < after
    {
        log(&format!(
            "open-descriptor limit raised from {before} to {after} (each run holds several)"
        ));
    }

    // We hold the lock: any socket left here belongs to a server that is gone.
    match std::fs::remove_file(&socket) {
        Ok(()) => log(&format!("removed a stale socket at {}", socket.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove the stale socket", &socket)(e)),
    }

    // The ledger is the source of truth: never started afresh under state it explains, and
    // never appended to when it is behind what the home's files name.
    start_check::check_presence(&home).inspect_err(|e| log(&format!("refusing to start: {e}")))?;
    let (ledger, opened) = Ledger::open(&home.ledger_path())?;
    start_check::check_not_behind(&home, opened.events)
        .inspect_err(|e| log(&format!("refusing to start: {e}")))?;
    let mut tokens = Tokens::load(&home.tokens_path())?;
    let new_owner = tokens.ensure_owner(&home.owner_token_path())?;
    for torn in &opened.recovered {
        log(&format!(
            "ledger: a torn final line was moved aside and recorded: {torn:?}"
        ));
    }
    // Workspace events the ledger holds but the registry lacks (a crash between the two).
    let workspaces = crate::workspaces::Store::new(&home);
    match crate::workspaces::recover(&workspaces, &home.ledger_path()) {
        Ok(0) => {}
        Ok(n) => log(&format!(
            "workspaces: {n} ledger event(s) replayed into the registry"
        )),
        Err(e) => log(&format!("workspaces: cannot replay the ledger: {e}")),
    }
    // Tribunal rounds a stopped server left in progress: invalid, their decided seats kept.
    let stopped = crate::factory::engine::recover(&home);
    if !stopped.is_empty() {
        log(&format!(
            "factory: {} run(s) left in progress by a stopped server marked failed: {}",
            stopped.len(),
            stopped.join(", ")
        ));
    }
    match crate::tribunal::round::recover(&home, &ledger) {
        Ok(m) if m.is_empty() => {}
        Ok(m) => log(&format!(
            "tribunal: {} round(s) left in progress by a stopped server marked invalid: {}",
            m.len(),
            m.join(", ")
        )),
        Err(e) => log(&format!("tribunal: cannot read the rounds: {e}")),
    }
    let pid = std::process::id();
    let ledger = Arc::new(ledger);
    let sessions = crate::sessions::Sessions::open(&home, ledger.clone(), settings)
        .map_err(|e| ServerError::Sessions(e.to_string()))?;
    let ledger_for_rigs = ledger.clone();
    let shared = Arc::new(Shared {
        home: home.clone(),
        pid,
        started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        tokens: Mutex::new(tokens),
        ledger,
        sessions,
        me: crate::peer::ServerSelf::current(),
        authority: authority_api::AuthorityState::new(authority),
        publish: publish_api::PublishState::default(),
        checks: Default::default(),
        workspaces,
        tribunal: Default::default(),
        factory: Default::default(),
        marks_changed: Default::default(),
        rigs: crate::rigs::Rigs::new(home.clone(), ledger_for_rigs, proctor_exe()),
        rig_engines: Default::default(),
        shutdown: tokio::sync::Notify::new(),
    });
    shared.record(
        "server.started",
        json!({"pid": pid, "version": VERSION, "protocol": PROTOCOL, "owner_token_created": new_owner,
               "passphrase_backoff_ms": shared.authority.settings.passphrase_backoff_ms}),
    )?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // A burst of requests (a thousand starts) grows the blocking pool; its threads leave
        // after 3 s unused rather than tokio's 10 s, so the idle server's threads come back
        // down to what one run needs (docs/performance.md).
        .thread_keep_alive(std::time::Duration::from_secs(3))
        .enable_all()
        .build()
        .map_err(io_err("start the async runtime for", &socket))?;
    let result = runtime.block_on(serve(shared.clone(), &socket, limits));
    let _ = std::fs::remove_file(&socket);
    // Every run ends with the server that owns it: stopped and recorded, never orphaned.
    // The rigs first: a rig's engine is ended before the sessions that may drive it.
    shared.rigs.close_all(crate::rigs::CloseReason::ServerStop);
    shared.factory.stop_all(std::time::Duration::from_secs(20));
    shared.sessions.stop_all("server");
    shared.sessions.release_cgroups();
    let reason = match &result {
        Ok(reason) => reason.clone(),
        Err(e) => format!("error: {e}"),
    };
    shared.record("server.stopped", json!({"pid": pid, "reason": reason}))?;
    log(&format!("server stopped: {reason}"));
    result.map(|_| ())
}

async fn serve(shared: Arc<Shared>, socket: &Path, limits: Limits) -> Result<String, ServerError> {
    let listener = tokio::net::UnixListener::bind(socket).map_err(io_err("listen on", socket))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(files::FILE_MODE))
        .map_err(io_err("set the mode of", socket))?;
    log(&format!(
        "server {VERSION} (protocol {PROTOCOL}) pid {} listening on {}",
        shared.pid,
        socket.display()
    ));
    // The sweep of what a previous server left runs once the socket answers, all runs at
    // once; until a run is swept it shows `recovering`.
    let sessions = shared.sessions.clone();
    std::thread::Builder::new()
        .name("sweep".into())
        .spawn(move || sessions.recover())
        .map_err(io_err("start the sweep for", socket))?;
    // What a dead server left of the rigs is ended and recorded, then the TTL and the idle
    // ladder are enforced every second.
    let rigs = shared.rigs.clone();
    std::thread::Builder::new()
        .name("rigs-sweep".into())
        .spawn(move || {
            let swept = rigs.sweep_orphans();
            if !swept.is_empty() {
                log(&format!(
                    "rigs: {} orphan rig(s) a stopped server left swept: {}",
                    swept.len(),
                    swept.join(", ")
                ));
            }
        })
        .map_err(io_err("start the rigs' sweep for", socket))?;
    let rigs = shared.rigs.clone();
    let rig_ticker = tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if !rigs.any_open() {
                continue;
            }
            let rigs = rigs.clone();
            let _ = tokio::task::spawn_blocking(move || rigs.tick()).await;
        }
    });
    let reason = Arc::new(Mutex::new(String::from("stopped")));
    let reason2 = reason.clone();
    let waiter = shared.clone();
    let shutdown = async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        let why = tokio::select! {
            _ = waiter.shutdown.notified() => "stop requested through the API",
            _ = term.recv() => "SIGTERM",
            _ = tokio::signal::ctrl_c() => "SIGINT",
        };
        if let Ok(mut r) = reason2.lock() {
            *r = why.to_string();
        }
    };
    // `proctor demo`'s home: the demo forge (a loopback fake, labelled demo) lives and ends
    // with this server.
    let demo_forge = match crate::publish::demo_forge::start(&shared.home).await {
        Ok(Some((task, addr))) => {
            log(&format!("demo forge listening on http://{addr}"));
            Some(task)
        }
        Ok(None) => None,
        Err(e) => {
            log(&format!("demo forge not started: {e}"));
            None
        }
    };
    // The demo's fake fleet of jurors (labelled demo), and the registry that points at it.
    let demo_fleet = if crate::publish::demo_forge::is_demo_home(&shared.home) {
        match crate::tribunal::fleet::Fleet::start(crate::tribunal::fleet::FleetScript::new()) {
            Ok(fleet) => {
                let text =
                    crate::tribunal::fleet::demo_registry(&fleet.openai_url(), &fleet.ollama_url());
                let path = crate::tribunal::config::path(&shared.home);
                match crate::files::write_atomic(&path, text.as_bytes()) {
                    Ok(()) => log(&format!(
                        "demo jurors listening on {} and {}",
                        fleet.openai_url(),
                        fleet.ollama_url()
                    )),
                    Err(e) => log(&format!(
                        "demo jurors: cannot write {}: {e}",
                        path.display()
                    )),
                }
                Some(fleet)
            }
            Err(e) => {
                log(&format!("demo jurors not started: {e}"));
                None
            }
        }
    } else {
        None
    };
    let sessions = shared.sessions.clone();
    let in_a_run: listen::InARun = Arc::new(move |pid| sessions.holds_process(pid));
    let served = listen::serve(listener, api::router(shared), limits, in_a_run, shutdown).await;
    rig_ticker.abort();
    if let Some(task) = demo_forge {
        task.abort();
    }
    drop(demo_fleet);
    served.map_err(io_err("serve on", socket))?;
    let why = reason.lock().map(|r| r.clone()).unwrap_or_default();
    Ok(why)
}

/// The proctor binary the rigs' guest agents and relays run as.
fn proctor_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("proctor"))
}
