//! The events pane: the focused run's lifecycle events from the ledger, newest at the
//! bottom, each line sanitised.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::{focused, pane_block, span};
use crate::text;
use crate::tui::app::{App, Pane};
use crate::tui::data::event_line;
use crate::tui::role::Role;

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let mut title = vec![span(app, Role::Title, " Events ")];
    if let Some((run, items)) = &app.events.items {
        title.push(span(app, Role::Dim, format!("{run} · {} ", items.len())));
    }
    if app.events.scroll > 0 {
        title.push(span(
            app,
            Role::Warning,
            format!("· {} back ", app.events.scroll),
        ));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Events));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let Some((_, items)) = &app.events.items else {
        let msg = if app.sessions.selected.is_some() {
            "loading…"
        } else {
            ""
        };
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            msg,
            usize::from(inner.width),
            app.theme.style(Role::Dim),
        );
        return;
    };
    let h = usize::from(inner.height);
    let end = items.len().saturating_sub(app.events.scroll);
    let start = end.saturating_sub(h);
    let w = usize::from(inner.width);
    for (k, e) in items[start..end].iter().enumerate() {
        let line = text::one_line(&event_line(e), w);
        let role = if e.kind.ends_with(".exited")
            || e.kind.ends_with(".launch_failed")
            || e.kind.ends_with(".lost")
            || e.kind.ends_with("_refused")
            || e.kind.ends_with(".request_failed")
        {
            Role::Warning
        } else {
            Role::Text
        };
        // The time in dim, the rest in the line's role.
        let (time, rest) = line.split_once(' ').unwrap_or(("", &line));
        let l = Line::from(vec![
            span(app, Role::Dim, format!("{time} ")),
            span(app, role, rest.to_string()),
        ]);
        buf.set_line(inner.x, inner.y + k as u16, &l, inner.width);
    }
}
