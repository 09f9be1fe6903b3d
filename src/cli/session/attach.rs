//! `proctor session attach`: this terminal, live, on a run.
//!
//! PTY runs are passed through as tmux and ssh pass a remote terminal through: the run's
//! screen (vt100's rendering of everything the child drew, `GET /screen`) is drawn in the
//! alternate screen, then the child's bytes from the next seq on are written to this
//! terminal through [`crate::text::attach::AttachFilter`], and the keys typed are sent
//! unchanged (`POST /input {text}`), in raw mode, read straight from stdin so that what the
//! child receives is exactly what the terminal sent (escape sequences, pastes, UTF-8). This
//! is the one place where a child's bytes reach the operator's terminal without the
//! sanitiser: an interactive terminal program cannot be shown otherwise. The filter drops
//! what would act outside the pane (clipboard writes, titles, and queries whose replies
//! the terminal would type into the child) and passes everything else byte for byte. See
//! docs/session-cli.md ("attach") for what that trusts.
//!
//! Pipe runs are shown through the sanitiser, in cooked (line) mode: each line typed is a
//! turn.
//!
//! The terminal is restored on every way out: normal return, error, panic (a hook), and
//! SIGTERM/SIGHUP (handled as a detach).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use clap::Args;
use hyper::Method;
use serde::de::IgnoredAny;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::output::{self, Exit, Sanitiser};
use super::{UsageError, normalise_ref, reconnect, tool_label};
use crate::api::runs::{
    self as wire, EndEvent, InputRequest, LagEvent, NoticeEvent, RunView, ScreenSnapshot, SizeBody,
};
use crate::client::{self, Client, ClientError, EventStream};
use crate::home::Home;
use crate::text;
use crate::text::attach::{AttachFilter, Clipboard, Dropped};
use crate::tui::config::CockpitConfig;

/// Attach this terminal to a run: watch it live and type into it. Detach with Ctrl-\.
///
/// PTY runs: the run's screen is drawn (in the alternate screen, so your shell's screen
/// comes back on detach), the terminal goes to raw mode, and from then on the child's
/// output is written to your terminal as the child wrote it, as tmux and ssh do: the child
/// drives your terminal inside the pane (colours, cursor, modes). What would act outside
/// it is dropped: clipboard writes (OSC 52; `[attach] clipboard = "allow"` in
/// cockpit.toml passes them), title changes, and queries whose answers your terminal would
/// type into the child (cursor position, device attributes, …); the count is printed on
/// detach. Every key goes to the child as typed (Ctrl-C included: it interrupts the
/// child's turn). The run's terminal follows the size of yours, up to 500 rows and 1000
/// columns. Only the detach key stays here (--detach-key; Ctrl-\ by default).
///
/// Pipe runs: the output is shown through the sanitiser (the tool's stderr lines start with
/// `stderr| `); each line you type is sent as a turn; Ctrl-C interrupts the turn; the detach
/// key or Ctrl-D (end of input) detaches.
///
/// Needs a terminal on stdin (and on stdout for PTY runs); for scripts and SSH without a
/// terminal use `proctor session tail --follow REF` and `proctor session input REF -`.
///
/// Detaching leaves the run running. When the run ends while attached, its exit is printed
/// (`[run-0001 exited: code 0]`) and the command returns.
///
/// A stream that dies while attached (the server went away, the ssh link to a --host
/// dropped) is a notice (PTY runs: on the bottom row of the pane, in reverse video; pipe
/// runs: a line), and attach tries again (0.2 s, doubling, at most 5 s apart) until the
/// link is back, then says `reconnected` and goes on from the seq after the last one shown,
/// without redrawing the screen (unless output was evicted meanwhile). The detach key
/// works while it waits. A server of another protocol met on the way back is refused.
/// --no-reconnect ends the attach instead (exit 1).
///
/// Exit 0 on detach or end; 1 when the server refused the stream, or closed it with
/// --no-reconnect; 2 without a terminal.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The key that detaches: ctrl-\ (default), ctrl-], ctrl-^, ctrl-_, or ctrl-a … ctrl-z
    /// except ctrl-c, ctrl-d, ctrl-h, ctrl-i, ctrl-j, ctrl-m, ctrl-q, ctrl-s and ctrl-z.
    #[arg(long, value_name = "KEY", default_value = "ctrl-\\")]
    pub detach_key: String,
    /// When the stream dies, end the attach (exit 1) instead of reconnecting.
    #[arg(long)]
    pub no_reconnect: bool,
}

/// A detach key: the byte the terminal sends for it, and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetachKey {
    pub byte: u8,
    pub name: char,
}

