//! Output frames on their way to the operator: decoding the `output`, `lag` and `end` events
//! of the attach stream, sanitising a byte stream that arrives in frames cut anywhere,
//! rendering a PTY run's bytes through a terminal emulator into lines of text
//! ([`ScreenText`]), and describing an observed exit.

use base64::Engine;

use crate::api::runs::{EndEvent, OutputEvent, RunView};
use crate::text;

/// One frame of an `output` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub seq: u64,
    /// `stdout` or `stderr` (a PTY run has only `stdout`: the terminal merges them), or
    /// `stdin`: what proctor wrote to a pipe run.
    pub stream: String,
    pub bytes: Vec<u8>,
}

/// Decodes an `output` event's data ([`OutputEvent`]:
/// `{"first","last","frames":[{"seq","stream","b64"}]}`).
pub fn frames(data: &str) -> Result<(u64, Vec<Frame>), String> {
    let ev: OutputEvent = serde_json::from_str(data)
        .map_err(|e| format!("an output event is not what the contract says: {e}"))?;
    let last = ev.last.ok_or("an output event has no last seq")?;
    let mut out = Vec::new();
    for f in ev.frames {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&f.b64)
            .map_err(|e| format!("an output frame is not base64: {e}"))?;
        out.push(Frame {
            seq: f.seq,
            stream: f.stream.as_str().to_string(),
            bytes,
        });
    }
    Ok((last, out))
}

/// How a run's process ended, as the server observed it (an `end` event, or a run's view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i64),
    Signal(String),
    Unobserved,
}

impl Exit {
    /// From a signal name and an exit code as the server reported them (the signal wins).
    fn of(signal: Option<&str>, code: Option<i64>) -> Exit {
        if let Some(s) = signal {
            return Exit::Signal(s.to_string());
        }
        match code {
            Some(c) => Exit::Code(c),
            None => Exit::Unobserved,
        }
    }

    /// From an `end` event.
    pub fn from_end(e: &EndEvent) -> Exit {
        Exit::of(e.signal.as_deref(), e.exit_code.map(i64::from))
    }

    /// From a run's view (`exit_code`, `signal`).
    pub fn from_view(v: &RunView) -> Exit {
        Exit::of(v.signal.as_deref(), v.exit_code)
    }

    /// `code 3`, `signal SIGKILL`, `exit not observed`.
    pub fn describe(&self) -> String {
        match self {
            Exit::Code(c) => format!("code {c}"),
            Exit::Signal(s) => format!("signal {}", text::one_line(s, 32)),
            Exit::Unobserved => "exit not observed".to_string(),
        }
    }

    /// The exit status a command that follows the run returns: the code itself, 128 plus the
    /// signal's number (as shells report it), 1 when the exit was not observed.
    pub fn status(&self) -> u8 {
        match self {
            Exit::Code(c) => u8::try_from(*c).unwrap_or(1),
            Exit::Signal(name) => signal_number(name)
                .and_then(|n| u8::try_from(128 + n).ok())
                .unwrap_or(1),
            Exit::Unobserved => 1,
        }
    }
}

/// The number of a signal the server named (`SIGKILL`, or `signal N` for unnamed ones).
pub fn signal_number(name: &str) -> Option<i32> {
    if let Some(n) = name.strip_prefix("signal ") {
        return n.trim().parse().ok();
    }
    (1..=64).find(|&n| crate::runs::signal_name(n) == name)
}

/// Sanitises a byte stream that arrives cut at arbitrary points.
///
/// Each chunk goes through [`text::multi_line_bytes`], but a cut inside a UTF-8 sequence or
/// inside an escape sequence would show half of it (a `U+FFFD`, or the tail of a CSI as
/// text). So the bytes from such an unfinished sequence are held back until the next chunk
/// completes it, or until [`Sanitiser::finish`]. What is held is bounded: past
/// [`Sanitiser::MAX_HELD`] bytes an unterminated sequence is released (and dropped by the
/// sanitiser, as any unterminated string sequence is).
#[derive(Debug, Default)]
pub struct Sanitiser {
    held: Vec<u8>,
}

impl Sanitiser {
    /// The most bytes held back waiting for a sequence to end.
    pub const MAX_HELD: usize = 64 * 1024;

