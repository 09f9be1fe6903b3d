//! The Activity view (`7`): what the focused session's tool recorded in its own native
//! record: a context bar (the last request's tokens against the window when the tool
//! reported one; an unknown window is said so), the model, compactions and the
//! transcript's state, then its tasks, files, todos and agents; or, after `/`, the messages
//! that match a search, with their role and time (Enter shows one). Every string from the
//! server goes through the sanitiser.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::{dim_message, focused, pane_block, row_style, span};
use crate::text;
use crate::tui::app::activity::{SEARCH_HEAD, context_line, match_row, model_line};
use crate::tui::app::{App, Pane};
use crate::tui::role::Role;

/// The bar's cells for a share of `pct` percent.
const BAR: usize = 10;

fn bar(pct: f64) -> String {
    let full = ((pct.clamp(0.0, 100.0) / 100.0) * BAR as f64).round() as usize;
    format!("[{}{}] ", "█".repeat(full), "░".repeat(BAR - full))
}

fn put(app: &App, buf: &mut Buffer, inner: Rect, y: usize, role: Role, s: &str) {
    if y >= usize::from(inner.height) {
        return;
    }
    let w = usize::from(inner.width);
    buf.set_stringn(
        inner.x + 1,
        inner.y + y as u16,
        text::one_line(s, w.saturating_sub(2)),
        w.saturating_sub(2),
        app.theme.style(role),
    );
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let p = &app.activity;
    let mut title = vec![span(app, Role::Title, " Activity ")];
    if let Some(r) = app.selected_run() {
        title.push(span(
            app,
            Role::Text,
            format!("{} ", text::one_line(&r.run_ref, 24)),
        ));
        title.push(span(
            app,
            Role::Dim,
            format!("· {} ", text::one_line(&r.tool, 16)),
        ));
    }
    if p.loading {
        title.push(span(app, Role::Dim, "· reading… "));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Activity));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 4 || inner.height == 0 {
        return;
    }
    if app.selected_run().is_none() {
        return dim_message(
            app,
            buf,
            inner,
            "no session selected: pick a run in the sessions list",
        );
    }
    // The head: the context and the model lines.
    match &p.activity {
        None => put(app, buf, inner, 0, Role::Dim, "reading the tool's record…"),
        Some(Err(e)) => {
            if p.search.is_none() {
                return dim_message(app, buf, inner, &format!("no activity: {e}"));
            }
            put(app, buf, inner, 0, Role::Dim, &format!("no activity: {e}"));
        }
        Some(Ok(a)) => {
            let (role, line, pct) = context_line(a);
            let line = match pct {
                Some(pct) => format!("{}{line}", bar(pct)),
                None => line,
            };
            put(app, buf, inner, 0, role, &line);
            let (role, line) = model_line(a);
            put(app, buf, inner, 1, role, &line);
        }
    }
    match &p.search {
        None => {
            for (k, r) in p.body_rows().iter().skip(p.scroll).take(p.rows).enumerate() {
                put(app, buf, inner, 2 + k, r.role, &r.text);
            }
        }
        Some(s) => {
            let mut head = format!("Search \"{}\"", s.query);
            if s.loading && s.items.is_empty() {
                head.push_str(": searching…");
            } else if let Some(e) = &s.error {
                head.push_str(&format!(": {e}"));
            } else {
                match s.total {
                    Some(t) => head.push_str(&format!(": {} of {t} found", s.items.len())),
                    None => head.push_str(&format!(": {} found", s.items.len())),
                }
                if s.loading {
                    head.push_str(" · reading more…");
                } else if s.next.is_some() {
                    head.push_str(" · more");
                }
                match s.transcript {
                    Some(crate::api::runs::TranscriptState::Read) | None => {}
                    Some(t) => head.push_str(&format!(
                        " · transcript {}",
                        crate::tui::app::activity::transcript_word(t)
                    )),
                }
            }
            let role = if s.error.is_some() {
                Role::Error
            } else {
                Role::Title
            };
            put(app, buf, inner, SEARCH_HEAD - 1, role, &head);
            if s.items.is_empty() && !s.loading && s.error.is_none() {
                put(
                    app,
                    buf,
                    inner,
                    SEARCH_HEAD,
                    Role::Dim,
                    "no message holds it (esc goes back to the activity)",
                );
            }
            let list_focused = focused(app, Pane::Activity);
            let w = usize::from(inner.width);
            for (k, m) in s.items.iter().enumerate().skip(s.offset).take(p.rows) {
                let y = SEARCH_HEAD + k - s.offset;
                if y >= usize::from(inner.height) {
                    break;
                }
                let selected = k == s.selected;
                let mark = if selected { "› " } else { "  " };
                let line = format!("{mark}{}", match_row(m));
                buf.set_stringn(
                    inner.x,
                    inner.y + y as u16,
                    text::one_line(&line, w.saturating_sub(1)),
                    w.saturating_sub(1),
                    row_style(app, selected, list_focused),
                );
            }
        }
    }
}
