//! The permission dialog: what a session's tool asks to do (the tool call, the command or
//! file, the tool's reason), and the person's answer: `a` allow, `s` allow for the session
//! (when the tool offered it), `d` deny, Esc later (the request stays open). Every string
//! came from the tool: it is drawn through [`crate::text`], bounded.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Paragraph, Wrap};

use super::{
    Dialog, Outcome, centered, frame_dialog, hint_line, is_press, typed_char, wrapped_rows,
};
use crate::api::runs::PermissionView;
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];

/// The longest command or file shown (characters).
pub const MAX_WHAT: usize = 400;
/// The longest reason shown.
pub const MAX_REASON: usize = 300;

/// What the person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Allow,
    AllowForSession,
    Deny,
}

/// One open request of one run, asked.
#[derive(Debug, Clone)]
pub struct PermissionDialog {
    run: String,
    item: PermissionView,
    /// How many other requests of the run are open too.
    more: usize,
    error: Option<String>,
    busy: bool,
}

impl PermissionDialog {
    pub fn new(run: &str, item: PermissionView, more: usize) -> PermissionDialog {
        PermissionDialog {
            run: run.to_string(),
            item,
            more,
            error: None,
            busy: false,
        }
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    /// proctor's id of the request asked.
    pub fn id(&self) -> &str {
        self.item.id.as_deref().unwrap_or("")
    }

    fn offers(&self, option: &str) -> bool {
        self.item.options.iter().any(|o| o == option)
    }

    /// The answer went to the server: only Esc until it answers.
    pub fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The server refused the answer: shown in the dialog, which stays open.
    pub fn set_error(&mut self, e: String) {
        self.busy = false;
        self.error = Some(e);
    }
}

impl Dialog for PermissionDialog {
    type Output = Choice;

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<Choice> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        if keymap.resolve(CONTEXTS, key) == Some(Action::Escape) {
            return Outcome::Cancel;
        }
        if self.busy {
            return Outcome::Continue;
        }
        match typed_char(key) {
            Some('a') if self.offers("allow") => Outcome::Submit(Choice::Allow),
            Some('s') if self.offers("allow_for_session") => {
                Outcome::Submit(Choice::AllowForSession)
            }
            Some('d') if self.offers("deny") => Outcome::Submit(Choice::Deny),
            _ => Outcome::Continue,
        }
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let width = screen.width.saturating_sub(4).clamp(30, 80);
        let text_w = usize::from(width.saturating_sub(4)).max(10);
        let tool = self
            .item
            .tool_name
            .as_deref()
            .map_or_else(|| "-".to_string(), |t| crate::text::one_line(t, 40));
        let what = self
            .item
            .what
            .as_deref()
            .map_or_else(|| "-".to_string(), |w| crate::text::one_line(w, MAX_WHAT));
        let reason = self
            .item
            .reason
            .as_deref()
            .map(|r| crate::text::one_line(r, MAX_REASON));
        let label = |l: &str| Span::styled(format!("{l:<8}"), theme.style(Role::Dim));
        let mut lines = vec![
            Line::from(vec![
                label("tool"),
                Span::styled(tool, theme.style(Role::Text)),
            ]),
            Line::from(vec![
                label("asks"),
                Span::styled(what.clone(), theme.style(Role::Warning)),
            ]),
        ];
        if let Some(r) = &reason {
            lines.push(Line::from(vec![
                label("because"),
                Span::styled(r.clone(), theme.style(Role::Text)),
            ]));
        }
        if self.more > 0 {
            lines.push(Line::from(Span::styled(
                format!("{} more request(s) wait after this one", self.more),
                theme.style(Role::Dim),
            )));
        }
        if let Some(e) = &self.error {
            lines.push(Line::from(Span::styled(
                crate::text::one_line(e, 300),
                theme.style(Role::Error),
            )));
        } else if self.busy {
            lines.push(Line::from(Span::styled(
                "sending your answer…",
                theme.style(Role::Dim),
            )));
        }
        // Rows the wrapped text takes at this width (what and reason may wrap).
        let rows: usize = lines
            .iter()
            .map(|l| {
                let plain: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
                wrapped_rows(&plain, text_w).max(1)
            })
            .sum();
        let rows = rows.clamp(2, 14) as u16;
        let rect = centered(screen, width, rows + 5);
        let title = format!(
            "{} asks permission ({})",
            crate::text::one_line(&self.run, 20),
            crate::text::one_line(self.id(), 8)
        );
        let inner = frame_dialog(frame, rect, &title, theme).inner(Margin::new(1, 0));
        if inner.height < 3 {
            return;
        }
        let text_rows = rows.min(inner.height.saturating_sub(3));
        frame.render_widget(
            Paragraph::new(Text::from(lines)).wrap(Wrap { trim: false }),
            Rect::new(inner.x, inner.y + 1, inner.width, text_rows),
        );
        let mut pairs: Vec<(String, &str)> = Vec::new();
        if self.offers("allow") {
            pairs.push(("a".into(), "allow"));
        }
        if self.offers("allow_for_session") {
            pairs.push(("s".into(), "allow for the session"));
        }
        if self.offers("deny") {
            pairs.push(("d".into(), "deny"));
        }
        pairs.push((
            keymap
                .key_for(CONTEXTS, Action::Escape)
                .unwrap_or_else(|| "esc".into()),
            "later",
        ));
        frame.render_widget(
            Paragraph::new(hint_line(&pairs, theme)),
            Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SIZES, assert_no_controls, ch, draw, key, row};
    use super::*;
    use crate::api::runs::PermissionState;
    use ratatui::crossterm::event::KeyCode;

