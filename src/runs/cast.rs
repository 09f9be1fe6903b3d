//! A PTY run's output as an asciicast (v2, or v3): the bytes of `pty.raw` at the times and
//! with the resizes of `pty.timing` ([`super::timing`]). `docs/formats.md` ("asciicast
//! export") says what the file holds.
//!
//! Nothing of the run's is invented: an `o` event carries the bytes of one recorded chunk
//! (as UTF-8 text, which the format requires: a sequence cut between two chunks goes with
//! the next one, and a byte that is no UTF-8 is replaced by U+FFFD and counted in the
//! header), at the time it was recorded. What the cast lacks is said in the header (its
//! `proctor` object) and by a marker (`m`) event where it happens: the transcript's cap,
//! the timing file's cap, bytes of `pty.raw` that have no recorded time (a server killed
//! before its last timing lines reached the disk). The header names the run by proctor's
//! own words only (its ref, its tool's name from the closed list): a name a person or an
//! agent gave the run is not in it.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::timing::{self, Entry, Timing, TimingError};

/// The `format` of the header's `proctor` object.
pub const FORMAT: &str = "proctor-cast/1";
/// The most bytes of `pty.timing` an export reads.
pub const TIMING_MAX: u64 = 256 * 1024 * 1024;

/// The marker's words where the transcript's cap was reached.
pub const MARK_CAPPED: &str =
    "proctor: the transcript's cap was reached here: later output was not kept";
/// The marker's words where the timing file's cap was reached.
pub const MARK_TIMING_CAPPED: &str = "proctor: the timing file's cap was reached here: later \
     output has no recorded time and is left out";

/// Which asciicast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Version {
    V2,
    V3,
}

impl Version {
    pub fn number(self) -> u8 {
        match self {
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }
}

/// Why a run's output cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum CastError {
    #[error("no terminal transcript at {0}")]
    NoTranscript(PathBuf),
    #[error("no timing file at {0}")]
    NoTiming(PathBuf),
    #[error("{0}")]
    Timing(#[from] TimingError),
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: io::Error },
}

/// What the header says of the run, from proctor's own record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastMeta {
    /// `run-0001`.
    pub run_ref: String,
    pub generation: u64,
    /// The tool's name from the closed list (`claude`), or none.
    pub tool: Option<&'static str>,
    pub demo: bool,
    /// The exit code the OS reported (a v3 `x` event), if it did.
    pub exit_code: Option<i64>,
}

/// A run's transcript and timing, opened and checked: everything an export can refuse for
/// is found here, before a byte of the cast is written.
pub struct CastSource {
    raw: File,
    raw_path: PathBuf,
    raw_len: u64,
    timing: Timing,
    /// Bytes up to here have a recorded time.
    timed_end: u64,
    transcript_capped: bool,
    timing_capped: bool,
    invalid_utf8: u64,
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CastStats {
    /// Event lines after the header.
    pub events: u64,
    /// Output bytes of the run the `o` events carry.
    pub output_bytes: u64,
}

impl CastSource {
    /// Opens `pty.raw` and `pty.timing` in `dir` (refusing links) and reads the timing.
    pub fn open(dir: &Path) -> Result<CastSource, CastError> {
        let raw_path = dir.join(super::transcript::file_name(true, super::Stream::Stdout));
        let timing_path = dir.join(timing::FILE_NAME);
        if std::fs::symlink_metadata(&raw_path).is_err() {
            return Err(CastError::NoTranscript(raw_path));
        }
        if std::fs::symlink_metadata(&timing_path).is_err() {
            return Err(CastError::NoTiming(timing_path));
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |e: crate::files::FilesError| CastError::Io {
                path,
                err: io::Error::other(e.to_string()),
            }
        };
        let raw = crate::files::open_private_read(&raw_path).map_err(io(&raw_path))?;
        let raw_len = raw
            .metadata()
            .map_err(|err| CastError::Io {
                path: raw_path.clone(),
                err,
            })?
            .len();
        let timing = timing::read(&timing_path, TIMING_MAX)?;
        let mut timed_end = 0;
        let (mut transcript_capped, mut timing_capped) = (false, false);
        for e in &timing.entries {
            match *e {
                Entry::Output { end, .. } => timed_end = end.min(raw_len),
                Entry::Capped { .. } => transcript_capped = true,
                Entry::TimingCapped { .. } => timing_capped = true,
                _ => {}
            }
        }
        let mut src = CastSource {
            raw,
            raw_path,
            raw_len,
            timing,
            timed_end,
            transcript_capped,
            timing_capped,
            invalid_utf8: 0,
        };
        src.invalid_utf8 = src.count_invalid()?;
        Ok(src)
    }

