//! The factory runs as session groups in the sessions list (issue 16): a header row per run
//! (`fac-0001  factory  review`, or its outcome: `completed`, `rejected (exit 3)`,
//! `failed: <code>`), then a child row per provider invocation, as a tree
//! (`├ worker    claude  done             0:42`, `└ review-2  codex   REQUEST_CHANGES`).
//! Running runs first, then the finished ones, newest first; when the rows do not all fit,
//! the finished groups fold to their header row. A failed poll shows one row saying the
//! factory's state is unknown, never the runs heard before. Every server string goes
//! through [`crate::text`].

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use crate::api::factory::{FactoryRun, RunStatus, StepView};
use crate::text;
use crate::tui::app::App;
use crate::tui::data::instant;
use crate::tui::role::Role;

/// The role that colours a run's status: completed like a passed gate, rejected and failed
/// like a failed state, running like a running one.
pub fn status_role(s: RunStatus) -> Role {
    match s {
        RunStatus::Running => Role::StateRunning,
        RunStatus::Completed => Role::GatePassed,
        RunStatus::Rejected | RunStatus::Failed => Role::StateFailed,
    }
}

/// The role of a step's state or verdict word.
fn step_role(s: &StepView) -> Role {
    match s.verdict.as_deref() {
        Some("APPROVE") => return Role::GatePassed,
        Some("REQUEST_CHANGES") => return Role::StateFailed,
        Some(_) => return Role::Text,
        None => {}
    }
    match s.state.as_str() {
        "running" => Role::StateRunning,
        "done" => Role::StateStopped,
        "failed" | "timed_out" => Role::StateFailed,
        _ => Role::Dim,
    }
}

/// A run's phase or outcome, as its header row says it.
pub fn outcome(r: &FactoryRun) -> String {
    match r.status {
        RunStatus::Running => r.phase.as_str().to_string(),
        RunStatus::Completed => "completed".to_string(),
        RunStatus::Rejected => format!("rejected (exit {})", r.exit_code.unwrap_or(3)),
        RunStatus::Failed => match &r.error {
            Some(e) => format!("failed: {}", text::one_line(&e.code, 40)),
            None => "failed".to_string(),
        },
    }
}

