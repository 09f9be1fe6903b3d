//! The PTY transport: a pseudo-terminal from portable-pty, the child started on its slave as
//! the leader of a new session (and so of a new process group) with the slave as its
//! controlling terminal.
//!
//! portable-pty opens the pair, resizes the master and reports the terminal's foreground
//! process group. The child itself is started here with `std::process::Command`, not with
//! portable-pty's `CommandBuilder`, because that builder adds `SHELL` to the environment
//! after clearing it and silently replaces a working folder that does not exist with
//! `$HOME`: both would break the contract that the child gets exactly the environment and
//! the folder it was given.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use portable_pty::{MasterPty, PtySize, native_pty_system};

use super::pump::{dup_cloexec, set_nonblocking};
use super::{
    RunError, RunSpec, ScreenSnapshot, TermSize, cloexec_inherited_fds, fork_guard,
    reset_signals_in_child,
};

/// What the PTY spawn hands to the run.
pub(crate) struct PtyChild {
    pub pid: u32,
    pub master: Box<dyn MasterPty + Send>,
    /// Duplicate of the master for the reader thread.
    pub reader: OwnedFd,
    /// Duplicate of the master for input (non-blocking).
    pub writer: File,
}

pub(crate) fn pty_size(size: TermSize) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

pub(crate) fn spawn(spec: &RunSpec, size: TermSize) -> Result<PtyChild, RunError> {
    // Nothing may fork between openpty and the close-on-exec flags portable-pty sets after
    // it, or the child of that fork would inherit this terminal: hold the fork guard.
    let _guard = fork_guard();
    let pair = native_pty_system()
        .openpty(pty_size(size))
        .map_err(|e| RunError::Pty(format!("cannot open a pseudo-terminal: {e:#}")))?;
    let tty = pair
        .master
        .tty_name()
        .ok_or_else(|| RunError::Pty("the pseudo-terminal has no slave device name".into()))?;
    // Our own handle on the slave: O_NOCTTY so that this process never acquires it.
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&tty)
        .map_err(|e| RunError::io("open the pseudo-terminal slave", e))?;
    drop(pair.slave);

    let master_fd = pair
        .master
        .as_raw_fd()
        .ok_or_else(|| RunError::Pty("the pseudo-terminal master has no descriptor".into()))?;
    let reader = dup_cloexec(master_fd).map_err(|e| RunError::io("duplicate the master", e))?;
    let writer =
        File::from(dup_cloexec(master_fd).map_err(|e| RunError::io("duplicate the master", e))?);
    set_nonblocking(master_fd).map_err(|e| RunError::io("make the master non-blocking", e))?;

    let stdio = |f: &File| -> Result<Stdio, RunError> {
        Ok(Stdio::from(
            f.try_clone()
                .map_err(|e| RunError::io("duplicate the slave", e))?,
        ))
    };
    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..])
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd)
        .stdin(stdio(&slave)?)
        .stdout(stdio(&slave)?)
        .stderr(stdio(&slave)?);
    let cgroup_procs = super::cgroup::procs_for_spawn(spec.cgroup.as_deref())?;
    let cgroup_fd = cgroup_procs.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (write, signal, sigprocmask, close_range, fcntl, setsid,
    // ioctl).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = cgroup_fd {
                super::cgroup::join_in_child(fd)?;
            }
            reset_signals_in_child();
            cloexec_inherited_fds();
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            // std has already placed the slave on descriptors 0, 1 and 2.
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| RunError::Spawn {
        program: spec.argv[0].clone().into(),
        err: e,
    })?;
    // The parent's copies of the slave must close, or the master never sees the end.
    drop(cmd);
    drop(slave);
    let pid = child.id();
    // Dropping a std Child neither kills nor reaps it; the run's waiter reaps by pid.
    drop(child);
    drop(cgroup_procs);
    Ok(PtyChild {
        pid,
        master: pair.master,
        reader,
        writer,
    })
}

/// The queue between a PTY run's reader and its screen thread: bounded by bytes, so the
/// screen (server state, exact by contract) is never more than `cap` bytes behind the ring.
/// When it is full the reader waits, which slows the child exactly as a terminal emulator
/// that parses inline would; client readers of the ring are never waited for.
pub(crate) struct ScreenFeed {
    state: Mutex<FeedState>,
    cond: Condvar,
    cap: usize,
}

struct FeedState {
    items: VecDeque<(Arc<[u8]>, u64)>,
    bytes: usize,
    closed: bool,
}

impl ScreenFeed {
    pub fn new(cap: usize) -> ScreenFeed {
        ScreenFeed {
            state: Mutex::new(FeedState {
                items: VecDeque::new(),
                bytes: 0,
                closed: false,
            }),
            cond: Condvar::new(),
            cap,
        }
    }

