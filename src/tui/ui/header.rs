//! The header: where we are (host, home), what runs (counts by state), how many publication
//! intents await a person's authority, who we are (role).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::span;
use crate::text;
use crate::tui::app::App;
use crate::tui::role::Role;

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    // The longest form that fits: narrower screens drop the separators, the name and the
    // long words, never the role.
    // (A server error at the end is cut as it must be: it does not count.)
    let wide = area.width >= 100;
    let w = usize::from(area.width);
    let mut line = build(app, wide, wide);
    if line.1 > w && wide {
        line = build(app, true, false);
        if line.1 > w {
            line = build(app, false, false);
        }
    }
    buf.set_line(area.x, area.y, &line.0, area.width);
}

/// The header line, and the width of what must fit (all but a trailing server error).
fn build(app: &App, wide: bool, long_auth: bool) -> (Line<'static>, usize) {
    let c = app.counts;
    let sep = if wide { " · " } else { " " };
    let mut spans = Vec::new();
    if wide {
        spans.push(span(app, Role::Header, " proctor "));
        spans.push(span(app, Role::Dim, "· "));
    } else {
        spans.push(span(app, Role::Dim, " "));
    }
    spans.push(span(app, Role::Text, text::one_line(&app.host, 24)));
    spans.push(span(app, Role::Dim, sep));
    spans.push(span(app, Role::Text, text::one_line(&app.home_label, 40)));
    spans.push(span(app, Role::Dim, " │ "));
    for (label, n, role) in [
        ("live", c.live, Role::StateRunning),
        ("idle", c.idle, Role::StateIdle),
        ("stopped", c.stopped, Role::StateStopped),
        ("failed", c.failed, Role::StateFailed),
        ("lost", c.lost, Role::StateLost),
    ] {
        spans.push(span(
            app,
            if n > 0 { role } else { Role::Dim },
            format!("{label} {n}"),
        ));
        spans.push(span(app, Role::Dim, sep));
    }
    spans.pop();
    // Publication intents that wait for a person: the one number that needs authority.
    if let Some(Ok(_)) = &app.intents {
        let n = app.awaiting_authority();
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(
            app,
            if n > 0 {
                Role::GateAwaitingHuman
            } else {
                Role::Dim
            },
            if long_auth {
                format!("awaiting authority {n}")
            } else {
                format!("auth {n}")
            },
        ));
    }
    if let Some(who) = &app.who {
        spans.push(span(app, Role::Dim, " │ "));
        if who.role == crate::auth::Role::Read {
            spans.push(span(app, Role::Warning, "read-only"));
        } else {
            let role = who.role.as_str();
            spans.push(span(
                app,
                Role::Text,
                if wide {
                    format!("role {role}")
                } else {
                    role.to_string()
                },
            ));
        }
    }
    let core: usize = spans.iter().map(|s| s.width()).sum();
    if let Some(e) = &app.server_error {
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(app, Role::Error, format!("server unreachable: {e}")));
    } else if !app.loaded {
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(app, Role::Dim, "loading…"));
    }
    (Line::from(spans), core)
}
