//! A yes/no question with its consequence stated. The default answer is No: Enter on an
//! untouched dialog cancels.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Paragraph, Wrap};

use super::{
    Dialog, Outcome, centered, frame_dialog, hint_line, is_press, row_style, typed_char,
    wrapped_rows,
};
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];

/// A confirmation dialog.
#[derive(Debug, Clone)]
pub struct Confirm {
    title: String,
    consequence: String,
    yes: String,
    no: String,
    /// Whether Yes has the focus (it never starts with it).
    on_yes: bool,
}

impl Confirm {
    /// `title` asks the question ("Stop run-0003?"); `consequence` says what happens
    /// ("The process group gets SIGTERM, then SIGKILL after 5 s."); `yes` labels the
    /// action ("Stop"). All are sanitised when drawn.
    pub fn new(
        title: impl Into<String>,
        consequence: impl Into<String>,
        yes: impl Into<String>,
    ) -> Confirm {
        Confirm {
            title: title.into(),
            consequence: consequence.into(),
            yes: yes.into(),
            no: "Cancel".to_owned(),
            on_yes: false,
        }
    }

    /// What the dialog says happens.
    pub fn consequence(&self) -> &str {
        &self.consequence
    }

    /// Whether Yes has the focus.
    pub fn yes_selected(&self) -> bool {
        self.on_yes
    }
}

impl Dialog for Confirm {
    type Output = ();

    /// `y` answers yes, `n` no; Enter takes the focused answer (No until moved); Tab, the
    /// arrows or h/l move between the two; Esc cancels.
    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<()> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        match typed_char(key) {
            Some('y' | 'Y') => return Outcome::Submit(()),
            Some('n' | 'N') => return Outcome::Cancel,
            Some('h' | 'l') => {
                self.on_yes = !self.on_yes;
                return Outcome::Continue;
            }
            _ => {}
        }
        if matches!(key.code, KeyCode::Left | KeyCode::Right) {
            self.on_yes = !self.on_yes;
            return Outcome::Continue;
        }
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Confirm) if self.on_yes => Outcome::Submit(()),
            Some(Action::Confirm | Action::Escape) => Outcome::Cancel,
            Some(Action::FocusNext | Action::FocusPrev) => {
                self.on_yes = !self.on_yes;
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let width = screen.width.saturating_sub(4).clamp(24, 64);
        let text_w = usize::from(width.saturating_sub(4));
        let consequence = crate::text::multi_line(&self.consequence);
        let rows = wrapped_rows(&consequence, text_w).clamp(1, 12) as u16;
        let rect = centered(screen, width, rows + 6);
        let inner = frame_dialog(frame, rect, &self.title, theme).inner(Margin::new(1, 0));
        if inner.height < 3 {
            return;
        }
        let text_rows = rows.min(inner.height.saturating_sub(3));
        frame.render_widget(
            Paragraph::new(Text::styled(consequence, theme.style(Role::Text)))
                .wrap(Wrap { trim: false }),
            Rect::new(inner.x, inner.y + 1, inner.width, text_rows),
        );
        let button = |label: &str, selected: bool, role: Role| {
            Span::styled(
                format!("[ {} ]", crate::text::one_line(label, 24)),
                row_style(theme, role, selected),
            )
        };
        let buttons = Line::from(vec![
            button(&self.no, !self.on_yes, Role::Text),
            Span::raw("  "),
            button(&self.yes, self.on_yes, Role::Warning),
        ]);
        let by = inner.y + inner.height - 2;
        frame.render_widget(
            Paragraph::new(buttons).alignment(ratatui::layout::Alignment::Center),
            Rect::new(inner.x, by, inner.width, 1),
        );
        let hints = hint_line(
            &[
                ("y".to_owned(), "yes"),
                ("n".to_owned(), "no"),
                (
                    keymap
                        .key_for(CONTEXTS, Action::Confirm)
                        .unwrap_or_default(),
                    "the focused answer",
                ),
            ],
            theme,
        );
        frame.render_widget(
            Paragraph::new(hints),
            Rect::new(inner.x, by + 1, inner.width, 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key};
    use super::*;

    fn stop() -> Confirm {
        Confirm::new(
            "Stop run-0003 “fix flaky test”?",
            "The process group gets SIGTERM, then SIGKILL after the grace (5 s). The \
             conversation stays stored: resume starts a new process on it.",
            "Stop",
        )
    }

    #[test]
    fn default_is_no() {
        let km = Keymap::defaults();
        let mut c = stop();
        assert!(!c.yes_selected());
        assert_eq!(c.handle_key(&key(KeyCode::Enter), &km), Outcome::Cancel);
        let mut c = stop();
        assert_eq!(c.handle_key(&key(KeyCode::Tab), &km), Outcome::Continue);
        assert!(c.yes_selected());
        assert_eq!(c.handle_key(&key(KeyCode::Enter), &km), Outcome::Submit(()));
        let mut c = stop();
        c.handle_key(&key(KeyCode::Right), &km);
        c.handle_key(&key(KeyCode::Left), &km);
        assert_eq!(c.handle_key(&key(KeyCode::Enter), &km), Outcome::Cancel);
        assert_eq!(stop().handle_key(&ch('y'), &km), Outcome::Submit(()));
        assert_eq!(stop().handle_key(&ch('n'), &km), Outcome::Cancel);
        assert_eq!(stop().handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
        assert_eq!(stop().handle_key(&ch('q'), &km), Outcome::Cancel);
        // Other keys do nothing.
        let mut c = stop();
        assert_eq!(c.handle_key(&ch('x'), &km), Outcome::Continue);
        assert!(!c.yes_selected());
    }

    #[test]
    fn snapshots_and_colours() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let c = stop();
            let t = draw(w, h, |f| c.render(f, f.area(), &theme, &km));
            insta::assert_snapshot!(format!("confirm_{w}x{h}"), t.backend());
            let buf = t.backend().buffer();
            // No is focused (reversed), Stop is a warning and not focused.
            let (x, y) = find(buf, "[ Cancel ]").unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
            let (x, y) = find(buf, "[ Stop ]").unwrap();
            assert_eq!(buf[(x, y)].fg, Color::Yellow);
            assert!(!buf[(x, y)].modifier.contains(Modifier::REVERSED));
        }
        let mut c = stop();
        c.handle_key(&key(KeyCode::Tab), &km);
        let t = draw(80, 24, |f| c.render(f, f.area(), &theme, &km));
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "[ Stop ]").unwrap();
        assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
        insta::assert_snapshot!("confirm_yes_focused_80x24", t.backend());
    }

    #[test]
    fn hostile_names_render_harmlessly() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let c = Confirm::new(
            "Delete run-0009 “\x1b[8m\u{202e}lmth.exe”?",
            "Its record and transcripts are deleted.\x1b]52;c;cHduZWQ=\x07\nThis cannot be undone.",
            "Delete",
        );
        let t = draw(80, 24, |f| c.render(f, f.area(), &theme, &km));
        assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!("confirm_hostile_80x24", t.backend());
    }
}
