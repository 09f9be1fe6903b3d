//! The sessions list: ref, marks, name (and a worktree run's branch), tool/profile, state
//! with its source, the gate of the run's latest candidate, age, demo.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use super::{focused, pane_block, row_style, span};
use crate::text;
use crate::tui::app::{App, Pane};
use crate::tui::data::{RunState, RunView, ago, instant};
use crate::tui::evidence::GateState;
use crate::tui::role::Role;

/// The role that colours a gate state. Awaiting a person never shares passed's look.
pub fn gate_role(s: GateState) -> Role {
    match s {
        GateState::NotStarted => Role::GateNotStarted,
        GateState::CheckFailed => Role::GateCheckFailed,
        GateState::EvidenceStale => Role::GateStale,
        GateState::AwaitingHuman => Role::GateAwaitingHuman,
        GateState::Passed => Role::GatePassed,
        GateState::Unknown => Role::Dim,
    }
}

/// The role that colours a state.
pub fn state_role(s: RunState) -> Role {
    match s {
        RunState::Starting | RunState::Recovering => Role::StateStarting,
        RunState::Running => Role::StateRunning,
        RunState::Idle => Role::StateIdle,
        RunState::Stopped => Role::StateStopped,
        RunState::Failed => Role::StateFailed,
        RunState::Lost => Role::StateLost,
        RunState::Cleaned | RunState::Unknown => Role::StateCleaned,
    }
}

/// `claude`, or `claude/work` when the profile is not the tool's own.
pub fn tool_label(r: &RunView) -> String {
    if r.profile == r.tool || r.profile.is_empty() {
        r.tool.clone()
    } else {
        format!("{}/{}", r.tool, r.profile)
    }
}

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

