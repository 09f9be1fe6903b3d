//! The cockpit's event loop and its tasks, on one tokio runtime:
//!
//! - this loop owns the terminal and the [`App`]: it waits for a terminal event, a message
//!   from a task, a frame deadline or a resize deadline — and nothing else, so an idle
//!   cockpit sleeps;
//! - the data task polls `GET /runs` every second while it changes, slowing to every 5 s when
//!   nothing changes (at once after an action or a change of focus), and the focused
//!   run's events;
//! - the live task streams the focused session: its screen (`GET /screen`), then `attach`
//!   from the next seq, refetching the screen after a `lag`;
//! - the typing task sends attached keys in order (keys queued meanwhile go in one request);
//! - the evidence task polls the candidates and the views' feeds (`super::views::feed`: the
//!   publication intents at every round, the receipts while their view is shown) at the
//!   quiet pace (every 5 s, at once after an action or a change of view), the gate of the
//!   candidate the Gate view shows at each round, and the gates of every run's latest
//!   candidate when the candidates change, after an action, and at least every 30 s (a gate recomputes a worktree's identity: the server hashes it);
//! - the verify task verifies receipts one after the other;
//! - an approval runs the publish flow on a thread of its own (`super::approval`), its
//!   prompts answered by the approval dialog.
//!
//! Messages are drained in batches; a frame is drawn only when something shown changed
//! (`App::unchanged` drops a poll's answer equal to what the cockpit holds: the same list
//! draws nothing), at most `fps` times a second, inside a synchronized update (terminals that
//! do not know it ignore it). Texts that change with time alone (ages, elapsed times) wake
//! the loop when they next change (`App::next_clock_change`), at most once a second after a
//! frame; a cockpit with nothing changing sleeps.

use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use hyper::Method;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::EventStream;
use serde::de::IgnoredAny;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

use super::app::{App, AttachFrom, Effect, LiveEvent, Mode, Msg, ViewWatch};
use super::data;
use super::evidence::{self, ReceiptItem};
use super::views::{self, Pace, Pane};
use crate::api::runs::{
    self as wire, ChangesEvent, EndEvent, InputRequest, LagEvent, NoticeEvent, OutputEvent,
    ScreenSnapshot, Stream,
};
use crate::client::{Client, ClientError};

/// How often the list is polled while it changes.
pub const POLL: Duration = Duration::from_secs(1);
/// The slowest pace of a list that stopped changing (an idle cockpit).
pub const QUIET_POLL_MAX: Duration = Duration::from_secs(5);
/// How often the gates of every run's latest candidate are evaluated again when nothing asks
/// sooner.
pub const GATE_POLL: Duration = Duration::from_secs(30);
/// The most candidates whose gates one round evaluates (the newest).
const GATE_LIMIT: usize = 64;
/// How long the cockpit, on its way out, waits for an approval flow to record its refusal.
const APPROVAL_GRACE: Duration = Duration::from_secs(10);
/// How long the live pane's size must stay still before the PTY is resized.
pub const RESIZE_DEBOUNCE: Duration = Duration::from_millis(150);
/// Messages waiting for the loop; a full queue makes the streams wait (the server then
/// reports `lag` rather than the cockpit growing without bound).
const QUEUE: usize = 256;

/// The hosts the cockpit speaks to, each with its own client: one (the cockpit of one host,
/// whose refs are its server's), or several (`proctor --host A --host B`: refs are
/// `HOST/REF`, super::hosts), the first of which holds what is not a run's (new sessions,
/// the evidence, the rigs, the publication intents).
#[derive(Clone)]
pub struct Hosts {
    list: Vec<(String, std::sync::Arc<std::sync::RwLock<Client>>)>,
    multi: bool,
}

impl Hosts {
    /// One host: every request goes to `client`, paths as they are.
    pub fn one(client: Client) -> Hosts {
        Hosts {
            list: vec![(
                String::new(),
                std::sync::Arc::new(std::sync::RwLock::new(client)),
            )],
            multi: false,
        }
    }

    /// Several hosts, by name; the first is the primary.
    pub fn many(list: Vec<(String, Client)>) -> Hosts {
        Hosts {
            list: list
                .into_iter()
                .map(|(n, c)| (n, std::sync::Arc::new(std::sync::RwLock::new(c))))
                .collect(),
            multi: true,
        }
    }

    /// Every host with its client as it is now (a remote host's token is read once it
    /// answers: `host_task`).
    pub fn all(&self) -> Vec<(String, Client)> {
        self.list
            .iter()
            .map(|(n, c)| (n.clone(), Hosts::read(c)))
            .collect()
    }

