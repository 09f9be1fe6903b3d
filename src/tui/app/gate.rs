//! The Gate view's state: every run's latest bound candidate, the gates heard of, the
//! candidate shown and how far the operator scrolled its graph.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::tui::action::Action;
use crate::tui::evidence::{self as ev, CandidateView, GateView};

/// The gate pane's state.
pub struct GatePane {
    /// The latest bound candidate of each run.
    pub candidates: BTreeMap<String, CandidateView>,
    /// The gates heard of, by candidate.
    pub gates: HashMap<String, Result<GateView, String>>,
    /// Why the candidates could not be listed.
    pub error: Option<String>,
    /// The candidate the Gate view shows when chosen explicitly (from an intent); otherwise
    /// it follows the focused run.
    pub chosen: Option<String>,
    /// The first row in view, kept within the graph by [`GatePane::follow`].
    pub scroll: usize,
    /// How many rows the pane shows (set with the layout).
    pub rows: usize,
}

impl Default for GatePane {
    fn default() -> GatePane {
        GatePane {
            candidates: BTreeMap::new(),
            gates: HashMap::new(),
            error: None,
            chosen: None,
            scroll: 0,
            rows: 10,
        }
    }
}

impl GatePane {
    /// The candidate shown: the one chosen, else `run`'s latest.
    pub fn candidate(&self, run: Option<&str>) -> Option<String> {
        if let Some(c) = &self.chosen {
            return Some(c.clone());
        }
        self.candidates.get(run?).map(|c| c.id.clone())
    }

    /// The gate state of a run's latest candidate, as last heard: `None` without a
    /// candidate; `Some(Err)` when it could not be evaluated; `Some(Ok(None))` before the
    /// first answer.
    pub fn run_gate(&self, run: &str) -> Option<Result<Option<ev::GateState>, String>> {
        let c = self.candidates.get(run)?;
        Some(match self.gates.get(&c.id) {
            None => Ok(None),
            Some(Ok(g)) => Ok(Some(g.state)),
            Some(Err(e)) => Err(e.clone()),
        })
    }

    /// A new list of candidates: the latest of each run; gates of candidates gone are
    /// dropped.
    pub fn on_candidates(&mut self, list: Result<Vec<CandidateView>, String>) {
        match list {
            Ok(list) => {
                self.error = None;
                self.candidates = ev::latest_by_run(&list);
                let live: HashSet<&str> = list.iter().map(|c| c.id.as_str()).collect();
                self.gates.retain(|id, _| live.contains(id.as_str()));
            }
            Err(e) => self.error = Some(crate::text::one_line(&e, 300)),
        }
    }

    /// The pane's keys: they scroll the graph.
    pub fn navigate(&mut self, action: Action) {
        let page = self.rows.max(1);
        self.scroll = match action {
            Action::Up => self.scroll.saturating_sub(1),
            Action::Down => self.scroll + 1,
            Action::PageUp => self.scroll.saturating_sub(page),
            Action::PageDown => self.scroll + page,
            Action::Top => 0,
            _ => usize::MAX / 2,
        };
    }

    /// The pane shows `rows` of a graph `len` rows long: the scroll stays within it.
    pub fn follow(&mut self, rows: usize, len: usize) {
        self.rows = rows;
        self.scroll = self.scroll.min(len.saturating_sub(rows));
    }
}