    /// Bytes of `pty.raw` past the last recorded time (left out of the cast).
    pub fn untimed_bytes(&self) -> u64 {
        self.raw_len.saturating_sub(self.timed_end)
    }

    /// The bytes the cast can carry that are no UTF-8 (counted with the same cuts the
    /// export makes).
    fn count_invalid(&mut self) -> Result<u64, CastError> {
        let mut dec = Utf8::default();
        let mut scratch = String::new();
        let io = |err| CastError::Io {
            path: self.raw_path.clone(),
            err,
        };
        (&self.raw).seek(SeekFrom::Start(0)).map_err(io)?;
        let mut r = BufReader::with_capacity(64 * 1024, &self.raw);
        let mut buf = vec![0u8; 64 * 1024];
        let mut left = self.timed_end;
        while left > 0 {
            let n = (left as usize).min(buf.len());
            r.read_exact(&mut buf[..n]).map_err(io)?;
            scratch.clear();
            dec.decode(&buf[..n], &mut scratch);
            left -= n as u64;
        }
        dec.finish(&mut scratch);
        Ok(dec.invalid)
    }

    /// Writes the cast to `out`.
    pub fn write(
        &self,
        meta: &CastMeta,
        version: Version,
        out: &mut impl Write,
    ) -> io::Result<CastStats> {
        let untimed = self.untimed_bytes();
        let title = match meta.tool {
            Some(tool) => format!("{} {tool}", meta.run_ref),
            None => meta.run_ref.clone(),
        };
        let proctor = ProctorHeader {
            format: FORMAT,
            run: &meta.run_ref,
            generation: meta.generation,
            tool: meta.tool,
            demo: meta.demo,
            output_bytes: self.timed_end,
            transcript_capped: self.transcript_capped,
            timing_capped: self.timing_capped,
            untimed_bytes: untimed,
            invalid_utf8_bytes: self.invalid_utf8,
        };
        let size = self.timing.size;
        let timestamp = self.timing.start_unix_ms / 1000;
        match version {
            Version::V2 => serde_json::to_writer(
                &mut *out,
                &V2Header {
                    version: 2,
                    width: size.cols,
                    height: size.rows,
                    timestamp,
                    title: &title,
                    proctor,
                },
            )?,
            Version::V3 => serde_json::to_writer(
                &mut *out,
                &V3Header {
                    version: 3,
                    term: V3Term {
                        cols: size.cols,
                        rows: size.rows,
                    },
                    timestamp,
                    title: &title,
                    proctor,
                },
            )?,
        }
        out.write_all(b"\n")?;

        let mut ev = Events {
            out,
            version,
            prev: 0,
            stats: CastStats {
                events: 0,
                output_bytes: 0,
            },
        };
        (&self.raw).seek(SeekFrom::Start(0))?;
        let mut r = BufReader::with_capacity(64 * 1024, &self.raw);
        let mut pos = 0u64;
        let mut dec = Utf8::default();
        let mut buf = Vec::new();
        let mut text = String::new();
        let mut last_t = 0;
        for e in &self.timing.entries {
            last_t = e.time();
            match *e {
                Entry::Output { t, end } => {
                    let end = end.min(self.timed_end);
                    if end <= pos {
                        continue;
                    }
                    buf.resize((end - pos) as usize, 0);
                    r.read_exact(&mut buf)?;
                    text.clear();
                    dec.decode(&buf, &mut text);
                    ev.stats.output_bytes += end - pos;
                    pos = end;
                    if !text.is_empty() {
                        ev.event(t, "o", &text)?;
                    }
                }
                Entry::Resize { t, size, .. } => {
                    ev.event(t, "r", &format!("{}x{}", size.cols, size.rows))?;
                }
                Entry::Capped { t, .. } => ev.event(t, "m", MARK_CAPPED)?,
                Entry::TimingCapped { t, .. } => ev.event(t, "m", MARK_TIMING_CAPPED)?,
                Entry::End { t, .. } => {
                    text.clear();
                    dec.finish(&mut text);
                    if !text.is_empty() {
                        ev.event(t, "o", &text)?;
                    }
                    if version == Version::V3
                        && let Some(code) = meta.exit_code
                    {
                        ev.event(t, "x", &code.to_string())?;
                    }
                }
            }
        }
        text.clear();
        dec.finish(&mut text);
        if !text.is_empty() {
            ev.event(last_t, "o", &text)?;
        }
        if untimed > 0 && !self.timing_capped {
            ev.event(
                last_t,
                "m",
                &format!(
                    "proctor: {untimed} bytes of output after this point have no recorded \
                     time (the server stopped before writing it) and are left out"
                ),
            )?;
        }
        ev.out.flush()?;
        Ok(ev.stats)
    }
}

/// The header's fields, in the order they are written (`version` first).
#[derive(Serialize)]
struct V2Header<'a> {
    version: u8,
    width: u16,
    height: u16,
    timestamp: u64,
    title: &'a str,
    proctor: ProctorHeader<'a>,
}

