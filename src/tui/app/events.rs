//! The events pane: the focused run's ledger events, newest at the bottom, and how far back
//! the operator scrolled.

use crate::tui::action::Action;
use crate::tui::data::EventItem;

/// The events pane's state.
pub struct EventsPane {
    /// The run they are of, and its events.
    pub items: Option<(String, Vec<EventItem>)>,
    /// How many events back from the newest (0: the newest is at the bottom).
    pub scroll: usize,
    /// How many events the pane shows (set with the layout).
    pub rows: usize,
}

impl Default for EventsPane {
    fn default() -> EventsPane {
        EventsPane {
            items: None,
            scroll: 0,
            rows: 5,
        }
    }
}

impl EventsPane {
    /// Forgets the events (another run is focused).
    pub fn clear(&mut self) {
        self.items = None;
        self.scroll = 0;
    }

    /// The pane's keys: up goes back in time.
    pub fn navigate(&mut self, action: Action) {
        let n = self.items.as_ref().map_or(0, |e| e.1.len());
        let page = self.rows.max(1);
        self.scroll = match action {
            Action::Up => self.scroll + 1,
            Action::Down => self.scroll.saturating_sub(1),
            Action::PageUp => self.scroll + page,
            Action::PageDown => self.scroll.saturating_sub(page),
            Action::Top => n,
            _ => 0,
        }
        .min(n.saturating_sub(1));
    }
}
