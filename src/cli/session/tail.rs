//! `proctor session tail`: a run's output for SSH and scripts.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use super::output::{self, Exit, Sanitiser, ScreenText};
use super::{event_data, normalise_ref, reconnect};
use crate::api::runs::{self as wire, EndEvent, LagEvent, NoticeEvent, RunView, State};
use crate::client::{self, Client};
use crate::text;

/// Print a run's output, for SSH sessions and scripts.
///
/// Prints the output the server holds for the run, from seq 1 (or --from SEQ) on.
///
/// A pipe run: the conversation, decoded from the tool's protocol (claude stream-json,
/// codex app-server, ACP), one line per event, every string through proctor's sanitiser
/// (escape sequences and controls removed, invisible characters shown as ⟨U+XXXX⟩):
///
/// `you: …` (the person's turn: what proctor wrote to the tool), the agent's words as
/// they are, `thinking: …` (a reasoning summary, where the tool sends one), `▸ Bash: cargo
/// test …` (a tool call started; again when it ends, with `(exit 1)`, `(done)` or
/// `(failed)`), `✎ update src/lib.rs` (a file change), `plan: ✓ read · ▸ fix · ○ test`,
/// `usage: in 120 · out 30 · $0.0100` (only what the tool reports), `! error: Reconnecting...
/// 2/5 (will retry)`, `! warning: …`, `? permission asked (can_use_tool): Bash: …`, and the
/// turns' boundaries (`── turn started`, `── turn ended: completed`).
///
/// Lines that are not protocol frames are printed as they are (sanitised), the tool's
/// stderr on stderr. --json prints each event as one JSON object per line instead
/// (`{"type":"tool_call","id":…,"kind":"Bash","command":"cargo test","status":"ended",
/// "exit_code":1,…}`; the types are those of `Said` in docs/api.md).
///
/// A PTY run: the bytes go through a terminal emulator of the run's size (as the server
/// reports it now) and what is printed is the screen it draws, as lines of text: each row of
/// the screen one line, the gaps that cursor movements made kept as spaces, trailing blanks
/// dropped, every cell through the sanitiser. A row is printed once it is final, when it has
/// scrolled off the top of the screen; the rows still on the screen are printed at the end
/// (without --follow: the screen as it stands now). --color keeps the cells' colours and
/// attributes, written by proctor as plain SGR (colours, bold, dim, italic, underline,
/// inverse; nothing else, and never the child's own sequences).
///
/// --raw writes the child's bytes exactly as it wrote them (escape sequences included):
/// its stdout on stdout, its stderr on stderr, never what proctor wrote to it.
///
/// Without --follow: prints what is held now and exits 0 (if the run has ended, its exit is
/// printed on stderr too).
///
/// With --follow: keeps printing until the run ends, then prints `[run-0001 exited: code 3]`
/// (or `signal SIGKILL`, or `exit not observed`) on stderr and exits with the run's status:
/// its exit code, 128 + the signal's number when a signal ended it, 1 when the exit was not
/// observed. For a PTY run, final rows are printed as they scroll off; when stdout is a
/// terminal (`ssh -t`), the screen's current rows are also shown below them, redrawn in
/// place (at most ten times a second) under a `live screen` line, and replaced by the final
/// screen when the run ends. When stdout is not a terminal (a pipe, `ssh` without -t), only
/// final rows are printed until the run ends, then the final screen.
///
/// Notices go to stderr between brackets: output evicted from the server's bounded buffer
/// before it was read (`[… output before seq N was evicted …]`; the command goes on), and a
/// run whose output this server does not hold (not live here, e.g. lost in a server
/// restart, or cleaned up): then the command exits 1, with or without --follow, because it
/// could not print the output; `proctor session show` has the recorded exit, and the
/// transcript on disk keeps what was written.
///
/// With --follow, a stream that dies before the run ends (the server went away, or the ssh
/// link to a --host dropped) is a notice on stderr (`[run-0001: the stream broke (…);
/// reconnecting …]`); the command tries again (0.2 s, doubling, at most 5 s apart, until it
/// is back or interrupted) and, once back, says `reconnected` and continues from the seq
/// after the last one printed: nothing is printed twice, nothing is skipped (a `lag` notice
/// says when the server's buffer evicted some meanwhile). A server of another protocol met
/// on the way back is refused (exit 1). With --no-reconnect (or without --follow), a stream
/// that dies ends the command with exit 1 and names the --from SEQ that continues exactly
/// where it stopped.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Start at this output seq (1 is the first frame of the run's current generation).
    #[arg(long, value_name = "SEQ")]
    pub from: Option<u64>,
    /// Keep printing until the run ends; exit with its status.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Write the child's bytes unsanitised (escape sequences included).
    #[arg(long)]
    pub raw: bool,
    /// A PTY run: keep the screen's colours and attributes (written by proctor as SGR).
    #[arg(long, conflicts_with = "raw")]
    pub color: bool,
    /// A pipe run: one JSON object per event of the conversation (`{"type":"person_turn",…}`).
    #[arg(long, conflicts_with_all = ["raw", "color"])]
    pub json: bool,
    /// With --follow: when the stream dies, exit 1 (naming the --from SEQ that continues)
    /// instead of reconnecting.
    #[arg(long)]
    pub no_reconnect: bool,
}