    fn read(slot: &std::sync::RwLock<Client>) -> Client {
        slot.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn primary(&self) -> Client {
        Hosts::read(&self.list[0].1)
    }

    fn named(&self, host: &str) -> Option<Client> {
        self.list
            .iter()
            .find(|(n, _)| n == host)
            .map(|(_, c)| Hosts::read(c))
    }

    /// The client of the run `run` names and the host's own ref, with the host's name (in a
    /// cockpit of several).
    pub fn by_ref(&self, run: &str) -> (Client, String, Option<String>) {
        if self.multi
            && let Some((host, own)) = super::hosts::split(run)
            && let Some(c) = self.named(host)
        {
            return (c, own.to_string(), Some(host.to_string()));
        }
        (self.primary(), run.to_string(), None)
    }

    /// The client a call's `path` goes to and the path that host understands: a run's
    /// path (`/runs/HOST/REF/…`) goes to HOST with `/runs/REF/…`; any other to the primary
    /// (a new session's answer is named as the primary's run: `App::on_call_done`). The
    /// host's name is returned in a cockpit of several.
    pub fn by_path(&self, path: &str) -> (Client, String, Option<String>) {
        if !self.multi {
            return (self.primary(), path.to_string(), None);
        }
        let prefix = format!("{}/", wire::RUNS);
        if let Some(rest) = path.strip_prefix(&prefix)
            && let Some((host, tail)) = rest.split_once('/')
            && let Some(c) = self.named(host)
        {
            return (c, format!("{prefix}{tail}"), Some(host.to_string()));
        }
        (
            self.primary(),
            path.to_string(),
            Some(self.list[0].0.clone()),
        )
    }
}

/// Which host a data task follows in a cockpit of several.
#[derive(Debug, Clone)]
pub struct Follow {
    pub host: String,
    /// The first host: its factory runs are the cockpit's.
    pub primary: bool,
}

/// How long a host that cannot be reached waits before its task tries again.
const HOST_RETRY: Duration = Duration::from_secs(2);

/// One host of a cockpit of several: its token (read over ssh for a remote host, tried
/// again until the host answers), its version, then its data task (tagged with its name).
async fn host_task(
    slot: std::sync::Arc<std::sync::RwLock<Client>>,
    home: crate::home::Home,
    tx: mpsc::Sender<Msg>,
    poke: std::sync::Arc<Notify>,
    focus: watch::Receiver<Option<String>>,
    follow: Follow,
) {
    let host = follow.host.clone();
    let client = loop {
        let c = Hosts::read(&slot);
        let c = if c.bearer().is_some() {
            c
        } else {
            let home = home.clone();
            match tokio::task::spawn_blocking(move || c.with_token(&home)).await {
                Ok(Ok(c)) => {
                    *slot.write().unwrap_or_else(|e| e.into_inner()) = c.clone();
                    c
                }
                Ok(Err(e)) => {
                    let m = Msg::HostRuns {
                        host: host.clone(),
                        result: Err(show(&e)),
                    };
                    if tx.send(m).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(HOST_RETRY).await;
                    continue;
                }
                Err(_) => return,
            }
        };
        match c.probe().await {
            Ok(p) => {
                let version = p.map_or_else(|| "?".to_string(), |p| p.version);
                let m = Msg::HostVersion {
                    host: host.clone(),
                    version,
                };
                if tx.send(m).await.is_err() {
                    return;
                }
                break c;
            }
            Err(e) => {
                let m = Msg::HostRuns {
                    host: host.clone(),
                    result: Err(show(&e)),
                };
                if tx.send(m).await.is_err() {
                    return;
                }
                tokio::time::sleep(HOST_RETRY).await;
            }
        }
    };
    // The host's own change stream, ended with this task.
    let (changes_tx, changes_rx) = watch::channel::<Option<ChangesEvent>>(None);
    let _changes = AbortOnDrop(tokio::spawn(changes_task(client.clone(), changes_tx)));
    data_task(client, tx, poke, focus, changes_rx, Some(follow)).await;
}

/// A task that ends when this value is dropped (with the task that holds it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a failed request says, for the status line and the panes.
pub(crate) fn show(e: &ClientError) -> String {
    match e {
        ClientError::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Something that can draw a frame: the real terminal (with synchronized output) or a test
/// backend.
pub trait Screen {
    fn frame(&mut self, app: &mut App) -> std::io::Result<()>;
    /// The terminal now has `cols`×`rows` (a resize event): the next frame is drawn whole
    /// at that size.
    fn resize(&mut self, _cols: u16, _rows: u16) -> std::io::Result<()> {
        Ok(())
    }
    /// Writes bytes that are not a frame (the notification escape of [`crate::text::notification`]).
    fn notify(&mut self, _bytes: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
    /// Gives the terminal to a child process ([`super::term::hand_over`]); a test backend
    /// has none to give.
    fn hand_over(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// Takes it back: the next frame is drawn in full.
    fn take_back(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<B: Backend + std::io::Write> Screen for Terminal<B>
where
    B::Error: Into<std::io::Error>,
{
    fn frame(&mut self, app: &mut App) -> std::io::Result<()> {
        use ratatui::crossterm::{queue, terminal};
        queue!(self.backend_mut(), terminal::BeginSynchronizedUpdate)?;
        self.draw(|f| {
            super::ui::draw(f, app);
            if app.ascii {
                super::term::asciify(f.buffer_mut());
            }
        })
        .map_err(Into::into)?;
        let b = self.backend_mut();
        queue!(b, terminal::EndSynchronizedUpdate)?;
        std::io::Write::flush(b)
    }

    fn notify(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let b = self.backend_mut();
        std::io::Write::write_all(b, bytes)?;
        std::io::Write::flush(b)
    }

    fn hand_over(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(self.backend_mut())?;
        super::term::hand_over();
        Ok(())
    }

    fn take_back(&mut self) -> std::io::Result<()> {
        super::term::take_back()?;
        // The screen was cleared: both buffers empty, so the next frame draws every cell.
        self.swap_buffers();
        self.swap_buffers();
        Ok(())
    }
}

/// Runs `argv` (`proctor rig attach RIG`) with the terminal handed over, and takes the
/// terminal back when it exits; what it said is the status line's. Its stderr passes
/// through to the terminal as it comes, and its last line is kept: a verb that refuses says
/// why in the status line too, after the cockpit has redrawn over it.
async fn hand_over_to(screen: &mut dyn Screen, argv: &[String]) -> std::io::Result<String> {
    let (status, last) = hand_over_run(screen, argv).await?;
    Ok(match status {
        Ok(st) if st.success() => String::new(),
        Ok(st) if last.is_empty() => format!("`{}` ended with {st}", shown_argv(argv)),
        Ok(st) => format!("`{}` ended with {st}: {last}", shown_argv(argv)),
        Err(e) => format!("`{}` did not start: {e}", shown_argv(argv)),
    })
}

/// Runs `argv` with the terminal handed over (as [`hand_over_to`]); its exit status (or why
/// it did not start) and its last stderr line (sanitised), whatever the status.
async fn hand_over_run(
    screen: &mut dyn Screen,
    argv: &[String],
) -> std::io::Result<(std::io::Result<std::process::ExitStatus>, String)> {
    use tokio::io::AsyncReadExt;
    screen.hand_over()?;
    let spawned = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut said: Vec<u8> = Vec::new();
    let status = match spawned {
        Ok(mut child) => {
            if let Some(mut err) = child.stderr.take() {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = err.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), &chunk[..n]);
                    said.extend_from_slice(&chunk[..n]);
                    if said.len() > 8192 {
                        said.drain(..said.len() - 4096);
                    }
                }
            }
            child.wait().await
        }
        Err(e) => Err(e),
    };
    screen.take_back()?;
    let last = String::from_utf8_lossy(&said)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| crate::text::one_line(l, 300))
        .unwrap_or_default();
    Ok((status, last))
}

/// Approves `intent` on the remote `host` at this terminal: `proctor --host HOST publish
/// approve INTENT` with the terminal handed over (its `ssh -t` runs the approval on HOST);
/// whether it exited 0, and what it said last (its outcome line).
async fn approve_remotely(
    screen: &mut dyn Screen,
    argv: &[String],
) -> std::io::Result<(bool, String)> {
    let (status, last) = hand_over_run(screen, argv).await?;
    Ok(match status {
        Ok(st) if st.success() => (true, last),
        Ok(st) if last.is_empty() => (false, format!("`{}` ended with {st}", shown_argv(argv))),
        Ok(_) => (false, last),
        Err(e) => (false, format!("`{}` did not start: {e}", shown_argv(argv))),
    })
}

/// The command as the status line names it (the program's file name, then its arguments).
fn shown_argv(argv: &[String]) -> String {
    let program = std::path::Path::new(&argv[0])
        .file_name()
        .map_or_else(|| argv[0].clone(), |f| f.to_string_lossy().into_owned());
    std::iter::once(program)
        .chain(argv[1..].iter().cloned())
        .map(|a| crate::text::one_line(&a, 80))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Tells the person a run waits: the bell and the notification escape on the terminal
/// (through [`crate::text::notification`], the one function that builds them), and the
/// configured command on a thread of its own (never waited on by the draw loop; its
/// failure comes back to the status line).
fn tell(screen: &mut dyn Screen, app: &App, n: super::app::Notice, tx: &mpsc::Sender<Msg>) {
    let title = match &n.name {
        Some(name) => format!("proctor: {} ({name}) waits for you", n.run),
        None => format!("proctor: {} waits for you", n.run),
    };
    let body = format!("{}: {}", n.tool, n.reason);
    let bytes = crate::text::notification(&title, &body, &crate::text::TermEnv::current());
    if let Err(e) = screen.notify(&bytes) {
        let _ = tx.try_send(Msg::NotifyFailed(format!(
            "cannot write to the terminal: {e}"
        )));
    }
    let Some(argv) = app.notify.command.clone() else {
        return;
    };
    let tx = tx.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = run_notify_command(&argv, &n) {
            let _ = tx.blocking_send(Msg::NotifyFailed(e));
        }
    });
}

/// How long the notify command may run before it is killed.
const NOTIFY_COMMAND_LIMIT: Duration = Duration::from_secs(30);

/// Runs the notify command (argv, no shell) with the notice's JSON on stdin, its output
/// discarded (the terminal belongs to the cockpit).
fn run_notify_command(argv: &[String], n: &super::app::Notice) -> Result<(), String> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let json = serde_json::to_string(n).map_err(|e| e.to_string())?;
    let program = crate::text::one_line(&argv[0], 80);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(json.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let deadline = std::time::Instant::now() + NOTIFY_COMMAND_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("{program} exited with {st}")),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} ran longer than {}s and was killed",
                    NOTIFY_COMMAND_LIMIT.as_secs()
                ));
            }
            Err(e) => return Err(format!("{program}: {e}")),
        }
    }
}

