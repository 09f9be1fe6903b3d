//! The gate view: what still blocks the focused run's candidate (or the one chosen from an
//! intent or a receipt), as the server's gate graph says: prerequisites → task → expected
//! evidence → human decision, each node with its state and cause, then the causes. Every
//! label and cause is untrusted text and goes through the sanitiser.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::sessions::gate_role;
use super::{focused, pane_block, span, wrap};
use crate::text;
use crate::tui::app::{App, Pane};
use crate::tui::evidence::{GateNode, GateState, GateView};
use crate::tui::role::Role;

/// The role of a node's state word.
pub fn node_role(state: &str) -> Role {
    match state {
        // The tribunal node's states too (`unanimous` on these bytes, `refused`, `held`,
        // `in_progress`, `invalid`).
        "passed" | "satisfied" | "done" | "unanimous" | "unanimous_pass" => Role::GatePassed,
        "refused" | "invalid" => Role::GateCheckFailed,
        "held" | "in_progress" => Role::Warning,
        "awaiting" => Role::GateAwaitingHuman,
        "failed" => Role::GateCheckFailed,
        "stale" => Role::GateStale,
        "running" => Role::StateRunning,
        "unmet" | "blocked" => Role::Warning,
        "not_started" => Role::GateNotStarted,
        _ => Role::Text,
    }
}

/// What the overall state means, in words (awaiting a person says it is not acceptance).
pub fn meaning(s: GateState) -> &'static str {
    match s {
        GateState::NotStarted => "nothing judged these bytes under the approved policy yet",
        GateState::CheckFailed => "a check failed on these exact bytes",
        GateState::EvidenceStale => {
            "what was recorded names other bytes or another policy: history, not evidence"
        }
        GateState::AwaitingHuman => {
            "every expected evidence passed; a person has not decided. This is not acceptance"
        }
        GateState::AwaitingTribunal => {
            "every expected evidence passed; the policy requires a unanimous tribunal round on \
             these exact bytes, and none is recorded. This is not acceptance"
        }
        GateState::Passed => "a person's publication authorisation for these bytes was spent",
    }
}

type Row = Vec<Span<'static>>;

fn styled(app: &App, role: Role, s: String) -> Span<'static> {
    Span::styled(s, app.theme.style(role))
}

/// Rows for a text that wraps: the first row prefixed by `first`, the rest indented.
fn text_rows(app: &App, first: Row, s: &str, role: Role, width: usize, indent: usize) -> Vec<Row> {
    let used: usize = first.iter().map(|sp| sp.width()).sum();
    let mut rows = Vec::new();
    let avail = width.saturating_sub(used).max(8);
    let parts = wrap(s, avail, 0);
    let mut first = Some(first);
    for (k, p) in parts.into_iter().enumerate() {
        let mut row = if k == 0 {
            first.take().unwrap_or_default()
        } else {
            vec![Span::raw(" ".repeat(indent.min(width / 2)))]
        };
        row.push(styled(app, role, p));
        rows.push(row);
    }
    rows
}

fn node_rows(app: &App, n: &GateNode, depth: usize, width: usize, out: &mut Vec<Row>) {
    let pad = "  ".repeat(depth);
    let bullet = if depth == 0 { "▸ " } else { "• " };
    let state = text::one_line(&n.state.replace('_', " "), 16);
    let label_w = width.saturating_sub(pad.len() + 2 + state.len() + 2).max(8);
    let label_role = if depth == 0 { Role::Title } else { Role::Text };
    // The label wraps (never cut); the state follows its first row.
    for (k, part) in wrap(&n.label, label_w, 0).into_iter().enumerate() {
        if k == 0 {
            out.push(vec![
                Span::raw(pad.clone()),
                styled(app, Role::Dim, bullet.to_string()),
                styled(app, label_role, part),
                Span::raw("  "),
                styled(app, node_role(&n.state), state.clone()),
            ]);
        } else {
            out.push(vec![
                Span::raw(format!("{pad}  ")),
                styled(app, label_role, part),
            ]);
        }
    }
    if let Some(c) = &n.cause {
        let indent = pad.len() + 2;
        out.extend(text_rows(
            app,
            vec![Span::raw(" ".repeat(indent))],
            c,
            Role::Dim,
            width,
            indent,
        ));
    }
    for c in &n.children {
        node_rows(app, c, depth + 1, width, out);
    }
}

