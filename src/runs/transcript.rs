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
//!
//! Past the cap, a PTY run's output goes on into a **spill**: a private file with no name
//! (`O_TMPFILE` in the transcript's folder, 0600), kept only for the run's screen, which
//! takes from it the bytes its ring evicted before the screen parsed them
//! ([`super::pty::ScreenCell`]). What the screen has parsed is given back to the file
//! system as it goes (holes punched behind it), so the spill holds about what the screen is
//! behind, at most [`TranscriptSpec::spill_max`]; past that the spill stops and the screen is
//! kept up by the reader again (the emulator then holds the child, as it does for a run
//! without a transcript). The spill is not the transcript: nothing else reads it, and it
//! goes with the run.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use super::TermSize;
use super::ring::Stream;
use super::timing::TimingWriter;
use crate::files::{self, FilesError};

/// The default cap of a run's transcript: 64 MiB across its streams.
pub const DEFAULT_TRANSCRIPT_CAP: u64 = 64 * 1024 * 1024;
/// The default bound of a PTY run's spill past the cap: how far its screen may fall behind
/// the output (in bytes past the cap it has not parsed) before the reader keeps it up.
pub const DEFAULT_SPILL_MAX: u64 = 256 * 1024 * 1024;
/// The spill gives back what the screen parsed in steps of this many bytes (a hole punched
/// per step, not per chunk).
const SPILL_RELEASE_STEP: u64 = 4 * 1024 * 1024;

/// Where a run's transcript goes and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptSpec {
    /// A folder for this run (and generation) alone; created 0700 if absent. The transcript
    /// files must not exist yet.
    pub dir: PathBuf,
    /// The most bytes written across all the run's transcript files.
    pub cap_bytes: u64,
    /// A PTY run's spill past the cap: the most bytes it holds that its screen has not
    /// parsed (0: no spill).
    pub spill_max: u64,
}

impl TranscriptSpec {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        TranscriptSpec {
            dir: dir.into(),
            cap_bytes: DEFAULT_TRANSCRIPT_CAP,
            spill_max: DEFAULT_SPILL_MAX,
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
    /// A PTY run's output past the cap, for its screen (see the module's words).
    spill: Spill,
}

/// A PTY run's spill: the output past the cap, at its offset past the cap, with holes
/// punched before `released`.
enum Spill {
    /// Not needed (yet): the cap was not reached, or the run is not a PTY run.
    None,
    Open {
        file: std::sync::Arc<File>,
        /// Bytes written into it (the output's offset is the cap plus this).
        len: u64,
        /// Bytes given back from its start (the screen parsed them).
        released: u64,
        /// It takes no more (its bound reached, or a write failed): what it holds can still
        /// be read, and the bytes after it are in the ring only.
        full: bool,
    },
    /// Dropped: the run's final screen is parsed.
    Stopped,
}

/// A run's transcript writer.
pub struct Transcript {
    dir: PathBuf,
    cap: u64,
    spill_max: u64,
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
            spill_max: if pty { spec.spill_max } else { 0 },
            inner: Mutex::new(Inner {
                stdout,
                stderr,
                stdin,
                written: 0,
                capped: false,
                error: None,
                timing,
                spill: Spill::None,
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
        if inner.error.is_some() || bytes.is_empty() {
            return;
        }
        if inner.capped {
            if stream != Stream::Stdin {
                self.spill(inner, bytes);
            }
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
            if output {
                self.spill(inner, &bytes[take..]);
            }
        }
    }

    /// Writes a PTY run's output past the cap into its spill (opened at the first such
    /// byte), or stops the spill when it would hold more than its bound of bytes the screen
    /// has not parsed, or cannot be written.
    fn spill(&self, inner: &mut Inner, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        if self.spill_max == 0 || self.output.is_none() {
            return;
        }
        if matches!(inner.spill, Spill::None) {
            inner.spill = match files::create_private_unnamed(&self.dir) {
                Ok(f) => Spill::Open {
                    file: std::sync::Arc::new(f),
                    len: 0,
                    released: 0,
                    full: false,
                },
                Err(_) => Spill::Stopped,
            };
        }
        let Spill::Open {
            file,
            len,
            released,
            full: full @ false,
        } = &mut inner.spill
        else {
            return;
        };
        let n = bytes.len() as u64;
        if *len + n - *released > self.spill_max || file.write_all_at(bytes, *len).is_err() {
            *full = true;
            return;
        }
        *len += n;
    }

    /// The screen of a PTY run has parsed every output byte before `offset`: the spill gives
    /// back what lies before it (in whole steps, by punching a hole; a file system that
    /// cannot punch keeps it, and the spill's bound then counts it).
    pub(crate) fn release_before(&self, offset: u64) {
        let mut g = self.lock();
        let cap = g.written;
        let Spill::Open { file, released, .. } = &mut g.spill else {
            return;
        };
        let upto = offset.saturating_sub(cap);
        let upto = upto - upto % SPILL_RELEASE_STEP;
        if upto <= *released {
            return;
        }
        // SAFETY: fallocate(2) on a descriptor we own, with a range inside the file.
        let rc = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                *released as libc::off_t,
                (upto - *released) as libc::off_t,
            )
        };
        if rc == 0 {
            *released = upto;
        }
    }

