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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use portable_pty::{MasterPty, PtySize, native_pty_system};

use super::pump::{dup_cloexec, set_nonblocking};
use super::ring::{ReadOutcome, Ring};
use super::transcript::Transcript;
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

/// The most output the background parser takes under the screen lock at a time, so that a
/// caller who wants the screen never waits long for the lock.
const SLICE_BYTES: usize = 64 * 1024;
/// How much of the transcript is read at a time when the screen takes bytes from it.
const TRANSCRIPT_CHUNK: usize = 256 * 1024;

/// A PTY run's screen and where it takes its bytes from: the ring, and the transcript for the
/// bytes the ring has evicted (the transcript is written before the ring is pushed, so every
/// evicted byte is on disk while the transcript holds everything).
///
/// Nothing here is on the reader's way while the transcript holds everything: the reader
/// writes the transcript and the ring and moves on; the screen is brought up to date by
/// whoever needs it ([`ScreenCell::current`]) and by a background thread of the lowest
/// priority ([`run_screen`]). When the run has no transcript, or its transcript stopped
/// (capped, or a write failed), the bytes the ring evicts would be lost to the screen, so
/// the reader first brings the screen past what its push evicts
/// ([`ScreenCell::keep_up_before_push`]): the screen stays exact, and only then does the
/// emulator's speed hold the child. A PTY run's transcript past its cap spills the output
/// into a nameless file for the screen ([`super::transcript`]), so a capped transcript
/// holds the child back only once the screen is [`super::transcript::DEFAULT_SPILL_MAX`]
/// behind.
pub(crate) struct ScreenCell {
    screen: Mutex<Screen>,
    /// Resizes the screen has not applied yet: each applies once the screen has parsed the
    /// output up to its byte. Apart from the screen, so a resize never waits for the parser.
    resizes: Mutex<VecDeque<(u64, TermSize)>>,
    ring: Arc<Ring>,
    transcript: Option<Arc<Transcript>>,
    /// The output of every run sharing it (see [`run_screen`]).
    meter: OutputMeter,
    /// How long an up-to-date screen goes unused before its emulator is given back (see
    /// [`ScreenCell::background_step`]).
    sleep_after: Duration,
}

/// The most output a sleeping screen is rebuilt from: a screen that has parsed more keeps
/// its emulator. Measured, vt100 parses 10 to 17 ms per MiB here (`docs/performance.md`), so
/// a rebuild costs at most about 70 ms, what a fetch after a ring's worth of output costs.
pub(crate) const SLEEP_REPLAY_MAX: u64 = 4 << 20;
/// The most resizes a screen remembers for a rebuild; one that has seen more never sleeps.
const SLEEP_RESIZES_MAX: usize = 256;

impl ScreenCell {
    pub fn new(
        size: TermSize,
        ring: Arc<Ring>,
        transcript: Option<Arc<Transcript>>,
        meter: OutputMeter,
        sleep_after: Duration,
    ) -> ScreenCell {
        ScreenCell {
            screen: Mutex::new(Screen::new(size)),
            resizes: Mutex::new(VecDeque::new()),
            ring,
            transcript,
            meter,
            sleep_after,
        }
    }

    /// The screen as it is, without bringing it up to date (its `seq` says how far it is).
    pub fn lock(&self) -> MutexGuard<'_, Screen> {
        self.screen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The screen brought up to date with every frame pushed before the call (or more),
    /// tagged with the seq of the last frame it includes. Parses on the caller's thread
    /// whatever the screen is behind (from the transcript for what the ring evicted).
    pub fn current(&self) -> ScreenSnapshot {
        let target = self.ring.status().next_seq - 1;
        let mut s = self.lock();
        self.advance(&mut s, target, usize::MAX);
        s.used = Instant::now();
        s.snapshot()
    }

    /// Counts `len` bytes of this run's output on the meter it shares.
    pub fn count_output(&self, len: usize) {
        self.meter.count(len);
    }

    /// On the reader, before it pushes a frame of `len` bytes: when the transcript does
    /// not hold every byte, brings the screen past the frames that push would evict, so no
    /// byte is lost to it. Returns at once while the transcript holds everything.
    pub fn keep_up_before_push(&self, len: usize) {
        if self
            .transcript
            .as_ref()
            .is_some_and(|t| t.holds_everything())
        {
            return;
        }
        let kept = self.ring.first_kept_after_push(len);
        let mut s = self.lock();
        if (s.parser.is_some() || s.asleep) && s.seq + 1 < kept {
            self.advance(&mut s, kept - 1, usize::MAX);
        }
    }

