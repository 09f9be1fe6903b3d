//! Keys and pastes as the bytes a PTY expects, for an interactive attach.
//!
//! The encodings are xterm's (what `TERM=xterm-256color` programs read): printable
//! characters as UTF-8, Enter `\r`, Backspace DEL (`0x7f`), Tab, shift-Tab `ESC [ Z`, Esc,
//! ctrl with a letter as its C0 byte, alt as an ESC prefix. Cursor keys and Home/End are
//! `ESC [ A` in normal mode and `ESC O A` in application cursor mode (DECCKM, which the
//! program sets; read it from vt100's `Screen::application_cursor`); with modifiers they are
//! `ESC [ 1 ; m A` where m is 1 + shift (1) + alt (2) + ctrl (4) + meta (8). F1–F4 are
//! `ESC O P`…`ESC O S` (`ESC [ 1 ; m P` with modifiers), F5–F12 and Insert, Delete, PgUp,
//! PgDn are `ESC [ n ~` (`ESC [ n ; m ~`).
//!
//! A paste sends the text with its line ends as CR, as a terminal does; when the program has
//! turned bracketed paste on it is wrapped in `ESC [200~` … `ESC [201~`, and every
//! `ESC [201~` inside the text is removed first, so a paste cannot end the bracket early and
//! have the rest read as typed keys.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

const ESC: u8 = 0x1b;
const PASTE_START: &str = "\x1b[200~";
const PASTE_END: &str = "\x1b[201~";

/// The terminal modes the program in the PTY has set that change what keys send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputModes {
    /// DECCKM: cursor keys as `ESC O A` instead of `ESC [ A`.
    pub application_cursor: bool,
    /// Mode 2004: pastes wrapped in `ESC [200~` … `ESC [201~`.
    pub bracketed_paste: bool,
}

impl InputModes {
    /// The modes of a vt100 screen (the session's parsed terminal).
    pub fn of(screen: &vt100::Screen) -> InputModes {
        InputModes {
            application_cursor: screen.application_cursor(),
            bracketed_paste: screen.bracketed_paste(),
        }
    }
}