pub fn run(c: &Client, a: TailArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    match client::block_on(tail(c, &run_ref, &a))? {
        Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        other => other,
    }
}

/// A reader that stopped reading (`tail | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Where frames go.
enum Printer {
    /// A pipe run (or --raw): stdout frames to stdout, stderr frames to stderr.
    Streams {
        raw: bool,
        out: Sanitiser,
        err: Sanitiser,
    },
    /// A PTY run: the screen, as lines of text.
    Screen(Box<ScreenOut>),
    /// A pipe run: the conversation (lines, or `Said` JSON lines).
    Conversation(Box<output::Conversation>),
}

fn write_out(lines: Vec<output::Out>) -> std::io::Result<()> {
    for l in lines {
        match l {
            output::Out::Stdout(s) => std::io::stdout().lock().write_all(s.as_bytes())?,
            output::Out::Stderr(s) => std::io::stderr().lock().write_all(s.as_bytes())?,
        }
    }
    Ok(())
}

/// How long a live view waits between two redraws.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// A PTY run rendered through the emulator, with an optional live view of the screen.
struct ScreenOut {
    text: ScreenText,
    live: Option<Live>,
}

/// The screen's current rows, drawn below the final lines on the operator's terminal and
/// redrawn in place.
struct Live {
    run_ref: String,
    /// Rows of the operator's terminal the view takes now (0: not drawn).
    shown: usize,
    dirty: bool,
    last_draw: Option<Instant>,
}

impl ScreenOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let done = self.text.feed(bytes);
        if !done.is_empty() {
            self.clear_live()?;
            let mut out = std::io::stdout().lock();
            for l in &done {
                writeln!(out, "{l}")?;
            }
        }
        if let Some(l) = &mut self.live {
            l.dirty = true;
        }
        Ok(())
    }

    /// Erases the live view (proctor's own cursor movements, never the child's bytes).
    fn clear_live(&mut self) -> std::io::Result<()> {
        if let Some(l) = &mut self.live
            && l.shown > 0
        {
            write!(std::io::stdout().lock(), "\r\x1b[{}A\x1b[J", l.shown)?;
            l.shown = 0;
            l.dirty = true;
        }
        Ok(())
    }

    /// When the live view should be redrawn next, if it needs it.
    fn redraw_due(&self) -> Option<Instant> {
        let l = self.live.as_ref()?;
        l.dirty
            .then(|| l.last_draw.map_or_else(Instant::now, |t| t + REDRAW_EVERY))
    }

    /// Draws the screen's rows that fit the operator's terminal below a `live screen` line.
    fn draw_live(&mut self) -> std::io::Result<()> {
        self.clear_live()?;
        let Some(l) = &mut self.live else {
            return Ok(());
        };
        let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
        // Lines narrower than the terminal never wrap, and the view never scrolls out of
        // reach of the cursor movements that erase it.
        let mut lines = self.text.screen_lines(cols.saturating_sub(1).max(1));
        let room = usize::from(rows).saturating_sub(2).max(1);
        if lines.len() > room {
            lines.drain(..lines.len() - room);
        }
        let mut out = std::io::stdout().lock();
        let header = format!("── {} live screen (redrawn until final) ", l.run_ref);
        let header = text::one_line(&header, usize::from(cols.saturating_sub(1).max(1)));
        writeln!(out, "\x1b[2m{header}\x1b[0m")?;
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        l.shown = lines.len() + 1;
        l.dirty = false;
        l.last_draw = Some(Instant::now());
        Ok(())
    }

    /// Replaces the live view with the screen's rows, for good.
    fn finish(&mut self) -> std::io::Result<()> {
        self.clear_live()?;
        self.live = None;
        let mut out = std::io::stdout().lock();
        for l in self.text.screen_lines(u16::MAX) {
            writeln!(out, "{l}")?;
        }
        out.flush()
    }
}