    /// Resizes the terminal with `resize_master` and records the new size for the screen,
    /// at the point of the output where it happened (after every frame pushed so far).
    /// Does not wait for the parser.
    pub fn resize(
        &self,
        size: TermSize,
        resize_master: impl FnOnce() -> Result<(), RunError>,
    ) -> Result<(), RunError> {
        let mut r = self.resizes.lock().unwrap_or_else(|e| e.into_inner());
        let at = self.ring.status().total_bytes;
        resize_master()?;
        r.push_back((at, size));
        Ok(())
    }

    /// Parses output bytes that follow the screen's `offset`, applying the resizes that
    /// fall within them at their byte.
    fn feed(&self, s: &mut Screen, mut bytes: &[u8]) {
        let Some(p) = s.parser.as_mut() else {
            return;
        };
        let mut resizes = self.resizes.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(&(at, size)) = resizes.front() {
            if at > s.offset + bytes.len() as u64 {
                break;
            }
            let cut = usize::try_from(at.saturating_sub(s.offset)).unwrap_or(bytes.len());
            p.process(&bytes[..cut]);
            s.offset += cut as u64;
            bytes = &bytes[cut..];
            p.set_size(nz(size.rows), nz(size.cols));
            resizes.pop_front();
            if let Some(h) = s.history.as_mut() {
                if h.len() < SLEEP_RESIZES_MAX {
                    h.push((at, size));
                } else {
                    s.history = None;
                }
            }
        }
        drop(resizes);
        p.process(bytes);
        s.offset += bytes.len() as u64;
    }

    /// Parses what the screen is behind, up to frame `target` (or past it, when the ring
    /// has evicted the frames in between), taking at most about `budget` bytes. Returns
    /// whether the screen reached `target` (or has been released).
    fn advance(&self, s: &mut Screen, target: u64, mut budget: usize) -> bool {
        if s.asleep {
            self.wake(s);
        }
        loop {
            if s.parser.is_none() {
                return true;
            }
            if let Some((seq, offset)) = s.filling {
                // Bytes the ring evicted, from the transcript, up to the frame boundary
                // `offset` (the end of frame `seq`).
                if budget == 0 {
                    return false;
                }
                let want = (offset - s.offset).min(TRANSCRIPT_CHUNK as u64) as usize;
                let want = want.min(budget.max(1));
                let mut buf = vec![0u8; want];
                match self.read_transcript(s.offset, &mut buf) {
                    Ok(()) => self.feed(s, &buf),
                    // Unreachable while the reader keeps the screen up when the transcript
                    // does not hold everything; if the disk fails the read, the screen goes
                    // on from the ring (it misses these bytes: it cannot invent them).
                    Err(_) => s.offset = offset,
                }
                budget = budget.saturating_sub(want);
                if s.offset >= offset {
                    s.seq = seq;
                    s.filling = None;
                }
                continue;
            }
            if s.seq >= target || budget == 0 {
                break;
            }
            match self.ring.read_from(s.seq + 1, budget.min(SLICE_BYTES)) {
                ReadOutcome::Frames(frames) => {
                    for f in frames {
                        self.feed(s, &f.bytes);
                        s.seq = f.seq;
                        budget = budget.saturating_sub(f.bytes.len());
                        if f.seq >= target {
                            break;
                        }
                    }
                }
                ReadOutcome::Lag { .. } => {
                    let (first, offset) = self.ring.first_held();
                    s.filling = Some((first - 1, offset));
                }
                ReadOutcome::End(_) | ReadOutcome::Pending { .. } | ReadOutcome::Ahead { .. } => {
                    break;
                }
            }
        }
        // Resizes at the byte reached (after the last output) apply now.
        if s.filling.is_none() {
            self.feed(s, &[]);
        }
        if let Some(t) = &self.transcript {
            // What the screen parsed past the transcript's cap is given back by the spill.
            t.release_before(s.offset);
        }
        // Every frame of an ended run parsed: keep its final screen, drop the emulator.
        if let Some(end) = self.ring.ended()
            && s.seq >= end.last_seq
            && let Some(p) = s.parser.take()
        {
            s.last = Some(render(&p, s.seq));
            if let Some(t) = &self.transcript {
                t.end_spill();
            }
        }
        s.seq >= target || s.parser.is_none()
    }

