//! Colours and attributes that proctor itself writes in front of untrusted text.
//!
//! When a PTY run's screen is printed with colours (`proctor session tail --color`), the
//! child's escape sequences never reach the operator's terminal: the screen is parsed by a
//! terminal emulator into cells, each cell's text goes through the sanitiser, and the cell's
//! style is written by [`sgr`] from structured values. This module decides which styles may
//! be written: the foreground and background colours (the 16 ANSI colours, the 256-colour
//! palette, 24-bit RGB), bold, dim, italic, underline and inverse. Nothing else: no blink,
//! no concealed (invisible) text, no hyperlinks, no other SGR parameter; and no sequence is
//! ever copied from the child.

use std::fmt::Write;

/// A colour as an emulator reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Colour {
    /// The terminal's own default.
    #[default]
    Default,
    /// A palette index: 0–7 the ANSI colours, 8–15 their bright forms, 16–255 the rest.
    Index(u8),
    /// 24-bit colour.
    Rgb(u8, u8, u8),
}

/// The style of a cell: what [`sgr`] may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    pub fg: Colour,
    pub bg: Colour,
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub inverse: bool,
}

impl Style {
    /// The terminal's default style (nothing to write).
    pub fn is_plain(&self) -> bool {
        *self == Style::default()
    }
}

/// The SGR sequence that sets exactly `style`, starting from a reset: `ESC [ 0 ; … m`
/// (`ESC [ 0 m` for the plain style). Colours 0–15 use their own codes (30–37, 90–97,
/// 40–47, 100–107) so a 16-colour terminal shows them; others use `38;5;N` / `38;2;R;G;B`.
pub fn sgr(style: &Style) -> String {
    let mut s = String::from("\u{1b}[0");
    if style.bold {
        s.push_str(";1");
    }
    if style.dim {
        s.push_str(";2");
    }
    if style.italic {
        s.push_str(";3");
    }
    if style.underline {
        s.push_str(";4");
    }
    if style.inverse {
        s.push_str(";7");
    }
    colour(&mut s, style.fg, 30, 90, 38);
    colour(&mut s, style.bg, 40, 100, 48);
    s.push('m');
    s
}

fn colour(s: &mut String, c: Colour, base: u8, bright: u8, ext: u8) {
    // Writing into a String cannot fail.
    let _ = match c {
        Colour::Default => Ok(()),
        Colour::Index(i @ 0..=7) => write!(s, ";{}", base + i),
        Colour::Index(i @ 8..=15) => write!(s, ";{}", bright + i - 8),
        Colour::Index(i) => write!(s, ";{ext};5;{i}"),
        Colour::Rgb(r, g, b) => write!(s, ";{ext};2;{r};{g};{b}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_become_one_sgr_from_a_reset() {
        assert_eq!(sgr(&Style::default()), "\u{1b}[0m");
        let st = Style {
            fg: Colour::Index(1),
            bg: Colour::Index(12),
            bold: true,
            underline: true,
            ..Style::default()
        };
        assert_eq!(sgr(&st), "\u{1b}[0;1;4;31;104m");
        let st = Style {
            fg: Colour::Index(208),
            bg: Colour::Rgb(1, 2, 3),
            dim: true,
            italic: true,
            inverse: true,
            ..Style::default()
        };
        assert_eq!(sgr(&st), "\u{1b}[0;2;3;7;38;5;208;48;2;1;2;3m");
    }

    #[test]
    fn what_is_written_is_only_sgr() {
        let st = Style {
            fg: Colour::Rgb(255, 255, 255),
            bg: Colour::Index(255),
            bold: true,
            dim: true,
            italic: true,
            underline: true,
            inverse: true,
        };
        let s = sgr(&st);
        let body = s.strip_prefix("\u{1b}[").and_then(|b| b.strip_suffix('m'));
        assert!(
            body.is_some_and(|b| b.bytes().all(|c| c.is_ascii_digit() || c == b';')),
            "{s:?}"
        );
    }
}
