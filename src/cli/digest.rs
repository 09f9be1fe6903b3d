//! `proctor digest`: the inventory digest of a folder tree (`inventory-digest/1`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::{UsageError, print_json, show_path};
use crate::digest::{self, DigestError, Progress, ProgressSnapshot};

/// Print one number that names the exact bytes of a folder tree, with its recipe.
///
/// Every regular file under --root is hashed (SHA-256, raw bytes: a CRLF tree and an LF
/// tree differ), skipping `.git` and `node_modules` at any depth, whether folders or files.
/// The document `relative/path|byte-count|file-sha256`, one line per file, sorted by path
/// in ordinal UTF-16 order and joined with LF (no final LF), is hashed again with SHA-256.
/// That is the recipe `ordinal-path-bytes-sha256/1`; the digest is never printed without it.
///
/// Output (key=value lines on stdout):
///   format=inventory-digest/1
///   root=<the root as given, made absolute>
///   count=<number of files>
///   bytes=<sum of their sizes>
///   digest=ordinal-path-bytes-sha256/1 <64 hex digits>
///   manifest=<path>            (only with --manifest)
///
/// A symbolic link, device, FIFO or socket inside the tree, a name that is not UTF-8 or
/// that holds a line feed, stops the command with the entry named: skipping it would name
/// a tree that is not the one on disk. A symbolic link given as --root itself is followed.
/// A file that changes while it is hashed fails the command, naming the file.
///
/// Files are hashed in parallel on all cores. On a terminal, a run longer than a second
/// shows its progress on stderr (never on stdout).
///
/// Exit codes: 0 digest printed; 1 the tree holds an entry the recipe cannot represent,
/// changed during the run, or could not be read; 2 bad usage (missing root, manifest
/// inside the root, manifest folder missing).
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DigestArgs {
    /// The folder to measure.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,

    /// Also write the hashed document (exactly the bytes whose SHA-256 is the digest) to
    /// this file, atomically, mode 0600. Refused when the file would land inside --root,
    /// judged by device and inode, so `..`, a symbolic link or a bind mount cannot get
    /// around the rule. Its folder must exist.
    #[arg(long, value_name = "PATH")]
    pub manifest: Option<PathBuf>,

    /// Print a JSON object {format, root, count, bytes, recipe, digest, manifest?}
    /// instead of key=value lines; `digest` carries the recipe too.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    format: &'static str,
    root: String,
    count: u64,
    bytes: u64,
    recipe: &'static str,
    digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<String>,
}

fn fail(e: DigestError) -> anyhow::Error {
    if e.is_usage() {
        UsageError::new(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

pub fn run(args: DigestArgs) -> anyhow::Result<ExitCode> {
    let root = std::path::absolute(&args.root)
        .with_context(|| format!("cannot make {} absolute", show_path(&args.root)))?;
    digest::root_id(&root).map_err(fail)?;
    let target = match &args.manifest {
        Some(m) => Some(digest::resolve_manifest(&root, m).map_err(fail)?),
        None => None,
    };
    let listing = digest::list(&root).map_err(fail)?;
    if let Some(t) = &target {
        digest::check_manifest_outside(&listing, t).map_err(fail)?;
    }
    let progress = Progress::default();
    let inventory = if std::io::stderr().is_terminal() {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let progress = &progress;
            s.spawn(move || drive_progress(progress, &wait, std::io::stderr()));
            let r = digest::hash(&listing, Some(progress));
            drop(done);
            r
        })
    } else {
        digest::hash(&listing, Some(&progress))
    }
    .map_err(fail)?;
    if let Some(t) = &target {
        t.write(&inventory).map_err(fail)?;
    }
    let report = Report {
        format: digest::FORMAT,
        root: root.to_string_lossy().into_owned(),
        count: inventory.count(),
        bytes: inventory.bytes(),
        recipe: digest::RECIPE,
        digest: inventory.digest_with_recipe(),
        manifest: target
            .as_ref()
            .map(|t| t.path.to_string_lossy().into_owned()),
    };
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "format={}", report.format)?;
    writeln!(out, "root={}", show_path(&root))?;
    writeln!(out, "count={}", report.count)?;
    writeln!(out, "bytes={}", report.bytes)?;
    writeln!(out, "digest={}", report.digest)?;
    if let Some(t) = &target {
        writeln!(out, "manifest={}", show_path(&t.path))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Quiet for the first second (short runs show nothing), then one line refreshed four
/// times a second until `done` is dropped, then cleared.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

fn drive_progress(progress: &Progress, done: &mpsc::Receiver<()>, out: impl Write) {
    if done.recv_timeout(PROGRESS_AFTER) != Err(mpsc::RecvTimeoutError::Timeout) {
        return;
    }
    let mut line = ProgressLine::new(out);
    loop {
        line.render(progress.snapshot());
        if done.recv_timeout(PROGRESS_EVERY) != Err(mpsc::RecvTimeoutError::Timeout) {
            break;
        }
    }
    line.clear();
}

/// One self-overwriting status line on a terminal.
struct ProgressLine<W: Write> {
    out: W,
    shown: bool,
}

impl<W: Write> ProgressLine<W> {
    fn new(out: W) -> Self {
        ProgressLine { out, shown: false }
    }

    fn render(&mut self, s: ProgressSnapshot) {
        let text = format!(
            "\r\x1b[2Kproctor digest: hashed {}/{} files, {} of {}",
            s.files_done,
            s.files_total,
            human_bytes(s.bytes_done),
            human_bytes(s.bytes_total)
        );
        // A progress line that cannot be written is not worth failing the digest for.
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            let _ = self.out.write_all(b"\r\x1b[2K");
            let _ = self.out.flush();
            self.shown = false;
        }
    }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_overwrites_itself_and_clears() {
        let mut buf = Vec::new();
        let mut line = ProgressLine::new(&mut buf);
        line.clear(); // nothing shown yet: nothing written
        line.render(ProgressSnapshot {
            files_total: 20_000,
            bytes_total: 3 << 30,
            files_done: 1234,
            bytes_done: 512 << 20,
        });
        line.clear();
        line.clear();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "\r\x1b[2Kproctor digest: hashed 1234/20000 files, 512.0 MiB of 3.0 GiB\r\x1b[2K"
        );
    }

    #[test]
    fn a_short_run_shows_no_progress() {
        let (done, wait) = mpsc::channel::<()>();
        drop(done);
        let mut buf = Vec::new();
        drive_progress(&Progress::default(), &wait, &mut buf);
        assert!(buf.is_empty());
    }

    #[test]
    fn byte_counts_read_as_humans_expect() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
    }
}
