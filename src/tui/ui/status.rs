//! The status bar: the last message (errors in place), or the keys that matter in the
//! current context, read from the keymap. Actions the token cannot perform are shown as
//! unavailable.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use super::span;
use crate::text;
use crate::tui::action::Action;
use crate::tui::app::{App, Modal, Mode, Pane, Tone};
use crate::tui::keymap::Context;
use crate::tui::role::Role;

/// The actions worth a hint, per situation, most useful first.
fn hinted(app: &App) -> &'static [Action] {
    match &app.mode {
        Mode::Filter => &[Action::Confirm, Action::Escape],
        Mode::Modal(m) if matches!(**m, Modal::Help(_)) => {
            &[Action::Escape, Action::Down, Action::Up]
        }
        Mode::Modal(m) if matches!(**m, Modal::Palette { .. }) => {
            &[Action::Confirm, Action::Escape, Action::Down, Action::Up]
        }
        Mode::Modal(_) => &[Action::Confirm, Action::Escape],
        Mode::Attach => &[Action::Escape],
        Mode::Normal if app.zoomed => &[
            Action::Zoom,
            Action::Attach,
            Action::PageUp,
            Action::ScrollBottom,
            Action::SendInput,
            Action::Help,
            Action::Quit,
        ],
        Mode::Normal => match app.focus {
            Pane::Sessions => &[
                Action::Down,
                Action::Zoom,
                Action::Attach,
                Action::NewSession,
                Action::SendInput,
                Action::Stop,
                Action::Resume,
                Action::Rename,
                Action::Pin,
                Action::Snooze,
                Action::Filter,
                Action::FocusNext,
                Action::Palette,
                Action::Help,
                Action::Quit,
            ],
            Pane::Live => &[
                Action::PageUp,
                Action::ScrollUp,
                Action::ScrollBottom,
                Action::Zoom,
                Action::Attach,
                Action::FocusNext,
                Action::Help,
                Action::Quit,
            ],
            Pane::Events => &[
                Action::Up,
                Action::Down,
                Action::Bottom,
                Action::FocusNext,
                Action::Help,
                Action::Quit,
            ],
            Pane::Gate => &[
                Action::Down,
                Action::PageDown,
                Action::FocusNext,
                Action::ViewSessions,
                Action::ViewIntents,
                Action::ViewReceipts,
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
            Pane::Intents => &[
                Action::Down,
                Action::Approve,
                Action::ViewGate,
                Action::ViewSessions,
                Action::ViewReceipts,
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
            Pane::Receipts => &[
                Action::Down,
                Action::Verify,
                Action::ViewGate,
                Action::ViewSessions,
                Action::ViewIntents,
                Action::Help,
                Action::Quit,
            ],
        },
    }
}

/// A short word for a hint.
fn short(a: Action) -> &'static str {
    match a {
        Action::Down => "move",
        Action::NewSession => "new",
        Action::SendInput => "input",
        Action::FocusNext => "pane",
        Action::PageUp => "page",
        Action::ScrollUp => "scroll",
        Action::ScrollBottom => "follow",
        Action::Palette => "actions",
        Action::Escape => "back",
        Action::Confirm => "ok",
        Action::ViewSessions => "sessions",
        Action::ViewGate => "gate",
        Action::ViewIntents => "intents",
        Action::ViewReceipts => "receipts",
        Action::Approve => "approve",
        Action::Verify => "verify",
        Action::PageDown => "page",
        other => other.name(),
    }
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    for x in area.x..area.x + area.width {
        buf[(x, area.y)].set_style(app.theme.style(Role::StatusBar));
    }
    let w = usize::from(area.width);
    if app.mode.is_attach() {
        let prefix = crate::tui::keymap::key_label(&app.keymap.prefix());
        let run = app.live.as_ref().map_or("", |s| s.run.as_str());
        let line = Line::from(vec![
            span(app, Role::Warning, " ATTACHED "),
            span(
                app,
                Role::Text,
                format!("{run}: every key goes to the session · "),
            ),
            span(app, Role::Key, prefix),
            span(app, Role::Text, " returns to the cockpit"),
        ]);
        buf.set_line(area.x, area.y, &line, area.width);
        return;
    }
    if let Some(s) = &app.status {
        let role = match s.tone {
            Tone::Info => Role::Text,
            Tone::Success => Role::Success,
            Tone::Error => Role::Error,
        };
        let t = text::one_line(&s.text, w.saturating_sub(1));
        buf.set_line(
            area.x,
            area.y,
            &Line::from(vec![Span::raw(" "), span(app, role, t)]),
            area.width,
        );
        return;
    }
    let contexts: Vec<Context> = app.contexts();
    let mut spans: Vec<Span<'_>> = Vec::new();
    let mut used = 0usize;
    if app.zoomed
        && let Some(r) = app.selected_run()
    {
        let s = format!(" {} · zoomed ", r.run_ref);
        used += s.width();
        spans.push(span(app, Role::Title, s));
    }
    for &a in hinted(app) {
        let Some(key) = app.keymap.key_for(&contexts, a) else {
            continue;
        };
        let label = short(a);
        let cost = 1 + key.width() + 1 + label.width() + 1;
        if used + cost > w {
            break;
        }
        used += cost;
        let available = app.can(a);
        spans.push(Span::raw(" "));
        spans.push(span(
            app,
            if available {
                Role::Key
            } else {
                Role::Unavailable
            },
            key,
        ));
        spans.push(Span::raw(" "));
        spans.push(span(
            app,
            if available {
                Role::Dim
            } else {
                Role::Unavailable
            },
            label,
        ));
        spans.push(Span::raw(" "));
    }
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
}
