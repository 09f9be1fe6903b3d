//! The cockpit's screen writer ([`Painter`]): what changed since the last frame, in one
//! write, with colours written the way a theme names them.
//!
//! crossterm writes every colour as an indexed one (`ESC[38;5;1m` for red), which terminals
//! without the 256-colour palette (the Linux console, some serial and old terminals) do not
//! read. Here a cell's style is one SGR sequence: the 16 ANSI colours as their own codes
//! (`31` red, `92` bright green, `39`/`49` the terminal's own), an indexed colour above 15 as
//! `38;5;N` and a truecolor as `38;2;R;G;B` (only a theme, or an agent's own output, that
//! asks for them). With the default theme the cockpit writes only the 16 colours.

use std::io::{self, Write};

use ratatui::Terminal;
use ratatui::backend::{Backend as RatatuiBackend, ClearType, WindowSize};
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::{Position, Rect, Size};
use ratatui::style::{Color, Modifier};

use super::app::App;
use super::event_loop::Screen;

/// Synchronized output (terminals that lack it ignore it): the frame appears at once.
const BEGIN_SYNC: &[u8] = b"\x1b[?2026h";
const END_SYNC: &[u8] = b"\x1b[?2026l";
const HIDE_CURSOR: &[u8] = b"\x1b[?25l";
const SHOW_CURSOR: &[u8] = b"\x1b[?25h";
const CLEAR_ALL: &[u8] = b"\x1b[2J";

/// How the terminal's size is asked: columns, rows.
pub type AskSize = fn() -> io::Result<(u16, u16)>;

/// What a frame was, for the tests and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameCounts {
    /// Frames drawn whole (every pane laid out and drawn, every cell compared).
    pub whole: u64,
    /// Frames in which only the live terminal's output had changed: that pane alone was
    /// drawn and compared.
    pub live: u64,
    /// Frames after which the terminal would have shown exactly what it showed: nothing
    /// was written.
    pub unchanged: u64,
}

/// The cockpit's screen: draws frames with ratatui's widgets, then writes only the cells
/// that differ from what the terminal shows, in one `write(2)` a frame.
///
/// ratatui's own `Terminal::draw` is used as the widgets' canvas only (its backend here
/// writes nothing): the comparison with what is shown and the writing are this type's.
/// Differences from `Terminal::draw` with a crossterm backend, none of them visible:
/// - the size is the one the terminal reported at start and in its resize events, not
///   asked again (an `open`/`ioctl`/`close` of `/dev/tty`) at every frame;
/// - the cells are compared for equality before any symbol's width is measured;
/// - a frame in which only the live terminal's output changed ([`App::live_dirty`] alone, see
///   [`super::ui::live_alone`]) draws and compares that pane's area alone: the rest of the
///   screen is what the last frame left;
/// - the frame, the cursor and the synchronized-update markers go out in one write, and a
///   frame that would change nothing on the terminal writes nothing.
pub struct Painter<W: Write> {
    out: W,
    /// The widgets' canvas: its current buffer is empty between frames.
    canvas: Terminal<Canvas>,
    /// What the terminal shows.
    shown: Buffer,
    /// The next frame starts by clearing the terminal (start, resize, take back).
    clear: bool,
    /// The next frame is drawn whole.
    full: bool,
    /// The cursor as the terminal shows it: `None` hidden.
    cursor: Option<Position>,
    /// The frame's bytes, reused.
    bytes: Vec<u8>,
    /// Asks the terminal its size (after a hand-over, when resize events were not read).
    ask_size: Option<AskSize>,
    pub counts: FrameCounts,
}

