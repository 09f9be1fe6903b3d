//! The timing of a PTY run's output: `pty.timing`, beside `pty.raw` in the run's 0700
//! folder (0600, created exclusively like the transcript). It says when each chunk of the
//! output arrived and when the terminal was resized, as offsets into `pty.raw` and
//! microseconds on a monotonic clock since the transcript was created. `docs/formats.md`
//! ("pty.timing") describes the lines; [`read`] parses them back for an export
//! ([`super::cast`]).
//!
//! The writer ([`TimingWriter`]) lives inside the transcript, under its lock: each chunk adds
//! one short line to a buffer in memory, which goes to the kernel in one `write(2)` once it
//! holds [`FLUSH_AT`] bytes, when asked ([`super::Transcript::flush_timing`]), and when the
//! run ends. So the output's path makes no extra system call per chunk; a server killed
//! without warning loses at most the buffer's last lines (the export then says how many
//! bytes of `pty.raw` have no time, and leaves them out).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::TermSize;

/// The first word of the file's first line.
pub const FORMAT: &str = "proctor-pty-timing/1";
/// The file's name in a run's transcript folder.
pub const FILE_NAME: &str = "pty.timing";
/// The buffer is handed to the kernel once it holds this many bytes.
pub const FLUSH_AT: usize = 8 * 1024;
/// Room kept below the cap for the line that says the timing stopped there.
const RESERVE: u64 = 64;

/// What went wrong reading a timing file.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path} line {line}: {what}")]
    Malformed {
        path: PathBuf,
        line: usize,
        what: String,
    },
}

/// One line of the timing file after its format line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `o T END`: output arrived at `t` (µs), ending at byte `end` of `pty.raw`.
    Output { t: u64, end: u64 },
    /// `r T OFFSET COLS ROWS`: the terminal took this size at `t`, after byte `at`.
    Resize { t: u64, at: u64, size: TermSize },
    /// `c T OFFSET`: the transcript's cap was reached at byte `at`: later output is not on
    /// disk.
    Capped { t: u64, at: u64 },
    /// `t T OFFSET`: the timing file's own cap was reached: output after byte `at` has no
    /// recorded time.
    TimingCapped { t: u64, at: u64 },
    /// `e T OFFSET`: the run's output ended at `t`, `at` bytes in all.
    End { t: u64, at: u64 },
}

impl Entry {
    /// The entry's time (µs since the start).
    pub fn time(&self) -> u64 {
        match *self {
            Entry::Output { t, .. }
            | Entry::Resize { t, .. }
            | Entry::Capped { t, .. }
            | Entry::TimingCapped { t, .. }
            | Entry::End { t, .. } => t,
        }
    }
}

/// A timing file as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// The wall clock when the transcript was created (ms since the Unix epoch), as the
    /// server's clock said.
    pub start_unix_ms: u64,
    /// The terminal's size at the start.
    pub size: TermSize,
    pub entries: Vec<Entry>,
}

