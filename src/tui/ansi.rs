//! The cockpit's terminal backend: crossterm's, but colours are written the way a theme
//! names them.
//!
//! crossterm writes every colour as an indexed one (`ESC[38;5;1m` for red), which terminals
//! without the 256-colour palette (the Linux console, some serial and old terminals) do not
//! read. Here a cell's style is one SGR sequence: the 16 ANSI colours as their own codes
//! (`31` red, `92` bright green, `39`/`49` the terminal's own), an indexed colour above 15 as
//! `38;5;N` and a truecolor as `38;2;R;G;B` (only a theme, or an agent's own output, that
//! asks for them). With the default theme the cockpit writes only the 16 colours. Everything
//! but the drawing of cells (cursor, clearing, size) is crossterm's.

use std::fmt::Write as _;
use std::io::{self, Write};

use ratatui::backend::{Backend as RatatuiBackend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::{cursor::MoveTo, queue, style::Print};
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};

/// A [`CrosstermBackend`] that writes colours as the 16 ANSI codes where it can.
pub struct Backend<W: Write> {
    inner: CrosstermBackend<W>,
}

impl<W: Write> Backend<W> {
    pub fn new(writer: W) -> Backend<W> {
        Backend {
            inner: CrosstermBackend::new(writer),
        }
    }
}

impl<W: Write> Write for Backend<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Write::flush(&mut self.inner)
    }
}

/// The SGR parameters of a colour: `base` is 30 (foreground) or 40 (background).
fn color_params(c: Color, base: u8, out: &mut String) {
    let named = |n: u8| n + base;
    let bright = |n: u8| n + base + 60;
    let _ = match c {
        Color::Reset => write!(out, "{}", named(9)),
        Color::Black => write!(out, "{}", named(0)),
        Color::Red => write!(out, "{}", named(1)),
        Color::Green => write!(out, "{}", named(2)),
        Color::Yellow => write!(out, "{}", named(3)),
        Color::Blue => write!(out, "{}", named(4)),
        Color::Magenta => write!(out, "{}", named(5)),
        Color::Cyan => write!(out, "{}", named(6)),
        Color::Gray => write!(out, "{}", named(7)),
        Color::DarkGray => write!(out, "{}", bright(0)),
        Color::LightRed => write!(out, "{}", bright(1)),
        Color::LightGreen => write!(out, "{}", bright(2)),
        Color::LightYellow => write!(out, "{}", bright(3)),
        Color::LightBlue => write!(out, "{}", bright(4)),
        Color::LightMagenta => write!(out, "{}", bright(5)),
        Color::LightCyan => write!(out, "{}", bright(6)),
        Color::White => write!(out, "{}", bright(7)),
        Color::Indexed(n) if n < 8 => write!(out, "{}", named(n)),
        Color::Indexed(n) if n < 16 => write!(out, "{}", bright(n - 8)),
        Color::Indexed(n) => write!(out, "{};5;{n}", base + 8),
        Color::Rgb(r, g, b) => write!(out, "{};2;{r};{g};{b}", base + 8),
    };
}

/// The SGR sequence that sets a cell's whole look from a reset: modifiers, then colours.
fn sgr(fg: Color, bg: Color, m: Modifier) -> String {
    let mut s = String::from("\x1b[0");
    for (flag, code) in [
        (Modifier::BOLD, 1),
        (Modifier::DIM, 2),
        (Modifier::ITALIC, 3),
        (Modifier::UNDERLINED, 4),
        (Modifier::SLOW_BLINK, 5),
        (Modifier::RAPID_BLINK, 6),
        (Modifier::REVERSED, 7),
        (Modifier::HIDDEN, 8),
        (Modifier::CROSSED_OUT, 9),
    ] {
        if m.contains(flag) {
            let _ = write!(s, ";{code}");
        }
    }
    if fg != Color::Reset {
        s.push(';');
        color_params(fg, 30, &mut s);
    }
    if bg != Color::Reset {
        s.push(';');
        color_params(bg, 40, &mut s);
    }
    s.push('m');
    s
}

impl<W: Write> RatatuiBackend for Backend<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        // The look last written, `None` before the first cell (the terminal's is unknown).
        let mut look: Option<(Color, Color, Modifier)> = None;
        let mut last: Option<Position> = None;
        for (x, y, cell) in content {
            if !matches!(last, Some(p) if x == p.x + 1 && y == p.y) {
                queue!(self.inner, MoveTo(x, y))?;
            }
            last = Some(Position { x, y });
            let now = (cell.fg, cell.bg, cell.modifier);
            if look != Some(now) {
                self.inner.write_all(sgr(now.0, now.1, now.2).as_bytes())?;
                look = Some(now);
            }
            queue!(self.inner, Print(cell.symbol()))?;
        }
        if look.is_some() {
            self.inner.write_all(b"\x1b[0m")?;
        }
        Ok(())
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        RatatuiBackend::flush(&mut self.inner)
    }
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
