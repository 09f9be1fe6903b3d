//! The cockpit's state and what changes it: keys, answers from the server, output of the
//! focused session. Nothing here does I/O: every request is an [`Effect`] the event loop
//! ([`super::event_loop`]) carries out, and every answer comes back as a [`Msg`]. That keeps
//! the whole behaviour testable without a terminal or a server.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use hyper::Method;
use ratatui::crossterm::event::{Event, KeyEvent, KeyEventKind};
use ratatui::layout::Rect;
use serde_json::{Value, json};

use super::action::{Action, Needs};
use super::approval::ApprovalEvent;
use super::data::{Counts, EventItem, RUNS, RunView, RunsPage, WhoAmI};
use super::evidence::{self as ev, CandidateView, GateView, IntentView, ReceiptItem, Verification};
use super::keymap::{Context, Keymap};
use super::keys::{InputModes, encode_key, encode_paste};
use super::theme::Theme;
use super::vt::{PipeLog, VtTerm};
use super::widgets::Outcome;
use super::widgets::approval::{Approval, Step};
use super::widgets::confirm::Confirm;
use super::widgets::duration::SnoozePicker;
use super::widgets::help::Help;
use super::widgets::input::TextInput;
use super::widgets::new_session::{Field, NewSessionForm};
use super::widgets::palette::Palette;
use super::widgets::prompt::{Prompt, run_name_validator};
use crate::auth::{Principal, Role as TokenRole};
use crate::text;

/// How many terminals of sessions focused earlier are kept (their history, and the seq to
/// resume the stream from).
pub const CACHED_TERMS: usize = 8;

/// The panes that can hold the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Sessions,
    Live,
    Events,
    /// The gate of the focused run's candidate (in the Gate view, where the live terminal
    /// is in the Sessions view).
    Gate,
    Intents,
    Receipts,
}

/// The top-level views. Only the ones that exist are shown as tabs (tribunal seats and rig
/// locks come with the issues that build them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// The sessions list, the live terminal, the events.
    Sessions,
    /// The sessions list, the gate of the focused run's candidate, the events.
    Gate,
    /// The publication intents.
    Intents,
    /// The receipts and whether they verify.
    Receipts,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Sessions, Tab::Gate, Tab::Intents, Tab::Receipts];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Sessions => "Sessions",
            Tab::Gate => "Gate",
            Tab::Intents => "Intents",
            Tab::Receipts => "Receipts",
        }
    }

    /// The action that shows it.
    pub fn action(self) -> Action {
        match self {
            Tab::Sessions => Action::ViewSessions,
            Tab::Gate => Action::ViewGate,
            Tab::Intents => Action::ViewIntents,
            Tab::Receipts => Action::ViewReceipts,
        }
    }

    /// The panes Tab cycles through, the first one focused when the view opens.
    pub fn panes(self) -> &'static [Pane] {
        match self {
            Tab::Sessions => &[Pane::Sessions, Pane::Live, Pane::Events],
            Tab::Gate => &[Pane::Gate, Pane::Sessions, Pane::Events],
            Tab::Intents => &[Pane::Intents],
            Tab::Receipts => &[Pane::Receipts],
        }
    }
}

/// What the evidence task should fetch besides the lists: the receipts while their view is
/// shown, and the gate of the candidate the Gate view shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewWatch {
    pub receipts: bool,
    pub gate: Option<String>,
}

/// Where a receipt's verification stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyState {
    Pending,
    Done(Verification),
}

/// What a status line message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    Success,
    Error,
}

/// A message shown in place of the key hints until the next key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub tone: Tone,
    pub text: String,
}

/// What a prompt is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptFor {
    Rename(String),
    SendInput(String),
    Snooze(String),
    /// A new session; whether it has a first prompt (on a PTY session the server types it
    /// once the tool is up, then Enter).
    NewSession(bool),
}

/// A dialog over the cockpit.
pub enum Modal {
    Help(Help),
    /// The command palette: every action by name.
    Palette(Palette),
    /// Until when a session is snoozed.
    Snooze {
        run: String,
        picker: SnoozePicker<chrono::Local>,
        busy: bool,
    },
    /// A new session: profile, workspace, transport, first prompt.
    NewSession {
        form: NewSessionForm,
        busy: bool,
    },
    /// A question whose answer goes to the server; it stays open (with the server's error
    /// under the field) until the server accepts it.
    Prompt {
        purpose: PromptFor,
        dialog: Prompt,
        busy: bool,
    },
    /// A yes/no question before an action that cannot be taken back.
    Confirm {
        action: Action,
        run: String,
        dialog: Confirm,
    },
    /// The publication approval: the flow's text, the typed revision, the masked
    /// passphrase, the outcome.
    Approval(Box<Approval>),
}

/// Where keys go.
pub enum Mode {
    Normal,
    Filter,
    /// Every key goes to the focused session's PTY, except the prefix.
    Attach,
    Modal(Box<Modal>),
}

impl Mode {
    pub fn is_normal(&self) -> bool {
        matches!(self, Mode::Normal)
    }
    pub fn is_attach(&self) -> bool {
        matches!(self, Mode::Attach)
    }
    pub fn is_filter(&self) -> bool {
        matches!(self, Mode::Filter)
    }
    pub fn is_modal(&self) -> bool {
        matches!(self, Mode::Modal(_))
    }
}

/// What the live pane holds.
pub enum LiveBuf {
    Pty(Box<VtTerm>),
    Pipe(Box<PipeLog>),
}

impl LiveBuf {
    pub fn seq(&self) -> u64 {
        match self {
            LiveBuf::Pty(t) => t.seq,
            LiveBuf::Pipe(p) => p.seq,
        }
    }
}

/// Where the stream of the focused session stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveState {
    Connecting,
    Streaming,
    Ended(String),
    NotLive(String),
    Error(String),
}

/// The focused session's live view.
pub struct LiveSlot {
    pub run: String,
    /// Increases with every (re)attach; messages of an older stream are ignored.
    pub epoch: u64,
    pub buf: LiveBuf,
    pub state: LiveState,
    /// The run's generation and liveness when the stream was opened (a resume or a restart
    /// reopens it).
    pub run_generation: u64,
    pub run_live: bool,
}

/// Where an attach stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachFrom {
    /// Fetch the screen, then stream from its seq + 1 (PTY runs).
    Snapshot,
    /// Stream from this seq.
    Seq(u64),
}

/// Why a request was made: where its answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallTag {
    Action { action: Action, run: String },
    Prompt(PromptFor),
    Resize { run: String, rows: u16, cols: u16 },
}

/// A request to the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub tag: CallTag,
    pub method: Method,
    pub path: String,
    pub body: Option<Value>,
}

/// What the event loop must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Call(Call),
    /// (Re)open the live stream of a run; any other stream stops.
    Attach {
        run: String,
        epoch: u64,
        pty: bool,
        from: AttachFrom,
    },
    /// Stop the live stream.
    Detach,
    /// Typed bytes for the attached session, in order.
    Type {
        run: String,
        text: String,
    },
    /// Poll the list (and the focused run's events) now.
    Refresh,
    /// The run whose events the data task fetches.
    WatchEvents(Option<String>),
    /// What the evidence task fetches besides its lists.
    WatchView(ViewWatch),
    /// Verify these receipts (one after the other).
    Verify(Vec<ReceiptItem>),
    /// Start the approval flow of an intent (on its own thread).
    Approve {
        intent: String,
    },
}

/// One event of a live stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveEvent {
    Screen {
        rows: u16,
        cols: u16,
        formatted: String,
        seq: u64,
    },
    /// (seq, stderr, bytes).
    Output(Vec<(u64, bool, Vec<u8>)>),
    Lag {
        first_available: u64,
    },
    End(String),
    NotLive(String),
    Error(String),
    Connected,
}

/// What the tasks tell the cockpit.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    Runs(Result<RunsPage, String>),
    Events {
        run: String,
        result: Result<Vec<EventItem>, String>,
    },
    Live {
        epoch: u64,
        ev: LiveEvent,
    },
    CallDone {
        tag: CallTag,
        result: Result<Value, String>,
    },
    TypeFailed(String),
    /// Every bound candidate.
    Candidates(Result<Vec<CandidateView>, String>),
    /// One candidate's gate.
    Gate {
        candidate: String,
        result: Result<GateView, String>,
    },
    Intents(Result<Vec<IntentView>, String>),
    Receipts(Result<Vec<ReceiptItem>, String>),
    Verified {
        id: String,
        verification: Verification,
    },
    Approval(ApprovalEvent),
}