impl DetachKey {
    pub fn parse(raw: &str) -> Result<DetachKey, String> {
        let lower = raw.trim().to_ascii_lowercase();
        let key = lower.strip_prefix("ctrl-").and_then(|k| {
            let mut chars = k.chars();
            let c = chars.next()?;
            chars.next().is_none().then_some(c)
        });
        let byte = match key {
            Some('\\') => Some(0x1c),
            Some(']') => Some(0x1d),
            Some('^') => Some(0x1e),
            Some('_') => Some(0x1f),
            Some(c @ 'a'..='z') if !"cdhijmqsz".contains(c) => Some(c as u8 - b'a' + 1),
            _ => None,
        };
        match (byte, key) {
            (Some(byte), Some(c)) => Ok(DetachKey {
                byte,
                name: c.to_ascii_uppercase(),
            }),
            _ => Err(format!(
                "--detach-key {} is not one of ctrl-\\, ctrl-], ctrl-^, ctrl-_, or ctrl-a … ctrl-z \
                 other than ctrl-c, ctrl-d, ctrl-h, ctrl-i, ctrl-j, ctrl-m, ctrl-q, ctrl-s, ctrl-z",
                text::one_line(raw, 20)
            )),
        }
    }

    pub fn label(&self) -> String {
        format!("Ctrl-{}", self.name)
    }
}

pub fn run(c: &Client, home: &Home, a: AttachArgs) -> anyhow::Result<ExitCode> {
    let key = DetachKey::parse(&a.detach_key).map_err(UsageError::new)?;
    // The one setting attach reads; a settings file with a mistake is refused by name.
    let clipboard = CockpitConfig::load(&home.config)?.attach_clipboard;
    let run_ref = normalise_ref(&a.run)?;
    if !std::io::stdin().is_terminal() {
        return Err(UsageError::new(format!(
            "attach is interactive and stdin is not a terminal. For scripts and SSH without a \
             terminal: `proctor session tail --follow {run_ref}` to watch, \
             `proctor session input {run_ref} -` to type"
        )));
    }
    let view: RunView = c.get_blocking(&wire::at(wire::RUN, &run_ref))?;
    if view.transport == "pty" {
        if !std::io::stdout().is_terminal() {
            return Err(UsageError::new(format!(
                "attaching to a PTY run draws on a terminal and stdout is not one; \
                 `proctor session tail --follow {run_ref}` prints its output"
            )));
        }
        client::block_on(attach_pty(
            c,
            &run_ref,
            &view,
            key,
            clipboard,
            !a.no_reconnect,
        ))?
    } else {
        client::block_on(attach_pipe(c, &run_ref, &view, key, !a.no_reconnect))?
    }
}

/// How an attachment ended.
enum Outcome {
    Detached,
    Signal(&'static str),
    Ended(Exit),
    NotLive(String),
    /// The stream died at this next seq, for this reason (no reconnecting).
    Closed(u64, String),
}

impl Outcome {
    fn report(&self, target: &Target, c: &Client) -> ExitCode {
        let label = &target.label;
        match self {
            Outcome::Detached => {
                eprintln!("[detached from {label}; it keeps running]");
                ExitCode::SUCCESS
            }
            Outcome::Signal(sig) => {
                eprintln!("[detached from {label} ({sig}); it keeps running]");
                ExitCode::SUCCESS
            }
            Outcome::Ended(exit) => {
                eprintln!("[{label} exited: {}]", exit.describe());
                ExitCode::SUCCESS
            }
            Outcome::NotLive(msg) => {
                eprintln!("[{label}: {msg}]");
                ExitCode::from(1)
            }
            Outcome::Closed(next, why) => {
                eprintln!("[{label}: {why}; {}]", target.after_close(c, *next));
                ExitCode::from(1)
            }
        }
    }
}

fn not_live_message(state: wire::State, message: &str) -> String {
    format!(
        "the server holds no output for it (state {}): {}",
        state.as_str(),
        text::one_line(message, 200)
    )
}

/// The text typed into a run, as an input request.
fn typed(t: String) -> InputRequest {
    InputRequest {
        text: Some(t),
        ..Default::default()
    }
}

/// What a terminal attach drives: a PTY run's routes, or a rig's console's (`rig attach`).
/// The loop, the raw mode, the detach key, the filter and the reconnection are the same;
/// only the paths, the two bodies and the hints differ.
pub(crate) struct Target {
    /// What the lines printed name: `run-0001`, `rig-0001`.
    label: String,
    kind: TargetKind,
}

#[derive(Clone, Copy)]
enum TargetKind {
    Run,
    Rig,
}

/// One key batch's body: the runs' `InputRequest` or the rigs' `TypeRequest`.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Typed {
    Run(InputRequest),
    Rig(crate::api::rigs::TypeRequest),
}

impl Target {
    fn run(run_ref: &str) -> Target {
        Target {
            label: run_ref.to_string(),
            kind: TargetKind::Run,
        }
    }

    /// A rig's console (the id checked by the caller).
    pub(crate) fn rig(id: &str) -> Target {
        Target {
            label: id.to_string(),
            kind: TargetKind::Rig,
        }
    }

    fn path(&self, run: &str, rig: &str) -> String {
        match self.kind {
            TargetKind::Run => wire::at(run, &self.label),
            TargetKind::Rig => crate::api::rigs::path(rig, &self.label),
        }
    }

    fn screen(&self) -> String {
        self.path(wire::SCREEN, crate::api::rigs::SCREEN)
    }

