//! The Intents view: the publication intents (id, run, branch, title, state), newest first,
//! and the selected one in full (its revision, remote, the causes that block it, what
//! happened when it was published). Branch, title, remote URL, causes and the forge's answer
//! are untrusted and go through the sanitiser.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use super::{dim_message, focused, labelled, pane_block, row_style, span, wrap};
use crate::text;
use crate::tui::action::Action;
use crate::tui::app::{App, Pane};
use crate::tui::evidence::IntentView;
use crate::tui::keymap::Context;
use crate::tui::role::Role;

/// The role of an intent's state.
pub fn intent_role(state: &str) -> Role {
    match state {
        "awaiting_authority" => Role::GateAwaitingHuman,
        "blocked" => Role::Warning,
        "published" => Role::Success,
        "failed" => Role::Error,
        _ => Role::Text,
    }
}

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let (list_area, detail_area) = super::list_over_detail(area, app.intents.lines().len());
    draw_list(app, list_area, buf);
    draw_detail(app, detail_area, buf);
}

fn draw_list(app: &App, area: Rect, buf: &mut Buffer) {
    let n = app.intent_list().len();
    let waiting = app.awaiting_authority();
    let mut title = vec![
        span(app, Role::Title, " Publication intents "),
        span(app, Role::Dim, format!("{n} ")),
    ];
    if waiting > 0 {
        title.push(span(
            app,
            Role::GateAwaitingHuman,
            format!("· {waiting} awaiting authority "),
        ));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Intents));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let w = usize::from(inner.width);
    let msg = match &app.intents.list {
        None => Some("loading…".to_string()),
        Some(Err(e)) => Some(format!("the intents: {e}")),
        Some(Ok(v)) if v.is_empty() => Some(
            "no publication intent yet: `proctor publish propose --run REF --remote NAME \
             --branch B --title T` makes one from a run's bound candidate"
                .to_string(),
        ),
        Some(Ok(_)) => None,
    };
    if let Some(m) = msg {
        dim_message(app, buf, inner, &m);
        return;
    }
    // A cockpit of several hosts: a HOST column, and each id and run as its host names it.
    let host_w = app
        .intent_list()
        .iter()
        .filter_map(|i| i.host.as_deref())
        .map(|h| text::one_line(h, 16).width())
        .max()
        .map_or(0, |n| n.max(4) + 1);
    let id_w = 8;
    let run_w = 8;
    let state_w = if app.intent_list().iter().any(|i| i.stale) {
        24
    } else {
        18
    };
    let rest = w.saturating_sub(2 + host_w + id_w + 1 + run_w + 1 + 1 + state_w + 1);
    let branch_w = (rest * 2 / 5).clamp(6.min(rest), 28);
    let title_w = rest.saturating_sub(branch_w + 1);
    let head = format!(
        "  {}{} {} {} {} {}",
        if host_w > 0 {
            pad("HOST", host_w)
        } else {
            String::new()
        },
        pad("ID", id_w),
        pad("RUN", run_w),
        pad("BRANCH", branch_w),
        pad("TITLE", title_w),
        pad("STATE", state_w)
    );
    buf.set_stringn(inner.x, inner.y, head, w, app.theme.style(Role::Dim));
    let rows = usize::from(inner.height).saturating_sub(1);
    if rows == 0 {
        return;
    }
    let selected = app.selected_intent().map(|i| i.id.clone());
    // A blocked intent takes a second row: its first cause (all of them are below). The
    // selected intent's rows are in view: `App::lay_out` keeps the offset.
    let lines = app.intents.lines();
    let list_focused = focused(app, Pane::Intents);
    for (k, &(i, cause_row)) in lines.iter().skip(app.intents.offset).take(rows).enumerate() {
        let it = &app.intent_list()[i];
        let y = inner.y + 1 + k as u16;
        let is_sel = selected.as_deref() == Some(it.id.as_str());
        let base = row_style(app, is_sel, list_focused);
        let st = |role: Role| base.patch(app.theme.style(role));
        for x in inner.x..inner.x + inner.width {
            buf[(x, y)].set_style(base);
        }
        let line = if cause_row {
            let more = match it.causes.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            let lead = 2 + host_w + id_w + 1;
            let cause = text::one_line(&it.causes[0], w.saturating_sub(lead + 2 + more.len()));
            Line::from(vec![
                Span::styled(" ".repeat(lead), base),
                Span::styled("↳ ", st(Role::Warning)),
                Span::styled(cause, st(Role::Dim)),
                Span::styled(more, st(Role::Dim)),
            ])
        } else {
            Line::from(vec![
                Span::styled(if is_sel { "› " } else { "  " }, st(Role::Marker)),
                Span::styled(
                    if host_w > 0 {
                        pad(it.host.as_deref().unwrap_or(""), host_w)
                    } else {
                        String::new()
                    },
                    st(if it.stale { Role::Stale } else { Role::Text }),
                ),
                Span::styled(pad(it.own_id(), id_w), st(Role::Text)),
                Span::styled(" ", base),
                Span::styled(pad(it.own_run(), run_w), st(Role::Text)),
                Span::styled(" ", base),
                Span::styled(pad(&it.branch, branch_w), st(Role::Text)),
                Span::styled(" ", base),
                Span::styled(pad(&it.title, title_w), st(Role::Text)),
                Span::styled(" ", base),
                Span::styled(
                    pad(&it.label(), state_w),
                    st(if it.stale {
                        Role::Stale
                    } else {
                        intent_role(&it.state)
                    }),
                ),
            ])
        };
        buf.set_line(inner.x, y, &line, inner.width);
    }
}

