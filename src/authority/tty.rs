//! The controlling-terminal prompt: the only source of a revision or a passphrase.
//!
//! There is deliberately no other source. No option, environment variable, file, pipe or
//! askpass helper can supply what this module reads: it opens `/dev/tty` itself and nothing
//! else. A process driven through pipes, or detached from any terminal (`setsid`), gets
//! [`TtyError::NoControllingTerminal`]; a process in the background of its terminal gets
//! [`TtyError::NotForeground`].
//!
//! Rules, each enforced here:
//! - `/dev/tty` is opened `O_NOCTTY` (ENXIO means no controlling terminal); it must be a tty,
//!   and this process group must be the terminal's foreground group (`tcgetpgrp == getpgrp`).
//! - Pending input is discarded (`tcflush(TCIFLUSH)`) before each prompt, so bytes typed or
//!   injected ahead of the question never answer it.
//! - Input is read in non-canonical mode with `ISIG` off: Ctrl-C arrives as the byte 0x03
//!   and aborts ([`TtyError::Aborted`]), as does Ctrl-D on an empty line. Secrets are read
//!   with `ECHO` off and nothing is echoed in their place (their length is not shown).
//! - Backspace (DEL or BS) erases one character, Ctrl-U the whole line. Escape sequences
//!   (arrow keys, function keys, bracketed-paste markers, Alt-combinations) and other control
//!   bytes are ignored; they never become part of an answer.
//! - The terminal's modes are restored on every path (a guard restores them on drop, so on
//!   errors and panics too).
//! - Answers live in [`zeroize::Zeroizing`] buffers, wiped when dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use zeroize::Zeroizing;

/// The device every answer comes from.
pub const TTY_PATH: &str = "/dev/tty";

/// The longest answer accepted, in bytes; further input is ignored (with a bell).
pub const MAX_ANSWER_BYTES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum TtyError {
    #[error(
        "no controlling terminal (/dev/tty: ENXIO): this step reads only from the terminal a \
         person is typing at; no option, environment variable, file or pipe can stand in for \
         it. Remedy: run the command yourself in an interactive terminal"
    )]
    NoControllingTerminal,
    #[error(
        "/dev/tty is not a terminal; this step reads only from an interactive terminal. \
         Remedy: run the command yourself in an interactive terminal"
    )]
    NotATty,
    #[error(
        "this process is not in the terminal's foreground (its process group is {ours}, the \
         foreground group is {foreground}); a background job cannot answer this prompt. \
         Remedy: run the command in the foreground (`fg`)"
    )]
    NotForeground { ours: i32, foreground: i32 },
    #[error(
        "the keys this program reads do not come from its controlling terminal (its input is \
         another device, a file or a pipe); only the terminal a person is typing at can answer. \
         Remedy: run it yourself in an interactive terminal, without redirecting its input"
    )]
    InputNotControlling,
    #[error("aborted at the prompt (Ctrl-C or Ctrl-D); nothing was done")]
    Aborted,
    #[error("the terminal hung up while reading the answer")]
    Hangup,
    #[error("the answer is not valid UTF-8")]
    InvalidUtf8,
    #[error("terminal {op}: {err}")]
    Io { op: &'static str, err: io::Error },
}

fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> TtyError {
    move |err| TtyError::Io { op, err }
}

/// An open controlling terminal, checked to be a tty and in the foreground.
pub struct Tty {
    file: File,
}

impl std::fmt::Debug for Tty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tty")
            .field("fd", &self.file.as_raw_fd())
            .finish()
    }
}