    /// Adds bytes; returns the sanitised text that is safe to print now.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.held.extend_from_slice(bytes);
        let cut = safe_prefix(&self.held);
        let cut = if self.held.len() - cut > Self::MAX_HELD {
            self.held.len()
        } else {
            cut
        };
        let out = text::multi_line_bytes(&self.held[..cut]);
        self.held.drain(..cut);
        out
    }

    /// Releases what is held (end of stream).
    pub fn finish(&mut self) -> String {
        let out = text::multi_line_bytes(&self.held);
        self.held.clear();
        out
    }
}

/// The length of the longest prefix of `buf` that ends neither inside a UTF-8 sequence nor
/// inside an escape sequence (by the rules of `crate::text`).
fn safe_prefix(buf: &[u8]) -> usize {
    let utf8_end = buf.len() - incomplete_utf8_tail(buf);
    let cut = open_sequence_start(&buf[..utf8_end]).unwrap_or(utf8_end);
    cut.min(utf8_end)
}

/// How many bytes at the end of `buf` are the start of a UTF-8 sequence that needs more.
pub(super) fn incomplete_utf8_tail(buf: &[u8]) -> usize {
    for k in 1..=3.min(buf.len()) {
        let b = buf[buf.len() - k];
        let need = match b {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            0x80..=0xbf => continue,
            _ => return 0,
        };
        return if need > k { k } else { 0 };
    }
    0
}

/// The byte offset where an escape sequence that `buf` leaves unfinished begins.
fn open_sequence_start(buf: &[u8]) -> Option<usize> {
    #[derive(Clone, Copy)]
    enum St {
        Ground,
        Esc,
        EscInter,
        Csi,
        Str { osc: bool },
    }
    const ESC: char = '\u{1b}';
    let mut st = St::Ground;
    let mut start = 0usize;
    for (pos, c) in decoded(buf) {
        let c0_ignored =
            matches!(c, '\u{00}'..='\u{1f}' | '\u{7f}') && !matches!(c, ESC | '\u{18}' | '\u{1a}');
        st = match st {
            St::Ground => match c {
                ESC => {
                    start = pos;
                    St::Esc
                }
                '\u{9b}' => {
                    start = pos;
                    St::Csi
                }
                '\u{9d}' => {
                    start = pos;
                    St::Str { osc: true }
                }
                '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => {
                    start = pos;
                    St::Str { osc: false }
                }
                _ => St::Ground,
            },
            St::Esc | St::EscInter | St::Csi if c == ESC => {
                start = pos;
                St::Esc
            }
            St::Esc => match c {
                '[' => St::Csi,
                ']' => St::Str { osc: true },
                'P' | 'X' | '^' | '_' => St::Str { osc: false },
                '\u{20}'..='\u{2f}' => St::EscInter,
                _ if c0_ignored => St::Esc,
                _ => St::Ground,
            },
            St::EscInter => match c {
                '\u{20}'..='\u{2f}' => St::EscInter,
                _ if c0_ignored => St::EscInter,
                _ => St::Ground,
            },
            St::Csi => match c {
                '\u{20}'..='\u{3f}' => St::Csi,
                _ if c0_ignored => St::Csi,
                _ => St::Ground,
            },
            St::Str { osc } => match c {
                '\u{9c}' | '\u{18}' | '\u{1a}' => St::Ground,
                '\u{07}' if osc => St::Ground,
                // ESC ends the string and begins the next sequence (ST is `ESC \`).
                ESC => {
                    start = pos;
                    St::Esc
                }
                _ => St::Str { osc },
            },
        };
    }
    match st {
        St::Ground => None,
        _ => Some(start),
    }
}

/// `buf` as characters with their byte offsets, read as `crate::text` reads bytes: a lone
/// 0x80–0x9F byte is the C1 control it would be to a terminal, other invalid bytes U+FFFD.
fn decoded(buf: &[u8]) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut offset = 0usize;
    buf.utf8_chunks().flat_map(move |chunk| {
        let base = offset;
        offset += chunk.valid().len() + chunk.invalid().len();
        let invalid_at = base + chunk.valid().len();
        let replacement = match chunk.invalid() {
            [] => None,
            [b @ 0x80..=0x9f] => Some((invalid_at, char::from(*b))),
            _ => Some((invalid_at, char::REPLACEMENT_CHARACTER)),
        };
        chunk
            .valid()
            .char_indices()
            .map(move |(i, c)| (base + i, c))
            .chain(replacement)
    })
}