/// Reads and checks a timing file (at most `max` bytes are read; a longer file is refused).
/// Offsets must not go back and times must not decrease.
pub fn read(path: &Path, max: u64) -> Result<Timing, TimingError> {
    use std::io::Read;
    let io = |err| TimingError::Io {
        path: path.to_path_buf(),
        err,
    };
    let f = crate::files::open_private_read(path)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let mut text = String::new();
    f.take(max.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > max {
        return Err(TimingError::Malformed {
            path: path.to_path_buf(),
            line: 0,
            what: format!("longer than {max} bytes"),
        });
    }
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Timing, TimingError> {
    let bad = |line: usize, what: &str| TimingError::Malformed {
        path: path.to_path_buf(),
        line,
        what: what.to_string(),
    };
    let mut lines = text.split_inclusive('\n').enumerate();
    let (_, first) = lines.next().ok_or_else(|| bad(1, "empty file"))?;
    let first = first.strip_suffix('\n').ok_or_else(|| bad(1, "torn"))?;
    let mut words = first.split(' ');
    if words.next() != Some(FORMAT) {
        return Err(bad(1, &format!("not a {FORMAT} file")));
    }
    let (mut start, mut cols, mut rows) = (None, None, None);
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| bad(1, "a word is not key=value"))?;
        let n: u64 = v.parse().map_err(|_| bad(1, "a value is not a number"))?;
        match k {
            "start_unix_ms" => start = Some(n),
            "cols" => cols = u16::try_from(n).ok(),
            "rows" => rows = u16::try_from(n).ok(),
            _ => {} // a later writer's addition
        }
    }
    let size = match (cols, rows) {
        (Some(cols), Some(rows)) if cols > 0 && rows > 0 => TermSize { rows, cols },
        _ => return Err(bad(1, "no size (cols= rows=)")),
    };
    let mut entries = Vec::new();
    let (mut last_t, mut last_at) = (0u64, 0u64);
    for (i, line) in lines {
        let n = i + 1;
        // A line without its newline is the torn end of a write cut short: not a record.
        let Some(line) = line.strip_suffix('\n') else {
            break;
        };
        let mut w = line.split(' ');
        let kind = w.next().unwrap_or("");
        let nums: Vec<u64> = w
            .map(|x| x.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad(n, "a field is not a number"))?;
        let want = |k: usize| {
            if nums.len() == k {
                Ok(())
            } else {
                Err(bad(n, &format!("`{kind}` takes {k} numbers")))
            }
        };
        let e = match kind {
            "o" => {
                want(2)?;
                Entry::Output {
                    t: nums[0],
                    end: nums[1],
                }
            }
            "r" => {
                want(4)?;
                let c = u16::try_from(nums[2]).ok().filter(|c| *c > 0);
                let r = u16::try_from(nums[3]).ok().filter(|r| *r > 0);
                let (Some(cols), Some(rows)) = (c, r) else {
                    return Err(bad(n, "a size out of range"));
                };
                Entry::Resize {
                    t: nums[0],
                    at: nums[1],
                    size: TermSize { rows, cols },
                }
            }
            "c" | "t" | "e" => {
                want(2)?;
                let (t, at) = (nums[0], nums[1]);
                match kind {
                    "c" => Entry::Capped { t, at },
                    "t" => Entry::TimingCapped { t, at },
                    _ => Entry::End { t, at },
                }
            }
            _ => return Err(bad(n, "unknown line kind")),
        };
        let at = match e {
            Entry::Output { end, .. } => end,
            Entry::Resize { at, .. }
            | Entry::Capped { at, .. }
            | Entry::TimingCapped { at, .. }
            | Entry::End { at, .. } => at,
        };
        if e.time() < last_t || at < last_at {
            return Err(bad(n, "time or offset goes back"));
        }
        last_t = e.time();
        last_at = at;
        entries.push(e);
    }
    Ok(Timing {
        start_unix_ms: start.unwrap_or(0),
        size,
        entries,
    })
}

/// The writing side, held by the transcript under its lock.
pub(crate) struct TimingWriter {
    file: File,
    path: PathBuf,
    start: Instant,
    buf: Vec<u8>,
    /// Bytes in the file and the buffer.
    len: u64,
    cap: u64,
    /// The last output offset that has a time.
    timed_end: u64,
    /// The cap was reached (its `t` line is written): nothing more is recorded.
    capped: bool,
    error: Option<String>,
}

impl TimingWriter {
    /// Creates the file (exclusively, 0600) and writes its format line.
    pub(crate) fn create(
        dir: &Path,
        size: TermSize,
        cap: u64,
    ) -> Result<TimingWriter, crate::files::FilesError> {
        let path = dir.join(FILE_NAME);
        let mut file = crate::files::create_private_new(&path)?;
        let start = Instant::now();
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let head = format!(
            "{FORMAT} start_unix_ms={unix_ms} cols={} rows={}\n",
            size.cols, size.rows
        );
        file.write_all(head.as_bytes())
            .map_err(|e| crate::files::FilesError::io("write", &path, e))?;
        Ok(TimingWriter {
            file,
            path,
            start,
            // Grown as lines come: an idle run holds no buffer of FLUSH_AT bytes.
            buf: Vec::new(),
            len: head.len() as u64,
            cap: cap.max(head.len() as u64 + RESERVE),
            timed_end: 0,
            capped: false,
            error: None,
        })
    }

