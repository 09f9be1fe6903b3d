//! The operator's terminal: taken over (raw mode, alternate screen, bracketed paste, mouse
//! only when configured) and given back on every way out — a normal return, an error (the
//! guard's drop), a panic (a hook that restores before the panic message is printed), and
//! SIGTERM/SIGHUP (the event loop turns them into a normal return).
//!
//! What the terminal can draw comes from `TERM` ([`TermKind`]): `dumb` cannot hold the
//! full-screen cockpit at all; the Linux console (`linux`) and the old DEC terminals (`vt…`)
//! get every frame through [`asciify`] — ASCII borders and glyphs.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use ratatui::crossterm::{cursor, event, execute, terminal};

/// Set while the cockpit holds the terminal.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether mouse capture was turned on (bit 0).
static MOUSE: AtomicU8 = AtomicU8::new(0);
static HOOK: Once = Once::new();

/// Holds the terminal; restores it when dropped.
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    /// Takes the terminal over. `mouse` turns mouse capture on (off by default, so that the
    /// terminal's own selection keeps working for copying text).
    pub fn enter(mouse: bool) -> std::io::Result<TerminalGuard> {
        install_panic_hook();
        MOUSE_WANTED.store(mouse, Ordering::SeqCst);
        let guard = TerminalGuard { _private: () };
        take(mouse)?;
        Ok(guard)
    }
}

/// Whether the cockpit asked for mouse capture (kept for [`take_back`]).
static MOUSE_WANTED: AtomicBool = AtomicBool::new(false);

fn take(mouse: bool) -> std::io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let mut out = std::io::stdout();
    execute!(
        out,
        terminal::EnterAlternateScreen,
        event::EnableBracketedPaste,
        cursor::Hide,
        terminal::Clear(terminal::ClearType::All)
    )?;
    if mouse {
        MOUSE.store(1, Ordering::SeqCst);
        execute!(out, event::EnableMouseCapture)?;
    }
    Ok(())
}

/// Gives the terminal to another program for a while (`proctor rig attach`): the normal
/// screen, cooked mode, the cursor shown, as [`restore`] leaves it.
pub fn hand_over() {
    restore();
}