    /// One turn of the background screen thread ([`super::reactor::Screens`], at the
    /// lowest scheduling priority): parses a slice of [`SLICE_BYTES`] of what this screen
    /// is behind, releasing its lock after. While the PTY output of the reactor's runs comes
    /// faster than [`BURST_BYTES_PER_SEC`] it parses nothing: measured, an ended run's
    /// screen catching up on its last burst in the background halved the next run's burst
    /// even at that priority (`docs/performance.md`). Once the output has ended and been
    /// parsed, the emulator is replaced with the final screen's rendering (what `GET
    /// /screen` still serves) and its memory released: an ended run keeps a few strings,
    /// not `rows × cols` cells.
    pub(crate) fn background_step(&self, rate: &mut OutputRate) -> Step {
        let status = self.ring.status();
        {
            let mut s = self.lock();
            if s.asleep {
                // A sleeping screen stays asleep while nobody asks for it, output or not,
                // unless it must wake: its run ended (the final screen is kept), its rebuild
                // would grow past the bound, or the transcript no longer holds every byte.
                let must = !s.born
                    || status.end.is_some()
                    || status.total_bytes > SLEEP_REPLAY_MAX
                    || !self.transcript_holds_everything();
                if !must {
                    return Step::Idle;
                }
                if rate.bursting() {
                    return Step::Burst;
                }
            } else if s.parser.is_none() {
                return Step::Released;
            } else {
                let behind = s.filling.is_some() || s.seq + 1 < status.next_seq;
                if !behind && status.end.is_none() {
                    if s.used.elapsed() >= self.sleep_after && self.sleep(&mut s) {
                        return Step::Slept;
                    }
                    return Step::Idle;
                }
                if behind && rate.bursting() {
                    return Step::Burst;
                }
            }
        }
        let mut s = self.lock();
        let reached = self.advance(&mut s, status.next_seq - 1, SLICE_BYTES);
        if s.parser.is_none() {
            Step::Released
        } else if reached {
            Step::Idle
        } else {
            Step::Busy
        }
    }

    /// Whether the emulator has been released (the run ended and its screen is final).
    pub(crate) fn released(&self) -> bool {
        let s = self.lock();
        s.parser.is_none() && !s.asleep
    }

    fn transcript_holds_everything(&self) -> bool {
        self.transcript
            .as_ref()
            .is_some_and(|t| t.holds_everything())
    }

    /// Gives the emulator of an up-to-date screen back, when it can be rebuilt exactly: the
    /// transcript holds every byte it parsed (at most [`SLEEP_REPLAY_MAX`]) and every resize
    /// it applied is remembered. Returns whether it now sleeps.
    fn sleep(&self, s: &mut Screen) -> bool {
        if s.parser.is_none()
            || s.asleep
            || s.filling.is_some()
            || s.history.is_none()
            || s.offset > SLEEP_REPLAY_MAX
            || !self.transcript_holds_everything()
        {
            return false;
        }
        s.parser = None;
        s.asleep = true;
        true
    }

    /// Rebuilds a sleeping screen's emulator: a new one at the run's first size takes the
    /// output again from the transcript's first byte to where the screen slept, with every
    /// resize re-applied at its byte (the same bytes and sizes give the same screen).
    fn wake(&self, s: &mut Screen) {
        s.asleep = false;
        s.born = true;
        let history = s.history.replace(Vec::new()).unwrap_or_default();
        {
            let mut r = self.resizes.lock().unwrap_or_else(|e| e.into_inner());
            for e in history.into_iter().rev() {
                r.push_front(e);
            }
        }
        s.parser = Some(new_parser(s.start));
        s.filling = Some((s.seq, s.offset));
        s.seq = 0;
        s.offset = 0;
    }

    fn read_transcript(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match &self.transcript {
            Some(t) => t.read_output_at(offset, buf),
            None => Err(io::Error::other("the run keeps no transcript")),
        }
    }
}

/// What one turn of the background screen thread came to.
pub(crate) enum Step {
    /// Up to date (or nothing to do).
    Idle,
    /// Still behind after a slice.
    Busy,
    /// Behind, while output pours in: nothing parsed.
    Burst,
    /// The run has ended and its final screen is kept: the emulator is gone.
    Released,
    /// Unused for a while, the screen gave its emulator back (it is rebuilt when needed).
    Slept,
}

