//! Drawing the cockpit: one function per pane, all reading the [`App`] (a shared borrow:
//! drawing changes no state; the layout and every scroll were computed by
//! [`App::lay_out`]) and styling through semantic roles. Every untrusted string is passed
//! through [`crate::text`] here, at the last step before a widget; the live terminal draws
//! cells (see [`super::vt`]).

pub(crate) mod activity;
#[cfg(test)]
mod activity_tests;
pub(crate) mod events;
pub(crate) mod factory;
#[cfg(test)]
mod factory_tests;
pub(crate) mod gate;
mod header;
#[cfg(test)]
mod hosts_tests;
pub(crate) mod intents;
#[cfg(test)]
mod layout_tests;
pub(crate) mod live;
mod modal;
#[cfg(test)]
mod paint_tests;
pub(crate) mod receipts;
pub(crate) mod rigs;
#[cfg(test)]
mod rigs_tests;
pub(crate) mod sessions;
mod status;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod tribunal;
#[cfg(test)]
mod tribunal_tests;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};

use super::app::{App, Body, Pane, Tab};
use super::keymap::Context;
use super::role::Role;

/// The screen areas of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    pub header: Rect,
    /// Present only when there is more than one tab.
    pub tabs: Option<Rect>,
    pub sessions: Rect,
    /// The live terminal (Sessions view) or the gate (Gate view).
    pub live: Rect,
    pub events: Rect,
    /// The body of the Intents and Receipts views.
    pub main: Rect,
    pub status: Rect,
    /// True when the live pane fills the screen (no border).
    pub zoomed: bool,
}

/// Screens this wide put the list and the events on the left and the live terminal on the
/// right; narrower ones stack list, live terminal and events, so that the terminal keeps
/// the screen's width.
pub const WIDE: u16 = 160;

/// The columns the live terminal keeps beside the list (80 and its borders): what the
/// providers' interactive forms are designed for.
pub const LIVE_MIN: u16 = 82;

