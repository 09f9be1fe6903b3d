//! The live pane: the focused session's terminal (PTY runs) or its output lines (pipe runs).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::{focused, pane_block, span};
use crate::text;
use crate::tui::app::{App, LiveBuf, LiveState, Pane};
use crate::tui::role::Role;
use crate::tui::vt::{LineKind, RenderOpts};

/// The style of a line of a pipe session's conversation: the person's turns stand out,
/// failed tool calls and errors in the error colour, warnings and permission requests in
/// the warning colour, reasoning, notes, output lines and stderr dimmed.
fn pipe_style(app: &App, kind: LineKind) -> ratatui::style::Style {
    let role = match kind {
        LineKind::Out | LineKind::Tool => Role::Text,
        LineKind::Person => Role::Header,
        LineKind::ToolFailed | LineKind::Error => Role::Error,
        LineKind::Warning => Role::Warning,
        LineKind::Err | LineKind::Note | LineKind::Reasoning | LineKind::Detail => Role::Dim,
    };
    app.theme.style(role)
}

/// Draws the pane; returns the session's cursor on screen when it is visible.
pub fn draw(app: &App, area: Rect, zoomed: bool, buf: &mut Buffer) -> Option<(u16, u16)> {
    let run = app.selected_run().cloned();
    let inner = if zoomed {
        area
    } else {
        let mut title = vec![span(app, Role::Title, " Live ")];
        if let Some(r) = &run {
            title.push(span(app, Role::Text, format!("{} ", r.run_ref)));
            if let Some(n) = &r.name {
                title.push(span(app, Role::Text, format!("{} ", text::one_line(n, 30))));
            }
            if let Some(b) = &r.worktree_branch {
                title.push(span(
                    app,
                    Role::Marker,
                    format!("⎇ {} ", text::one_line(b, 40)),
                ));
            }
            title.push(span(app, Role::Dim, format!("{} ", r.transport)));
        }
        title.extend(state_note(app));
        let block = pane_block(
            app,
            Line::from(title),
            focused(app, Pane::Live) || app.mode.is_attach(),
        );
        let inner = block.inner(area);
        block.render(area, buf);
        inner
    };
    if inner.width == 0 || inner.height == 0 {
        return None;
    }
    let Some(run) = run else {
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            "no session selected",
            usize::from(inner.width.saturating_sub(1)),
            app.theme.style(Role::Dim),
        );
        return None;
    };
    let no_color = !app.theme.has_colors();
    let dim = app.theme.style(Role::Dim);
    let attached = app.mode.is_attach();
    let slot = app.live.slot.as_ref().filter(|s| s.run == run.run_ref)?;
    let empty = match &slot.buf {
        LiveBuf::Pty(t) => t.seq == 0 && t.contents().trim().is_empty() && t.history_len() == 0,
        LiveBuf::Pipe(p) => p.is_empty(),
    };
    if empty {
        let msg = match &slot.state {
            LiveState::Connecting => "connecting…".to_string(),
            LiveState::NotLive(state) => format!(
                "{} is {state}: this server holds no output for it (its transcript is on disk)",
                run.run_ref
            ),
            LiveState::Ended(e) => format!("the process ended ({e}) without output"),
            LiveState::Error(e) => format!("cannot show the output: {e}"),
            LiveState::Streaming => "no output yet".to_string(),
        };
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            text::one_line(&msg, usize::from(inner.width)),
            usize::from(inner.width.saturating_sub(1)),
            dim,
        );
        return None;
    }
    match &slot.buf {
        LiveBuf::Pty(t) => t.render(
            inner,
            buf,
            RenderOpts {
                no_color,
                block_cursor: !attached,
            },
        ),
        LiveBuf::Pipe(p) => {
            p.render(inner, buf, |kind| pipe_style(app, kind));
            None
        }
    }
}

/// What the title says about the stream: ended, not live, scrolled back, attached.
fn state_note(app: &App) -> Vec<ratatui::text::Span<'static>> {
    let mut out = Vec::new();
    let Some(slot) = &app.live.slot else {
        return out;
    };
    match &slot.state {
        LiveState::Connecting => out.push(span(app, Role::Dim, "· connecting ".to_string())),
        LiveState::Ended(e) => out.push(span(app, Role::StateStopped, format!("· ended {e} "))),
        LiveState::NotLive(s) => out.push(span(app, Role::Dim, format!("· {s}, not live "))),
        LiveState::Error(e) => out.push(span(
            app,
            Role::Error,
            format!("· {} ", text::one_line(e, 40)),
        )),
        LiveState::Streaming => {}
    }
    let (scroll, size) = match &slot.buf {
        LiveBuf::Pty(t) => (t.scroll(), Some(t.size())),
        LiveBuf::Pipe(p) => (p.scroll(), None),
    };
    if let Some((r, c)) = size {
        out.push(span(app, Role::Dim, format!("{c}×{r} ")));
    }
    if let LiveBuf::Pipe(p) = &slot.buf
        && p.expanded()
    {
        out.push(span(app, Role::Dim, "· tool output shown ".to_string()));
    }
    if scroll > 0 {
        out.push(span(app, Role::Warning, format!("· {scroll} lines back ")));
    }
    if app.mode.is_attach() {
        out.push(span(app, Role::Warning, "· ATTACHED ".to_string()));
    }
    out
}