/// `0:42`, `12:05`, `1:02:03`.
pub fn clock(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A step in progress: `0:42` in its first minute (every second), then whole minutes
/// (`3m`, `1h05m`), as the AGE column counts; its exact time is shown when it ends. Its clock
/// then changes once a minute, not every second (no frame a second for it alone).
pub fn running_clock(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => clock(ms),
        60..=3599 => format!("{}m", s / 60),
        _ => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

/// A running run's upper bound of provider time: `0:42` under a minute, else rounded up to
/// the minute (`29m`, `7h59m`): still an upper bound, and a text that changes once a minute
/// although the server counts it down at every poll.
pub fn bound_clock(ms: u64) -> String {
    if ms < 60_000 {
        return clock(ms);
    }
    let m = ms.div_ceil(60_000);
    if m < 60 {
        format!("{m}m")
    } else {
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

/// The rows of one group: its header, then (unless `folded`) its steps and a failed run's
/// message.
fn group(app: &App, r: &FactoryRun, folded: bool) -> Vec<Line<'static>> {
    let st = |role: Role| app.theme.style(role);
    let mut head = vec![
        Span::styled("  ", st(Role::Text)),
        Span::styled(text::one_line(&r.id, 14), st(Role::Text)),
        Span::styled("  factory  ", st(Role::Dim)),
        Span::styled(outcome(r), st(status_role(r.status))),
    ];
    let mut tail = format!(
        "  {} → {}",
        text::one_line(&r.worker.tool, 16),
        text::one_line(&r.reviewer.tool, 16)
    );
    if let Some(rig) = &r.rig {
        // The worker runs behind that rig's boundary (the receipt says which).
        tail.push_str(&format!("  worker in {}", text::one_line(rig, 12)));
    }
    if r.status == RunStatus::Running && r.provider_bound_ms > 0 {
        // An upper bound the server computed, never an estimate.
        tail.push_str(&format!(
            "  ≤ {} provider time",
            bound_clock(r.provider_bound_ms)
        ));
    }
    if let Some(c) = &r.candidate {
        tail.push_str(&format!("  candidate {}", text::one_line(c, 12)));
    }
    if r.demo {
        // Backed by the demo's stand-ins: no model ran. Said before the rest of the header,
        // so a narrow list cuts the candidate, never the label.
        head.push(Span::styled("  demo", st(Role::Demo)));
    }
    head.push(Span::styled(tail, st(Role::Dim)));
    let mut out = vec![Line::from(head)];
    if folded {
        return out;
    }
    let message = match (&r.status, &r.error) {
        (RunStatus::Failed, Some(e)) => Some(text::one_line(&e.message, 200)),
        _ => None,
    };
    let tool_w = r
        .steps
        .iter()
        .map(|s| text::one_line(&s.tool, 12).width())
        .max()
        .unwrap_or(0)
        .max(6);
    let n = r.steps.len() + usize::from(message.is_some());
    for (k, s) in r.steps.iter().enumerate() {
        let branch = if k + 1 == n { "  └ " } else { "  ├ " };
        let word = match &s.verdict {
            Some(v) => text::one_line(v, 20),
            None => text::one_line(&s.state, 20),
        };
        let elapsed = match (s.elapsed_ms, s.state.as_str()) {
            (Some(ms), _) => clock(ms),
            // A step in progress: its time since the start the server reported.
            (None, "running") => instant(&s.started_at)
                .map(|t| running_clock((app.now - t).num_milliseconds().max(0) as u64))
                .unwrap_or_default(),
            (None, _) => String::new(),
        };
        out.push(Line::from(vec![
            Span::styled(branch, st(Role::Dim)),
            Span::styled(pad(&s.role, 9), st(Role::Text)),
            Span::styled(pad(&s.tool, tool_w + 1), st(Role::Dim)),
            Span::styled(pad(&word, 16), st(step_role(s))),
            Span::styled(elapsed, st(Role::Dim)),
        ]));
    }
    if let Some(m) = message {
        out.push(Line::from(vec![
            Span::styled("  └ ", st(Role::Dim)),
            Span::styled(m, st(Role::Error)),
        ]));
    }
    out
}

/// Every row the groups would take unfolded (what the list's pane asks room for): none
/// before the first answer or when the server holds no factory run, one for a failed poll.
pub fn wanted(app: &App) -> usize {
    match &app.factory.runs {
        None => 0,
        Some(Err(_)) => 1,
        Some(Ok(v)) => v
            .iter()
            .map(|r| {
                let msg = r.status == RunStatus::Failed && r.error.is_some();
                1 + r.steps.len() + usize::from(msg)
            })
            .sum(),
    }
}

/// How the `avail` rows under the list's column header are shared: (the sessions' rows,
/// the factory's rows). The sessions come first: the factory has the rows they leave, and
/// while sessions wait for room, a third of the rows (two at least) but never all.
pub fn split(app: &App, avail: usize) -> (usize, usize) {
    let want = wanted(app);
    if want == 0 || app.sessions.server_error.is_some() {
        return (avail, 0);
    }
    // The sessions first: the groups get the rows the sessions leave, and never more than
    // a third of the list (two rows at least) while sessions wait for room.
    let need = app.sessions.view.len().max(1);
    let cap = (avail / 3).max(2);
    let fac = want.min(
        avail
            .saturating_sub(need)
            .max(cap.min(avail.saturating_sub(1))),
    );
    (avail - fac, fac)
}

/// The groups' rows, at most `rows` of them: when everything does not fit, the groups after
/// the first fold to their header row (the first too when the headers would not fit beside
/// its tree), and a last row counts the runs left out.
pub fn lines(app: &App, rows: usize) -> Vec<Line<'static>> {
    if rows == 0 {
        return Vec::new();
    }
    match &app.factory.runs {
        None => return Vec::new(),
        Some(Err(e)) => {
            return vec![Line::from(vec![
                Span::styled("  factory  ", app.theme.style(Role::Dim)),
                Span::styled(
                    format!("unknown: {}", text::one_line(e, 200)),
                    app.theme.style(Role::Error),
                ),
            ])];
        }
        Some(Ok(_)) => {}
    }
    let shown = app.factory.shown();
    let fold = wanted(app) > rows;
    // The first group shown (the newest running one, else the newest) keeps its steps
    // unless that leaves no room for the other groups' header rows: then every outcome
    // shows rather than one tree.
    let fold_first = fold
        && shown.len() > 1
        && shown
            .first()
            .is_some_and(|r| group(app, r, false).len() + shown.len() - 1 > rows);
    let mut out = Vec::new();
    for (k, r) in shown.iter().enumerate() {
        let folded = fold && (k > 0 || fold_first);
        let mut g = group(app, r, folded);
        let after = shown.len() - k - 1;
        let room = rows - out.len();
        if g.len() + usize::from(after > 0) <= room {
            out.extend(g);
            continue;
        }
        // It does not fit: as much of it as leaves a row to count the runs left out.
        let keep = if after > 0 { room - 1 } else { room };
        let more = if keep == 0 {
            after + 1
        } else {
            g.truncate(keep);
            out.extend(g);
            after
        };
        if more > 0 && out.len() < rows {
            out.push(Line::from(Span::styled(
                format!("  … {more} more factory run(s)"),
                app.theme.style(Role::Dim),
            )));
        }
        break;
    }
    out.truncate(rows);
    out
}
