//! Runs: child processes that proctor owns, under a PTY or pipes, with their output in a
//! seq-numbered ring, a raw transcript on disk, and (for PTYs) a vt100 screen.
//!
//! A [`Run`] is started from a [`RunSpec`]: an explicit argv (no shell), a working folder and
//! an explicit environment (applied after clearing everything, so nothing else reaches the
//! child). No thread per run: its streams are read and its exit observed by tasks on a
//! [`Reactor`]. See `docs/runs.md`.
//!
//! Lifetime: [`Run::stop`] sends SIGTERM to the process group and to every other process of
//! the run (its cgroup's members, or the processes attributed to it: see [`tree`] and
//! [`cgroup`]), then SIGKILL (`cgroup.kill`) after a grace period, and returns only once the
//! child is reaped, with the exit status the OS reported; [`Run::stop_async`] does the same
//! on timers. Dropping a `Run` handle does not stop the child.

pub mod cast;
pub mod cgroup;
pub mod process;
pub mod ring;
pub mod timing;
pub mod transcript;
pub mod tree;

mod pipe;
mod pty;
pub use pty::OutputMeter;
mod pump;
mod reactor;
pub use reactor::Reactor;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use portable_pty::MasterPty;
use serde::{Deserialize, Serialize};

pub use process::{
    ExitStatus, ProcStat, group_exists, group_has_live_members, is_same_process, proc_stat,
    process_exists, process_identity, signal_name, which,
};
pub use ring::{End, Frame, ReadOutcome, Ring, RingStatus, Stream};
pub use transcript::{Transcript, TranscriptSpec, TranscriptStatus};
pub use tree::{Hold, Ident, Tracked};

/// How long `stop` waits after SIGTERM before SIGKILL, unless told otherwise.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);
/// How long, after the child exited, the readers keep reading output that something else
/// (a background grandchild) still writes, before the run ends without it.
pub const DEFAULT_DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// How long `stop` waits for the kernel after SIGKILL before it reports the child as not
/// reaped (a process in uninterruptible sleep can outlive SIGKILL for a while).
pub const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long an input write waits for the child to make room before it gives up.
pub const DEFAULT_INPUT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most rows a PTY run's terminal may have.
pub const MAX_ROWS: u16 = 500;
/// The most columns a PTY run's terminal may have.
///
/// Why these two numbers: vt100 0.18 allocates every cell of the screen up front, 32 bytes a
/// cell (`vt100::Cell` is asserted to be 32 bytes), and a second grid of the same size the
/// first time the child enters the alternate screen; the server keeps no scrollback
/// (capacity 0). So a PTY run's emulator costs at most `rows × cols × 32 × 2` bytes:
/// 500 × 1000 gives 32 MB, where 65535 × 65535 asked for 137 GB a grid. No real terminal
/// is that large: a full-screen window on an 8K display (7680 × 4320 pixels) with a
/// 6 × 12-pixel font is 1280 × 360 cells, and at a legible 8 × 16 it is 960 × 270.
/// The clients (the CLI and the cockpit) never ask for more: they clamp the size they send.
pub const MAX_COLS: u16 = 1000;

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TermSize {
    pub rows: u16,
    pub cols: u16,
}

impl TermSize {
    /// Whether this size is one a PTY run may have: 1 to [`MAX_ROWS`] rows and 1 to
    /// [`MAX_COLS`] columns.
    pub fn is_allowed(self) -> bool {
        (1..=MAX_ROWS).contains(&self.rows) && (1..=MAX_COLS).contains(&self.cols)
    }

    /// This size brought within the limits (what clients send for a larger terminal: the
    /// run's screen is then the top-left part of it).
    pub fn clamped(self) -> TermSize {
        TermSize {
            rows: self.rows.clamp(1, MAX_ROWS),
            cols: self.cols.clamp(1, MAX_COLS),
        }
    }
}

impl Default for TermSize {
    fn default() -> Self {
        TermSize { rows: 24, cols: 80 }
    }
}

/// How the child is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A pseudo-terminal of this size; the child leads its own session.
    Pty(TermSize),
    /// Three pipes; the child leads its own process group.
    Pipe,
}

/// The transport without its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    Pty,
    Pipe,
}

/// Everything needed to start a run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Program and arguments. The program must be an absolute path (resolve names with
    /// [`which`] against the child's own `PATH`); it is executed directly, never through a
    /// shell.
    pub argv: Vec<OsString>,
    /// The child's working folder; it must exist.
    pub cwd: PathBuf,
    /// The child's whole environment.
    pub env: BTreeMap<OsString, OsString>,
    pub transport: Transport,
    /// The ring's budget in bytes.
    pub ring_bytes: usize,
    /// Where to keep the raw transcript, if anywhere.
    pub transcript: Option<TranscriptSpec>,
    /// See [`DEFAULT_DRAIN_AFTER_EXIT`].
    pub drain_after_exit: Duration,
    /// The run's own cgroup folder (created by the caller), which the child joins before it
    /// execs. `None`: the run is held by its process group and by what the caller attributes
    /// to it through [`Run::tracked`].
    pub cgroup: Option<PathBuf>,
    /// The event loop that reads, waits for and parses the run ([`Reactor`]): a manager
    /// gives all its runs one. `None`: the run gets a private one, which ends with it.
    pub reactor: Option<Reactor>,
}