impl Printer {
    fn write(&mut self, f: &output::Frame) -> std::io::Result<()> {
        let (raw, out, err) = match self {
            Printer::Screen(s) => return s.write(&f.bytes),
            Printer::Conversation(c) => return write_out(c.push(&f.stream, &f.bytes)),
            Printer::Streams { raw, out, err } => (*raw, out, err),
        };
        if f.stream == "stdin" {
            return Ok(()); // what proctor wrote to the child, not its output
        }
        let to_err = f.stream == "stderr";
        if raw {
            return if to_err {
                std::io::stderr().lock().write_all(&f.bytes)
            } else {
                std::io::stdout().lock().write_all(&f.bytes)
            };
        }
        if to_err {
            let t = err.push(&f.bytes);
            std::io::stderr().lock().write_all(t.as_bytes())
        } else {
            let t = out.push(&f.bytes);
            std::io::stdout().lock().write_all(t.as_bytes())
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().lock().flush()?;
        std::io::stderr().lock().flush()
    }

    /// Takes the live view off the terminal before a notice is printed on stderr.
    fn before_notice(&mut self) -> std::io::Result<()> {
        match self {
            Printer::Screen(s) => s.clear_live(),
            Printer::Streams { .. } | Printer::Conversation(_) => Ok(()),
        }
    }

    /// Releases what is held (end of output): the sanitisers' tails, or the screen's rows.
    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Printer::Screen(s) => s.finish()?,
            Printer::Conversation(c) => write_out(c.finish())?,
            Printer::Streams { out, err, .. } => {
                let o = out.finish();
                std::io::stdout().lock().write_all(o.as_bytes())?;
                let e = err.finish();
                std::io::stderr().lock().write_all(e.as_bytes())?;
            }
        }
        self.flush()
    }
}

/// The size a PTY run's terminal has now (the emulator renders at it).
async fn run_size(c: &Client, run_ref: &str) -> (u16, u16) {
    let default = crate::runs::TermSize::default();
    match c
        .get::<wire::ScreenSnapshot>(&wire::at(wire::SCREEN, run_ref))
        .await
    {
        Ok(v) => {
            let or = |n: u16, d: u16| if n > 0 { n } else { d };
            (or(v.size.rows, default.rows), or(v.size.cols, default.cols))
        }
        Err(_) => (default.rows, default.cols),
    }
}

