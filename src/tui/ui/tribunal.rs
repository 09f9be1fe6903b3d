//! The Tribunal view: the seats of the focused run's latest candidate's latest round, each
//! with its lens, tier, the family and rung that sits, its state (pass, refuse, hold,
//! unverified, rejected, pending) and its findings by severity; above them the round's
//! number, state, mode, the builder excluded, and the trend of new findings; under them the
//! selected seat's cause. Enter opens the seat (`widgets::seat`). Every string from the
//! server goes through the sanitiser.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use super::{dim_message, focused, pane_block, row_style, span, wrap};
use crate::api::tribunal::{Round, RoundState, Seat};
use crate::text;
use crate::tui::app::{App, Pane};
use crate::tui::role::Role;
use crate::tui::widgets::seat::state_role;

fn pad(s: &str, w: usize) -> String {
    let s = text::one_line(s, w);
    let n = s.width();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

/// The role of a round's state.
pub fn round_role(s: RoundState) -> Role {
    match s {
        RoundState::UnanimousPass => Role::Success,
        RoundState::Refused | RoundState::Invalid => Role::Error,
        RoundState::Held => Role::Warning,
        RoundState::InProgress => Role::StateRunning,
    }
}

/// The new findings of each round, oldest first: the convergence's trend when the round
/// has one, else each round's own count.
fn trend(rounds: &[&Round]) -> String {
    let last = rounds.last();
    let nums: Vec<u32> = match last.and_then(|r| r.convergence.as_ref()) {
        Some(c) => c.trend.clone(),
        None => rounds.iter().map(|r| r.new_findings).collect(),
    };
    let t = nums
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" → ");
    match last {
        Some(r) if r.state == RoundState::InProgress => format!("{t} so far"),
        _ => t,
    }
}

