//! Stand-ins for pieces another branch (`tui-style`) builds: the theme, the key encoding for
//! attach, and the dialogs. Each sits behind one function or type so the cockpit never waits;
//! each is removed when the real piece is merged.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};

use super::role::Role;

/// The default ANSI-16 look; `no_color` keeps only attributes.
pub fn style(role: Role, no_color: bool) -> Style {
    let (fg, m) = match role {
        Role::Text => (None, Modifier::empty()),
        Role::Dim => (Some(Color::DarkGray), Modifier::empty()),
        Role::Title => (Some(Color::Cyan), Modifier::BOLD),
        Role::Border => (Some(Color::DarkGray), Modifier::empty()),
        Role::BorderFocused => (Some(Color::Cyan), Modifier::BOLD),
        Role::Selected => (None, Modifier::REVERSED),
        Role::Header => (Some(Color::White), Modifier::BOLD),
        Role::StatusBar => (None, Modifier::empty()),
        Role::Key => (Some(Color::Yellow), Modifier::BOLD),
        Role::StateRunning => (Some(Color::Green), Modifier::empty()),
        Role::StateIdle => (Some(Color::Cyan), Modifier::empty()),
        Role::StateStarting => (Some(Color::Yellow), Modifier::empty()),
        Role::StateStopped => (Some(Color::Gray), Modifier::empty()),
        Role::StateFailed => (Some(Color::Red), Modifier::BOLD),
        Role::StateLost => (Some(Color::Magenta), Modifier::empty()),
        Role::StateCleaned => (Some(Color::DarkGray), Modifier::empty()),
        Role::Demo => (Some(Color::Magenta), Modifier::empty()),
        Role::Marker => (Some(Color::Yellow), Modifier::empty()),
        Role::Error => (Some(Color::Red), Modifier::BOLD),
        Role::Warning => (Some(Color::Yellow), Modifier::BOLD),
        Role::Success => (Some(Color::Green), Modifier::empty()),
        Role::Unavailable => (Some(Color::DarkGray), Modifier::CROSSED_OUT),
        Role::Modal => (None, Modifier::empty()),
        Role::Input => (None, Modifier::UNDERLINED),
        Role::Highlight => (Some(Color::Yellow), Modifier::BOLD),
    };
    let mut st = Style::default().add_modifier(m);
    if !no_color && let Some(c) = fg {
        st = st.fg(c);
    }
    if no_color && matches!(role, Role::Dim | Role::Border | Role::StateCleaned) {
        st = st.add_modifier(Modifier::DIM);
    }
    st
}

