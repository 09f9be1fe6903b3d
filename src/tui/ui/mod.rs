//! Drawing the cockpit: one function per pane, all reading the [`App`] and styling through
//! semantic roles. Every untrusted string is passed through [`crate::text`] here, at the
//! last step before a widget; the live terminal draws cells (see [`super::vt`]).

mod events;
mod header;
mod live;
mod modal;
mod sessions;
mod status;
#[cfg(test)]
pub(crate) mod tests;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};

use super::app::{App, Pane, Tab};
use super::role::Role;

/// The screen areas of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    pub header: Rect,
    /// Present only when there is more than one tab.
    pub tabs: Option<Rect>,
    pub sessions: Rect,
    pub live: Rect,
    pub events: Rect,
    pub status: Rect,
    /// True when the live pane fills the screen (no border).
    pub zoomed: bool,
}

/// Wide screens put the list and the events on the left and the live terminal on the
/// right; narrow ones stack list, live terminal and events.
pub const WIDE: u16 = 120;

pub fn layout(area: Rect, zoomed: bool) -> Areas {
    let [body, status] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
    if zoomed {
        return Areas {
            live: body,
            status,
            zoomed: true,
            ..Areas::default()
        };
    }
    let [header, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(body);
    let (tabs, main) = if Tab::ALL.len() > 1 {
        let [t, m] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(rest);
        (Some(t), m)
    } else {
        (None, rest)
    };
    let (sessions, live, events) = if main.width >= WIDE {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(main);
        let [s, e] =
            Layout::vertical([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(left);
        (s, right, e)
    } else {
        let list_h = (main.height / 3).max(5);
        let events_h = if main.height >= 20 { 6 } else { 4 };
        let [s, l, e] = Layout::vertical([
            Constraint::Length(list_h),
            Constraint::Min(3),
            Constraint::Length(events_h),
        ])
        .areas(main);
        (s, l, e)
    };
    Areas {
        header,
        tabs,
        sessions,
        live,
        events,
        status,
        zoomed: false,
    }
}

/// The inner area of a bordered pane.
pub fn inner(r: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(r)
}

/// A pane's frame: the focused one stands out.
pub fn pane_block<'a>(app: &App, title: Line<'a>, focused: bool) -> Block<'a> {
    let (border, ty) = if focused {
        (app.theme.style(Role::BorderFocused), BorderType::Thick)
    } else {
        (app.theme.style(Role::Border), BorderType::Plain)
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(ty)
        .border_style(border)
        .title(title)
}

pub fn span<'a>(app: &App, role: Role, s: impl Into<std::borrow::Cow<'a, str>>) -> Span<'a> {
    Span::styled(s, app.theme.style(role))
}

/// Draws one frame and returns its areas. Records the live pane's inner size on the app
/// (the size the PTY should have).
pub fn draw(frame: &mut Frame<'_>, app: &mut App) -> Areas {
    let areas = layout(frame.area(), app.zoomed);
    let live_inner = if areas.zoomed {
        areas.live
    } else {
        inner(areas.live)
    };
    app.live_inner = live_inner;
    app.areas = areas;
    app.list_rows = usize::from(inner(areas.sessions).height.saturating_sub(1));
    app.events_rows = usize::from(inner(areas.events).height);
    let buf = frame.buffer_mut();
    if !areas.zoomed {
        header::draw(app, areas.header, buf);
        if let Some(t) = areas.tabs {
            draw_tabs(app, t, buf);
        }
        sessions::draw(app, areas.sessions, buf);
        events::draw(app, areas.events, buf);
    }
    let cursor = live::draw(app, areas.live, areas.zoomed, buf);
    status::draw(app, areas.status, buf);
    if app.mode.is_attach()
        && let Some(c) = cursor
    {
        frame.set_cursor_position(c);
    }
    modal::draw(app, frame);
    areas
}

fn draw_tabs(app: &App, area: Rect, buf: &mut ratatui::buffer::Buffer) {
    if area.is_empty() {
        return;
    }
    let mut spans = Vec::new();
    for t in Tab::ALL {
        let role = if t == app.tab { Role::Title } else { Role::Dim };
        spans.push(span(app, role, format!(" {} ", t.title())));
    }
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
}

/// Whether `pane` holds the focus (and no dialog covers it).
pub fn focused(app: &App, pane: Pane) -> bool {
    app.focus == pane && !app.mode.is_modal()
}

/// A style with the role's look applied on top of `base`.
pub fn patch(app: &App, base: Style, role: Role) -> Style {
    base.patch(app.theme.style(role))
}
