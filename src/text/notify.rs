//! The desktop notification a terminal program may write to tell a person something:
//! a bell, then one notification escape, chosen from what the terminal's environment says
//! it speaks, and wrapped for tmux's passthrough inside tmux. [`notification`] is the only
//! code that builds these bytes; its title and body are untrusted (run names, a tool's
//! words), so they pass the one-line sanitiser first and can never end the escape early.
//!
//! | sequence | terminals (chosen when their environment says so) |
//! |---|---|
//! | OSC 9 `ESC ] 9 ; BODY BEL` (one message) | iTerm2 (`TERM_PROGRAM=iTerm.app`), VS Code (`vscode`), Warp (`WarpTerminal`), Apple Terminal (`Apple_Terminal`), kitty (`KITTY_WINDOW_ID`, `TERM=xterm-kitty`), Windows Terminal (`WT_SESSION`), ConEmu (`ConEmuPID`) |
//! | OSC 777 `ESC ] 777 ; notify ; TITLE ; BODY BEL` (title and body) | every other terminal: rxvt-unicode (where it was born), foot, Ghostty, WezTerm, VTE terminals (GNOME Terminal, Tilix); a terminal that knows neither ignores it |
//!
//! Inside tmux (`TMUX` set) the escape is wrapped as `ESC P tmux ; … ESC \` with every ESC
//! inside doubled, which tmux hands to the outer terminal when its `allow-passthrough`
//! option is on (tmux 3.3 and later; off, tmux drops it whole). The bell stays outside the
//! wrap: tmux turns it into its own alert (`bell-action`, `visual-bell`).

use super::one_line;

/// The widest title (columns, after sanitising).
pub const TITLE_WIDTH: usize = 60;
/// The widest body (columns, after sanitising).
pub const BODY_WIDTH: usize = 200;

/// What the terminal's environment says, as far as notifications care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermEnv {
    pub term: Option<String>,
    pub term_program: Option<String>,
    /// `TMUX` is set: the program runs inside tmux.
    pub tmux: bool,
    /// `KITTY_WINDOW_ID` is set.
    pub kitty: bool,
    /// `WT_SESSION` is set (Windows Terminal).
    pub windows_terminal: bool,
    /// `ConEmuPID` is set.
    pub conemu: bool,
}

impl TermEnv {
    /// Reads the variables through `get` (a lookup of the environment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> TermEnv {
        let set = |k: &str| get(k).is_some_and(|v| !v.is_empty());
        TermEnv {
            term: get("TERM"),
            term_program: get("TERM_PROGRAM"),
            tmux: set("TMUX"),
            kitty: set("KITTY_WINDOW_ID"),
            windows_terminal: set("WT_SESSION"),
            conemu: set("ConEmuPID"),
        }
    }

    /// This process's environment.
    pub fn current() -> TermEnv {
        TermEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// Which escape the terminal speaks.
    pub fn style(&self) -> Style {
        let program = self.term_program.as_deref().unwrap_or("");
        let term = self.term.as_deref().unwrap_or("");
        let osc9 = matches!(
            program,
            "iTerm.app" | "vscode" | "WarpTerminal" | "Apple_Terminal"
        ) || self.kitty
            || term == "xterm-kitty"
            || self.windows_terminal
            || self.conemu;
        if osc9 { Style::Osc9 } else { Style::Osc777 }
    }
}

/// The notification escape a terminal speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `OSC 9 ; message`: one string (iTerm2's, ConEmu's).
    Osc9,
    /// `OSC 777 ; notify ; title ; body`: rxvt-unicode's.
    Osc777,
}

/// One field of the escape: sanitised to one line (no control character, no escape),
/// bounded, and with `;` (the escape's field separator) made `,`.
fn field(s: &str, width: usize) -> String {
    one_line(&s.replace(';', ","), width)
}

