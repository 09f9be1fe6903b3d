//! One event loop for every run: the runs that share a [`Reactor`] are read, waited for and
//! parsed by a fixed set of threads, whatever their number.
//!
//! - One thread runs a single-threaded tokio runtime. Every output stream (a PTY master, a
//!   pipe) is a non-blocking descriptor registered with its reactor (`AsyncFd`), read into
//!   the reactor's one buffer and pushed to the ring and the transcript; every child's exit
//!   is observed through its pidfd, registered the same way; the drain period after an exit
//!   is a timer.
//! - One thread, at the lowest scheduling priority, brings the PTY screens up to date in the
//!   background ([`Screens`]), for every run in turn.
//! - Work that blocks (fsync of a transcript, a caller's end-of-run bookkeeping) goes to the
//!   runtime's blocking pool, whose threads end when idle; the short jobs (fsyncs, scans of
//!   `/proc`) two at a time.
//!
//! A session manager holds one reactor for all its runs; a run started on its own
//! ([`super::RunSpec::new`] without a reactor) gets a private one, which ends with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::pty::{OutputMeter, ScreenCell};

/// A handle on the event loop; cheap to clone. The loop's threads end once the last handle
/// (held by the reactor's own users and by every run task it carries) is gone.
#[derive(Clone)]
pub struct Reactor {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor").finish_non_exhaustive()
    }
}

struct Shared {
    handle: tokio::runtime::Handle,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// The one read buffer: every read happens on the loop's one thread, between awaits.
    buf: Mutex<Vec<u8>>,
    screens: Arc<Screens>,
    /// How many short blocking jobs of the runs may hold a thread of the blocking pool at
    /// once ([`SHORT_SLOTS`]).
    short_slots: tokio::sync::Semaphore,
}

/// How many short blocking jobs of the runs (a transcript's fsync at its end, a scan of
/// `/proc` while a stop escalates) run on the blocking pool at once: each takes
/// milliseconds, and many runs doing one together (a shutdown stopping them all) would
/// otherwise take a thread each.
const SHORT_SLOTS: usize = 2;

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(());
        }
        self.screens.stop();
    }
}

/// How long an up-to-date PTY screen goes unasked before its emulator is given back, by
/// default (see [`Reactor::start_with_screen_sleep`]).
pub const SCREEN_SLEEP_AFTER: Duration = Duration::from_secs(30);

impl Reactor {
    /// Starts the loop's two threads.
    pub fn start() -> std::io::Result<Reactor> {
        Reactor::start_with_screen_sleep(SCREEN_SLEEP_AFTER)
    }

    /// Starts the loop's two threads; an up-to-date PTY screen nobody has asked for during
    /// `sleep_after` gives its emulator back, and is rebuilt from the transcript when next
    /// needed (only where that is exact and short: `docs/runs.md`, "Idle screens").
    pub fn start_with_screen_sleep(sleep_after: Duration) -> std::io::Result<Reactor> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("runs-blocking")
            .thread_keep_alive(Duration::from_secs(3))
            .build()?;
        let handle = rt.handle().clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("runs-io".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = rx.await;
                });
                // Tasks still held (none once every run has ended) are dropped here.
                rt.shutdown_background();
            })?;
        let screens = Arc::new(Screens {
            sleep_after,
            ..Screens::default()
        });
        let worker = Arc::clone(&screens);
        let started = std::thread::Builder::new()
            .name("runs-screens".into())
            .spawn(move || worker.run());
        if let Err(e) = started {
            let _ = tx.send(());
            return Err(e);
        }
        Ok(Reactor {
            shared: Arc::new(Shared {
                handle,
                stop: Mutex::new(Some(tx)),
                buf: Mutex::new(Vec::new()),
                screens,
                short_slots: tokio::sync::Semaphore::new(SHORT_SLOTS),
            }),
        })
    }

    /// The runtime the runs' tasks live on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.shared.handle
    }

    /// Runs `f` on the loop's one thread with the shared read buffer of `len` bytes.
    pub(crate) fn with_buf<R>(&self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut b = self.shared.buf.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() < len {
            b.resize(len, 0);
        }
        f(&mut b[..len])
    }

    /// Runs `f`, short blocking work, on the blocking pool of the runtime that polls the
    /// caller, at most [`SHORT_SLOTS`] jobs of this reactor's runs at a time.
    pub(crate) async fn short_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let _slot = self.shared.short_slots.acquire().await;
        tokio::task::spawn_blocking(f).await.ok()
    }

    /// The background screens of this reactor's PTY runs.
    pub(crate) fn screens(&self) -> &Arc<Screens> {
        &self.shared.screens
    }

    /// How long an unasked screen keeps its emulator.
    pub(crate) fn screen_sleep_after(&self) -> Duration {
        self.shared.screens.sleep_after
    }

    /// The PTY output of every run of this reactor (what the background screens read the
    /// output's rate from).
    pub(crate) fn meter(&self) -> OutputMeter {
        self.shared.screens.meter.clone()
    }
}

/// The background screen thread's work list.
#[derive(Default)]
pub(crate) struct Screens {
    cells: Mutex<Vec<Arc<ScreenCell>>>,
    /// Set by a push (or an end) since the thread last looked.
    pending: AtomicBool,
    stopped: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    meter: OutputMeter,
    sleep_after: Duration,
}

/// How long the background screen thread sleeps when nothing pokes it (it then looks
/// again, which costs a scan of the cells' positions).
const IDLE_LOOK: Duration = Duration::from_secs(5);

impl Screens {
    /// Adds a PTY run's screen; it leaves the list once its run has ended and its last
    /// frame is parsed.
    pub(crate) fn add(&self, cell: Arc<ScreenCell>) {
        self.cells
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cell);
        self.poke();
    }

    /// Something was pushed to (or ended) a ring: the thread looks again.
    pub(crate) fn poke(&self) {
        if !self.pending.swap(true, Ordering::SeqCst) {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_one();
        }
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_one();
    }

    /// The thread: at `SCHED_IDLE`, parses each screen that is behind in slices, one
    /// screen after another, and sleeps when all are up to date.
    fn run(&self) {
        super::pty::lower_priority();
        let mut rate = super::pty::OutputRate::new(self.meter.clone());
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            self.pending.store(false, Ordering::SeqCst);
            let cells: Vec<Arc<ScreenCell>> =
                self.cells.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut busy = false;
            let mut released = false;
            let mut slept = false;
            for cell in &cells {
                match cell.background_step(&mut rate) {
                    super::pty::Step::Idle => {}
                    super::pty::Step::Busy => busy = true,
                    super::pty::Step::Burst => {
                        busy = true;
                        std::thread::sleep(super::pty::BURST_RECHECK);
                        break;
                    }
                    super::pty::Step::Released => released = true,
                    super::pty::Step::Slept => slept = true,
                }
            }
            if released {
                self.cells
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|c| !c.released());
            }
            if released || slept {
                // Trimmed outside any screen lock: screen callers do not wait for it.
                super::pty::release_freed_memory();
            }
            drop(cells);
            if busy {
                continue;
            }
            let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            if !self.pending.load(Ordering::SeqCst) && !self.stopped.load(Ordering::SeqCst) {
                // Looks again in time to put the screens nobody asks for to sleep.
                let _ = self.cv.wait_timeout(g, IDLE_LOOK.min(self.sleep_after));
            }
        }
    }
}