/// The whole state.
pub struct App {
    pub host: String,
    pub home_label: String,
    pub who: Option<WhoAmI>,
    pub keymap: Keymap,
    pub theme: Theme,

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
    pub list_offset: usize,
    pub show_archived: bool,
    pub show_snoozed: bool,
    pub filter: TextInput,

    pub tab: Tab,
    pub focus: Pane,
    pub zoomed: bool,
    pub mode: Mode,
    pub status: Option<Status>,

    pub live: Option<LiveSlot>,
    cache: VecDeque<LiveSlot>,
    next_epoch: u64,
    pub events: Option<(String, Vec<EventItem>)>,
    pub events_scroll: usize,

    /// The live pane's inner size at the last frame (what the PTY should be).
    pub live_inner: Rect,
    /// Where each pane was drawn at the last frame (for the mouse).
    pub areas: super::ui::Areas,
    pub list_rows: usize,
    pub events_rows: usize,
    /// The last resize asked for (run, rows, cols): not asked again.
    pub resize_sent: Option<(String, u16, u16)>,

    /// The profiles the new-session form offers, and the folder it proposes.
    pub profiles: Vec<String>,
    pub workspace: String,
    /// The cockpit's PATH, sent with a start so the server finds the tools this shell finds.
    pub client_path: Option<String>,

    /// The latest bound candidate of each run, and the gates heard of (by candidate).
    pub candidates: BTreeMap<String, CandidateView>,
    pub gates: HashMap<String, Result<GateView, String>>,
    pub evidence_error: Option<String>,
    /// The candidate the Gate view shows when chosen explicitly (from an intent); otherwise
    /// it follows the focused run.
    pub gate_for: Option<String>,
    pub gate_scroll: usize,
    pub gate_rows: usize,
    /// Publication intents, newest first.
    pub intents: Option<Result<Vec<IntentView>, String>>,
    pub intent_selected: Option<String>,
    pub intent_offset: usize,
    /// Receipts, newest first, and what verifying them said.
    pub receipts: Option<Result<Vec<ReceiptItem>, String>>,
    pub receipt_selected: Option<String>,
    pub receipt_offset: usize,
    pub verifications: HashMap<String, VerifyState>,
    pub page_rows: usize,
    /// The operator's publish key (the approval dialog decrypts it).
    pub key_path: Option<PathBuf>,
    /// A home `proctor demo` prepared: with no key, `P` offers a throwaway demo key.
    pub demo_key_offer: bool,
    last_watch: Option<ViewWatch>,

    /// The terminal draws ASCII only (`TERM=linux`, `vt…`): every frame goes through
    /// [`super::term::asciify`].
    pub ascii: bool,
    /// Tests only: a key that makes the cockpit panic (`proctor demo --test-panic-on-key`).
    pub test_panic_key: Option<char>,

    pub now: DateTime<Utc>,
    pub quit: bool,
    pub dirty: bool,
    effects: Vec<Effect>,
}

impl App {
    pub fn new(host: String, home_label: String, keymap: Keymap, theme: Theme) -> App {
        App {
            host,
            home_label,
            who: None,
            keymap,
            theme,
            runs: Vec::new(),
            total: 0,
            counts: Counts::default(),
            loaded: false,
            server_error: None,
            view: Vec::new(),
            selected: None,
            chosen: None,
            list_offset: 0,
            show_archived: false,
            show_snoozed: false,
            filter: TextInput::default(),
            tab: Tab::Sessions,
            focus: Pane::Sessions,
            zoomed: false,
            mode: Mode::Normal,
            status: None,
            live: None,
            cache: VecDeque::new(),
            next_epoch: 0,
            events: None,
            events_scroll: 0,
            live_inner: Rect::default(),
            areas: super::ui::Areas::default(),
            list_rows: 10,
            events_rows: 5,
            resize_sent: None,
            profiles: crate::providers::Tool::ALL
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
            workspace: String::new(),
            client_path: None,
            candidates: BTreeMap::new(),
            gates: HashMap::new(),
            evidence_error: None,
            gate_for: None,
            gate_scroll: 0,
            gate_rows: 10,
            intents: None,
            intent_selected: None,
            intent_offset: 0,
            receipts: None,
            receipt_selected: None,
            receipt_offset: 0,
            verifications: HashMap::new(),
            page_rows: 10,
            key_path: None,
            demo_key_offer: false,
            last_watch: None,
            ascii: false,
            test_panic_key: None,
            now: Utc::now(),
            quit: false,
            dirty: true,
            effects: Vec::new(),
        }
    }