/// The bytes a key sends to a program in a terminal (xterm conventions): application cursor
/// mode changes the arrows, Home and End; Alt prefixes ESC.
pub fn encode_key(key: &KeyEvent, app_cursor: bool) -> Vec<u8> {
    let m = key.modifiers;
    let mut out = Vec::new();
    let csi_mod = 1
        + u8::from(m.contains(KeyModifiers::SHIFT))
        + 2 * u8::from(m.contains(KeyModifiers::ALT))
        + 4 * u8::from(m.contains(KeyModifiers::CONTROL));
    let cursor = |c: char, out: &mut Vec<u8>| {
        if csi_mod > 1 {
            out.extend_from_slice(format!("\x1b[1;{csi_mod}{c}").as_bytes());
        } else if app_cursor {
            out.extend_from_slice(format!("\x1bO{c}").as_bytes());
        } else {
            out.extend_from_slice(format!("\x1b[{c}").as_bytes());
        }
    };
    let tilde = |n: u8, out: &mut Vec<u8>| {
        if csi_mod > 1 {
            out.extend_from_slice(format!("\x1b[{n};{csi_mod}~").as_bytes());
        } else {
            out.extend_from_slice(format!("\x1b[{n}~").as_bytes());
        }
    };
    match key.code {
        KeyCode::Char(c) => {
            if m.contains(KeyModifiers::ALT) {
                out.push(0x1b);
            }
            if m.contains(KeyModifiers::CONTROL) {
                let b = match c.to_ascii_lowercase() {
                    c @ 'a'..='z' => c as u8 - b'a' + 1,
                    '@' | ' ' | '2' => 0,
                    '[' | '3' => 27,
                    '\\' | '4' => 28,
                    ']' | '5' => 29,
                    '^' | '6' => 30,
                    '_' | '7' | '-' => 31,
                    '?' | '8' => 127,
                    other => {
                        let mut b = [0u8; 4];
                        out.extend_from_slice(other.encode_utf8(&mut b).as_bytes());
                        return out;
                    }
                };
                out.push(b);
            } else {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
        KeyCode::Enter => {
            if m.contains(KeyModifiers::ALT) {
                out.push(0x1b);
            }
            out.push(b'\r');
        }
        KeyCode::Tab => out.push(b'\t'),
        KeyCode::BackTab => out.extend_from_slice(b"\x1b[Z"),
        KeyCode::Backspace => {
            if m.contains(KeyModifiers::ALT) {
                out.push(0x1b);
            }
            out.push(if m.contains(KeyModifiers::CONTROL) {
                0x08
            } else {
                0x7f
            });
        }
        KeyCode::Esc => out.push(0x1b),
        KeyCode::Up => cursor('A', &mut out),
        KeyCode::Down => cursor('B', &mut out),
        KeyCode::Right => cursor('C', &mut out),
        KeyCode::Left => cursor('D', &mut out),
        KeyCode::Home => cursor('H', &mut out),
        KeyCode::End => cursor('F', &mut out),
        KeyCode::Insert => tilde(2, &mut out),
        KeyCode::Delete => tilde(3, &mut out),
        KeyCode::PageUp => tilde(5, &mut out),
        KeyCode::PageDown => tilde(6, &mut out),
        KeyCode::F(n @ 1..=4) => {
            let c = [b'P', b'Q', b'R', b'S'][usize::from(n - 1)];
            if csi_mod > 1 {
                out.extend_from_slice(format!("\x1b[1;{csi_mod}{}", c as char).as_bytes());
            } else {
                out.extend_from_slice(&[0x1b, b'O', c]);
            }
        }
        KeyCode::F(n @ 5..=12) => {
            let code = [15u8, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)];
            tilde(code, &mut out);
        }
        _ => {}
    }
    out
}

/// Pasted text as typed bytes: wrapped in bracketed-paste markers when the program asked for
/// them (an end marker inside the text is removed, so a paste cannot end itself early).
pub fn encode_paste(text: &str, bracketed: bool) -> Vec<u8> {
    if bracketed {
        let inner = text.replace("\x1b[201~", "");
        let mut out = b"\x1b[200~".to_vec();
        out.extend_from_slice(inner.as_bytes());
        out.extend_from_slice(b"\x1b[201~");
        out
    } else {
        text.replace("\r\n", "\r").replace('\n', "\r").into_bytes()
    }
}

/// A one-line text field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineInput {
    pub text: String,
}

impl LineInput {
    /// Applies an editing key; returns whether the key was used.
    pub fn edit(&mut self, key: &KeyEvent) -> bool {
        match key.code {
            KeyCode::Char(c)
                if !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                self.text.push(c);
                true
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.text.clear();
                true
            }
            KeyCode::Char('w') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                let t = self.text.trim_end();
                let cut = t.rfind(' ').map_or(0, |i| i + 1);
                self.text.truncate(cut);
                true
            }
            KeyCode::Backspace => {
                self.text.pop();
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn keys_encode_like_xterm() {
        let n = KeyModifiers::NONE;
        assert_eq!(encode_key(&k(KeyCode::Char('a'), n), false), b"a");
        assert_eq!(
            encode_key(&k(KeyCode::Char('c'), KeyModifiers::CONTROL), false),
            [3]
        );
        assert_eq!(
            encode_key(&k(KeyCode::Char('x'), KeyModifiers::ALT), false),
            b"\x1bx"
        );
        assert_eq!(encode_key(&k(KeyCode::Up, n), false), b"\x1b[A");
        assert_eq!(encode_key(&k(KeyCode::Up, n), true), b"\x1bOA");
        assert_eq!(
            encode_key(&k(KeyCode::Left, KeyModifiers::CONTROL), true),
            b"\x1b[1;5D"
        );
        assert_eq!(encode_key(&k(KeyCode::F(1), n), false), b"\x1bOP");
        assert_eq!(encode_key(&k(KeyCode::F(5), n), false), b"\x1b[15~");
        assert_eq!(encode_key(&k(KeyCode::Enter, n), false), b"\r");
        assert_eq!(encode_key(&k(KeyCode::Char('é'), n), false), "é".as_bytes());
    }

    #[test]
    fn paste_is_bracketed_on_request_and_cannot_end_itself() {
        assert_eq!(encode_paste("a\nb", false), b"a\rb");
        assert_eq!(encode_paste("x\x1b[201~y", true), b"\x1b[200~xy\x1b[201~");
    }
}