    fn item(options: &[&str], what: &str) -> PermissionView {
        PermissionView {
            id: Some("3".into()),
            state: PermissionState::Open,
            method: "can_use_tool".into(),
            tool_name: Some("Bash".into()),
            what: Some(what.into()),
            reason: Some("clean \u{1b}]0;owned\u{7} the build".into()),
            options: options.iter().map(|s| s.to_string()).collect(),
            since: "2026-12-01T00:00:00Z".into(),
            decided_at: None,
            for_session: false,
            by: None,
        }
    }

    #[test]
    fn keys_answer_only_with_what_the_tool_offered() {
        let km = Keymap::defaults();
        let mut d = PermissionDialog::new("run-0001", item(&["allow", "deny"], "rm -rf x"), 0);
        assert_eq!(
            d.handle_key(&ch('s'), &km),
            Outcome::Continue,
            "not offered"
        );
        assert_eq!(d.handle_key(&ch('q'), &km), Outcome::Cancel);
        assert_eq!(d.handle_key(&ch('a'), &km), Outcome::Submit(Choice::Allow));
        assert_eq!(d.handle_key(&ch('d'), &km), Outcome::Submit(Choice::Deny));
        d.set_busy(true);
        assert_eq!(d.handle_key(&ch('a'), &km), Outcome::Continue, "busy");
        assert_eq!(
            d.handle_key(&key(KeyCode::Esc), &km),
            Outcome::Cancel,
            "Esc closes, the request stays open"
        );
        let mut d = PermissionDialog::new(
            "run-0001",
            item(&["allow", "allow_for_session", "deny"], "x"),
            0,
        );
        assert_eq!(
            d.handle_key(&ch('s'), &km),
            Outcome::Submit(Choice::AllowForSession)
        );
    }

    #[test]
    fn what_is_asked_is_drawn_sanitised_and_bounded_at_every_size() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let long = format!("curl \u{1b}[2Jevil {}", "y".repeat(2000));
        let d = PermissionDialog::new(
            "run-0001",
            item(&["allow", "allow_for_session", "deny"], &long),
            2,
        );
        for (w, h) in SIZES {
            let term = draw(w, h, |f| d.render(f, f.area(), &theme, &km));
            let buf = term.backend().buffer();
            assert_no_controls(buf);
            let t: String = (0..h).map(|y| row(buf, y) + "\n").collect();
            assert!(t.contains("run-0001 asks permission (3)"), "{t}");
            assert!(t.contains("Bash"), "{t}");
            assert!(t.contains("curl evil"), "{t}");
            assert!(t.contains("allow for the session"), "{t}");
            assert!(t.contains("2 more request(s)"), "{t}");
            assert!(t.contains("clean"), "{t}");
            assert!(!t.contains("owned"), "the escape is gone: {t}");
            let ys = t.matches('y').count();
            assert!(ys <= MAX_WHAT + 40, "bounded: {ys}");
        }
    }
}