    /// The effects queued since the last call.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn push(&mut self, e: Effect) {
        self.effects.push(e);
    }

    // ---------------------------------------------------------------------------------
    // What the caller may do
    // ---------------------------------------------------------------------------------

    /// Whether the caller's token may perform `action`. Unknown role (an older server):
    /// allowed, and the server's answer says otherwise.
    pub fn can(&self, action: Action) -> bool {
        let Some(who) = &self.who else {
            return true;
        };
        let need = match action.needs() {
            Needs::Read => TokenRole::Read,
            Needs::Write => TokenRole::Write,
            Needs::Admin => TokenRole::Admin,
        };
        who.role >= need && !(action == Action::Approve && who.principal == Principal::Agent)
    }

    /// Why the token cannot perform `action`, for the palette and the status line.
    pub fn refusal(&self, action: Action) -> Option<String> {
        if self.can(action) {
            return None;
        }
        if action == Action::Approve
            && self
                .who
                .as_ref()
                .is_some_and(|w| w.principal == Principal::Agent)
        {
            return Some("an agent token cannot authorise a publication: a person's".into());
        }
        super::widgets::palette::token_refusal(action, self.granted())
    }

    /// The most a token of this role may do.
    fn granted(&self) -> Needs {
        match self.who.as_ref().map(|w| w.role) {
            Some(TokenRole::Read) => Needs::Read,
            Some(TokenRole::Write) => Needs::Write,
            _ => Needs::Admin,
        }
    }

    fn refuse(&mut self, action: Action) {
        if action == Action::Approve
            && self
                .who
                .as_ref()
                .is_some_and(|w| w.principal == Principal::Agent)
        {
            self.error(
                "approve-publication needs a person's token: an agent identity cannot authorise \
                 a publication (set PROCTOR_TOKEN to a person's write token)",
            );
            return;
        }
        let role = self.who.as_ref().map_or("?", |w| w.role.as_str());
        let need = match action.needs() {
            Needs::Read => "read",
            Needs::Write => "write",
            Needs::Admin => "admin",
        };
        self.error(format!(
            "{} needs the {need} role; this token has {role} (set PROCTOR_TOKEN to a token \
             with that role)",
            action.name()
        ));
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            tone: Tone::Info,
            text: text.into(),
        });
    }

    pub fn success(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            tone: Tone::Success,
            text: text.into(),
        });
    }

    /// An error in place. Untrusted parts (server messages) are sanitised here.
    pub fn error(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            tone: Tone::Error,
            text: text::one_line(&text.into(), 500),
        });
    }

    // ---------------------------------------------------------------------------------
    // The list
    // ---------------------------------------------------------------------------------

    /// The selected run.
    pub fn selected_run(&self) -> Option<&RunView> {
        let r = self.selected.as_deref()?;
        self.runs.iter().find(|x| x.run_ref == r)
    }

    /// Takes a new list from the server. `view` holds indices into the old list, so the
    /// selection's row is found before the list is replaced: a run that disappeared (deleted
    /// here or by another client) hands the selection to the run now in its row.
    fn replace_runs(&mut self, items: Vec<RunView>) {
        let old_pos = self.selected_index();
        self.runs = items;
        self.view.clear();
        self.refilter_from(old_pos);
    }

    /// Recomputes the visible list: archived hidden (toggle), snoozed hidden until due
    /// (toggle), the filter (ref, name, tool, profile, state, worktree branch;
    /// case-insensitive); pinned first, then by recent activity.
    pub fn refilter(&mut self) {
        let old_pos = self.selected_index();
        self.refilter_from(old_pos);
    }

    /// [`App::refilter`], `old_pos` being the selection's row before the change (`view` may
    /// no longer index `runs`: only this row is used).
    fn refilter_from(&mut self, old_pos: Option<usize>) {
        let needle = self.filter.value().to_lowercase();
        let now = self.now;
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
        let shown = |app: &App, s: &str| app.view.iter().any(|&i| app.runs[i].run_ref == s);
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
        self.sync_focus();
        self.dirty = true;
    }

    /// The position of the selection in the visible list.
    pub fn selected_index(&self) -> Option<usize> {
        let s = self.selected.as_deref()?;
        self.view
            .iter()
            .position(|&i| self.runs.get(i).is_some_and(|r| r.run_ref == s))
    }

    fn select_index(&mut self, i: usize) {
        if self.view.is_empty() {
            return;
        }
        // Moving in the list: the Gate view follows the focused run again.
        self.gate_for = None;
        let i = i.min(self.view.len() - 1);
        self.selected = Some(self.runs[self.view[i]].run_ref.clone());
        self.chosen.clone_from(&self.selected);
        self.sync_focus();
        self.dirty = true;
    }

    fn move_selection(&mut self, delta: isize) {
        let cur = self.selected_index().unwrap_or(0) as isize;
        let n = self.view.len() as isize;
        if n == 0 {
            return;
        }
        self.select_index((cur + delta).clamp(0, n - 1) as usize);
    }

    // ---------------------------------------------------------------------------------
    // The live view of the selected run
    // ---------------------------------------------------------------------------------

    /// Makes the live slot follow the selected run: reuses a cached terminal (streaming
    /// from where it stopped when the server still holds that output), or opens a new one.
    /// A resume (new generation) or a run that became live reopens the stream.
    pub fn sync_focus(&mut self) {
        self.sync_live();
        self.watch_view();
    }

    /// The candidate the Gate view shows: the one chosen from an intent or a receipt, else
    /// the focused run's latest.
    pub fn gate_candidate(&self) -> Option<String> {
        if let Some(c) = &self.gate_for {
            return Some(c.clone());
        }
        let run = self.selected.as_deref()?;
        self.candidates.get(run).map(|c| c.id.clone())
    }

    /// Tells the evidence task what the current view needs, when that changed.
    fn watch_view(&mut self) {
        let w = ViewWatch {
            receipts: self.tab == Tab::Receipts,
            gate: if self.tab == Tab::Gate {
                self.gate_candidate()
            } else {
                None
            },
        };
        if self.last_watch.as_ref() != Some(&w) {
            self.last_watch = Some(w.clone());
            self.push(Effect::WatchView(w));
        }
    }

    /// Shows a view; its first pane takes the focus.
    pub fn show_tab(&mut self, tab: Tab) {
        self.dirty = true;
        if self.tab != tab {
            self.tab = tab;
            self.zoomed = false;
            self.gate_scroll = 0;
        }
        self.focus = tab.panes()[0];
        self.watch_view();
    }

    /// The intents, newest first (empty before the first answer).
    pub fn intent_list(&self) -> &[IntentView] {
        match &self.intents {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }

    /// The selected intent: the one chosen, else the newest.
    pub fn selected_intent(&self) -> Option<&IntentView> {
        let list = self.intent_list();
        self.intent_selected
            .as_deref()
            .and_then(|id| list.iter().find(|i| i.id == id))
            .or_else(|| list.first())
    }

    /// How many intents await a person's authority.
    pub fn awaiting_authority(&self) -> usize {
        self.intent_list().iter().filter(|i| i.awaiting()).count()
    }

    /// The receipts, newest first.
    pub fn receipt_list(&self) -> &[ReceiptItem] {
        match &self.receipts {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }

    pub fn selected_receipt(&self) -> Option<&ReceiptItem> {
        let list = self.receipt_list();
        self.receipt_selected
            .as_deref()
            .and_then(|id| list.iter().find(|r| r.id == id))
            .or_else(|| list.first())
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

    /// Verifies `items` (marked pending until their answer).
    fn verify(&mut self, items: Vec<ReceiptItem>) {
        if items.is_empty() {
            return;
        }
        for r in &items {
            self.verifications
                .insert(r.id.clone(), VerifyState::Pending);
        }
        self.push(Effect::Verify(items));
    }

    fn move_in<T>(
        list: &[T],
        id_of: impl Fn(&T) -> &str,
        current: Option<&str>,
        action: Action,
        page: usize,
    ) -> Option<String> {
        if list.is_empty() {
            return None;
        }
        let cur = current
            .and_then(|id| list.iter().position(|x| id_of(x) == id))
            .unwrap_or(0);
        let last = list.len() - 1;
        let i = match action {
            Action::Up => cur.saturating_sub(1),
            Action::Down => (cur + 1).min(last),
            Action::PageUp => cur.saturating_sub(page.max(1)),
            Action::PageDown => (cur + page.max(1)).min(last),
            Action::Top => 0,
            _ => last,
        };
        Some(id_of(&list[i]).to_string())
    }

    fn sync_live(&mut self) {
        let want = self.selected_run().map(|r| {
            (
                r.tool.clone(),
                r.run_ref.clone(),
                r.is_pty(),
                r.generation,
                r.state().is_live(),
                r.output.as_ref().map_or(1, |o| o.first_seq.max(1)),
            )
        });
        let Some((tool, run, pty, generation, live, first_seq)) = want else {
            if let Some(old) = self.live.take() {
                self.park(old);
                self.push(Effect::Detach);
                self.push(Effect::WatchEvents(None));
            }
            self.events = None;
            return;
        };
        if let Some(slot) = &self.live
            && slot.run == run
        {
            let reopen = slot.run_generation != generation || (live && !slot.run_live);
            if reopen {
                let epoch = self.bump_epoch();
                if let Some(slot) = &mut self.live {
                    slot.epoch = epoch;
                    slot.state = LiveState::Connecting;
                    slot.run_generation = generation;
                    slot.run_live = live;
                }
                let from = if pty {
                    AttachFrom::Snapshot
                } else {
                    AttachFrom::Seq(first_seq)
                };
                self.resize_sent = None;
                self.push(Effect::Attach {
                    run,
                    epoch,
                    pty,
                    from,
                });
            } else if let Some(slot) = &mut self.live {
                slot.run_live = live;
            }
            return;
        }
        if let Some(old) = self.live.take() {
            self.park(old);
        }
        if self.mode.is_attach() {
            self.mode = Mode::Normal;
        }
        let epoch = self.bump_epoch();
        let cached = self
            .cache
            .iter()
            .position(|s| s.run == run)
            .and_then(|i| self.cache.remove(i))
            .filter(|s| s.run_generation == generation);
        let (buf, from) = match cached {
            Some(s) if s.buf.seq() > 0 && s.buf.seq() + 1 >= first_seq => {
                let from = AttachFrom::Seq(s.buf.seq() + 1);
                (s.buf, from)
            }
            Some(s) => {
                let from = if pty {
                    AttachFrom::Snapshot
                } else {
                    AttachFrom::Seq(first_seq)
                };
                (s.buf, from)
            }
            None => {
                let buf = if pty {
                    let (r, c) = self.pane_size();
                    LiveBuf::Pty(Box::new(VtTerm::new(r, c)))
                } else {
                    LiveBuf::Pipe(Box::new(PipeLog::for_tool(&tool)))
                };
                let from = if pty {
                    AttachFrom::Snapshot
                } else {
                    AttachFrom::Seq(first_seq)
                };
                (buf, from)
            }
        };
        self.live = Some(LiveSlot {
            run: run.clone(),
            epoch,
            buf,
            state: LiveState::Connecting,
            run_generation: generation,
            run_live: live,
        });
        self.resize_sent = None;
        self.events = None;
        self.events_scroll = 0;
        self.push(Effect::Attach {
            run: run.clone(),
            epoch,
            pty,
            from,
        });
        self.push(Effect::WatchEvents(Some(run)));
    }

    fn bump_epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    fn park(&mut self, slot: LiveSlot) {
        self.cache.retain(|s| s.run != slot.run);
        self.cache.push_front(slot);
        self.cache.truncate(CACHED_TERMS);
    }

    /// The PTY size for the live pane: its inner rect, within the limits a run's terminal
    /// may have (a larger pane shows the run's screen in its top-left part).
    fn pane_size(&self) -> (u16, u16) {
        let r = self.live_inner;
        if r.width == 0 || r.height == 0 {
            (24, 80)
        } else {
            let s = crate::runs::TermSize {
                rows: r.height,
                cols: r.width,
            }
            .clamped();
            (s.rows, s.cols)
        }
    }

    /// The resize the PTY of the focused run needs to match the live pane, if any: only a
    /// live PTY run, with a token that may resize, and not one already asked for.
    pub fn desired_resize(&self) -> Option<(String, u16, u16)> {
        let run = self.selected_run()?;
        if !run.is_pty() || !run.state().is_live() || !self.can(Action::Attach) {
            return None;
        }
        let slot = self.live.as_ref()?;
        if slot.run != run.run_ref || slot.state == LiveState::Connecting {
            return None;
        }
        let LiveBuf::Pty(term) = &slot.buf else {
            return None;
        };
        if self.live_inner.height == 0 || self.live_inner.width == 0 {
            return None;
        }
        let (rows, cols) = self.pane_size();
        if term.size() == (rows, cols) {
            return None;
        }
        let want = (run.run_ref.clone(), rows, cols);
        if self.resize_sent.as_ref() == Some(&want) {
            return None;
        }
        Some(want)
    }

    /// Asks the server to resize (called by the event loop once the size has settled).
    pub fn send_resize(&mut self, run: String, rows: u16, cols: u16) {
        self.resize_sent = Some((run.clone(), rows, cols));
        self.push(Effect::Call(Call {
            tag: CallTag::Resize {
                run: run.clone(),
                rows,
                cols,
            },
            method: Method::POST,
            path: format!("{RUNS}/runs/{run}/resize"),
            body: Some(json!({"rows": rows, "cols": cols})),
        }));
    }

    // ---------------------------------------------------------------------------------
    // Messages from the tasks
    // ---------------------------------------------------------------------------------

    pub fn on_msg(&mut self, msg: Msg) {
        self.dirty = true;
        match msg {
            Msg::Runs(Ok(page)) => {
                self.server_error = None;
                self.loaded = true;
                self.total = page.total;
                self.counts = page.counts;
                self.replace_runs(page.items);
            }
            Msg::Runs(Err(e)) => {
                self.server_error = Some(text::one_line(&e, 300));
            }
            Msg::Events { run, result } => {
                if self.selected.as_deref() != Some(run.as_str()) {
                    return;
                }
                match result {
                    Ok(items) => self.events = Some((run, items)),
                    Err(e) => self.error(format!("events of {run}: {e}")),
                }
            }
            Msg::Live { epoch, ev } => self.on_live(epoch, ev),
            Msg::CallDone { tag, result } => self.on_call_done(tag, result),
            Msg::TypeFailed(e) => {
                self.error(format!("typing into the session failed: {e}"));
            }
            Msg::Candidates(Ok(list)) => {
                self.evidence_error = None;
                self.candidates = ev::latest_by_run(&list);
                let live: HashSet<&str> = list.iter().map(|c| c.id.as_str()).collect();
                self.gates.retain(|id, _| live.contains(id.as_str()));
                self.watch_view();
            }
            Msg::Candidates(Err(e)) => self.evidence_error = Some(text::one_line(&e, 300)),
            Msg::Gate { candidate, result } => {
                self.gates.insert(candidate, result);
            }
            Msg::Intents(result) => {
                let old_pos = self
                    .selected_intent()
                    .and_then(|cur| self.intent_list().iter().position(|i| i.id == cur.id));
                self.intents = Some(result.map(|mut v| {
                    v.sort_by_key(|i| std::cmp::Reverse(ev::id_number(&i.id)));
                    v
                }));
                let chosen = self.intent_selected.take();
                self.intent_selected =
                    keep_in_place(self.intent_list(), |i| i.id.as_str(), chosen, old_pos);
            }
            Msg::Receipts(result) => {
                let result = result.map(|mut v| {
                    v.sort_by_key(|r| std::cmp::Reverse(ev::id_number(&r.id)));
                    v
                });
                // New receipts (and ones written since they were reserved) are verified once;
                // `v` verifies them all again.
                let fresh: Vec<ReceiptItem> = match &result {
                    Ok(items) => items
                        .iter()
                        .filter(|r| {
                            let known = self.receipt_list().iter().find(|o| o.id == r.id);
                            !self.verifications.contains_key(&r.id)
                                || known.is_some_and(|o| o != *r)
                        })
                        .cloned()
                        .collect(),
                    Err(_) => Vec::new(),
                };
                let old_pos = self
                    .selected_receipt()
                    .and_then(|cur| self.receipt_list().iter().position(|r| r.id == cur.id));
                self.receipts = Some(result);
                let chosen = self.receipt_selected.take();
                self.receipt_selected =
                    keep_in_place(self.receipt_list(), |r| r.id.as_str(), chosen, old_pos);
                self.verify(fresh);
            }
            Msg::Verified { id, verification } => {
                self.verifications
                    .insert(id, VerifyState::Done(verification));
            }
            Msg::Approval(event) => self.on_approval(event),
        }
    }

    /// What the approval flow says, for its dialog.
    fn on_approval(&mut self, event: ApprovalEvent) {
        let dialog = match &mut self.mode {
            Mode::Modal(m) => match &mut **m {
                Modal::Approval(a) => Some(a),
                _ => None,
            },
            _ => None,
        };
        match event {
            ApprovalEvent::Show(t) => {
                if let Some(a) = dialog {
                    a.show(t);
                }
            }
            ApprovalEvent::Notice(t) => {
                if let Some(a) = dialog {
                    a.notice(t);
                }
            }
            ApprovalEvent::Ask {
                field,
                prompt,
                reply,
            } => match dialog {
                Some(a) => a.ask(field, prompt, reply),
                None => {
                    reply.send(Err(crate::publish::approve::PromptError::Aborted));
                }
            },
            ApprovalEvent::Done(outcome) => {
                match dialog {
                    Some(a) => a.done(outcome),
                    None => match outcome {
                        crate::publish::approve::Outcome::Published { intent, .. } => {
                            self.success(format!("{} published", text::one_line(&intent, 20)))
                        }
                        crate::publish::approve::Outcome::Refused { code, message, .. } => {
                            self.error(format!("approval refused ({code}): {message}"))
                        }
                    },
                }
                self.push(Effect::Refresh);
            }
        }
    }

    fn on_live(&mut self, epoch: u64, ev: LiveEvent) {
        let Some(slot) = self.live.as_mut().filter(|s| s.epoch == epoch) else {
            return;
        };
        match ev {
            LiveEvent::Connected => slot.state = LiveState::Streaming,
            LiveEvent::Screen {
                rows,
                cols,
                formatted,
                seq,
            } => {
                if let LiveBuf::Pty(t) = &mut slot.buf {
                    t.load_snapshot(rows, cols, &formatted, seq);
                }
                slot.state = LiveState::Streaming;
            }
            LiveEvent::Output(frames) => {
                slot.state = LiveState::Streaming;
                for (seq, stderr, bytes) in frames {
                    match &mut slot.buf {
                        LiveBuf::Pty(t) => {
                            t.feed(&bytes);
                            t.seq = seq;
                        }
                        LiveBuf::Pipe(p) => {
                            p.feed(stderr, &bytes);
                            p.seq = seq;
                        }
                    }
                }
            }
            LiveEvent::Lag { first_available } => {
                if let LiveBuf::Pipe(p) = &mut slot.buf {
                    p.gap(&format!(
                        "output before seq {first_available} is no longer held by the server"
                    ));
                }
            }
            LiveEvent::End(what) => slot.state = LiveState::Ended(what),
            LiveEvent::NotLive(state) => slot.state = LiveState::NotLive(state),
            LiveEvent::Error(e) => slot.state = LiveState::Error(text::one_line(&e, 300)),
        }
        if self.mode.is_attach()
            && !matches!(
                self.live.as_ref().map(|s| &s.state),
                Some(LiveState::Streaming | LiveState::Connecting)
            )
        {
            self.mode = Mode::Normal;
            self.info("the session ended: back to the cockpit");
        }
    }

    fn on_call_done(&mut self, tag: CallTag, result: Result<Value, String>) {
        match tag {
            CallTag::Resize { run, rows, cols } => match result {
                Ok(_) => {
                    // Resynchronise at the new size: the server's screen, then the stream.
                    if self.live.as_ref().is_some_and(|s| s.run == run) {
                        let epoch = self.bump_epoch();
                        if let Some(slot) = &mut self.live {
                            slot.epoch = epoch;
                        }
                        self.push(Effect::Attach {
                            run,
                            epoch,
                            pty: true,
                            from: AttachFrom::Snapshot,
                        });
                    }
                }
                Err(e) => self.error(format!("resizing {run} to {cols}×{rows}: {e}")),
            },
            CallTag::Action { action, run } => {
                match result {
                    Ok(v) => self.success(done_message(action, &run, &v)),
                    Err(e) => self.error(format!("{} {run}: {e}", action.name())),
                }
                self.push(Effect::Refresh);
            }
            CallTag::Prompt(purpose) => {
                let open = match &self.mode {
                    Mode::Modal(m) => match (&**m, &purpose) {
                        (Modal::Prompt { purpose: p, .. }, _) => *p == purpose,
                        (Modal::Snooze { run, .. }, PromptFor::Snooze(r)) => run == r,
                        (Modal::NewSession { .. }, PromptFor::NewSession(_)) => true,
                        _ => false,
                    },
                    _ => false,
                };
                match result {
                    Ok(v) => {
                        if open {
                            self.mode = Mode::Normal;
                        }
                        let msg = match &purpose {
                            PromptFor::Rename(r) => format!("renamed {r}"),
                            PromptFor::SendInput(r) => format!("sent to {r}"),
                            PromptFor::Snooze(r) => match v["snoozed_until"].as_str() {
                                Some(u) => format!("{r} snoozed until {}", text::one_line(u, 40)),
                                None => format!("{r} no longer snoozed"),
                            },
                            PromptFor::NewSession(first) => {
                                let r = v["ref"].as_str().unwrap_or("?").to_string();
                                self.selected = Some(r.clone());
                                self.chosen = Some(r.clone());
                                if *first {
                                    format!(
                                        "started {}; its first prompt is typed once the tool is up",
                                        text::one_line(&r, 20)
                                    )
                                } else {
                                    format!("started {}", text::one_line(&r, 20))
                                }
                            }
                        };
                        self.success(msg);
                        self.push(Effect::Refresh);
                    }
                    Err(e) => {
                        let e = text::one_line(&e, 400);
                        let shown = open
                            && match &mut self.mode {
                                Mode::Modal(m) => match &mut **m {
                                    Modal::Prompt { dialog, busy, .. } => {
                                        *busy = false;
                                        dialog.set_error(e.clone());
                                        true
                                    }
                                    Modal::Snooze { busy, .. } => {
                                        // The picker shows its own errors only; the
                                        // server's goes to the status line.
                                        *busy = false;
                                        false
                                    }
                                    Modal::NewSession { form, busy } => {
                                        *busy = false;
                                        let field = if e.contains("workspace") {
                                            Some(Field::Workspace)
                                        } else if e.contains("profile") || e.contains("tool") {
                                            Some(Field::Profile)
                                        } else {
                                            None
                                        };
                                        form.set_error(field, e.clone());
                                        true
                                    }
                                    _ => false,
                                },
                                _ => false,
                            };
                        if !shown {
                            self.error(e);
                        }
                    }
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Terminal events
    // ---------------------------------------------------------------------------------

    pub fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Key(k) if k.kind != KeyEventKind::Release => self.on_key(k),
            Event::Paste(text) => self.on_paste(&text),
            Event::Resize(_, _) => self.dirty = true,
            Event::Mouse(m) if self.mode.is_normal() => self.on_mouse(m),
            _ => {}
        }
    }

    /// The mouse, when the operator turned it on (`mouse = true` in cockpit.toml): a click
    /// focuses a pane (and selects a session in the list), the wheel scrolls what is under
    /// it. Nothing needs it.
    fn on_mouse(&mut self, m: ratatui::crossterm::event::MouseEvent) {
        use ratatui::crossterm::event::{MouseButton, MouseEventKind};
        let pos = ratatui::layout::Position::new(m.column, m.row);
        let a = self.areas;
        let middle = if self.tab == Tab::Gate {
            Pane::Gate
        } else {
            Pane::Live
        };
        let pane = if a.zoomed {
            a.live.contains(pos).then_some(Pane::Live)
        } else if a.main.contains(pos) {
            Some(self.tab.panes()[0])
        } else if a.sessions.contains(pos) {
            Some(Pane::Sessions)
        } else if a.live.contains(pos) {
            Some(middle)
        } else if a.events.contains(pos) {
            Some(Pane::Events)
        } else {
            None
        };
        let Some(pane) = pane else { return };
        self.dirty = true;
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.focus = pane;
                if pane == Pane::Sessions {
                    // The first inner row is the column header.
                    let first = a.sessions.y + 2;
                    if m.row >= first && m.row < a.sessions.bottom().saturating_sub(1) {
                        let i = self.list_offset + usize::from(m.row - first);
                        if i < self.view.len() {
                            self.select_index(i);
                        }
                    }
                }
            }
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let up = m.kind == MouseEventKind::ScrollUp;
                let saved = self.focus;
                self.focus = pane;
                for _ in 0..if pane == Pane::Sessions { 1 } else { 3 } {
                    self.navigate(if up { Action::Up } else { Action::Down });
                }
                self.focus = saved;
            }
            _ => {}
        }
    }

    pub fn on_paste(&mut self, pasted: &str) {
        self.dirty = true;
        match &mut self.mode {
            Mode::Attach => {
                let bytes = encode_paste(pasted, self.input_modes());
                self.type_bytes(bytes);
            }
            Mode::Modal(m) => match &mut **m {
                Modal::Prompt { dialog, .. } => dialog.handle_paste(pasted),
                Modal::Palette(p) => p.handle_paste(pasted),
                Modal::Snooze { picker, .. } => picker.handle_paste(pasted),
                Modal::NewSession { form, .. } => form.handle_paste(pasted),
                // Never into the revision or the passphrase.
                Modal::Approval(a) => a.handle_paste(),
                Modal::Help(_) | Modal::Confirm { .. } => {}
            },
            Mode::Filter => {
                self.filter.insert_str(pasted);
                self.refilter();
            }
            Mode::Normal => {}
        }
    }

    /// The input modes the attached program set (application cursor, bracketed paste).
    fn input_modes(&self) -> InputModes {
        self.live_term()
            .map(|t| InputModes::of(t.screen()))
            .unwrap_or_default()
    }

    fn live_term(&self) -> Option<&VtTerm> {
        match &self.live.as_ref()?.buf {
            LiveBuf::Pty(t) => Some(&**t),
            LiveBuf::Pipe(_) => None,
        }
    }

    fn type_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let Some(run) = self.live.as_ref().map(|s| s.run.clone()) else {
            return;
        };
        // Key encodings are ASCII or UTF-8 characters: always valid text.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        self.push(Effect::Type { run, text });
    }

    /// The contexts keys are looked up in, most specific first.
    pub fn contexts(&self) -> Vec<Context> {
        match &self.mode {
            Mode::Attach => vec![Context::Attach],
            Mode::Filter => vec![Context::Filter, Context::Modal],
            Mode::Modal(m) if matches!(**m, Modal::Palette(_)) => {
                vec![Context::Palette, Context::Modal]
            }
            Mode::Modal(_) => vec![Context::Modal],
            Mode::Normal => {
                let pane = match self.focus {
                    Pane::Sessions => Context::Sessions,
                    Pane::Live => Context::Live,
                    Pane::Events => Context::Events,
                    Pane::Gate => Context::Gate,
                    Pane::Intents => Context::Intents,
                    Pane::Receipts => Context::Receipts,
                };
                vec![pane, Context::Global]
            }
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        self.dirty = true;
        if let Some(c) = self.test_panic_key
            && key.code == ratatui::crossterm::event::KeyCode::Char(c)
            && self.mode.is_normal()
        {
            panic!("a panic asked for by --test-panic-on-key (tests only)");
        }
        if self.mode.is_attach() {
            if self.keymap.is_prefix(&key) {
                self.mode = Mode::Normal;
                self.info("back in the cockpit (the session keeps running)");
            } else if let Some(bytes) = encode_key(&key, self.input_modes()) {
                self.type_bytes(bytes);
            }
            return;
        }
        // A key clears the last message.
        self.status = None;
        let contexts = self.contexts();
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Filter => {
                match self.keymap.resolve(&contexts, &key) {
                    Some(Action::Confirm) => {}
                    Some(Action::Escape) => self.filter.set(""),
                    _ => {
                        self.filter.handle_key(&key);
                        self.mode = Mode::Filter;
                    }
                }
                self.refilter();
            }
            Mode::Modal(m) => self.on_modal_key(*m, &key, &contexts),
            Mode::Normal => {
                if let Some(a) = self.keymap.resolve(&contexts, &key) {
                    self.dispatch(a);
                }
            }
            Mode::Attach => {}
        }
    }

    fn open(&mut self, m: Modal) {
        self.mode = Mode::Modal(Box::new(m));
    }

    /// A key for the open dialog (the mode is `Normal` while this runs; the dialog is put
    /// back unless it closed).
    fn on_modal_key(&mut self, m: Modal, key: &KeyEvent, contexts: &[Context]) {
        match m {
            Modal::Approval(mut a) => match a.handle_key(key) {
                Step::Continue => self.open(Modal::Approval(a)),
                Step::Close => {}
            },
            Modal::Help(mut h) => {
                if h.handle_key(key, &self.keymap) == Outcome::Continue {
                    self.open(Modal::Help(h));
                }
            }
            Modal::Palette(mut p) => match p.handle_key(key, &self.keymap) {
                Outcome::Continue => self.open(Modal::Palette(p)),
                Outcome::Cancel => {}
                Outcome::Submit(a) => self.dispatch(a),
            },
            Modal::Snooze {
                run,
                mut picker,
                busy,
            } => {
                if busy {
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::Snooze { run, picker, busy });
                    }
                    return;
                }
                match picker.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::Snooze { run, picker, busy }),
                    Outcome::Cancel => {}
                    Outcome::Submit(until) => {
                        self.push(Effect::Call(Call {
                            tag: CallTag::Prompt(PromptFor::Snooze(run.clone())),
                            method: Method::POST,
                            path: format!("{RUNS}/runs/{run}/snooze"),
                            body: Some(json!({ "until": until })),
                        }));
                        self.open(Modal::Snooze {
                            run,
                            picker,
                            busy: true,
                        });
                    }
                }
            }
            Modal::NewSession { mut form, busy } => {
                if busy {
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::NewSession { form, busy });
                    }
                    return;
                }
                match form.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::NewSession { form, busy }),
                    Outcome::Cancel => {}
                    Outcome::Submit(ns) => {
                        let mut body = json!({
                            "profile": ns.profile,
                            "workspace": ns.workspace,
                            "transport": ns.transport.name(),
                        });
                        if let Some(p) = &self.client_path {
                            body["path"] = json!(p);
                        }
                        let pty = ns.transport == crate::providers::Transport::Pty;
                        // On a PTY session the server types it once the tool is up, then
                        // Enter; on a pipe session it is the protocol's first turn.
                        let first = ns.prompt.is_some();
                        if let Some(p) = ns.prompt {
                            body["prompt"] = json!(p);
                        }
                        if pty {
                            let (r, c) = self.pane_size();
                            body["rows"] = json!(r);
                            body["cols"] = json!(c);
                        }
                        self.push(Effect::Call(Call {
                            tag: CallTag::Prompt(PromptFor::NewSession(first)),
                            method: Method::POST,
                            path: format!("{RUNS}/runs"),
                            body: Some(body),
                        }));
                        self.open(Modal::NewSession { form, busy: true });
                    }
                }
            }
            Modal::Prompt {
                purpose,
                mut dialog,
                busy,
            } => {
                if busy {
                    // Waiting for the server: only Esc (close; the request still completes).
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::Prompt {
                            purpose,
                            dialog,
                            busy,
                        });
                    }
                    return;
                }
                match dialog.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::Prompt {
                        purpose,
                        dialog,
                        busy,
                    }),
                    Outcome::Cancel => {}
                    Outcome::Submit(value) => self.submit_prompt(purpose, dialog, value),
                }
            }
            Modal::Confirm {
                action,
                run,
                mut dialog,
            } => match dialog.handle_key(key, &self.keymap) {
                Outcome::Continue => self.open(Modal::Confirm {
                    action,
                    run,
                    dialog,
                }),
                Outcome::Cancel => {}
                Outcome::Submit(()) => {
                    if let Some(call) = action_call(action, &run, None) {
                        self.info(format!("{} {run}…", action.name()));
                        self.push(Effect::Call(call));
                    }
                }
            },
        }
    }

    fn open_prompt(&mut self, purpose: PromptFor, dialog: Prompt) {
        self.open(Modal::Prompt {
            purpose,
            dialog,
            busy: false,
        });
    }

    fn submit_prompt(&mut self, purpose: PromptFor, mut dialog: Prompt, text_in: String) {
        let call = match &purpose {
            PromptFor::Rename(run) => Ok(Call {
                tag: CallTag::Prompt(purpose.clone()),
                method: Method::PUT,
                path: format!("{RUNS}/runs/{run}/name"),
                body: Some(json!({"name": text_in})),
            }),
            PromptFor::SendInput(run) => {
                if text_in.is_empty() {
                    Err("type the line to send, or esc to cancel".to_string())
                } else {
                    let run_pty = self.runs.iter().any(|r| r.run_ref == *run && r.is_pty());
                    // A PTY takes typed bytes: the line ends with Enter.
                    let text_out = if run_pty {
                        format!("{text_in}\r")
                    } else {
                        text_in.clone()
                    };
                    Ok(Call {
                        tag: CallTag::Prompt(purpose.clone()),
                        method: Method::POST,
                        path: format!("{RUNS}/runs/{run}/input"),
                        body: Some(json!({"text": text_out})),
                    })
                }
            }
            PromptFor::Snooze(_) | PromptFor::NewSession(_) => {
                Err("this dialog has its own form".to_string())
            }
        };
        match call {
            Ok(call) => {
                self.push(Effect::Call(call));
                self.open(Modal::Prompt {
                    purpose,
                    dialog,
                    busy: true,
                });
            }
            Err(e) => {
                dialog.set_error(e);
                self.open(Modal::Prompt {
                    purpose,
                    dialog,
                    busy: false,
                });
            }
        }
    }

    /// Runs an action (from a key or the palette). Write actions the token cannot perform
    /// are refused here and never sent.
    pub fn dispatch(&mut self, action: Action) {
        self.dirty = true;
        if !self.can(action) {
            self.refuse(action);
            return;
        }
        let run = self.selected_run().cloned();
        let need_run = |app: &mut App| -> Option<RunView> {
            if run.is_none() {
                app.info("no session selected");
            }
            run.clone()
        };
        match action {
            Action::Quit => self.quit = true,
            Action::Help => {
                let contexts = self.contexts();
                let granted = match self.who.as_ref().map(|w| w.role) {
                    Some(TokenRole::Read) => Needs::Read,
                    Some(TokenRole::Write) => Needs::Write,
                    _ => Needs::Admin,
                };
                let agent = self
                    .who
                    .as_ref()
                    .is_some_and(|w| w.principal == Principal::Agent);
                let h = Help::with_granted(&self.keymap, &contexts, granted, agent);
                self.open(Modal::Help(h));
            }
            Action::Palette => {
                let contexts = self.contexts();
                let granted = match self.who.as_ref().map(|w| w.role) {
                    Some(TokenRole::Read) => Needs::Read,
                    Some(TokenRole::Write) => Needs::Write,
                    _ => Needs::Admin,
                };
                let mut p = Palette::new(&self.keymap, &contexts, granted);
                if self.selected_run().is_none() {
                    for a in RUN_ACTIONS {
                        p.set_unavailable(a, "no session selected");
                    }
                }
                if let Some(why) = self.refusal(Action::Approve) {
                    p.set_unavailable(Action::Approve, why);
                } else if let Err(why) = self.approve_target() {
                    p.set_unavailable(Action::Approve, why);
                }
                p.set_unavailable(Action::Palette, "the palette is open");
                self.open(Modal::Palette(p));
            }
            Action::Filter => {
                if !matches!(self.tab, Tab::Sessions | Tab::Gate) {
                    self.show_tab(Tab::Sessions);
                }
                self.mode = Mode::Filter;
                self.focus = Pane::Sessions;
            }
            Action::Escape => {
                let first = self.tab.panes()[0];
                if self.zoomed {
                    self.zoomed = false;
                } else if !self.filter.is_empty() {
                    self.filter.set("");
                    self.refilter();
                } else if self.focus != first {
                    self.focus = first;
                } else if self.tab != Tab::Sessions {
                    self.show_tab(Tab::Sessions);
                }
            }
            Action::FocusNext | Action::FocusPrev => {
                if self.zoomed {
                    return;
                }
                // The Gate view of a narrow screen has no events pane.
                let narrow_gate = self.tab == Tab::Gate && self.areas.events.is_empty();
                let order: Vec<Pane> = self
                    .tab
                    .panes()
                    .iter()
                    .copied()
                    .filter(|p| !(narrow_gate && *p == Pane::Events))
                    .collect();
                let n = order.len();
                let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
                let j = if action == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = order[j];
            }
            Action::ViewSessions => self.show_tab(Tab::Sessions),
            Action::ViewIntents => self.show_tab(Tab::Intents),
            Action::ViewReceipts => self.show_tab(Tab::Receipts),
            Action::ViewGate => {
                // From an intent or a receipt: that candidate; else the focused run's.
                let chosen = match self.tab {
                    Tab::Intents => self.selected_intent().map(|i| i.candidate.id.clone()),
                    Tab::Receipts => self
                        .selected_receipt()
                        .and_then(|r| r.subject.clone())
                        .filter(|s| crate::evidence::valid_id(s, "cand-")),
                    _ => None,
                };
                if chosen.is_some() {
                    self.gate_for = chosen;
                }
                self.show_tab(Tab::Gate);
            }
            Action::Verify => {
                let all = self.receipt_list().to_vec();
                if all.is_empty() {
                    self.info("no receipts to verify (4 shows them)");
                } else {
                    self.info(format!("verifying {} receipt(s)…", all.len()));
                    self.verify(all);
                }
            }
            Action::Approve => match self.approve_target() {
                Err(why) => self.info(why),
                Ok(intent) => {
                    match &self.key_path {
                        Some(p) if p.exists() || self.demo_key_offer => {}
                        Some(p) => {
                            self.error(format!(
                                "no publish key at {}: create it with `proctor key generate`, then \
                                 `proctor key register` (admin)",
                                p.display()
                            ));
                            return;
                        }
                        None => {
                            self.error("no publish key is configured for this home");
                            return;
                        }
                    }
                    self.open(Modal::Approval(Box::new(Approval::new(intent.clone()))));
                    self.push(Effect::Approve { intent });
                }
            },
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.navigate(action),
            Action::ScrollUp => self.scroll_live(|t| t.scroll_up(1), |p| p.scroll_up(1)),
            Action::ScrollDown => self.scroll_live(|t| t.scroll_down(1), |p| p.scroll_down(1)),
            Action::ScrollTop => self.scroll_live(VtTerm::scroll_top, PipeLog::scroll_top),
            Action::ScrollBottom => self.scroll_live(VtTerm::scroll_bottom, PipeLog::scroll_bottom),
            Action::Zoom => {
                if self.tab != Tab::Sessions {
                    self.show_tab(Tab::Sessions);
                }
                if need_run(self).is_some() {
                    self.zoomed = !self.zoomed;
                    if self.zoomed {
                        self.focus = Pane::Live;
                    }
                }
            }
            Action::Attach => {
                let Some(r) = need_run(self) else { return };
                if !r.state().is_live() {
                    self.info(format!(
                        "{} is {}: nothing to attach to{}",
                        r.run_ref,
                        r.state,
                        if resumable(&r) { " (r resumes it)" } else { "" }
                    ));
                } else if !r.is_pty() {
                    self.dispatch(Action::SendInput);
                } else {
                    self.mode = Mode::Attach;
                    self.focus = Pane::Live;
                    if let Some(LiveBuf::Pty(t)) = self.live.as_mut().map(|s| &mut s.buf) {
                        t.scroll_bottom();
                    }
                }
            }
            Action::NewSession => {
                let form = NewSessionForm::new(self.profiles.clone(), &self.workspace);
                self.open(Modal::NewSession { form, busy: false });
            }
            Action::SendInput => {
                let Some(r) = need_run(self) else { return };
                if !r.state().is_live() {
                    self.info(format!("{} is {}: it takes no input", r.run_ref, r.state));
                    return;
                }
                self.open_prompt(
                    PromptFor::SendInput(r.run_ref.clone()),
                    Prompt::new(
                        format!("Send a line to {}", r.run_ref),
                        if r.is_pty() {
                            "typed into the terminal, then Enter"
                        } else {
                            "one turn for the agent"
                        },
                    ),
                );
            }
            Action::Rename => {
                let Some(r) = need_run(self) else { return };
                self.open_prompt(
                    PromptFor::Rename(r.run_ref.clone()),
                    Prompt::new(format!("Rename {}", r.run_ref), "name")
                        .with_value(r.name.as_deref().unwrap_or(""))
                        .with_validator(run_name_validator())
                        .with_hint("visible text, at most 200 characters; empty clears the name"),
                );
            }
            Action::Snooze => {
                let Some(r) = need_run(self) else { return };
                if r.snoozed_until.is_some() {
                    // Snoozed already: the same key wakes it.
                    self.push(Effect::Call(Call {
                        tag: CallTag::Prompt(PromptFor::Snooze(r.run_ref.clone())),
                        method: Method::DELETE,
                        path: format!("{RUNS}/runs/{}/snooze", r.run_ref),
                        body: None,
                    }));
                    return;
                }
                let picker =
                    SnoozePicker::new(format!("Snooze {}", r.run_ref), chrono::Local::now());
                self.open(Modal::Snooze {
                    run: r.run_ref.clone(),
                    picker,
                    busy: false,
                });
            }
            Action::Stop | Action::Cleanup | Action::Delete => {
                let Some(r) = need_run(self) else { return };
                let (title, consequence, yes) = match action {
                    Action::Stop => (
                        format!("Stop {}?", r.run_ref),
                        format!(
                            "Its process group gets SIGTERM, then SIGKILL after the server's \
                             grace. {}",
                            if resumable(&r) {
                                "The record stays; r resumes the conversation later."
                            } else {
                                "The record stays, but it cannot be resumed: the tool reported \
                                 no conversation to go back to."
                            }
                        ),
                        "Stop",
                    ),
                    Action::Cleanup => (
                        format!("Clean up {}?", r.run_ref),
                        "Its marks are dropped and its output released. Only delete remains."
                            .to_string(),
                        "Clean up",
                    ),
                    _ => (
                        format!("Delete {}?", r.run_ref),
                        "Its record and transcripts are removed for good.".to_string(),
                        "Delete",
                    ),
                };
                self.open(Modal::Confirm {
                    action,
                    run: r.run_ref.clone(),
                    dialog: Confirm::new(title, consequence, yes),
                });
            }
            Action::Interrupt | Action::Resume | Action::Pin | Action::Done | Action::Archive => {
                let Some(r) = need_run(self) else { return };
                let size = (action == Action::Resume && r.is_pty()).then(|| self.pane_size());
                if let Some(call) = action_call(action, &r.run_ref, Some((&r, size))) {
                    self.push(Effect::Call(call));
                }
            }
            Action::ToggleArchived => {
                self.show_archived = !self.show_archived;
                self.info(if self.show_archived {
                    "archived sessions shown"
                } else {
                    "archived sessions hidden"
                });
                self.refilter();
            }
            Action::ToggleSnoozed => {
                self.show_snoozed = !self.show_snoozed;
                self.info(if self.show_snoozed {
                    "snoozed sessions shown"
                } else {
                    "snoozed sessions hidden until due"
                });
                self.refilter();
            }
            Action::Refresh => self.push(Effect::Refresh),
            Action::Confirm => {}
        }
    }

    /// The intent the approve action acts on: the selected one in the Intents view; elsewhere
    /// the newest intent of the focused run that awaits authority. `Err` says why there is
    /// none.
    pub fn approve_target(&self) -> Result<String, String> {
        let it = if self.tab == Tab::Intents {
            self.selected_intent()
                .ok_or_else(|| "no publication intent yet".to_string())?
        } else {
            let run = self
                .selected
                .as_deref()
                .ok_or_else(|| "no session selected".to_string())?;
            self.intent_list()
                .iter()
                .find(|i| i.run == run && i.awaiting())
                .ok_or_else(|| {
                    // The count is the header's (one source: `awaiting_authority`).
                    match self.awaiting_authority() {
                        0 => "no publication intent awaits authority".to_string(),
                        n => format!(
                            "{n} intent{} await{} authority, none of {} (3 lists them)",
                            if n == 1 { "" } else { "s" },
                            if n == 1 { "s" } else { "" },
                            text::one_line(run, 20)
                        ),
                    }
                })?
        };
        if !it.awaiting() {
            let why = it.causes.first().map_or_else(
                || "only an intent AWAITING_AUTHORITY can be approved".to_string(),
                |c| text::one_line(c, 200),
            );
            return Err(format!(
                "{} is {}: {why}",
                text::one_line(&it.id, 20),
                it.label()
            ));
        }
        Ok(it.id.clone())
    }

    fn scroll_live(&mut self, t: impl FnOnce(&mut VtTerm), p: impl FnOnce(&mut PipeLog)) {
        match self.live.as_mut().map(|s| &mut s.buf) {
            Some(LiveBuf::Pty(term)) => t(term),
            Some(LiveBuf::Pipe(log)) => p(log),
            None => {}
        }
    }

    fn navigate(&mut self, action: Action) {
        match self.focus {
            Pane::Sessions => {
                let page = self.list_rows.max(1) as isize;
                match action {
                    Action::Up => self.move_selection(-1),
                    Action::Down => self.move_selection(1),
                    Action::PageUp => self.move_selection(-page),
                    Action::PageDown => self.move_selection(page),
                    Action::Top => self.select_index(0),
                    _ => self.select_index(usize::MAX),
                }
            }
            Pane::Live => {
                let page = usize::from(self.live_inner.height.max(2) - 1);
                match action {
                    Action::Up => self.scroll_live(|t| t.scroll_up(1), |p| p.scroll_up(1)),
                    Action::Down => self.scroll_live(|t| t.scroll_down(1), |p| p.scroll_down(1)),
                    Action::PageUp => {
                        self.scroll_live(|t| t.scroll_up(page), |p| p.scroll_up(page))
                    }
                    Action::PageDown => {
                        self.scroll_live(|t| t.scroll_down(page), |p| p.scroll_down(page))
                    }
                    Action::Top => self.scroll_live(VtTerm::scroll_top, PipeLog::scroll_top),
                    _ => self.scroll_live(VtTerm::scroll_bottom, PipeLog::scroll_bottom),
                }
            }
            Pane::Gate => {
                let page = self.gate_rows.max(1);
                self.gate_scroll = match action {
                    Action::Up => self.gate_scroll.saturating_sub(1),
                    Action::Down => self.gate_scroll + 1,
                    Action::PageUp => self.gate_scroll.saturating_sub(page),
                    Action::PageDown => self.gate_scroll + page,
                    Action::Top => 0,
                    _ => usize::MAX / 2,
                };
            }
            Pane::Intents => {
                let cur = self.selected_intent().map(|i| i.id.clone());
                if let Some(id) = Self::move_in(
                    self.intent_list(),
                    |i| i.id.as_str(),
                    cur.as_deref(),
                    action,
                    self.page_rows,
                ) {
                    self.intent_selected = Some(id);
                }
            }
            Pane::Receipts => {
                let cur = self.selected_receipt().map(|r| r.id.clone());
                if let Some(id) = Self::move_in(
                    self.receipt_list(),
                    |r| r.id.as_str(),
                    cur.as_deref(),
                    action,
                    self.page_rows,
                ) {
                    self.receipt_selected = Some(id);
                }
            }
            Pane::Events => {
                let n = self.events.as_ref().map_or(0, |e| e.1.len());
                let page = self.events_rows.max(1);
                self.events_scroll = match action {
                    Action::Up => self.events_scroll + 1,
                    Action::Down => self.events_scroll.saturating_sub(1),
                    Action::PageUp => self.events_scroll + page,
                    Action::PageDown => self.events_scroll.saturating_sub(page),
                    Action::Top => n,
                    _ => 0,
                }
                .min(n.saturating_sub(1));
            }
        }
    }
}