    fn input(&self) -> String {
        self.path(wire::INPUT, crate::api::rigs::INPUT)
    }

    fn attach(&self, from: u64) -> String {
        format!(
            "{}?from={from}",
            self.path(wire::ATTACH, crate::api::rigs::ATTACH)
        )
    }

    fn typed(&self, t: String) -> Typed {
        match self.kind {
            TargetKind::Run => Typed::Run(typed(t)),
            TargetKind::Rig => Typed::Rig(crate::api::rigs::TypeRequest {
                text: Some(t),
                data_b64: None,
                paste: false,
            }),
        }
    }

    /// Sends this terminal's size (within the limits); a refusal (a run that ended: 409)
    /// changes nothing.
    async fn resize(&self, c: &Client) {
        let Some((rows, cols)) = super::terminal_size() else {
            return;
        };
        let path = self.path(wire::RESIZE, crate::api::rigs::RESIZE);
        let _ = match self.kind {
            TargetKind::Run => {
                let size = SizeBody {
                    rows: Some(rows),
                    cols: Some(cols),
                };
                c.request::<_, IgnoredAny>(Method::POST, &path, Some(&size))
                    .await
            }
            TargetKind::Rig => {
                let size = crate::api::rigs::SizeBody { rows, cols };
                c.request::<_, IgnoredAny>(Method::POST, &path, Some(&size))
                    .await
            }
        };
    }

    /// What to run to see what followed a stream that died.
    fn after_close(&self, c: &Client, next: u64) -> String {
        match self.kind {
            TargetKind::Run => format!(
                "`{}` shows what followed",
                super::reconnect::tail_from(c, &self.label, next)
            ),
            TargetKind::Rig => format!(
                "`proctor rig screen {}` shows what its terminal shows now",
                self.label
            ),
        }
    }