/// A PTY run's output as lines of text: the bytes go through a vt100 terminal emulator of
/// the run's size, and what is printed is the screen it draws, row by row, never the bytes.
///
/// A row is *final* once it has scrolled off the top of the screen (on the primary or the
/// alternate screen): [`ScreenText::feed`] returns those rows, oldest first, and they never
/// change again. The rows still on the screen may be redrawn by the child; they are read with
/// [`ScreenText::screen_lines`] (at the end of the output, or as a provisional view).
///
/// Each row becomes one line: its cells' text left to right (an empty cell is a space, so
/// words keep the gaps a cursor movement made), trailing blanks dropped, through the
/// sanitiser ([`text::one_line`]). With colours, each change of a cell's style is written as
/// one SGR sequence by [`text::style::sgr`] (only the colours and attributes the text
/// module allows), and a styled line ends with a reset.
pub struct ScreenText {
    parser: vt100::Parser<Scrolled>,
    scratch: vt100::Parser,
    cols: u16,
    color: bool,
}

/// The rows that left the top of the screen, in vt100's "basic formatted" form (text and
/// SGR only), waiting to be rendered.
#[derive(Default)]
struct Scrolled {
    rows: Vec<String>,
}

impl vt100::Callbacks for Scrolled {
    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, _alternate: bool) {
        let mut formatted = String::new();
        // A fresh state per row: each row's text is complete on its own. Writing into a
        // String cannot fail.
        let mut st = vt100::capture::BasicFormattedCaptureState::new();
        let _ = row.write_formatted_basic(&mut formatted, &mut st);
        self.rows.push(formatted);
    }
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n.max(1)).unwrap_or(std::num::NonZeroU16::MIN)
}

impl ScreenText {
    /// An empty screen of `rows` × `cols`; `color` keeps the cells' colours and attributes.
    pub fn new(rows: u16, cols: u16, color: bool) -> ScreenText {
        ScreenText {
            parser: vt100::Parser::new_with_callbacks(nz(rows), nz(cols), 0, Scrolled::default()),
            scratch: vt100::Parser::new(nz(1), nz(cols), 0),
            cols: cols.max(1),
            color,
        }
    }

    /// Feeds the child's bytes; returns the rows that became final (scrolled off), as
    /// lines without their line feed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.parser.process(bytes);
        let rows = std::mem::take(&mut self.parser.callbacks_mut().rows);
        rows.iter()
            .map(|formatted| {
                // Replay the row on a one-row screen, so it is read cell by cell as the
                // live screen is.
                self.scratch.process(b"\x1b[m\x1b[2K\r");
                self.scratch.process(formatted.as_bytes());
                row_line(self.scratch.screen(), 0, self.cols, self.color)
            })
            .collect()
    }

    /// The screen's rows as lines, the blank rows after the last written one dropped;
    /// each line at most `max_cols` cells wide.
    pub fn screen_lines(&self, max_cols: u16) -> Vec<String> {
        let screen = self.parser.screen();
        let rows = screen.size().0.get();
        let cols = self.cols.min(max_cols.max(1));
        let mut lines: Vec<String> = (0..rows)
            .map(|r| row_line(screen, r, cols, self.color))
            .collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    }
}

fn cell_style(cell: &vt100::Cell) -> text::style::Style {
    fn colour(c: vt100::Color) -> text::style::Colour {
        match c {
            vt100::Color::Default => text::style::Colour::Default,
            vt100::Color::Idx(i) => text::style::Colour::Index(i),
            vt100::Color::Rgb(r, g, b) => text::style::Colour::Rgb(r, g, b),
        }
    }
    text::style::Style {
        fg: colour(cell.fgcolor()),
        bg: colour(cell.bgcolor()),
        bold: cell.bold(),
        dim: cell.dim(),
        italic: cell.italic(),
        underline: cell.underline(),
        inverse: cell.inverse(),
    }
}