impl<W: Write> Painter<W> {
    /// A painter for a terminal of `cols`×`rows` whose screen is blank (just cleared).
    /// `ask_size` is how to read the terminal's size again after a hand-over (`None`: a
    /// test's fixed size).
    pub fn new(out: W, cols: u16, rows: u16, ask_size: Option<AskSize>) -> io::Result<Painter<W>> {
        let area = Rect::new(0, 0, cols, rows);
        let canvas = Terminal::with_options(
            Canvas::default(),
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Fixed(area),
            },
        )?;
        Ok(Painter {
            out,
            canvas,
            shown: Buffer::empty(area),
            clear: false,
            full: true,
            cursor: None,
            bytes: Vec::with_capacity(1 << 16),
            ask_size,
            counts: FrameCounts::default(),
        })
    }

    /// The writer (the tests read what was written).
    pub fn writer(&self) -> &W {
        &self.out
    }

    /// What the terminal shows, as this painter wrote it.
    pub fn shown(&self) -> &Buffer {
        &self.shown
    }

    /// The next frame is drawn whole, as if nothing but the live pane's output had changed
    /// were unknown (the tests compare both ways of drawing).
    pub fn draw_whole_next(&mut self) {
        self.full = true;
    }

    fn set_size(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        let area = Rect::new(0, 0, cols, rows);
        if area == self.shown.area {
            return Ok(());
        }
        self.canvas.resize(area)?;
        self.canvas.current_buffer_mut().reset();
        self.shown = Buffer::empty(area);
        self.clear = true;
        self.full = true;
        Ok(())
    }

    /// Draws one frame of `app` and writes what changed.
    pub fn paint(&mut self, app: &mut App) -> io::Result<()> {
        self.bytes.clear();
        self.bytes.extend_from_slice(BEGIN_SYNC);
        if self.clear {
            self.bytes.extend_from_slice(CLEAR_ALL);
        }
        let mut w = CellWriter::default();
        let screen = self.shown.area;
        let alone = (!self.full && !app.dirty)
            .then(|| super::ui::live_alone(app, screen))
            .flatten();
        let want = if let Some(area) = alone {
            let buf = self.canvas.current_buffer_mut();
            let cursor = super::ui::draw_live(app, buf);
            if app.ascii {
                super::term::asciify_area(buf, area);
            }
            for y in area.top()..area.bottom() {
                let row = usize::from(y) * usize::from(screen.width);
                let from = row + usize::from(area.x);
                let to = row + usize::from(area.right());
                diff(&mut self.shown, buf, from..to, &mut w, &mut self.bytes);
            }
            // The canvas is left empty, as ratatui's frames expect it.
            for y in area.top()..area.bottom() {
                let row = usize::from(y) * usize::from(screen.width);
                let from = row + usize::from(area.x);
                let to = row + usize::from(area.right());
                buf.content[from..to].fill(Cell::EMPTY);
            }
            self.counts.live += 1;
            cursor
        } else {
            let done = self.canvas.draw(|f| {
                super::ui::draw(f, app);
                if app.ascii {
                    super::term::asciify(f.buffer_mut());
                }
            })?;
            let all = 0..done.buffer.content.len();
            diff(&mut self.shown, done.buffer, all, &mut w, &mut self.bytes);
            self.counts.whole += 1;
            self.canvas.backend().cursor()
        };
        self.full = false;
        if w.look.is_some() {
            self.bytes.extend_from_slice(b"\x1b[0m");
        }
        match want {
            Some(p) => {
                if w.wrote || self.cursor != Some(p) {
                    if self.cursor.is_none() {
                        self.bytes.extend_from_slice(SHOW_CURSOR);
                    }
                    move_to(&mut self.bytes, p.x, p.y);
                }
            }
            None => {
                if self.cursor.is_some() {
                    self.bytes.extend_from_slice(HIDE_CURSOR);
                }
            }
        }
        self.cursor = want;
        if self.bytes.len() == BEGIN_SYNC.len() {
            self.counts.unchanged += 1;
            return Ok(());
        }
        self.clear = false;
        self.bytes.extend_from_slice(END_SYNC);
        self.out.write_all(&self.bytes)?;
        self.out.flush()
    }
}

impl<W: Write> Screen for Painter<W> {
    fn frame(&mut self, app: &mut App) -> io::Result<()> {
        self.paint(app)
    }

    fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        self.set_size(cols, rows)
    }

    fn notify(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.out.flush()
    }

    fn hand_over(&mut self) -> io::Result<()> {
        self.out.flush()?;
        super::term::hand_over();
        Ok(())
    }

    fn take_back(&mut self) -> io::Result<()> {
        super::term::take_back()?;
        // The screen was cleared and the cursor hidden; its size may have changed while
        // the child had it (no resize event was read then).
        let area = self.shown.area;
        self.shown = Buffer::empty(area);
        self.cursor = None;
        self.full = true;
        if let Some(ask) = self.ask_size {
            let (cols, rows) = ask()?;
            self.set_size(cols, rows)?;
        }
        Ok(())
    }
}

/// The state of the writing of one frame's cells.
#[derive(Default)]
struct CellWriter {
    /// The look last written, `None` before the first cell (the terminal's is unknown).
    look: Option<(Color, Color, Modifier)>,
    /// Where the last cell was written.
    last: Option<(u16, u16)>,
    wrote: bool,
}

impl CellWriter {
    fn put(&mut self, out: &mut Vec<u8>, x: u16, y: u16, cell: &Cell) {
        if !matches!(self.last, Some((lx, ly)) if x == lx + 1 && y == ly) {
            move_to(out, x, y);
        }
        self.last = Some((x, y));
        let now = (cell.fg, cell.bg, cell.modifier);
        if self.look != Some(now) {
            sgr_into(now.0, now.1, now.2, out);
            self.look = Some(now);
        }
        out.extend_from_slice(cell.symbol().as_bytes());
        self.wrote = true;
    }
}

