//! The Tribunal view's state: the rounds the server holds (fetched while the view is shown),
//! the seat selected in the focused run's latest candidate's latest round, and how far the
//! seats are scrolled. Which candidate: the one the gate part knows as the focused run's
//! latest (`GatePane::candidates`, polled by the evidence task), so a round of an older
//! candidate of the same run is never shown as the current one.

use ratatui::layout::Rect;

use crate::api::tribunal::Round;
use crate::client::{Client, ClientError};
use crate::tui::action::Action;
use crate::tui::views::{Feed, Pace, Pane};

use super::App;

/// The tribunal pane's state.
#[derive(Default)]
pub struct TribunalPane {
    /// Every round, oldest first (`None` before the first answer).
    pub rounds: Option<Result<Vec<Round>, String>>,
    /// The selected seat (an index into the shown round's seats).
    pub selected: usize,
    /// The first seat row in view.
    pub offset: usize,
    /// How many seat rows the pane shows (set with the layout).
    pub rows: usize,
}

/// The rounds are fetched while the view is shown (every round of the evidence task, so a
/// round in progress moves), and at once when it opens.
impl Feed for TribunalPane {
    const PANE: Pane = Pane::Tribunal;
    const PACE: Pace = Pace::WhileShown;
    type Answer = Vec<Round>;

    fn fetch(client: &Client) -> impl Future<Output = Result<Self::Answer, ClientError>> + Send {
        client.tribunal_rounds(None, None)
    }

    fn take(app: &mut App, answer: Result<Self::Answer, String>) {
        app.tribunal.on_rounds(answer);
    }
}

/// The rows above the seats in the pane (the round's head) and the header of the seats.
pub const HEAD_ROWS: usize = 3;

impl TribunalPane {
    /// A new answer (an error keeps the rounds heard before out of view: the error shows).
    pub fn on_rounds(&mut self, answer: Result<Vec<Round>, String>) {
        self.rounds = Some(answer.map(|mut v| {
            v.sort_by(|a, b| a.id.cmp(&b.id));
            v
        }));
    }

    /// The rounds of `candidate`, oldest first.
    pub fn rounds_of(&self, candidate: &str) -> Vec<&Round> {
        match &self.rounds {
            Some(Ok(v)) => {
                let mut r: Vec<&Round> = v.iter().filter(|r| r.candidate == candidate).collect();
                r.sort_by_key(|r| r.number);
                r
            }
            _ => Vec::new(),
        }
    }

    /// The pane's keys: they move the seat selection (within `seats` seats).
    pub fn navigate(&mut self, action: Action, seats: usize) {
        if seats == 0 {
            return;
        }
        let last = seats - 1;
        let page = self.rows.max(1);
        self.selected = match action {
            Action::Up => self.selected.saturating_sub(1),
            Action::Down => (self.selected + 1).min(last),
            Action::PageUp => self.selected.saturating_sub(page),
            Action::PageDown => (self.selected + page).min(last),
            Action::Top => 0,
            Action::Bottom => last,
            _ => self.selected,
        }
        .min(last);
    }

    /// Its layout in the pane's `inner` area for a round of `seats` seats: the selection
    /// stays within the seats and in view.
    pub fn lay_out(&mut self, inner: Rect, seats: usize) {
        // The head, the header, the seats, then the selected seat's cause (one row at
        // least; what Enter does when there is room).
        let rows = usize::from(inner.height)
            .saturating_sub(HEAD_ROWS + 1)
            .max(1);
        self.rows = rows;
        self.selected = self.selected.min(seats.saturating_sub(1));
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + rows {
            self.offset = self.selected + 1 - rows;
        }
        self.offset = self.offset.min(seats.saturating_sub(rows));
    }
}

impl App {
    /// The candidate the Tribunal view shows: the focused run's latest.
    pub fn tribunal_candidate(&self) -> Option<String> {
        let run = self.selected_run()?;
        self.gate.candidates.get(&run.run_ref).map(|c| c.id.clone())
    }

    /// The rounds of that candidate, oldest first.
    pub fn tribunal_rounds(&self) -> Vec<&Round> {
        match self.tribunal_candidate() {
            Some(c) => self.tribunal.rounds_of(&c),
            None => Vec::new(),
        }
    }

    /// Its latest round: the one whose seats the view shows.
    pub fn tribunal_round(&self) -> Option<&Round> {
        self.tribunal_rounds().last().copied()
    }

    /// The selected seat of that round.
    pub fn tribunal_seat(&self) -> Option<&crate::api::tribunal::Seat> {
        let r = self.tribunal_round()?;
        r.seats
            .get(self.tribunal.selected.min(r.seats.len().saturating_sub(1)))
    }

    /// Opens the selected seat's routing and findings in a dialog.
    pub(super) fn open_seat(&mut self) {
        let Some(round) = self.tribunal_round() else {
            self.info("no round for the focused run's candidate (5 shows the tribunal)");
            return;
        };
        let Some(seat) = self.tribunal_seat().cloned() else {
            self.info("this round has no seat");
            return;
        };
        let d = crate::tui::widgets::seat::SeatDialog::new(round, seat);
        self.open(super::Modal::Seat(Box::new(d)));
    }
}