/// The actions that act on the selected session (unavailable in the palette without one).
const RUN_ACTIONS: [Action; 14] = [
    Action::Zoom,
    Action::Attach,
    Action::SendInput,
    Action::Interrupt,
    Action::Stop,
    Action::Resume,
    Action::Rename,
    Action::Pin,
    Action::Snooze,
    Action::Done,
    Action::Archive,
    Action::Cleanup,
    Action::Delete,
    Action::ScrollUp,
];

/// Whether resume can work for `r`, as far as the list tells: the server resumes only a
/// conversation the tool reported (`conversation_id`), and never a cleaned run.
fn resumable(r: &RunView) -> bool {
    r.conversation_id.is_some() && r.state() != super::data::RunState::Cleaned
}

/// The chosen item of a list that changed: the same item while it is listed; when it is
/// gone, the item now in its row (`old_pos`), clamped to the list; `None` for an empty list
/// or when nothing was chosen (the newest is shown selected).
fn keep_in_place<T>(
    list: &[T],
    id_of: impl Fn(&T) -> &str,
    chosen: Option<String>,
    old_pos: Option<usize>,
) -> Option<String> {
    let id = chosen?;
    if list.iter().any(|x| id_of(x) == id) {
        return Some(id);
    }
    let pos = old_pos?;
    let last = list.len().checked_sub(1)?;
    Some(id_of(&list[pos.min(last)]).to_string())
}

