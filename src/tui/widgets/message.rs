//! A message of a session's transcript, opened from a search in the Activity view: its id,
//! who said it, when, and its text as the server read it from the tool's own record (at
//! most 64 KiB; a text cut at that bound ends with `[...]` and is marked clipped). The text
//! is untrusted: every row goes through the sanitiser when it is wrapped.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;

use super::{Dialog, Outcome, centered, is_press};
use crate::api::runs::{MessageItem, MessageRole};
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];

/// The message dialog.
#[derive(Debug, Clone)]
pub struct MessageDialog {
    title: String,
    /// The head rows (who, when, clipped), then the text's own lines (unsanitised).
    rows: Vec<(Role, String)>,
    scroll: usize,
    page: usize,
    wrapped: Vec<(Role, String)>,
}

impl MessageDialog {
    pub fn new(run: &str, m: &MessageItem) -> MessageDialog {
        let role = match m.role {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
        };
        let mut rows = vec![(
            Role::Dim,
            format!("{role} · {}", m.at.as_deref().unwrap_or("no time recorded")),
        )];
        if m.clipped {
            rows.push((
                Role::Warning,
                "clipped: the text is longer than 64 KiB; what follows ends at that bound ([...])"
                    .into(),
            ));
        }
        rows.push((Role::Text, String::new()));
        match &m.text {
            Some(t) => rows.extend(t.split('\n').map(|l| (Role::Text, l.to_string()))),
            None => rows.push((Role::Text, m.first_line.clone())),
        }
        MessageDialog {
            title: format!("{run} · message {}", m.id),
            rows,
            scroll: 0,
            page: 10,
            wrapped: Vec::new(),
        }
    }

    /// Every row as wrapped at the last layout (sanitised), for tests.
    pub fn text(&self) -> Vec<String> {
        self.wrapped.iter().map(|(_, t)| t.clone()).collect()
    }

    fn place(&self, screen: Rect) -> Rect {
        let w = screen.width.saturating_sub(4).min(110);
        let h = screen.height.saturating_sub(2);
        centered(screen, w, h)
    }

    fn max_scroll(&self) -> usize {
        self.wrapped.len().saturating_sub(self.page)
    }
}

impl Dialog for MessageDialog {
    type Output = ();

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<()> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        let page = self.page.max(1);
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Escape | Action::Confirm) => return Outcome::Cancel,
            Some(Action::Up) => self.scroll = self.scroll.saturating_sub(1),
            Some(Action::Down) => self.scroll += 1,
            Some(Action::PageUp) => self.scroll = self.scroll.saturating_sub(page),
            Some(Action::PageDown) => self.scroll += page,
            Some(Action::Top) => self.scroll = 0,
            Some(Action::Bottom) => self.scroll = usize::MAX,
            _ => {}
        }
        self.scroll = self.scroll.min(self.max_scroll());
        Outcome::Continue
    }

    fn lay_out(&mut self, screen: Rect) {
        let rect = self.place(screen);
        let width = usize::from(rect.width.saturating_sub(4)).max(10);
        self.wrapped = self
            .rows
            .iter()
            .flat_map(|(role, t)| {
                crate::tui::ui::wrap(t, width, 0)
                    .into_iter()
                    .map(move |l| (*role, l))
            })
            .collect();
        self.page = usize::from(rect.height.saturating_sub(2))
            .saturating_sub(1)
            .max(1);
        self.scroll = self.scroll.min(self.max_scroll());
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let view = super::Scrolled {
            title: &self.title,
            rows: &self.wrapped,
            scroll: self.scroll,
            page: self.page,
        };
        view.render(frame, self.place(screen), theme, keymap, CONTEXTS);
    }

    fn contexts(&self) -> &'static [Context] {
        CONTEXTS
    }
}