fn detail_rows(app: &App, it: &IntentView, w: usize) -> Vec<Line<'static>> {
    let style = |r: Role| app.theme.style(r);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let field = |rows: &mut Vec<Line<'static>>, label: &str, value: &str, role: Role| {
        labelled(app, rows, label, value, role, w)
    };
    rows.push(Line::from(vec![
        Span::styled(
            format!("{} ", text::one_line(it.own_id(), 20)),
            style(Role::Title),
        ),
        Span::styled(
            it.label(),
            style(if it.stale {
                Role::Stale
            } else {
                intent_role(&it.state)
            }),
        ),
    ]));
    if let Some(h) = &it.host {
        // Whose key signs and whose remote is pushed to (docs/remote.md).
        let whose = if h == crate::remote::LOCAL {
            "this machine's: approved here, with this machine's key".to_string()
        } else {
            format!("approved on {h} by `ssh -t {h}`, with {h}'s key, pushed to {h}'s remote")
        };
        let mut v = format!("{h} · {whose}");
        if it.stale {
            v.push_str(" · unreachable now: as last heard, its state unknown");
        }
        field(
            &mut rows,
            "host",
            &v,
            if it.stale { Role::Stale } else { Role::Text },
        );
    }
    if !it.causes.is_empty() {
        rows.push(Line::from(Span::styled(
            "blocked because",
            style(Role::Warning),
        )));
        for c in &it.causes {
            for (k, part) in wrap(c, w.saturating_sub(2), 2).into_iter().enumerate() {
                rows.push(Line::from(vec![
                    Span::styled(if k == 0 { "- " } else { "" }, style(Role::Warning)),
                    Span::styled(part, style(Role::Text)),
                ]));
            }
        }
    }
    field(
        &mut rows,
        "run",
        &format!("{} · candidate {}", it.run, it.candidate.id),
        Role::Text,
    );
    field(&mut rows, "revision", &it.revision, Role::Text);
    field(&mut rows, "branch", &it.branch, Role::Text);
    field(
        &mut rows,
        "remote",
        &format!("{} {}", it.remote.name, it.remote.url),
        Role::Text,
    );
    field(&mut rows, "title", &it.title, Role::Text);
    if let Some(o) = &it.outcome {
        if let Some(pr) = &o.effects.pull_request {
            field(
                &mut rows,
                "pull req",
                &format!("#{} {}", pr.number, pr.html_url),
                Role::Text,
            );
        }
        if let Some(e) = &o.error {
            field(&mut rows, "error", &e.message, Role::Error);
        }
    }
    if it.awaiting() {
        let key = app
            .keymap
            .key_for(
                &[Context::Pane(Pane::Intents), Context::Global],
                Action::Approve,
            )
            .unwrap_or_else(|| ":approve-publication".into());
        let (role, msg) = match app.refusal(Action::Approve) {
            Some(why) => (
                Role::Unavailable,
                format!("approving needs a person's write token ({why})"),
            ),
            None => (
                Role::Text,
                "approves it: you read every field, type its full revision, then your \
                 passphrase"
                    .to_string(),
            ),
        };
        let key_w = key.width() + 1;
        for (k, part) in wrap(&msg, w.saturating_sub(key_w), 0)
            .into_iter()
            .enumerate()
        {
            let lead = if k == 0 {
                Span::styled(
                    format!("{key} "),
                    style(if role == Role::Unavailable {
                        Role::Unavailable
                    } else {
                        Role::Key
                    }),
                )
            } else {
                Span::raw(" ".repeat(key_w))
            };
            rows.push(Line::from(vec![lead, Span::styled(part, style(role))]));
        }
    }
    rows
}

fn draw_detail(app: &App, area: Rect, buf: &mut Buffer) {
    let block = pane_block(app, Line::from(span(app, Role::Title, " Intent ")), false);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 2 || inner.height == 0 {
        return;
    }
    let Some(it) = app.selected_intent() else {
        return;
    };
    let w = usize::from(inner.width.saturating_sub(1));
    for (k, l) in detail_rows(app, it, w)
        .into_iter()
        .take(usize::from(inner.height))
        .enumerate()
    {
        buf.set_line(inner.x + 1, inner.y + k as u16, &l, inner.width - 1);
    }
}
