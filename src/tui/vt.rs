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

use ratatui::buffer::{Buffer, Cell};
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
    /// Rows dropped because the history was full.
    dropped: u64,
    cols: u16,
    /// Rows that ever left the top of the screen (kept or not): how far the screen moved
    /// up between two drawings (a hint for [`RowMemo`]) and since a scrolled-back view was
    /// last anchored ([`VtTerm::anchor`]).
    scrolled: u64,
}

impl vt100::Callbacks for History {
    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, _alternate: bool) {
        let mut formatted = String::new();
        let mut st = vt100::capture::BasicFormattedCaptureState::new();
        // Writing into a String cannot fail.
        let _ = row.write_formatted_basic(&mut formatted, &mut st);
        self.scrolled += 1;
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
    /// Counts the changes of the terminal's contents (output, a snapshot, a resize): a
    /// drawing is reused while it stays the same.
    version: u64,
    /// The last drawing and what it was drawn from (a cache: drawing takes `&self`).
    drawn: std::cell::RefCell<Option<Drawn>>,
    /// How many drawings were made from the parser's cells, not from [`VtTerm::drawn`]
    /// (for the tests).
    cells_drawn: std::cell::Cell<u64>,
    /// The last drawing of each screen row, by the cells it was drawn from (a cache:
    /// drawing takes `&self`).
    memo: std::cell::RefCell<RowMemo>,
    /// How many screen rows were drawn from their cells, not from [`VtTerm::memo`] (for the
    /// tests).
    rows_drawn: std::cell::Cell<u64>,
    /// How many screen rows were read from the parser's cells at all (for the tests).
    rows_read: std::cell::Cell<u64>,
    /// Where the output given since the last drawing may have changed the screen.
    damage: std::cell::Cell<Damage>,
    /// Follows the escape sequences of the output, for [`Damage`].
    lex: Lex,
    /// The child set a scroll region at some time: a line feed may move rows below the
    /// cursor's, so [`Damage`] no longer follows it.
    region: bool,
    /// [`History::scrolled`] when a scrolled-back view was last kept on its rows.
    anchored: u64,
}

/// Where the output since the last drawing may have changed the screen. vt100 reports no
/// damage, so it is read from the bytes: output made only of text, CR, LF, BS, TAB, BEL and
/// SGR colour sequences moves the cursor down and right only, and changes no row above the
/// row the cursor started on (one row above it is read too, a margin: vt100 0.18 joins a
/// combining mark to the cell before the cursor on its own row, and drops one at the start
/// of a row); the rows above only move up, by the rows that left the top. Anything else (a cursor
/// move, an erase, an insert, a mode, a scroll region the child ever set, a resize, a
/// snapshot) may have changed any row: then every row is read and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Damage {
    /// Every row may have changed.
    all: bool,
    /// The first screen row (now) that may have changed; the rows above it are the rows of
    /// the last drawing moved up by the rows that left the top since.
    from: usize,
}

impl Damage {
    const NONE: Damage = Damage {
        all: false,
        from: usize::MAX,
    };
    const ALL: Damage = Damage { all: true, from: 0 };
}

/// Where the output's escape sequences stand between two bytes: just enough of the
/// terminal's grammar (ECMA-48, as vt100's parser reads it) to tell plain text and colours
/// from everything else. It errs one way only: a byte it is unsure of counts as a change
/// that may touch any row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Lex {
    #[default]
    Ground,
    /// After ESC.
    Esc,
    /// After ESC and intermediate bytes.
    EscInter,
    /// Inside a control sequence; `sgr` while it can still be a plain `CSI digits;… m`,
    /// `params` once it has a parameter byte.
    Csi { sgr: bool, params: bool },
    /// Inside a string (OSC, DCS, SOS, PM, APC), until BEL or ST.
    Str,
    /// ESC inside a string.
    StrEsc,
    /// After 0xC2, the first byte of the C1 controls in UTF-8.
    C2,
}

impl Lex {
    /// Reads `bytes`: whether they were text, CR, LF, BS, TAB, BEL and SGR only, beginning
    /// and ending outside any sequence; and whether they set a scroll region.
    fn read(&mut self, bytes: &[u8]) -> (bool, bool) {
        let mut simple = *self == Lex::Ground;
        let mut region = false;
        for &b in bytes {
            let (next, plain) = self.step(b, &mut region);
            *self = next;
            simple &= plain;
        }
        (simple && *self == Lex::Ground, region)
    }

