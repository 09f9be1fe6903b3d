//! The Rigs view (`6`): every rig, open ones first — its id, kind, backend and the boundary
//! it runs behind (a namespace rig says it is weaker than a VM), state, who holds its control
//! lock and since when, TTL left, idle time, resident memory (unknown shown as unknown) —
//! and under the list the selected rig's boundary and its audit tail, newest last. On a
//! narrow screen the kind and the idle time drop out and the lock and the boundary are
//! shortened. With no rig: how to open one, and whether each engine can run here. Every
//! string from the server (names, details, errors) goes through the sanitiser.

use chrono::{DateTime, Local, Utc};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use super::{dim_message, focused, pane_block, row_style, span};
use crate::api::rigs::{AuditEvent, BackendKind, RigState, RigView};
use crate::auth::Principal;
use crate::text;
use crate::tui::action::Action;
use crate::tui::app::{App, Pane};
use crate::tui::data::instant;
use crate::tui::keymap::Context;
use crate::tui::role::Role;

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

fn rpad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{}{s}", " ".repeat(w.saturating_sub(n)))
}

/// The role of a rig's state.
pub fn state_role(s: RigState) -> Role {
    match s {
        RigState::Booting => Role::StateStarting,
        RigState::Running => Role::StateRunning,
        RigState::Suspended => Role::StateIdle,
        RigState::Closing => Role::StateStopped,
        RigState::Closed => Role::StateCleaned,
    }
}

/// The boundary a rig runs behind, as the list names it: `VM`, or the namespace's
/// `namespace: weaker than a VM` (`short`, where the backend has no column of its own:
/// `vm: own kernel`, `ns: weaker than VM`). Read from the launch's
/// measure when there is one, else from the backend (a namespace always shares the host's
/// kernel).
pub fn boundary(r: &RigView, short: bool) -> (&'static str, Role) {
    let shares = r
        .record
        .boundary
        .as_ref()
        .map_or(r.record.backend == BackendKind::Namespace, |b| {
            b.shares_host_kernel
        });
    match (shares, short) {
        (true, false) => ("namespace: weaker than a VM", Role::Warning),
        (true, true) => ("ns: weaker than VM", Role::Warning),
        (false, false) => ("VM", Role::Text),
        (false, true) => ("vm: own kernel", Role::Text),
    }
}

/// A number of seconds for people: `45s`, `12m`, `1h59m`, `3d`.
pub fn secs(n: u64) -> String {
    match n {
        0..=59 => format!("{n}s"),
        60..=3599 => format!("{}m", n / 60),
        3600..=86_399 if n % 3600 >= 60 => format!("{}h{:02}m", n / 3600, (n % 3600) / 60),
        3600..=86_399 => format!("{}h", n / 3600),
        _ => format!("{}d", n / 86_400),
    }
}

/// Resident memory: `250 MiB`, `3.4 MiB`, `1.2 GiB`; `unknown` when the server could not
/// measure it (never 0).
pub fn memory(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return "unknown".into();
    };
    let mib = b as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else if mib >= 10.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

fn principal(p: Principal) -> &'static str {
    match p {
        Principal::Person => "person",
        Principal::Agent => "agent",
    }
}

/// A clock time (local) of an RFC 3339 instant.
fn clock(s: &str) -> String {
    instant(s).map_or_else(
        || text::one_line(s, 20),
        |t| t.with_timezone(&Local).format("%H:%M:%S").to_string(),
    )
}

/// Who holds the lock: `alice (person) since 12:01:02, 4m` (`short`: `alice 4m`), or
/// `unlocked`.
pub fn lock(r: &RigView, now: DateTime<Utc>, short: bool) -> (String, Role) {
    let Some(l) = &r.lock else {
        return ("unlocked".into(), Role::Dim);
    };
    let age = instant(&l.since).map(|t| crate::tui::data::ago(now, t));
    let name = text::one_line(&l.holder.name, 24);
    let s = if short {
        format!("{name} {}", age.unwrap_or_default())
    } else {
        format!(
            "{name} ({}) since {}{}",
            principal(l.holder.principal),
            clock(&l.since),
            age.map(|a| format!(", {a}")).unwrap_or_default()
        )
    };
    (s, Role::Highlight)
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let (list_area, detail_area) = super::list_over_detail(area, app.rigs.items().len());
    draw_list(app, list_area, buf);
    draw_audit(app, detail_area, buf);
}

