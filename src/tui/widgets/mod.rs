//! Dialogs drawn over the cockpit: help, command palette, prompt, confirmation, snooze
//! picker, new session.
//!
//! Every dialog, the publication approval included, is a small state machine behind one
//! interface, [`Dialog`]: `handle_key(&KeyEvent, &Keymap) -> Outcome<Output>`,
//! `handle_paste(&str)` and `render(&self, &mut Frame, screen, &Theme, &Keymap)`, drawn
//! centred over the screen on a cleared rectangle (the approval over the whole screen). Keys
//! are looked up in the keymap contexts the dialog names ([`Dialog::contexts`]: `[modal]`,
//! the palette's `[palette]` first); in a text field the editing keys (printable characters,
//! Backspace, Delete, Left, Right, Home, End, ctrl-a, ctrl-e, ctrl-u, ctrl-k, ctrl-w) belong to
//! the field and are not looked up. The approval's fields look up nothing: only characters,
//! Backspace, Enter and Esc act there, whatever the keymap says. Every string a dialog shows
//! goes through [`crate::text`].

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear};

use super::keymap::{Context, Keymap};
use super::role::Role;
use super::theme::Theme;

pub mod approval;
pub mod confirm;
pub mod duration;
pub mod help;
pub mod input;
pub mod message;
pub mod new_session;
pub mod palette;
pub mod permission;
pub mod prompt;
pub mod seat;

/// What a key did to a dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The dialog stays open.
    Continue,
    /// The operator closed it without a result.
    Cancel,
    /// The operator chose this.
    Submit(T),
}

/// The one interface of a dialog over the cockpit: what a key and a paste do to it, how it
/// is drawn, and where its keys are looked up. The cockpit holds the open dialog and hands
/// it every key and paste until it answers [`Outcome::Cancel`] or [`Outcome::Submit`].
pub trait Dialog {
    /// What the dialog answers when the operator submits it.
    type Output;

    /// A key pressed while the dialog is open.
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<Self::Output>;

    /// Text pasted while the dialog is open (ignored unless the dialog has a text field).
    fn handle_paste(&mut self, _text: &str) {}

    /// The dialog on a `screen` of this size, before it is drawn: what depends on the size
    /// (a page's rows, the scroll that keeps the selection in view, which pages were shown)
    /// is computed here, in the state; [`Dialog::render`] only reads it.
    fn lay_out(&mut self, _screen: Rect) {}

    /// Draws the dialog over `screen` (as [`Dialog::lay_out`] left it for that size).
    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap);

    /// The keymap contexts its keys are looked up in, most specific first (what help and
    /// the palette list for it).
    fn contexts(&self) -> &'static [Context] {
        &[Context::Modal]
    }
}

/// A rectangle of at most `width` × `height` centred in `area`.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Clears `rect` and draws a dialog frame titled `title` (sanitised); returns the inside.
pub(crate) fn frame_dialog(frame: &mut Frame, rect: Rect, title: &str, theme: &Theme) -> Rect {
    frame.render_widget(Clear, rect);
    let title = crate::text::one_line(title, usize::from(rect.width.saturating_sub(4)));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme.style(Role::Modal))
        .style(theme.style(Role::Text))
        .title(Line::from(vec![
            Span::raw(" "),
            Span::styled(title, theme.style(Role::Title)),
            Span::raw(" "),
        ]));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    inner
}

/// A read-only dialog of wrapped rows scrolled to `scroll`, `page` rows in view: its title
/// says which rows show when they do not all fit, and its last row holds the hints.
pub(crate) struct Scrolled<'a> {
    pub title: &'a str,
    pub rows: &'a [(Role, String)],
    pub scroll: usize,
    pub page: usize,
}

impl Scrolled<'_> {
    pub fn render(
        &self,
        frame: &mut Frame,
        rect: Rect,
        theme: &Theme,
        keymap: &Keymap,
        contexts: &[Context],
    ) {
        use super::action::Action;
        let n = self.rows.len();
        let last = (self.scroll + self.page).min(n);
        let title = if n > self.page {
            format!("{} ({}–{} of {})", self.title, self.scroll + 1, last, n)
        } else {
            self.title.to_string()
        };
        let inner =
            frame_dialog(frame, rect, &title, theme).inner(ratatui::layout::Margin::new(1, 0));
        if inner.height < 2 {
            return;
        }
        let lines: Vec<Line> = self.rows[self.scroll.min(n)..last]
            .iter()
            .map(|(role, t)| Line::from(Span::styled(t.clone(), theme.style(*role))))
            .collect();
        frame.render_widget(
            ratatui::widgets::Paragraph::new(lines),
            Rect::new(inner.x, inner.y, inner.width, inner.height - 1),
        );
        let close = keymap.key_for(contexts, Action::Escape).unwrap_or_default();
        let mut hints = vec![(close, "close")];
        if n > self.page {
            let down = keymap.key_for(contexts, Action::Down).unwrap_or_default();
            hints.push((down, "scroll"));
        }
        frame.render_widget(
            ratatui::widgets::Paragraph::new(hint_line(&hints, theme)),
            Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1),
        );
    }
}

/// A line of hints: `key description` pairs, keys in the key style.
pub(crate) fn hint_line(pairs: &[(String, &str)], theme: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, (key, what)) in pairs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled("  ", theme.style(Role::Dim)));
        }
        spans.push(Span::styled(
            crate::text::one_line(key, 24),
            theme.style(Role::Key),
        ));
        spans.push(Span::styled(
            format!(" {}", crate::text::one_line(what, 60)),
            theme.style(Role::Dim),
        ));
    }
    Line::from(spans)
}