/// When frames are drawn: only when the app is dirty, never sooner than `1/fps` after the
/// last one; after each, when the clock next needs one.
struct Pacer {
    gap: Duration,
    last: Option<Instant>,
    /// When a text that changes with time alone (an age, an elapsed time) next changes.
    clock_at: Option<Instant>,
}

impl Pacer {
    fn new(fps: u32) -> Pacer {
        Pacer {
            gap: Duration::from_secs(1) / fps.clamp(1, 240),
            last: None,
            clock_at: None,
        }
    }

    /// Draws a frame if the app is dirty and the frame cap allows one at `now`; whether it
    /// drew.
    fn draw(
        &mut self,
        app: &mut App,
        screen: &mut dyn Screen,
        now: Instant,
    ) -> std::io::Result<bool> {
        if !app.wants_frame() || self.last.is_some_and(|t| now < t + self.gap) {
            return Ok(false);
        }
        app.now = chrono::Utc::now();
        // A text that changes with time alone reads differently now: a frame of the live
        // pane alone would leave it as it was.
        if !app.dirty && app.next_clock_change().is_some_and(|t| t <= app.now) {
            app.dirty = true;
        }
        screen.frame(app)?;
        app.dirty = false;
        app.live_dirty = false;
        self.last = Some(now);
        self.clock_at = clock_deadline(app);
        Ok(true)
    }

    /// When the next frame may be drawn, if one is wanted.
    fn frame_at(&self, app: &App) -> Option<Instant> {
        app.wants_frame()
            .then(|| self.last.map_or_else(Instant::now, |t| t + self.gap))
    }
}

/// The most frames a second the clock alone draws: texts that change with time are at most
/// this late, and any other frame shows them at their current value.
pub const CLOCK_GAP: Duration = Duration::from_secs(1);

/// When the loop wakes for the clock, after a frame drawn at `App::now`: just after the next
/// instant a text that changes with time alone takes another value
/// ([`App::next_clock_change`]), but not sooner than [`CLOCK_GAP`] after that frame (the
/// ages of sessions a few seconds old change at as many different instants a second as there
/// are sessions). `None` when nothing shown changes with time.
fn clock_deadline(app: &App) -> Option<Instant> {
    /// Past the instant, so the frame's clock reads the new value.
    const LATE: Duration = Duration::from_millis(5);
    let next = app.next_clock_change()?;
    let wait = (next - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO);
    Some(Instant::now() + wait.max(CLOCK_GAP) + LATE)
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Quit,
    Signal,
    InputClosed,
}

/// Runs the cockpit until quit, a signal, or the end of input.
pub async fn run(
    app: &mut App,
    screen: &mut dyn Screen,
    client: Client,
    fps: u32,
) -> std::io::Result<Exit> {
    run_hosts(app, screen, Hosts::one(client), None, fps).await
}