fn draw_list(app: &App, area: Rect, buf: &mut Buffer) {
    let rigs = app.rigs.items();
    let open = rigs.iter().filter(|r| r.record.state.is_open()).count();
    let locked = rigs.iter().filter(|r| r.lock.is_some()).count();
    let mut title = vec![
        span(app, Role::Title, " Rigs "),
        span(app, Role::Dim, format!("{open} open ")),
    ];
    if locked > 0 {
        title.push(span(app, Role::Highlight, format!("· {locked} locked ")));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Rigs));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 4 || inner.height == 0 {
        return;
    }
    let w = usize::from(inner.width);
    let msg = match &app.rigs.listing.list {
        None => Some("loading…".to_string()),
        Some(Err(e)) => Some(format!("the rigs: {e}")),
        Some(Ok(v)) if v.is_empty() => Some(empty_message(app)),
        Some(Ok(_)) => None,
    };
    if let Some(m) = msg {
        dim_message(app, buf, inner, &m);
        return;
    }
    let wide = w >= 110;
    let id_w = 9;
    let kind_w = 8;
    let bound_w = if wide { 27 } else { 18 };
    let state_w = 9;
    let ttl_w = 6;
    let idle_w = 6;
    let mem_w = 9;
    let fixed = 2
        + id_w
        + 1
        + if wide { kind_w + 1 + 9 + 1 } else { 0 }
        + bound_w
        + 1
        + state_w
        + 1
        + 1
        + ttl_w
        + if wide { 1 + idle_w } else { 0 }
        + 1
        + mem_w;
    let lock_w = w.saturating_sub(fixed).max(8);
    let mut head = format!("  {} ", pad("ID", id_w));
    if wide {
        head.push_str(&format!("{} ", pad("KIND", kind_w)));
    }
    if wide {
        head.push_str(&format!("{} ", pad("BACKEND", 9)));
    }
    head.push_str(&format!(
        "{} {} {} {}",
        pad(
            if wide {
                "BOUNDARY"
            } else {
                "BACKEND·BOUNDARY"
            },
            bound_w
        ),
        pad("STATE", state_w),
        pad("LOCK", lock_w),
        rpad("TTL", ttl_w)
    ));
    if wide {
        head.push_str(&format!(" {}", rpad("IDLE", idle_w)));
    }
    head.push_str(&format!(" {}", rpad("MEMORY", mem_w)));
    buf.set_stringn(inner.x, inner.y, head, w, app.theme.style(Role::Dim));
    let rows = usize::from(inner.height).saturating_sub(1);
    let selected = app.selected_rig().map(|r| r.record.id.clone());
    let list_focused = focused(app, Pane::Rigs);
    for (k, r) in rigs
        .iter()
        .skip(app.rigs.listing.offset)
        .take(rows)
        .enumerate()
    {
        let y = inner.y + 1 + k as u16;
        let is_sel = selected.as_deref() == Some(r.record.id.as_str());
        let base = row_style(app, is_sel, list_focused);
        let st = |role: Role| base.patch(app.theme.style(role));
        for x in inner.x..inner.x + inner.width {
            buf[(x, y)].set_style(base);
        }
        let open = r.record.state.is_open();
        let (bound, bound_role) = boundary(r, !wide);
        let (holder, lock_role) = lock(r, app.now, !wide);
        let mut spans = vec![
            Span::styled(if is_sel { "› " } else { "  " }, st(Role::Marker)),
            Span::styled(pad(&r.record.id, id_w), st(Role::Text)),
            Span::styled(" ", base),
        ];
        if wide {
            spans.push(Span::styled(pad("terminal", kind_w), st(Role::Dim)));
            spans.push(Span::styled(" ", base));
            spans.push(Span::styled(
                pad(r.record.backend.as_str(), 9),
                st(Role::Text),
            ));
            spans.push(Span::styled(" ", base));
        }
        spans.extend([
            Span::styled(pad(bound, bound_w), st(bound_role)),
            Span::styled(" ", base),
            Span::styled(
                pad(r.record.state.as_str(), state_w),
                st(state_role(r.record.state)),
            ),
            Span::styled(" ", base),
            Span::styled(pad(&holder, lock_w), st(lock_role)),
            Span::styled(" ", base),
            Span::styled(
                rpad(
                    &if open {
                        secs(r.ttl_left_secs)
                    } else {
                        "-".into()
                    },
                    ttl_w,
                ),
                st(Role::Text),
            ),
        ]);
        if wide {
            spans.push(Span::styled(" ", base));
            spans.push(Span::styled(
                rpad(
                    &if open {
                        secs(r.idle_secs_now)
                    } else {
                        "-".into()
                    },
                    idle_w,
                ),
                st(Role::Text),
            ));
        }
        spans.push(Span::styled(" ", base));
        spans.push(Span::styled(
            rpad(&memory(r.resident_bytes), mem_w),
            st(if r.resident_bytes.is_some() {
                Role::Text
            } else {
                Role::Dim
            }),
        ));
        buf.set_line(inner.x, y, &Line::from(spans), inner.width);
    }
}