    /// Drops the spill: the screen needs no more of it (the run's final screen is parsed).
    pub(crate) fn end_spill(&self) {
        let mut g = self.lock();
        if matches!(g.spill, Spill::Open { .. }) {
            g.spill = Spill::Stopped;
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

    /// Whether every output byte handed to [`Transcript::write`] so far can be read back
    /// ([`Transcript::read_output_at`]): no write failed, and the cap was not reached or a
    /// PTY run's spill holds what came past it.
    pub fn holds_everything(&self) -> bool {
        let g = self.lock();
        g.error.is_none() && (!g.capped || matches!(g.spill, Spill::Open { full: false, .. }))
    }

    /// Reads a PTY run's output back: exactly `buf.len()` bytes from byte `offset`, from
    /// the transcript and, past the cap, from the spill; they must lie within what was
    /// written (see [`Transcript::holds_everything`]) and not before what the spill gave
    /// back.
    pub(crate) fn read_output_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let file = self.output.as_ref().ok_or_else(|| {
            std::io::Error::other("only a PTY run's transcript is read back, and this is not one")
        })?;
        let (cap, spill) = {
            let g = self.lock();
            let spill = match &g.spill {
                Spill::Open {
                    file,
                    len,
                    released,
                    ..
                } => Some((file.clone(), *len, *released)),
                _ => None,
            };
            (g.written, spill)
        };
        let end = offset + buf.len() as u64;
        let head =
            usize::try_from(cap.saturating_sub(offset)).map_or(buf.len(), |n| n.min(buf.len()));
        if head > 0 {
            file.read_exact_at(&mut buf[..head], offset)?;
        }
        if head == buf.len() {
            return Ok(());
        }
        let Some((spill, len, released)) = spill else {
            return Err(std::io::Error::other(
                "the transcript was capped and keeps no spill past its cap",
            ));
        };
        let from = offset.max(cap) - cap;
        if from < released || end - cap > len {
            return Err(std::io::Error::other(
                "those bytes are no longer (or not yet) in the spill",
            ));
        }
        spill.read_exact_at(&mut buf[head..], from)
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
                spill_max: 0,
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

    /// Past the cap, a PTY run's output goes on into the spill: every byte reads back from
    /// the transcript then the spill (across the cap too), the transcript file itself stops
    /// at the cap, nothing new is named in the folder, what the screen parsed is given back,
    /// and past its bound the spill takes no more (what it holds still reads back).
    #[test]
    fn a_pty_transcript_spills_past_its_cap_for_the_screen_within_a_bound() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run-0001/gen-1");
        let step = SPILL_RELEASE_STEP as usize;
        let tr = Transcript::create(
            &TranscriptSpec {
                dir: dir.clone(),
                cap_bytes: 1000,
                spill_max: 3 * SPILL_RELEASE_STEP,
            },
            Some(TermSize { rows: 24, cols: 80 }),
        )
        .unwrap();
        let names = |d: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            v.sort();
            v
        };
        let before = names(&dir);
        let all: Vec<u8> = (0..1000 + 2 * step).map(|i| (i * 7 % 251) as u8).collect();
        for c in all.chunks(4096 + 3) {
            tr.write(Stream::Stdout, c);
        }
        assert!(tr.status().capped);
        assert!(
            tr.holds_everything(),
            "the spill holds what came past the cap"
        );
        assert_eq!(std::fs::read(dir.join("pty.raw")).unwrap(), &all[..1000]);
        assert_eq!(names(&dir), before, "the spill has no name");
        let mut buf = vec![0u8; 5000];
        tr.read_output_at(0, &mut buf[..1000]).unwrap();
        assert_eq!(&buf[..1000], &all[..1000]);
        tr.read_output_at(900, &mut buf).unwrap();
        assert_eq!(&buf[..], &all[900..5900], "across the cap");
        let last = all.len() - 5000;
        tr.read_output_at(last as u64, &mut buf).unwrap();
        assert_eq!(&buf[..], &all[last..]);
        assert!(
            tr.read_output_at(last as u64 + 1, &mut buf).is_err(),
            "not written yet"
        );
        // The screen parsed a step and a half past the cap: one step given back.
        tr.release_before(1000 + step as u64 + 10);
        assert!(tr.read_output_at(1000, &mut buf).is_err(), "given back");
        tr.read_output_at(1000 + step as u64, &mut buf).unwrap();
        assert_eq!(&buf[..], &all[1000 + step..1000 + step + 5000]);
        // The bound: 3 steps the screen has not parsed; it holds one: two more do not fit.
        let more: Vec<u8> = (0..2 * step + 100).map(|i| (i % 13) as u8).collect();
        tr.write(Stream::Stdout, &more);
        assert!(
            !tr.holds_everything(),
            "past its bound the spill takes no more"
        );
        tr.read_output_at(last as u64, &mut buf).unwrap();
        assert_eq!(&buf[..], &all[last..], "what it holds still reads back");
        tr.end_spill();
        assert!(tr.read_output_at(1000 + step as u64, &mut buf).is_err());
        // A pipe run's transcript never spills.
        let pipe = Transcript::create(
            &TranscriptSpec {
                dir: t.path().join("run-0002/gen-1"),
                cap_bytes: 10,
                spill_max: 1 << 20,
            },
            None,
        )
        .unwrap();
        pipe.write(Stream::Stdout, b"0123456789abc");
        assert!(!pipe.holds_everything());
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