    /// The state after `b`, and whether `b` keeps the output plain.
    fn step(self, b: u8, region: &mut bool) -> (Lex, bool) {
        match self {
            Lex::Ground => match b {
                0x1b => (Lex::Esc, true),
                b'\r' | b'\n' | 0x08 | b'\t' | 0x07 | 0x0b | 0x0c | 0x20..=0x7e => {
                    (Lex::Ground, true)
                }
                0xc2 => (Lex::C2, true),
                0x80.. => (Lex::Ground, true),
                _ => (Lex::Ground, false),
            },
            Lex::C2 => match b {
                0x80..=0x9f => (Lex::Ground, false),
                _ => Lex::Ground.step(b, region),
            },
            Lex::Esc => match b {
                b'[' => (
                    Lex::Csi {
                        sgr: true,
                        params: false,
                    },
                    true,
                ),
                b']' | b'P' | b'X' | b'^' | b'_' => (Lex::Str, false),
                0x1b => (Lex::Esc, false),
                0x20..=0x2f => (Lex::EscInter, false),
                _ => (Lex::Ground, false),
            },
            Lex::EscInter => match b {
                0x1b => (Lex::Esc, false),
                0x30..=0x7e | 0x18 | 0x1a => (Lex::Ground, false),
                _ => (Lex::EscInter, false),
            },
            Lex::Csi { sgr, .. } => match b {
                b'0'..=b'9' | b';' => (Lex::Csi { sgr, params: true }, true),
                b'm' if sgr => (Lex::Ground, true),
                b'r' => {
                    // DECSTBM (its reset, `CSI r`, counts too: a region of the other
                    // screen may stay).
                    *region = true;
                    (Lex::Ground, false)
                }
                0x40..=0x7e | 0x18 | 0x1a => (Lex::Ground, false),
                0x1b => (Lex::Esc, false),
                // A private marker, an intermediate, a control inside the sequence: not a
                // colour.
                _ => (
                    Lex::Csi {
                        sgr: false,
                        params: true,
                    },
                    false,
                ),
            },
            Lex::Str => match b {
                0x07 | 0x18 | 0x1a => (Lex::Ground, false),
                0x1b => (Lex::StrEsc, false),
                _ => (Lex::Str, false),
            },
            Lex::StrEsc => match b {
                b'\\' => (Lex::Ground, false),
                0x1b => (Lex::StrEsc, false),
                _ => (Lex::Str, false),
            },
        }
    }
}

/// The drawing of each screen row of the last drawing, with the vt100 cells it was drawn
/// from. A row is drawn the same from the same cells (at the same area width and colour
/// option), so a row whose cells equal a remembered row's is copied from that row's drawing
/// instead of being drawn cell by cell. When a new line scrolls the screen, the rows moved
/// up by the lines that left the top ([`History::scrolled`]) are looked for first: a
/// streaming terminal draws only its new rows. Only cells decide: the hint never makes a
/// row be copied whose cells differ (a scroll region, an insert, a redraw in place).
#[derive(Default)]
struct RowMemo {
    /// The area's width and the colour option the rows were drawn for.
    key: Option<(u16, bool)>,
    /// [`History::scrolled`] when they were drawn.
    scrolled: u64,
    /// By screen row; `None` for a row the drawing did not show.
    rows: Vec<Option<MemoRow>>,
}

struct MemoRow {
    /// The vt100 cells the row was drawn from, left to right, as far as the area shows.
    vt: Vec<vt100::Cell>,
    /// The cells drawn, the area's width (before the block cursor).
    cells: Vec<Cell>,
}

/// What a drawing depends on: the same key draws the same cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DrawKey {
    version: u64,
    area: Rect,
    scroll: usize,
    no_color: bool,
    block_cursor: bool,
}

