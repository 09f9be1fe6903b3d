//! The live terminal: a session's PTY bytes parsed by vt100 0.18, our own bounded
//! scrollback, and the drawing of both into a ratatui buffer, cell by cell.
//!
//! **Nothing the child wrote reaches the operator's terminal as bytes.** vt100 interprets
//! every escape sequence into screen state (OSC 52 clipboard writes, title changes, queries
//! and the like go to callbacks that ignore them); what we draw are cell contents, and a
//! cell whose contents are not plain printable ASCII goes through [`crate::text::one_line`]
//! first, so a bidi override, a zero-width character or a stray control inside a cell shows
//! as a visible marker (or `…` when the marker does not fit the cell).
//!
//! **Scrollback.** The parser keeps no scrollback of its own (capacity 0). Every row that
//! leaves the top of the screen, on the primary screen or on the alternate screen (vt100's
//! `on_scroll` callback, which fires for a scroll whose region starts at the top row), and
//! every row pushed off when the screen shrinks, is kept here, formatted with its colours
//! and attributes, in a bounded history of [`HISTORY_LINES`] rows. So tools that draw on the
//! alternate screen (full-screen TUIs that scroll a log at the top of the screen) have a
//! history too; what such a tool erases or redraws in place without scrolling was never a
//! line that left the screen and is not kept (tmux behaves the same way). The history starts
//! when the cockpit first shows the session: what scrolled off before is in the server's
//! transcript, not here.
//!
//! History rows are drawn by replaying their formatted text into a one-row scratch parser,
//! so they go through exactly the same cell path (and the same sanitising) as the live
//! screen.

use std::borrow::Cow;
use std::collections::VecDeque;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

use crate::text;

/// The most rows of history a terminal keeps.
pub const HISTORY_LINES: usize = 5000;

/// One row that left the screen.
#[derive(Debug, Clone)]
struct HistLine {
    /// The width of the screen it left.
    cols: u16,
    /// vt100's "basic formatted" contents: text and SGR sequences only.
    formatted: String,
}

/// The history, filled by vt100's `on_scroll` callback.
#[derive(Debug, Default)]
pub struct History {
    lines: VecDeque<HistLine>,
    cap: usize,
    /// Rows pushed since the last [`VtTerm::take_pushed`] (keeps a scrolled-back view
    /// anchored while output arrives).
    pushed: usize,
    /// Rows dropped because the history was full.
    dropped: u64,
    cols: u16,
}

impl vt100::Callbacks for History {
    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, _alternate: bool) {
        let mut formatted = String::new();
        let mut st = vt100::capture::BasicFormattedCaptureState::new();
        // Writing into a String cannot fail.
        let _ = row.write_formatted_basic(&mut formatted, &mut st);
        if self.cap == 0 {
            return;
        }
        if self.lines.len() == self.cap {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(HistLine {
            cols: self.cols,
            formatted,
        });
        self.pushed += 1;
    }
}

/// What the renderer needs to know besides the cells.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOpts {
    /// Drop colours (NO_COLOR, or a theme without colour); attributes stay.
    pub no_color: bool,
    /// Draw the cursor as a reversed cell (when the real terminal cursor is not used).
    pub block_cursor: bool,
}

/// A session's terminal as the cockpit sees it.
pub struct VtTerm {
    parser: vt100::Parser<History>,
    /// How many rows back from the live view (0: following the output).
    scroll: usize,
    /// The seq of the last output frame applied (0: none).
    pub seq: u64,
    /// The one-row parser history rows are replayed into when drawn (a cache: drawing
    /// takes `&self`).
    scratch: std::cell::RefCell<Option<vt100::Parser>>,
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n.max(1)).unwrap_or(std::num::NonZeroU16::MIN)
}

impl VtTerm {
    /// An empty terminal of `rows` × `cols`.
    pub fn new(rows: u16, cols: u16) -> VtTerm {
        VtTerm::with_history(rows, cols, HISTORY_LINES)
    }

    pub fn with_history(rows: u16, cols: u16, cap: usize) -> VtTerm {
        let hist = History {
            cap,
            cols: cols.max(1),
            ..History::default()
        };
        VtTerm {
            parser: vt100::Parser::new_with_callbacks(nz(rows), nz(cols), 0, hist),
            scroll: 0,
            seq: 0,
            scratch: std::cell::RefCell::new(None),
        }
    }

