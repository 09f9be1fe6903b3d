//! The Intents view's state: the publication intents, newest first, the selection and the
//! rows in view.

use crate::tui::action::Action;
use crate::tui::evidence::{self as ev, IntentView};

use super::{keep_in_place, move_in};

/// The intents pane's state.
pub struct IntentsPane {
    /// Publication intents, newest first (`None` before the first answer).
    pub list: Option<Result<Vec<IntentView>, String>>,
    pub selected: Option<String>,
    /// The first list row in view, kept by [`IntentsPane::follow`].
    pub offset: usize,
    /// How many list rows the pane shows (set with the layout).
    pub rows: usize,
}

impl Default for IntentsPane {
    fn default() -> IntentsPane {
        IntentsPane {
            list: None,
            selected: None,
            offset: 0,
            rows: 10,
        }
    }
}

impl IntentsPane {
    /// The intents, newest first (empty before the first answer).
    pub fn items(&self) -> &[IntentView] {
        match &self.list {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }

    /// The selected intent: the one chosen, else the newest.
    pub fn selected_intent(&self) -> Option<&IntentView> {
        let list = self.items();
        self.selected
            .as_deref()
            .and_then(|id| list.iter().find(|i| i.id == id))
            .or_else(|| list.first())
    }

    /// How many intents await a person's authority.
    pub fn awaiting(&self) -> usize {
        self.items().iter().filter(|i| i.awaiting()).count()
    }

    /// A new list: newest first; the selection stays on its intent, or in its row.
    pub fn on_list(&mut self, result: Result<Vec<IntentView>, String>) {
        let old_pos = self
            .selected_intent()
            .and_then(|cur| self.items().iter().position(|i| i.id == cur.id));
        self.list = Some(result.map(|mut v| {
            v.sort_by_key(|i| std::cmp::Reverse(ev::id_number(&i.id)));
            v
        }));
        let chosen = self.selected.take();
        self.selected = keep_in_place(self.items(), |i| i.id.as_str(), chosen, old_pos);
    }

    /// The pane's keys: they move the selection.
    pub fn navigate(&mut self, action: Action) {
        let cur = self.selected_intent().map(|i| i.id.clone());
        if let Some(id) = move_in(
            self.items(),
            |i| i.id.as_str(),
            cur.as_deref(),
            action,
            self.rows,
        ) {
            self.selected = Some(id);
        }
    }

    /// The list's rows: each intent's, and a second for a blocked one (its first cause).
    /// Each row is (the intent's index, whether it is the cause row).
    pub fn lines(&self) -> Vec<(usize, bool)> {
        self.items()
            .iter()
            .enumerate()
            .flat_map(|(i, it)| {
                let cause = it.state == "blocked" && !it.causes.is_empty();
                std::iter::once((i, false)).chain(cause.then_some((i, true)))
            })
            .collect()
    }

    /// The list shows `rows` rows: the selected intent's rows stay in view.
    pub fn follow(&mut self, rows: usize) {
        if rows == 0 {
            return;
        }
        self.rows = rows;
        let lines = self.lines();
        let sel = self
            .selected_intent()
            .and_then(|s| self.items().iter().position(|i| i.id == s.id))
            .unwrap_or(0);
        let first = lines.iter().position(|l| l.0 == sel).unwrap_or(0);
        let last = lines.iter().rposition(|l| l.0 == sel).unwrap_or(first);
        if first < self.offset {
            self.offset = first;
        } else if last >= self.offset + rows {
            self.offset = last + 1 - rows;
        }
    }
}
