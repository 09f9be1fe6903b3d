//! The raw transcript of a run on disk: every output byte, as the child wrote it, appended to
//! a private file (0600, in a 0700 folder, created exclusively so nothing planted is written
//! through), up to a size cap shared by the run's streams.
//!
//! When the cap is reached the transcript writes the bytes that still fit, then stops and
//! sets `capped`; a write error stops it too and is kept in `error`. Neither stops the run:
//! the ring still has the output. Each chunk is handed to the kernel with `write(2)` as it
//! arrives (no user-space buffer); the files are fsync'd when the run ends.
//!
//! A PTY run's transcript also keeps `pty.timing` ([`super::timing`]): when each chunk came
//! and when the terminal was resized, for an export as an asciicast ([`super::cast`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use super::TermSize;
use super::ring::Stream;
use super::timing::TimingWriter;
use crate::files::{self, FilesError};

/// The default cap of a run's transcript: 64 MiB across its streams.
pub const DEFAULT_TRANSCRIPT_CAP: u64 = 64 * 1024 * 1024;

/// Where a run's transcript goes and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptSpec {
    /// A folder for this run (and generation) alone; created 0700 if absent. The transcript
    /// files must not exist yet.
    pub dir: PathBuf,
    /// The most bytes written across all the run's transcript files.
    pub cap_bytes: u64,
}

impl TranscriptSpec {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        TranscriptSpec {
            dir: dir.into(),
            cap_bytes: DEFAULT_TRANSCRIPT_CAP,
        }
    }
}

/// The file name of a stream's transcript: `pty.raw` for a PTY run's output (one stream),
/// else `stdout.raw` and `stderr.raw`; `stdin.raw` for what proctor wrote to a pipe run.
pub fn file_name(pty: bool, stream: Stream) -> &'static str {
    match (pty, stream) {
        (_, Stream::Stdin) => "stdin.raw",
        (true, _) => "pty.raw",
        (false, Stream::Stdout) => "stdout.raw",
        (false, Stream::Stderr) => "stderr.raw",
    }
}

/// The cap of a PTY run's timing file for a transcript cap of `cap`: a quarter of it (a
/// line is about 20 bytes, so 16 MiB for the default cap times some 800,000 chunks), and at
/// least 64 KiB.
pub fn timing_cap(cap: u64) -> u64 {
    (cap / 4).max(64 * 1024)
}

/// What the transcript has done so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TranscriptStatus {
    pub dir: PathBuf,
    /// The files, one per stream.
    pub files: Vec<PathBuf>,
    pub cap_bytes: u64,
    /// Bytes written across the files.
    pub bytes_written: u64,
    /// The cap was reached: output after `bytes_written` is not on disk.
    pub capped: bool,
    /// A write or fsync failed; writing stopped there.
    pub error: Option<String>,
}

struct Inner {
    stdout: Option<(File, PathBuf)>,
    stderr: Option<(File, PathBuf)>,
    /// A pipe run's input, as proctor wrote it.
    stdin: Option<(File, PathBuf)>,
    written: u64,
    capped: bool,
    error: Option<String>,
    /// A PTY run's `pty.timing`.
    timing: Option<TimingWriter>,
}

/// A run's transcript writer.
pub struct Transcript {
    dir: PathBuf,
    cap: u64,
    inner: Mutex<Inner>,
    /// A PTY run's output file opened read-only (at creation, so what is read is the file
    /// written): where its screen takes the bytes its ring no longer holds.
    output: Option<File>,
}

