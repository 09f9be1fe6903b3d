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
use crate::tui::app::{App, Modal, Mode, Tone};
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
        Mode::Normal => app.focus.hints(),
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
        Action::View(tab) => tab
            .action_name()
            .strip_prefix("view-")
            .unwrap_or(tab.action_name()),
        Action::Approve => "approve",
        Action::Verify => "verify",
        Action::Permissions => "permit",
        Action::PageDown => "page",
        other => other.name(),
    }
}

/// A message's rows at `width` columns: a space, then the text wrapped at spaces, one
/// column kept free on the right.
fn message_lines(msg: &str, width: u16) -> Vec<String> {
    super::wrap(msg, usize::from(width.saturating_sub(2)), 0)
}

/// Where the status line draws: its one row, or for a message longer than the width the
/// rows the message needs and a rule above them, growing upward over the panes (at most
/// half of `screen`'s height). The panes keep their size: the live terminal is not resized by a message.
pub fn message_area(app: &App, status: Rect, screen: Rect) -> Rect {
    let Some(s) = app.status.as_ref().filter(|_| !app.mode.is_attach()) else {
        return status;
    };
    if status.is_empty() {
        return status;
    }
    let want = message_lines(&s.text, status.width).len();
    // A message of more than one row has a rule above it, between it and the panes.
    let want = if want > 1 { want + 1 } else { want };
    let most = usize::from((screen.height / 2).max(1));
    let n = u16::try_from(want.clamp(1, most)).unwrap_or(1);
    let top = (status.y + 1).saturating_sub(n).max(screen.y);
    Rect {
        y: top,
        height: status.y + 1 - top,
        ..status
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
        let run = app.live.slot.as_ref().map_or("", |s| s.run.as_str());
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
        // Every row of the message, wrapped; `area` has the rows it needs (see
        // [`message_area`]), so nothing is cut unless the screen is too short for it.
        let lines = message_lines(&s.text, area.width);
        let mut area = area;
        if area.height > 1 {
            let rule = "─".repeat(usize::from(area.width));
            buf.set_stringn(area.x, area.y, rule, w, app.theme.style(Role::Border));
            area.y += 1;
            area.height -= 1;
        }
        let n = usize::from(area.height);
        for (k, l) in lines.iter().take(n).enumerate() {
            let y = area.y + k as u16;
            for x in area.x..area.x + area.width {
                buf[(x, y)].set_symbol(" ");
                buf[(x, y)].set_style(app.theme.style(Role::StatusBar));
            }
            let l = if k + 1 == n && lines.len() > n {
                text::one_line(&format!("{l}…"), w.saturating_sub(1))
            } else {
                l.clone()
            };
            buf.set_line(
                area.x,
                y,
                &Line::from(vec![Span::raw(" "), span(app, role, l)]),
                area.width,
            );
        }
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