pub fn draw(app: &mut App, area: Rect, buf: &mut Buffer) {
    let shown = app.view.len();
    let mut title = vec![
        span(app, Role::Title, " Sessions "),
        span(
            app,
            Role::Dim,
            if shown == app.total || !app.loaded {
                format!("{shown} ")
            } else {
                format!("{shown} of {} ", app.total)
            },
        ),
    ];
    if !app.filter.is_empty() || app.mode.is_filter() {
        let cursor = if app.mode.is_filter() { "▏" } else { "" };
        title.push(span(app, Role::Highlight, "/"));
        title.push(span(
            app,
            Role::Input,
            format!("{}{cursor}", text::one_line(app.filter.value(), 30)),
        ));
        title.push(span(app, Role::Dim, " "));
    }
    if app.show_archived {
        title.push(span(app, Role::Marker, "+archived "));
    }
    if app.show_snoozed {
        title.push(span(app, Role::Marker, "+snoozed "));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Sessions));
    let inner = block.inner(area);
    ratatui::widgets::Widget::render(block, area, buf);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    if let Some(e) = &app.server_error {
        // Said in place, where the list should be, with the remedy the error carries.
        let lines = textwrap_lines(&format!("the server does not answer: {e}"), inner.width);
        for (k, l) in lines.iter().take(usize::from(inner.height)).enumerate() {
            buf.set_stringn(
                inner.x + 1,
                inner.y + k as u16,
                l,
                usize::from(inner.width.saturating_sub(1)),
                app.theme.style(Role::Error),
            );
        }
        return;
    }
    if app.view.is_empty() {
        let msg = if !app.loaded {
            "loading…".to_string()
        } else if app.runs.is_empty() {
            "no sessions yet: n starts one".to_string()
        } else {
            "nothing matches (the filter, or hidden archived/snoozed sessions)".to_string()
        };
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            msg,
            usize::from(inner.width.saturating_sub(1)),
            app.theme.style(Role::Dim),
        );
        return;
    }
    // Columns: marks, ref, name, tool, state · source, age, demo.
    let w = usize::from(inner.width);
    let ref_w = app
        .view
        .iter()
        .map(|&i| app.runs[i].run_ref.width())
        .max()
        .unwrap_or(8)
        .min(14);
    // The gate column appears once a listed run is a worktree run or has a candidate; the
    // tool and the state then give it room.
    let show_gate = app.view.iter().any(|&i| {
        let r = &app.runs[i];
        r.worktree_branch.is_some() || app.candidates.contains_key(&r.run_ref)
    });
    let tool_w = app
        .view
        .iter()
        .map(|&i| tool_label(&app.runs[i]).width())
        .max()
        .unwrap_or(6)
        .clamp(4, if show_gate { 8 } else { 12 });
    // Short gate words on a narrow list.
    let long_gate = w >= 100;
    let gate_w = match (show_gate, long_gate) {
        (false, _) => 0,
        (true, false) => 8,
        (true, true) => 14,
    };
    // On a narrow list the gate takes the age's place.
    let age_w = if show_gate && w < 70 { 0 } else { 4 };
    let demo_w = 4;
    let marks_w = 5;
    let col = |width: usize| if width == 0 { 0 } else { width + 1 };
    let fixed = marks_w + ref_w + 1 + tool_w + 1 + 1 + col(gate_w) + col(age_w) + demo_w;
    let rest = w.saturating_sub(fixed + 1);
    // The state and its source matter most: `running · output 12s ago` fits in 24.
    let state_w = rest
        .saturating_sub(8)
        .clamp(9.min(rest), if show_gate { 23 } else { 24 });
    let name_w = rest.saturating_sub(state_w + 1);

    // Header row.
    let mut head = format!(
        "{}{} {} {} {} ",
        " ".repeat(marks_w),
        pad("REF", ref_w),
        pad("NAME", name_w),
        pad("TOOL", tool_w),
        pad("STATE", state_w),
    );
    if gate_w > 0 {
        head.push_str(&pad("GATE", gate_w));
        head.push(' ');
    }
    if age_w > 0 {
        head.push_str(&pad("AGE", age_w));
        head.push(' ');
    }
    head.push_str(&pad("", demo_w));
    buf.set_stringn(inner.x, inner.y, head, w, app.theme.style(Role::Dim));
    let rows = usize::from(inner.height) - 1;
    if rows == 0 {
        return;
    }
    // Keep the selection in view.
    let sel = app.selected_index().unwrap_or(0);
    if sel < app.list_offset {
        app.list_offset = sel;
    } else if sel >= app.list_offset + rows {
        app.list_offset = sel + 1 - rows;
    }
    app.list_offset = app.list_offset.min(app.view.len().saturating_sub(rows));
    let now = app.now;
    let list_focused = focused(app, Pane::Sessions);
    for (k, &i) in app.view.iter().skip(app.list_offset).take(rows).enumerate() {
        let r = &app.runs[i];
        let y = inner.y + 1 + k as u16;
        let selected = app.selected.as_deref() == Some(r.run_ref.as_str());
        let base = row_style(app, selected, list_focused);
        let st = |role: Role| base.patch(app.theme.style(role));
        let mut marks = String::new();
        marks.push(if selected { '›' } else { ' ' });
        marks.push(if r.pinned { '*' } else { ' ' });
        marks.push(if r.is_snoozed(now) {
            'z'
        } else if r.is_archived() {
            'a'
        } else {
            ' '
        });
        marks.push(if r.done { '✓' } else { ' ' });
        marks.push(' ');
        let (state, source) = r.state_source(now);
        let state_text = if source.is_empty() {
            state
        } else {
            format!("{state} · {source}")
        };
        let age = instant(&r.created_at)
            .map(|t| ago(now, t))
            .unwrap_or_default();
        let name = r.name.as_deref().unwrap_or("");
        // A worktree run's branch follows its name (sanitised with it).
        let name = match r.worktree_branch.as_deref() {
            Some(b) if name.is_empty() => format!("⎇ {b}"),
            Some(b) => format!("{name} ⎇ {b}"),
            None => name.to_string(),
        };
        let mut spans = vec![
            Span::styled(marks, st(Role::Marker)),
            Span::styled(pad(&r.run_ref, ref_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(pad(&name, name_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(pad(&tool_label(r), tool_w), st(Role::Dim)),
            Span::styled(" ", base),
            Span::styled(pad(&state_text, state_w), st(state_role(r.state()))),
            Span::styled(" ", base),
        ];
        if gate_w > 0 {
            let (label, role) = match app.run_gate(&r.run_ref) {
                None if r.worktree_branch.is_some() => ("unbound".to_string(), Role::Dim),
                None => (String::new(), Role::Dim),
                Some(Ok(None)) => ("…".to_string(), Role::Dim),
                Some(Ok(Some(g))) => (
                    if long_gate { g.label() } else { g.short() }.to_string(),
                    gate_role(g),
                ),
                Some(Err(_)) => ("?".to_string(), Role::Error),
            };
            spans.push(Span::styled(pad(&label, gate_w), st(role)));
            spans.push(Span::styled(" ", base));
        }
        if age_w > 0 {
            spans.push(Span::styled(pad(&age, age_w), st(Role::Dim)));
            spans.push(Span::styled(" ", base));
        }
        spans.push(Span::styled(
            pad(if r.demo { "demo" } else { "" }, demo_w),
            st(Role::Demo),
        ));
        // Fill the row so the selection covers it.
        for x in inner.x..inner.x + inner.width {
            buf[(x, y)].set_style(base);
        }
        buf.set_line(inner.x, y, &Line::from(spans), inner.width);
    }
}

/// Sanitised text cut into lines of at most `width - 1` columns, at spaces when possible.
fn textwrap_lines(s: &str, width: u16) -> Vec<String> {
    let w = usize::from(width.saturating_sub(1)).max(1);
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text::one_line(s, usize::MAX).split(' ') {
        if !line.is_empty() && line.width() + 1 + word.width() > w {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out.into_iter().map(|l| text::one_line(&l, w)).collect()
}
