//! The Receipts view's state: the receipts, newest first, what verifying them said, the
//! selection and the rows in view.

use std::collections::HashMap;

use crate::tui::action::Action;
use crate::tui::evidence::{self as ev, ReceiptItem};

use super::{VerifyState, keep_in_place, move_in};

/// The receipts pane's state.
pub struct ReceiptsPane {
    /// Receipts, newest first (`None` before the first answer).
    pub list: Option<Result<Vec<ReceiptItem>, String>>,
    pub selected: Option<String>,
    /// The first row in view, kept by [`ReceiptsPane::follow`].
    pub offset: usize,
    /// How many rows the list shows (set with the layout).
    pub rows: usize,
    /// What verifying each receipt said.
    pub verifications: HashMap<String, VerifyState>,
}

impl Default for ReceiptsPane {
    fn default() -> ReceiptsPane {
        ReceiptsPane {
            list: None,
            selected: None,
            offset: 0,
            rows: 10,
            verifications: HashMap::new(),
        }
    }
}

impl ReceiptsPane {
    /// The receipts, newest first.
    pub fn items(&self) -> &[ReceiptItem] {
        match &self.list {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }

    pub fn selected_receipt(&self) -> Option<&ReceiptItem> {
        let list = self.items();
        self.selected
            .as_deref()
            .and_then(|id| list.iter().find(|r| r.id == id))
            .or_else(|| list.first())
    }

    /// A new list: newest first; the selection stays on its receipt, or in its row. Returns
    /// the receipts to verify: new ones (and ones written since they were reserved) are
    /// verified once; `v` verifies them all again.
    pub fn on_list(&mut self, result: Result<Vec<ReceiptItem>, String>) -> Vec<ReceiptItem> {
        let result = result.map(|mut v| {
            v.sort_by_key(|r| std::cmp::Reverse(ev::id_number(&r.id)));
            v
        });
        let fresh: Vec<ReceiptItem> = match &result {
            Ok(items) => items
                .iter()
                .filter(|r| {
                    let known = self.items().iter().find(|o| o.id == r.id);
                    !self.verifications.contains_key(&r.id) || known.is_some_and(|o| o != *r)
                })
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        };
        let old_pos = self
            .selected_receipt()
            .and_then(|cur| self.items().iter().position(|r| r.id == cur.id));
        self.list = Some(result);
        let chosen = self.selected.take();
        self.selected = keep_in_place(self.items(), |r| r.id.as_str(), chosen, old_pos);
        fresh
    }

    /// Marks `items` pending until their answer.
    pub fn pending(&mut self, items: &[ReceiptItem]) {
        for r in items {
            self.verifications
                .insert(r.id.clone(), VerifyState::Pending);
        }
    }

    /// The pane's keys: they move the selection.
    pub fn navigate(&mut self, action: Action) {
        let cur = self.selected_receipt().map(|r| r.id.clone());
        if let Some(id) = move_in(
            self.items(),
            |r| r.id.as_str(),
            cur.as_deref(),
            action,
            self.rows,
        ) {
            self.selected = Some(id);
        }
    }

    /// The list shows `rows` rows: the selection stays in view.
    pub fn follow(&mut self, rows: usize) {
        if rows == 0 {
            return;
        }
        self.rows = rows;
        let sel = self
            .selected_receipt()
            .and_then(|s| self.items().iter().position(|r| r.id == s.id))
            .unwrap_or(0);
        if sel < self.offset {
            self.offset = sel;
        } else if sel >= self.offset + rows {
            self.offset = sel + 1 - rows;
        }
    }
}
