//! The Receipts view's state: the receipts, newest first, the selection and the rows in
//! view (a [`Listing`]), and what verifying them said.

use std::collections::HashMap;

use ratatui::layout::Rect;

use crate::client::{Client, ClientError};
use crate::tui::evidence::{self, ReceiptItem};
use crate::tui::views::{Feed, Pace, Pane};

use super::listing::Listing;
use super::{App, VerifyState};

/// The receipts pane's state.
#[derive(Default)]
pub struct ReceiptsPane {
    /// The receipts, the selection, the rows in view.
    pub listing: Listing<ReceiptItem>,
    /// What verifying each receipt said.
    pub verifications: HashMap<String, VerifyState>,
}

/// The receipts are fetched while their view is shown; new ones are verified.
impl Feed for ReceiptsPane {
    const PANE: Pane = Pane::Receipts;
    const PACE: Pace = Pace::WhileShown;
    type Answer = Vec<ReceiptItem>;

    fn fetch(client: &Client) -> impl Future<Output = Result<Self::Answer, ClientError>> + Send {
        evidence::fetch_receipts(client)
    }

    fn take(app: &mut App, answer: Result<Self::Answer, String>) {
        let fresh = app.receipts.on_list(answer);
        app.verify(fresh);
    }
}

impl ReceiptsPane {
    /// A new list (see [`Listing::on_list`]). Returns the receipts to verify: new ones (and
    /// ones written since they were reserved) are verified once; `v` verifies them all
    /// again.
    pub fn on_list(&mut self, result: Result<Vec<ReceiptItem>, String>) -> Vec<ReceiptItem> {
        let fresh: Vec<ReceiptItem> = match &result {
            Ok(items) => items
                .iter()
                .filter(|r| {
                    let known = self.listing.items().iter().find(|o| o.id == r.id);
                    !self.verifications.contains_key(&r.id) || known.is_some_and(|o| o != *r)
                })
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        };
        self.listing.on_list(result);
        // Newest first, as the list.
        let mut fresh = fresh;
        fresh.sort_by_key(|r| std::cmp::Reverse(crate::tui::evidence::id_number(&r.id)));
        fresh
    }

    /// Its layout at the current size: the list at the top of `main` keeps the selected
    /// receipt in view.
    pub fn lay_out(&mut self, main: Rect) {
        let l = &self.listing;
        if let Some(rows) = l.rows_in(main, l.items().len()) {
            let sel = l.position().unwrap_or(0);
            self.listing.follow(rows, sel, sel);
        }
    }

    /// Marks `items` pending until their answer.
    pub fn pending(&mut self, items: &[ReceiptItem]) {
        for r in items {
            self.verifications
                .insert(r.id.clone(), VerifyState::Pending);
        }
    }
}
