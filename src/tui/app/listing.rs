//! A list the server gives, newest first, with a selection that stays on its item and the
//! first row in view: what the intents and the receipts views share.

use ratatui::layout::Rect;

use crate::tui::action::Action;
use crate::tui::evidence::{IntentView, ReceiptItem, id_number};
use crate::tui::ui;

use super::{keep_in_place, move_in};

/// An item a list selects by its id.
pub trait Keyed {
    fn key(&self) -> &str;
}

impl Keyed for IntentView {
    fn key(&self) -> &str {
        &self.id
    }
}

impl Keyed for ReceiptItem {
    fn key(&self) -> &str {
        &self.id
    }
}

/// A listed kind of item, its selection and the rows in view.
pub struct Listing<T> {
    /// The items, newest first (`None` before the first answer).
    pub list: Option<Result<Vec<T>, String>>,
    /// The id of the item chosen (the newest is shown selected when none is).
    pub selected: Option<String>,
    /// The first row in view, kept by [`Listing::follow`].
    pub offset: usize,
    /// How many rows the list shows (set with the layout).
    pub rows: usize,
}

impl<T> Default for Listing<T> {
    fn default() -> Listing<T> {
        Listing {
            list: None,
            selected: None,
            offset: 0,
            rows: 10,
        }
    }
}

impl<T: Keyed> Listing<T> {
    /// The items (empty before the first answer, and after an error).
    pub fn items(&self) -> &[T] {
        match &self.list {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }

    /// Whether there is an item to show.
    pub fn has_items(&self) -> bool {
        !self.items().is_empty()
    }

    /// The selected item: the one chosen, else the newest.
    pub fn current(&self) -> Option<&T> {
        let list = self.items();
        self.selected
            .as_deref()
            .and_then(|id| list.iter().find(|x| x.key() == id))
            .or_else(|| list.first())
    }

    /// The selected item's index.
    pub fn position(&self) -> Option<usize> {
        let cur = self.current()?.key();
        self.items().iter().position(|x| x.key() == cur)
    }

    /// A new list, put newest first (by the number in its ids); the selection stays on its
    /// item, or in its row when the item is gone.
    pub fn on_list(&mut self, result: Result<Vec<T>, String>) {
        let old_pos = self.position();
        self.list = Some(result.map(|mut v| {
            v.sort_by_key(|x| std::cmp::Reverse(id_number(x.key())));
            v
        }));
        let chosen = self.selected.take();
        self.selected = keep_in_place(self.items(), |x| x.key(), chosen, old_pos);
    }

    /// The list's keys: they move the selection by a row, a page, to the top or the bottom.
    pub fn navigate(&mut self, action: Action) {
        let cur = self.current().map(|x| x.key().to_string());
        if let Some(id) = move_in(self.items(), |x| x.key(), cur.as_deref(), action, self.rows) {
            self.selected = Some(id);
        }
    }

    /// The list shows `rows` rows; the selected item takes the rows `first..=last`: they
    /// stay in view.
    pub fn follow(&mut self, rows: usize, first: usize, last: usize) {
        if rows == 0 {
            return;
        }
        self.rows = rows;
        if first < self.offset {
            self.offset = first;
        } else if last >= self.offset + rows {
            self.offset = last + 1 - rows;
        }
    }

    /// The rows a list of `lines` rows shows at the top of `main`, over its detail and under
    /// its column header ([`crate::tui::ui::list_over_detail`]); `None` when it shows none (a
    /// message in its place, or no room).
    pub fn rows_in(&self, main: Rect, lines: usize) -> Option<usize> {
        if !self.has_items() {
            return None;
        }
        let inner = ui::inner(ui::list_over_detail(main, lines).0);
        (!inner.is_empty()).then(|| usize::from(inner.height).saturating_sub(1))
    }
}