/// One screen row as a line: the first `cols` cells, trailing blanks dropped (a blank with a
/// background colour or inverse is kept when colours are shown).
fn row_line(screen: &vt100::Screen, row: u16, cols: u16, color: bool) -> String {
    let blank = |c: &vt100::Cell| {
        let s = c.contents();
        let text_blank = s.is_empty() || s == " ";
        text_blank && (!color || (c.bgcolor() == vt100::Color::Default && !c.inverse()))
    };
    let mut end = 0u16;
    for col in 0..cols {
        if let Some(c) = screen.cell(row, col)
            && !c.is_wide_continuation()
            && !blank(c)
        {
            end = col + if c.is_wide() { 2 } else { 1 };
        }
    }
    let end = end.min(cols);
    let mut out = String::new();
    let mut seg = String::new();
    let mut cur = text::style::Style::default();
    for col in 0..end {
        let Some(cell) = screen.cell(row, col) else {
            break;
        };
        if cell.is_wide_continuation() {
            continue;
        }
        if cell.is_wide() && col + 1 >= end {
            // A wide character cut by the width: show that something is there.
            seg.push('…');
            break;
        }
        if color {
            let st = cell_style(cell);
            if st != cur {
                out.push_str(&text::one_line(&seg, usize::MAX));
                seg.clear();
                out.push_str(&text::style::sgr(&st));
                cur = st;
            }
        }
        match cell.contents() {
            "" => seg.push(' '),
            s => seg.push_str(s),
        }
    }
    out.push_str(&text::one_line(&seg, usize::MAX));
    if !cur.is_plain() {
        out.push_str(&text::style::sgr(&text::style::Style::default()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the cut points, the chunked output equals sanitising the whole at once.
    fn check_all_cuts(input: &[u8]) {
        let whole = text::multi_line_bytes(input);
        for cut in 0..=input.len() {
            let mut s = Sanitiser::default();
            let mut got = s.push(&input[..cut]);
            got.push_str(&s.push(&input[cut..]));
            got.push_str(&s.finish());
            assert_eq!(got, whole, "cut at {cut} of {input:?}");
        }
        let mut s = Sanitiser::default();
        let mut got = String::new();
        for b in input {
            got.push_str(&s.push(std::slice::from_ref(b)));
        }
        got.push_str(&s.finish());
        assert_eq!(got, whole, "byte by byte: {input:?}");
    }

    #[test]
    fn cuts_inside_sequences_never_change_what_is_shown() {
        for input in [
            "plain text\r\nline two".as_bytes(),
            "caf\u{e9} \u{1f600} \u{202e}rtl".as_bytes(),
            b"\x1b[31mred\x1b[0m and \x1b[38;5;208morange\x1b[m",
            b"\x1b]0;title\x07after \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
            b"\x1bPdcs body\x1b\\ \x1b(0 \x1b7 saved",
            b"\xc2\x9b31m c1 csi \xc2\x9d c1 osc \xc2\x9c done",
            b"lone \x9b31m byte csi, bad \xff byte",
            b"\x1b[\x0a1;2H control inside csi",
            b"\x1b[1\x1b[2m restart \x18 cancel \x1b]x\x18y",
        ] {
            check_all_cuts(input);
        }
    }

    #[test]
    fn an_unfinished_sequence_is_held_until_it_ends() {
        let mut s = Sanitiser::default();
        assert_eq!(s.push(b"ok \x1b[3"), "ok ");
        assert_eq!(s.push(b"1mred"), "red");
        assert_eq!(s.push(b" \xe2\x82"), " ");
        assert_eq!(s.push(b"\xac"), "\u{20ac}");
        assert_eq!(s.push(b"\x1b]0;ti"), "");
        assert_eq!(s.push(b"tle\x07shown"), "shown");
    }

    #[test]
    fn what_is_held_is_bounded() {
        let mut s = Sanitiser::default();
        assert_eq!(s.push(b"\x1b]0;"), "");
        let big = vec![b'x'; Sanitiser::MAX_HELD + 10];
        // The unterminated string is released, and the sanitiser drops it whole.
        assert_eq!(s.push(&big), "");
        assert_eq!(s.push(b"later"), "later");
    }

    fn render(bytes: &[u8], rows: u16, cols: u16, color: bool) -> (Vec<String>, Vec<String>) {
        let mut t = ScreenText::new(rows, cols, color);
        let done = t.feed(bytes);
        (done, t.screen_lines(u16::MAX))
    }

    #[test]
    fn cursor_movements_keep_the_gaps_and_rows_become_lines() {
        let (done, screen) = render(b"Welcome\x1b[1Cto\x1b[5;1HClaude", 24, 80, false);
        assert!(done.is_empty());
        assert_eq!(screen, ["Welcome to", "", "", "", "Claude"]);
    }

    #[test]
    fn rows_that_scroll_off_are_final_in_order() {
        let (done, screen) = render(b"one\r\ntwo\r\n\x1b[32mthree\x1b[m\r\nfour", 2, 10, false);
        assert_eq!(done, ["one", "two"]);
        assert_eq!(screen, ["three", "four"]);
        let (done, _) = render(
            b"one\r\n\x1b[1;32mtwo\x1b[m x\r\nthree\r\nfour",
            2,
            10,
            true,
        );
        assert_eq!(done, ["one", "\x1b[0;1;32mtwo\x1b[0m x"]);
    }

    #[test]
    fn the_childs_sequences_never_pass_and_cells_are_sanitised() {
        let (_, screen) = render(
            b"\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07a\xe2\x80\xaeb \x1b[5mblink\x1b[8mhidden\x1b[m",
            3,
            40,
            true,
        );
        assert_eq!(screen.len(), 1, "{screen:?}");
        let line = &screen[0];
        assert!(line.contains("a⟨U+202E⟩b"), "{line:?}");
        assert!(!line.contains("52;") && !line.contains("title"), "{line:?}");
        // Blink and conceal are not written: the styled text is plain again.
        assert!(line.contains("blinkhidden"), "{line:?}");
        for esc in line.match_indices('\x1b') {
            let rest = &line[esc.0 + 1..];
            let end = rest.find('m').unwrap();
            assert!(
                rest[1..end]
                    .bytes()
                    .all(|c| c.is_ascii_digit() || c == b';'),
                "{line:?}"
            );
        }
    }

    #[test]
    fn wide_characters_and_a_width_limit() {
        let mut t = ScreenText::new(2, 10, false);
        t.feed("日本 abc".as_bytes());
        assert_eq!(t.screen_lines(u16::MAX), ["日本 abc"]);
        assert_eq!(t.screen_lines(3), ["日…"]);
    }

    #[test]
    fn exits_map_to_statuses() {
        assert_eq!(Exit::Code(3).status(), 3);
        assert_eq!(Exit::Code(0).status(), 0);
        assert_eq!(Exit::Signal("SIGKILL".into()).status(), 137);
        assert_eq!(Exit::Signal("SIGTERM".into()).status(), 143);
        assert_eq!(Exit::Signal("signal 40".into()).status(), 168);
        assert_eq!(Exit::Unobserved.status(), 1);
        let end: EndEvent = serde_json::from_value(
            serde_json::json!({"last_seq": 4, "exit_code": null, "signal": "SIGKILL"}),
        )
        .unwrap();
        assert_eq!(Exit::from_end(&end), Exit::Signal("SIGKILL".into()));
        let end: EndEvent =
            serde_json::from_value(serde_json::json!({"last_seq": 4, "unobserved": true})).unwrap();
        assert_eq!(Exit::from_end(&end).describe(), "exit not observed");
    }
}

/// A line for the operator's stdout or stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Stdout(String),
    Stderr(String),
}

/// A pipe run's frames as the conversation ([`crate::providers::conversation`]): the
/// person's turns, the agent's words, tool calls, errors… one line each, every string through
/// the sanitiser; or (`json`) one [`Said`](crate::providers::conversation::Said) JSON object
/// per line.
pub struct Conversation {
    reader: crate::providers::conversation::Reader,
    lines: crate::providers::conversation::Lines,
    /// Unfinished lines of stdout, stderr and stdin.
    partial: [Vec<u8>; 3],
    json: bool,
}

/// The longest line kept waiting for its end; a longer one is read as it stands.
const MAX_LINE: usize = 1 << 20;

impl Conversation {
    /// For a run of `tool` (its protocol's decoder; lines as they are for another tool).
    pub fn new(tool: &str, json: bool) -> Conversation {
        Conversation {
            reader: crate::providers::conversation::Reader::for_tool(tool),
            lines: crate::providers::conversation::Lines::new(),
            partial: Default::default(),
            json,
        }
    }

    /// The lines that a frame of `stream` (`stdout`, `stderr`, `stdin`) completes.
    pub fn push(&mut self, stream: &str, bytes: &[u8]) -> Vec<Out> {
        use crate::providers::conversation::Direction;
        let (slot, dir) = match stream {
            "stderr" => (1, Direction::Stderr),
            "stdin" => (2, Direction::Stdin),
            _ => (0, Direction::Stdout),
        };
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut self.partial[slot]);
            line.extend_from_slice(&rest[..i]);
            self.line(dir, &line, &mut out);
            rest = &rest[i + 1..];
        }
        self.partial[slot].extend_from_slice(rest);
        if self.partial[slot].len() > MAX_LINE {
            let line = std::mem::take(&mut self.partial[slot]);
            self.line(dir, &line, &mut out);
        }
        out
    }

    fn line(
        &mut self,
        dir: crate::providers::conversation::Direction,
        raw: &[u8],
        out: &mut Vec<Out>,
    ) {
        for said in self.reader.read(dir, raw) {
            if self.json {
                // serde_json escapes every control character.
                if let Ok(s) = serde_json::to_string(&said) {
                    out.push(Out::Stdout(s + "\n"));
                }
                continue;
            }
            for l in self.lines.push(&said) {
                out.push(Self::human(&l));
            }
        }
    }

    fn human(l: &crate::providers::conversation::Line) -> Out {
        use crate::providers::conversation::Voice;
        let t = text::one_line(&l.text, usize::MAX) + "\n";
        if l.voice == Voice::Stderr {
            Out::Stderr(t)
        } else {
            Out::Stdout(t)
        }
    }

    /// Releases what is held: unfinished lines, and the agent's words not ended yet.
    pub fn finish(&mut self) -> Vec<Out> {
        use crate::providers::conversation::Direction;
        let mut out = Vec::new();
        for (slot, dir) in [
            (2, Direction::Stdin),
            (0, Direction::Stdout),
            (1, Direction::Stderr),
        ] {
            let line = std::mem::take(&mut self.partial[slot]);
            if !line.is_empty() {
                self.line(dir, &line, &mut out);
            }
        }
        if !self.json {
            for l in self.lines.finish() {
                out.push(Self::human(&l));
            }
        }
        out
    }
}