impl RunSpec {
    /// A spec with the default ring, no transcript and the default drain period.
    pub fn new(
        argv: impl IntoIterator<Item = impl Into<OsString>>,
        cwd: impl Into<PathBuf>,
        env: BTreeMap<OsString, OsString>,
        transport: Transport,
    ) -> RunSpec {
        RunSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            env,
            transport,
            ring_bytes: ring::DEFAULT_RING_BYTES,
            transcript: None,
            drain_after_exit: DEFAULT_DRAIN_AFTER_EXIT,
            cgroup: None,
            reactor: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the command is empty: a run needs at least a program")]
    EmptyArgv,
    #[error(
        "{program} is not an absolute path; runs execute a program directly, without a \
         shell or a PATH search. Remedy: resolve it first (runs::which against the child's PATH)"
    )]
    ProgramNotAbsolute { program: PathBuf },
    #[error(
        "the working folder {path} is not a folder ({reason}). Remedy: create it or pick another"
    )]
    BadCwd { path: PathBuf, reason: String },
    #[error(
        "environment variable {name:?} cannot be passed: names must be non-empty and contain \
         neither '=' nor NUL, values no NUL"
    )]
    BadEnv { name: OsString },
    #[error("cannot start {program}: {err}")]
    Spawn { program: PathBuf, err: io::Error },
    #[error("pseudo-terminal: {0}")]
    Pty(String),
    #[error("cannot {op}: {err}")]
    Io { op: &'static str, err: io::Error },
    #[error("transcript: {0}")]
    Transcript(#[from] crate::files::FilesError),
    #[error("cannot start a thread for the run: {0}")]
    Thread(io::Error),
    #[error("the run has ended; {op} needs a live process")]
    NotLive { op: &'static str },
    #[error("{op} applies to PTY runs only; a pipe run takes it through its tool's protocol")]
    NotAPty { op: &'static str },
    #[error(
        "the terminal size {rows} rows x {cols} columns is refused: a PTY run has 1 to {} rows \
         and 1 to {} columns (the emulator allocates every cell). Remedy: ask for a size \
         within these limits",
        MAX_ROWS,
        MAX_COLS
    )]
    BadSize { rows: u16, cols: u16 },
    #[error("the run's input is closed")]
    InputClosed,
    #[error("input: wrote {written} of {total} bytes: {err}")]
    Input {
        written: usize,
        total: usize,
        err: io::Error,
    },
    #[error("cannot signal {target}: {err}")]
    Signal { target: String, err: io::Error },
    #[error(
        "process {pid} was sent SIGKILL but was not reaped within {waited:?}; it may be in \
         uninterruptible sleep. It is still recorded as running"
    )]
    NotReaped { pid: u32, waited: Duration },
}

impl RunError {
    fn io(op: &'static str, err: io::Error) -> Self {
        RunError::Io { op, err }
    }
}

/// Whether the child is still there, as far as the OS told us.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Liveness {
    /// Not reaped yet.
    Running,
    /// Reaped, with the status the OS reported.
    Exited { exit: ExitStatus },
    /// The wait failed, so no status was observed (never fabricated).
    Unobserved { reason: String },
}

/// What `stop` did and saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopReport {
    /// The child had not been reaped when stop began.
    pub was_running: bool,
    /// SIGTERM was delivered to the process group.
    pub sent_term: bool,
    /// SIGKILL was delivered (the grace period ran out).
    pub sent_kill: bool,
    /// No live member of the process group, nor of the run's cgroup or attributed
    /// processes, was left afterwards (none at all, or only zombies that their new parent
    /// has yet to collect).
    pub group_gone: bool,
    /// The child's exit status as the OS reported it.
    pub exit: Option<ExitStatus>,
}

/// The screen of a PTY run and the seq of the last frame it includes. Attaching from
/// `seq + 1` after drawing `formatted` reproduces the terminal exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScreenSnapshot {
    pub seq: u64,
    pub size: TermSize,
    /// (row, col) of the cursor, 0-based.
    #[schema(value_type = Vec<u16>)]
    pub cursor: (u16, u16),
    /// Escape sequences that redraw the screen and its input modes (vt100's
    /// `state_formatted`). Untrusted: it comes from the child.
    pub formatted: String,
    /// The visible text, rows separated by newlines.
    pub text: String,
    pub alternate_screen: bool,
}

/// Serialises the windows in which a descriptor exists without close-on-exec (portable-pty's
/// `openpty`) against every fork this module makes. Other code in the process that forks
/// while runs may be starting should hold it too.
pub fn fork_guard() -> MutexGuard<'static, ()> {
    static FORK: Mutex<()> = Mutex::new(());
    FORK.lock().unwrap_or_else(|e| e.into_inner())
}