/// How many rows `text` takes when wrapped at word boundaries to `width` columns (as
/// ratatui's `Wrap { trim: false }` does, near enough to size a dialog).
pub(crate) fn wrapped_rows(text: &str, width: usize) -> usize {
    use unicode_width::UnicodeWidthStr;
    let width = width.max(1);
    text.split('\n')
        .map(|line| {
            let mut rows = 1;
            let mut used = 0;
            for word in line.split_inclusive(' ') {
                let w = word.width();
                if used + w.min(width) > width && used > 0 {
                    rows += 1;
                    used = 0;
                }
                used += w;
                while used > width {
                    rows += 1;
                    used -= width;
                }
            }
            rows
        })
        .sum()
}

/// Whether a key event is one to act on (presses and repeats, not releases).
pub(crate) fn is_press(key: &KeyEvent) -> bool {
    key.kind != KeyEventKind::Release
}

/// The character a key types, if it types one (no ctrl, no alt).
pub(crate) fn typed_char(key: &KeyEvent) -> Option<char> {
    use ratatui::crossterm::event::KeyCode;
    match key.code {
        KeyCode::Char(c)
            if !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
                && !c.is_control() =>
        {
            Some(c)
        }
        _ => None,
    }
}

/// A style for a whole row, over the text style.
pub(crate) fn row_style(theme: &Theme, role: Role, selected: bool) -> Style {
    let base = theme.style(role);
    if selected {
        base.patch(theme.style(Role::Selected))
    } else {
        base
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Drawing a dialog on a test terminal over a busy background.

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::widgets::Paragraph;

    /// The two sizes every dialog is checked at.
    pub const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

    pub fn draw(
        width: u16,
        height: u16,
        render: impl FnOnce(&mut ratatui::Frame),
    ) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal
            .draw(|frame| {
                let area = frame.area();
                let background = ".".repeat(usize::from(area.width));
                let lines: Vec<_> = (0..area.height)
                    .map(|_| ratatui::text::Line::from(background.clone()))
                    .collect();
                frame.render_widget(Paragraph::new(lines), area);
                render(frame);
            })
            .unwrap();
        terminal
    }

    pub fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    pub fn ch(c: char) -> KeyEvent {
        let mods = if c.is_uppercase() {
            KeyModifiers::SHIFT
        } else {
            KeyModifiers::NONE
        };
        KeyEvent::new(KeyCode::Char(c), mods)
    }

    pub fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    /// The text of row `y`.
    pub fn row(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_owned())
            .collect()
    }

    /// The position of the first cell where `needle` starts, searching row by row.
    pub fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
        for y in 0..buf.area.height {
            let mut text = String::new();
            let mut xs = Vec::new();
            for x in 0..buf.area.width {
                let s = buf[(x, y)].symbol();
                for _ in s.chars() {
                    xs.push(x);
                }
                text.push_str(s);
            }
            if let Some(byte) = text.find(needle) {
                let char_index = text[..byte].chars().count();
                return Some((xs[char_index], y));
            }
        }
        None
    }

    /// No cell holds an ESC or another control character.
    pub fn assert_no_controls(buf: &Buffer) {
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                let s = buf[(x, y)].symbol();
                assert!(
                    !s.chars()
                        .any(|c| c.is_control() || crate::text::is_bidi_control(c)),
                    "cell ({x},{y}) holds {s:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::draw;
    use super::*;
    use crate::tui::action::Needs;
    use crate::tui::views::Pane;

    /// Every dialog draws on any screen, however small, without panicking.
    #[test]
    fn dialogs_survive_tiny_screens() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let now = chrono::DateTime::parse_from_rfc3339("2026-03-10T14:05:00+01:00").unwrap();
        let help = help::Help::new(&km, &[Context::Pane(Pane::Sessions), Context::Global]);
        let palette = palette::Palette::new(&km, &[Context::Global], Needs::Read);
        let mut prompt = prompt::Prompt::new("Rename", "Name")
            .with_validator(prompt::run_name_validator())
            .with_hint("hint");
        prompt.handle_paste("a\u{202e}b");
        let confirm = confirm::Confirm::new("Stop?", "It stops.", "Stop");
        let snooze = duration::SnoozePicker::new("Snooze", now);
        let mut form = new_session::NewSessionForm::new(vec!["claude".into()], "rel");
        form.set_error(None, "refused");
        form.handle_key(
            &ratatui::crossterm::event::KeyEvent::new(
                ratatui::crossterm::event::KeyCode::Enter,
                KeyModifiers::NONE,
            ),
            &km,
        );
        for w in 1..=50 {
            for h in 1..=20 {
                draw(w, h, |f| {
                    let a = f.area();
                    help.render(f, a, &theme, &km);
                    palette.render(f, a, &theme, &km);
                    prompt.render(f, a, &theme, &km);
                    confirm.render(f, a, &theme, &km);
                    snooze.render(f, a, &theme, &km);
                    form.render(f, a, &theme, &km);
                });
            }
        }
    }

    #[test]
    fn centering_and_wrapping() {
        let area = Rect::new(0, 0, 80, 24);
        assert_eq!(centered(area, 20, 10), Rect::new(30, 7, 20, 10));
        assert_eq!(centered(area, 100, 30), area);
        assert_eq!(wrapped_rows("", 10), 1);
        assert_eq!(wrapped_rows("aaaa bbbb cccc", 10), 2);
        assert_eq!(wrapped_rows("a\nb", 10), 2);
        assert_eq!(wrapped_rows(&"x".repeat(25), 10), 3);
    }
}