    /// Replaces the screen with a server snapshot (`GET /screen`: its size, its
    /// `formatted` redraw, its seq); the history is kept.
    pub fn load_snapshot(&mut self, rows: u16, cols: u16, formatted: &str, seq: u64) {
        let mut hist = std::mem::take(self.parser.callbacks_mut());
        hist.cols = cols.max(1);
        hist.pushed = 0;
        self.parser = vt100::Parser::new_with_callbacks(nz(rows), nz(cols), 0, hist);
        self.parser.process(formatted.as_bytes());
        // The redraw itself must not count as history.
        self.parser.callbacks_mut().pushed = 0;
        self.seq = seq;
    }

    /// Applies output bytes. A scrolled-back view stays on the same rows.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
        self.anchor();
    }

    fn anchor(&mut self) {
        let pushed = std::mem::take(&mut self.parser.callbacks_mut().pushed);
        if self.scroll > 0 {
            self.scroll = (self.scroll + pushed).min(self.max_scroll());
        }
    }

    /// Resizes the screen; rows pushed off the top go to the history.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        if self.size() == (rows.max(1), cols.max(1)) {
            return;
        }
        self.parser.set_size(nz(rows), nz(cols));
        self.parser.callbacks_mut().cols = cols.max(1);
        self.anchor();
    }

    /// (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        let (r, c) = self.parser.screen().size();
        (r.get(), c.get())
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    pub fn history_len(&self) -> usize {
        self.parser.callbacks().lines.len()
    }

    /// Rows dropped from the history because it was full.
    pub fn history_dropped(&self) -> u64 {
        self.parser.callbacks().dropped
    }

    /// The application cursor mode (DECCKM) the child set: arrow keys are encoded
    /// differently.
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    /// Whether the child asked for bracketed paste.
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// Rows back from the live view.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    fn max_scroll(&self) -> usize {
        self.history_len()
    }

    pub fn scroll_up(&mut self, n: usize) {
        self.scroll = (self.scroll + n).min(self.max_scroll());
    }

    pub fn scroll_down(&mut self, n: usize) {
        self.scroll = self.scroll.saturating_sub(n);
    }

    pub fn scroll_top(&mut self) {
        self.scroll = self.max_scroll();
    }

    pub fn scroll_bottom(&mut self) {
        self.scroll = 0;
    }

    /// The text of the visible screen, rows joined with LF (for tests and the e2e checks).
    pub fn contents(&self) -> String {
        self.parser.screen().contents()
    }

    /// The history's rows as plain text, oldest first.
    pub fn history_text(&self) -> Vec<String> {
        let mut scratch: Option<vt100::Parser> = None;
        self.parser
            .callbacks()
            .lines
            .iter()
            .map(|l| {
                let p = scratch_for(&mut scratch, l.cols);
                replay(p, &l.formatted);
                p.screen().contents().trim_end().to_string()
            })
            .collect()
    }

    /// Draws the terminal into `area`. Returns the cursor position on screen when the
    /// cursor is visible in the area (live view, not hidden by the child).
    pub fn render(&self, area: Rect, buf: &mut Buffer, opts: RenderOpts) -> Option<(u16, u16)> {
        if area.width == 0 || area.height == 0 {
            return None;
        }
        let screen = self.parser.screen();
        let (rows, cols) = {
            let (r, c) = screen.size();
            (usize::from(r.get()), c.get())
        };
        let h = usize::from(area.height);
        let (crow, ccol) = screen.cursor_position();
        // At the live view, the screen's top row shown keeps the cursor in view when the
        // screen is taller than the area.
        let top0 = if rows > h {
            (usize::from(crow) + 1).saturating_sub(h).min(rows - h)
        } else {
            0
        };
        let hist_len = self.parser.callbacks().lines.len();
        let scroll = self.scroll.min(hist_len + top0);
        let view_top = hist_len + top0 - scroll;
        let style_default = Style::default();
        let mut cursor = None;
        for dy in 0..h {
            let y = area.y + dy as u16;
            let idx = view_top + dy;
            // Clear the row first: the screen may be narrower or shorter than the area.
            for x in area.x..area.x + area.width {
                buf[(x, y)].reset();
                buf[(x, y)].set_style(style_default);
            }
            if idx < hist_len {
                let line = &self.parser.callbacks().lines[idx];
                let mut scratch = self.scratch.borrow_mut();
                let p = scratch_for(&mut scratch, line.cols);
                replay(p, &line.formatted);
                draw_row(p.screen(), 0, line.cols, area, y, buf, opts);
            } else if idx - hist_len < rows {
                let row = (idx - hist_len) as u16;
                let screen = self.parser.screen();
                draw_row(screen, row, cols, area, y, buf, opts);
                if scroll == 0 && row == crow && !screen.hide_cursor() && ccol < area.width {
                    cursor = Some((area.x + ccol, y));
                }
            }
        }
        if let Some((x, y)) = cursor
            && opts.block_cursor
        {
            let c = &mut buf[(x, y)];
            let st = c.style();
            c.set_style(st.add_modifier(Modifier::REVERSED));
        }
        cursor
    }
}