fn gate_rows(app: &App, g: &GateView, width: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let st = g.state;
    rows.push(vec![
        styled(app, Role::Dim, "state     ".into()),
        styled(app, gate_role(st), st.label().to_uppercase()),
    ]);
    rows.extend(text_rows(
        app,
        vec![Span::raw("          ")],
        meaning(st),
        Role::Text,
        width,
        10,
    ));
    for c in &g.causes {
        rows.extend(text_rows(
            app,
            vec![styled(app, Role::Warning, "blocks    ".into())],
            c,
            Role::Text,
            width,
            10,
        ));
    }
    rows.push(Vec::new());
    for (i, n) in g.nodes.iter().enumerate() {
        if i > 0 {
            rows.push(vec![styled(app, Role::Dim, "  ↓".into())]);
        }
        node_rows(app, n, 0, width, &mut rows);
    }
    rows.push(Vec::new());
    let now = match g.identity.now.as_str() {
        "current" => "the worktree still holds these bytes".to_string(),
        "changed" => format!(
            "the worktree changed: now {}",
            g.identity.current.as_deref().unwrap_or("?")
        ),
        other => format!("now {other}"),
    };
    rows.extend(text_rows(
        app,
        vec![styled(app, Role::Dim, "identity  ".into())],
        &format!("{} ({now})", g.identity.bound),
        Role::Text,
        width,
        10,
    ));
    let policy = match &g.policy {
        Some(p) => format!("{} {}", p.workspace, p.digest),
        None => "no approved check policy".into(),
    };
    rows.extend(text_rows(
        app,
        vec![styled(app, Role::Dim, "policy    ".into())],
        &policy,
        Role::Text,
        width,
        10,
    ));
    if !g.evaluated_at.is_empty() {
        rows.push(Vec::new());
        rows.push(vec![styled(
            app,
            Role::Dim,
            format!(
                "evaluated {}",
                crate::tui::data::instant(&g.evaluated_at)
                    .map(|t| t
                        .with_timezone(&chrono::Local)
                        .format("%Y-%m-%d %H:%M:%S")
                        .to_string())
                    .unwrap_or_else(|| text::one_line(&g.evaluated_at, 40))
            ),
        )]);
    }
    rows
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let cand = app.gate_candidate();
    let gate = cand.as_ref().and_then(|c| app.gate.gates.get(c));
    let mut title = vec![span(app, Role::Title, " Gate ")];
    if let Some(c) = &cand {
        let run = match gate {
            Some(Ok(g)) => {
                let branch = app
                    .sessions
                    .runs
                    .iter()
                    .find(|r| r.run_ref == g.run)
                    .and_then(|r| r.worktree_branch.as_deref())
                    .map(|b| format!(" ⎇ {}", text::one_line(b, 40)))
                    .unwrap_or_default();
                format!(" · {}{branch}", text::one_line(&g.run, 20))
            }
            _ => String::new(),
        };
        title.push(span(
            app,
            Role::Dim,
            format!("{}{run} ", text::one_line(c, 20)),
        ));
    }
    if let Some(Ok(g)) = gate {
        let st = g.state;
        title.push(span(app, gate_role(st), format!("{} ", st.label())));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Gate));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let rows = body_rows(app, usize::from(inner.width.saturating_sub(1)));
    // Within the graph: `App::lay_out` keeps the scroll.
    let h = usize::from(inner.height);
    for (k, row) in rows.into_iter().skip(app.gate.scroll).take(h).enumerate() {
        buf.set_line(
            inner.x + 1,
            inner.y + k as u16,
            &Line::from(row),
            inner.width.saturating_sub(1),
        );
    }
}

/// The rows the pane shows at `w` columns: the graph of the candidate shown, or why there
/// is none.
fn body_rows(app: &App, w: usize) -> Vec<Row> {
    let cand = app.gate_candidate();
    let gate = cand.as_ref().and_then(|c| app.gate.gates.get(c));
    match (&cand, gate) {
        (None, _) => {
            let msg = match app.selected_run() {
                None => "no session selected".to_string(),
                Some(r) if r.worktree_branch.is_none() => format!(
                    "{} is not a worktree run: a candidate binds a worktree's exact bytes \
                     (`proctor session start --worktree`)",
                    r.run_ref
                ),
                Some(r) => format!(
                    "{} has no bound candidate yet. `proctor candidate bind --run {}` binds its \
                     worktree's exact bytes",
                    r.run_ref, r.run_ref
                ),
            };
            text_rows(app, Vec::new(), &msg, Role::Dim, w, 0)
        }
        (Some(_), None) => vec![vec![styled(app, Role::Dim, "evaluating…".into())]],
        (Some(_), Some(Err(e))) => text_rows(
            app,
            vec![styled(app, Role::Error, "the gate: ".into())],
            e,
            Role::Error,
            w,
            2,
        ),
        (Some(_), Some(Ok(g))) => gate_rows(app, g, w),
    }
}

/// How many rows the pane's content takes at `w` columns (for the scroll, in the state).
pub fn rows_len(app: &App, w: usize) -> usize {
    body_rows(app, w).len()
}
