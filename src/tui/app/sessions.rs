//! The sessions list: the runs the server holds, what is shown of them (hidden, filtered,
//! ordered), the selection and the rows in view.

use chrono::{DateTime, Utc};

use crate::tui::action::Action;
use crate::tui::data::{Counts, RunView};
use crate::tui::widgets::input::TextInput;

/// The sessions list's state.
pub struct SessionList {
    pub runs: Vec<RunView>,
    pub total: usize,
    pub counts: Counts,
    pub loaded: bool,
    pub server_error: Option<String>,
    /// Indices into `runs`, in display order, after hiding and filtering.
    pub view: Vec<usize>,
    pub selected: Option<String>,
    /// The run the person chose (a key, a click, a new session). A filter or a toggle that
    /// hides it moves the selection only while it is hidden: clearing the filter (Esc)
    /// selects it again.
    pub chosen: Option<String>,
    /// The first row in view, kept by [`SessionList::follow`] so the selection stays in view.
    pub offset: usize,
    pub show_archived: bool,
    pub show_snoozed: bool,
    pub filter: TextInput,
    /// How many runs the list's pane shows (set with the layout).
    pub rows: usize,
}

impl Default for SessionList {
    fn default() -> SessionList {
        SessionList {
            runs: Vec::new(),
            total: 0,
            counts: Counts::default(),
            loaded: false,
            server_error: None,
            view: Vec::new(),
            selected: None,
            chosen: None,
            offset: 0,
            show_archived: false,
            show_snoozed: false,
            filter: TextInput::default(),
            rows: 10,
        }
    }
}

impl SessionList {
    /// The selected run.
    pub fn selected_run(&self) -> Option<&RunView> {
        let r = self.selected.as_deref()?;
        self.runs.iter().find(|x| x.run_ref == r)
    }

    /// The position of the selection in the visible list.
    pub fn selected_index(&self) -> Option<usize> {
        let s = self.selected.as_deref()?;
        self.view
            .iter()
            .position(|&i| self.runs.get(i).is_some_and(|r| r.run_ref == s))
    }

    /// Recomputes the visible list: archived hidden (toggle), snoozed hidden until due
    /// (toggle), the filter (ref, name, tool, profile, state, worktree branch;
    /// case-insensitive); pinned first, then by recent activity. `old_pos` is the
    /// selection's row before the change (`view` may no longer index `runs`: only this row
    /// is used): a selected run that is no longer shown hands the selection to the run now
    /// in its row.
    pub fn refilter_from(&mut self, old_pos: Option<usize>, now: DateTime<Utc>) {
        let needle = self.filter.value().to_lowercase();
        let mut view: Vec<usize> = (0..self.runs.len())
            .filter(|&i| {
                let r = &self.runs[i];
                if r.is_archived() && !self.show_archived {
                    return false;
                }
                if r.is_snoozed(now) && !self.show_snoozed {
                    return false;
                }
                if needle.is_empty() {
                    return true;
                }
                [
                    Some(r.run_ref.as_str()),
                    r.name.as_deref(),
                    Some(r.tool.as_str()),
                    Some(r.profile.as_str()),
                    Some(r.state.as_str()),
                    r.worktree_branch.as_deref(),
                ]
                .into_iter()
                .flatten()
                .any(|f| f.to_lowercase().contains(&needle))
            })
            .collect();
        let runs = &self.runs;
        // Each run's key once (its activity parses timestamps), then one sort.
        view.sort_by_cached_key(|&i| {
            let r = &runs[i];
            (
                std::cmp::Reverse(r.pinned),
                std::cmp::Reverse(r.activity()),
                std::cmp::Reverse(r.run_ref.clone()),
            )
        });
        self.view = view;
        let shown = |l: &SessionList, s: &str| l.view.iter().any(|&i| l.runs[i].run_ref == s);
        // A chosen run that no longer exists (deleted) hands over to the one in its row.
        if self
            .chosen
            .as_deref()
            .is_some_and(|c| !self.runs.iter().any(|r| r.run_ref == c))
        {
            self.chosen = None;
        }
        let still = self.selected.as_deref().is_some_and(|s| shown(self, s));
        if let Some(c) = self.chosen.clone()
            && shown(self, &c)
        {
            self.selected = Some(c);
        } else if !still {
            self.selected = if self.view.is_empty() {
                None
            } else {
                let i = old_pos.unwrap_or(0).min(self.view.len() - 1);
                Some(self.runs[self.view[i]].run_ref.clone())
            };
        }
    }

    /// Selects the run in row `i` (clamped); `false` for an empty list.
    pub fn select_index(&mut self, i: usize) -> bool {
        if self.view.is_empty() {
            return false;
        }
        let i = i.min(self.view.len() - 1);
        self.selected = Some(self.runs[self.view[i]].run_ref.clone());
        self.chosen.clone_from(&self.selected);
        true
    }

    /// The row a navigation key moves the selection to (`None` for an empty list).
    pub fn target(&self, action: Action) -> Option<usize> {
        let n = self.view.len() as isize;
        if n == 0 {
            return None;
        }
        let page = self.rows.max(1) as isize;
        let cur = self.selected_index().unwrap_or(0) as isize;
        let by = |delta: isize| (cur + delta).clamp(0, n - 1) as usize;
        Some(match action {
            Action::Up => by(-1),
            Action::Down => by(1),
            Action::PageUp => by(-page),
            Action::PageDown => by(page),
            Action::Top => 0,
            _ => usize::MAX,
        })
    }

    /// Keeps the selection within the `rows` rows in view.
    pub fn follow(&mut self, rows: usize) {
        if rows == 0 {
            return;
        }
        let sel = self.selected_index().unwrap_or(0);
        if sel < self.offset {
            self.offset = sel;
        } else if sel >= self.offset + rows {
            self.offset = sel + 1 - rows;
        }
        self.offset = self.offset.min(self.view.len().saturating_sub(rows));
    }
}
