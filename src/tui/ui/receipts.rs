//! The Receipts view: every receipt (kind, subject, time) with what verifying it says now
//! (holds, fails, unreachable: the server's verifier for a plain receipt, this machine's for
//! a signed one), and the selected receipt's checks one by one. Subjects, paths and details
//! are untrusted and go through the sanitiser.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use super::{dim_message, focused, labelled, pane_block, row_style, span, wrap};
use crate::text;
use crate::tui::app::{App, Pane, VerifyState};
use crate::tui::data::instant;
use crate::tui::evidence::{ReceiptItem, Verdict};
use crate::tui::role::Role;

/// The role of a verdict.
pub fn verdict_role(v: Verdict) -> Role {
    match v {
        Verdict::Holds => Role::Success,
        Verdict::Fails => Role::Error,
        Verdict::Unreachable => Role::Warning,
    }
}

/// The role of one check's outcome word.
fn outcome_role(o: &str) -> Role {
    match o {
        "holds" => Role::Success,
        "differs" | "fails" => Role::Error,
        "unreachable" => Role::Warning,
        _ => Role::Text,
    }
}

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

/// The receipt's time, local, to the second (the date too when not today).
fn when(app: &App, at: Option<&str>) -> String {
    let Some(at) = at else {
        return String::new();
    };
    match instant(at) {
        Some(t) => {
            let local = t.with_timezone(&chrono::Local);
            let today = app.now.with_timezone(&chrono::Local).date_naive();
            if local.date_naive() == today {
                local.format("%H:%M:%S").to_string()
            } else {
                local.format("%Y-%m-%d %H:%M:%S").to_string()
            }
        }
        None => at.to_string(),
    }
}

/// The verify column: the verdict, `verifying…`, or why it could not be verified.
fn verify_cell(app: &App, r: &ReceiptItem) -> (String, Role) {
    match app.receipts.verifications.get(&r.id) {
        None => (String::new(), Role::Dim),
        Some(VerifyState::Pending) => ("verifying…".into(), Role::Dim),
        Some(VerifyState::Done(v)) => match &v.result {
            Ok((verdict, _)) => (verdict.label().to_string(), verdict_role(*verdict)),
            Err(_) => ("unverified".into(), Role::Warning),
        },
    }
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let (list_area, detail_area) = super::list_over_detail(area, app.receipt_list().len());
    draw_list(app, list_area, buf);
    draw_detail(app, detail_area, buf);
}