/// In the forked child before exec: default dispositions for the signals a server may have
/// ignored or handled, and an empty signal mask (both survive exec otherwise).
///
/// # Safety
/// Only async-signal-safe calls; meant for `pre_exec`.
pub(crate) unsafe fn reset_signals_in_child() {
    // SAFETY: sigaction-family calls on local, zeroed structures.
    unsafe {
        for sig in [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGPIPE,
            libc::SIGCHLD,
            libc::SIGALRM,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// In the forked child before exec: marks every descriptor above 2 close-on-exec, so the
/// program gets exactly stdin, stdout and stderr. Descriptors that this process inherited
/// without the flag (from the shell that started it, say) would otherwise pass through.
/// Marking rather than closing keeps std's own exec-error pipe working until the exec.
///
/// # Safety
/// Only async-signal-safe calls (close_range, getrlimit, fcntl); meant for `pre_exec`.
pub(crate) unsafe fn cloexec_inherited_fds() {
    // SAFETY: raw syscalls on integers; no memory is touched except `lim`.
    unsafe {
        let r = libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if r == 0 {
            return;
        }
        // Kernels before 5.11: walk the descriptor table up to the soft limit (bounded).
        let mut lim: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 3..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit, and returns the
/// soft limit before and after (`None` where the limit cannot be read). A run holds several
/// descriptors (a PTY master and its duplicates, a pidfd, transcript files), so a server
/// under a soft limit of 1,024 (a common default) would refuse new runs near 170 of them.
/// The children inherit the raised soft limit.
pub fn raise_open_files_limit() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on this process with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return Some((before, lim.rlim_max));
            }
        }
        Some((before, before))
    }
}

/// Kills and reaps a child that could not be set up (used before any waiter exists).
pub(crate) fn abort_child(pid: u32) {
    let _ = process::signal_group(pid, libc::SIGKILL);
    let _ = process::signal_process(pid, libc::SIGKILL);
    if let Ok(p) = libc::pid_t::try_from(pid) {
        let mut status = 0;
        // SAFETY: waits for our own unreaped child.
        while unsafe { libc::waitpid(p, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

struct Life {
    reaped: bool,
    liveness: Liveness,
}

struct PtyParts {
    master: Mutex<Option<Box<dyn MasterPty + Send>>>,
    screen: Arc<pty::ScreenCell>,
}

struct Inner {
    pid: u32,
    start_time: Option<u64>,
    kind: TransportKind,
    ring: Arc<Ring>,
    life: Mutex<Life>,
    life_cv: Condvar,
    /// True once the leader is reaped: what [`Run::stop_async`] awaits (set with `life`).
    reaped_tx: tokio::sync::watch::Sender<bool>,
    input: Mutex<Option<File>>,
    pty: Option<PtyParts>,
    transcript: Option<Arc<Transcript>>,
    cgroup: Option<PathBuf>,
    tracked: Arc<Tracked>,
    /// Kept while the run is: its screen is parsed in the background by the reactor's
    /// screen thread, even after its end (a private reactor ends with its run); its short
    /// blocking jobs are bounded there.
    reactor: Reactor,
}

impl Inner {
    fn life(&self) -> MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on a run. Cheap to clone; every clone addresses the same child.
#[derive(Clone)]
pub struct Run {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("pid", &self.inner.pid)
            .field("transport", &self.inner.kind)
            .finish_non_exhaustive()
    }
}

fn validate(spec: &RunSpec) -> Result<(), RunError> {
    let program = spec.argv.first().ok_or(RunError::EmptyArgv)?;
    if !Path::new(program).is_absolute() {
        return Err(RunError::ProgramNotAbsolute {
            program: program.into(),
        });
    }
    match std::fs::metadata(&spec.cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(RunError::BadCwd {
                path: spec.cwd.clone(),
                reason: "not a folder".into(),
            });
        }
        Err(e) => {
            return Err(RunError::BadCwd {
                path: spec.cwd.clone(),
                reason: e.to_string(),
            });
        }
    }
    use std::os::unix::ffi::OsStrExt;
    for (k, v) in &spec.env {
        let kb = k.as_bytes();
        if kb.is_empty() || kb.contains(&b'=') || kb.contains(&0) || v.as_bytes().contains(&0) {
            return Err(RunError::BadEnv { name: k.clone() });
        }
    }
    if let Transport::Pty(size) = spec.transport
        && !size.is_allowed()
    {
        return Err(RunError::BadSize {
            rows: size.rows,
            cols: size.cols,
        });
    }
    Ok(())
}

impl Run {
    /// Starts the child described by `spec`. On success the child is running (or has
    /// already exited: its end will be observed), its readers and waiter are started.
    pub fn spawn(spec: RunSpec) -> Result<Run, RunError> {
        validate(&spec)?;
        let pty_size = match spec.transport {
            Transport::Pty(size) => Some(size),
            Transport::Pipe => None,
        };
        let transcript = match &spec.transcript {
            Some(t) => Some(Arc::new(Transcript::create(t, pty_size)?)),
            None => None,
        };
        let ring = Arc::new(Ring::new(spec.ring_bytes));
        let reactor = match &spec.reactor {
            Some(r) => r.clone(),
            None => Reactor::start().map_err(RunError::Thread)?,
        };

        let (pid, input, readers, pty_parts, kind) = match spec.transport {
            Transport::Pty(size) => {
                let c = pty::spawn(&spec, size)?;
                let parts = PtyParts {
                    master: Mutex::new(Some(c.master)),
                    screen: Arc::new(pty::ScreenCell::new(
                        size,
                        Arc::clone(&ring),
                        transcript.clone(),
                        reactor.meter(),
                        reactor.screen_sleep_after(),
                    )),
                };
                (
                    c.pid,
                    c.writer,
                    vec![(Stream::Stdout, c.reader)],
                    Some(parts),
                    TransportKind::Pty,
                )
            }
            Transport::Pipe => {
                let c = pipe::spawn(&spec)?;
                (
                    c.pid,
                    c.stdin,
                    vec![(Stream::Stdout, c.stdout), (Stream::Stderr, c.stderr)],
                    None,
                    TransportKind::Pipe,
                )
            }
        };
        // The child is unreaped, so its /proc entry is there (alive or zombie).
        let start_time = process_identity(pid);
        let inner = Arc::new(Inner {
            pid,
            start_time,
            kind,
            ring,
            life: Mutex::new(Life {
                reaped: false,
                liveness: Liveness::Running,
            }),
            life_cv: Condvar::new(),
            reaped_tx: tokio::sync::watch::Sender::new(false),
            input: Mutex::new(Some(input)),
            pty: pty_parts,
            transcript,
            cgroup: spec.cgroup.clone(),
            tracked: Tracked::new(),
            reactor: reactor.clone(),
        });
        start_tasks(&reactor, &inner, readers, spec.drain_after_exit)?;
        Ok(Run { inner })
    }

    /// The child's pid; also its process group id (and session id for a PTY run).
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The child's start time (field 22 of `/proc/<pid>/stat`), read right after the
    /// spawn; with the pid it identifies the process for a later server. `None` if `/proc`
    /// could not be read.
    pub fn start_time(&self) -> Option<u64> {
        self.inner.start_time
    }

    pub fn transport(&self) -> TransportKind {
        self.inner.kind
    }

    /// How the run's processes are held.
    pub fn hold(&self) -> Hold {
        match &self.inner.cgroup {
            Some(path) => Hold::Cgroup { path: path.clone() },
            None => Hold::Subreaper,
        }
    }

    /// The processes attributed to the run besides its leader (filled by the caller's scan
    /// where the run has no cgroup; also kept for a cgroup run, to reap adopted zombies).
    pub fn tracked(&self) -> &Arc<Tracked> {
        &self.inner.tracked
    }

    /// True once the leader has been reaped by the run's waiter.
    pub fn reaped(&self) -> bool {
        self.inner.life().reaped
    }

    /// Live processes of the run other than its leader: its cgroup's members, or the
    /// attributed processes that are still the ones seen (pid and start time), not zombies.
    pub fn extra_members(&self) -> Vec<u32> {
        let leader = self.inner.pid;
        match &self.inner.cgroup {
            Some(dir) => cgroup::members(dir)
                .into_iter()
                .filter(|p| *p != leader)
                .collect(),
            None => self
                .inner
                .tracked
                .snapshot()
                .into_iter()
                .filter(|(p, st)| {
                    *p != leader
                        && process::proc_stat(*p)
                            .is_some_and(|s| s.start_time == *st && s.state != 'Z')
                })
                .map(|(p, _)| p)
                .collect(),
        }
    }

    fn signal_extras(&self, sig: libc::c_int) -> bool {
        let pids = self.extra_members();
        let mut any = false;
        for &p in &pids {
            any |= process::signal_process(p, sig).is_ok();
        }
        if sig == libc::SIGTERM {
            for &p in &pids {
                let _ = process::signal_process(p, libc::SIGCONT);
            }
        }
        any
    }

    fn kill_extras(&self) -> bool {
        match &self.inner.cgroup {
            Some(dir) if cgroup::populated(dir) => cgroup::kill(dir).is_ok(),
            _ => self.signal_extras(libc::SIGKILL),
        }
    }

    fn extras_gone(&self) -> bool {
        self.extra_members().is_empty()
    }

    /// Ends what the run left behind once its leader has ended: SIGTERM to whatever is
    /// left in its process group, its cgroup or its attributed processes, SIGKILL (or
    /// `cgroup.kill`) after `grace`; then its cgroup folder is removed. True when nothing is
    /// left alive.
    pub fn end_remaining(&self, grace: Duration) -> bool {
        let pid = self.inner.pid;
        let reaped = self.inner.life().reaped;
        let left =
            |run: &Run| !run.extra_members().is_empty() || (reaped && group_has_live_members(pid));
        if left(self) {
            if reaped && group_has_live_members(pid) {
                let _ = process::signal_group(pid, libc::SIGTERM);
                let _ = process::signal_group(pid, libc::SIGCONT);
            }
            self.signal_extras(libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while left(self) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if left(self) {
                if reaped && group_has_live_members(pid) {
                    let _ = process::signal_group(pid, libc::SIGKILL);
                }
                self.kill_extras();
                let deadline = Instant::now() + KILL_WAIT;
                while left(self) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let gone = !left(self);
        if let Some(dir) = &self.inner.cgroup
            && reaped
            && gone
        {
            let _ = cgroup::remove(dir);
        }
        gone
    }

    /// The output ring.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.inner.ring
    }

    /// The transcript's state, when the run keeps one.
    pub fn transcript(&self) -> Option<TranscriptStatus> {
        self.inner.transcript.as_ref().map(|t| t.status())
    }

    /// What the OS has reported about the child so far.
    pub fn liveness(&self) -> Liveness {
        self.inner.life().liveness.clone()
    }

    /// The exit status, once observed.
    pub fn exit(&self) -> Option<ExitStatus> {
        match self.inner.life().liveness {
            Liveness::Exited { exit } => Some(exit),
            _ => None,
        }
    }

    /// Blocks until the child is reaped or `timeout` passes, and returns the liveness then.
    pub fn wait_exit(&self, timeout: Duration) -> Liveness {
        let deadline = Instant::now() + timeout;
        let mut life = self.inner.life();
        loop {
            if life.reaped {
                return life.liveness.clone();
            }
            let now = Instant::now();
            if now >= deadline {
                return life.liveness.clone();
            }
            life = self
                .inner
                .life_cv
                .wait_timeout(life, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Writes input to the child's stdin (pipe) or terminal (PTY), waiting at most
    /// [`DEFAULT_INPUT_TIMEOUT`] for the child to make room.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), RunError> {
        self.write_input_timeout(bytes, DEFAULT_INPUT_TIMEOUT)
    }

    /// Writes input, waiting at most `timeout` for room. On error, the bytes before
    /// `written` were delivered.
    pub fn write_input_timeout(&self, bytes: &[u8], timeout: Duration) -> Result<(), RunError> {
        let deadline = Instant::now() + timeout;
        let g = self.inner.input.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = g.as_ref() else {
            return Err(if self.inner.ring.ended().is_some() {
                RunError::NotLive { op: "input" }
            } else {
                RunError::InputClosed
            });
        };
        // A pipe run records its input before writing it (under the input lock, so in the
        // order written), so that the child's answer, which cannot come before it, never
        // precedes it in the ring. A write that fails part-way is answered with how much was
        // delivered; the record keeps what proctor wrote.
        if self.inner.kind == TransportKind::Pipe && !bytes.is_empty() {
            self.inner.ring.push(Stream::Stdin, bytes);
            if let Some(t) = &self.inner.transcript {
                t.write(Stream::Stdin, bytes);
            }
        }
        pump::write_all_until(f.as_raw_fd(), bytes, deadline).map_err(|(written, err)| {
            RunError::Input {
                written,
                total: bytes.len(),
                err,
            }
        })
    }

    /// Closes the child's stdin (end of file for a pipe run). For a PTY run this closes
    /// proctor's input handle only; send the terminal's EOF character (`\x04`) to signal
    /// end of input to the program.
    pub fn close_input(&self) {
        let mut g = self.inner.input.lock().unwrap_or_else(|e| e.into_inner());
        *g = None;
    }

    /// Resizes a PTY run's terminal (the kernel sends SIGWINCH to its foreground group) and
    /// its vt100 screen together.
    pub fn resize(&self, size: TermSize) -> Result<(), RunError> {
        if !size.is_allowed() {
            return Err(RunError::BadSize {
                rows: size.rows,
                cols: size.cols,
            });
        }
        let pty = self.pty_parts("resize")?;
        let master = pty.master.lock().unwrap_or_else(|e| e.into_inner());
        // The output has ended (the master is released once it has): nothing will be drawn
        // again.
        let m = master.as_ref().ok_or(RunError::NotLive { op: "resize" })?;
        // The screen gets the new size at the point of the output where the terminal got
        // it, whenever it parses that far; this does not wait for it.
        let resize_master = || {
            m.resize(pty::pty_size(size))
                .map_err(|e| RunError::Pty(format!("cannot resize: {e:#}")))
        };
        // The timing records the resize at the output's point where the kernel made it:
        // under the transcript's lock, so no output the child draws for the new size is
        // written before the line that says it.
        pty.screen.resize(size, || match &self.inner.transcript {
            Some(t) => t.resize_with(size, resize_master),
            None => resize_master(),
        })
    }

    /// Hands a PTY run's buffered timing lines to the kernel (see [`Transcript::flush_timing`]):
    /// before `pty.timing` is read while the run is live.
    pub fn flush_timing(&self) {
        if let Some(t) = &self.inner.transcript {
            t.flush_timing();
        }
    }

    /// The PTY run's screen and the seq of the last frame it includes: every frame pushed
    /// before the call, or more. The screen is not parsed on the output's way (the reader
    /// never waits for the emulator): this call brings it up to date on the caller's
    /// thread, taking from the transcript what the ring has evicted, so it may parse for a
    /// while after a burst (vt100 takes some tens of milliseconds a MiB; see
    /// `docs/performance.md`). Whatever it returns, `seq` is exactly the last frame the
    /// screen includes.
    pub fn screen(&self) -> Result<ScreenSnapshot, RunError> {
        let pty = self.pty_parts("screen")?;
        Ok(pty.screen.current())
    }

    /// Holds a PTY run's screen still until the guard is dropped: nothing parses its
    /// output meanwhile (the background parser waits for the lock). For tests and
    /// benchmarks that show the output never waits for the emulator. Calling
    /// [`Run::screen`], [`Run::resize`] or [`Run::holds_emulator`] on the same thread while
    /// holding it deadlocks. `None` for a pipe run.
    #[doc(hidden)]
    pub fn hold_screen(&self) -> Option<ScreenHold<'_>> {
        self.inner.pty.as_ref().map(|p| ScreenHold(p.screen.lock()))
    }

    /// Whether a PTY run still holds its terminal emulator (`rows × cols` cells). It does
    /// while output may come, and releases it once the output has ended, keeping the final
    /// screen; `None` for a pipe run.
    pub fn holds_emulator(&self) -> Option<bool> {
        self.inner
            .pty
            .as_ref()
            .map(|p| p.screen.lock().parser.is_some())
    }

    fn pty_parts(&self, op: &'static str) -> Result<&PtyParts, RunError> {
        self.inner.pty.as_ref().ok_or(RunError::NotAPty { op })
    }

    /// Interrupts a PTY run as a person's Ctrl-C would, and says how. A terminal whose line
    /// discipline makes signals of keys (ISIG on, a cooked terminal) gets SIGINT sent to its
    /// foreground process group, what the line discipline sends for ^C. A terminal in raw
    /// mode (ISIG off: a full-screen tool that reads Ctrl-C as a key, as codex, gemini and
    /// opencode do) gets its interrupt character typed instead (`VINTR`, ^C by default): the
    /// tool decides, as it does for the person's key; a SIGINT past its raw mode would end it.
    /// The process stays either way unless the tool itself chooses to exit.
    pub fn interrupt(&self) -> Result<Interrupt, RunError> {
        let pty = self.pty_parts("interrupt")?;
        let life = self.inner.life();
        if life.reaped {
            return Err(RunError::NotLive { op: "interrupt" });
        }
        let master = pty.master.lock().unwrap_or_else(|e| e.into_inner());
        let m = master
            .as_ref()
            .ok_or(RunError::NotLive { op: "interrupt" })?;
        if let Some(byte) = m.as_raw_fd().and_then(raw_mode_interrupt_char) {
            drop(master);
            drop(life);
            self.write_input(&[byte])?;
            return Ok(Interrupt::Key { byte });
        }
        let fg = m
            .process_group_leader()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| RunError::Signal {
                target: "the terminal's foreground group".into(),
                err: io::Error::other("tcgetpgrp on the master reported no foreground group"),
            })?;
        process::signal_group(fg, libc::SIGINT).map_err(|err| RunError::Signal {
            target: format!("process group {fg}"),
            err,
        })?;
        drop(life);
        Ok(Interrupt::Signal { group: fg })
    }

    /// Stops the run: SIGTERM to its process group; if the child is not reaped and the
    /// group empty within `grace`, SIGKILL to the group (and to the child). Returns once the
    /// child is reaped, with its observed exit status. On a run that already ended, only
    /// members left in its group are signalled. Blocks the calling thread throughout; see
    /// [`Run::stop_async`] for the same on timers.
    pub fn stop(&self, grace: Duration) -> Result<StopReport, RunError> {
        let mut report = self.stop_term(None)?;
        if !self.wait_reaped_and_group_gone(Instant::now() + grace) {
            self.stop_kill(&mut report, None)?;
        }
        if !matches!(self.wait_exit(KILL_WAIT), Liveness::Exited { .. })
            && !self.inner.life().reaped
        {
            return Err(RunError::NotReaped {
                pid: self.inner.pid,
                waited: KILL_WAIT,
            });
        }
        report.group_gone = self.wait_reaped_and_group_gone(Instant::now() + KILL_WAIT);
        report.exit = self.exit();
        Ok(report)
    }

    /// [`Run::stop`] on timers, with the same signals, report and errors: the grace and the
    /// wait after SIGKILL are timers of the runtime that polls it, and the reap is awaited
    /// (no thread is held while a run stops). Meant for the run's reactor
    /// ([`Reactor::handle`]); it needs a runtime with timers and a blocking pool (where a
    /// scan of `/proc`, needed only while the group still has members once the leader is
    /// reaped, is made).
    pub async fn stop_async(&self, grace: Duration) -> Result<StopReport, RunError> {
        // The scans of `/proc` the blocking form makes under the run's lock are made first,
        // off the loop's thread.
        let live = if self.reaped() {
            self.group_live_off_loop().await
        } else {
            false
        };
        let mut report = self.stop_term(Some(live))?;
        if !self.reaped_and_group_gone_by(Instant::now() + grace).await {
            let live = self.group_live_off_loop().await;
            self.stop_kill(&mut report, Some(live))?;
        }
        if !self.reaped_by(Instant::now() + KILL_WAIT).await {
            return Err(RunError::NotReaped {
                pid: self.inner.pid,
                waited: KILL_WAIT,
            });
        }
        report.group_gone = self
            .reaped_and_group_gone_by(Instant::now() + KILL_WAIT)
            .await;
        report.exit = self.exit();
        Ok(report)
    }

    /// The first step of a stop: SIGTERM (and SIGCONT) to the group and to the run's other
    /// members. `group_live`: whether the group has a live member, when looked at already
    /// (else it is looked at here, if the leader is reaped).
    fn stop_term(&self, group_live: Option<bool>) -> Result<StopReport, RunError> {
        let pid = self.inner.pid;
        let mut report = StopReport {
            was_running: false,
            sent_term: false,
            sent_kill: false,
            group_gone: false,
            exit: None,
        };
        // Holding `life` while signalling: the child cannot be reaped meanwhile, so its
        // pid (the group id) cannot be recycled under us.
        let life = self.inner.life();
        report.was_running = !life.reaped;
        if !life.reaped || group_live.unwrap_or_else(|| group_has_live_members(pid)) {
            report.sent_term = self.signal_group_checked(libc::SIGTERM)?;
            // A stopped member would keep SIGTERM pending until the grace runs out;
            // continue it so it can act on it (as init systems do).
            if report.sent_term {
                self.signal_group_checked(libc::SIGCONT)?;
            }
        }
        // Members that left the group (setsid, setpgid) are still the run's: its cgroup
        // or its attributed processes name them.
        report.sent_term |= self.signal_extras(libc::SIGTERM);
        drop(life);
        Ok(report)
    }

    /// The grace ran out: SIGKILL to the group, to the child and to the run's other members.
    /// `group_live` as for [`Run::stop_term`].
    fn stop_kill(&self, report: &mut StopReport, group_live: Option<bool>) -> Result<(), RunError> {
        let pid = self.inner.pid;
        let life = self.inner.life();
        if group_live.unwrap_or_else(|| group_has_live_members(pid)) {
            report.sent_kill |= self.signal_group_checked(libc::SIGKILL)?;
        }
        if !life.reaped {
            // In case the child left its group; it is unreaped, so the pid is still its.
            if process::signal_process(pid, libc::SIGKILL).is_ok() {
                report.sent_kill = true;
            }
        }
        drop(life);
        report.sent_kill |= self.kill_extras();
        Ok(())
    }

    /// [`group_has_live_members`] from async code: the cheap look (`kill(-pgid, 0)`) on the
    /// caller's thread; the scan of `/proc`, needed only while the group has members, on
    /// the blocking pool, a few of the reactor's runs at a time.
    async fn group_live_off_loop(&self) -> bool {
        let pgid = self.inner.pid;
        if !group_exists(pgid) {
            return false;
        }
        self.inner
            .reactor
            .short_blocking(move || group_has_live_members(pgid))
            .await
            .unwrap_or(true)
    }

    /// Awaits the reap of the leader until `deadline`; true once reaped.
    async fn reaped_by(&self, deadline: Instant) -> bool {
        let mut rx = self.inner.reaped_tx.subscribe();
        let at = tokio::time::Instant::from_std(deadline);
        let _ = tokio::time::timeout_at(at, rx.wait_for(|r| *r)).await;
        self.inner.life().reaped
    }

    /// [`Run::wait_reaped_and_group_gone`] on timers: the reap is awaited; the group's
    /// members, which signal nothing, are looked at every 20 ms once it is reaped.
    async fn reaped_and_group_gone_by(&self, deadline: Instant) -> bool {
        loop {
            if self.reaped_by(deadline).await
                && !self.group_live_off_loop().await
                && self.extras_gone()
            {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(20))).await;
        }
    }

    /// [`Run::end_remaining`] on timers (for the reactor: nothing blocks its thread but
    /// the look at the run's cgroup or attributed processes; a scan of `/proc` goes to the
    /// blocking pool).
    pub async fn end_remaining_async(&self, grace: Duration) -> bool {
        let pid = self.inner.pid;
        let reaped = self.inner.life().reaped;
        async fn left(run: &Run, reaped: bool) -> bool {
            !run.extra_members().is_empty() || (reaped && run.group_live_off_loop().await)
        }
        if left(self, reaped).await {
            if reaped && self.group_live_off_loop().await {
                let _ = process::signal_group(pid, libc::SIGTERM);
                let _ = process::signal_group(pid, libc::SIGCONT);
            }
            self.signal_extras(libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while left(self, reaped).await && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if left(self, reaped).await {
                if reaped && self.group_live_off_loop().await {
                    let _ = process::signal_group(pid, libc::SIGKILL);
                }
                self.kill_extras();
                let deadline = Instant::now() + KILL_WAIT;
                while left(self, reaped).await && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        let gone = !left(self, reaped).await;
        if let Some(dir) = &self.inner.cgroup
            && reaped
            && gone
        {
            let _ = cgroup::remove(dir);
        }
        gone
    }

    fn signal_group_checked(&self, sig: libc::c_int) -> Result<bool, RunError> {
        match process::signal_group(self.inner.pid, sig) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(err) => Err(RunError::Signal {
                target: format!("process group {}", self.inner.pid),
                err,
            }),
        }
    }

    /// Waits until the child is reaped and its group has no live member left (a zombie
    /// grandchild is dead; its new parent collects it), or `deadline`.
    fn wait_reaped_and_group_gone(&self, deadline: Instant) -> bool {
        let mut life = self.inner.life();
        loop {
            if life.reaped && !group_has_live_members(self.inner.pid) {
                drop(life);
                if self.extras_gone() {
                    return true;
                }
                life = self.inner.life();
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // The reap is signalled through the condvar; the group's members are not, so
            // poll them at a short interval while stopping.
            let step = (deadline - now).min(Duration::from_millis(20));
            life = self
                .inner
                .life_cv
                .wait_timeout(life, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Registers the run's output streams and its exit with the reactor: one task reads each
/// stream, one waits for the exit (through a pidfd), lets the readers drain and records the
/// end. No thread is started for the run.
fn start_tasks(
    reactor: &Reactor,
    inner: &Arc<Inner>,
    readers: Vec<(Stream, OwnedFd)>,
    drain: Duration,
) -> Result<(), RunError> {
    let pid = inner.pid;
    let _in_loop = reactor.handle().enter();
    let fail = |e: RunError| {
        abort_child(pid);
        Err(e)
    };
    let mut fds = Vec::new();
    for (stream, fd) in readers {
        if let Err(e) = pump::set_nonblocking(fd.as_raw_fd()) {
            return fail(RunError::io("make an output stream non-blocking", e));
        }
        match register(fd) {
            Ok(a) => fds.push((stream, a)),
            Err(e) => return fail(RunError::io("register an output stream", e)),
        }
    }
    let exit_fd = match pidfd_open(pid) {
        Ok(fd) => match register(fd) {
            Ok(a) => Some(a),
            Err(e) => return fail(RunError::io("register the child's pidfd", e)),
        },
        // An old kernel without pidfds: the exit is waited for on the blocking pool.
        Err(_) => None,
    };
    // A PTY run's screen is parsed off the output's way: by whoever asks for it, and by the
    // reactor's background screen thread.
    let screen = inner.pty.as_ref().map(|p| Arc::clone(&p.screen));
    if let Some(cell) = &screen {
        reactor.screens().add(Arc::clone(cell));
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut set = tokio::task::JoinSet::new();
    for (stream, fd) in fds {
        let sink = Sink {
            stream,
            ring: Arc::clone(&inner.ring),
            transcript: inner.transcript.clone(),
            screen: screen.clone(),
            reactor: reactor.clone(),
        };
        set.spawn_on(read_stream(fd, sink, stop_rx.clone()), reactor.handle());
    }
    let waiter = Arc::clone(inner);
    let r = reactor.clone();
    reactor.handle().spawn(async move {
        wait_and_end(&r, &waiter, exit_fd, set, stop_tx, drain).await;
    });
    Ok(())
}

/// Registers a descriptor the run owns with the reactor, for reading.
fn register(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is a valid open descriptor, owned by the AsyncFd from here on: it
    // stays open and the same until the AsyncFd is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)
}

/// Where a stream's bytes go.
struct Sink {
    stream: Stream,
    ring: Arc<Ring>,
    transcript: Option<Arc<Transcript>>,
    screen: Option<Arc<pty::ScreenCell>>,
    reactor: Reactor,
}

impl Sink {
    fn take(&self, bytes: &[u8]) {
        // The transcript first: a byte the ring evicts is then already on disk, where the
        // screen takes what it fell behind on.
        if let Some(t) = &self.transcript {
            t.write(self.stream, bytes);
        }
        if let Some(cell) = &self.screen {
            cell.keep_up_before_push(bytes.len());
            cell.count_output(bytes.len());
        }
        self.ring.push(self.stream, bytes);
        if self.screen.is_some() {
            self.reactor.screens().poke();
        }
    }
}

/// How many reads one stream makes in a row before it lets the loop's other tasks run.
const READS_PER_TURN: u32 = 16;

/// Reads one stream until end of file (or EIO, which is how a PTY master reports that the
/// last holder of the slave closed it), or until told to stop (the child has exited and
/// something else, a background grandchild, holds the stream open past the drain period).
async fn read_stream(
    fd: tokio::io::unix::AsyncFd<OwnedFd>,
    sink: Sink,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let len = sink.ring.max_frame().max(1);
    let mut reads = 0u32;
    loop {
        let mut guard = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            g = fd.readable() => match g {
                Ok(g) => g,
                Err(_) => return,
            },
        };
        let got = guard.try_io(|fd| {
            sink.reactor.with_buf(len, |buf| {
                loop {
                    // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
                    let n =
                        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                    if n > 0 {
                        sink.take(&buf[..n as usize]);
                        return Ok(true);
                    }
                    if n == 0 {
                        return Ok(false);
                    }
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EINTR) => continue,
                        Some(libc::EAGAIN) => return Err(e),
                        // EIO: PTY slave closed by its last holder. Anything else: the stream
                        // is unusable; either way this stream is over.
                        _ => return Ok(false),
                    }
                }
            })
        });
        match got {
            Ok(Ok(true)) => {
                reads += 1;
                if reads.is_multiple_of(READS_PER_TURN) {
                    tokio::task::yield_now().await;
                }
            }
            Ok(_) => return,
            // Would block: readiness cleared, wait again.
            Err(_) => {}
        }
    }
}

/// `pidfd_open(2)`: a descriptor that becomes readable when the child exits.
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain syscall with a pid and no flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns (pidfds are close-on-exec).
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Observes the exit without reaping (`WNOWAIT`): blocking unless `nohang`. Ok(true) once
/// the child has exited, Ok(false) when `nohang` and it has not.
fn observe_exit(pid: libc::pid_t, nohang: bool) -> io::Result<bool> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it. WNOWAIT leaves the child
        // waitable, so it stays a zombie (and its pid ours) until it is reaped.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT | if nohang { libc::WNOHANG } else { 0 };
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if r == 0 {
            // With WNOHANG and no exit yet, waitid succeeds with si_pid 0.
            // SAFETY: waitid filled `info`; si_pid is valid for a child event.
            return Ok(!nohang || unsafe { info.si_pid() } != 0);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// The waiter: observes the exit (pidfd readable) without reaping, reaps under the `life`
/// lock (so nobody signals a recycled pid), lets the readers drain, then records the end.
async fn wait_and_end(
    reactor: &Reactor,
    inner: &Arc<Inner>,
    exit_fd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    mut readers: tokio::task::JoinSet<()>,
    stop: tokio::sync::watch::Sender<bool>,
    drain: Duration,
) {
    let pid = inner.pid as libc::pid_t;
    let observed = match &exit_fd {
        Some(fd) => loop {
            match observe_exit(pid, true) {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(e) => break Err(e),
            }
            match fd.readable().await {
                Ok(mut g) => g.clear_ready(),
                Err(e) => break Err(e),
            }
        },
        None => match tokio::task::spawn_blocking(move || observe_exit(pid, false)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(io::Error::other(e.to_string())),
        },
    };
    drop(exit_fd);
    let exit = {
        let mut life = inner.life();
        let liveness = match observed {
            Ok(()) => {
                let mut status = 0;
                let reaped = loop {
                    // SAFETY: reaps our own child, which waitid reported as exited (a
                    // zombie: this does not block).
                    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
                    if r == pid {
                        break Ok(status);
                    }
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EINTR) {
                        break Err(e);
                    }
                };
                match reaped.map(ExitStatus::from_wait_status) {
                    Ok(Some(exit)) => Liveness::Exited { exit },
                    Ok(None) => Liveness::Unobserved {
                        reason: "waitpid returned a status that is not an exit".into(),
                    },
                    Err(e) => Liveness::Unobserved {
                        reason: format!("waitpid failed: {e}"),
                    },
                }
            }
            Err(e) => Liveness::Unobserved {
                reason: format!("waitid failed: {e}"),
            },
        };
        life.reaped = true;
        life.liveness = liveness.clone();
        inner.life_cv.notify_all();
        inner.reaped_tx.send_replace(true);
        match liveness {
            Liveness::Exited { exit } => Some(exit),
            _ => None,
        }
    };
    let drained = tokio::time::timeout(drain, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        let _ = stop.send(true);
        while readers.join_next().await.is_some() {}
    }
    // Every descriptor of the run is closed before its end is visible.
    if let Some(t) = inner.transcript.clone() {
        let _ = reactor.short_blocking(move || t.finish()).await;
    }
    // Release descriptors the ended run no longer needs. An input write may be blocked for
    // up to its timeout; do not wait for it.
    if let Some(p) = &inner.pty {
        *p.master.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    if let Ok(mut g) = inner.input.try_lock() {
        *g = None;
    }
    inner.ring.end(exit);
    reactor.screens().poke();
}

/// A PTY run's screen held still ([`Run::hold_screen`]); released when dropped.
#[doc(hidden)]
pub struct ScreenHold<'a>(#[allow(dead_code)] MutexGuard<'a, pty::Screen>);

/// How a PTY run's interrupt was delivered ([`Run::interrupt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT to the terminal's foreground process group (a cooked terminal).
    Signal { group: u32 },
    /// The terminal's interrupt character typed as input (a raw-mode terminal).
    Key { byte: u8 },
}

/// The interrupt character to type when the terminal behind `master` is in raw mode (ISIG
/// off); `None` when its line discipline turns ^C into SIGINT itself, or when its modes
/// cannot be read (then a signal is sent, as before).
fn raw_mode_interrupt_char(master: std::os::fd::RawFd) -> Option<u8> {
    // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `master` is the open master descriptor of this run's PTY (held under its lock
    // by the caller); on Linux tcgetattr on a master reports the terminal's modes.
    if unsafe { libc::tcgetattr(master, &mut t) } != 0 {
        return None;
    }
    if t.c_lflag & libc::ISIG != 0 {
        return None;
    }
    // _POSIX_VDISABLE (0 on Linux) means no interrupt character: ^C, what the key sends.
    Some(match t.c_cc[libc::VINTR] {
        0 => 0x03,
        b => b,
    })
}