/// The request of a one-shot action on a run (`ctx`: the run and, for resume, the size).
fn action_call(
    action: Action,
    run: &str,
    ctx: Option<(&RunView, Option<(u16, u16)>)>,
) -> Option<Call> {
    let path = |tail: &str| format!("{RUNS}/runs/{run}{tail}");
    let r = ctx.map(|c| c.0);
    let (method, path, body) = match action {
        Action::Interrupt => (Method::POST, path("/interrupt"), None),
        Action::Stop => (Method::POST, path("/stop"), None),
        Action::Resume => {
            let body = ctx
                .and_then(|c| c.1)
                .map(|(rows, cols)| json!({"rows": rows, "cols": cols}));
            (Method::POST, path("/resume"), body)
        }
        Action::Pin => {
            let on = !r.is_some_and(|r| r.pinned);
            (
                if on { Method::POST } else { Method::DELETE },
                path("/pin"),
                None,
            )
        }
        Action::Done => {
            let on = !r.is_some_and(|r| r.done);
            (
                if on { Method::POST } else { Method::DELETE },
                path("/done"),
                None,
            )
        }
        Action::Archive => {
            let on = !r.is_some_and(|r| r.is_archived());
            (
                if on { Method::POST } else { Method::DELETE },
                path("/archive"),
                None,
            )
        }
        Action::Cleanup => (Method::POST, path("/cleanup"), None),
        Action::Delete => (Method::DELETE, path(""), None),
        _ => return None,
    };
    Some(Call {
        tag: CallTag::Action {
            action,
            run: run.to_string(),
        },
        method,
        path,
        body,
    })
}

fn done_message(action: Action, run: &str, v: &Value) -> String {
    match action {
        Action::Interrupt => format!("interrupted {run}"),
        Action::Stop => format!("stopped {run}"),
        Action::Resume => format!(
            "resumed {run} (generation {})",
            v["generation"].as_u64().unwrap_or(0)
        ),
        Action::Pin if v["pinned"] == true => format!("pinned {run}"),
        Action::Pin => format!("unpinned {run}"),
        Action::Done if v["done"] == true => format!("{run} marked done"),
        Action::Done => format!("{run} no longer done"),
        Action::Archive if v["archived_at"].is_string() => format!("archived {run}"),
        Action::Archive => format!("unarchived {run}"),
        Action::Cleanup => format!("cleaned up {run}"),
        Action::Delete => format!("deleted {run}"),
        other => format!("{} {run}", other.name()),
    }
}

#[cfg(test)]
mod tests;
