//! `proctor session tail`: a run's output for SSH and scripts.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use hyper::Method;
use serde_json::Value;

use super::output::{self, Exit, Sanitiser};
use super::{normalise_ref, run_path};
use crate::client::{self, Client};
use crate::text;

/// Print a run's output, for SSH sessions and scripts.
///
/// Prints the output the server holds for the run, from seq 1 (or --from SEQ) on: the
/// child's stdout on stdout and its stderr on stderr (a PTY run has one stream, on stdout).
/// Everything goes through proctor's sanitiser (escape sequences and controls removed,
/// invisible characters shown as ⟨U+XXXX⟩) unless --raw, which writes the child's bytes
/// exactly as it wrote them.
///
/// Without --follow: prints what is held now and exits 0 (if the run has ended, its exit is
/// printed on stderr too).
///
/// With --follow: keeps printing until the run ends, then prints `[run-0001 exited: code 3]`
/// (or `signal SIGKILL`, or `exit not observed`) on stderr and exits with the run's status:
/// its exit code, 128 + the signal's number when a signal ended it, 1 when the exit was not
/// observed.
///
/// Notices go to stderr between brackets: output evicted from the server's bounded buffer
/// before it was read (`[… output before seq N was evicted …]`; the command goes on), and a
/// run whose output this server does not hold (not live here, e.g. lost in a server
/// restart, or cleaned up): then the command exits 1, with or without --follow, because it
/// could not print the output; `proctor session show` has the recorded exit, and the
/// transcript on disk keeps what was written.
///
/// If the server closes the stream before the run ends, the command exits 1 and names the
/// --from SEQ that continues exactly where it stopped.
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

/// Where frames go: stdout frames to stdout, stderr frames to stderr.
struct Printer {
    raw: bool,
    out: Sanitiser,
    err: Sanitiser,
}

impl Printer {
    fn write(&mut self, f: &output::Frame) -> std::io::Result<()> {
        let to_err = f.stream == "stderr";
        if self.raw {
            return if to_err {
                std::io::stderr().lock().write_all(&f.bytes)
            } else {
                std::io::stdout().lock().write_all(&f.bytes)
            };
        }
        if to_err {
            let t = self.err.push(&f.bytes);
            std::io::stderr().lock().write_all(t.as_bytes())
        } else {
            let t = self.out.push(&f.bytes);
            std::io::stdout().lock().write_all(t.as_bytes())
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().lock().flush()?;
        std::io::stderr().lock().flush()
    }

    /// Releases what the sanitisers hold (end of output).
    fn finish(&mut self) -> std::io::Result<()> {
        let o = self.out.finish();
        std::io::stdout().lock().write_all(o.as_bytes())?;
        let e = self.err.finish();
        std::io::stderr().lock().write_all(e.as_bytes())?;
        self.flush()
    }
}

async fn tail(c: &Client, run_ref: &str, a: &TailArgs) -> anyhow::Result<ExitCode> {
    let view = c.call(Method::GET, &run_path(run_ref, ""), None).await?;
    let live = matches!(
        view["state"].as_str(),
        Some("starting" | "running" | "idle")
    );
    let from = a.from.unwrap_or(1).max(1);
    // Without --follow, stop at what the server holds now.
    let stop_at = match (a.follow, view["output"]["next_seq"].as_u64()) {
        (true, _) | (false, None) => None,
        (false, Some(next)) => {
            if next <= from && live {
                return Ok(ExitCode::SUCCESS);
            }
            Some(next.saturating_sub(1))
        }
    };
    let mut stream = c
        .stream(&format!("{}?from={from}", run_path(run_ref, "attach")))
        .await?;
    let mut p = Printer {
        raw: a.raw,
        out: Sanitiser::default(),
        err: Sanitiser::default(),
    };
    let mut next = from;
    loop {
        let Some(ev) = stream.next().await? else {
            p.finish()?;
            eprintln!(
                "[{run_ref}: the server closed the stream before the run ended; \
                 `proctor session tail --from {next} {run_ref}` continues from here]"
            );
            return Ok(ExitCode::from(1));
        };
        let data: Value = match ev.event.as_str() {
            "output" => Value::Null,
            _ => serde_json::from_str(&ev.data).unwrap_or(Value::Null),
        };
        match ev.event.as_str() {
            "output" => {
                let (last, frames) = output::frames(&ev.data).map_err(anyhow::Error::msg)?;
                for f in &frames {
                    p.write(f)?;
                }
                p.flush()?;
                next = last + 1;
                if stop_at.is_some_and(|s| last >= s) {
                    p.finish()?;
                    if !live && view["ended_at"].is_string() {
                        eprintln!("[{run_ref} exited: {}]", Exit::from_json(&view).describe());
                    }
                    return Ok(ExitCode::SUCCESS);
                }
            }
            "lag" => {
                let first = data["first_available"].as_u64().unwrap_or(next);
                p.finish()?;
                eprintln!(
                    "[… {run_ref}: output before seq {first} was evicted from the server's buffer \
                     before it was read …]"
                );
                next = first;
                if stop_at.is_some_and(|s| first > s) {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            "end" => {
                p.finish()?;
                let exit = Exit::from_json(&data);
                eprintln!("[{run_ref} exited: {}]", exit.describe());
                return Ok(if a.follow {
                    ExitCode::from(exit.status())
                } else {
                    ExitCode::SUCCESS
                });
            }
            "notice" => match data["notice"].as_str() {
                Some("cursor_ahead") => {
                    let n = data["next"].as_u64().unwrap_or(next);
                    eprintln!(
                        "[{run_ref}: seq {} is past the output so far; continuing from seq {n}]",
                        data["requested"].as_u64().unwrap_or(from)
                    );
                    next = n;
                }
                Some("not_live") => {
                    p.finish()?;
                    let recorded = if view["ended_at"].is_string() {
                        format!("; its recorded exit: {}", Exit::from_json(&view).describe())
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "[{run_ref}: no output held by this server (state {}){recorded}. {}]",
                        text::one_line(data["state"].as_str().unwrap_or("?"), 16),
                        text::one_line(data["message"].as_str().unwrap_or(""), 200)
                    );
                    return Ok(ExitCode::from(1));
                }
                _ => eprintln!("[{run_ref}: notice {}]", text::one_line(&ev.data, 300)),
            },
            _ => {}
        }
    }
}
