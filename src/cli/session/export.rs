//! `proctor session export`: a PTY run's output as an asciicast file, from the server's
//! `GET /runs/{ref}/cast` (a thin client: the server makes the cast; this writes it).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::{normalise_ref, print_json, show_path};
use crate::api::runs as wire;
use crate::cli::UsageError;
use crate::client::{self, Client};
use crate::files;

/// Export a PTY run's output as an asciicast, the file asciinema plays.
///
/// The cast holds what the run's terminal showed: the tool's own output bytes, each chunk at
/// the time the server recorded it, and every resize, from the transcript the server keeps
/// (pty.raw) and its timing (pty.timing). asciicast v2 by default (asciinema 2.x and the web
/// player); --v3 writes v3 (asciinema 3.0 and later), with the run's exit code when the OS
/// reported one. Play it with `asciinema play FILE`; asciinema 2.x `cat FILE` (3.x: `convert
/// -f raw FILE -`) prints the bytes.
///
/// The header's title is the run's ref and its tool (never a name given to the run). What
/// the cast lacks is said in the header's `proctor` object and by a marker event where it
/// happens: the transcript's cap (64 MiB), the timing's cap, output the server never timed.
/// Output that is not UTF-8 is carried as U+FFFD (counted in the header).
///
/// FILE is written 0600 through a temporary file in its own folder, renamed into place once
/// complete: an interrupted export leaves no partial file. An existing FILE (a symlink
/// included) is refused unless --force, which replaces the entry itself (never writes
/// through a link).
///
/// Exit 1 when the server refuses: 422 for a pipe run (it has no terminal) or a run
/// recorded before proctor kept output times (its bytes are there, their times are not, and
/// none are invented); 404 for an unknown run or generation; 409 before the run started.
/// Exit 2 for bad usage or an existing FILE without --force.
///
/// Example: proctor session export run-0003 --cast demo.cast && asciinema play demo.cast
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Where to write the cast.
    #[arg(long, value_name = "FILE", required = true)]
    pub cast: PathBuf,
    /// Write asciicast v3 (asciinema 3.0 and later) instead of v2.
    #[arg(long)]
    pub v3: bool,
    /// Export this process generation (1 for the first start, one more per resume) instead
    /// of the current one.
    #[arg(long, value_name = "N")]
    pub generation: Option<u64>,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Print {file, version, events, bytes} as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Exported {
    file: String,
    version: u8,
    /// Event lines after the header.
    events: u64,
    /// The file's size.
    bytes: u64,
}

/// Counts the lines written through it.
struct Lines<W: Write> {
    inner: W,
    newlines: u64,
}

impl<W: Write> Write for Lines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.newlines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn describe(m: &fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_file() {
        "a file"
    } else {
        "a special file"
    }
}

pub(super) fn run(c: &Client, a: ExportArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let dest = a.cast.clone();
    let name = dest
        .file_name()
        .ok_or_else(|| UsageError::new(format!("{} names no file", show_path(&dest))))?
        .to_owned();
    if let Ok(m) = fs::symlink_metadata(&dest) {
        if m.is_dir() {
            return Err(UsageError::new(format!(
                "{} is a folder: give the path of the file to write",
                show_path(&dest)
            )));
        }
        if !a.force {
            return Err(UsageError::new(format!(
                "{} exists ({}): refusing to replace it. Remedy: another path, or --force to \
                 replace it (the entry itself is replaced; a link is never written through)",
                show_path(&dest),
                describe(&m)
            )));
        }
    }
    let version = if a.v3 { 3 } else { 2 };
    let dir = files::parent_of(&dest);
    let tmp = files::temp_sibling(&dir, &name);
    let file = files::create_private_new(&tmp)
        .with_context(|| format!("cannot write beside {}", show_path(&dest)))?;
    let result = (|| -> anyhow::Result<(u64, u64)> {
        let mut w = Lines {
            inner: std::io::BufWriter::with_capacity(64 * 1024, file),
            newlines: 0,
        };
        let path = wire::cast(&run_ref, version, a.generation);
        let bytes = client::block_on(c.download(&path, &mut w, &tmp))??;
        w.flush()
            .with_context(|| format!("cannot write {}", show_path(&tmp)))?;
        let events = w.newlines.saturating_sub(1);
        let file = w.inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
            .with_context(|| format!("cannot fsync {}", show_path(&tmp)))?;
        drop(file);
        place(&tmp, &dest, a.force)?;
        files::fsync_dir(&dir)?;
        Ok((events, bytes))
    })();
    let (events, bytes) = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let out = Exported {
        file: dest.to_string_lossy().into_owned(),
        version,
        events,
        bytes,
    };
    if a.json {
        print_json(&out)?;
    } else {
        println!(
            "{run_ref}: asciicast v{version}, {events} events, {bytes} bytes written to {} \
             (play it with `asciinema play`)",
            show_path(&dest)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Moves the complete temp file into place: over `dest` with `force` (rename replaces the
/// entry, a link included, never its target), else only where nothing is (a hard link
/// fails on any existing entry, so a file made meanwhile is not replaced).
fn place(tmp: &Path, dest: &Path, force: bool) -> anyhow::Result<()> {
    if force {
        fs::rename(tmp, dest).with_context(|| format!("cannot write {}", show_path(dest)))?;
        return Ok(());
    }
    match fs::hard_link(tmp, dest) {
        Ok(()) => {
            let _ = fs::remove_file(tmp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(UsageError::new(format!(
            "{} appeared while the cast was written: refusing to replace it (--force replaces it)",
            show_path(dest)
        ))),
        Err(e) => Err(e).with_context(|| format!("cannot write {}", show_path(dest))),
    }
}