impl Transcript {
    /// Creates the folder (0700) and one new 0600 file per stream of the run (a pipe run's
    /// input included); a PTY run (`pty` gives its first size) gets its timing file too.
    /// Fails if a file already exists: a transcript is never appended to or written
    /// through a link.
    pub fn create(
        spec: &TranscriptSpec,
        pty_size: Option<TermSize>,
    ) -> Result<Transcript, FilesError> {
        let pty = pty_size.is_some();
        files::ensure_private_dir(&spec.dir)?;
        let open = |stream| -> Result<(File, PathBuf), FilesError> {
            let path = spec.dir.join(file_name(pty, stream));
            Ok((files::create_private_new(&path)?, path))
        };
        let stdout = Some(open(Stream::Stdout)?);
        let output = match (&stdout, pty) {
            (Some((_, path)), true) => Some(files::open_private_read(path)?),
            _ => None,
        };
        let (stderr, stdin) = if pty {
            (None, None)
        } else {
            (Some(open(Stream::Stderr)?), Some(open(Stream::Stdin)?))
        };
        let timing = match pty_size {
            Some(size) => Some(TimingWriter::create(
                &spec.dir,
                size,
                timing_cap(spec.cap_bytes),
            )?),
            None => None,
        };
        Ok(Transcript {
            dir: spec.dir.clone(),
            cap: spec.cap_bytes,
            inner: Mutex::new(Inner {
                stdout,
                stderr,
                stdin,
                written: 0,
                capped: false,
                error: None,
                timing,
            }),
            output,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends bytes of `stream` (output, or a pipe run's input), within the cap shared by
    /// the files.
    pub fn write(&self, stream: Stream, bytes: &[u8]) {
        let mut g = self.lock();
        let inner = &mut *g;
        if inner.capped || inner.error.is_some() || bytes.is_empty() {
            return;
        }
        let room = self.cap.saturating_sub(inner.written);
        let take = usize::try_from(room).map_or(bytes.len(), |r| r.min(bytes.len()));
        let target = match stream {
            Stream::Stdout => inner.stdout.as_mut(),
            Stream::Stderr => inner.stderr.as_mut().or(inner.stdout.as_mut()),
            // Never into a PTY run's output file.
            Stream::Stdin => inner.stdin.as_mut(),
        };
        let Some((file, path)) = target else {
            return;
        };
        if take > 0 {
            if let Err(e) = file.write_all(&bytes[..take]) {
                inner.error = Some(format!("cannot write {}: {e}", path.display()));
                return;
            }
            inner.written += take as u64;
        }
        let output = stream != Stream::Stdin;
        if let Some(t) = inner.timing.as_mut().filter(|_| output) {
            if take > 0 {
                t.output(inner.written);
            }
            if take < bytes.len() {
                t.transcript_capped(inner.written);
            }
        }
        if take < bytes.len() {
            inner.capped = true;
        }
    }

    /// Resizes a PTY run's terminal with `resize` under the transcript's lock and, when it
    /// succeeds, records in the timing that the terminal took `size` after the output
    /// written so far (output the child draws for the new size comes after that line).
    pub fn resize_with<E>(
        &self,
        size: TermSize,
        resize: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let mut g = self.lock();
        resize()?;
        let inner = &mut *g;
        if let Some(t) = inner.timing.as_mut() {
            t.resize(inner.written, size);
        }
        Ok(())
    }

    /// Hands a PTY run's buffered timing lines to the kernel, so that a reader of
    /// `pty.timing` sees every chunk written so far.
    pub fn flush_timing(&self) {
        if let Some(t) = self.lock().timing.as_mut() {
            t.flush();
        }
    }

    /// Whether every byte handed to [`Transcript::write`] so far is on disk: the cap was
    /// not reached and no write failed.
    pub fn holds_everything(&self) -> bool {
        let g = self.lock();
        !g.capped && g.error.is_none()
    }

    /// Reads a PTY run's output from its transcript: exactly `buf.len()` bytes from byte
    /// `offset`, which must lie within what was written (see [`Transcript::holds_everything`]).
    pub(crate) fn read_output_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let file = self.output.as_ref().ok_or_else(|| {
            std::io::Error::other("only a PTY run's transcript is read back, and this is not one")
        })?;
        file.read_exact_at(buf, offset)
    }

    /// fsyncs the files. Called once the run has ended.
    pub fn finish(&self) {
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some(t) = inner.timing.as_mut() {
            t.end(inner.written);
            t.sync();
            if let Some(e) = t.error()
                && inner.error.is_none()
            {
                inner.error = Some(e.to_string());
            }
        }
        for (file, path) in [
            inner.stdout.as_ref(),
            inner.stderr.as_ref(),
            inner.stdin.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if let Err(e) = file.sync_all()
                && inner.error.is_none()
            {
                inner.error = Some(format!("cannot fsync {}: {e}", path.display()));
            }
        }
    }

    /// What has been written so far.
    pub fn status(&self) -> TranscriptStatus {
        let g = self.lock();
        TranscriptStatus {
            dir: self.dir.clone(),
            files: [g.stdout.as_ref(), g.stderr.as_ref(), g.stdin.as_ref()]
                .into_iter()
                .flatten()
                .map(|(_, p)| p.clone())
                .collect(),
            cap_bytes: self.cap,
            bytes_written: g.written,
            capped: g.capped,
            error: g.error.clone(),
        }
    }

    /// The folder of this transcript.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn cap_is_exact_and_recorded() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run-0001/gen-1");
        let tr = Transcript::create(
            &TranscriptSpec {
                dir: dir.clone(),
                cap_bytes: 10,
            },
            None,
        )
        .unwrap();
        tr.write(Stream::Stdout, b"abcdef");
        tr.write(Stream::Stderr, b"ghi");
        assert!(!tr.status().capped);
        tr.write(Stream::Stdout, b"jklmn");
        tr.write(Stream::Stdout, b"more");
        tr.finish();
        let s = tr.status();
        assert!(s.capped);
        assert_eq!(s.bytes_written, 10);
        assert_eq!(std::fs::read(dir.join("stdout.raw")).unwrap(), b"abcdefj");
        assert_eq!(std::fs::read(dir.join("stderr.raw")).unwrap(), b"ghi");
        for f in &s.files {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn an_existing_file_is_never_reused() {
        let t = tempfile::tempdir().unwrap();
        let spec = TranscriptSpec::new(t.path().join("x"));
        let size = Some(TermSize { rows: 24, cols: 80 });
        let _first = Transcript::create(&spec, size).unwrap();
        assert!(Transcript::create(&spec, size).is_err());
    }
}