fn scratch_for(slot: &mut Option<vt100::Parser>, cols: u16) -> &mut vt100::Parser {
    let fits = slot
        .as_ref()
        .is_some_and(|p| p.screen().size().1.get() == cols.max(1));
    if !fits {
        *slot = Some(vt100::Parser::new(nz(1), nz(cols), 0));
    }
    slot.get_or_insert_with(|| vt100::Parser::new(nz(1), nz(cols), 0))
}

/// Puts one formatted history row on the scratch parser's only row.
fn replay(p: &mut vt100::Parser, formatted: &str) {
    p.process(b"\x1b[m\x1b[2K\r");
    p.process(formatted.as_bytes());
}

fn draw_row(
    screen: &vt100::Screen,
    row: u16,
    cols: u16,
    area: Rect,
    y: u16,
    buf: &mut Buffer,
    opts: RenderOpts,
) {
    let w = cols.min(area.width);
    let mut col = 0u16;
    while col < w {
        let x = area.x + col;
        let Some(cell) = screen.cell(row, col) else {
            break;
        };
        if cell.is_wide_continuation() {
            col += 1;
            continue;
        }
        let width: u16 = if cell.is_wide() { 2 } else { 1 };
        let style = cell_style(cell, opts.no_color);
        if width == 2 && col + 1 >= w {
            // A wide character cut by the edge of the area: show that something is there.
            buf[(x, y)].set_symbol("…").set_style(style);
            break;
        }
        let sym = cell_symbol(cell.contents(), usize::from(width));
        buf[(x, y)].set_symbol(&sym).set_style(style);
        let drawn = (unicode_width::UnicodeWidthStr::width(sym.as_ref()) as u16).clamp(1, width);
        for k in 1..width {
            let c = &mut buf[(x + k, y)];
            c.reset();
            if k >= drawn {
                // The replacement is narrower than the original: fill the rest.
                c.set_symbol(" ").set_style(style);
            }
        }
        col += width;
    }
}

/// The text drawn for one cell: plain printable ASCII as is, anything else through the
/// sanitiser, capped to the cell's width.
pub fn cell_symbol(contents: &str, width: usize) -> Cow<'_, str> {
    match contents.as_bytes() {
        [] => Cow::Borrowed(" "),
        [b] if (0x20..0x7f).contains(b) => Cow::Borrowed(contents),
        _ => {
            let s = text::one_line(contents, width.max(1));
            if s.is_empty() {
                Cow::Borrowed(" ")
            } else {
                Cow::Owned(s)
            }
        }
    }
}

