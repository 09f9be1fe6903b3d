//! The cockpit at a screen size: where each pane is, the size the live terminal should
//! have, how many rows each list shows, and the scroll that keeps each selection in view.
//! Computed here, in the state, before a frame is drawn; drawing ([`crate::tui::ui::render`])
//! only reads it.

use ratatui::layout::Rect;

use super::{App, Body, Mode, Tab};
use crate::tui::ui;

impl App {
    /// Lays the cockpit out on a `screen` of this size: the panes' areas (kept for the
    /// mouse), the live pane's inner size (what the PTY should be, while it is shown), the
    /// rows of each list, each list's first row so that its selection is in view, and the
    /// open dialog ([`crate::tui::widgets::Dialog::lay_out`]).
    pub fn lay_out(&mut self, screen: Rect) {
        let zoomed = self.zoomed && self.tab == Tab::Sessions;
        // Every run the cockpit holds, not only the listed ones: typing a filter does not
        // resize the live terminal.
        // The factory's groups ask for their rows too (they share the list's pane).
        // A cockpit of several hosts has one line per host above the list.
        let host_lines = self.hosts.list.len();
        let list_rows =
            u16::try_from(self.sessions.runs.len() + ui::factory::wanted(self) + host_lines)
                .unwrap_or(u16::MAX);
        let areas = ui::layout(screen, zoomed, self.tab, list_rows);
        self.areas = areas;
        // The PTY follows the live pane only while it is drawn.
        if self.tab == Tab::Sessions {
            self.live.inner = if areas.zoomed {
                areas.live
            } else {
                ui::inner(areas.live)
            };
        }
        if self.tab.body() != Body::Whole {
            let avail = usize::from(ui::inner(areas.sessions).height.saturating_sub(1))
                .saturating_sub(host_lines);
            self.sessions.rows = ui::factory::split(self, avail).0;
            self.events.rows = usize::from(ui::inner(areas.events).height);
            if !areas.zoomed {
                self.follow_sessions(ui::inner(areas.sessions));
            }
        }
        crate::tui::views::lay_out(self, areas);
        // The open dialog, drawn over the whole screen.
        if let Mode::Modal(m) = &mut self.mode {
            m.lay_out(screen);
        }
    }

    /// The sessions list in `inner` (its first row is the column header).
    fn follow_sessions(&mut self, inner: Rect) {
        let l = &self.sessions;
        if inner.is_empty() || l.server_error.is_some() || l.view.is_empty() {
            return;
        }
        let avail = (usize::from(inner.height) - 1).saturating_sub(self.hosts.list.len());
        let (rows, _) = ui::factory::split(self, avail);
        self.sessions.follow(rows);
    }

    /// The gate's graph in `inner`: the scroll stays within the rows it takes.
    pub(crate) fn follow_gate(&mut self, inner: Rect) {
        if inner.is_empty() {
            return;
        }
        let len = ui::gate::rows_len(self, usize::from(inner.width.saturating_sub(1)));
        self.gate.follow(usize::from(inner.height), len);
    }
}