fn draw_list(app: &App, area: Rect, buf: &mut Buffer) {
    let n = app.receipt_list().len();
    let title = vec![
        span(app, Role::Title, " Receipts "),
        span(app, Role::Dim, format!("{n} ")),
    ];
    let block = pane_block(app, Line::from(title), focused(app, Pane::Receipts));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let w = usize::from(inner.width);
    let msg = match &app.receipts.listing.list {
        None => Some("loading…".to_string()),
        Some(Err(e)) => Some(format!("the receipts: {e}")),
        Some(Ok(v)) if v.is_empty() => Some(
            "no receipts yet: binding a candidate and each evidence attempt write one".to_string(),
        ),
        Some(Ok(_)) => None,
    };
    if let Some(m) = msg {
        dim_message(app, buf, inner, &m);
        return;
    }
    let id_w = 9;
    let kind_w = if w >= 100 { 21 } else { 16 };
    let time_w = if w >= 100 { 19 } else { 8 };
    let verify_w = 11;
    let subject_w = w.saturating_sub(2 + id_w + 1 + kind_w + 1 + time_w + 1 + verify_w + 1);
    let head = format!(
        "  {} {} {} {} {}",
        pad("ID", id_w),
        pad("KIND", kind_w),
        pad("SUBJECT", subject_w),
        pad("TIME", time_w),
        pad("VERIFY", verify_w)
    );
    buf.set_stringn(inner.x, inner.y, head, w, app.theme.style(Role::Dim));
    let rows = usize::from(inner.height).saturating_sub(1);
    if rows == 0 {
        return;
    }
    // The selection is in view: `App::lay_out` keeps the offset.
    let selected = app.selected_receipt().map(|r| r.id.clone());
    let list_focused = focused(app, Pane::Receipts);
    for (k, r) in app
        .receipt_list()
        .iter()
        .skip(app.receipts.listing.offset)
        .take(rows)
        .enumerate()
    {
        let y = inner.y + 1 + k as u16;
        let is_sel = selected.as_deref() == Some(r.id.as_str());
        let base = row_style(app, is_sel, list_focused);
        let st = |role: Role| base.patch(app.theme.style(role));
        for x in inner.x..inner.x + inner.width {
            buf[(x, y)].set_style(base);
        }
        let (verify, vrole) = verify_cell(app, r);
        // A signed receipt says what it is once verified (its statement is then believed).
        let verified = match app.receipts.verifications.get(&r.id) {
            Some(VerifyState::Done(v)) => Some(v),
            _ => None,
        };
        let kind = match (verified.and_then(|v| v.kind.as_deref()), &r.kind) {
            (Some(k), Some(listed)) if listed == "signed" => k.to_string(),
            (_, Some(listed)) => listed.clone(),
            (_, None) => "(unwritten)".to_string(),
        };
        let subject = match (
            &r.subject,
            verified.and_then(|v| v.subject.as_ref()),
            &r.problem,
        ) {
            (Some(s), _, _) => s.clone(),
            (None, Some(s), _) => s.clone(),
            (None, None, Some(p)) => p.clone(),
            (None, None, None) => String::new(),
        };
        let line = Line::from(vec![
            Span::styled(if is_sel { "› " } else { "  " }, st(Role::Marker)),
            Span::styled(pad(&r.id, id_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(pad(&kind, kind_w), st(Role::Dim)),
            Span::styled(" ", base),
            Span::styled(pad(&subject, subject_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(pad(&when(app, r.at.as_deref()), time_w), st(Role::Dim)),
            Span::styled(" ", base),
            Span::styled(pad(&verify, verify_w), st(vrole)),
        ]);
        buf.set_line(inner.x, y, &line, inner.width);
    }
}

fn draw_detail(app: &App, area: Rect, buf: &mut Buffer) {
    let block = pane_block(app, Line::from(span(app, Role::Title, " Receipt ")), false);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 2 || inner.height == 0 {
        return;
    }
    let Some(r) = app.selected_receipt() else {
        return;
    };
    let w = usize::from(inner.width.saturating_sub(1));
    let style = |role: Role| app.theme.style(role);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let field = |rows: &mut Vec<Line<'static>>, label: &str, value: &str, role: Role| {
        labelled(app, rows, label, value, role, w)
    };
    rows.push(Line::from(vec![
        Span::styled(
            format!("{} ", text::one_line(&r.id, 20)),
            style(Role::Title),
        ),
        Span::styled(
            text::one_line(r.kind.as_deref().unwrap_or("(unwritten)"), 40),
            style(Role::Text),
        ),
    ]));
    field(&mut rows, "file", &r.file, Role::Text);
    if let Some(p) = &r.problem {
        field(&mut rows, "note", p, Role::Warning);
    }
    match app.receipts.verifications.get(&r.id) {
        None => field(&mut rows, "verify", "not verified yet", Role::Dim),
        Some(VerifyState::Pending) => field(&mut rows, "verify", "verifying…", Role::Dim),
        Some(VerifyState::Done(v)) => match &v.result {
            Err(e) => field(
                &mut rows,
                "verify",
                &format!("could not verify ({} verifier): {e}", v.by),
                Role::Warning,
            ),
            Ok((verdict, checks)) => {
                rows.push(Line::from(vec![
                    Span::styled(format!("{:<10}", "verify"), style(Role::Dim)),
                    Span::styled(verdict.label().to_string(), style(verdict_role(*verdict))),
                    Span::styled(
                        format!(
                            " ({} verifier, {} check(s))",
                            if v.by == "local" {
                                "this machine's"
                            } else {
                                "the server's"
                            },
                            checks.len()
                        ),
                        style(Role::Dim),
                    ),
                ]));
                for c in checks {
                    let name = text::one_line(&c.name, 24);
                    let head = format!("  {:<12}{name} ", text::one_line(&c.outcome, 12));
                    let avail = w.saturating_sub(head.width()).max(8);
                    for (k, part) in wrap(&c.detail, avail, 0).into_iter().enumerate() {
                        let spans = if k == 0 {
                            vec![
                                Span::styled(
                                    format!("  {:<12}", text::one_line(&c.outcome, 12)),
                                    style(outcome_role(&c.outcome)),
                                ),
                                Span::styled(format!("{name} "), style(Role::Text)),
                                Span::styled(part, style(Role::Dim)),
                            ]
                        } else {
                            vec![
                                Span::raw(" ".repeat(head.width())),
                                Span::styled(part, style(Role::Dim)),
                            ]
                        };
                        rows.push(Line::from(spans));
                    }
                }
            }
        },
    }
    for (k, l) in rows.into_iter().take(usize::from(inner.height)).enumerate() {
        buf.set_line(inner.x + 1, inner.y + k as u16, &l, inner.width - 1);
    }
}
