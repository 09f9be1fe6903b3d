//! The sessions list: ref, marks, name (and a worktree run's branch), tool/profile, state
//! with its source (`waiting for you · hook` while a run waits for the person, `waiting`
//! where only the word fits), the gate of the run's latest candidate, age, demo.

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
        GateState::AwaitingHuman | GateState::AwaitingTribunal => Role::GateAwaitingHuman,
        GateState::Passed => Role::GatePassed,
    }
}

/// The role that colours a state.
pub fn state_role(s: RunState) -> Role {
    match s {
        RunState::Starting | RunState::Recovering => Role::StateStarting,
        RunState::Running => Role::StateRunning,
        RunState::Idle => Role::StateIdle,
        RunState::Stopped => Role::StateStopped,
        RunState::Failed | RunState::Blocked => Role::StateFailed,
        RunState::Lost => Role::StateLost,
        RunState::Cleaned => Role::StateCleaned,
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
    let mut s = text::one_line(s, w);
    let n = s.width();
    s.extend(std::iter::repeat_n(' ', w.saturating_sub(n)));
    s
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let shown = app.sessions.view.len();
    let mut title = vec![
        span(app, Role::Title, " Sessions "),
        span(
            app,
            Role::Dim,
            if shown == app.sessions.total || !app.sessions.loaded {
                format!("{shown} ")
            } else {
                format!("{shown} of {} ", app.sessions.total)
            },
        ),
    ];
    if !app.sessions.filter.is_empty() || app.mode.is_filter() {
        let cursor = if app.mode.is_filter() { "▏" } else { "" };
        title.push(span(app, Role::Highlight, "/"));
        title.push(span(
            app,
            Role::Input,
            format!(
                "{}{cursor}",
                text::one_line(app.sessions.filter.value(), 30)
            ),
        ));
        title.push(span(app, Role::Dim, " "));
    }
    if app.sessions.show_archived {
        title.push(span(app, Role::Marker, "+archived "));
    }
    if app.sessions.show_snoozed {
        title.push(span(app, Role::Marker, "+snoozed "));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Sessions));
    let inner = block.inner(area);
    ratatui::widgets::Widget::render(block, area, buf);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    // A cockpit of several hosts: one line per host above the list (reachable, version,
    // live and idle counts; or unreachable since when, and why).
    let inner = if app.hosts.is_multi() {
        let lines = app.hosts.lines(app.now);
        let n = u16::try_from(lines.len())
            .unwrap_or(u16::MAX)
            .min(inner.height);
        for (k, (l, ok)) in lines.iter().take(usize::from(n)).enumerate() {
            let role = if *ok { Role::Dim } else { Role::Error };
            buf.set_stringn(
                inner.x + 1,
                inner.y + k as u16,
                l,
                usize::from(inner.width.saturating_sub(1)),
                app.theme.style(role),
            );
        }
        Rect {
            y: inner.y + n,
            height: inner.height - n,
            ..inner
        }
    } else {
        inner
    };
    if inner.height == 0 {
        return;
    }
    if let Some(e) = &app.sessions.server_error {
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
    let (session_rows, factory_rows) =
        super::factory::split(app, usize::from(inner.height).saturating_sub(1));
    // The factory's groups, under the sessions drawn (from the list's row `from`).
    let draw_factory = |buf: &mut Buffer, from: usize| {
        let lines = super::factory::lines(app, factory_rows);
        for (k, l) in lines.iter().enumerate() {
            let y = inner.y + (from + k) as u16;
            if y >= inner.y + inner.height {
                break;
            }
            buf.set_line(inner.x, y, l, inner.width);
        }
    };
    if app.sessions.view.is_empty() {
        draw_factory(buf, 1);
        let msg = if !app.sessions.loaded {
            "loading…".to_string()
        } else if app.sessions.runs.is_empty() {
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
    let w = usize::from(inner.width);
    let rows = session_rows;
    // Only the rows in view are made into lines (the columns' widths still come from all).
    let (head, lines) = list_lines(app, w, app.sessions.offset..app.sessions.offset + rows);
    buf.set_stringn(inner.x, inner.y, head, w, app.theme.style(Role::Dim));
    if rows == 0 {
        return;
    }
    draw_factory(
        buf,
        1 + rows.min(app.sessions.view.len().saturating_sub(app.sessions.offset)),
    );
    // The selection is in view: `App::lay_out` keeps the offset.
    for (k, (base, line)) in lines.into_iter().enumerate() {
        let y = inner.y + 1 + k as u16;
        // Fill the row so the selection covers it.
        for x in inner.x..inner.x + inner.width {
            buf[(x, y)].set_style(base);
        }
        buf.set_line(inner.x, y, &line, inner.width);
    }
}

/// What the list shows of its runs at the last frame's width and clock: its header and, for
/// every run of the view in order, the row's style and line. Two lists that show the same
/// are drawn the same (an answer of the list poll that changes only what no row shows, an
/// output's seq or instant, draws no frame: [`crate::tui::app::App::on_msg`]).
pub fn shown(app: &App) -> (String, Vec<(ratatui::style::Style, Line<'static>)>) {
    list_lines(
        app,
        usize::from(super::inner(app.areas.sessions).width),
        0..usize::MAX,
    )
}

/// For each run of the view, whether its row shows its state's source (`output 2s ago`) at
/// the last frame's width and clock. A source that no row shows does not wake the clock
/// every second ([`crate::tui::app::App::next_clock_change`]).
pub fn sources_shown(app: &App) -> Vec<bool> {
    let w = usize::from(super::inner(app.areas.sessions).width);
    let cells: Vec<Cells> = app
        .sessions
        .view
        .iter()
        .map(|&i| cells(app, &app.sessions.runs[i]))
        .collect();
    let plan = Plan::new(&cells, w);
    cells
        .iter()
        .map(|c| c.state_full != c.state_word && c.state_full.width() <= plan.state_w)
        .collect()
}

/// The header and the rows `window` of a list `w` columns wide (the columns are sized for
/// every row of the view, so scrolling does not move them).
fn list_lines(
    app: &App,
    w: usize,
    window: std::ops::Range<usize>,
) -> (String, Vec<(ratatui::style::Style, Line<'static>)>) {
    let now = app.now;
    let cells: Vec<Cells> = app
        .sessions
        .view
        .iter()
        .map(|&i| cells(app, &app.sessions.runs[i]))
        .collect();
    // A cockpit of several hosts: a HOST column after the marks, taken from the width.
    let host_w = if app.hosts.is_multi() {
        app.hosts
            .list
            .iter()
            .map(|h| text::one_line(&h.name, 20).width())
            .max()
            .unwrap_or(0)
            .max("HOST".len())
    } else {
        0
    };
    let host_cols = if host_w > 0 { host_w + 1 } else { 0 };
    let plan = Plan::new(&cells, w.saturating_sub(host_cols));

    // Header row.
    let mut head = " ".repeat(plan.marks.len());
    if host_w > 0 {
        head.push_str(&pad("HOST", host_w));
        head.push(' ');
    }
    for (title, width) in [
        ("REF", plan.ref_w),
        ("NAME", plan.name_w),
        ("TOOL", plan.tool_w),
        ("STATE", plan.state_w),
        ("GATE", plan.gate_w),
        ("AGE", plan.age_w),
    ] {
        if width > 0 {
            head.push_str(&pad(title, width));
            head.push(' ');
        }
    }
    let list_focused = focused(app, Pane::Sessions);
    let take = window.end.saturating_sub(window.start);
    let mut lines = Vec::with_capacity(cells.len().min(take));
    for (&i, c) in app
        .sessions
        .view
        .iter()
        .zip(&cells)
        .skip(window.start)
        .take(take)
    {
        let r = &app.sessions.runs[i];
        let selected = app.sessions.selected.as_deref() == Some(r.run_ref.as_str());
        let stale = app.hosts.stale(&r.run_ref);
        let base = row_style(app, selected, list_focused);
        // A host that does not answer: its rows greyed, whatever their last state said.
        let base = if stale {
            base.patch(app.theme.style(Role::Stale))
        } else {
            base
        };
        let st = |role: Role| {
            if stale {
                base
            } else {
                base.patch(app.theme.style(role))
            }
        };
        let (host, shown_ref) = match crate::tui::hosts::split(&r.run_ref) {
            Some((h, rest)) if host_w > 0 => (h, rest),
            _ => ("", r.run_ref.as_str()),
        };
        let mut marks = String::new();
        marks.push(if selected { '›' } else { ' ' });
        if plan.marks.pin {
            marks.push(if r.pinned { '*' } else { ' ' });
        }
        if plan.marks.hidden {
            marks.push(if r.is_snoozed(now) {
                'z'
            } else if r.is_archived() {
                'a'
            } else {
                ' '
            });
        }
        if plan.marks.done {
            marks.push(if r.done { '✓' } else { ' ' });
        }
        marks.push(' ');
        let mut spans = vec![Span::styled(marks, st(Role::Marker))];
        if host_w > 0 {
            spans.push(Span::styled(pad(host, host_w), st(Role::Title)));
            spans.push(Span::styled(" ", base));
        }
        spans.push(Span::styled(pad(shown_ref, plan.ref_w), st(Role::Text)));
        spans.push(Span::styled(" ", base));
        let cell = |spans: &mut Vec<Span<'static>>, text: &str, width: usize, role: Role| {
            if width > 0 {
                spans.push(Span::styled(pad(text, width), st(role)));
                spans.push(Span::styled(" ", base));
            }
        };
        cell(&mut spans, &c.name, plan.name_w, Role::Text);
        cell(&mut spans, &c.tool, plan.tool_w, Role::Dim);
        // The state with its source when both fit, else the state's word alone: never a
        // source cut to a letter.
        let state = if c.state_full.width() <= plan.state_w {
            &c.state_full
        } else {
            &c.state_word
        };
        let role = if r.limit.is_some() {
            Role::Warning
        } else if r.waiting.is_some() {
            Role::GateAwaitingHuman
        } else {
            state_role(r.state())
        };
        cell(&mut spans, state, plan.state_w, role);
        let (gate, gate_role) = match &c.gate {
            Some(g) if plan.long_gate => (g.long.as_str(), g.role),
            Some(g) => (g.short.as_str(), g.role),
            None => ("", Role::Dim),
        };
        cell(&mut spans, gate, plan.gate_w, gate_role);
        cell(&mut spans, &c.age, plan.age_w, Role::Dim);
        if plan.demo_w > 0 {
            spans.push(Span::styled(
                pad(if r.demo { "demo" } else { "" }, plan.demo_w),
                st(Role::Demo),
            ));
        }
        lines.push((base, Line::from(spans)));
    }
    (head, lines)
}

/// What one run shows in each column, sanitised.
struct Cells {
    name: String,
    /// The width of the name alone, without a worktree run's branch.
    name_core_w: usize,
    tool: String,
    ref_w: usize,
    /// `running`.
    state_word: String,
    /// `running · output 2s ago`.
    state_full: String,
    gate: Option<GateCell>,
    age: String,
    demo: bool,
    pinned: bool,
    hidden: bool,
    done: bool,
}

struct GateCell {
    long: String,
    short: String,
    role: Role,
}

fn cells(app: &App, r: &RunView) -> Cells {
    let now = app.now;
    let (state, source) = r.state_source(now);
    // A run that waits for the person says so, with where that is known from (its protocol,
    // or the tool's own hook); the compact form is the word alone. A run whose form cannot
    // say (a PTY form without hooks) shows its state: nothing is guessed.
    let (state, source) = match &r.waiting {
        Some(w) => (
            "waiting".to_string(),
            match w.source {
                crate::api::runs::WaitSource::Protocol => "for you · protocol".to_string(),
                crate::api::runs::WaitSource::Hook => "for you · hook".to_string(),
            },
        ),
        None => (state, source),
    };
    // A run whose tool ended its last turn on an account limit says so first, with when it
    // lifts (the tool's own time, as the server recorded it): more use to the person than
    // "waiting for you", since a turn sent now would meet the same limit.
    let (state, source) = match &r.limit {
        Some(l) => ("limit".to_string(), limit_source(l, now)),
        None => (state, source),
    };
    // A run of a host that does not answer: what it was doing is not known now.
    let (state, source) = if app.hosts.stale(&r.run_ref) {
        ("stale".to_string(), "host unreachable".to_string())
    } else {
        (state, source)
    };
    let state_full = if source.is_empty() {
        state.clone()
    } else if r.waiting.is_some() && r.limit.is_none() && !app.hosts.stale(&r.run_ref) {
        format!("{state} {source}")
    } else {
        format!("{state} · {source}")
    };
    let name = r.name.as_deref().unwrap_or("");
    let name_core_w = text::one_line(name, usize::MAX).width();
    // A worktree run's branch follows its name (sanitised with it).
    let name = match r.worktree_branch.as_deref() {
        Some(b) if name.is_empty() => format!("⎇ {b}"),
        Some(b) => format!("{name} ⎇ {b}"),
        None => name.to_string(),
    };
    let gate = match app.run_gate(&r.run_ref) {
        None if r.worktree_branch.is_some() => Some(("unbound", "unbound", Role::Dim)),
        None => None,
        Some(Ok(None)) => Some(("…", "…", Role::Dim)),
        Some(Ok(Some(g))) => Some((g.label(), g.short(), gate_role(g))),
        Some(Err(_)) => Some(("?", "?", Role::Error)),
    }
    .map(|(long, short, role)| GateCell {
        long: long.to_string(),
        short: short.to_string(),
        role,
    });
    Cells {
        name: text::one_line(&name, usize::MAX),
        name_core_w,
        tool: text::one_line(&tool_label(r), usize::MAX),
        ref_w: text::one_line(
            match crate::tui::hosts::split(&r.run_ref) {
                Some((_, rest)) if app.hosts.is_multi() => rest,
                _ => &r.run_ref,
            },
            usize::MAX,
        )
        .width(),
        state_word: state,
        state_full,
        gate,
        age: instant(&r.created_at)
            .map(|t| ago(now, t))
            .unwrap_or_default(),
        demo: r.demo,
        pinned: r.pinned,
        hidden: r.is_snoozed(now) || r.is_archived(),
        done: r.done,
    }
}

/// `usage · resets 14:05Z in 2h` or `rate · reset unknown`: the kind, and the reset time in
/// UTC with how far away it is (`reset passed` once it has), sanitised.
fn limit_source(l: &crate::api::runs::Limit, now: chrono::DateTime<chrono::Utc>) -> String {
    let kind = match l.kind {
        crate::api::runs::LimitKind::Usage => "usage",
        crate::api::runs::LimitKind::Rate => "rate",
    };
    let reset = match l.resets_at.as_deref().map(|s| (s, instant(s))) {
        // Within a day the time alone, else the date too (UTC, `Z`).
        Some((_, Some(t))) if t > now && t - now < chrono::Duration::hours(24) => {
            format!("resets {} in {}", t.format("%H:%MZ"), ago(t, now))
        }
        Some((_, Some(t))) if t > now => {
            format!("resets {} in {}", t.format("%m-%d %H:%MZ"), ago(t, now))
        }
        Some((_, Some(_))) => "reset passed".to_string(),
        Some((s, None)) => format!("resets {s}"),
        None => "reset unknown".to_string(),
    };
    text::one_line(&format!("{kind} · {reset}"), 80)
}

/// Which mark slots the marks column has: the selection's always, the others only when a
/// listed run uses them.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    pin: bool,
    hidden: bool,
    done: bool,
}

impl Marks {
    /// The column's width, its trailing space included.
    fn len(self) -> usize {
        2 + usize::from(self.pin) + usize::from(self.hidden) + usize::from(self.done)
    }
}

/// The columns' widths for one list (0: not drawn).
#[derive(Debug, Clone, Copy, Default)]
struct Plan {
    marks: Marks,
    ref_w: usize,
    name_w: usize,
    tool_w: usize,
    state_w: usize,
    gate_w: usize,
    long_gate: bool,
    age_w: usize,
    demo_w: usize,
}

/// The narrowest widths worth drawing.
struct Mins {
    /// The widest state word (`running`).
    state: usize,
    /// The widest short gate word (`awaiting`).
    gate: usize,
    /// The widest name without its branch, up to [`NAME_FIRST`].
    name_core: usize,
    /// The tool column before it grows (`opencode`).
    tool: usize,
}

/// How wide the names grow before the other columns have their room: one very long name
/// does not take the age and the states' sources from every row.
const NAME_FIRST: usize = 32;

/// The widest of `f` over the cells.
fn widest(cells: &[Cells], f: impl Fn(&Cells) -> usize) -> usize {
    cells.iter().map(f).max().unwrap_or(0)
}

impl Plan {
    /// The natural widths: what each column needs to show every listed run in full. A
    /// column no run has a value for is absent.
    fn natural(cells: &[Cells]) -> (Plan, Mins) {
        let any = |f: fn(&Cells) -> bool| cells.iter().any(f);
        let header = |w: usize, title: &str| if w == 0 { 0 } else { w.max(title.len()) };
        let marks = Marks {
            pin: any(|c| c.pinned),
            hidden: any(|c| c.hidden),
            done: any(|c| c.done),
        };
        let gate_short = widest(cells, |c| c.gate.as_ref().map_or(0, |g| g.short.width()));
        let gate_long = widest(cells, |c| c.gate.as_ref().map_or(0, |g| g.long.width()));
        let plan = Plan {
            marks,
            ref_w: header(widest(cells, |c| c.ref_w), "REF").min(14),
            name_w: header(widest(cells, |c| c.name.width()), "NAME"),
            tool_w: header(widest(cells, |c| c.tool.width()), "TOOL").min(16),
            state_w: header(widest(cells, |c| c.state_full.width()), "STATE"),
            gate_w: header(gate_long, "GATE"),
            long_gate: true,
            age_w: header(widest(cells, |c| c.age.width()), "AGE"),
            demo_w: if any(|c| c.demo) { 4 } else { 0 },
        };
        let mins = Mins {
            state: header(widest(cells, |c| c.state_word.width()), "STATE"),
            gate: header(gate_short, "GATE"),
            name_core: widest(cells, |c| c.name_core_w).min(NAME_FIRST),
            tool: plan.tool_w.min(8),
        };
        (plan, mins)
    }

    /// The width of the drawn row (each drawn column and its separator).
    fn total(&self) -> usize {
        let col = |w: usize| if w == 0 { 0 } else { w + 1 };
        self.marks.len()
            + col(self.ref_w)
            + col(self.name_w)
            + col(self.tool_w)
            + col(self.state_w)
            + col(self.gate_w)
            + col(self.age_w)
            + self.demo_w
    }

    /// The widths for a list `width` columns wide. The ref, the tool (8 columns), the
    /// state's word, the gate's short word and `demo` first; what is left grows the names
    /// (up to [`NAME_FIRST`] columns), then shows the age, then the states' sources, then
    /// the tool's profile, then a worktree run's branch and the longest names, then the
    /// gate's long words; anything more is left blank at the end of the row.
    fn new(cells: &[Cells], width: usize) -> Plan {
        let (full, mins) = Plan::natural(cells);
        let mut p = Plan {
            tool_w: mins.tool,
            state_w: mins.state,
            gate_w: mins.gate,
            long_gate: false,
            age_w: 0,
            name_w: 0,
            ..full
        };
        let name_sep = usize::from(full.name_w > 0);
        // On a very narrow list the name keeps a few columns: the tool is cut first, then
        // the gate (the Gate view has it) gives way.
        let name_min = mins.name_core.min(8);
        if p.total() + name_sep + name_min > width {
            p.tool_w = p.tool_w.min(4);
        }
        if p.total() + name_sep + name_min > width {
            p.gate_w = 0;
        }
        let mut left = width.saturating_sub(p.total() + name_sep);
        let grow = |cur: &mut usize, want: usize, left: &mut usize| {
            let add = want.saturating_sub(*cur).min(*left);
            *cur += add;
            *left -= add;
        };
        // The names first, to their full width.
        grow(&mut p.name_w, mins.name_core, &mut left);
        // The age, whole or not at all.
        if full.age_w > 0 && left > full.age_w {
            p.age_w = full.age_w;
            left -= full.age_w + 1;
        }
        // The state's source: every row's, or the rows' whose state and source fit.
        let fits = cells
            .iter()
            .map(|c| c.state_full.width())
            .filter(|&n| n <= p.state_w + left)
            .max()
            .unwrap_or(0);
        grow(&mut p.state_w, fits, &mut left);
        // A profile's name after its tool's.
        grow(&mut p.tool_w, full.tool_w, &mut left);
        // A worktree run's branch after its name, and the longest names.
        grow(&mut p.name_w, full.name_w, &mut left);
        if p.gate_w > 0 && full.gate_w > p.gate_w && left >= full.gate_w - p.gate_w {
            p.gate_w = full.gate_w;
            p.long_gate = true;
        } else if p.gate_w == full.gate_w {
            p.long_gate = true;
        }
        // What is left stays blank at the end of the row: the columns stay next to the
        // names they describe.
        p
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
