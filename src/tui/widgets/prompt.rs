//! A one-line text prompt: a label, a field, and the validator's error in place under it
//! (e.g. rename, checked with [`crate::text::validate_run_name`]), or the server's.

use std::fmt;

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Paragraph, Wrap};

use super::input::{Edit, TextInput};
use super::{Dialog, Outcome, centered, frame_dialog, hint_line, is_press, wrapped_rows};
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

/// Checks a value: `Err` holds the message shown under the field.
pub type Validator = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

const CONTEXTS: &[Context] = &[Context::Modal];

/// A one-line text prompt.
pub struct Prompt {
    title: String,
    label: String,
    hint: Option<String>,
    input: TextInput,
    validator: Option<Validator>,
    error: Option<String>,
    /// The validator's error shows once the value was edited or submitted.
    touched: bool,
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prompt")
            .field("title", &self.title)
            .field("value", &self.input.value())
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// The validator for a run's name: [`crate::text::validate_run_name`]'s refusal, in words.
pub fn run_name_validator() -> Validator {
    Box::new(|value| {
        crate::text::validate_run_name(value)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

impl Prompt {
    /// A prompt titled `title` asking for `label`. Both may hold untrusted text (a run's
    /// name); they are sanitised when drawn.
    pub fn new(title: impl Into<String>, label: impl Into<String>) -> Prompt {
        Prompt {
            title: title.into(),
            label: label.into(),
            hint: None,
            input: TextInput::default(),
            validator: None,
            error: None,
            touched: false,
        }
    }

    /// Starts with `value` in the field, the cursor at its end.
    pub fn with_value(mut self, value: &str) -> Prompt {
        self.input.set(value);
        self
    }

    pub fn with_validator(mut self, validator: Validator) -> Prompt {
        self.validator = Some(validator);
        self
    }

    /// A line of guidance under the field.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Prompt {
        self.hint = Some(hint.into());
        self
    }

    pub fn value(&self) -> &str {
        self.input.value()
    }

    /// Shows `message` under the field (e.g. the server refused the value); it goes at the
    /// next edit.
    pub fn set_error(&mut self, message: impl Into<String>) {
        self.error = Some(message.into());
    }

    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn validate(&mut self) -> bool {
        self.error = match &self.validator {
            Some(v) => v(self.input.value()).err(),
            None => None,
        };
        self.error.is_none()
    }
}

impl Dialog for Prompt {
    type Output = String;

    /// Pasted text goes into the field (controls dropped).
    fn handle_paste(&mut self, text: &str) {
        if self.input.insert_str(text) {
            self.touched = true;
            self.validate();
        }
    }

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<String> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        match self.input.handle_key(key) {
            Edit::Changed => {
                self.touched = true;
                self.validate();
                return Outcome::Continue;
            }
            Edit::Moved => return Outcome::Continue,
            Edit::Ignored => {}
        }
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Confirm) => {
                self.touched = true;
                if self.validate() {
                    Outcome::Submit(self.input.value().to_owned())
                } else {
                    Outcome::Continue
                }
            }
            Some(Action::Escape) => Outcome::Cancel,
            _ => Outcome::Continue,
        }
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let width = screen.width.saturating_sub(4).clamp(20, 72);
        let inner_w = usize::from(width.saturating_sub(4));
        let error = self
            .error
            .as_deref()
            .filter(|_| self.touched || self.validator.is_none());
        let error_text = error.map(|e| crate::text::multi_line_capped(e, usize::MAX));
        // Rows: label, field, error (wrapped, up to 3), hint, blank, keys.
        let error_rows = error_text
            .as_ref()
            .map_or(0, |e| wrapped_rows(e, inner_w).clamp(1, 4));
        let height = 2 + 2 + error_rows as u16 + u16::from(self.hint.is_some()) + 2;
        let rect = centered(screen, width, height);
        let inner = frame_dialog(frame, rect, &self.title, theme);
        let inner = inner.inner(ratatui::layout::Margin::new(1, 0));
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let mut y = inner.y;
        let bottom = inner.y + inner.height;
        let line = |frame: &mut Frame, y: &mut u16, rows: u16, widget: Paragraph| {
            if *y < bottom {
                let h = rows.min(bottom - *y);
                frame.render_widget(widget, Rect::new(inner.x, *y, inner.width, h));
                *y += h;
            }
        };
        line(
            frame,
            &mut y,
            1,
            Paragraph::new(Span::styled(
                crate::text::one_line(&self.label, usize::from(inner.width)),
                theme.style(Role::Text),
            )),
        );
        if y < bottom {
            self.input.render(
                frame,
                Rect::new(inner.x, y, inner.width, 1),
                theme.style(Role::Input),
                true,
            );
            y += 1;
        }
        if let Some(e) = error_text {
            line(
                frame,
                &mut y,
                error_rows as u16,
                Paragraph::new(Text::styled(e, theme.style(Role::Error)))
                    .wrap(Wrap { trim: false }),
            );
        }
        if let Some(h) = &self.hint {
            line(
                frame,
                &mut y,
                1,
                Paragraph::new(Span::styled(
                    crate::text::one_line(h, usize::from(inner.width)),
                    theme.style(Role::Dim),
                )),
            );
        }
        let keys = hint_line(
            &[
                (
                    keymap
                        .key_for(CONTEXTS, Action::Confirm)
                        .unwrap_or_default(),
                    "accept",
                ),
                (
                    keymap.key_for(CONTEXTS, Action::Escape).unwrap_or_default(),
                    "cancel",
                ),
            ],
            theme,
        );
        if bottom > y {
            frame.render_widget(
                Paragraph::new(Line::from(keys.spans)),
                Rect::new(inner.x, bottom - 1, inner.width, 1),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::KeyCode;
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key, row};
    use super::*;

    fn rename() -> Prompt {
        Prompt::new("Rename run-0003", "New name for “fix flaky test”")
            .with_value("fix flaky test")
            .with_validator(run_name_validator())
            .with_hint("empty clears the name")
    }

    #[test]
    fn typing_validating_and_submitting() {
        let km = Keymap::defaults();
        let mut p = rename();
        for _ in 0.."fix flaky test".len() {
            p.handle_key(&key(KeyCode::Backspace), &km);
        }
        for c in "new name".chars() {
            assert_eq!(p.handle_key(&ch(c), &km), Outcome::Continue);
        }
        // 'q' is text here, not the modal's close key.
        assert_eq!(p.value(), "new name");
        assert_eq!(p.handle_key(&ch('q'), &km), Outcome::Continue);
        assert_eq!(p.value(), "new nameq");
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("new nameq".to_owned())
        );
        assert_eq!(p.handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
    }

    #[test]
    fn an_invalid_value_is_not_submitted_and_its_error_shows() {
        let km = Keymap::defaults();
        let mut p = Prompt::new("Rename", "Name").with_validator(run_name_validator());
        p.handle_paste("evil\u{202e}txt");
        assert!(p.error().unwrap().contains("U+202E"), "{:?}", p.error());
        assert_eq!(p.handle_key(&key(KeyCode::Enter), &km), Outcome::Continue);
        p.handle_key(&key(KeyCode::End), &km);
        for _ in 0..4 {
            p.handle_key(&key(KeyCode::Backspace), &km);
        }
        assert_eq!(p.value(), "evil");
        assert_eq!(p.error(), None);
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("evil".to_owned())
        );
    }

    #[test]
    fn snapshots() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let p = rename();
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            insta::assert_snapshot!(format!("prompt_{w}x{h}"), t.backend());
        }
    }

    #[test]
    fn hostile_input_renders_harmlessly_and_the_error_is_in_place() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let mut p = Prompt::new("Rename \x1b]0;pwned\x07run", "Name \u{202e}txt.exe")
                .with_validator(run_name_validator());
            p.handle_paste("\x1b[2J\x1b[31mred\u{202e}gnp.exe\u{200b}");
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            let buf = t.backend().buffer();
            assert_no_controls(buf);
            insta::assert_snapshot!(format!("prompt_hostile_{w}x{h}"), t.backend());
            // The error sits under the field, in the error style.
            let (ex, ey) = find(buf, "position 11").expect("the error is shown");
            let (_, fy) = find(buf, "[2J[31mred⟨U+202E⟩").expect("the field");
            assert!(ey > fy);
            assert_eq!(buf[(ex, ey)].fg, Color::Red);
            assert!(buf[(ex, ey)].modifier.contains(Modifier::BOLD));
        }
    }

    #[test]
    fn colours_of_the_default_theme() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let p = rename();
        let mut t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
        let buf = t.backend().buffer().clone();
        // The frame in the modal colour, the field underlined, the hint dim, the key yellow.
        let (x, y) = find(&buf, "╭").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::Cyan);
        let (lx, ly) = find(&buf, "New name for").unwrap();
        assert!(row(&buf, ly + 1).contains("fix flaky test"));
        assert!(buf[(lx, ly + 1)].modifier.contains(Modifier::UNDERLINED));
        assert!(!buf[(lx, ly)].modifier.contains(Modifier::UNDERLINED));
        let (x, y) = find(&buf, "empty clears").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::DarkGray);
        let (x, y) = find(&buf, "enter accept").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::Yellow);
        assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
        // The cursor is just after the value, on the field's row.
        let pos = t.get_cursor_position().unwrap();
        assert_eq!((pos.x, pos.y), (lx + 14, ly + 1));
    }
}