fn sits(s: &Seat, wide: bool) -> String {
    match &s.sat {
        Some(x) if !wide => format!("{} {}", x.family, x.model),
        Some(x) => format!(
            "{} {} ({}{})",
            x.family,
            x.model,
            x.backend.as_str(),
            if x.local { ", local" } else { "" }
        ),
        None if s.state == crate::api::tribunal::SeatState::Pending => {
            s.cause.clone().unwrap_or_else(|| "asking…".into())
        }
        None => "no rung sat".into(),
    }
}

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let rounds = app.tribunal_rounds();
    let round = rounds.last().copied();
    let mut title = vec![span(app, Role::Title, " Tribunal ")];
    if let Some(c) = app.tribunal_candidate() {
        title.push(span(
            app,
            Role::Text,
            format!("{} ", text::one_line(&c, 16)),
        ));
    }
    if let Some(r) = app.selected_run() {
        title.push(span(
            app,
            Role::Dim,
            format!("· {} ", text::one_line(&r.run_ref, 16)),
        ));
    }
    if let Some(r) = round {
        title.push(span(
            app,
            round_role(r.state),
            format!("{} ", r.state.as_str().replace('_', " ")),
        ));
    }
    let block = pane_block(app, Line::from(title), focused(app, Pane::Tribunal));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.width < 4 || inner.height == 0 {
        return;
    }
    let msg = match (
        &app.tribunal.rounds,
        app.selected_run(),
        app.tribunal_candidate(),
        round,
    ) {
        (None, ..) => Some("loading…".to_string()),
        (Some(Err(e)), ..) => Some(format!("the tribunal's rounds: {e}")),
        (_, None, ..) => Some("no session selected: pick a run in the sessions list".to_string()),
        (_, Some(_), None, _) => Some(
            "this run has no candidate: bind its worktree's bytes first \
             (`proctor candidate bind --run …`), then `proctor tribunal convene`"
                .to_string(),
        ),
        (_, _, Some(c), None) => Some(format!(
            "no tribunal round for {c} yet: `proctor tribunal convene --candidate {c} --builder … \
             --intent … --criteria FILE` seats one"
        )),
        _ => None,
    };
    let Some(r) = round else {
        dim_message(app, buf, inner, msg.as_deref().unwrap_or(""));
        return;
    };
    let w = usize::from(inner.width.saturating_sub(1));
    let x = inner.x + 1;
    let mut y = inner.y;
    let bottom = inner.y + inner.height;
    let line = |buf: &mut Buffer, y: u16, spans: Vec<Span<'static>>| {
        buf.set_line(x, y, &Line::from(spans), inner.width.saturating_sub(1));
    };
    // The head: the round, its state and mode; then the builder and the trend.
    let mode = if r.mode == crate::api::tribunal::Mode::SameFamilyBlind {
        (Role::Warning, text::one_line(&r.mode_note, 60))
    } else {
        (Role::Dim, text::one_line(&r.mode_note, 40))
    };
    line(
        buf,
        y,
        vec![
            span(
                app,
                Role::Title,
                format!("round {} of {}", r.number, rounds.len()),
            ),
            span(
                app,
                Role::Dim,
                format!(" · {} · ", text::one_line(&r.id, 12)),
            ),
            span(app, round_role(r.state), r.state.as_str().replace('_', " ")),
            span(app, Role::Dim, " · "),
            span(app, mode.0, mode.1),
        ],
    );
    y += 1;
    if y < bottom {
        let c = &r.findings;
        line(
            buf,
            y,
            vec![
                span(app, Role::Dim, "new findings "),
                span(app, Role::Text, trend(&rounds)),
                span(
                    app,
                    Role::Dim,
                    format!(
                        "{} · builder {} ({}) excluded: {}",
                        r.convergence
                            .as_ref()
                            .map(|c| format!(" ({})", text::one_line(&c.state, 12)))
                            .unwrap_or_default(),
                        text::one_line(&r.builder, 24),
                        text::one_line(&r.builder_family, 16),
                        r.excluded_families
                            .iter()
                            .map(|f| text::one_line(f, 16))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ),
                span(
                    app,
                    Role::Dim,
                    format!(" · {}B {}M {}m {}i", c.blocker, c.major, c.minor, c.info),
                ),
            ],
        );
        y += 1;
    }
    // The seats' columns.
    let lens_w = 15;
    let tier_w = if w >= 100 { 17 } else { 15 };
    let state_w = 10;
    let counts_w = if w >= 100 { 22 } else { 7 };
    let sits_w = w.saturating_sub(2 + lens_w + 1 + tier_w + 1 + state_w + 1 + 1 + counts_w);
    if y < bottom {
        let counts_head = if w >= 100 {
            "BLOCK MAJOR MINOR INFO"
        } else {
            "B M m i"
        };
        buf.set_stringn(
            x,
            y,
            format!(
                "  {} {} {} {} {}",
                pad("LENS", lens_w),
                pad("TIER", tier_w),
                pad("STATE", state_w),
                pad(
                    if w >= 100 {
                        "SITS (FAMILY MODEL, BACKEND)"
                    } else {
                        "SITS (FAMILY MODEL)"
                    },
                    sits_w
                ),
                counts_head
            ),
            w,
            app.theme.style(Role::Dim),
        );
        y += 1;
    }
    let seat_rows = app.tribunal.rows.min(usize::from(bottom.saturating_sub(y)));
    let list_focused = focused(app, Pane::Tribunal);
    let selected = app.tribunal.selected.min(r.seats.len().saturating_sub(1));
    for (k, s) in r
        .seats
        .iter()
        .enumerate()
        .skip(app.tribunal.offset)
        .take(seat_rows)
    {
        let is_sel = k == selected;
        let base = row_style(app, is_sel, list_focused);
        let st = |role: Role| base.patch(app.theme.style(role));
        for cx in inner.x..inner.x + inner.width {
            buf[(cx, y)].set_style(base);
        }
        let c = &s.findings;
        let counts = if w >= 100 {
            format!(
                "{:>5} {:>5} {:>5} {:>4}",
                c.blocker, c.major, c.minor, c.info
            )
        } else {
            format!("{} {} {} {}", c.blocker, c.major, c.minor, c.info)
        };
        let count_role = if c.blocker + c.major > 0 {
            Role::Error
        } else {
            Role::Dim
        };
        let spans = vec![
            Span::styled(if is_sel { "› " } else { "  " }, st(Role::Marker)),
            Span::styled(pad(&s.lens, lens_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(pad(s.tier.as_str(), tier_w), st(Role::Dim)),
            Span::styled(" ", base),
            Span::styled(pad(s.state.as_str(), state_w), st(state_role(s.state))),
            Span::styled(" ", base),
            Span::styled(pad(&sits(s, w >= 100), sits_w), st(Role::Text)),
            Span::styled(" ", base),
            Span::styled(counts, st(count_role)),
        ];
        buf.set_line(inner.x, y, &Line::from(spans), inner.width);
        y += 1;
    }
    // The selected seat's cause, and what Enter does.
    if let Some(s) = r.seats.get(selected)
        && y < bottom
    {
        let cause = s.cause.clone().unwrap_or_else(|| match &s.sat {
            Some(_) => "sat and answered".to_string(),
            None => String::new(),
        });
        let enter = app
            .keymap
            .key_for(
                &[Pane::Tribunal.context()],
                crate::tui::action::Action::OpenSeat,
            )
            .unwrap_or_default();
        let text_rows = wrap(&format!("{}: {cause}", s.lens), w.saturating_sub(2), 2);
        // The cause takes what is left but the last row when there is more than one.
        let left = usize::from(bottom - y);
        let take = if left > 1 { left - 1 } else { left };
        for part in text_rows.into_iter().take(take) {
            if y >= bottom {
                break;
            }
            buf.set_stringn(x, y, part, w, app.theme.style(Role::Dim));
            y += 1;
        }
        if y < bottom && !enter.is_empty() {
            line(
                buf,
                y,
                vec![
                    span(app, Role::Key, enter),
                    span(
                        app,
                        Role::Dim,
                        " opens the seat: its routing and its findings",
                    ),
                ],
            );
        }
    }
}