async fn tail(c: &Client, run_ref: &str, a: &TailArgs) -> anyhow::Result<ExitCode> {
    let view: RunView = c.get(&wire::at(wire::RUN, run_ref)).await?;
    let live = matches!(view.state, State::Starting | State::Running | State::Idle);
    let from = a.from.unwrap_or(1).max(1);
    // Without --follow, stop at what the server holds now.
    let stop_at = match (a.follow, view.output.as_ref().map(|o| o.next_seq)) {
        (true, _) | (false, None) => None,
        (false, Some(next)) => {
            if next <= from && live {
                return Ok(ExitCode::SUCCESS);
            }
            Some(next.saturating_sub(1))
        }
    };
    if a.json && view.transport == "pty" {
        anyhow::bail!(
            "{run_ref} is a PTY run: --json prints a pipe run's conversation; use `proctor session \
             tail {run_ref}` (the screen as text) or --raw (the terminal's bytes)"
        );
    }
    let mut p = if view.transport == "pty" && !a.raw {
        let (rows, cols) = run_size(c, run_ref).await;
        let live_view = (a.follow && live && std::io::stdout().is_terminal()).then(|| Live {
            run_ref: run_ref.to_string(),
            shown: 0,
            dirty: false,
            last_draw: None,
        });
        Printer::Screen(Box::new(ScreenOut {
            text: ScreenText::new(rows, cols, a.color),
            live: live_view,
        }))
    } else if a.raw {
        Printer::Streams {
            raw: true,
            out: Sanitiser::default(),
            err: Sanitiser::default(),
        }
    } else {
        Printer::Conversation(Box::new(output::Conversation::new(&view.tool, a.json)))
    };
    let mut stream = c.stream(&wire::attach(run_ref, from)).await?;
    let mut next = from;
    loop {
        let due = match &p {
            Printer::Screen(s) => s.redraw_due(),
            Printer::Streams { .. } | Printer::Conversation(_) => None,
        };
        let ev = match due {
            None => stream.next().await,
            Some(at) => tokio::select! {
                ev = stream.next() => ev,
                () = tokio::time::sleep_until(at.into()) => {
                    if let Printer::Screen(s) = &mut p {
                        s.draw_live()?;
                    }
                    continue;
                }
            },
        };
        let ev = match ev {
            Ok(Some(ev)) => ev,
            lost => {
                let why = reconnect::lost_reason(lost.as_ref().err());
                if !a.follow || a.no_reconnect {
                    p.finish()?;
                    eprintln!(
                        "[{run_ref}: {why} before the run ended; `{}` continues from here]",
                        reconnect::tail_from(c, run_ref, next)
                    );
                    return Ok(ExitCode::from(1));
                }
                // The printer keeps what it holds (a cut sequence, a partial line): the
                // stream goes on from `next` as if it had not stopped.
                p.before_notice()?;
                p.flush()?;
                eprintln!("[{run_ref}: {why}; reconnecting to continue from seq {next} …]");
                stream = reconnect::until_back(c, &wire::attach(run_ref, next)).await?;
                eprintln!("[{run_ref}: reconnected; continuing from seq {next}]");
                continue;
            }
        };
        match ev.event.as_str() {
            wire::sse::OUTPUT => {
                let (last, frames) = output::frames(&ev.data).map_err(anyhow::Error::msg)?;
                for f in &frames {
                    p.write(f)?;
                }
                p.flush()?;
                next = last + 1;
                if stop_at.is_some_and(|s| last >= s) {
                    p.finish()?;
                    if !live && view.ended_at.is_some() {
                        eprintln!("[{run_ref} exited: {}]", Exit::from_view(&view).describe());
                    }
                    return Ok(ExitCode::SUCCESS);
                }
            }
            wire::sse::LAG => {
                let first = event_data::<LagEvent>(&ev)?.first_available;
                match &mut p {
                    // The screen goes on from where the output resumes.
                    Printer::Screen(s) => s.clear_live()?,
                    Printer::Streams { .. } | Printer::Conversation(_) => p.finish()?,
                }
                eprintln!(
                    "[… {run_ref}: output before seq {first} was evicted from the server's buffer \
                     before it was read …]"
                );
                next = first;
                if stop_at.is_some_and(|s| first > s) {
                    p.finish()?;
                    return Ok(ExitCode::SUCCESS);
                }
            }
            wire::sse::END => {
                p.finish()?;
                let exit = Exit::from_end(&event_data::<EndEvent>(&ev)?);
                eprintln!("[{run_ref} exited: {}]", exit.describe());
                return Ok(if a.follow {
                    ExitCode::from(exit.status())
                } else {
                    ExitCode::SUCCESS
                });
            }
            wire::sse::NOTICE => match serde_json::from_str::<NoticeEvent>(&ev.data) {
                Ok(NoticeEvent::CursorAhead { requested, next: n }) => {
                    p.before_notice()?;
                    eprintln!(
                        "[{run_ref}: seq {requested} is past the output so far; continuing from \
                         seq {n}]"
                    );
                    next = n;
                }
                Ok(NoticeEvent::NotLive { state, message }) => {
                    p.finish()?;
                    let recorded = if view.ended_at.is_some() {
                        format!("; its recorded exit: {}", Exit::from_view(&view).describe())
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "[{run_ref}: no output held by this server (state {}){recorded}. {}]",
                        state.as_str(),
                        text::one_line(&message, 200)
                    );
                    return Ok(ExitCode::from(1));
                }
                Err(_) => {
                    p.before_notice()?;
                    eprintln!("[{run_ref}: notice {}]", text::one_line(&ev.data, 300));
                }
            },
            _ => {}
        }
    }
}