/// Above this rate of PTY output (all runs together) the background screen threads wait.
const BURST_BYTES_PER_SEC: u64 = 4 << 20;
/// How often a waiting background screen thread looks again.
pub(crate) const BURST_RECHECK: Duration = Duration::from_millis(50);

/// Every byte the PTY readers sharing it have pushed: what tells the background screen
/// threads that a burst is under way. One per session manager (the server's runs share it);
/// a run started alone has its own.
#[derive(Debug, Clone, Default)]
pub struct OutputMeter(Arc<AtomicU64>);

impl OutputMeter {
    /// Counts PTY output for [`OutputRate`] (called by the readers, one add per read).
    pub(crate) fn count(&self, len: usize) {
        self.0.fetch_add(len as u64, Ordering::Relaxed);
    }

    fn total(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The rate of PTY output seen by one background screen thread, between its looks.
pub(crate) struct OutputRate {
    meter: OutputMeter,
    at: Instant,
    bytes: u64,
    bursting: bool,
}

impl OutputRate {
    pub(crate) fn new(meter: OutputMeter) -> OutputRate {
        OutputRate {
            at: Instant::now(),
            bytes: meter.total(),
            meter,
            bursting: false,
        }
    }

    /// Whether the output since the last look (at least [`BURST_RECHECK`] ago, else the
    /// last answer stands) came faster than [`BURST_BYTES_PER_SEC`].
    fn bursting(&mut self) -> bool {
        let elapsed = self.at.elapsed();
        if elapsed >= BURST_RECHECK {
            let bytes = self.meter.total();
            let per_sec = (bytes - self.bytes) as f64 / elapsed.as_secs_f64();
            self.bursting = per_sec > BURST_BYTES_PER_SEC as f64;
            self.at = Instant::now();
            self.bytes = bytes;
        }
        self.bursting
    }
}

/// Puts the calling thread in the `SCHED_IDLE` class; stays as it is where that fails.
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a valid parameter.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
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
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The terminal screen of a PTY run.
pub(crate) struct Screen {
    /// The emulator, while output may still come; `None` once the output has ended.
    /// Boxed: a sleeping or ended screen keeps one pointer, not the parser's own fields.
    pub parser: Option<Box<vt100::Parser>>,
    /// The final screen, kept once the emulator is released.
    pub last: Option<ScreenSnapshot>,
    /// The seq of the last frame the parser has processed.
    pub seq: u64,
    /// The output bytes the parser has processed (frames 1 to `seq`, or more while filling).
    offset: u64,
    /// Set while the parser takes evicted bytes from the transcript: it is then between
    /// frame boundaries, and reaches frame `.0` at byte `.1`.
    filling: Option<(u64, u64)>,
    /// The size the screen started at (what a rebuild starts from).
    start: TermSize,
    /// Every resize applied so far, at its output byte; `None` once there were too many to
    /// remember (the screen then never sleeps).
    history: Option<Vec<(u64, TermSize)>>,
    /// Set while the emulator is given back: `parser` is `None` and `seq`/`offset` say how
    /// far the screen had parsed ([`ScreenCell::wake`] rebuilds it).
    asleep: bool,
    /// Set once the first emulator was made. A screen is born asleep at byte 0 and its
    /// emulator is made on the thread that first needs it: the background screen thread,
    /// unless a fetch comes first. So the emulator's rows are allocated apart from what the
    /// run keeps for its life (its record, ring and channels are made on the request's
    /// thread), and when it sleeps its freed pages are whole and go back to the kernel
    /// (measured in `docs/performance.md`, "Idle screens").
    born: bool,
    /// When the screen was last asked for (or made).
    used: Instant,
}

impl Screen {
    pub fn new(size: TermSize) -> Screen {
        Screen {
            parser: None,
            last: None,
            seq: 0,
            offset: 0,
            filling: None,
            start: size,
            history: Some(Vec::new()),
            asleep: true,
            born: false,
            used: Instant::now(),
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

fn new_parser(size: TermSize) -> Box<vt100::Parser> {
    Box::new(vt100::Parser::new(nz(size.rows), nz(size.cols), 0))
}

pub(crate) fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}