/// The cells one drawing put in its area, row after row, and the cursor it found.
struct Drawn {
    key: DrawKey,
    cells: Vec<ratatui::buffer::Cell>,
    cursor: Option<(u16, u16)>,
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
            version: 0,
            drawn: std::cell::RefCell::new(None),
            cells_drawn: std::cell::Cell::new(0),
            memo: std::cell::RefCell::new(RowMemo::default()),
            rows_drawn: std::cell::Cell::new(0),
            rows_read: std::cell::Cell::new(0),
            damage: std::cell::Cell::new(Damage::ALL),
            lex: Lex::Ground,
            region: false,
            anchored: 0,
        }
    }

    /// How many screen rows were read from the parser's cells (the others were known
    /// unchanged from the output, [`Damage`]).
    pub fn rows_read(&self) -> u64 {
        self.rows_read.get()
    }

    /// How many screen rows were drawn from the parser's cells rather than copied from an
    /// earlier drawing of the same cells ([`RowMemo`]).
    pub fn rows_drawn(&self) -> u64 {
        self.rows_drawn.get()
    }

    /// How many drawings came from the parser's cells rather than from the last drawing
    /// (a terminal that did not change is drawn again by copying its cells).
    pub fn cells_drawn(&self) -> u64 {
        self.cells_drawn.get()
    }

    /// Replaces the screen with a server snapshot (`GET /screen`: its size, its
    /// `formatted` redraw, its seq); the history is kept.
    pub fn load_snapshot(&mut self, rows: u16, cols: u16, formatted: &str, seq: u64) {
        let mut hist = std::mem::take(self.parser.callbacks_mut());
        hist.cols = cols.max(1);
        self.parser = vt100::Parser::new_with_callbacks(nz(rows), nz(cols), 0, hist);
        self.parser.process(formatted.as_bytes());
        // The redraw itself must not move a scrolled-back view.
        self.anchored = self.parser.callbacks().scrolled;
        self.seq = seq;
        self.version += 1;
        self.damage.set(Damage::ALL);
    }

    /// Applies output bytes. A scrolled-back view stays on the same rows.
    pub fn feed(&mut self, bytes: &[u8]) {
        let (simple, region) = self.lex.read(bytes);
        self.region |= region;
        let before = self.parser.screen().cursor_position().0;
        let scrolled = self.parser.callbacks().scrolled;
        self.parser.process(bytes);
        let up = self.parser.callbacks().scrolled - scrolled;
        let up = usize::try_from(up).unwrap_or(usize::MAX);
        let d = self.damage.get();
        self.damage.set(if simple && !self.region && !d.all {
            // From the row the cursor started on (where it is now), and the row above it
            // (the margin above).
            let from = usize::from(before).saturating_sub(up).saturating_sub(1);
            Damage {
                all: false,
                from: d.from.saturating_sub(up).min(from),
            }
        } else {
            Damage::ALL
        });
        self.version += 1;
        self.anchor();
    }

    fn anchor(&mut self) {
        let scrolled = self.parser.callbacks().scrolled;
        let pushed = usize::try_from(scrolled - self.anchored).unwrap_or(usize::MAX);
        self.anchored = scrolled;
        if self.scroll > 0 {
            self.scroll = self.scroll.saturating_add(pushed).min(self.max_scroll());
        }
    }

    /// Resizes the screen; rows pushed off the top go to the history.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        if self.size() == (rows.max(1), cols.max(1)) {
            return;
        }
        self.parser.set_size(nz(rows), nz(cols));
        self.parser.callbacks_mut().cols = cols.max(1);
        self.version += 1;
        self.damage.set(Damage::ALL);
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
    ///
    /// A terminal whose contents, view, area and options did not change since its last
    /// drawing is drawn by copying that drawing's cells (most frames of a cockpit change
    /// something else: the list, a clock), not from the parser's cells again.
    pub fn render(&self, area: Rect, buf: &mut Buffer, opts: RenderOpts) -> Option<(u16, u16)> {
        let area = area.intersection(buf.area);
        if area.width == 0 || area.height == 0 {
            return None;
        }
        let key = DrawKey {
            version: self.version,
            area,
            scroll: self.scroll,
            no_color: opts.no_color,
            block_cursor: opts.block_cursor,
        };
        let w = usize::from(area.width);
        if let Some(d) = self.drawn.borrow().as_ref()
            && d.key == key
        {
            for (dy, row) in d.cells.chunks_exact(w).enumerate() {
                let start = buf.index_of(area.x, area.y + dy as u16);
                buf.content[start..start + w].clone_from_slice(row);
            }
            return d.cursor;
        }
        let cursor = self.render_cells(area, buf, opts);
        self.cells_drawn.set(self.cells_drawn.get() + 1);
        // The last drawing's cells are overwritten in place (no allocation a frame).
        let mut drawn = self.drawn.borrow_mut();
        let mut cells = drawn.take().map(|d| d.cells).unwrap_or_default();
        cells.resize(w * usize::from(area.height), Cell::EMPTY);
        for (dy, row) in cells.chunks_exact_mut(w).enumerate() {
            let start = buf.index_of(area.x, area.y + dy as u16);
            row.clone_from_slice(&buf.content[start..start + w]);
        }
        *drawn = Some(Drawn { key, cells, cursor });
        cursor
    }

    /// [`VtTerm::render`] from the parser's cells.
    fn render_cells(&self, area: Rect, buf: &mut Buffer, opts: RenderOpts) -> Option<(u16, u16)> {
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
        let mut cursor = None;
        let mut memo = self.memo.borrow_mut();
        let memo = &mut *memo;
        let key = (area.width, opts.no_color);
        let scrolled = self.parser.callbacks().scrolled;
        let mut old = if memo.key == Some(key) {
            std::mem::take(&mut memo.rows)
        } else {
            Vec::new()
        };
        let shift = usize::try_from(scrolled.saturating_sub(memo.scrolled)).unwrap_or(usize::MAX);
        let damage = self.damage.replace(Damage::NONE);
        let mut fresh: Vec<Option<MemoRow>> = Vec::new();
        fresh.resize_with(rows, || None);
        let mut vt: Vec<vt100::Cell> = Vec::with_capacity(usize::from(area.width));
        for dy in 0..h {
            let y = area.y + dy as u16;
            let idx = view_top + dy;
            let start = buf.index_of(area.x, y);
            let end = start + usize::from(area.width);
            // A row drawn cell by cell is cleared first: the screen may be narrower or
            // shorter than the area.
            if idx < hist_len {
                buf.content[start..end].iter_mut().for_each(Cell::reset);
                let line = &self.parser.callbacks().lines[idx];
                let mut scratch = self.scratch.borrow_mut();
                let p = scratch_for(&mut scratch, line.cols);
                replay(p, &line.formatted);
                let w = line.cols.min(area.width);
                row_cells(p.screen(), 0, w, &mut vt);
                draw_cells(&vt, w, area, y, buf, opts);
            } else if idx - hist_len < rows {
                let row = (idx - hist_len) as u16;
                let screen = self.parser.screen();
                let w = cols.min(area.width);
                let r = usize::from(row);
                // A row the output did not reach is the row it was, moved up by the rows that
                // left the top: its last drawing is taken as it is.
                let moved = (!damage.all && r < damage.from)
                    .then(|| old.get_mut(r.saturating_add(shift)).and_then(Option::take))
                    .flatten();
                let found = moved.or_else(|| {
                    row_cells(screen, row, w, &mut vt);
                    self.rows_read.set(self.rows_read.get() + 1);
                    // The row it was if the screen scrolled, then the same row.
                    [r.saturating_add(shift), r].into_iter().find_map(|at| {
                        let same = old
                            .get(at)
                            .and_then(Option::as_ref)
                            .is_some_and(|m| m.vt == vt);
                        if same { old[at].take() } else { None }
                    })
                });
                fresh[r] = Some(match found {
                    Some(m) => {
                        buf.content[start..end].clone_from_slice(&m.cells);
                        m
                    }
                    None => {
                        buf.content[start..end].iter_mut().for_each(Cell::reset);
                        draw_cells(&vt, w, area, y, buf, opts);
                        self.rows_drawn.set(self.rows_drawn.get() + 1);
                        MemoRow {
                            vt: vt.clone(),
                            cells: buf.content[start..end].to_vec(),
                        }
                    }
                });
                if scroll == 0 && row == crow && !screen.hide_cursor() && ccol < area.width {
                    cursor = Some((area.x + ccol, y));
                }
            } else {
                buf.content[start..end].iter_mut().for_each(Cell::reset);
            }
        }
        *memo = RowMemo {
            key: Some(key),
            scrolled,
            rows: fresh,
        };
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

/// The vt100 cells of one screen row, left to right, the first `w` of them.
fn row_cells(screen: &vt100::Screen, row: u16, w: u16, out: &mut Vec<vt100::Cell>) {
    out.clear();
    for col in 0..w {
        let Some(cell) = screen.cell(row, col) else {
            break;
        };
        out.push(cell.clone());
    }
}

/// Draws one row's cells (at most `w` columns) at row `y` of `area`.
fn draw_cells(
    cells: &[vt100::Cell],
    w: u16,
    area: Rect,
    y: u16,
    buf: &mut Buffer,
    opts: RenderOpts,
) {
    let start = buf.index_of(area.x, y);
    let row_cells = &mut buf.content[start..start + usize::from(area.width)];
    let mut col = 0u16;
    while col < w {
        let Some(cell) = cells.get(usize::from(col)) else {
            break;
        };
        if cell.is_wide_continuation() {
            col += 1;
            continue;
        }
        let width: u16 = if cell.is_wide() { 2 } else { 1 };
        let style = cell_style(cell, opts.no_color);
        let at = usize::from(col);
        if width == 2 && col + 1 >= w {
            // A wide character cut by the edge of the area: show that something is there.
            row_cells[at].set_symbol("…").set_style(style);
            break;
        }
        let sym = cell_symbol(cell.contents(), usize::from(width));
        row_cells[at].set_symbol(&sym).set_style(style);
        let drawn = (unicode_width::UnicodeWidthStr::width(sym.as_ref()) as u16).clamp(1, width);
        for k in 1..width {
            let c = &mut row_cells[at + usize::from(k)];
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
    /// What the agent said, or a stdout line that is not a protocol frame.
    Out,
    /// stderr: drawn dimmed.
    Err,
    /// A note: a turn boundary, a session id, usage, a plan, a file change, a gap. Dimmed.
    Note,
    /// The person's turn (what proctor wrote to the tool as the operator's input).
    Person,
    /// A reasoning summary: dimmed.
    Reasoning,
    /// A tool call, running or ended.
    Tool,
    /// A tool call that failed or was declined.
    ToolFailed,
    /// An error the tool reported (a retry included).
    Error,
    /// A warning, or a permission the tool asked for.
    Warning,
    /// A line of a tool call's output, shown under it when the calls are expanded.
    Detail,
}

/// One line of the log, sanitised.
#[derive(Debug, Clone)]
struct Entry {
    kind: LineKind,
    text: String,
    /// The tool call this line shows (updated in place when it ends).
    call: Option<String>,
    /// The call's output lines (sanitised, bounded), shown when expanded.
    detail: Vec<String>,
}

/// The most output lines kept under one tool call.
pub const DETAIL_LINES: usize = 40;

/// The output of a pipe session as its conversation, decoded by
/// [`crate::providers::conversation::Reader`] from both directions of the pipes (the same
/// decoder `proctor session tail` uses): the person's turns, the agent's words, reasoning
/// (dimmed), one line per tool call (updated in place when it ends, its output shown under it
/// when expanded), errors and retries, warnings, turn boundaries; other stdout lines as they
/// are, stderr lines dimmed. Every line goes through the sanitiser. Bounded like the
/// terminal's history.
pub struct PipeLog {
    entries: VecDeque<Entry>,
    /// Unfinished lines of stdout, stderr and stdin.
    partial: [Vec<u8>; 3],
    reader: crate::providers::conversation::Reader,
    said: crate::providers::conversation::Lines,
    cap: usize,
    scroll: usize,
    /// Tool calls' output shown under their lines.
    expanded: bool,
    pub seq: u64,
}

impl Default for PipeLog {
    fn default() -> PipeLog {
        PipeLog {
            entries: VecDeque::new(),
            partial: [Vec::new(), Vec::new(), Vec::new()],
            reader: crate::providers::conversation::Reader::new(None),
            said: crate::providers::conversation::Lines::new(),
            cap: HISTORY_LINES,
            scroll: 0,
            expanded: false,
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
        PipeLog {
            reader: crate::providers::conversation::Reader::for_tool(tool),
            ..PipeLog::default()
        }
    }

    /// Appends bytes of one stream (`stdin`: what proctor wrote to the tool).
    pub fn feed(&mut self, stream: crate::runs::Stream, bytes: &[u8]) {
        use crate::providers::conversation::Direction;
        use crate::runs::Stream;
        let (slot, dir) = match stream {
            Stream::Stdout => (0, Direction::Stdout),
            Stream::Stderr => (1, Direction::Stderr),
            Stream::Stdin => (2, Direction::Stdin),
        };
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut self.partial[slot]);
            line.extend_from_slice(&rest[..i]);
            self.line(dir, &line);
            rest = &rest[i + 1..];
        }
        self.partial[slot].extend_from_slice(rest);
        // A line without end must stay bounded too.
        if self.partial[slot].len() > 64 * 1024 {
            let line = std::mem::take(&mut self.partial[slot]);
            self.line(dir, &line);
        }
    }

    /// Marks a gap (frames the server no longer held).
    pub fn gap(&mut self, what: &str) {
        for l in self.said.finish() {
            self.push_line(&l);
        }
        self.push(LineKind::Note, format!("··· {what} ···"), None, Vec::new());
    }

    /// Shows or hides the tool calls' output under their lines.
    pub fn toggle_expanded(&mut self) {
        self.expanded = !self.expanded;
        self.scroll = self.scroll.min(self.len().saturating_sub(1));
    }

    pub fn expanded(&self) -> bool {
        self.expanded
    }

    fn line(&mut self, dir: crate::providers::conversation::Direction, raw: &[u8]) {
        use crate::providers::conversation::{Said, ToolStatus};
        for said in self.reader.read(dir, raw) {
            let lines = self.said.push(&said);
            let call = match &said {
                Said::ToolCall { status, output, .. } => Some((*status, output.clone())),
                _ => None,
            };
            for l in lines {
                let (Some((status, output)), Some(id)) = (&call, &l.call) else {
                    self.push_line(&l);
                    continue;
                };
                let kind = match status {
                    ToolStatus::Failed | ToolStatus::Declined => LineKind::ToolFailed,
                    _ => LineKind::Tool,
                };
                let detail: Vec<String> = output
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .take(DETAIL_LINES)
                    .map(|o| text::one_line(o, usize::MAX))
                    .collect();
                let t = text::one_line(&l.text, usize::MAX);
                let open = self
                    .entries
                    .iter_mut()
                    .rev()
                    .find(|e| e.call.as_deref() == Some(id.as_str()));
                match open {
                    Some(e) if *status != ToolStatus::Started => {
                        let grew = if self.expanded {
                            detail.len().saturating_sub(e.detail.len())
                        } else {
                            0
                        };
                        e.kind = kind;
                        e.text = t;
                        e.detail = detail;
                        if self.scroll > 0 {
                            self.scroll += grew;
                        }
                    }
                    _ => self.push(kind, t, Some(id.clone()), detail),
                }
            }
        }
    }

    fn push_line(&mut self, l: &crate::providers::conversation::Line) {
        use crate::providers::conversation::Voice;
        let kind = match l.voice {
            Voice::Person => LineKind::Person,
            Voice::Agent | Voice::Raw => LineKind::Out,
            Voice::Reasoning => LineKind::Reasoning,
            Voice::Tool => LineKind::Tool,
            Voice::Note => LineKind::Note,
            Voice::Error => LineKind::Error,
            Voice::Warning | Voice::Permission => LineKind::Warning,
            Voice::Stderr => LineKind::Err,
        };
        self.push(kind, text::one_line(&l.text, usize::MAX), None, Vec::new());
    }

    fn push(&mut self, kind: LineKind, text: String, call: Option<String>, detail: Vec<String>) {
        if self.entries.len() == self.cap.max(1) {
            self.entries.pop_front();
        }
        let shown = 1 + if self.expanded { detail.len() } else { 0 };
        self.entries.push_back(Entry {
            kind,
            text,
            call,
            detail,
        });
        if self.scroll > 0 {
            self.scroll = (self.scroll + shown).min(self.len());
        }
    }

    /// Lines, oldest first (each tool call's output under it when expanded), then what is
    /// not ended yet (the agent's words, then stderr's unfinished line).
    pub fn lines(&self) -> impl Iterator<Item = (LineKind, Cow<'_, str>)> {
        let expanded = self.expanded;
        let entries = self.entries.iter().flat_map(move |e| {
            let detail = e
                .detail
                .iter()
                .filter(move |_| expanded)
                .map(|d| (LineKind::Detail, Cow::Owned(format!("    │ {d}"))));
            std::iter::once((e.kind, Cow::Borrowed(e.text.as_str()))).chain(detail)
        });
        let pending: Vec<(LineKind, Cow<'_, str>)> = self
            .said
            .pending()
            .into_iter()
            .map(|l| {
                let kind = match l.voice {
                    crate::providers::conversation::Voice::Reasoning => LineKind::Reasoning,
                    _ => LineKind::Out,
                };
                (kind, Cow::Owned(text::one_line(&l.text, usize::MAX)))
            })
            .collect();
        // An unfinished protocol frame is not shown half-way; stderr is (and stdout when
        // nothing is decoded).
        let decodes = self.reader.decodes();
        let partial = self
            .partial
            .iter()
            .enumerate()
            .filter(move |(i, p)| !p.is_empty() && (*i == 1 || (*i == 0 && !decodes)))
            .map(|(i, p)| {
                let kind = if i == 1 { LineKind::Err } else { LineKind::Out };
                (kind, Cow::Owned(text::one_line_bytes(p, usize::MAX)))
            });
        entries.chain(pending).chain(partial)
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

    /// Draws the last lines that fit (or those `scroll` lines back), each in the style
    /// `style` gives its kind.
    pub fn render(&self, area: Rect, buf: &mut Buffer, style: impl Fn(LineKind) -> Style) {
        let h = usize::from(area.height);
        let all: Vec<(LineKind, Cow<'_, str>)> = self.lines().collect();
        let end = all.len().saturating_sub(self.scroll);
        let start = end.saturating_sub(h);
        for (i, (kind, line)) in all[start..end].iter().enumerate() {
            buf.set_stringn(
                area.x,
                area.y + i as u16,
                line,
                usize::from(area.width),
                style(*kind),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::Stream;

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

    /// A terminal drawn again with nothing changed is drawn from its last drawing (the
    /// parser's cells are not read again), into a buffer that held anything, with the same
    /// cells and cursor; output, a scroll, a resize, another area or other options draw from
    /// the parser again, and show the change.
    #[test]
    fn an_unchanged_terminal_is_drawn_from_its_last_drawing() {
        let mut t = VtTerm::with_history(2, 12, 10);
        t.feed("\x1b[31mred\x1b[0m wide:日\r\nsecond".as_bytes());
        let area = Rect::new(2, 1, 12, 2);
        let whole = Rect::new(0, 0, 16, 5);
        let opts = RenderOpts {
            block_cursor: true,
            ..RenderOpts::default()
        };
        let mut first = Buffer::empty(whole);
        let cur = t.render(area, &mut first, opts);
        assert_eq!(t.cells_drawn(), 1);
        // Into a buffer full of other cells (the previous frame's, reset or not).
        let mut again = Buffer::empty(whole);
        for c in &mut again.content {
            c.set_symbol("x").set_fg(Color::Green);
        }
        assert_eq!(t.render(area, &mut again, opts), cur);
        assert_eq!(
            t.cells_drawn(),
            1,
            "nothing changed: the last drawing is copied"
        );
        for y in area.y..area.y + area.height {
            for x in area.x..area.x + area.width {
                assert_eq!(again[(x, y)], first[(x, y)], "cell ({x},{y})");
            }
        }
        assert_eq!(
            again[(0, 0)].symbol(),
            "x",
            "nothing outside the area is touched"
        );
        // Each change is drawn from the parser again, and shows.
        t.feed(b"\r\nthird");
        let mut buf = Buffer::empty(whole);
        t.render(area, &mut buf, opts);
        assert_eq!(t.cells_drawn(), 2);
        assert_eq!(buf_text(&buf, area), ["second", "third"]);
        t.scroll_up(1);
        t.render(area, &mut buf, opts);
        assert_eq!(t.cells_drawn(), 3);
        assert_eq!(buf_text(&buf, area), ["red wide:日", "second"]);
        t.scroll_bottom();
        t.render(area, &mut buf, opts);
        assert_eq!(t.cells_drawn(), 4);
        t.render(Rect::new(1, 1, 12, 2), &mut buf, opts);
        assert_eq!(t.cells_drawn(), 5, "another area");
        t.render(Rect::new(1, 1, 12, 2), &mut buf, RenderOpts::default());
        assert_eq!(t.cells_drawn(), 6, "other options");
        t.resize(2, 4);
        let mut buf = Buffer::empty(whole);
        t.render(area, &mut buf, opts);
        assert_eq!(t.cells_drawn(), 7, "a resize");
        assert_eq!(buf_text(&buf, area), ["seco", "thir"]);
        t.load_snapshot(2, 12, "snap", 9);
        let mut buf = Buffer::empty(whole);
        t.render(area, &mut buf, opts);
        assert_eq!(t.cells_drawn(), 8, "a snapshot");
        assert_eq!(buf_text(&buf, area)[0], "snap");
    }

    /// A streaming terminal draws only its new rows: the rows a new line moved up are
    /// copied from their last drawing.
    #[test]
    fn a_scrolling_terminal_draws_only_its_new_rows() {
        let mut t = VtTerm::with_history(10, 30, 100);
        for i in 0..20 {
            t.feed(format!("\x1b[3{}mline {i}\x1b[m\r\n", i % 8).as_bytes());
        }
        let area = Rect::new(3, 2, 30, 10);
        let mut buf = Buffer::empty(Rect::new(0, 0, 40, 14));
        let opts = RenderOpts {
            block_cursor: true,
            ..RenderOpts::default()
        };
        t.render(area, &mut buf, opts);
        assert_eq!(t.rows_drawn(), 10);
        t.feed(b"line 20\r\n");
        t.render(area, &mut buf, opts);
        // Only the row where "line 20" was written: the other eight moved up unchanged,
        // and the new empty row at the bottom is the empty row that was there.
        assert_eq!(t.rows_drawn(), 11);
        assert_eq!(buf_text(&buf, area)[7], "line 19");
        assert_eq!(buf_text(&buf, area)[8], "line 20");
        t.feed(b"a\r\nb\r\nc");
        t.render(area, &mut buf, opts);
        assert_eq!(t.rows_drawn(), 14, "three new rows");
        assert_eq!(buf_text(&buf, area)[6..], ["line 20", "a", "b", "c"]);
        // Another width or colour option draws every row again.
        t.render(Rect::new(3, 2, 29, 10), &mut buf, opts);
        assert_eq!(t.rows_drawn(), 24);
    }

    /// Rows copied from an earlier drawing are exactly what drawing the cells gives, whatever
    /// the output did: a terminal drawn after every chunk (its rows remembered) against a
    /// new terminal given the same chunks and drawn once. Scroll regions, inserted and
    /// deleted lines, a reverse index, the alternate screen, wide characters, colours and
    /// resizes move rows in ways the scroll count does not describe.
    #[test]
    fn rows_copied_from_memory_are_what_the_cells_draw() {
        enum Op {
            Feed(&'static str),
            /// Output that sets a scroll region: after it, every row is read again (the
            /// second pass leaves these out, so plain output is followed by its damage).
            Region(&'static str),
            Resize(u16, u16),
        }
        use Op::{Feed, Region, Resize};
        let ops = [
            Feed("\x1b[31mone\x1b[m\r\ntwo\r\nthree\r\nfour\r\nfive\r\nsix"),
            Feed("\r\nseven\r\neight"),
            // A scroll region of rows 2-4: a new line there scrolls those rows only, and
            // the top row leaves nothing.
            Region("\x1b[2;4r\x1b[4;1Hregion\nmore\nagain"),
            Region("\x1b[r\x1b[6;1H"),
            // A region starting at the top: rows leave the top (the scroll count moves) but
            // the rows below the region stay where they are.
            Region("\x1b[1;3r\x1b[3;1H\ntop-region\n\x1b[r"),
            Feed("\x1b[2;1H\x1b[2Linserted\x1b[4;1H\x1b[1Mdeleted"),
            Feed("\x1b[1;1H\x1bMreverse\x1bM"),
            Feed("\x1b[1;32mgreen 日本 wide\x1b[m\r\nafter"),
            Feed("\x1b[?1049h\x1b[2J\x1b[1;1Halt one\r\nalt two\r\n\n\n\n\n\n\n"),
            Feed("alt scrolled\r\n"),
            Feed("\x1b[?1049l\r\nback"),
            Resize(5, 12),
            Feed("\r\nnarrow line that wraps around\r\nz"),
            Resize(9, 20),
            Feed("\r\nwider\r\n\x1b[7minverse\x1b[m\x1b[?25l"),
            Feed("\r\nl1\r\nl2\r\nl3\x1b[?25h"),
            Feed("\x1b[3;5Hx\x1b[K\x1b[1J"),
            // A combining mark at the start of a row joins the last cell of the row above,
            // when that row wrapped.
            Resize(7, 16),
            Feed("\r\n0123456789abcdefg"),
            Feed("\x08\u{301}"),
            // The cursor saved, then restored rows higher up, and written there.
            Feed("\x1b[2;1H\x1b7\x1b[7;1H"),
            Feed("\r\nnew\r\nlines"),
            Feed("\x1b8over"),
        ];
        let area = Rect::new(1, 1, 16, 7);
        let whole = Rect::new(0, 0, 20, 10);
        let plain = RenderOpts::default();
        let other = RenderOpts {
            block_cursor: true,
            no_color: true,
        };
        for (opts, regions) in [(plain, true), (other, true), (plain, false), (other, false)] {
            let mut kept = VtTerm::with_history(7, 16, 50);
            let mut done: Vec<&Op> = Vec::new();
            for op in ops.iter().filter(|op| regions || !matches!(op, Region(_))) {
                match op {
                    Feed(b) | Region(b) => kept.feed(b.as_bytes()),
                    Resize(r, c) => kept.resize(*r, *c),
                }
                done.push(op);
                let mut a = Buffer::empty(whole);
                let ca = kept.render(area, &mut a, opts);
                let mut fresh = VtTerm::with_history(7, 16, 50);
                for op in &done {
                    match op {
                        Feed(b) | Region(b) => fresh.feed(b.as_bytes()),
                        Resize(r, c) => fresh.resize(*r, *c),
                    }
                }
                let mut b = Buffer::empty(whole);
                let cb = fresh.render(area, &mut b, opts);
                assert_eq!(ca, cb, "cursor after {} ops", done.len());
                assert_eq!(
                    a,
                    b,
                    "after {} ops:\n{:?}\n{:?}",
                    done.len(),
                    buf_text(&a, area),
                    buf_text(&b, area)
                );
            }
            assert!(
                kept.rows_drawn() < ops.len() as u64 * 7,
                "some rows came from memory ({} drawn)",
                kept.rows_drawn()
            );
        }
    }

    /// Plain output (text, colours, new lines) is read from the parser only in the rows it
    /// reached: the rows above are the rows of the last drawing, moved up.
    #[test]
    fn plain_output_reads_only_the_rows_it_reached() {
        let mut t = VtTerm::with_history(10, 30, 100);
        for i in 0..20 {
            t.feed(format!("\x1b[3{}mline {i}\x1b[m\r\n", i % 8).as_bytes());
        }
        let area = Rect::new(0, 0, 30, 10);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(t.rows_read(), 10, "the first drawing reads every row");
        t.feed(b"\x1b[1mline 20\x1b[m\r\n");
        t.render(area, &mut buf, RenderOpts::default());
        // The row above the cursor's (the margin), the cursor's, and the new one.
        assert_eq!(t.rows_read(), 13);
        assert_eq!(buf_text(&buf, area)[8], "line 20");
        // A cursor move may change any row: every row is read.
        t.feed(b"\x1b[Hx");
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(t.rows_read(), 23);
        assert_eq!(buf_text(&buf, area)[0], "xine 12");
        // A sequence cut between two outputs counts in both.
        t.feed(b"\x1b[2");
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(t.rows_read(), 33);
        t.feed(b"J");
        t.render(area, &mut buf, RenderOpts::default());
        assert_eq!(t.rows_read(), 43);
        assert!(buf_text(&buf, area).iter().all(String::is_empty));
    }

    /// The same comparison as above, on random output: pieces of text, colours, new lines
    /// and every kind of sequence that moves rows or the cursor, cut at random bytes into the
    /// outputs the terminal is given (a sequence cut in two included), the terminal drawn
    /// after every output.
    #[test]
    fn rows_known_unchanged_are_what_the_cells_draw_on_random_output() {
        let pieces: &[&[u8]] = &[
            b"word ",
            b"a longer run of text that wraps past the edge ",
            b"\r\n",
            b"\n",
            b"\r",
            b"\x08",
            b"\t",
            b"\x07",
            b"\x1b[31m",
            b"\x1b[1;44m",
            b"\x1b[m",
            "\u{301}".as_bytes(),
            "日本".as_bytes(),
            "e\u{301}".as_bytes(),
            b"\x1b[H",
            b"\x1b[3;4H",
            b"\x1b[2J",
            b"\x1b[K",
            b"\x1b[1J",
            b"\x1b[2L",
            b"\x1b[1M",
            b"\x1b[2S",
            b"\x1b[1T",
            b"\x1bM",
            b"\x1b7",
            b"\x1b8",
            b"\x1bD",
            b"\x1bE",
            b"\x1b[2;5r",
            b"\x1b[r",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
            b"\x1b[?7l",
            b"\x1b[?7h",
            b"\x1b[4h",
            b"\x1b[4l",
            b"\x1b]0;title\x07",
            b"\x1bP1$r\x1b\\",
            "\u{9b}2J".as_bytes(),
            b"\x1b[A",
            b"\x1b[3@",
            b"\x1b[2P",
            b"\x1b[5X",
            b"\x0e",
            b"\x0f",
            b"\x18",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let area = Rect::new(0, 0, 12, 6);
        for round in 0..40 {
            let mut stream: Vec<u8> = Vec::new();
            for _ in 0..120 {
                // Mostly plain output, as agents write.
                let p = if next(2) == 0 {
                    pieces[next(pieces.len())]
                } else {
                    pieces[next(12)]
                };
                // A scroll region makes every later drawing read every row: half the
                // rounds have none, so the damage of plain output is what they follow.
                if round % 2 == 0 && p.ends_with(b"r") {
                    continue;
                }
                stream.extend_from_slice(p);
            }
            let mut kept = VtTerm::with_history(6, 12, 20);
            let mut given = 0;
            let mut fed: Vec<&[u8]> = Vec::new();
            while given < stream.len() {
                let n = (1 + next(24)).min(stream.len() - given);
                let chunk = &stream[given..given + n];
                given += n;
                kept.feed(chunk);
                fed.push(chunk);
                let mut a = Buffer::empty(area);
                let ca = kept.render(area, &mut a, RenderOpts::default());
                // The same outputs (vt100 need not read a sequence cut in two as it reads it
                // whole), drawn once.
                let mut fresh = VtTerm::with_history(6, 12, 20);
                for c in &fed {
                    fresh.feed(c);
                }
                let mut b = Buffer::empty(area);
                let cb = fresh.render(area, &mut b, RenderOpts::default());
                assert_eq!(ca, cb, "round {round}, cursor after {given} bytes");
                assert_eq!(
                    a,
                    b,
                    "round {round}, after {given} bytes ({:?}):\n{:?}\n{:?}",
                    String::from_utf8_lossy(chunk),
                    buf_text(&a, area),
                    buf_text(&b, area)
                );
            }
        }
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
        p.feed(Stream::Stdout, b"{\"type\":\"assistant\"}\nhalf");
        p.feed(Stream::Stderr, b"warn \x1b[31mred\x1b[0m\n");
        p.feed(Stream::Stdout, b" line\n\xe2\x80\xae evil\n");
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
        p.feed(Stream::Stdout, b"a\nb\nc\n");
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn pipe_log_decodes_the_agents_words() {
        // codex app-server: deltas joined, turn boundaries as notes, other frames hidden.
        let mut p = PipeLog::for_tool("codex");
        p.feed(Stream::Stdout, b"{\"method\":\"turn/started\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\"}}}\n");
        p.feed(
            Stream::Stdout,
            b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"hel\"}}\n",
        );
        p.feed(Stream::Stdout, b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"lo \\u001b[31mworld\\u202e\"}}\n");
        p.feed(Stream::Stdout, b"{\"method\":\"turn/completed\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\",\"status\":\"completed\"}}}\n");
        p.feed(Stream::Stdout, b"not json\n");
        let lines: Vec<(LineKind, String)> = p.lines().map(|(e, s)| (e, s.into_owned())).collect();
        assert_eq!(
            lines,
            [
                (LineKind::Note, "── turn started".to_string()),
                (
                    LineKind::Out,
                    "hello world\u{27e8}U+202E\u{27e9}".to_string()
                ),
                (LineKind::Note, "── turn ended: completed".to_string()),
                (LineKind::Out, "not json".to_string()),
            ]
        );
    }
}