/// What the list says with no rig: how to open one, and whether each engine runs here.
fn empty_message(app: &App) -> String {
    let mut m = "no rigs: proctor rig open --kind terminal (add --backend namespace where no VM \
                 runs)"
        .to_string();
    for e in &app.rigs.engines {
        m.push_str(&format!(
            " · {}: {}",
            e.backend.as_str(),
            if e.available {
                text::one_line(&e.detail, 60)
            } else {
                format!("not available, {}", text::one_line(&e.detail, 120))
            }
        ));
    }
    m
}

/// One audit event: `#12 12:01:02 alice (person) exec done argv=["ls"]`.
fn audit_line(app: &App, e: &AuditEvent, w: usize) -> Line<'static> {
    let style = |r: Role| app.theme.style(r);
    let outcome_role = match e.outcome.as_str() {
        "done" => Role::Success,
        "refused" => Role::Warning,
        "failed" => Role::Error,
        _ => Role::Text,
    };
    let detail = match &e.detail {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", detail_value(v)))
            .collect::<Vec<_>>()
            .join(" "),
        other => detail_value(other),
    };
    let lead = format!("#{:<4} {} ", e.seq, clock(&e.at));
    let who = format!(
        "{} ({}) ",
        text::one_line(&e.by.name, 20),
        principal(e.by.principal)
    );
    let action = format!("{} ", text::one_line(&e.action, 16));
    let outcome = format!("{} ", text::one_line(&e.outcome, 10));
    let used = lead.width() + who.width() + action.width() + outcome.width();
    Line::from(vec![
        Span::styled(lead, style(Role::Dim)),
        Span::styled(who, style(Role::Text)),
        Span::styled(action, style(Role::Text)),
        Span::styled(outcome, style(outcome_role)),
        Span::styled(
            text::one_line(&detail, w.saturating_sub(used).max(1)),
            style(Role::Dim),
        ),
    ])
}

/// An audit detail's value as text: strings and lists of strings (an argv) as their words,
/// sanitised; anything else as JSON.
fn detail_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => text::one_line(s, 200),
        serde_json::Value::Array(a) if a.iter().all(|x| x.is_string()) => {
            let words: Vec<String> = a.iter().map(detail_value).collect();
            format!("[{}]", words.join(" "))
        }
        other => text::one_line(&other.to_string(), 200),
    }
}