/// The screen's areas. `list_rows` is how many runs the sessions list may show (every run
/// the cockpit holds: a filter does not change the layout, nor the live terminal's size).
pub fn layout(area: Rect, zoomed: bool, tab: Tab, list_rows: u16) -> Areas {
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
    if tab.body() == Body::Whole {
        return Areas {
            header,
            tabs,
            main,
            status,
            ..Areas::default()
        };
    }
    let (sessions, live, events) = if main.width >= WIDE {
        // The list has half the screen, but the terminal keeps 80 columns, and the list
        // at least two fifths.
        let w = main.width;
        let list_w = (w / 2).min(w.saturating_sub(LIVE_MIN)).max(w * 2 / 5);
        let [left, right] =
            Layout::horizontal([Constraint::Length(list_w), Constraint::Min(1)]).areas(main);
        let [s, e] =
            Layout::vertical([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(left);
        (s, right, e)
    } else if matches!(
        tab.body(),
        Body::Sessions(Pane::Gate | Pane::Tribunal | Pane::Activity)
    ) {
        // The gate and the seats need the room: a short list above them, no events.
        let list_h = (main.height / 4).max(7).min(main.height.saturating_sub(3));
        let [s, g] = Layout::vertical([Constraint::Length(list_h), Constraint::Min(3)]).areas(main);
        (s, g, Rect::default())
    } else {
        // The list has the rows its runs need (with its header and borders), up to two
        // fifths of the height; the events two lines, six on a tall screen; the live
        // terminal the rest.
        let h = main.height;
        let list_h = list_rows.saturating_add(3).min(h * 2 / 5).max(5);
        let events_h = if h >= 34 { 6 } else { 4 };
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
        main: Rect::default(),
        status,
        zoomed: false,
    }
}

/// A view of a list over the selected item's detail (the intents, the receipts): the list
/// as tall as its `rows` rows with its header and borders (within half of `area`, at least
/// 5), the rest for the detail.
pub fn list_over_detail(area: Rect, rows: usize) -> (Rect, Rect) {
    let n = u16::try_from(rows).unwrap_or(u16::MAX);
    let list_h = n.saturating_add(3).clamp(5, (area.height / 2).max(5));
    let [list_area, detail_area] =
        Layout::vertical([Constraint::Length(list_h), Constraint::Min(3)]).areas(area);
    (list_area, detail_area)
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

/// Lays the app out at the frame's size ([`App::lay_out`]: the areas, the live terminal's
/// size, each list's rows and scroll, all state), then draws the frame from it
/// ([`render`]). Returns the areas.
pub fn draw(frame: &mut Frame<'_>, app: &mut App) -> Areas {
    app.lay_out(frame.area());
    render(frame, app);
    app.areas
}

/// Draws one frame of `app` as [`App::lay_out`] left it: reads the state, writes nothing
/// but the frame.
pub fn render(frame: &mut Frame<'_>, app: &App) {
    let screen = frame.area();
    let areas = app.areas;
    let buf = frame.buffer_mut();
    if !areas.zoomed {
        header::draw(app, areas.header, buf);
        if let Some(t) = areas.tabs {
            draw_tabs(app, t, buf);
        }
    }
    let cursor = crate::tui::views::draw(app, &areas, buf);
    let status_area = status::message_area(app, areas.status, screen);
    status::draw(app, status_area, buf);
    if app.mode.is_attach()
        && let Some(c) = cursor
    {
        frame.set_cursor_position(c);
    }
    modal::draw(app, frame);
}

/// The live pane's area when a frame in which nothing but the live terminal's output
/// changed ([`App::live_dirty`] set, [`App::dirty`] not) is drawn by drawing that pane alone ([`draw_live`]) over
/// the last frame: the layout of the last frame holds, no dialog is open, the pane shown
/// is the live terminal, and no status message of several rows covers it. `None`: the
/// whole frame is drawn.
pub fn live_alone(app: &App, screen: Rect) -> Option<Rect> {
    if matches!(app.mode, super::app::Mode::Modal(_)) {
        return None;
    }
    if matches!(
        app.tab.body(),
        Body::Whole | Body::Sessions(Pane::Gate | Pane::Tribunal | Pane::Activity)
    ) {
        return None;
    }
    let areas = app.areas;
    if areas.live.is_empty() || status::message_area(app, areas.status, screen) != areas.status {
        return None;
    }
    Some(areas.live)
}

/// Draws the live pane alone, as [`render`] draws it, into `buf` (empty in the pane's
/// area); returns the cursor [`render`] would set.
pub fn draw_live(
    app: &App,
    buf: &mut ratatui::buffer::Buffer,
) -> Option<ratatui::layout::Position> {
    let areas = app.areas;
    let cursor = live::draw(app, areas.live, areas.zoomed, buf);
    cursor
        .filter(|_| app.mode.is_attach())
        .map(|(x, y)| ratatui::layout::Position { x, y })
}

fn draw_tabs(app: &App, area: Rect, buf: &mut ratatui::buffer::Buffer) {
    if area.is_empty() {
        return;
    }
    let mut spans = Vec::new();
    for t in Tab::ALL {
        let on = t == app.tab;
        if let Some(k) = app.keymap.key_for(&[Context::Global], t.action()) {
            spans.push(span(app, Role::Key, format!(" {k}")));
        }
        let title = if on {
            format!(" {} ", t.title())
        } else {
            format!(" {}  ", t.title())
        };
        let role = if on { Role::Selected } else { Role::Dim };
        spans.push(span(app, role, title));
        if on {
            spans.push(span(app, Role::Dim, " "));
        }
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

/// A list row's base style: the selection's look (dimmed when the list is not focused), or
/// none.
pub fn row_style(app: &App, selected: bool, list_focused: bool) -> Style {
    if !selected {
        return Style::default();
    }
    let st = app.theme.style(Role::Selected);
    if list_focused {
        st
    } else {
        st.patch(app.theme.style(Role::Dim))
    }
}

/// A pane's one message (loading, an error, or what to do when it is empty), dimmed and
/// wrapped inside `inner`.
pub fn dim_message(
    app: &App,
    buf: &mut ratatui::buffer::Buffer,
    inner: ratatui::layout::Rect,
    msg: &str,
) {
    let w = usize::from(inner.width);
    for (k, l) in wrap(msg, w.saturating_sub(2), 0)
        .into_iter()
        .take(usize::from(inner.height))
        .enumerate()
    {
        buf.set_stringn(
            inner.x + 1,
            inner.y + k as u16,
            l,
            w.saturating_sub(1),
            app.theme.style(Role::Dim),
        );
    }
}

/// A detail field: `label` in a 10-column dimmed gutter, `value` sanitised and wrapped to
/// `width` with its continuation rows under the value.
pub fn labelled(
    app: &App,
    rows: &mut Vec<ratatui::text::Line<'static>>,
    label: &str,
    value: &str,
    role: Role,
    width: usize,
) {
    use ratatui::text::{Line, Span};
    for (k, part) in wrap(value, width.saturating_sub(10), 0)
        .into_iter()
        .enumerate()
    {
        let l = if k == 0 {
            format!("{label:<10}")
        } else {
            " ".repeat(10)
        };
        rows.push(Line::from(vec![
            Span::styled(l, app.theme.style(Role::Dim)),
            Span::styled(part, app.theme.style(role)),
        ]));
    }
}

/// `s` through the sanitiser, cut into rows of at most `width` columns: at spaces when it
/// can, inside a word too long for a row otherwise (nothing is dropped); rows after the
/// first start with `indent` spaces.
pub fn wrap(s: &str, width: usize, indent: usize) -> Vec<String> {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let width = width.max(2);
    let indent = indent.min(width / 2);
    let clean = crate::text::one_line(s, usize::MAX);
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut used = 0usize;
    // Where the current row's text starts (its indent), and whether it holds a word yet.
    let mut base = 0usize;
    let mut fresh = true;
    for word in clean.split(' ') {
        if !fresh {
            if used + 1 + word.width() <= width {
                line.push(' ');
                used += 1;
            } else {
                out.push(std::mem::take(&mut line));
                line.push_str(&" ".repeat(indent));
                used = indent;
                base = indent;
            }
        }
        for c in word.chars() {
            let cw = c.width().unwrap_or(0);
            if used + cw > width && used > base {
                out.push(std::mem::take(&mut line));
                line.push_str(&" ".repeat(indent));
                used = indent;
                base = indent;
            }
            line.push(c);
            used += cw;
        }
        fresh = false;
    }
    out.push(line);
    out
}