#[derive(Serialize)]
struct V3Header<'a> {
    version: u8,
    term: V3Term,
    timestamp: u64,
    title: &'a str,
    proctor: ProctorHeader<'a>,
}

#[derive(Serialize)]
struct V3Term {
    cols: u16,
    rows: u16,
}

/// The header's `proctor` object: what the cast is of, and what it does not hold.
#[derive(Serialize)]
struct ProctorHeader<'a> {
    format: &'static str,
    run: &'a str,
    generation: u64,
    tool: Option<&'static str>,
    demo: bool,
    output_bytes: u64,
    transcript_capped: bool,
    timing_capped: bool,
    untimed_bytes: u64,
    invalid_utf8_bytes: u64,
}

struct Events<'a, W: Write> {
    out: &'a mut W,
    version: Version,
    /// The previous event's time (µs), for v3's intervals.
    prev: u64,
    stats: CastStats,
}

impl<W: Write> Events<'_, W> {
    fn event(&mut self, t: u64, code: &str, data: &str) -> io::Result<()> {
        let shown = match self.version {
            Version::V2 => t,
            Version::V3 => t.saturating_sub(self.prev),
        };
        self.prev = t;
        write!(
            self.out,
            "[{}.{:06}, \"{code}\", ",
            shown / 1_000_000,
            shown % 1_000_000
        )?;
        serde_json::to_writer(&mut *self.out, data)?;
        self.out.write_all(b"]\n")?;
        self.stats.events += 1;
        Ok(())
    }
}

/// An incremental UTF-8 decoder: a sequence cut at the end of a chunk waits for the next
/// one; a byte that cannot start or continue one becomes U+FFFD and is counted.
#[derive(Default)]
struct Utf8 {
    carry: Vec<u8>,
    invalid: u64,
}