/// `CSI row;col H`, as crossterm's `MoveTo` writes it.
fn move_to(out: &mut Vec<u8>, x: u16, y: u16) {
    out.extend_from_slice(b"\x1b[");
    push_u32(out, u32::from(y) + 1);
    out.push(b';');
    push_u32(out, u32::from(x) + 1);
    out.push(b'H');
}

fn push_u32(out: &mut Vec<u8>, n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Modifiers visible on a blank cell (ratatui's diff refreshes the columns a wide character
/// left when its style shows there).
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

#[allow(deprecated)] // ratatui's diff still reads the field.
fn is_skip(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip)
        || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

/// Writes the cells of `next` in `range` (flat indices; a whole row's part, or whole rows)
/// that differ from `shown`, and makes `shown` equal to `next` there. The cells written and
/// their order are ratatui's `Buffer::diff` (wide characters, their trailing columns, the
/// emoji presentation sequences), but an unchanged cell costs one comparison: its width is
/// measured only when its symbol is more than one byte.
fn diff(
    shown: &mut Buffer,
    next: &Buffer,
    range: std::ops::Range<usize>,
    w: &mut CellWriter,
    out: &mut Vec<u8>,
) {
    let width = usize::from(next.area.width.max(1));
    let (ax, ay) = (next.area.x, next.area.y);
    let at = |i: usize| -> (u16, u16) { ((i % width) as u16 + ax, (i / width) as u16 + ay) };
    let end = range.end.min(next.content.len()).min(shown.content.len());
    let mut pos = range.start;
    let cells = &next.content;
    while pos < end {
        let i = pos;
        pos += 1;
        let current = &cells[i];
        let previous = &shown.content[i];
        match current.diff_option {
            CellDiffOption::Skip => {}
            _ if is_skip(current) => {}
            CellDiffOption::ForcedWidth(fw) => {
                pos = pos.saturating_add(usize::from(fw.get().saturating_sub(1)));
                if current != previous {
                    let (x, y) = at(i);
                    w.put(out, x, y, current);
                }
                copy(shown, next, i, pos.min(end));
                continue;
            }
            CellDiffOption::None | CellDiffOption::AlwaysUpdate => {
                let plain = matches!(current.diff_option, CellDiffOption::None);
                if plain && current == previous {
                    if current.symbol().len() > 1 {
                        let cw = usize::from(current.cell_width());
                        let skip = cw.saturating_sub(1);
                        copy(shown, next, pos, (pos + skip).min(end));
                        pos += skip;
                    }
                    continue;
                }
                let cw = usize::from(current.cell_width());
                let pw = usize::from(previous.cell_width());
                let (x, y) = at(i);
                w.put(out, x, y, current);
                if cw > 1 && current.symbol().chars().any(|c| c == '\u{FE0F}') {
                    // An emoji presentation sequence: the columns it covers are written
                    // where their symbol changed (some terminals leave them stale).
                    let mut j = i + 1;
                    let mut stop = (i + cw).min(end);
                    while j < stop {
                        let k = j;
                        j += usize::from(cells[k].cell_width().max(1));
                        stop = stop.max(j).min(end);
                        if !is_skip(&cells[k]) && shown.content[k].symbol() != cells[k].symbol() {
                            let (x, y) = at(k);
                            w.put(out, x, y, &cells[k]);
                        }
                    }
                    copy(shown, next, i, stop);
                    pos = stop;
                    continue;
                } else if cw > 1 {
                    let stop = (pos + cw - 1).min(end);
                    copy(shown, next, i, stop);
                    pos = stop;
                    continue;
                } else if pw > cw
                    && (previous.bg != Color::Reset
                        || previous.modifier.intersects(VISIBLE_ON_BLANK))
                {
                    // A wide character with a visible style left: every column it covered
                    // is written again.
                    let mut j = i + 1;
                    let mut stop = (i + pw).min(end);
                    while j < stop {
                        let k = j;
                        j += usize::from(cells[k].cell_width().max(1));
                        stop = stop.max(j).min(end);
                        if !is_skip(&cells[k]) {
                            let (x, y) = at(k);
                            w.put(out, x, y, &cells[k]);
                        }
                    }
                    copy(shown, next, i, stop);
                    pos = stop;
                    continue;
                }
            }
        }
        shown.content[i].clone_from(&cells[i]);
    }
}

/// `shown[from..to] = next[from..to]`.
fn copy(shown: &mut Buffer, next: &Buffer, from: usize, to: usize) {
    if from < to {
        shown.content[from..to].clone_from_slice(&next.content[from..to]);
    }
}

/// The backend of the widgets' canvas: writes nothing (the [`Painter`] compares and
/// writes), keeps the cursor ratatui asks for.
#[derive(Default)]
pub struct Canvas {
    visible: bool,
    at: Position,
}

impl Canvas {
    fn cursor(&self) -> Option<Position> {
        self.visible.then_some(self.at)
    }
}

impl RatatuiBackend for Canvas {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, _content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        // Not iterated: ratatui's diff is not computed.
        Ok(())
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.visible = false;
        Ok(())
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.visible = true;
        Ok(())
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        Ok(self.at)
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.at = position.into();
        Ok(())
    }

    fn clear(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn clear_region(&mut self, _clear_type: ClearType) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> io::Result<Size> {
        // A fixed viewport: never asked.
        Ok(Size::default())
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        Ok(WindowSize {
            columns_rows: Size::default(),
            pixels: Size::default(),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The SGR parameters of a colour: `base` is 30 (foreground) or 40 (background).
fn color_params(c: Color, base: u8, out: &mut Vec<u8>) {
    let n = |k: u8| u32::from(k + base);
    let bright = |k: u8| u32::from(k + base + 60);
    let code = match c {
        Color::Reset => n(9),
        Color::Black => n(0),
        Color::Red => n(1),
        Color::Green => n(2),
        Color::Yellow => n(3),
        Color::Blue => n(4),
        Color::Magenta => n(5),
        Color::Cyan => n(6),
        Color::Gray => n(7),
        Color::DarkGray => bright(0),
        Color::LightRed => bright(1),
        Color::LightGreen => bright(2),
        Color::LightYellow => bright(3),
        Color::LightBlue => bright(4),
        Color::LightMagenta => bright(5),
        Color::LightCyan => bright(6),
        Color::White => bright(7),
        Color::Indexed(k) if k < 8 => n(k),
        Color::Indexed(k) if k < 16 => bright(k - 8),
        Color::Indexed(k) => {
            push_u32(out, u32::from(base + 8));
            out.extend_from_slice(b";5;");
            push_u32(out, u32::from(k));
            return;
        }
        Color::Rgb(r, g, b) => {
            push_u32(out, u32::from(base + 8));
            out.extend_from_slice(b";2;");
            for (i, v) in [r, g, b].into_iter().enumerate() {
                if i > 0 {
                    out.push(b';');
                }
                push_u32(out, u32::from(v));
            }
            return;
        }
    };
    push_u32(out, code);
}

/// The SGR sequence that sets a cell's whole look from a reset: modifiers, then colours.
fn sgr_into(fg: Color, bg: Color, m: Modifier, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\x1b[0");
    for (flag, code) in [
        (Modifier::BOLD, b'1'),
        (Modifier::DIM, b'2'),
        (Modifier::ITALIC, b'3'),
        (Modifier::UNDERLINED, b'4'),
        (Modifier::SLOW_BLINK, b'5'),
        (Modifier::RAPID_BLINK, b'6'),
        (Modifier::REVERSED, b'7'),
        (Modifier::HIDDEN, b'8'),
        (Modifier::CROSSED_OUT, b'9'),
    ] {
        if m.contains(flag) {
            out.extend_from_slice(&[b';', code]);
        }
    }
    if fg != Color::Reset {
        out.push(b';');
        color_params(fg, 30, out);
    }
    if bg != Color::Reset {
        out.push(b';');
        color_params(bg, 40, out);
    }
    out.push(b'm');
}

#[cfg(test)]
fn sgr(fg: Color, bg: Color, m: Modifier) -> String {
    let mut out = Vec::new();
    sgr_into(fg, bg, m, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_written_as_their_own_codes() {
        let cases = [
            (Color::Red, Color::Reset, Modifier::empty(), "\x1b[0;31m"),
            (
                Color::DarkGray,
                Color::Black,
                Modifier::BOLD,
                "\x1b[0;1;90;40m",
            ),
            (
                Color::White,
                Color::Gray,
                Modifier::REVERSED,
                "\x1b[0;7;97;47m",
            ),
            (
                Color::LightCyan,
                Color::Reset,
                Modifier::empty(),
                "\x1b[0;96m",
            ),
            (
                Color::Indexed(3),
                Color::Indexed(12),
                Modifier::empty(),
                "\x1b[0;33;104m",
            ),
            (
                Color::Indexed(208),
                Color::Reset,
                Modifier::empty(),
                "\x1b[0;38;5;208m",
            ),
            (
                Color::Rgb(1, 2, 3),
                Color::Rgb(4, 5, 6),
                Modifier::empty(),
                "\x1b[0;38;2;1;2;3;48;2;4;5;6m",
            ),
            (
                Color::Reset,
                Color::Reset,
                Modifier::DIM | Modifier::UNDERLINED,
                "\x1b[0;2;4m",
            ),
        ];
        for (fg, bg, m, want) in cases {
            assert_eq!(sgr(fg, bg, m), want, "{fg:?} {bg:?} {m:?}");
        }
    }
}