/// A vt100 colour as a ratatui colour: the 16 ANSI colours by name (so a 16-colour
/// terminal shows them), the 256-colour palette by index, RGB as RGB.
pub fn color(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Reset,
        vt100::Color::Idx(i) => match i {
            0 => Color::Black,
            1 => Color::Red,
            2 => Color::Green,
            3 => Color::Yellow,
            4 => Color::Blue,
            5 => Color::Magenta,
            6 => Color::Cyan,
            7 => Color::Gray,
            8 => Color::DarkGray,
            9 => Color::LightRed,
            10 => Color::LightGreen,
            11 => Color::LightYellow,
            12 => Color::LightBlue,
            13 => Color::LightMagenta,
            14 => Color::LightCyan,
            15 => Color::White,
            i => Color::Indexed(i),
        },
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

fn cell_style(cell: &vt100::Cell, no_color: bool) -> Style {
    let mut st = Style::default();
    if !no_color {
        st = st.fg(color(cell.fgcolor())).bg(color(cell.bgcolor()));
    }
    let mut m = Modifier::empty();
    if cell.bold() {
        m |= Modifier::BOLD;
    }
    if cell.dim() {
        m |= Modifier::DIM;
    }
    if cell.italic() {
        m |= Modifier::ITALIC;
    }
    if cell.underline() {
        m |= Modifier::UNDERLINED;
    }
    if cell.inverse() {
        m |= Modifier::REVERSED;
    }
    st.add_modifier(m)
}

/// How a line of a pipe session is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// What the agent said (decoded from its protocol), or a stdout line that is not a
    /// protocol frame.
    Out,
    /// stderr: drawn dimmed.
    Err,
    /// A note: a turn boundary, a gap, a protocol error. Drawn dimmed.
    Note,
}

/// The output of a pipe session, decoded: the agent's words from its protocol frames
/// (claude stream-json, codex app-server, ACP — read with the same protocol code the server
/// uses), turn boundaries as notes, other stdout lines as they are, stderr lines dimmed.
/// Every line goes through the sanitiser. Bounded like the terminal's history.
pub struct PipeLog {
    lines: VecDeque<(LineKind, String)>,
    partial: [Vec<u8>; 2],
    /// The agent's words not yet ended by a line feed.
    said: String,
    decoder: Option<crate::providers::protocol::StdioSession>,
    cap: usize,
    scroll: usize,
    pub seq: u64,
}

impl Default for PipeLog {
    fn default() -> PipeLog {
        PipeLog {
            lines: VecDeque::new(),
            partial: [Vec::new(), Vec::new()],
            said: String::new(),
            decoder: None,
            cap: HISTORY_LINES,
            scroll: 0,
            seq: 0,
        }
    }
}

impl PipeLog {
    /// A log that shows stdout lines as they are.
    pub fn new() -> PipeLog {
        PipeLog::default()
    }

    /// A log that decodes `tool`'s stdio protocol (raw lines when the tool is unknown).
    pub fn for_tool(tool: &str) -> PipeLog {
        let decoder = crate::providers::Tool::parse(tool).ok().and_then(|t| {
            crate::providers::protocol::StdioSession::new(t, std::path::Path::new("/"), None).ok()
        });
        PipeLog {
            decoder,
            ..PipeLog::default()
        }
    }