/// [`run`] for the hosts `hosts`; `home` (a cockpit of several) reads a host's token.
pub async fn run_hosts(
    app: &mut App,
    screen: &mut dyn Screen,
    hosts: Hosts,
    home: Option<crate::home::Home>,
    fps: u32,
) -> std::io::Result<Exit> {
    let client = hosts.primary();
    let (tx, mut rx) = mpsc::channel::<Msg>(QUEUE);
    let poke = std::sync::Arc::new(Notify::new());
    let (focus_tx, focus_rx) = watch::channel::<Option<String>>(None);
    // One data task per host, each with its own client and its own wake-up.
    let mut pokes = vec![poke.clone()];
    let mut data = Vec::new();
    match (&home, hosts.multi) {
        (Some(home), true) => {
            for (k, (name, slot)) in hosts.list.iter().enumerate() {
                let p = if k == 0 {
                    poke.clone()
                } else {
                    let p = std::sync::Arc::new(Notify::new());
                    pokes.push(p.clone());
                    p
                };
                data.push(tokio::spawn(host_task(
                    slot.clone(),
                    home.clone(),
                    tx.clone(),
                    p,
                    focus_rx.clone(),
                    Follow {
                        host: name.clone(),
                        primary: k == 0,
                    },
                )));
            }
        }
        _ => {
            let (changes_tx, changes_rx) = watch::channel::<Option<ChangesEvent>>(None);
            data.push(tokio::spawn(changes_task(client.clone(), changes_tx)));
            data.push(tokio::spawn(data_task(
                client.clone(),
                tx.clone(),
                poke.clone(),
                focus_rx,
                changes_rx,
                None,
            )));
        }
    }
    let (type_tx, type_rx) = mpsc::unbounded_channel::<(String, String)>();
    let typing = tokio::spawn(typing_task(hosts.clone(), tx.clone(), type_rx));
    let mut live: Option<tokio::task::JoinHandle<()>> = None;
    let evidence_poke = std::sync::Arc::new(Notify::new());
    let (view_tx, view_rx) = watch::channel::<ViewWatch>(ViewWatch::default());
    let evidence = tokio::spawn(evidence_task(
        hosts.clone(),
        tx.clone(),
        evidence_poke.clone(),
        view_rx,
    ));
    let (verify_tx, verify_rx) = mpsc::unbounded_channel::<Vec<ReceiptItem>>();
    let verifier = tokio::spawn(verify_task(client.clone(), tx.clone(), verify_rx));
    let mut approving: Option<std::thread::JoinHandle<()>> = None;

    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    // While a child holds the terminal in cooked mode (a rig attach), ctrl-c and ctrl-\ send
    // their signals to the whole foreground group: the cockpit takes them and does nothing
    // (in raw mode they never come). The child gets the default dispositions back at exec.
    let _sigint = signal(SignalKind::interrupt())?;
    let _sigquit = signal(SignalKind::quit())?;
    let mut input = EventStream::new();

    let mut pacer = Pacer::new(fps);
    let mut resize: Option<((String, u16, u16), Instant)> = None;

    let exit = loop {
        if pacer.draw(app, screen, Instant::now())? {
            // The live pane may have a new size: resize its PTY once it settles.
            match (app.desired_resize(), &resize) {
                (None, _) => resize = None,
                (Some(want), Some((pending, _))) if *pending == want => {}
                (Some(want), _) => resize = Some((want, Instant::now() + RESIZE_DEBOUNCE)),
            }
        }
        let frame_at = pacer.frame_at(app);
        let clock_at = pacer.clock_at;
        let resize_at = resize.as_ref().map(|r| r.1);
        tokio::select! {
            biased;
            _ = sigterm.recv() => break Exit::Signal,
            _ = sighup.recv() => break Exit::Signal,
            ev = input.next() => match ev {
                Some(Ok(ev)) => {
                    if let ratatui::crossterm::event::Event::Resize(cols, rows) = ev {
                        screen.resize(cols, rows)?;
                    }
                    app.on_event(ev);
                }
                Some(Err(e)) => return Err(e),
                None => break Exit::InputClosed,
            },
            msg = rx.recv() => {
                if let Some(m) = msg {
                    app.on_msg(m);
                }
                let mut n = 0;
                while let Ok(m) = rx.try_recv() {
                    app.on_msg(m);
                    n += 1;
                    if n >= QUEUE {
                        break;
                    }
                }
            }
            _ = tokio::time::sleep_until(frame_at.unwrap_or_else(Instant::now)), if frame_at.is_some() => {}
            _ = tokio::time::sleep_until(clock_at.unwrap_or_else(Instant::now)), if clock_at.is_some() && !app.wants_frame() => {
                pacer.clock_at = None;
                app.on_clock(chrono::Utc::now());
            }
            _ = tokio::time::sleep_until(resize_at.unwrap_or_else(Instant::now)), if resize_at.is_some() => {
                if let Some(((run, rows, cols), _)) = resize.take()
                    && app.desired_resize() == Some((run.clone(), rows, cols))
                {
                    app.send_resize(run, rows, cols);
                }
            }
        }
        for eff in app.take_effects() {
            match eff {
                Effect::Call(call) => {
                    // A run's call goes to the run's own host (super::hosts).
                    let (client, path, _) = hosts.by_path(&call.path);
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let result = client
                            .call(call.method, &path, call.body)
                            .await
                            .map_err(|e| show(&e));
                        let _ = tx
                            .send(Msg::CallDone {
                                tag: call.tag,
                                result,
                            })
                            .await;
                    });
                }
                Effect::Attach {
                    run,
                    epoch,
                    pty,
                    from,
                } => {
                    if let Some(h) = live.take() {
                        h.abort();
                    }
                    let (client, run, _) = hosts.by_ref(&run);
                    live = Some(tokio::spawn(live_task(
                        client,
                        tx.clone(),
                        run,
                        epoch,
                        pty,
                        from,
                    )));
                }
                Effect::Detach => {
                    if let Some(h) = live.take() {
                        h.abort();
                    }
                }
                Effect::Type { run, text } => {
                    let _ = type_tx.send((run, text));
                }
                Effect::Refresh => {
                    for p in &pokes {
                        p.notify_one();
                    }
                    evidence_poke.notify_one();
                }
                Effect::WatchEvents(run) => {
                    let _ = focus_tx.send(run);
                }
                Effect::WatchView(w) => {
                    let _ = view_tx.send(w);
                }
                Effect::Verify(items) => {
                    let _ = verify_tx.send(items);
                }
                Effect::Notify(n) => tell(screen, app, n, &tx),
                Effect::RigAttach { rig } => {
                    // Nothing reads the terminal while the child has it.
                    input = EventStream::new();
                    let argv = app.rig_attach_argv(&rig);
                    let said = hand_over_to(screen, &argv).await?;
                    app.rig_attached(&rig, said);
                }
                Effect::ApproveRemote { host, intent } => {
                    let running = approving.as_ref().is_some_and(|h| !h.is_finished());
                    if running {
                        app.error("an approval is already running");
                    } else {
                        // Nothing reads the terminal while ssh has it.
                        input = EventStream::new();
                        let argv = app.remote_approve_argv(&host, &intent);
                        let (ok, said) = approve_remotely(screen, &argv).await?;
                        app.approved_remotely(&host, &intent, ok, said);
                    }
                }
                Effect::Approve { intent } => {
                    // The intent's own host (this machine's server in a cockpit of several:
                    // a remote host's intent goes by ApproveRemote), with its own id.
                    let (client, intent, _) = hosts.by_ref(&intent);
                    let running = approving.as_ref().is_some_and(|h| !h.is_finished());
                    match (&app.key_path, running) {
                        (_, true) => {
                            app.mode = Mode::Normal;
                            app.error("an approval is already running");
                        }
                        (None, _) => {
                            app.mode = Mode::Normal;
                            app.error("no publish key is configured for this home");
                        }
                        (_, false) if client.remote_host().is_some() => {
                            // The relay has no controlling terminal: the remote server would
                            // refuse; the person approves at that host's own terminal.
                            app.mode = Mode::Normal;
                            app.error(format!(
                                "approve it on {0} at its terminal: `ssh -t {0} proctor publish \
                                 approve {1}` (an approval never crosses the link)",
                                client.remote_host().unwrap_or_default(),
                                crate::text::one_line(&intent, 24)
                            ));
                        }
                        (Some(key), false) => {
                            approving = Some(super::approval::spawn(
                                client.clone(),
                                key.clone(),
                                intent,
                                app.demo_key_offer,
                                tx.clone(),
                                super::approval::terminal_check(libc::STDIN_FILENO),
                            ));
                        }
                    }
                }
            }
        }
        if app.quit {
            break Exit::Quit;
        }
    };
    for d in data {
        d.abort();
    }
    typing.abort();
    evidence.abort();
    verifier.abort();
    if let Some(h) = live {
        h.abort();
    }
    // An approval still waiting for an answer: closing its dialog refuses it; the flow then
    // records the refusal and its receipt. Wait a little for that (not for ever).
    if let Some(h) = approving {
        drop(rx);
        if matches!(app.mode, Mode::Modal(_)) {
            app.mode = Mode::Normal;
        }
        let since = std::time::Instant::now();
        while !h.is_finished() && since.elapsed() < APPROVAL_GRACE {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(exit)
}

async fn evidence_task(
    hosts: Hosts,
    tx: mpsc::Sender<Msg>,
    poke: std::sync::Arc<Notify>,
    mut view: watch::Receiver<ViewWatch>,
) {
    // The candidates whose gates the last full round evaluated, and when.
    let mut known: Vec<String> = Vec::new();
    let mut last_full: Option<Instant> = None;
    let mut forced = true;
    // What each host last said of its intents (a cockpit of several).
    let mut host_intents = evidence::HostIntents::new();
    let mut host_cands = evidence::HostCandidates::new();
    loop {
        let want = view.borrow_and_update().clone();
        // The first host's client as it is now (its token may have come since).
        let client = hosts.primary();
        let cands = if hosts.multi {
            evidence::fetch_candidates_of_hosts(&hosts.all(), &mut host_cands).await
        } else {
            evidence::fetch_candidates(&client).await
        }
        .map_err(|e| show(&e));
        // The views' feeds, each at its pace (super::views::feed). In a cockpit of several
        // hosts the intents are every host's (each approved on its own host); the other
        // feeds are the first host's (docs/remote.md).
        let mut answers = Vec::new();
        for f in views::feeds() {
            if f.pace == Pace::Always || want.shown.contains(&f.pane) {
                let answer = if hosts.multi && f.pane == Pane::Intents {
                    let list = evidence::fetch_intents_of_hosts(&hosts.all(), &mut host_intents)
                        .await
                        .map_err(|e| show(&e));
                    views::FeedAnswer::new::<super::app::IntentsPane>(list)
                } else {
                    (f.fetch)(&client).await
                };
                answers.push(Msg::Feed {
                    pane: f.pane,
                    answer,
                });
            }
        }
        let mut due: Vec<String> = Vec::new();
        if let Ok(list) = &cands {
            let mut latest: Vec<String> = evidence::latest_by_run(list)
                .into_values()
                .map(|c| c.id)
                .collect();
            latest.sort_by_key(|id| std::cmp::Reverse(evidence::id_number(id)));
            latest.truncate(GATE_LIMIT);
            if forced || latest != known || last_full.is_none_or(|t| t.elapsed() >= GATE_POLL) {
                due.clone_from(&latest);
                known = latest;
                last_full = Some(Instant::now());
            }
        }
        if let Some(g) = &want.gate
            && !due.contains(g)
        {
            due.push(g.clone());
        }
        for m in std::iter::once(Msg::Candidates(cands)).chain(answers) {
            if tx.send(m).await.is_err() {
                return;
            }
        }
        for id in due {
            // A candidate's gate is its own host's (`HOST/ID` in a cockpit of several).
            let (gate_client, own, _) = hosts.by_ref(&id);
            let result = evidence::fetch_gate(&gate_client, &own)
                .await
                .map_err(|e| show(&e));
            if tx
                .send(Msg::Gate {
                    candidate: id,
                    result,
                })
                .await
                .is_err()
            {
                return;
            }
        }
        forced = false;
        tokio::select! {
            _ = tokio::time::sleep(QUIET_POLL_MAX) => {}
            _ = poke.notified() => forced = true,
            r = view.changed() => if r.is_err() { return },
        }
    }
}

async fn verify_task(
    client: Client,
    tx: mpsc::Sender<Msg>,
    mut rx: mpsc::UnboundedReceiver<Vec<ReceiptItem>>,
) {
    while let Some(mut items) = rx.recv().await {
        // Whatever was asked meanwhile joins this batch (each receipt once).
        while let Ok(more) = rx.try_recv() {
            for m in more {
                if !items.iter().any(|i| i.id == m.id) {
                    items.push(m);
                }
            }
        }
        for item in items {
            let verification = evidence::verify_receipt(&client, &item).await;
            if tx
                .send(Msg::Verified {
                    id: item.id.clone(),
                    verification,
                })
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// Follows the server's change stream (`GET /v1/m/sessions/changes`): each event it sends
/// becomes `tx`'s value, `None` while the stream is not open (the data task then polls at
/// its own pace). A stream that fails or ends is opened again after a backoff.
async fn changes_task(client: Client, tx: watch::Sender<Option<ChangesEvent>>) {
    let mut failures = 0u32;
    loop {
        if let Ok(mut stream) = client.stream(wire::CHANGES).await {
            while let Ok(Some(ev)) = stream.next().await {
                if ev.event != wire::CHANGES_EVENT {
                    continue;
                }
                let Ok(c) = serde_json::from_str::<ChangesEvent>(&ev.data) else {
                    continue;
                };
                failures = 0;
                tx.send_if_modified(|held| {
                    let moved = *held != Some(c);
                    *held = Some(c);
                    moved
                });
            }
        }
        // Closed: the data task polls again until the stream is back.
        tx.send_if_modified(|held| held.take().is_some());
        if tx.is_closed() {
            return;
        }
        failures += 1;
        tokio::time::sleep(backoff(failures)).await;
    }
}

async fn data_task(
    client: Client,
    tx: mpsc::Sender<Msg>,
    poke: std::sync::Arc<Notify>,
    mut focus: watch::Receiver<Option<String>>,
    mut changes: watch::Receiver<Option<ChangesEvent>>,
    follow: Option<Follow>,
) {
    // While the server's change stream is open, the list, the factory runs and the focused
    // run's events are fetched when it says something moved, and otherwise every
    // QUIET_POLL_MAX (what the stream does not carry: the order by output, the output
    // counters, a snooze that ran out). Without it, how many polls in a row brought nothing
    // new: a quiet list is polled less often (up to QUIET_POLL_MAX); an action or a change of
    // focus polls at once and resets the pace.
    type Factory = Result<Vec<crate::api::factory::FactoryRun>, String>;
    let mut last: Option<(Result<data::RunsPage, String>, Factory, Option<Msg>)> = None;
    let mut quiet: u32 = 0;
    loop {
        // Both answers are fetched before either is sent, so the cockpit takes them in one
        // batch and draws one frame for the poll.
        let page = data::fetch_runs(&client).await.map_err(|e| show(&e));
        // The factory runs at the same cadence: a failed poll is said, never old runs.
        let factory = client.factory_runs().await.map_err(|e| show(&e));
        let run = focus.borrow_and_update().clone();
        // Several hosts: the focused run's events are its own host's to fetch.
        let run = match &follow {
            None => run.map(|r| (r.clone(), r)),
            Some(f) => run.and_then(|r| {
                let (h, own) = super::hosts::split(&r)?;
                (h == f.host).then(|| (own.to_string(), r.clone()))
            }),
        };
        let events = match run {
            Some((own, run)) => {
                let result = data::fetch_events(&client, &own)
                    .await
                    .map_err(|e| show(&e));
                Some(Msg::Events { run, result })
            }
            None => None,
        };
        let now = (page.clone(), factory.clone(), events.clone());
        if last.as_ref() == Some(&now) {
            quiet = quiet.saturating_add(1);
        } else {
            quiet = 0;
            last = Some(now);
        }
        let runs = match &follow {
            None => Msg::Runs(page),
            Some(f) => Msg::HostRuns {
                host: f.host.clone(),
                result: page.map(|mut p| {
                    for r in &mut p.items {
                        r.run_ref = super::hosts::join(&f.host, &r.run_ref);
                    }
                    p
                }),
            },
        };
        if tx.send(runs).await.is_err() {
            return;
        }
        if follow.as_ref().is_none_or(|f| f.primary)
            && tx.send(Msg::Factory(factory)).await.is_err()
        {
            return;
        }
        if let Some(m) = events
            && tx.send(m).await.is_err()
        {
            return;
        }
        let streamed = changes.borrow_and_update().is_some();
        let pace = if streamed {
            QUIET_POLL_MAX
        } else {
            (POLL * (1 + quiet.min(4))).min(QUIET_POLL_MAX)
        };
        tokio::select! {
            _ = tokio::time::sleep(pace) => {}
            _ = poke.notified() => {}
            r = focus.changed() => if r.is_err() { return },
            r = changes.changed() => if r.is_err() { return },
        }
    }
}

async fn typing_task(
    hosts: Hosts,
    tx: mpsc::Sender<Msg>,
    mut rx: mpsc::UnboundedReceiver<(String, String)>,
) {
    while let Some((run, mut text)) = rx.recv().await {
        // Whatever was typed meanwhile for the same run goes in the same request.
        let mut next = None;
        while let Ok((r, t)) = rx.try_recv() {
            if r == run {
                text.push_str(&t);
            } else {
                next = Some((r, t));
                break;
            }
        }
        for (run, text) in std::iter::once((run, text)).chain(next) {
            let body = InputRequest {
                text: Some(text),
                ..Default::default()
            };
            let (client, run, _) = hosts.by_ref(&run);
            let r = client
                .request::<_, IgnoredAny>(Method::POST, &wire::at(wire::INPUT, &run), Some(&body))
                .await;
            if let Err(e) = r {
                let _ = tx.send(Msg::TypeFailed(show(&e))).await;
            }
        }
    }
}

/// Parses the frames of an `output` event.
fn frames(data: &str) -> Option<Vec<(u64, Stream, Vec<u8>)>> {
    let ev: OutputEvent = serde_json::from_str(data).ok()?;
    let mut out = Vec::new();
    for f in ev.frames {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&f.b64)
            .ok()?;
        out.push((f.seq, f.stream, bytes));
    }
    Some(out)
}

fn exit_text(v: &EndEvent) -> String {
    if v.unobserved {
        return "exit not observed".into();
    }
    match (v.exit_code, &v.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => crate::text::one_line(s, 20),
        _ => "exit not observed".into(),
    }
}

async fn live_task(
    client: Client,
    tx: mpsc::Sender<Msg>,
    run: String,
    epoch: u64,
    pty: bool,
    mut from: AttachFrom,
) {
    let send = |ev: LiveEvent| {
        let tx = tx.clone();
        async move { tx.send(Msg::Live { epoch, ev }).await.is_ok() }
    };
    let mut failures = 0u32;
    loop {
        let mut cursor = match from {
            AttachFrom::Seq(s) => s,
            AttachFrom::Snapshot => {
                match client
                    .get::<ScreenSnapshot>(&wire::at(wire::SCREEN, &run))
                    .await
                {
                    Ok(v) => {
                        let seq = v.seq;
                        let ev = LiveEvent::Screen {
                            rows: v.size.rows,
                            cols: v.size.cols,
                            formatted: v.formatted,
                            seq,
                        };
                        if !send(ev).await {
                            return;
                        }
                        seq + 1
                    }
                    // Not live here: the stream says what the server holds.
                    Err(ClientError::Api { status, .. }) if status.as_u16() == 409 => 1,
                    Err(e) => {
                        if !send(LiveEvent::Error(show(&e))).await {
                            return;
                        }
                        failures += 1;
                        tokio::time::sleep(backoff(failures)).await;
                        continue;
                    }
                }
            }
        };
        let path = wire::attach(&run, cursor);
        let mut stream = match client.stream(&path).await {
            Ok(s) => s,
            Err(e) => {
                if !send(LiveEvent::Error(show(&e))).await {
                    return;
                }
                failures += 1;
                from = AttachFrom::Seq(cursor);
                tokio::time::sleep(backoff(failures)).await;
                continue;
            }
        };
        if !send(LiveEvent::Connected).await {
            return;
        }
        from = AttachFrom::Seq(cursor);
        loop {
            match stream.next().await {
                Ok(Some(ev)) => {
                    failures = 0;
                    match ev.event.as_str() {
                        wire::sse::OUTPUT => {
                            if let Some(fr) = frames(&ev.data) {
                                if let Some(last) = fr.last() {
                                    cursor = last.0 + 1;
                                }
                                if !send(LiveEvent::Output(fr)).await {
                                    return;
                                }
                            }
                        }
                        wire::sse::LAG => {
                            let first = serde_json::from_str::<LagEvent>(&ev.data)
                                .map_or(cursor, |l| l.first_available);
                            if pty {
                                // The parser missed bytes: start over from the server's screen.
                                from = AttachFrom::Snapshot;
                                break;
                            }
                            cursor = first;
                            if !send(LiveEvent::Lag {
                                first_available: first,
                            })
                            .await
                            {
                                return;
                            }
                        }
                        wire::sse::END => {
                            let end: EndEvent = serde_json::from_str(&ev.data).unwrap_or_default();
                            let _ = send(LiveEvent::End(exit_text(&end))).await;
                            return;
                        }
                        wire::sse::NOTICE => {
                            let notice = serde_json::from_str::<NoticeEvent>(&ev.data).ok();
                            if let Some(NoticeEvent::NotLive { state, .. }) = notice {
                                let _ = send(LiveEvent::NotLive(state.as_str().to_string())).await;
                                return;
                            }
                            // Asked beyond the next seq (a newer generation): start again.
                            let next = match notice {
                                Some(NoticeEvent::CursorAhead { next, .. }) => next,
                                _ => 1,
                            };
                            from = if pty {
                                AttachFrom::Snapshot
                            } else {
                                AttachFrom::Seq(next)
                            };
                            break;
                        }
                        _ => {}
                    }
                    from = match from {
                        AttachFrom::Seq(_) => AttachFrom::Seq(cursor),
                        s => s,
                    };
                }
                Ok(None) => {
                    failures += 1;
                    from = AttachFrom::Seq(cursor);
                    tokio::time::sleep(backoff(failures)).await;
                    break;
                }
                Err(e) => {
                    if !send(LiveEvent::Error(show(&e))).await {
                        return;
                    }
                    failures += 1;
                    from = AttachFrom::Seq(cursor);
                    tokio::time::sleep(backoff(failures)).await;
                    break;
                }
            }
        }
    }
}

fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250 * u64::from(failures.min(8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A screen that records the hand-over and its return, and counts the frames.
    #[derive(Default)]
    struct Recorder(Vec<&'static str>, usize);

    impl Screen for Recorder {
        fn frame(&mut self, _app: &mut App) -> std::io::Result<()> {
            self.1 += 1;
            Ok(())
        }
        fn hand_over(&mut self) -> std::io::Result<()> {
            self.0.push("hand_over");
            Ok(())
        }
        fn take_back(&mut self) -> std::io::Result<()> {
            self.0.push("take_back");
            Ok(())
        }
    }

    /// The attach verb runs as a real child between the hand-over and the return; a refusal
    /// comes back with its exit status and its last stderr line, a success with nothing, a
    /// program that cannot start with why.
    #[tokio::test]
    async fn a_child_gets_the_terminal_and_its_refusal_comes_back() {
        let mut screen = Recorder::default();
        let argv: Vec<String> = [
            "sh",
            "-c",
            "echo first >&2; echo 'rig attach is not built: use rig screen' >&2; exit 3",
        ]
        .map(String::from)
        .to_vec();
        let said = hand_over_to(&mut screen, &argv).await.unwrap();
        assert_eq!(screen.0, ["hand_over", "take_back"]);
        assert!(said.contains("exit status: 3"), "{said}");
        assert!(
            said.ends_with("rig attach is not built: use rig screen"),
            "{said}"
        );
        let ok: Vec<String> = ["sh", "-c", "exit 0"].map(String::from).to_vec();
        assert_eq!(hand_over_to(&mut screen, &ok).await.unwrap(), "");
        let missing = vec!["/nonexistent/proctor".to_string()];
        let said = hand_over_to(&mut screen, &missing).await.unwrap();
        assert!(said.contains("did not start"), "{said}");
        assert_eq!(screen.0.len(), 6, "every hand-over is taken back");
    }

    /// The remote approval's child gets the terminal and gives it back; its last stderr
    /// line (its outcome) comes back whatever its status, sanitised.
    #[tokio::test]
    async fn a_remote_approval_gives_the_terminal_back_and_says_its_outcome() {
        let mut screen = Recorder::default();
        let argv =
            |script: &str| -> Vec<String> { ["sh", "-c", script].map(String::from).to_vec() };
        let (ok, said) = approve_remotely(
            &mut screen,
            &argv(
                "printf 'proctor: on box: refused (wrong_revision): no\\033]0;x\\007\\n' >&2; \
                 exit 1",
            ),
        )
        .await
        .unwrap();
        assert!(!ok);
        assert!(
            said.starts_with("proctor: on box: refused (wrong_revision): no"),
            "{said}"
        );
        assert!(
            !said.contains('\u{1b}') && !said.contains('\u{7}'),
            "{said:?}"
        );
        let (ok, said) = approve_remotely(
            &mut screen,
            &argv("echo 'proctor: on box: published int-0001: r pushed to b' >&2"),
        )
        .await
        .unwrap();
        assert!(ok);
        assert_eq!(said, "proctor: on box: published int-0001: r pushed to b");
        let (ok, said) = approve_remotely(&mut screen, &argv("exit 255"))
            .await
            .unwrap();
        assert!(!ok);
        assert!(said.contains("exit status: 255"), "{said}");
        assert_eq!(screen.0.len(), 6, "every hand-over is taken back");
    }

    /// In a cockpit of several hosts a run's call, stream and keystrokes go to the host its
    /// ref names, with that host's own ref; anything else to the first host; one host's
    /// paths are never rewritten.
    #[test]
    fn each_run_goes_to_its_own_host() {
        let a = || Client::for_socket("/a.sock".into());
        let b = || Client::for_socket("/b.sock".into());
        let h = Hosts::many(vec![("build".into(), a()), ("local".into(), b())]);
        let (c, p, host) = h.by_path("/v1/m/sessions/runs/local/run-0001/stop");
        assert_eq!(c.socket, std::path::PathBuf::from("/b.sock"));
        assert_eq!(p, "/v1/m/sessions/runs/run-0001/stop");
        assert_eq!(host.as_deref(), Some("local"));
        let (c, p, _) = h.by_path("/v1/m/sessions/runs/build/run-0001/stop");
        assert_eq!(c.socket, std::path::PathBuf::from("/a.sock"));
        assert_eq!(p, "/v1/m/sessions/runs/run-0001/stop");
        let (c, p, host) = h.by_path("/v1/m/sessions/runs");
        assert_eq!(c.socket, std::path::PathBuf::from("/a.sock"));
        assert_eq!(p, "/v1/m/sessions/runs");
        assert_eq!(host.as_deref(), Some("build"));
        let (c, r, _) = h.by_ref("local/run-0002");
        assert_eq!(
            (c.socket.to_str().unwrap(), r.as_str()),
            ("/b.sock", "run-0002")
        );
        // A host nobody follows is not a host: the path goes as it is, to the first.
        let (c, p, _) = h.by_path("/v1/m/sessions/runs/other/run-0001/stop");
        assert_eq!(c.socket, std::path::PathBuf::from("/a.sock"));
        assert_eq!(p, "/v1/m/sessions/runs/other/run-0001/stop");
        let one = Hosts::one(b());
        let (_, p, host) = one.by_path("/v1/m/sessions/runs/local/run-0001/stop");
        assert_eq!(p, "/v1/m/sessions/runs/local/run-0001/stop");
        assert_eq!(host, None);
        assert_eq!(one.by_ref("local/run-0001").1, "local/run-0001");
    }

    fn pacing_app() -> (App, Msg) {
        use crate::tui::data::{Counts, RunsPage};
        let mut app = App::new(
            "host".into(),
            "~/proctor".into(),
            crate::tui::keymap::Keymap::defaults(),
            crate::tui::theme::Theme::default_theme(),
        );
        let items: Vec<crate::tui::data::RunView> = (1..=3)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "ref": format!("run-000{i}"), "tool": "claude", "profile": "claude",
                    "transport": "pipe", "workspace": "/w", "demo": true,
                    "created_at": "2026-11-30T11:00:00.000Z", "state": "stopped",
                    "exit_code": 0, "generation": 1,
                }))
                .unwrap()
            })
            .collect();
        let page = Msg::Runs(Ok(RunsPage {
            total: items.len(),
            counts: Counts::of(&items),
            items,
        }));
        app.on_msg(page.clone());
        let _ = app.take_effects();
        (app, page)
    }

    /// After the first frame, polls that bring back what the cockpit already holds (the
    /// same list, the same events, a stream no longer shown) draw nothing, however long the
    /// loop runs; a key draws one frame.
    #[test]
    fn nothing_changed_draws_nothing() {
        let (mut app, page) = pacing_app();
        let mut screen = Recorder::default();
        let mut pacer = Pacer::new(30);
        let t0 = Instant::now();
        assert!(pacer.draw(&mut app, &mut screen, t0).unwrap());
        let events = Msg::Events {
            run: app.sessions.selected.clone().unwrap(),
            result: Ok(Vec::new()),
        };
        app.on_msg(events.clone());
        assert!(
            pacer
                .draw(&mut app, &mut screen, t0 + Duration::from_secs(1))
                .unwrap()
        );
        for k in 2..20u64 {
            app.on_msg(page.clone());
            app.on_msg(events.clone());
            app.on_msg(Msg::Live {
                epoch: 999,
                ev: crate::tui::app::LiveEvent::Connected,
            });
            assert!(!app.dirty, "an unchanged poll marks nothing dirty");
            let drew = pacer
                .draw(&mut app, &mut screen, t0 + Duration::from_secs(k))
                .unwrap();
            assert!(!drew, "poll {k} drew a frame");
        }
        assert_eq!(screen.1, 2);
        app.on_key(crate::tui::ui::tests::ch('j'));
        assert!(
            pacer
                .draw(&mut app, &mut screen, t0 + Duration::from_secs(30))
                .unwrap()
        );
        assert_eq!(screen.1, 3);
    }

    /// A change draws exactly one frame, not before the frame cap allows it, however many
    /// changes come meanwhile.
    #[test]
    fn changes_draw_one_frame_within_the_cap() {
        let (mut app, page) = pacing_app();
        let mut screen = Recorder::default();
        let mut pacer = Pacer::new(10);
        let t0 = Instant::now();
        assert!(pacer.draw(&mut app, &mut screen, t0).unwrap());
        let Msg::Runs(Ok(mut p)) = page else {
            unreachable!()
        };
        for n in 0..5 {
            p.items[0].name = Some(format!("renamed {n}"));
            app.on_msg(Msg::Runs(Ok(p.clone())));
            assert!(app.dirty, "a changed list is a change");
            let at = t0 + Duration::from_millis(10 * (n + 1));
            assert!(
                !pacer.draw(&mut app, &mut screen, at).unwrap(),
                "within the cap"
            );
        }
        assert_eq!(pacer.frame_at(&app), Some(t0 + Duration::from_millis(100)));
        assert!(
            pacer
                .draw(&mut app, &mut screen, t0 + Duration::from_millis(100))
                .unwrap()
        );
        assert!(
            !pacer
                .draw(&mut app, &mut screen, t0 + Duration::from_secs(1))
                .unwrap()
        );
        assert_eq!(screen.1, 2, "the first frame and one for the five changes");
        assert_eq!(pacer.frame_at(&app), None, "nothing more is wanted");
    }
}