/// The bytes for `key`, or `None` when it sends nothing (a key release, or a key with no
/// terminal encoding such as Caps Lock).
pub fn encode_key(key: &KeyEvent, modes: InputModes) -> Option<Vec<u8>> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let mods = key.modifiers;
    let alt = mods.contains(KeyModifiers::ALT);
    let ctrl = mods.contains(KeyModifiers::CONTROL);
    let param = modifier_param(mods);
    let mut out = Vec::new();
    match key.code {
        KeyCode::Char(c) => {
            if alt {
                out.push(ESC);
            }
            let c = if mods.contains(KeyModifiers::SHIFT) && c.is_lowercase() {
                let mut upper = c.to_uppercase();
                match (upper.next(), upper.next()) {
                    (Some(u), None) => u,
                    _ => c,
                }
            } else {
                c
            };
            match ctrl.then(|| ctrl_byte(c)).flatten() {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        KeyCode::Enter => {
            if alt {
                out.push(ESC);
            }
            out.push(b'\r');
        }
        KeyCode::Backspace => {
            if alt {
                out.push(ESC);
            }
            out.push(if ctrl { 0x08 } else { 0x7f });
        }
        KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => out.extend_from_slice(b"\x1b[Z"),
        KeyCode::Tab => {
            if alt {
                out.push(ESC);
            }
            out.push(b'\t');
        }
        KeyCode::BackTab => {
            if alt {
                out.push(ESC);
            }
            out.extend_from_slice(b"\x1b[Z");
        }
        KeyCode::Esc => {
            if alt {
                out.push(ESC);
            }
            out.push(ESC);
        }
        KeyCode::Null => out.push(0),
        KeyCode::Up => cursor(&mut out, b'A', param, modes),
        KeyCode::Down => cursor(&mut out, b'B', param, modes),
        KeyCode::Right => cursor(&mut out, b'C', param, modes),
        KeyCode::Left => cursor(&mut out, b'D', param, modes),
        KeyCode::Home => cursor(&mut out, b'H', param, modes),
        KeyCode::End => cursor(&mut out, b'F', param, modes),
        KeyCode::Insert => tilde(&mut out, 2, param),
        KeyCode::Delete => tilde(&mut out, 3, param),
        KeyCode::PageUp => tilde(&mut out, 5, param),
        KeyCode::PageDown => tilde(&mut out, 6, param),
        KeyCode::F(n @ 1..=4) => {
            let last = b'P' + (n - 1);
            match param {
                None => out.extend_from_slice(&[ESC, b'O', last]),
                Some(m) => {
                    out.extend_from_slice(format!("\x1b[1;{m}").as_bytes());
                    out.push(last);
                }
            }
        }
        KeyCode::F(n @ 5..=12) => {
            let code = match n {
                5 => 15,
                6 => 17,
                7 => 18,
                8 => 19,
                9 => 20,
                10 => 21,
                11 => 23,
                _ => 24,
            };
            tilde(&mut out, code, param);
        }
        _ => return None,
    }
    Some(out)
}

/// The bytes for pasted text: line ends as CR, wrapped in brackets when the program asked
/// for bracketed paste (with any end bracket inside the text removed).
pub fn encode_paste(text: &str, modes: InputModes) -> Vec<u8> {
    let mut body = text.replace("\r\n", "\r").replace('\n', "\r");
    if !modes.bracketed_paste {
        return body.into_bytes();
    }
    // Removing one end bracket can join the halves of another: repeat until none is left.
    while body.contains(PASTE_END) {
        body = body.replace(PASTE_END, "");
    }
    let mut out = Vec::with_capacity(body.len() + PASTE_START.len() + PASTE_END.len());
    out.extend_from_slice(PASTE_START.as_bytes());
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(PASTE_END.as_bytes());
    out
}

/// xterm's modifier parameter: 1 + shift + 2·alt + 4·ctrl + 8·meta, or `None` without
/// modifiers.
fn modifier_param(mods: KeyModifiers) -> Option<u8> {
    let mut m = 0;
    if mods.contains(KeyModifiers::SHIFT) {
        m += 1;
    }
    if mods.contains(KeyModifiers::ALT) {
        m += 2;
    }
    if mods.contains(KeyModifiers::CONTROL) {
        m += 4;
    }
    if mods.contains(KeyModifiers::META) {
        m += 8;
    }
    (m > 0).then_some(m + 1)
}

/// The C0 byte of ctrl with `c`, as xterm sends it; `None` when ctrl changes nothing.
fn ctrl_byte(c: char) -> Option<u8> {
    Some(match c {
        'a'..='z' => c as u8 - b'a' + 1,
        'A'..='Z' => c as u8 - b'A' + 1,
        '@' | ' ' | '2' => 0x00,
        '[' | '3' => 0x1b,
        '\\' | '4' => 0x1c,
        ']' | '5' => 0x1d,
        '^' | '6' => 0x1e,
        '_' | '7' | '/' | '-' => 0x1f,
        '?' | '8' => 0x7f,
        _ => return None,
    })
}

fn cursor(out: &mut Vec<u8>, last: u8, param: Option<u8>, modes: InputModes) {
    match param {
        None if modes.application_cursor => out.extend_from_slice(&[ESC, b'O', last]),
        None => out.extend_from_slice(&[ESC, b'[', last]),
        Some(m) => {
            out.extend_from_slice(format!("\x1b[1;{m}").as_bytes());
            out.push(last);
        }
    }
}

fn tilde(out: &mut Vec<u8>, code: u8, param: Option<u8>) {
    match param {
        None => out.extend_from_slice(format!("\x1b[{code}~").as_bytes()),
        Some(m) => out.extend_from_slice(format!("\x1b[{code};{m}~").as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NORMAL: InputModes = InputModes {
        application_cursor: false,
        bracketed_paste: false,
    };
    const APP: InputModes = InputModes {
        application_cursor: true,
        bracketed_paste: false,
    };
    const BRACKETED: InputModes = InputModes {
        application_cursor: false,
        bracketed_paste: true,
    };

    const N: KeyModifiers = KeyModifiers::NONE;
    const S: KeyModifiers = KeyModifiers::SHIFT;
    const C: KeyModifiers = KeyModifiers::CONTROL;
    const A: KeyModifiers = KeyModifiers::ALT;

    fn k(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn keys_encode_as_xterm_does() {
        let cs = C | S;
        let ca = C | A;
        let table: &[(KeyEvent, InputModes, &[u8])] = &[
            // Printable characters.
            (k(KeyCode::Char('a'), N), NORMAL, b"a"),
            (k(KeyCode::Char('A'), S), NORMAL, b"A"),
            (k(KeyCode::Char('a'), S), NORMAL, b"A"),
            (k(KeyCode::Char('?'), S), NORMAL, b"?"),
            (k(KeyCode::Char(' '), N), NORMAL, b" "),
            (k(KeyCode::Char('é'), N), NORMAL, "é".as_bytes()),
            (k(KeyCode::Char('日'), N), NORMAL, "日".as_bytes()),
            (k(KeyCode::Char('😀'), N), NORMAL, "😀".as_bytes()),
            // Editing keys.
            (k(KeyCode::Enter, N), NORMAL, b"\r"),
            (k(KeyCode::Enter, S), NORMAL, b"\r"),
            (k(KeyCode::Enter, A), NORMAL, b"\x1b\r"),
            (k(KeyCode::Backspace, N), NORMAL, b"\x7f"),
            (k(KeyCode::Backspace, C), NORMAL, b"\x08"),
            (k(KeyCode::Backspace, A), NORMAL, b"\x1b\x7f"),
            (k(KeyCode::Tab, N), NORMAL, b"\t"),
            (k(KeyCode::Tab, S), NORMAL, b"\x1b[Z"),
            (k(KeyCode::BackTab, S), NORMAL, b"\x1b[Z"),
            (k(KeyCode::Tab, A), NORMAL, b"\x1b\t"),
            (k(KeyCode::Esc, N), NORMAL, b"\x1b"),
            (k(KeyCode::Esc, A), NORMAL, b"\x1b\x1b"),
            // Ctrl: the C0 bytes.
            (k(KeyCode::Char('a'), C), NORMAL, b"\x01"),
            (k(KeyCode::Char('c'), C), NORMAL, b"\x03"),
            (k(KeyCode::Char('d'), C), NORMAL, b"\x04"),
            (k(KeyCode::Char('z'), C), NORMAL, b"\x1a"),
            (k(KeyCode::Char('C'), cs), NORMAL, b"\x03"),
            (k(KeyCode::Char(' '), C), NORMAL, b"\x00"),
            (k(KeyCode::Char('@'), C), NORMAL, b"\x00"),
            (k(KeyCode::Char('['), C), NORMAL, b"\x1b"),
            (k(KeyCode::Char('\\'), C), NORMAL, b"\x1c"),
            (k(KeyCode::Char('4'), C), NORMAL, b"\x1c"),
            (k(KeyCode::Char(']'), C), NORMAL, b"\x1d"),
            (k(KeyCode::Char('^'), C), NORMAL, b"\x1e"),
            (k(KeyCode::Char('_'), C), NORMAL, b"\x1f"),
            (k(KeyCode::Char('7'), C), NORMAL, b"\x1f"),
            (k(KeyCode::Char('/'), C), NORMAL, b"\x1f"),
            (k(KeyCode::Char('?'), C), NORMAL, b"\x7f"),
            (k(KeyCode::Char('1'), C), NORMAL, b"1"),
            (k(KeyCode::Char('é'), C), NORMAL, "é".as_bytes()),
            // Alt: an ESC prefix.
            (k(KeyCode::Char('x'), A), NORMAL, b"\x1bx"),
            (k(KeyCode::Char('X'), A | S), NORMAL, b"\x1bX"),
            (k(KeyCode::Char('é'), A), NORMAL, "\x1bé".as_bytes()),
            (k(KeyCode::Char('a'), ca), NORMAL, b"\x1b\x01"),
            // Cursor keys, normal and application mode.
            (k(KeyCode::Up, N), NORMAL, b"\x1b[A"),
            (k(KeyCode::Down, N), NORMAL, b"\x1b[B"),
            (k(KeyCode::Right, N), NORMAL, b"\x1b[C"),
            (k(KeyCode::Left, N), NORMAL, b"\x1b[D"),
            (k(KeyCode::Home, N), NORMAL, b"\x1b[H"),
            (k(KeyCode::End, N), NORMAL, b"\x1b[F"),
            (k(KeyCode::Up, N), APP, b"\x1bOA"),
            (k(KeyCode::Down, N), APP, b"\x1bOB"),
            (k(KeyCode::Right, N), APP, b"\x1bOC"),
            (k(KeyCode::Left, N), APP, b"\x1bOD"),
            (k(KeyCode::Home, N), APP, b"\x1bOH"),
            (k(KeyCode::End, N), APP, b"\x1bOF"),
            // With modifiers, the CSI 1;m form in both modes.
            (k(KeyCode::Right, C), NORMAL, b"\x1b[1;5C"),
            (k(KeyCode::Right, C), APP, b"\x1b[1;5C"),
            (k(KeyCode::Left, A), NORMAL, b"\x1b[1;3D"),
            (k(KeyCode::Up, S), NORMAL, b"\x1b[1;2A"),
            (k(KeyCode::Down, cs), NORMAL, b"\x1b[1;6B"),
            (k(KeyCode::Home, C), APP, b"\x1b[1;5H"),
            (k(KeyCode::End, S | A | C), NORMAL, b"\x1b[1;8F"),
            // The tilde keys.
            (k(KeyCode::Insert, N), NORMAL, b"\x1b[2~"),
            (k(KeyCode::Delete, N), NORMAL, b"\x1b[3~"),
            (k(KeyCode::PageUp, N), NORMAL, b"\x1b[5~"),
            (k(KeyCode::PageDown, N), APP, b"\x1b[6~"),
            (k(KeyCode::Delete, C), NORMAL, b"\x1b[3;5~"),
            (k(KeyCode::PageUp, S), NORMAL, b"\x1b[5;2~"),
            (k(KeyCode::PageDown, A), NORMAL, b"\x1b[6;3~"),
            // Function keys.
            (k(KeyCode::F(1), N), NORMAL, b"\x1bOP"),
            (k(KeyCode::F(2), N), NORMAL, b"\x1bOQ"),
            (k(KeyCode::F(3), N), NORMAL, b"\x1bOR"),
            (k(KeyCode::F(4), N), NORMAL, b"\x1bOS"),
            (k(KeyCode::F(5), N), NORMAL, b"\x1b[15~"),
            (k(KeyCode::F(6), N), NORMAL, b"\x1b[17~"),
            (k(KeyCode::F(7), N), NORMAL, b"\x1b[18~"),
            (k(KeyCode::F(8), N), NORMAL, b"\x1b[19~"),
            (k(KeyCode::F(9), N), NORMAL, b"\x1b[20~"),
            (k(KeyCode::F(10), N), NORMAL, b"\x1b[21~"),
            (k(KeyCode::F(11), N), NORMAL, b"\x1b[23~"),
            (k(KeyCode::F(12), N), NORMAL, b"\x1b[24~"),
            (k(KeyCode::F(1), S), NORMAL, b"\x1b[1;2P"),
            (k(KeyCode::F(4), C), NORMAL, b"\x1b[1;5S"),
            (k(KeyCode::F(5), C), NORMAL, b"\x1b[15;5~"),
            (k(KeyCode::F(12), S), NORMAL, b"\x1b[24;2~"),
        ];
        for (key, modes, want) in table {
            let got = encode_key(key, *modes);
            assert_eq!(
                got.as_deref(),
                Some(*want),
                "{key:?} {modes:?}: got {:?}, want {:?}",
                got.as_deref().map(String::from_utf8_lossy),
                String::from_utf8_lossy(want)
            );
        }
    }

    #[test]
    fn keys_without_an_encoding_send_nothing() {
        for key in [
            k(KeyCode::CapsLock, N),
            k(KeyCode::F(13), N),
            k(KeyCode::Menu, N),
        ] {
            assert_eq!(encode_key(&key, NORMAL), None, "{key:?}");
        }
        let mut release = k(KeyCode::Char('a'), N);
        release.kind = KeyEventKind::Release;
        assert_eq!(encode_key(&release, NORMAL), None);
        let mut repeat = k(KeyCode::Char('a'), N);
        repeat.kind = KeyEventKind::Repeat;
        assert_eq!(encode_key(&repeat, NORMAL).as_deref(), Some(&b"a"[..]));
    }

    #[test]
    fn pastes() {
        let table: &[(&str, InputModes, &[u8])] = &[
            ("hello", NORMAL, b"hello"),
            ("a\nb\r\nc", NORMAL, b"a\rb\rc"),
            ("hello", BRACKETED, b"\x1b[200~hello\x1b[201~"),
            ("a\nb", BRACKETED, b"\x1b[200~a\rb\x1b[201~"),
            // The end bracket inside a paste is removed, even when removing one forms another.
            (
                "x\x1b[201~rm -rf ~\n",
                BRACKETED,
                b"\x1b[200~xrm -rf ~\r\x1b[201~",
            ),
            (
                "\x1b[20\x1b[201~1~echo pwned\n",
                BRACKETED,
                b"\x1b[200~echo pwned\r\x1b[201~",
            ),
            ("", BRACKETED, b"\x1b[200~\x1b[201~"),
            ("日本", BRACKETED, "\x1b[200~日本\x1b[201~".as_bytes()),
        ];
        for (text, modes, want) in table {
            let got = encode_paste(text, *modes);
            assert_eq!(
                got,
                *want,
                "{text:?}: got {:?}",
                String::from_utf8_lossy(&got)
            );
            if modes.bracketed_paste {
                // Exactly one end bracket, at the end.
                let end = PASTE_END.as_bytes();
                let count = got.windows(end.len()).filter(|w| *w == end).count();
                assert_eq!(count, 1);
                assert!(got.ends_with(end));
            }
        }
    }

    #[test]
    fn modes_come_from_the_vt100_screen() {
        let size = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut parser = vt100::Parser::new(size(24), size(80), 0);
        assert_eq!(InputModes::of(parser.screen()), NORMAL);
        parser.process(b"\x1b[?1h\x1b[?2004h");
        let modes = InputModes::of(parser.screen());
        assert!(modes.application_cursor && modes.bracketed_paste);
        assert_eq!(
            encode_key(&k(KeyCode::Up, N), modes).as_deref(),
            Some(&b"\x1bOA"[..])
        );
        parser.process(b"\x1b[?1l\x1b[?2004l");
        assert_eq!(InputModes::of(parser.screen()), NORMAL);
    }
}