    fn help(&self) -> &'static str {
        match self.kind {
            TargetKind::Run => "proctor session attach --help",
            TargetKind::Rig => "proctor rig attach --help",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Restoring the terminal
// ---------------------------------------------------------------------------------------------

/// What must be undone on the way out.
enum Saved {
    /// crossterm raw mode and the alternate screen.
    Raw,
    /// The terminal attributes before the quit character was changed.
    Termios(libc::termios),
}

static SAVED: Mutex<Option<Saved>> = Mutex::new(None);
static HOOK: Once = Once::new();

/// Modes a child may have set on the operator's terminal, reset on detach: attributes,
/// cursor shown, normal cursor keys and keypad, bracketed paste, mouse reporting and focus
/// events off, default cursor shape, the kitty keyboard protocol popped, scroll region
/// reset; then the alternate screen left.
const RESET: &[u8] = b"\x1b[0m\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\
\x1b[?1005l\x1b[?1006l\x1b[?1004l\x1b[0 q\x1b[<u\x1b[r\x1b[?1049l";

/// Undoes whatever is saved; idempotent. Writes with write(2) so that a panic raised while
/// stdout's lock is held elsewhere cannot deadlock here.
fn restore_terminal() {
    let saved = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take();
    match saved {
        Some(Saved::Raw) => {
            write_fd(1, RESET);
            let _ = crossterm::terminal::disable_raw_mode();
        }
        Some(Saved::Termios(t)) => {
            // SAFETY: tcsetattr on stdin with attributes tcgetattr returned.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
        }
        None => {}
    }
}

fn write_fd(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

/// Restores the terminal when dropped.
struct TerminalGuard;

impl TerminalGuard {
    /// Raw mode and the alternate screen (PTY attach).
    fn raw() -> anyhow::Result<TerminalGuard> {
        install_panic_hook();
        crossterm::terminal::enable_raw_mode()
            .map_err(|e| anyhow::anyhow!("cannot put the terminal in raw mode: {e}"))?;
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Saved::Raw);
        write_fd(1, b"\x1b[?1049h");
        Ok(TerminalGuard)
    }

    /// Cooked mode with the detach key as the quit character (pipe attach): the terminal
    /// turns it into SIGQUIT, which detaches.
    fn quit_key(byte: u8) -> anyhow::Result<TerminalGuard> {
        install_panic_hook();
        // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
            anyhow::bail!(
                "cannot read the terminal's attributes: {}",
                std::io::Error::last_os_error()
            );
        }
        let original = t;
        t.c_cc[libc::VQUIT] = byte;
        t.c_lflag |= libc::ISIG;
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Saved::Termios(original));
        // SAFETY: attributes derived from tcgetattr's.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } != 0 {
            let err = std::io::Error::last_os_error();
            restore_terminal();
            anyhow::bail!("cannot set the terminal's quit key: {err}");
        }
        Ok(TerminalGuard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the keyboard
// ---------------------------------------------------------------------------------------------

enum Key {
    Bytes(Vec<u8>),
    Detach,
    Eof,
}

/// Reads stdin on a thread (poll(2) with a short timeout, so it stops when asked), splitting
/// at the detach byte.
fn spawn_key_reader(detach: u8, stop: Arc<AtomicBool>, tx: mpsc::UnboundedSender<Key>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            let mut pfd = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, 100) };
            if r <= 0 {
                continue; // timeout or EINTR (SIGWINCH)
            }
            // SAFETY: reads into a valid buffer.
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                let _ = tx.send(Key::Eof);
                return;
            }
            if n == 0 {
                let _ = tx.send(Key::Eof);
                return;
            }
            let got = &buf[..n as usize];
            match got.iter().position(|b| *b == detach) {
                Some(i) => {
                    if i > 0 {
                        let _ = tx.send(Key::Bytes(got[..i].to_vec()));
                    }
                    let _ = tx.send(Key::Detach);
                    return;
                }
                None => {
                    if tx.send(Key::Bytes(got.to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// Turns key bytes into UTF-8 text, carrying a sequence cut between two reads over to the
/// next; bytes that are not UTF-8 become U+FFFD (the API carries text).
#[derive(Default)]
struct KeyText {
    carry: Vec<u8>,
}

impl KeyText {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.carry.extend_from_slice(bytes);
        let keep = output::incomplete_utf8_tail(&self.carry);
        let cut = self.carry.len() - keep;
        let out = String::from_utf8_lossy(&self.carry[..cut]).into_owned();
        self.carry.drain(..cut);
        out
    }
}

/// Sends keys in order, one request at a time; reports a refusal other than 409 (a run
/// that ended while keys were in flight: its `end` event follows). When `unsent` is given
/// (the attach reconnects), a batch that could not reach the server (the link is down) is
/// counted there and the next one is tried on a new connection; otherwise that ends the
/// attach too.
fn spawn_key_sender(
    c: Client,
    target: Arc<Target>,
    mut rx: mpsc::UnboundedReceiver<String>,
    errors: mpsc::UnboundedSender<ClientError>,
    unsent: Option<Arc<AtomicU64>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let path = target.input();
        while let Some(t) = rx.recv().await {
            match c
                .request::<_, IgnoredAny>(Method::POST, &path, Some(&target.typed(t)))
                .await
            {
                Ok(_) => {}
                Err(ClientError::Api { status, .. }) if status.as_u16() == 409 => {}
                // The server answered (and refused): that ends the attach, as it always did.
                Err(e @ (ClientError::Api { .. } | ClientError::Contract { .. })) => {
                    let _ = errors.send(e);
                    return;
                }
                // The link is down: the batch is lost, counted; the next one dials again.
                Err(_) if unsent.is_some() => {
                    if let Some(n) = &unsent {
                        n.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Err(e) => {
                    let _ = errors.send(e);
                    return;
                }
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// PTY runs
// ---------------------------------------------------------------------------------------------

/// Draws the run's screen (through the filter, like everything else from the child);
/// returns the seq to stream from.
async fn draw_screen(
    c: &Client,
    target: &Target,
    filter: &mut AttachFilter,
) -> anyhow::Result<u64> {
    let screen: ScreenSnapshot = c.get(&target.screen()).await?;
    let mut out = filter.filter(screen.formatted.as_bytes());
    // The redraw is whole: nothing of it is held for what follows.
    filter.finish(&mut out);
    write_fd(1, &out);
    Ok(screen.seq + 1)
}

/// What the filter dropped, for the line printed on detach.
fn dropped_note(d: &Dropped, help: &str) -> Option<String> {
    if d.total() == 0 {
        return None;
    }
    let mut parts = Vec::new();
    for (n, one, many) in [
        (d.clipboard, "clipboard write", "clipboard writes"),
        (d.title, "title change", "title changes"),
        (d.report, "terminal query", "terminal queries"),
        (d.other, "other sequence", "other sequences"),
    ] {
        match n {
            0 => {}
            1 => parts.push(format!("1 {one}")),
            n => parts.push(format!("{n} {many}")),
        }
    }
    Some(format!(
        "[attach dropped what would act outside the pane: {}; see `{help}`]",
        parts.join(", ")
    ))
}

async fn open_stream(c: &Client, target: &Target, from: u64) -> Result<EventStream, ClientError> {
    c.stream(&target.attach(from)).await
}

async fn attach_pty(
    c: &Client,
    run_ref: &str,
    view: &RunView,
    key: DetachKey,
    clipboard: Clipboard,
    reconnect: bool,
) -> anyhow::Result<ExitCode> {
    let banner = format!(
        "{}, pty{}",
        tool_label(view),
        view.name
            .as_deref()
            .map(|n| format!(", {}", text::one_line(n, 60)))
            .unwrap_or_default()
    );
    attach_terminal(c, Target::run(run_ref), &banner, key, clipboard, reconnect).await
}

/// `proctor rig attach`: this terminal on a rig's console, the same loop as a PTY run's.
/// `banner` (already one clean line) follows the rig's id in the first line printed.
/// A rig's stream that dies ends the attach (it does not reconnect).
pub(crate) fn attach_rig(
    c: &Client,
    home: &Home,
    id: &str,
    banner: &str,
    detach_key: &str,
) -> anyhow::Result<ExitCode> {
    let key = DetachKey::parse(detach_key).map_err(UsageError::new)?;
    let clipboard = CockpitConfig::load(&home.config)?.attach_clipboard;
    // The caller checked that stdin and stdout are terminals.
    client::block_on(attach_terminal(
        c,
        Target::rig(id),
        banner,
        key,
        clipboard,
        false,
    ))?
}

/// The signals a terminal attach answers.
struct Signals {
    winch: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

/// A terminal attach (a PTY run or a rig's console): raw mode and the alternate screen,
/// the screen drawn, then the stream from the next seq, keys sent as typed, resizes
/// forwarded, the terminal restored on every way out. With `reconnect`, a stream that dies
/// is waited for and resumed (see [`super::reconnect`]).
async fn attach_terminal(
    c: &Client,
    target: Target,
    banner: &str,
    key: DetachKey,
    clipboard: Clipboard,
    reconnect: bool,
) -> anyhow::Result<ExitCode> {
    target.resize(c).await;
    // Check that there is a screen before taking the terminal over.
    c.get::<IgnoredAny>(&target.screen()).await?;
    eprintln!(
        "[attaching to {}: {banner}; detach with {}]",
        target.label,
        key.label()
    );
    let target = Arc::new(target);
    let mut sig = Signals {
        winch: signal(SignalKind::window_change())?,
        term: signal(SignalKind::terminate())?,
        hup: signal(SignalKind::hangup())?,
    };
    let unsent = reconnect.then(|| Arc::new(AtomicU64::new(0)));
    let guard = TerminalGuard::raw()?;
    let mut filter = AttachFilter::new(clipboard);
    let result = pty_loop(c, &target, key, &mut filter, &mut sig, unsent.clone()).await;
    // A sequence cut by the detach is dropped; a passed string is closed.
    let mut tail = Vec::new();
    filter.finish(&mut tail);
    if filter.colours_set() {
        // The child set the palette or the default colours: the terminal's own come back.
        tail.extend_from_slice(text::attach::COLOUR_RESET);
    }
    write_fd(1, &tail);
    drop(guard);
    if let Some(note) = dropped_note(&filter.dropped(), target.help()) {
        eprintln!("{note}");
    }
    let (outcome, sender) = result?;
    if let Some(sender) = sender {
        // Keys typed before the detach key still reach the run.
        let _ = tokio::time::timeout(Duration::from_secs(5), sender).await;
    }
    if let Some(n) = unsent.map(|n| n.load(Ordering::SeqCst)).filter(|n| *n > 0) {
        eprintln!(
            "[{}: {n} batch{} of keys typed while the link was down did not reach it]",
            target.label,
            if n == 1 { "" } else { "es" }
        );
    }
    Ok(outcome.report(&target, c))
}

/// A notice of attach's own on the bottom row of the pane (reverse video, one row, never
/// wider than the terminal), the child's cursor and attributes saved and restored around
/// it. The child's text on that row stays hidden until the child draws it again.
fn pane_notice(line: &str) {
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    let line = text::one_line(line, usize::from(cols.saturating_sub(1).max(1)));
    let s = format!("\x1b7\x1b[{rows};1H\x1b[0m\x1b[2K\x1b[7m{line}\x1b[0m\x1b8");
    write_fd(1, s.as_bytes());
}

/// How a wait for the link ended.
enum Back {
    Stream(EventStream),
    Out(Outcome),
}

/// Waits for a terminal attach's stream to come back from `from`: tries with backoff, keys
/// still go to the run (those that cannot reach it are counted by the sender), the detach
/// key and the signals end the wait. A refusal on the way back is an error.
async fn pty_wait_back(
    c: &Client,
    target: &Target,
    from: u64,
    keys: &mut mpsc::UnboundedReceiver<Key>,
    utf8: &mut KeyText,
    text_tx: Option<&mpsc::UnboundedSender<String>>,
    sig: &mut Signals,
) -> anyhow::Result<Back> {
    let path = target.attach(from);
    let mut backoff = reconnect::Backoff::default();
    loop {
        let attempt = reconnect::attempt(c, &path, backoff.delay());
        tokio::pin!(attempt);
        let done = loop {
            tokio::select! {
                r = &mut attempt => break r,
                k = keys.recv() => match k {
                    Some(Key::Bytes(b)) => {
                        let t = utf8.push(&b);
                        if !t.is_empty() && let Some(tx) = text_tx {
                            let _ = tx.send(t);
                        }
                    }
                    Some(Key::Detach) | Some(Key::Eof) | None => {
                        return Ok(Back::Out(Outcome::Detached));
                    }
                },
                // The size is sent once the link is back.
                _ = sig.winch.recv() => {}
                _ = sig.term.recv() => return Ok(Back::Out(Outcome::Signal("SIGTERM"))),
                _ = sig.hup.recv() => return Ok(Back::Out(Outcome::Signal("SIGHUP"))),
            }
        };
        match done {
            Ok(s) => return Ok(Back::Stream(s)),
            Err(reconnect::Failed::Fatal(e)) => {
                return Err(
                    anyhow::Error::new(e).context(format!("reconnecting to {}", target.label))
                );
            }
            Err(reconnect::Failed::Retry) => {}
        }
    }
}

async fn pty_loop(
    c: &Client,
    target: &Arc<Target>,
    key: DetachKey,
    filter: &mut AttachFilter,
    sig: &mut Signals,
    unsent: Option<Arc<AtomicU64>>,
) -> anyhow::Result<(Outcome, Option<tokio::task::JoinHandle<()>>)> {
    let reconnecting = unsent.is_some();
    let mut from = draw_screen(c, target, filter).await?;
    let mut stream = open_stream(c, target, from).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let (key_tx, mut keys) = mpsc::unbounded_channel();
    spawn_key_reader(key.byte, stop.clone(), key_tx);
    let (text_tx, text_rx) = mpsc::unbounded_channel::<String>();
    let (err_tx, mut errors) = mpsc::unbounded_channel();
    let sender = spawn_key_sender(c.clone(), Arc::clone(target), text_rx, err_tx, unsent);
    let mut text_tx = Some(text_tx);
    let mut utf8 = KeyText::default();
    let outcome = loop {
        tokio::select! {
            ev = stream.next() => {
                let ev = match ev {
                    Ok(Some(ev)) => ev,
                    lost => {
                        let why = reconnect::lost_reason(lost.as_ref().err());
                        if !reconnecting {
                            break Outcome::Closed(from, why);
                        }
                        // The reason last: the row is cut to the terminal's width.
                        pane_notice(&format!(
                            "[{}: reconnecting to continue from seq {from}; {} detaches; {why}]",
                            target.label,
                            key.label()
                        ));
                        let back = pty_wait_back(
                            c, target, from, &mut keys, &mut utf8, text_tx.as_ref(), sig,
                        )
                        .await;
                        match back {
                            Ok(Back::Stream(s)) => {
                                stream = s;
                                pane_notice(&format!(
                                    "[{}: reconnected; continuing from seq {from}]",
                                    target.label
                                ));
                                target.resize(c).await;
                                continue;
                            }
                            Ok(Back::Out(o)) => break o,
                            Err(e) => {
                                stop.store(true, Ordering::SeqCst);
                                return Err(e);
                            }
                        }
                    }
                };
                match ev.event.as_str() {
                    wire::sse::OUTPUT => {
                        let (last, frames) = output::frames(&ev.data).map_err(anyhow::Error::msg)?;
                        let mut shown = Vec::new();
                        for f in &frames {
                            filter.push(&f.bytes, &mut shown);
                        }
                        let mut out = std::io::stdout().lock();
                        out.write_all(&shown)?;
                        out.flush()?;
                        from = last + 1;
                    }
                    wire::sse::LAG => {
                        // Output was evicted before it reached us: redraw from the screen.
                        // A sequence cut by the gap is dropped, not joined to the redraw.
                        let mut cut = Vec::new();
                        filter.finish(&mut cut);
                        write_fd(1, &cut);
                        from = draw_screen(c, target, filter).await?;
                        stream = open_stream(c, target, from).await?;
                    }
                    wire::sse::END => {
                        let end: EndEvent = serde_json::from_str(&ev.data).unwrap_or_default();
                        break Outcome::Ended(Exit::from_end(&end));
                    }
                    wire::sse::NOTICE => match serde_json::from_str::<NoticeEvent>(&ev.data) {
                        Ok(NoticeEvent::NotLive { state, message }) => {
                            break Outcome::NotLive(not_live_message(state, &message));
                        }
                        Ok(NoticeEvent::CursorAhead { next, .. }) => from = next,
                        Err(_) => {}
                    },
                    _ => {}
                }
            }
            k = keys.recv() => match k {
                Some(Key::Bytes(b)) => {
                    let t = utf8.push(&b);
                    if !t.is_empty() && let Some(tx) = &text_tx {
                        let _ = tx.send(t);
                    }
                }
                Some(Key::Detach) | Some(Key::Eof) | None => break Outcome::Detached,
            },
            e = errors.recv() => {
                if let Some(e) = e {
                    stop.store(true, Ordering::SeqCst);
                    return Err(anyhow::Error::new(e).context(format!("typing into {}", target.label)));
                }
            }
            _ = sig.winch.recv() => target.resize(c).await,
            _ = sig.term.recv() => break Outcome::Signal("SIGTERM"),
            _ = sig.hup.recv() => break Outcome::Signal("SIGHUP"),
        }
    };
    stop.store(true, Ordering::SeqCst);
    text_tx.take();
    Ok((outcome, Some(sender)))
}

// ---------------------------------------------------------------------------------------------
// Pipe runs
// ---------------------------------------------------------------------------------------------

enum Line {
    Text(String),
    Eof,
}

fn spawn_line_reader(tx: mpsc::UnboundedSender<Line>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Line::Eof);
                    return;
                }
                Ok(_) => {
                    let l = line.trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(Line::Text(l)).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// Shows a pipe run's two streams on one terminal, sanitised, stderr lines marked.
struct PipeView {
    out: Sanitiser,
    err: Sanitiser,
    err_prefix: &'static str,
    /// Whether the last text shown ended a line.
    at_line_start: bool,
    last_err: bool,
}

impl PipeView {
    fn new() -> PipeView {
        PipeView {
            out: Sanitiser::default(),
            err: Sanitiser::default(),
            err_prefix: if std::io::stdout().is_terminal() {
                "\x1b[2mstderr|\x1b[22m "
            } else {
                "stderr| "
            },
            at_line_start: true,
            last_err: false,
        }
    }

    fn show(&mut self, f: &output::Frame) -> std::io::Result<()> {
        if f.stream == "stdin" {
            return Ok(()); // what proctor wrote to the child, not its output
        }
        let is_err = f.stream == "stderr";
        let t = if is_err {
            self.err.push(&f.bytes)
        } else {
            self.out.push(&f.bytes)
        };
        self.print(is_err, &t)
    }

    fn print(&mut self, is_err: bool, t: &str) -> std::io::Result<()> {
        if t.is_empty() {
            return Ok(());
        }
        let mut o = std::io::stdout().lock();
        if is_err != self.last_err && !self.at_line_start {
            o.write_all(b"\n")?;
            self.at_line_start = true;
        }
        for piece in t.split_inclusive('\n') {
            if is_err && self.at_line_start {
                o.write_all(self.err_prefix.as_bytes())?;
            }
            o.write_all(piece.as_bytes())?;
            self.at_line_start = piece.ends_with('\n');
        }
        self.last_err = is_err;
        o.flush()
    }

    /// Ends a line left open, so that a notice starts on a line of its own; what the
    /// sanitisers hold stays held.
    fn break_line(&mut self) -> std::io::Result<()> {
        if !self.at_line_start {
            let mut out = std::io::stdout().lock();
            out.write_all(b"\n")?;
            out.flush()?;
            self.at_line_start = true;
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let o = self.out.finish();
        self.print(false, &o)?;
        let e = self.err.finish();
        self.print(true, &e)?;
        if !self.at_line_start {
            let mut out = std::io::stdout().lock();
            out.write_all(b"\n")?;
            out.flush()?;
            self.at_line_start = true;
        }
        Ok(())
    }
}

/// Sends a line typed as a turn; a refusal or a dead link is a notice.
async fn send_turn(c: &Client, run_ref: &str, t: String) {
    let input_path = wire::at(wire::INPUT, run_ref);
    if let Err(e) = c
        .request::<_, IgnoredAny>(Method::POST, &input_path, Some(&typed(t)))
        .await
    {
        eprintln!(
            "[{run_ref}: the turn was not sent: {}]",
            text::one_line(&e.to_string(), 300)
        );
    }
}

/// Interrupts the run's turn (Ctrl-C); says what the server answered.
async fn send_interrupt(c: &Client, run_ref: &str) {
    match c
        .request::<(), RunView>(Method::POST, &wire::at(wire::INTERRUPT, run_ref), None)
        .await
    {
        Ok(v) => eprintln!("[interrupt sent to {run_ref} (state {})]", v.state.as_str()),
        Err(e) => eprintln!(
            "[{run_ref}: interrupt refused: {}]",
            text::one_line(&e.to_string(), 300)
        ),
    }
}

/// The signals a pipe attach answers.
struct PipeSignals {
    quit: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

/// Waits for a pipe attach's stream to come back from `next`: tries with backoff; lines
/// typed meanwhile are still sent as turns (or said not sent), the detach key, Ctrl-D and
/// the signals end the wait. A refusal on the way back is an error.
async fn pipe_wait_back(
    c: &Client,
    target: &Target,
    next: u64,
    lines: &mut mpsc::UnboundedReceiver<Line>,
    sig: &mut PipeSignals,
) -> anyhow::Result<Back> {
    let path = target.attach(next);
    let mut backoff = reconnect::Backoff::default();
    loop {
        let attempt = reconnect::attempt(c, &path, backoff.delay());
        tokio::pin!(attempt);
        let done = loop {
            tokio::select! {
                r = &mut attempt => break r,
                l = lines.recv() => match l {
                    Some(Line::Text(t)) if t.trim().is_empty() => {}
                    Some(Line::Text(t)) => send_turn(c, &target.label, t).await,
                    Some(Line::Eof) | None => return Ok(Back::Out(Outcome::Detached)),
                },
                _ = sig.quit.recv() => return Ok(Back::Out(Outcome::Detached)),
                _ = sig.int.recv() => send_interrupt(c, &target.label).await,
                _ = sig.term.recv() => return Ok(Back::Out(Outcome::Signal("SIGTERM"))),
                _ = sig.hup.recv() => return Ok(Back::Out(Outcome::Signal("SIGHUP"))),
            }
        };
        match done {
            Ok(s) => return Ok(Back::Stream(s)),
            Err(reconnect::Failed::Fatal(e)) => {
                return Err(
                    anyhow::Error::new(e).context(format!("reconnecting to {}", target.label))
                );
            }
            Err(reconnect::Failed::Retry) => {}
        }
    }
}

async fn attach_pipe(
    c: &Client,
    run_ref: &str,
    view: &RunView,
    key: DetachKey,
    reconnect: bool,
) -> anyhow::Result<ExitCode> {
    let target = Target::run(run_ref);
    let mut stream = open_stream(c, &target, 1).await?;
    eprintln!(
        "[attached to {run_ref}: {}, pipe{}. A line you type is sent as a turn; Ctrl-C \
         interrupts the turn; {} or Ctrl-D detaches. Output is sanitised; the tool's stderr \
         lines start with `stderr|`]",
        tool_label(view),
        view.name
            .as_deref()
            .map(|n| format!(", {}", text::one_line(n, 60)))
            .unwrap_or_default(),
        key.label()
    );
    let mut sig = PipeSignals {
        quit: signal(SignalKind::quit())?,
        int: signal(SignalKind::interrupt())?,
        term: signal(SignalKind::terminate())?,
        hup: signal(SignalKind::hangup())?,
    };
    let guard = TerminalGuard::quit_key(key.byte)?;
    let (tx, mut lines) = mpsc::unbounded_channel();
    spawn_line_reader(tx);
    let mut shown = PipeView::new();
    let mut next = 1u64;
    let outcome = loop {
        tokio::select! {
            ev = stream.next() => {
                let ev = match ev {
                    Ok(Some(ev)) => ev,
                    lost => {
                        let why = reconnect::lost_reason(lost.as_ref().err());
                        if !reconnect {
                            break Outcome::Closed(next, why);
                        }
                        // The sanitisers keep what they hold: the output goes on from
                        // `next` as if it had not stopped.
                        shown.break_line()?;
                        eprintln!(
                            "[{run_ref}: {why}; reconnecting to continue from seq {next}; {} \
                             detaches]",
                            key.label()
                        );
                        match pipe_wait_back(c, &target, next, &mut lines, &mut sig).await {
                            Ok(Back::Stream(s)) => {
                                stream = s;
                                eprintln!("[{run_ref}: reconnected; continuing from seq {next}]");
                                continue;
                            }
                            Ok(Back::Out(o)) => break o,
                            Err(e) => {
                                shown.finish()?;
                                drop(guard);
                                return Err(e);
                            }
                        }
                    }
                };
                match ev.event.as_str() {
                    wire::sse::OUTPUT => {
                        let (last, frames) = output::frames(&ev.data).map_err(anyhow::Error::msg)?;
                        for f in &frames {
                            shown.show(f)?;
                        }
                        next = last + 1;
                    }
                    wire::sse::LAG => {
                        shown.finish()?;
                        let first = serde_json::from_str::<LagEvent>(&ev.data)
                            .map_or(next, |l| l.first_available);
                        eprintln!("[… output before seq {first} was evicted before it was shown …]");
                        next = first;
                    }
                    wire::sse::END => {
                        let end: EndEvent = serde_json::from_str(&ev.data).unwrap_or_default();
                        break Outcome::Ended(Exit::from_end(&end));
                    }
                    wire::sse::NOTICE => match serde_json::from_str::<NoticeEvent>(&ev.data) {
                        Ok(NoticeEvent::NotLive { state, message }) => {
                            break Outcome::NotLive(not_live_message(state, &message));
                        }
                        Ok(NoticeEvent::CursorAhead { next: n, .. }) => next = n,
                        Err(_) => {}
                    },
                    _ => {}
                }
            }
            l = lines.recv() => match l {
                Some(Line::Text(t)) if t.trim().is_empty() => {}
                Some(Line::Text(t)) => send_turn(c, run_ref, t).await,
                Some(Line::Eof) | None => break Outcome::Detached,
            },
            _ = sig.quit.recv() => break Outcome::Detached,
            _ = sig.int.recv() => send_interrupt(c, run_ref).await,
            _ = sig.term.recv() => break Outcome::Signal("SIGTERM"),
            _ = sig.hup.recv() => break Outcome::Signal("SIGHUP"),
        }
    };
    shown.finish()?;
    drop(guard);
    Ok(outcome.report(&target, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_keys() {
        assert_eq!(DetachKey::parse("ctrl-\\").unwrap().byte, 0x1c);
        assert_eq!(DetachKey::parse("Ctrl-]").unwrap().byte, 0x1d);
        assert_eq!(DetachKey::parse("ctrl-b").unwrap().byte, 0x02);
        assert_eq!(DetachKey::parse("ctrl-\\").unwrap().label(), "Ctrl-\\");
        for bad in [
            "ctrl-c", "ctrl-d", "ctrl-m", "ctrl-z", "ctrl-", "ctrl-ab", "q", "alt-x",
        ] {
            assert!(DetachKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_text_carries_a_cut_sequence() {
        let mut k = KeyText::default();
        assert_eq!(k.push(b"a\xe2\x82"), "a");
        assert_eq!(k.push(b"\xacb"), "\u{20ac}b");
        assert_eq!(k.push(b"\xff"), "\u{fffd}");
        assert_eq!(k.push(b"\x1b[A"), "\x1b[A");
    }
}