    /// Adds a line: `kind`, the time now, then `nums`; within the cap (past it, the `t`
    /// line that says where the timing stopped, once).
    fn line(&mut self, kind: u8, nums: &[u64]) {
        if self.capped || self.error.is_some() {
            return;
        }
        let t = self.start.elapsed().as_micros() as u64;
        let mark = self.buf.len();
        push_line(&mut self.buf, kind, t, nums);
        let added = (self.buf.len() - mark) as u64;
        if self.len + added + RESERVE > self.cap {
            self.buf.truncate(mark);
            let before = self.buf.len();
            push_line(&mut self.buf, b't', t, &[self.timed_end]);
            self.len += (self.buf.len() - before) as u64;
            self.capped = true;
            self.flush();
            return;
        }
        self.len += added;
        if kind == b'o' {
            self.timed_end = nums[0];
        }
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Output up to byte `end` of `pty.raw` arrived now.
    pub(crate) fn output(&mut self, end: u64) {
        self.line(b'o', &[end]);
    }

    /// The terminal took `size` now, after byte `at`.
    pub(crate) fn resize(&mut self, at: u64, size: TermSize) {
        self.line(b'r', &[at, u64::from(size.cols), u64::from(size.rows)]);
    }

    /// The transcript's cap was reached at byte `at`.
    pub(crate) fn transcript_capped(&mut self, at: u64) {
        self.line(b'c', &[at]);
    }

    /// The output ended, `at` bytes in all; the buffer goes to the kernel.
    pub(crate) fn end(&mut self, at: u64) {
        self.line(b'e', &[at]);
        self.flush();
    }

    /// Hands the buffer to the kernel (one `write(2)`).
    pub(crate) fn flush(&mut self) {
        if self.buf.is_empty() || self.error.is_some() {
            return;
        }
        if let Err(e) = self.file.write_all(&self.buf) {
            self.error = Some(format!("cannot write {}: {e}", self.path.display()));
        }
        self.buf.clear();
        // What a burst grew is given back: a run that went quiet holds a few lines' room.
        self.buf.shrink_to(256);
    }

    /// fsyncs the file (after [`TimingWriter::end`]).
    pub(crate) fn sync(&mut self) {
        if let Err(e) = self.file.sync_all()
            && self.error.is_none()
        {
            self.error = Some(format!("cannot fsync {}: {e}", self.path.display()));
        }
    }

    /// A write or fsync failed: the timing stopped there.
    pub(crate) fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

fn push_line(buf: &mut Vec<u8>, kind: u8, t: u64, nums: &[u64]) {
    buf.push(kind);
    push_num(buf, t);
    for n in nums {
        push_num(buf, *n);
    }
    buf.push(b'\n');
}

fn push_num(buf: &mut Vec<u8>, mut n: u64) {
    buf.push(b' ');
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_lines_read_back() {
        let t = tempfile::tempdir().unwrap();
        let size = TermSize { rows: 24, cols: 80 };
        let mut w = TimingWriter::create(t.path(), size, 1 << 20).unwrap();
        w.output(5);
        w.resize(
            5,
            TermSize {
                rows: 30,
                cols: 100,
            },
        );
        w.output(9);
        w.end(9);
        w.sync();
        let got = read(&t.path().join(FILE_NAME), 1 << 20).unwrap();
        assert_eq!(got.size, size);
        assert!(got.start_unix_ms > 1_700_000_000_000);
        let kinds: Vec<_> = got
            .entries
            .iter()
            .map(|e| match e {
                Entry::Output { end, .. } => format!("o{end}"),
                Entry::Resize { at, size, .. } => format!("r{at}:{}x{}", size.cols, size.rows),
                Entry::End { at, .. } => format!("e{at}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds, ["o5", "r5:100x30", "o9", "e9"]);
    }

    #[test]
    fn the_cap_ends_with_where_the_timing_stopped() {
        let t = tempfile::tempdir().unwrap();
        let size = TermSize { rows: 24, cols: 80 };
        let mut w = TimingWriter::create(t.path(), size, 200).unwrap();
        for i in 1..=100 {
            w.output(i * 10);
        }
        w.end(1000);
        let path = t.path().join(FILE_NAME);
        assert!(std::fs::metadata(&path).unwrap().len() <= 200);
        let got = read(&path, 1 << 20).unwrap();
        let last = *got.entries.last().unwrap();
        let Entry::TimingCapped { at, .. } = last else {
            panic!("{last:?}")
        };
        let timed = got
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::Output { .. }))
            .count() as u64;
        assert_eq!(at, timed * 10);
        assert!(timed > 0 && timed < 100);
    }

    #[test]
    fn a_torn_last_line_is_not_a_record_and_garbage_is_refused() {
        let p = Path::new("x");
        let ok = parse(
            p,
            "proctor-pty-timing/1 start_unix_ms=1 cols=80 rows=24\no 1 5\no 2 ",
        );
        assert_eq!(ok.unwrap().entries.len(), 1);
        assert!(parse(p, "asciicast\n").is_err());
        assert!(parse(p, "proctor-pty-timing/1 cols=80 rows=24\no 5 9\no 4 10\n").is_err());
        assert!(parse(p, "proctor-pty-timing/1 cols=80 rows=24\no 5 9\no 6 8\n").is_err());
        assert!(parse(p, "proctor-pty-timing/1 cols=80 rows=24\nr 1 0 0 24\n").is_err());
        assert!(parse(p, "proctor-pty-timing/1 rows=24\n").is_err());
    }
}