    fn lock(&self) -> MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues output whose last frame is `seq`; waits while the queue is full (one item is
    /// always accepted into an empty queue, whatever its size).
    pub fn push(&self, bytes: Arc<[u8]>, seq: u64) {
        let mut st = self.lock();
        while !st.items.is_empty() && st.bytes + bytes.len() > self.cap && !st.closed {
            st = self.cond.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.bytes += bytes.len();
        st.items.push_back((bytes, seq));
        self.cond.notify_all();
    }

    /// No more output will come.
    pub fn close(&self) {
        self.lock().closed = true;
        self.cond.notify_all();
    }

    /// Takes everything queued, waiting for something; `None` once closed and drained.
    pub fn pop_all(&self) -> Option<Vec<(Arc<[u8]>, u64)>> {
        let mut st = self.lock();
        loop {
            if !st.items.is_empty() {
                st.bytes = 0;
                let out = st.items.drain(..).collect();
                self.cond.notify_all();
                return Some(out);
            }
            if st.closed {
                return None;
            }
            st = self.cond.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The screen thread: parses every queued chunk, in order, and records the seq of the last
/// frame parsed, under the screen lock. Once the output has ended it replaces the emulator
/// with the final screen's rendering (what `GET /screen` still serves) and releases the
/// emulator's memory: an ended run keeps a few strings, not `rows × cols` cells.
pub(crate) fn run_screen(feed: &ScreenFeed, cell: &ScreenCell) {
    while let Some(batch) = feed.pop_all() {
        let mut s = cell.lock();
        for (bytes, seq) in batch {
            if let Some(p) = s.parser.as_mut() {
                p.process(&bytes);
            }
            s.seq = seq;
        }
        drop(s);
        cell.cond.notify_all();
    }
    let mut s = cell.lock();
    let released = match s.parser.take() {
        Some(p) => {
            s.last = Some(render(&p, s.seq));
            drop(p);
            true
        }
        None => false,
    };
    s.done = true;
    drop(s);
    cell.cond.notify_all();
    // Trimmed outside the lock: screen() callers do not wait for it.
    if released {
        release_freed_memory();
    }
}

/// The snapshot of a screen whose last parsed frame is `seq`.
pub(crate) fn render(parser: &vt100::Parser, seq: u64) -> ScreenSnapshot {
    let sc = parser.screen();
    let (rows, cols) = sc.size();
    ScreenSnapshot {
        seq,
        size: TermSize {
            rows: rows.get(),
            cols: cols.get(),
        },
        cursor: sc.cursor_position(),
        formatted: sc.state_formatted(),
        text: sc.contents(),
        alternate_screen: sc.alternate_screen(),
    }
}

/// Hands memory that was just freed back to the kernel. glibc keeps freed heap pages in its
/// arenas (the emulator's rows are allocated one by one, below the mmap threshold), so
/// without this the server's resident size would not go down when a large screen is
/// dropped.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The screen and a condvar signalled whenever it advances.
pub(crate) struct ScreenCell {
    pub screen: Mutex<Screen>,
    pub cond: Condvar,
}

impl ScreenCell {
    pub fn new(size: TermSize) -> ScreenCell {
        ScreenCell {
            screen: Mutex::new(Screen::new(size)),
            cond: Condvar::new(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Screen> {
        self.screen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the screen includes frame `seq` (or the screen thread is done, or
    /// `timeout`), and returns the locked screen.
    pub fn lock_at_least(&self, seq: u64, timeout: std::time::Duration) -> MutexGuard<'_, Screen> {
        let deadline = std::time::Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            let now = std::time::Instant::now();
            if s.seq >= seq || s.done || now >= deadline {
                return s;
            }
            s = self
                .cond
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The terminal screen of a PTY run, fed with every output frame.
pub(crate) struct Screen {
    /// The emulator, while output may still come; `None` once the output has ended.
    pub parser: Option<vt100::Parser>,
    /// The final screen, kept once the emulator is released.
    pub last: Option<ScreenSnapshot>,
    /// The seq of the last frame the parser has processed.
    pub seq: u64,
    /// The screen thread has parsed the last output of the run.
    pub done: bool,
}

impl Screen {
    pub fn new(size: TermSize) -> Screen {
        Screen {
            parser: Some(vt100::Parser::new(nz(size.rows), nz(size.cols), 0)),
            last: None,
            seq: 0,
            done: false,
        }
    }

    /// The screen as it stands (the final one once the output has ended).
    pub fn snapshot(&self) -> ScreenSnapshot {
        match (&self.parser, &self.last) {
            (Some(p), _) => render(p, self.seq),
            (None, Some(last)) => last.clone(),
            // Unreachable: the parser is only taken when `last` is set.
            (None, None) => ScreenSnapshot {
                seq: self.seq,
                size: TermSize::default(),
                cursor: (0, 0),
                formatted: String::new(),
                text: String::new(),
                alternate_screen: false,
            },
        }
    }
}

pub(crate) fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}
