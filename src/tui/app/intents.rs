//! The Intents view's state: the publication intents, newest first, the selection and the
//! rows in view (a [`Listing`]).

use ratatui::layout::Rect;

use crate::client::{Client, ClientError};
use crate::tui::evidence::{self, IntentView};
use crate::tui::views::{Feed, Pace, Pane};

use super::App;
use super::listing::Listing;

/// The intents pane's state.
pub type IntentsPane = Listing<IntentView>;

/// The intents are fetched at every round (the header counts those awaiting authority).
impl Feed for IntentsPane {
    const PANE: Pane = Pane::Intents;
    const PACE: Pace = Pace::Always;
    type Answer = Vec<IntentView>;

    fn fetch(client: &Client) -> impl Future<Output = Result<Self::Answer, ClientError>> + Send {
        evidence::fetch_intents(client)
    }

    fn take(app: &mut App, answer: Result<Self::Answer, String>) {
        app.intents.on_list(answer);
    }
}

impl Listing<IntentView> {
    /// How many intents await a person's authority.
    pub fn awaiting(&self) -> usize {
        self.items().iter().filter(|i| i.awaiting()).count()
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

    /// Its layout at the current size: the list at the top of `main` keeps the selected
    /// intent in view.
    pub fn lay_out(&mut self, main: Rect) {
        if let Some(rows) = self.rows_in(main, self.lines().len()) {
            self.follow_lines(rows);
        }
    }

    /// The list shows `rows` rows: the selected intent's rows (two for a blocked one) stay
    /// in view.
    pub fn follow_lines(&mut self, rows: usize) {
        let lines = self.lines();
        let sel = self.position().unwrap_or(0);
        let first = lines.iter().position(|l| l.0 == sel).unwrap_or(0);
        let last = lines.iter().rposition(|l| l.0 == sel).unwrap_or(first);
        self.follow(rows, first, last);
    }
}

impl App {
    /// The argv that approves `intent` on `host` at this terminal: this same binary on this
    /// same home, `--host HOST publish approve INTENT` (its `ssh -t`; src/cli/publish.rs).
    pub fn remote_approve_argv(&self, host: &str, intent: &str) -> Vec<String> {
        let mut argv = if self.proctor_argv.is_empty() {
            vec!["proctor".to_string()]
        } else {
            self.proctor_argv.clone()
        };
        argv.extend([
            "--host".into(),
            host.to_string(),
            "publish".into(),
            "approve".into(),
            intent.to_string(),
        ]);
        argv
    }

    /// Back from the remote approval: its outcome line (the verb's last stderr line, already
    /// sanitised) as a notice when it exited 0, an error otherwise; the intents fetched again.
    pub fn approved_remotely(&mut self, host: &str, intent: &str, ok: bool, said: String) {
        self.dirty = true;
        let said = if said.is_empty() {
            format!(
                "the approval of {} on {} ended without a word",
                crate::text::one_line(intent, 24),
                crate::text::one_line(host, 24)
            )
        } else {
            said
        };
        if ok {
            self.success(said);
        } else {
            self.error(said);
        }
        self.push(super::Effect::Refresh);
    }
}