fn draw_audit(app: &App, area: Rect, buf: &mut Buffer) {
    let rig = app.selected_rig();
    let mut title = vec![span(app, Role::Title, " Audit ")];
    if let Some(r) = rig {
        title.push(span(
            app,
            Role::Text,
            format!("{} ", text::one_line(&r.record.id, 16)),
        ));
    }
    let block = pane_block(app, Line::from(title), false);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 4 || inner.height == 0 {
        return;
    }
    let Some(r) = rig else {
        let keys = key_help(app);
        dim_message(app, buf, inner, &keys);
        return;
    };
    let w = usize::from(inner.width.saturating_sub(1));
    let x = inner.x + 1;
    let bottom = inner.y + inner.height;
    let mut y = inner.y;
    // The boundary as the launch measured it, and what the rig is.
    let summary = match &r.record.boundary {
        Some(b) => text::one_line(&b.summary, w),
        None => format!(
            "{} boundary: not measured yet (the rig is {})",
            r.record.backend.as_str(),
            r.record.state.as_str()
        ),
    };
    let (_, role) = boundary(r, false);
    buf.set_stringn(x, y, summary, w, app.theme.style(role));
    y += 1;
    let mut facts = vec![format!(
        "opened by {}",
        text::one_line(&r.record.opened_by.name, 24)
    )];
    if let Some(b) = &r.record.boundary {
        facts.push(format!(
            "egress {}",
            match b.egress {
                crate::api::rigs::Egress::Denied => "denied",
                crate::api::rigs::Egress::Allowlist => "allowlist",
            }
        ));
    }
    if let Some(ws) = &r.record.workspace {
        facts.push(format!("workspace {}", text::one_line(ws, 40)));
    }
    if r.watchers > 0 {
        facts.push(format!("{} attached", r.watchers));
    }
    if let Some(reason) = r.record.close_reason {
        facts.push(format!(
            "closed: {}",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ));
    }
    if let Some(e) = &r.record.error {
        facts.push(text::one_line(e, 120));
    }
    if y < bottom {
        buf.set_stringn(x, y, facts.join(" · "), w, app.theme.style(Role::Dim));
        y += 1;
    }
    // The keys, on the last row.
    let keys_row = (bottom - y > 2).then(|| bottom - 1);
    let events_bottom = keys_row.unwrap_or(bottom);
    match app.rigs.current_audit() {
        None => {
            if y < events_bottom {
                buf.set_stringn(x, y, "loading the audit…", w, app.theme.style(Role::Dim));
            }
        }
        Some(Err(e)) => {
            if y < events_bottom {
                buf.set_stringn(
                    x,
                    y,
                    format!("the audit: {}", text::one_line(e, 200)),
                    w,
                    app.theme.style(Role::Error),
                );
            }
        }
        Some(Ok(page)) if page.events.is_empty() => {
            if y < events_bottom {
                buf.set_stringn(
                    x,
                    y,
                    "no audit event yet: every action on the rig is recorded here",
                    w,
                    app.theme.style(Role::Dim),
                );
            }
        }
        Some(Ok(page)) => {
            // The newest events that fit, oldest first.
            let room = usize::from(events_bottom.saturating_sub(y));
            let skip = page.events.len().saturating_sub(room);
            for e in page.events.iter().skip(skip) {
                if y >= events_bottom {
                    break;
                }
                buf.set_line(x, y, &audit_line(app, e, w), inner.width - 1);
                y += 1;
            }
        }
    }
    if let Some(ky) = keys_row {
        let keys = key_help(app);
        buf.set_stringn(x, ky, keys, w, app.theme.style(Role::Dim));
    }
}

/// The rig keys, as bound: `l lock · u unlock · a attach · …`.
fn key_help(app: &App) -> String {
    let ctx = [Context::Pane(Pane::Rigs), Context::Global];
    [
        (Action::RigLock, "lock"),
        (Action::RigUnlock, "unlock"),
        (Action::RigAttach, "attach"),
        (Action::RigSuspend, "suspend"),
        (Action::RigResume, "resume"),
        (Action::RigClose, "close"),
    ]
    .iter()
    .filter_map(|(a, word)| app.keymap.key_for(&ctx, *a).map(|k| format!("{k} {word}")))
    .collect::<Vec<_>>()
    .join(" · ")
}