impl Tty {
    /// Opens `/dev/tty`, checks it is a terminal whose foreground group is ours, and discards
    /// any pending input.
    pub fn open() -> Result<Tty, TtyError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(TTY_PATH)
            .map_err(|e| match e.raw_os_error() {
                // ENXIO: the process has no controlling terminal. Some systems answer ENODEV
                // or ENOTTY for the same situation.
                Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENOTTY) => {
                    TtyError::NoControllingTerminal
                }
                _ => TtyError::Io {
                    op: "open /dev/tty",
                    err: e,
                },
            })?;
        let tty = Tty { file };
        tty.check()?;
        tty.flush_input()?;
        Ok(tty)
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// isatty, then the foreground-group check.
    fn check(&self) -> Result<(), TtyError> {
        // SAFETY: isatty only inspects the descriptor, which we own.
        if unsafe { libc::isatty(self.fd()) } != 1 {
            return Err(TtyError::NotATty);
        }
        // SAFETY: tcgetpgrp/getpgrp only read process and terminal state.
        let foreground = unsafe { libc::tcgetpgrp(self.fd()) };
        if foreground < 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::ENOTTY) => TtyError::NoControllingTerminal,
                _ => TtyError::Io {
                    op: "tcgetpgrp",
                    err,
                },
            });
        }
        let ours = unsafe { libc::getpgrp() };
        if foreground != ours {
            return Err(TtyError::NotForeground { ours, foreground });
        }
        Ok(())
    }

    /// Discards whatever was typed (or injected) and not yet read.
    fn flush_input(&self) -> Result<(), TtyError> {
        // SAFETY: tcflush on a descriptor we own.
        if unsafe { libc::tcflush(self.fd(), libc::TCIFLUSH) } != 0 {
            return Err(io_err("tcflush")(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Writes text to the terminal as is. The caller sanitises anything untrusted in it
    /// (through [`crate::text`]).
    pub fn write(&mut self, s: &str) -> Result<(), TtyError> {
        self.file
            .write_all(s.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(io_err("write"))
    }

    /// Prompts and reads one line, echoing what is typed (for the revision).
    pub fn read_line(&mut self, prompt: &str) -> Result<Zeroizing<String>, TtyError> {
        self.prompt(prompt, true)
    }

    /// Prompts and reads one line with nothing echoed (for a passphrase).
    pub fn read_secret(&mut self, prompt: &str) -> Result<Zeroizing<String>, TtyError> {
        self.prompt(prompt, false)
    }

    fn prompt(&mut self, prompt: &str, echo: bool) -> Result<Zeroizing<String>, TtyError> {
        // The foreground may have changed since open (a job moved to the background).
        self.check()?;
        let guard = RawMode::enter(self.fd())?;
        self.flush_input()?;
        self.write(prompt)?;
        let result = self.read_answer(echo);
        // Leave the cursor on a fresh line whatever happened.
        let newline = self.write("\r\n");
        drop(guard);
        let answer = result?;
        newline?;
        Ok(answer)
    }

    fn read_answer(&mut self, echo: bool) -> Result<Zeroizing<String>, TtyError> {
        let mut editor = LineEditor::new();
        loop {
            let byte = self.read_byte(None)?.ok_or(TtyError::Hangup)?;
            let step = if byte == ESC {
                // A lone Escape key press is followed by nothing; a sequence follows at once.
                match self.read_byte(Some(ESC_FOLLOW_MS))? {
                    None => Step::Ignored,
                    Some(next) => {
                        self.skip_escape(next)?;
                        Step::Ignored
                    }
                }
            } else {
                editor.feed(byte)
            };
            match step {
                Step::Done => return editor.finish(),
                Step::Abort => return Err(TtyError::Aborted),
                Step::Ignored => {}
                Step::Full => self.write("\x07")?,
                Step::Pushed(c) if echo => {
                    if let Some(c) = c {
                        let shown = crate::text::one_line(c.encode_utf8(&mut [0u8; 4]), 4);
                        self.write(&shown)?;
                    }
                }
                Step::Erased(width) if echo => {
                    for _ in 0..width {
                        self.write("\x08 \x08")?;
                    }
                }
                Step::Cleared(width) if echo => {
                    for _ in 0..width {
                        self.write("\x08 \x08")?;
                    }
                }
                Step::Pushed(_) | Step::Erased(_) | Step::Cleared(_) => {}
            }
        }
    }

    /// Consumes the rest of an escape sequence whose byte after ESC is `first`.
    fn skip_escape(&mut self, first: u8) -> Result<(), TtyError> {
        match first {
            // CSI: parameters and intermediates up to a final byte 0x40..=0x7E (this covers
            // arrows, function keys and the bracketed-paste markers ESC[200~ / ESC[201~).
            b'[' => {
                for _ in 0..64 {
                    match self.read_byte(Some(ESC_FOLLOW_MS))? {
                        Some(b) if (0x40..=0x7e).contains(&b) => return Ok(()),
                        Some(_) => {}
                        None => return Ok(()),
                    }
                }
                Ok(())
            }
            // SS3 (application-mode arrows, F1-F4): one more byte.
            b'O' => {
                let _ = self.read_byte(Some(ESC_FOLLOW_MS))?;
                Ok(())
            }
            // Alt+key or anything else: the pair is dropped.
            _ => Ok(()),
        }
    }

    /// Reads one byte; with a timeout, `None` when nothing arrives in time. `None` without a
    /// timeout means end of file (the terminal hung up).
    fn read_byte(&mut self, timeout_ms: Option<i32>) -> Result<Option<u8>, TtyError> {
        if let Some(ms) = timeout_ms {
            let mut pfd = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            loop {
                // SAFETY: one valid pollfd.
                let n = unsafe { libc::poll(&mut pfd, 1, ms) };
                if n < 0 {
                    let err = io::Error::last_os_error();
                    if err.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(io_err("poll")(err));
                }
                if n == 0 {
                    return Ok(None);
                }
                break;
            }
        }
        let mut b = [0u8; 1];
        loop {
            match self.file.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => return Ok(Some(b[0])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => return Err(TtyError::Hangup),
                Err(e) => return Err(io_err("read")(e)),
            }
        }
    }
}

const ESC: u8 = 0x1b;
/// How long the bytes of one escape sequence may be apart (they arrive together).
const ESC_FOLLOW_MS: i32 = 50;

/// The checks [`Tty::open`] makes, for a program that reads the keys itself (the cockpit's
/// publication-approval modal reads them through its own event loop): `/dev/tty` opens
/// (ENXIO: no controlling terminal), is a terminal, and this process group is its foreground
/// group; input typed ahead is discarded. In addition `input`, the descriptor the program
/// reads its keys from, must be that same terminal (`tcgetsid` names our session): keys then
/// come from the controlling terminal and from nothing else.
pub fn check_input_terminal(input: RawFd) -> Result<(), TtyError> {
    let _tty = Tty::open()?;
    // tcgetsid answers only for the caller's controlling terminal (ENOTTY otherwise): `input`
    // is that terminal when it names our own session.
    // SAFETY: isatty, tcgetsid and getsid only read process and terminal state.
    let ours = unsafe {
        libc::isatty(input) == 1 && {
            let sid = libc::tcgetsid(input);
            sid >= 0 && sid == libc::getsid(0)
        }
    };
    if ours {
        Ok(())
    } else {
        Err(TtyError::InputNotControlling)
    }
}

/// Puts the terminal in the prompt's mode and restores the saved mode on drop.
struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

impl RawMode {
    fn enter(fd: RawFd) -> Result<RawMode, TtyError> {
        // SAFETY: termios is plain data; tcgetattr fills it.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return Err(io_err("tcgetattr")(io::Error::last_os_error()));
        }
        let mut raw = saved;
        // Non-canonical, no echo (we echo the revision ourselves, after filtering), no
        // signals from the keyboard (Ctrl-C is a byte), no extended processing (Ctrl-V).
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ECHONL | libc::ISIG | libc::IEXTEN);
        // Ctrl-S/Ctrl-Q are bytes too (ignored), not flow control; CR arrives as CR.
        raw.c_iflag &= !(libc::IXON | libc::ICRNL | libc::INLCR | libc::IGNCR);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        let guard = RawMode { fd, saved };
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return Err(io_err("tcsetattr")(io::Error::last_os_error()));
        }
        Ok(guard)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `enter` on the same descriptor.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}

/// What one input byte did to the line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Enter: the answer is complete.
    Done,
    /// Ctrl-C, or Ctrl-D on an empty line.
    Abort,
    /// A byte was added; `Some(c)` when it completed a character.
    Pushed(Option<char>),
    /// Backspace removed a character of this display width.
    Erased(usize),
    /// Ctrl-U removed everything (total display width).
    Cleared(usize),
    /// Control byte or over-long input: dropped.
    Ignored,
    /// The answer is at its maximum length: dropped, ring the bell.
    Full,
}

/// The byte-level line discipline of the prompt (escape sequences are removed before it).
pub(crate) struct LineEditor {
    buf: Zeroizing<Vec<u8>>,
}

impl LineEditor {
    pub(crate) fn new() -> Self {
        LineEditor {
            buf: Zeroizing::new(Vec::with_capacity(64)),
        }
    }

    pub(crate) fn feed(&mut self, b: u8) -> Step {
        match b {
            b'\r' | b'\n' => Step::Done,
            0x03 => Step::Abort,
            0x04 if self.buf.is_empty() => Step::Abort,
            0x7f | 0x08 => match self.pop_char() {
                Some(c) => Step::Erased(char_width(c)),
                None => Step::Ignored,
            },
            0x15 => {
                let width = self.width();
                self.buf.clear();
                Step::Cleared(width)
            }
            0x00..=0x1f => Step::Ignored,
            _ if self.buf.len() >= MAX_ANSWER_BYTES => Step::Full,
            _ => {
                self.buf.push(b);
                Step::Pushed(self.last_complete_char())
            }
        }
    }

    /// The last character when the buffer ends with a complete UTF-8 sequence.
    fn last_complete_char(&self) -> Option<char> {
        let start = self.buf.len().saturating_sub(4);
        (start..self.buf.len()).find_map(|i| {
            std::str::from_utf8(&self.buf[i..])
                .ok()
                .and_then(|s| s.chars().next().filter(|_| s.chars().count() == 1))
        })
    }

    fn pop_char(&mut self) -> Option<char> {
        if self.buf.is_empty() {
            return None;
        }
        let c = self.last_complete_char();
        // Remove continuation bytes, then the leading byte.
        while let Some(&b) = self.buf.last() {
            self.buf.pop();
            if b & 0xc0 != 0x80 {
                break;
            }
        }
        Some(c.unwrap_or('?'))
    }

    fn width(&self) -> usize {
        String::from_utf8_lossy(&self.buf)
            .chars()
            .map(char_width)
            .sum()
    }

    pub(crate) fn finish(self) -> Result<Zeroizing<String>, TtyError> {
        let bytes: Vec<u8> = self.buf.to_vec();
        match String::from_utf8(bytes) {
            Ok(s) => Ok(Zeroizing::new(s)),
            Err(e) => {
                let mut bytes = e.into_bytes();
                zeroize::Zeroize::zeroize(&mut bytes);
                Err(TtyError::InvalidUtf8)
            }
        }
    }
}

fn char_width(c: char) -> usize {
    let shown = crate::text::one_line(c.encode_utf8(&mut [0u8; 4]), 4);
    unicode_width::UnicodeWidthStr::width(shown.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(bytes: &[u8]) -> (Vec<Step>, LineEditor) {
        let mut e = LineEditor::new();
        let mut steps = Vec::new();
        for &b in bytes {
            let s = e.feed(b);
            let stop = matches!(s, Step::Done | Step::Abort);
            steps.push(s);
            if stop {
                break;
            }
        }
        (steps, e)
    }

    #[test]
    fn backspace_erases_whole_characters() {
        let (steps, e) = run("abé\x7f\x7fc\r".as_bytes());
        assert_eq!(steps.last(), Some(&Step::Done));
        assert_eq!(e.finish().unwrap().as_str(), "ac");
    }

    #[test]
    fn ctrl_c_aborts_and_ctrl_d_only_on_an_empty_line() {
        assert_eq!(run(b"ab\x03").0.last(), Some(&Step::Abort));
        assert_eq!(run(b"\x04").0.last(), Some(&Step::Abort));
        let (steps, e) = run(b"a\x04b\n");
        assert_eq!(steps.last(), Some(&Step::Done));
        assert_eq!(e.finish().unwrap().as_str(), "ab");
    }

    #[test]
    fn control_bytes_are_dropped_and_ctrl_u_clears() {
        let (_, e) = run(b"x\x01\x02y\x15z\t\r");
        assert_eq!(e.finish().unwrap().as_str(), "z");
    }

    #[test]
    fn answers_are_bounded() {
        let mut e = LineEditor::new();
        for _ in 0..MAX_ANSWER_BYTES {
            assert!(matches!(e.feed(b'a'), Step::Pushed(Some('a'))));
        }
        assert_eq!(e.feed(b'a'), Step::Full);
        assert_eq!(e.finish().unwrap().len(), MAX_ANSWER_BYTES);
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let (_, e) = run(b"\xff\r");
        assert!(matches!(e.finish(), Err(TtyError::InvalidUtf8)));
    }
}