impl Utf8 {
    fn decode(&mut self, bytes: &[u8], out: &mut String) {
        let joined;
        let mut rest: &[u8] = if self.carry.is_empty() {
            bytes
        } else {
            let mut j = std::mem::take(&mut self.carry);
            j.extend_from_slice(bytes);
            joined = j;
            &joined
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    return;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    // from_utf8 said the bytes before `good` are UTF-8.
                    out.push_str(std::str::from_utf8(&rest[..good]).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.invalid += n as u64;
                            rest = &rest[good + n..];
                        }
                        None => {
                            self.carry = rest[good..].to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end: a cut sequence that never completed.
    fn finish(&mut self, out: &mut String) {
        if !self.carry.is_empty() {
            self.invalid += self.carry.len() as u64;
            self.carry.clear();
            out.push('\u{FFFD}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> CastMeta {
        CastMeta {
            run_ref: "run-0007".into(),
            generation: 1,
            tool: Some("codex"),
            demo: false,
            exit_code: Some(3),
        }
    }

    fn private(path: &Path, bytes: &[u8]) {
        let mut f = crate::files::create_private_new(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    /// Bytes past the last recorded time (a server killed before its buffer reached the
    /// disk) and bytes that are no UTF-8: left out and counted, said by a marker; the
    /// timing's cap: a marker where it stopped.
    #[test]
    fn what_the_cast_lacks_is_said_in_its_header_and_by_markers() {
        let t = tempfile::tempdir().unwrap();
        private(&t.path().join("pty.raw"), b"ab\xffcdTAIL");
        private(
            &t.path().join(timing::FILE_NAME),
            b"proctor-pty-timing/1 start_unix_ms=1700000000000 cols=80 rows=24\n\
              o 1000 2\nr 1500 2 100 30\no 2500000 5\n",
        );
        let src = CastSource::open(t.path()).unwrap();
        let mut out = Vec::new();
        let stats = src.write(&meta(), Version::V2, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            text.starts_with("{\"version\":2,\"width\":80,\"height\":24,"),
            "{text}"
        );
        let h = &lines[0]["proctor"];
        assert_eq!(h["untimed_bytes"], 4);
        assert_eq!(h["invalid_utf8_bytes"], 1);
        assert_eq!(h["output_bytes"], 5);
        assert_eq!(lines[0]["title"], "run-0007 codex");
        assert_eq!(lines[0]["timestamp"], 1_700_000_000);
        assert_eq!(lines[1], serde_json::json!([0.001, "o", "ab"]));
        assert_eq!(lines[2], serde_json::json!([0.0015, "r", "100x30"]));
        assert_eq!(lines[3], serde_json::json!([2.5, "o", "\u{FFFD}cd"]));
        assert_eq!(lines[4][1], "m");
        assert!(
            lines[4][2]
                .as_str()
                .unwrap()
                .starts_with("proctor: 4 bytes")
        );
        assert_eq!(stats.events, 4);
        assert_eq!(stats.output_bytes, 5);
        assert!(text.contains("[2.500000, \"o\""), "six decimals: {text}");

        // v3: intervals; no `x` without the end line.
        let mut out = Vec::new();
        src.write(&meta(), Version::V3, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}"));
        assert!(text.contains("[0.000500, \"r\", \"100x30\"]"), "{text}");
        assert!(text.contains("[2.498500, \"o\""), "{text}");
        assert!(!text.contains("\"x\""), "{text}");
    }

    #[test]
    fn a_capped_timing_and_an_end_with_an_exit_code() {
        let t = tempfile::tempdir().unwrap();
        private(&t.path().join("pty.raw"), b"hello world");
        private(
            &t.path().join(timing::FILE_NAME),
            b"proctor-pty-timing/1 start_unix_ms=1 cols=10 rows=5\n\
              o 10 5\nt 20 5\n",
        );
        let src = CastSource::open(t.path()).unwrap();
        let mut out = Vec::new();
        src.write(&meta(), Version::V3, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(MARK_TIMING_CAPPED), "{text}");
        assert!(
            !text.contains("no recorded time (the server"),
            "one marker: {text}"
        );
        assert!(text.contains("\"timing_capped\":true"), "{text}");

        let t = tempfile::tempdir().unwrap();
        private(&t.path().join("pty.raw"), b"hi");
        private(
            &t.path().join(timing::FILE_NAME),
            b"proctor-pty-timing/1 start_unix_ms=1 cols=10 rows=5\no 10 2\ne 30 2\n",
        );
        let mut out = Vec::new();
        CastSource::open(t.path())
            .unwrap()
            .write(&meta(), Version::V3, &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("[0.000020, \"x\", \"3\"]\n"), "{text}");
    }

    #[test]
    fn no_timing_and_no_transcript_are_named() {
        let t = tempfile::tempdir().unwrap();
        assert!(matches!(
            CastSource::open(t.path()),
            Err(CastError::NoTranscript(_))
        ));
        private(&t.path().join("pty.raw"), b"x");
        assert!(matches!(
            CastSource::open(t.path()),
            Err(CastError::NoTiming(_))
        ));
        // A link in place of the timing file is not read through.
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(timing::FILE_NAME)).unwrap();
        assert!(CastSource::open(t.path()).is_err());
    }

    #[test]
    fn utf8_cut_between_chunks_is_kept_whole_and_garbage_is_counted() {
        let mut d = Utf8::default();
        let mut s = String::new();
        let e = "é".as_bytes();
        d.decode(&[b'a', e[0]], &mut s);
        assert_eq!(s, "a");
        d.decode(&[e[1], b'b', 0xff, b'c'], &mut s);
        assert_eq!(s, "aéb\u{FFFD}c");
        assert_eq!(d.invalid, 1);
        d.decode(&[0xe2, 0x82], &mut s);
        d.finish(&mut s);
        assert_eq!(d.invalid, 3);
    }
}