/// The bytes that tell the person: a bell, then the notification escape the terminal of
/// `env` speaks (wrapped for tmux inside tmux), carrying `title` and `body` sanitised.
pub fn notification(title: &str, body: &str, env: &TermEnv) -> Vec<u8> {
    let title = field(title, TITLE_WIDTH);
    let body = field(body, BODY_WIDTH);
    let osc = match env.style() {
        Style::Osc9 => {
            let msg = if title.is_empty() {
                body
            } else if body.is_empty() {
                title
            } else {
                format!("{title}: {body}")
            };
            format!("\x1b]9;{msg}\x07")
        }
        Style::Osc777 => format!("\x1b]777;notify;{title};{body}\x07"),
    };
    let mut out = vec![0x07];
    if env.tmux {
        out.extend_from_slice(b"\x1bPtmux;");
        for b in osc.bytes() {
            if b == 0x1b {
                out.push(0x1b);
            }
            out.push(b);
        }
        out.extend_from_slice(b"\x1b\\");
    } else {
        out.extend_from_slice(osc.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> TermEnv {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TermEnv::from_lookup(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn osc_777_by_default_and_for_terminals_that_take_a_title() {
        for e in [
            env(&[("TERM", "xterm-256color")]),
            env(&[("TERM", "rxvt-unicode-256color")]),
            env(&[("TERM", "foot")]),
            env(&[("TERM_PROGRAM", "ghostty"), ("TERM", "xterm-ghostty")]),
            env(&[("TERM_PROGRAM", "WezTerm")]),
            env(&[]),
        ] {
            assert_eq!(
                notification("proctor", "run-0001 waits", &e),
                b"\x07\x1b]777;notify;proctor;run-0001 waits\x07".to_vec(),
                "{e:?}"
            );
        }
    }

    #[test]
    fn osc_9_where_the_terminal_uses_it() {
        for e in [
            env(&[("TERM_PROGRAM", "iTerm.app")]),
            env(&[("TERM_PROGRAM", "vscode")]),
            env(&[("TERM", "xterm-kitty")]),
            env(&[("KITTY_WINDOW_ID", "1"), ("TERM", "xterm-256color")]),
            env(&[("WT_SESSION", "abc")]),
            env(&[("ConEmuPID", "77")]),
        ] {
            assert_eq!(
                notification("proctor", "run-0001 waits", &e),
                b"\x07\x1b]9;proctor: run-0001 waits\x07".to_vec(),
                "{e:?}"
            );
        }
        let e = env(&[("TERM_PROGRAM", "iTerm.app")]);
        assert_eq!(notification("", "b", &e), b"\x07\x1b]9;b\x07".to_vec());
        assert_eq!(notification("t", "", &e), b"\x07\x1b]9;t\x07".to_vec());
    }

    #[test]
    fn inside_tmux_the_escape_is_wrapped_for_passthrough_with_its_esc_doubled() {
        let e = env(&[
            ("TMUX", "/tmp/tmux-0/default,1,0"),
            ("TERM", "tmux-256color"),
        ]);
        assert_eq!(
            notification("proctor", "x", &e),
            b"\x07\x1bPtmux;\x1b\x1b]777;notify;proctor;x\x07\x1b\\".to_vec()
        );
        let e = env(&[("TMUX", "/t,1,0"), ("TERM_PROGRAM", "iTerm.app")]);
        assert_eq!(
            notification("a", "b", &e),
            b"\x07\x1bPtmux;\x1b\x1b]9;a: b\x07\x1b\\".to_vec()
        );
        // An empty TMUX is not tmux.
        let e = env(&[("TMUX", "")]);
        assert!(!notification("a", "b", &e).starts_with(b"\x07\x1bP"));
    }

    #[test]
    fn a_hostile_title_or_body_cannot_end_or_extend_the_escape() {
        let e = env(&[("TMUX", "/t,1,0")]);
        let out = notification(
            "evil\x07\x1b]0;pwned\x07;title",
            "body\x1b\\\x1b[2J\u{9c}\u{9b}31m;x\nnext line\r\u{202e}",
            &e,
        );
        // Exactly one bell before the wrap and one BEL ending the OSC; one ST ending the wrap.
        let bels = out.iter().filter(|b| **b == 0x07).count();
        assert_eq!(bels, 2, "{:?}", String::from_utf8_lossy(&out));
        let inner = &out[b"\x07\x1bPtmux;".len()..out.len() - 2];
        assert!(out.ends_with(b"\x1b\\"));
        // Inside the wrap, the only ESC is the doubled one that opens the OSC.
        let escs: Vec<usize> = inner
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == 0x1b)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(escs, vec![0, 1], "{:?}", String::from_utf8_lossy(inner));
        let text = String::from_utf8(inner[2..].to_vec()).unwrap();
        // Three fields and no more: the person's `;` became `,`.
        let fields: Vec<&str> = text.trim_end_matches('\x07').split(';').collect();
        assert_eq!(fields.len(), 4, "{text:?}");
        assert_eq!(fields[0], "]777");
        assert_eq!(fields[1], "notify");
        assert!(
            fields[2].starts_with("evil") && fields[2].ends_with(",title"),
            "{text:?}"
        );
        assert!(!text.contains('\n') && !text.contains('\r') && !text.contains('\u{9c}'));
        assert!(
            !text.contains('\u{202e}'),
            "the bidi override is a visible marker"
        );
        assert!(text.contains("⟨U+202E⟩"), "{text:?}");
    }

    #[test]
    fn title_and_body_are_bounded() {
        let e = env(&[]);
        let out = notification(&"t".repeat(500), &"b".repeat(5000), &e);
        let s = String::from_utf8(out).unwrap();
        let fields: Vec<&str> = s.trim_end_matches('\x07').split(';').collect();
        assert!(
            fields[2].chars().count() <= TITLE_WIDTH,
            "{}",
            fields[2].len()
        );
        assert!(
            fields[3].chars().count() <= BODY_WIDTH,
            "{}",
            fields[3].len()
        );
        assert!(fields[3].ends_with('…'));
    }
}