    /// Appends bytes of one stream (`stderr` true for stderr).
    pub fn feed(&mut self, stderr: bool, bytes: &[u8]) {
        let slot = usize::from(stderr);
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut self.partial[slot]);
            line.extend_from_slice(&rest[..i]);
            self.line(stderr, &line);
            rest = &rest[i + 1..];
        }
        self.partial[slot].extend_from_slice(rest);
        // A line without end must stay bounded too.
        if self.partial[slot].len() > 64 * 1024 {
            let line = std::mem::take(&mut self.partial[slot]);
            self.line(stderr, &line);
        }
    }

    /// Marks a gap (frames the server no longer held).
    pub fn gap(&mut self, what: &str) {
        self.flush_said();
        self.push_text(LineKind::Note, format!("··· {what} ···"));
    }

    fn line(&mut self, stderr: bool, raw: &[u8]) {
        use crate::providers::protocol::Event;
        if stderr {
            self.push_text(LineKind::Err, text::one_line_bytes(raw, usize::MAX));
            return;
        }
        let Some(dec) = self.decoder.as_mut() else {
            self.push_text(LineKind::Out, text::one_line_bytes(raw, usize::MAX));
            return;
        };
        let is_frame =
            serde_json::from_slice::<serde_json::Value>(raw).is_ok_and(|v| v.is_object());
        if !is_frame {
            self.flush_said();
            self.push_text(LineKind::Out, text::one_line_bytes(raw, usize::MAX));
            return;
        }
        for ev in dec.observe(raw).events {
            match ev {
                Event::AgentText(t) => {
                    self.said.push_str(&t);
                    while let Some(i) = self.said.find('\n') {
                        let l: String = self.said.drain(..=i).collect();
                        self.push_text(LineKind::Out, text::one_line(&l, usize::MAX));
                    }
                }
                Event::TurnStarted { .. } => {
                    self.flush_said();
                    self.push_text(LineKind::Note, "── turn started".into());
                }
                Event::TurnEnded { outcome, detail } => {
                    self.flush_said();
                    let d = detail.map(|d| format!(" ({})", text::one_line(&d, 80)));
                    self.push_text(
                        LineKind::Note,
                        format!(
                            "── turn ended: {}{}",
                            format!("{outcome:?}").to_lowercase(),
                            d.unwrap_or_default()
                        ),
                    );
                }
                Event::RequestFailed { method, message } => {
                    self.flush_said();
                    self.push_text(
                        LineKind::Note,
                        format!("── {method} failed: {}", text::one_line(&message, 200)),
                    );
                }
                Event::PermissionRequested { ask, .. } => {
                    self.flush_said();
                    self.push_text(
                        LineKind::Note,
                        format!(
                            "── the tool asks permission: {} {} (w answers it)",
                            text::one_line(&ask.tool_name, 40),
                            text::one_line(&ask.what, 200)
                        ),
                    );
                }
                _ => {}
            }
        }
    }

    fn flush_said(&mut self) {
        if !self.said.is_empty() {
            let l = std::mem::take(&mut self.said);
            self.push_text(LineKind::Out, text::one_line(&l, usize::MAX));
        }
    }

    fn push_text(&mut self, kind: LineKind, s: String) {
        if self.lines.len() == self.cap.max(1) {
            self.lines.pop_front();
        }
        self.lines.push_back((kind, s));
        if self.scroll > 0 {
            self.scroll = (self.scroll + 1).min(self.lines.len());
        }
    }

    /// Lines, oldest first, then what is not ended yet (the agent's words, then each
    /// stream's unfinished line).
    pub fn lines(&self) -> impl Iterator<Item = (LineKind, Cow<'_, str>)> {
        let said = (!self.said.is_empty()).then(|| {
            (
                LineKind::Out,
                Cow::Owned(text::one_line(&self.said, usize::MAX)),
            )
        });
        let partial = self
            .partial
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(i, p)| {
                let kind = if i == 1 { LineKind::Err } else { LineKind::Out };
                (kind, Cow::Owned(text::one_line_bytes(p, usize::MAX)))
            });
        let partial: Vec<_> = if self.decoder.is_some() {
            // An unfinished protocol frame is not shown half-way; stderr is.
            partial.filter(|(k, _)| *k == LineKind::Err).collect()
        } else {
            partial.collect()
        };
        self.lines
            .iter()
            .map(|(k, s)| (*k, Cow::Borrowed(s.as_str())))
            .chain(said)
            .chain(partial)
    }

    pub fn len(&self) -> usize {
        self.lines().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn scroll(&self) -> usize {
        self.scroll
    }

    pub fn scroll_up(&mut self, n: usize) {
        self.scroll = (self.scroll + n).min(self.len().saturating_sub(1));
    }

    pub fn scroll_down(&mut self, n: usize) {
        self.scroll = self.scroll.saturating_sub(n);
    }

    pub fn scroll_top(&mut self) {
        self.scroll = self.len().saturating_sub(1);
    }

    pub fn scroll_bottom(&mut self) {
        self.scroll = 0;
    }

    /// Draws the last lines that fit (or those `scroll` lines back); stderr and notes in
    /// `dim`.
    pub fn render(&self, area: Rect, buf: &mut Buffer, text_style: Style, dim: Style) {
        let h = usize::from(area.height);
        let all: Vec<(LineKind, Cow<'_, str>)> = self.lines().collect();
        let end = all.len().saturating_sub(self.scroll);
        let start = end.saturating_sub(h);
        for (i, (kind, line)) in all[start..end].iter().enumerate() {
            let st = if *kind == LineKind::Out {
                text_style
            } else {
                dim
            };
            buf.set_stringn(area.x, area.y + i as u16, line, usize::from(area.width), st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf_text(buf: &Buffer, area: Rect) -> Vec<String> {
        (area.y..area.y + area.height)
            .map(|y| {
                let mut s = String::new();
                let mut x = area.x;
                while x < area.x + area.width {
                    let sym = buf[(x, y)].symbol();
                    s.push_str(sym);
                    x += unicode_width::UnicodeWidthStr::width(sym).max(1) as u16;
                }
                s.trim_end().to_string()
            })
            .collect()
    }

    #[test]
    fn colours_attributes_and_cursor_reach_the_cells() {
        let mut t = VtTerm::new(4, 20);
        t.feed(
            b"\x1b[31mred\x1b[0m \x1b[1;4mbold\x1b[0m \x1b[38;5;200mix\x1b[38;2;1;2;3mrgb\x1b[0m",
        );
        t.feed(b"\r\n\x1b[44;97mbg\x1b[0m");
        let area = Rect::new(0, 0, 20, 4);
        let mut buf = Buffer::empty(area);
        let cur = t.render(
            area,
            &mut buf,
            RenderOpts {
                block_cursor: true,
                ..RenderOpts::default()
            },
        );
        assert_eq!(buf[(0, 0)].fg, Color::Red);
        assert_eq!(buf[(4, 0)].modifier, Modifier::BOLD | Modifier::UNDERLINED);
        assert_eq!(buf[(9, 0)].fg, Color::Indexed(200));
        assert_eq!(buf[(11, 0)].fg, Color::Rgb(1, 2, 3));
        assert_eq!(buf[(0, 1)].bg, Color::Blue);
        assert_eq!(buf[(0, 1)].fg, Color::White);
        assert_eq!(cur, Some((2, 1)));
        assert!(buf[(2, 1)].modifier.contains(Modifier::REVERSED));
        // NO_COLOR drops the colours and keeps the attributes.
        let mut buf = Buffer::empty(area);
        t.render(
            area,
            &mut buf,
            RenderOpts {
                no_color: true,
                ..RenderOpts::default()
            },
        );
        assert_eq!(buf[(0, 0)].fg, Color::Reset);
        assert_eq!(buf[(4, 0)].modifier, Modifier::BOLD | Modifier::UNDERLINED);
    }

    #[test]
    fn hostile_output_is_drawn_harmlessly() {
        let mut t = VtTerm::new(3, 40);
        // OSC 52 clipboard write, a title, a bidi override, a zero-width space, C1 CSI.
        t.feed("\x1b]52;c;aGVsbG8=\x07\x1b]2;pwned\x07ab\u{202e}cd\u{200b}e\u{9b}31mX".as_bytes());
        let area = Rect::new(0, 0, 40, 3);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        for y in 0..3 {
            for x in 0..40 {
                let s = buf[(x, y)].symbol();
                assert!(
                    !s.chars().any(|c| c.is_control()
                        || text::is_invisible(c)
                        || text::is_bidi_control(c)),
                    "cell ({x},{y}) holds {s:?}"
                );
            }
        }
        let line = &buf_text(&buf, area)[0];
        assert!(line.starts_with('a'), "{line}");
        assert!(
            !line.contains("pwned") && !line.contains("aGVsbG8"),
            "{line}"
        );
    }

    #[test]
    fn history_keeps_rows_scrolled_off_primary_and_alternate_screens() {
        let mut t = VtTerm::new(3, 10);
        for i in 0..6 {
            t.feed(format!("line{i}\r\n").as_bytes());
        }
        assert_eq!(t.history_text(), ["line0", "line1", "line2", "line3"]);
        // The alternate screen: a tool that scrolls inside it.
        t.feed(b"\x1b[?1049h\x1b[H");
        for i in 0..5 {
            t.feed(format!("alt{i}\r\n").as_bytes());
        }
        let h = t.history_text();
        assert_eq!(&h[4..], ["alt0", "alt1", "alt2"], "{h:?}");
        // Scrolling back shows history rows with their colours, then follows again.
        t.feed(b"\x1b[?1049l");
        t.scroll_up(2);
        let area = Rect::new(0, 0, 10, 3);
        let mut buf = Buffer::empty(area);
        let cur = t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(cur, None, "no cursor while scrolled back");
        assert_eq!(buf_text(&buf, area)[0], "alt1");
        // New output keeps a scrolled-back view on the same rows.
        t.feed(b"more\r\nmore\r\nmore\r\n");
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(buf_text(&buf, area)[0], "alt1");
        t.scroll_bottom();
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(buf_text(&buf, area)[1], "more");
    }

    #[test]
    fn history_is_bounded_and_colours_survive_it() {
        let mut t = VtTerm::with_history(2, 10, 3);
        t.feed(b"\x1b[32mgreen\x1b[0m\r\n");
        t.feed(b"x\r\ny\r\n");
        t.scroll_top();
        let area = Rect::new(0, 0, 10, 2);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(buf_text(&buf, area)[0], "green");
        assert_eq!(buf[(0, 0)].fg, Color::Green);
        for i in 0..10 {
            t.feed(format!("{i}\r\n").as_bytes());
        }
        assert_eq!(t.history_len(), 3);
        assert!(t.history_dropped() > 0);
    }

    #[test]
    fn snapshot_then_output_and_resize() {
        let mut src = vt100::Parser::new(nz(5), nz(20), 0);
        src.process(b"\x1b[?1hhello\r\nworld");
        let snap = src.screen().state_formatted();
        let mut t = VtTerm::new(2, 2);
        t.load_snapshot(5, 20, &snap, 42);
        assert_eq!(t.seq, 42);
        assert!(t.application_cursor(), "input modes come with the snapshot");
        assert!(t.contents().starts_with("hello\nworld"));
        t.feed(b"!");
        assert!(t.contents().contains("world!"));
        // Shrinking pushes the top rows into the history.
        t.resize(1, 20);
        assert_eq!(t.history_text(), ["hello"]);
    }

    #[test]
    fn wide_characters_and_a_narrow_area() {
        let mut t = VtTerm::new(2, 10);
        t.feed("日本x".as_bytes());
        let area = Rect::new(0, 0, 3, 2);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(buf[(0, 0)].symbol(), "日");
        assert_eq!(buf[(2, 0)].symbol(), "…", "a wide char cut by the edge");
    }

    #[test]
    fn pipe_log_lines_are_sanitised_bounded_and_stderr_marked() {
        let mut p = PipeLog::new();
        p.feed(false, b"{\"type\":\"assistant\"}\nhalf");
        p.feed(true, b"warn \x1b[31mred\x1b[0m\n");
        p.feed(false, b" line\n\xe2\x80\xae evil\n");
        let lines: Vec<(LineKind, String)> = p.lines().map(|(e, s)| (e, s.into_owned())).collect();
        assert_eq!(
            lines[0],
            (LineKind::Out, "{\"type\":\"assistant\"}".to_string())
        );
        assert_eq!(lines[1], (LineKind::Err, "warn red".to_string()));
        assert_eq!(lines[2], (LineKind::Out, "half line".to_string()));
        assert_eq!(
            lines[3],
            (LineKind::Out, "\u{27e8}U+202E\u{27e9} evil".to_string())
        );
        let mut p = PipeLog {
            cap: 2,
            ..PipeLog::default()
        };
        p.feed(false, b"a\nb\nc\n");
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn pipe_log_decodes_the_agents_words() {
        // codex app-server: deltas joined, turn boundaries as notes, other frames hidden.
        let mut p = PipeLog::for_tool("codex");
        p.feed(false, b"{\"method\":\"turn/started\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\"}}}\n");
        p.feed(
            false,
            b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"hel\"}}\n",
        );
        p.feed(false, b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"lo \\u001b[31mworld\\u202e\"}}\n");
        p.feed(false, b"{\"method\":\"turn/completed\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\",\"status\":\"completed\"}}}\n");
        p.feed(false, b"not json\n");
        let lines: Vec<(LineKind, String)> = p.lines().map(|(e, s)| (e, s.into_owned())).collect();
        assert_eq!(
            lines,
            [
                (LineKind::Note, "── turn started".to_string()),
                (
                    LineKind::Out,
                    "hello world\u{27e8}U+202E\u{27e9}".to_string()
                ),
                (
                    LineKind::Note,
                    "── turn ended: completed (completed)".to_string()
                ),
                (LineKind::Out, "not json".to_string()),
            ]
        );
    }
}