#[cfg(test)]
mod conversation_tests {
    use super::*;

    #[test]
    fn the_conversation_is_one_sanitised_line_per_event() {
        let mut c = Conversation::new("codex", false);
        let mut out = c.push(
            "stdin",
            b"{\"id\":2,\"method\":\"turn/start\",\"params\":{\"threadId\":\"t\",\"input\":[{\"type\":\"text\",\"text\":\"run \\u001b[31mit\\u202e\"}]}}\n",
        );
        out.extend(c.push(
            "stdout",
            b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"itemId\":\"a\",\"delta\":\"wor",
        ));
        out.extend(c.push("stdout", b"king\"}}\n{\"method\":\"error\",\"params\":{\"error\":{\"message\":\"Reconnecting... 2/5\"},\"willRetry\":true}}\n"));
        out.extend(c.push("stderr", b"warn\n"));
        out.extend(c.finish());
        assert_eq!(
            out,
            [
                Out::Stdout("you: run it\u{27e8}U+202E\u{27e9}\n".into()),
                Out::Stdout("working\n".into()),
                Out::Stdout("! error: Reconnecting... 2/5 (will retry)\n".into()),
                Out::Stderr("warn\n".into()),
            ]
        );
        let mut j = Conversation::new("codex", true);
        let out = j.push("stdout", b"{\"method\":\"turn/started\",\"params\":{}}\n");
        assert_eq!(out, [Out::Stdout("{\"type\":\"turn_started\"}\n".into())]);
    }
}