/// Takes the terminal back after [`hand_over`] (raw mode, the alternate screen cleared, the
/// mouse as it was); the next frame must be drawn in full.
pub fn take_back() -> std::io::Result<()> {
    take(MOUSE_WANTED.load(Ordering::SeqCst))
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back, once; safe to call from a panic hook. Errors are ignored (the
/// terminal may be gone: a hang-up).
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = std::io::stdout();
    if MOUSE.swap(0, Ordering::SeqCst) == 1 {
        let _ = execute!(out, event::DisableMouseCapture);
    }
    let _ = execute!(
        out,
        terminal::EndSynchronizedUpdate,
        event::DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// True when both stdin and stdout are terminals.
pub fn is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// What the terminal named by `TERM` can draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermKind {
    /// `TERM=dumb`: no cursor addressing; the full-screen cockpit is refused.
    Dumb,
    /// The Linux console (`linux`, `linux-16color`, …) and the DEC terminals (`vt100`,
    /// `vt220`, …): their fonts lack the box-drawing and symbol glyphs; ASCII only.
    Ascii,
    /// Anything else (or `TERM` unset): Unicode borders and glyphs.
    Full,
}

impl TermKind {
    /// The kind of the terminal `term` names (the value of `TERM`).
    pub fn of(term: Option<&std::ffi::OsStr>) -> TermKind {
        let Some(t) = term.and_then(|t| t.to_str()) else {
            return TermKind::Full;
        };
        let t = t.trim();
        if t == "dumb" {
            TermKind::Dumb
        } else if t == "linux" || t.starts_with("linux-") || t.starts_with("vt") {
            TermKind::Ascii
        } else {
            TermKind::Full
        }
    }

    /// The kind of this process's terminal.
    pub fn from_env() -> TermKind {
        TermKind::of(std::env::var_os("TERM").as_deref())
    }
}

/// The ASCII stand-in of a glyph the cockpit (or a program in its live pane) draws, for a
/// terminal that can show ASCII only; `None` for a character that is kept (ASCII, and
/// letters of other scripts, which are content).
pub fn ascii_for(c: char) -> Option<char> {
    Some(match c {
        // Box drawing: lines, corners and junctions.
        '═' | '━' => '=',
        '─' | '┄' | '┅' | '┈' | '┉' | '╌' | '╍' | '╴' | '╶' | '╸' | '╺' | '╼' | '╾' => {
            '-'
        }
        '│' | '┃' | '┆' | '┇' | '┊' | '┋' | '╎' | '╏' | '║' | '╵' | '╷' | '╹' | '╻' | '╽' | '╿' => {
            '|'
        }
        '\u{2500}'..='\u{257f}' => '+',
        // Block elements: the input cursor and bars.
        '▏' | '▎' | '▍' | '▌' | '▐' | '▕' => '|',
        '\u{2580}'..='\u{259f}' => '#',
        // Marks and arrows.
        '›' | '▸' | '▶' | '►' | '→' | '↳' | '⟩' | '»' => '>',
        '‹' | '◂' | '◀' | '◄' | '←' | '⟨' | '«' => '<',
        '▾' | '▼' | '↓' => 'v',
        '▴' | '▲' | '↑' => '^',
        '●' | '•' | '◆' | '■' | '◉' | '★' => '*',
        '○' | '◇' | '□' | '◦' => 'o',
        '✓' | '✔' | '×' | '✗' | '✘' => 'x',
        '⎇' => '@',
        '·' => '.',
        '…' => '~',
        '–' | '—' | '−' => '-',
        '“' | '”' | '„' => '"',
        '‘' | '’' => '\'',
        _ => return None,
    })
}

/// Replaces every glyph of `buf` that has an ASCII stand-in (see [`ascii_for`]).
pub fn asciify(buf: &mut ratatui::buffer::Buffer) {
    asciify_cells(buf.content.iter_mut());
}

/// [`asciify`] for the cells of `area` only.
pub fn asciify_area(buf: &mut ratatui::buffer::Buffer, area: ratatui::layout::Rect) {
    let area = area.intersection(buf.area);
    let width = usize::from(buf.area.width);
    for y in area.top()..area.bottom() {
        let row = usize::from(y - buf.area.y) * width;
        let from = row + usize::from(area.x - buf.area.x);
        asciify_cells(buf.content[from..from + usize::from(area.width)].iter_mut());
    }
}

fn asciify_cells<'a>(cells: impl Iterator<Item = &'a mut ratatui::buffer::Cell>) {
    for cell in cells {
        let sym = cell.symbol();
        if sym.is_ascii() {
            continue;
        }
        let mut chars = sym.chars();
        if let (Some(c), None) = (chars.next(), chars.next())
            && let Some(a) = ascii_for(c)
        {
            let mut b = [0u8; 4];
            cell.set_symbol(a.encode_utf8(&mut b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_kinds() {
        let k = |t: &str| TermKind::of(Some(std::ffi::OsStr::new(t)));
        assert_eq!(k("dumb"), TermKind::Dumb);
        assert_eq!(k("linux"), TermKind::Ascii);
        assert_eq!(k("linux-16color"), TermKind::Ascii);
        assert_eq!(k("vt100"), TermKind::Ascii);
        assert_eq!(k("xterm-256color"), TermKind::Full);
        assert_eq!(k("screen"), TermKind::Full);
        assert_eq!(TermKind::of(None), TermKind::Full);
    }

    #[test]
    fn asciify_keeps_ascii_and_letters_and_replaces_glyphs() {
        use ratatui::buffer::Buffer;
        use ratatui::layout::Rect;
        let mut b = Buffer::empty(Rect::new(0, 0, 16, 1));
        b.set_string(0, 0, "╭─━│›…●·▏é世x", ratatui::style::Style::default());
        asciify(&mut b);
        let row: String = (0..16).map(|x| b[(x, 0)].symbol().to_string()).collect();
        // The focused pane's heavy lines stay distinct: `=`.
        assert_eq!(row, "+-=|>~*.|é世 x   ");
    }
}
