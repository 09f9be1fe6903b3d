//! The cockpit's state and what changes it: keys, answers from the server, output of the
//! focused session. Nothing here does I/O: every request is an [`Effect`] the event loop
//! ([`super::event_loop`]) carries out, and every answer comes back as a [`Msg`]. That keeps
//! the whole behaviour testable without a terminal or a server.
//!
//! `App` is composed of one part per pane, each owning its state and its keys
//! ([`SessionList`], [`LivePane`], [`EventsPane`], [`GatePane`], [`IntentsPane`],
//! [`ReceiptsPane`]), and the open dialog ([`Modal`], every one a
//! [`super::widgets::Dialog`]); it keeps what they share and routes keys and messages to
//! them. The views and panes are registered in [`super::views`]. The layout at a screen size
//! (the areas, the live terminal's size, each list's rows and scroll) is computed here,
//! before a frame is drawn ([`App::lay_out`]); drawing reads it.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use hyper::Method;
use ratatui::crossterm::event::{Event, KeyEvent, KeyEventKind};
use serde_json::Value;

use super::action::{Action, Needs};
use super::approval::ApprovalEvent;
use super::data::{EventItem, RunView, RunsPage, WhoAmI};
use super::evidence::{self as ev, CandidateView, GateView, IntentView, ReceiptItem, Verification};
use super::keymap::{Context, Keymap};
use super::keys::{InputModes, encode_key, encode_paste};
use super::theme::Theme;
use super::vt::VtTerm;
use super::widgets::approval::Approval;
use super::widgets::confirm::Confirm;
use super::widgets::duration::SnoozePicker;
use super::widgets::help::Help;
use super::widgets::new_session::{Field, NewSessionForm};
use super::widgets::palette::Palette;
use super::widgets::prompt::{Prompt, run_name_validator};
use crate::api::runs::{self as wire, MarksView, SizeBody};
use crate::auth::{Principal, Role as TokenRole};
use crate::text;

pub mod activity;
mod clock;
mod dialogs;
mod events;
mod factory;
mod gate;
mod intents;
mod layout;
mod listing;
mod live;
mod receipts;
mod rigs;
mod sessions;
mod tribunal;

pub use super::views::{Body, Pane, Tab};
pub use activity::{ActivityPane, Search};
pub use dialogs::{Modal, PromptFor};
pub use events::EventsPane;
pub use factory::FactoryGroups;
pub use gate::GatePane;
pub use intents::IntentsPane;
pub use listing::{Keyed, Listing};
pub use live::{AttachFrom, CACHED_TERMS, Followed, LiveBuf, LivePane, LiveSlot, LiveState, Want};
pub use receipts::ReceiptsPane;
pub use rigs::{AUDIT_TAIL, RigsPane};
pub use sessions::SessionList;
pub use tribunal::TribunalPane;

/// What the evidence task should fetch besides what it always fetches: the feeds of the view
/// shown that are fetched only while it is shown ([`super::views::Pace::WhileShown`]), and the
/// gate of the candidate the Gate view shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewWatch {
    pub shown: Vec<Pane>,
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

/// Why a request was made: where its answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallTag {
    Action {
        action: Action,
        run: String,
    },
    Prompt(PromptFor),
    Resize {
        run: String,
        rows: u16,
        cols: u16,
    },
    /// The run's permission requests, to ask the first open one (`quiet`: after an answer,
    /// saying nothing when none is left).
    Permissions {
        run: String,
        quiet: bool,
    },
    /// A person's answer to a permission request.
    Permit {
        run: String,
        id: String,
    },
    /// The audit tail of a rig (the Rigs view's selected one).
    RigAudit {
        rig: String,
    },
    /// The focused run's activity (the Activity view).
    Activity {
        run: String,
    },
    /// A page of a search of a run's messages (`cursor`: the page it continues from).
    Messages {
        run: String,
        query: String,
        cursor: Option<String>,
    },
}

/// A request to the server: a contract path and a contract body, serialised once here so
/// the event loop sends any of them the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub tag: CallTag,
    pub method: Method,
    pub path: String,
    pub body: Option<Value>,
}

impl Call {
    /// A call to `pattern` (a route of [`wire`]) for `run`, with a typed body.
    fn to<B: serde::Serialize>(
        tag: CallTag,
        method: Method,
        path: String,
        body: Option<&B>,
    ) -> Call {
        Call {
            tag,
            method,
            path,
            body: body.map(|b| serde_json::to_value(b).expect("a contract body serialises")),
        }
    }
}

/// An answer read as the contract's type `T` (an answer of another shape: `None`).
fn answer<T: serde::de::DeserializeOwned>(v: Value) -> Option<T> {
    serde_json::from_value(v).ok()
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
    /// Tell the person a run started waiting for them: the bell and desktop-notification
    /// escape, and the configured hook command.
    Notify(Notice),
    /// Hand the terminal to `proctor rig attach RIG` until it exits, then take it back.
    RigAttach {
        rig: String,
    },
    /// Hand the terminal to `proctor --host HOST publish approve INTENT` (its `ssh -t`: the
    /// approval runs on HOST, at a terminal there) until it exits, then take it back and
    /// show its outcome.
    ApproveRemote {
        host: String,
        intent: String,
    },
}

/// A run that started waiting for the person after the cockpit opened (what the
/// notification says, and the JSON the configured command reads on its stdin).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Notice {
    pub run: String,
    /// The run's name, if it has one.
    pub name: Option<String>,
    pub tool: String,
    /// `protocol` or `hook`.
    pub source: String,
    pub reason: String,
    pub since: String,
}

/// The cockpit's notification settings (`notify`, `notify_command` in `cockpit.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// Off: no bell, no escape, no command.
    pub enabled: bool,
    /// An argv run (no shell) with the notice's JSON on stdin.
    pub command: Option<Vec<String>>,
}

impl Default for NotifySettings {
    fn default() -> NotifySettings {
        NotifySettings {
            enabled: true,
            command: None,
        }
    }
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
    /// (seq, stream, bytes).
    Output(Vec<(u64, crate::runs::Stream, Vec<u8>)>),
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
    /// One host's list, in a cockpit of several (refs already `HOST/REF`: super::hosts).
    HostRuns {
        host: String,
        result: Result<RunsPage, String>,
    },
    /// A host's proctor version, from its probe.
    HostVersion {
        host: String,
        version: String,
    },
    /// The factory runs (`GET /v1/m/factory/runs`), polled with the runs.
    Factory(Result<Vec<crate::api::factory::FactoryRun>, String>),
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
    /// The configured notify command failed (said in the status line).
    NotifyFailed(String),
    /// Every bound candidate.
    Candidates(Result<Vec<CandidateView>, String>),
    /// One candidate's gate.
    Gate {
        candidate: String,
        result: Result<GateView, String>,
    },
    /// A view's data (its part's [`super::views::Feed`]), for its part.
    Feed {
        pane: Pane,
        answer: super::views::FeedAnswer,
    },
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

    /// The hosts of a cockpit of several (empty: one host, unchanged).
    pub hosts: super::hosts::Hosts,
    /// The views' parts, each owning its state and its keys.
    pub sessions: SessionList,
    /// The factory runs, shown as groups in the sessions list.
    pub factory: FactoryGroups,
    pub live: LivePane,
    pub events: EventsPane,
    pub gate: GatePane,
    pub intents: IntentsPane,
    pub receipts: ReceiptsPane,
    pub tribunal: TribunalPane,
    pub rigs: RigsPane,
    /// The focused run's activity and the search of its messages.
    pub activity: ActivityPane,

    pub tab: Tab,
    pub focus: Pane,
    pub zoomed: bool,
    /// Where keys go; the open dialog.
    pub mode: Mode,
    pub status: Option<Status>,

    /// Where each pane is at the current size (set by [`App::lay_out`], used for the mouse).
    pub areas: super::ui::Areas,

    /// The profiles the new-session form offers, and the folder it proposes.
    pub profiles: Vec<String>,
    pub workspace: String,
    /// The cockpit's PATH, sent with a start so the server finds the tools this shell finds.
    pub client_path: Option<String>,

    /// The operator's publish key (the approval dialog decrypts it).
    pub key_path: Option<PathBuf>,
    /// A home `proctor demo` prepared: with no key, `P` offers a throwaway demo key.
    pub demo_key_offer: bool,
    /// The host whose intents the cockpit shows and approves (the first `--host`), when it
    /// is not this machine: its approval is refused here (docs/security.md, "Remote
    /// clients": the key and the controlling terminal that approve are that host's).
    pub remote_intents_host: Option<String>,
    last_watch: Option<ViewWatch>,

    /// The terminal draws ASCII only (`TERM=linux`, `vt…`): every frame goes through
    /// [`super::term::asciify`].
    pub ascii: bool,
    /// Tests only: a key that makes the cockpit panic (`proctor demo --test-panic-on-key`).
    pub test_panic_key: Option<char>,

    /// Whether and how the cockpit tells the person a run waits for them.
    pub notify: NotifySettings,
    /// This proctor and its home flag (`[exe, "--home", DIR]`): what a rig attach runs
    /// (then `rig attach RIG`); empty: `proctor` from PATH.
    pub proctor_argv: Vec<String>,
    /// The runs seen waiting, each (ref, since); `None` before the first list, so runs
    /// already waiting when the cockpit opens are not announced.
    waiting_seen: Option<std::collections::BTreeSet<(String, String)>>,

    /// The feeds' answers last taken, by pane: an answer equal to the last one is not taken
    /// again (forgotten after an action, which may change a part's state between polls).
    feeds_taken: std::collections::HashMap<Pane, super::views::FeedAnswer>,

    /// The time of the last frame (what ages are counted against).
    pub now: DateTime<Utc>,
    pub quit: bool,
    /// Something shown changed since the last frame: the event loop draws one (at most at
    /// the frame cap). Nothing else makes it draw.
    pub dirty: bool,
    /// The focused terminal's output changed since the last frame: the event loop draws
    /// one. When `dirty` is unset, nothing else changed, and the frame may draw the live
    /// pane alone over the last one (`ui::live_alone`).
    pub live_dirty: bool,
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
            hosts: super::hosts::Hosts::default(),
            sessions: SessionList::default(),
            factory: FactoryGroups::default(),
            live: LivePane::default(),
            events: EventsPane::default(),
            gate: GatePane::default(),
            intents: IntentsPane::default(),
            receipts: ReceiptsPane::default(),
            tribunal: TribunalPane::default(),
            rigs: RigsPane::default(),
            activity: ActivityPane::default(),
            tab: Tab::Sessions,
            focus: Pane::Sessions,
            zoomed: false,
            mode: Mode::Normal,
            status: None,
            areas: super::ui::Areas::default(),
            profiles: crate::providers::Tool::ALL
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
            workspace: String::new(),
            client_path: None,
            key_path: None,
            demo_key_offer: false,
            remote_intents_host: None,
            last_watch: None,
            ascii: false,
            test_panic_key: None,
            notify: NotifySettings::default(),
            proctor_argv: Vec::new(),
            waiting_seen: None,
            feeds_taken: std::collections::HashMap::new(),
            now: Utc::now(),
            quit: false,
            dirty: true,
            live_dirty: false,
            effects: Vec::new(),
        }
    }

    /// The effects queued since the last call.
    /// Announces each run that started waiting since the last list (a new `since`): never
    /// one already waiting when the cockpit opened, never the same wait twice.
    fn note_waiting(&mut self, runs: &[RunView]) {
        let now: std::collections::BTreeSet<(String, String)> = runs
            .iter()
            .filter_map(|r| {
                r.waiting
                    .as_ref()
                    .map(|w| (r.run_ref.clone(), w.since.clone()))
            })
            .collect();
        if let Some(seen) = &self.waiting_seen
            && self.notify.enabled
        {
            for r in runs {
                let Some(w) = &r.waiting else { continue };
                if seen.contains(&(r.run_ref.clone(), w.since.clone())) {
                    continue;
                }
                self.effects.push(Effect::Notify(Notice {
                    run: r.run_ref.clone(),
                    name: r.name.clone(),
                    tool: r.tool.clone(),
                    source: match w.source {
                        crate::api::runs::WaitSource::Protocol => "protocol".into(),
                        crate::api::runs::WaitSource::Hook => "hook".into(),
                    },
                    reason: w.reason.clone(),
                    since: w.since.clone(),
                }));
            }
        }
        // A run no longer listed keeps its entry only while it is listed: the set is the
        // list's.
        self.waiting_seen = Some(now);
    }

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
        self.sessions.selected_run()
    }

    /// Takes a new list from the server. `view` holds indices into the old list, so the
    /// selection's row is found before the list is replaced: a run that disappeared (deleted
    /// here or by another client) hands the selection to the run now in its row.
    fn replace_runs(&mut self, items: Vec<RunView>) {
        let old_pos = self.sessions.selected_index();
        self.sessions.runs = items;
        self.sessions.view.clear();
        self.refilter_from(old_pos);
    }

    /// Recomputes the visible list (see [`SessionList::refilter_from`]) and follows the
    /// selection.
    pub fn refilter(&mut self) {
        let old_pos = self.sessions.selected_index();
        self.refilter_from(old_pos);
    }

    /// Whether something shown changed since the last frame.
    pub fn wants_frame(&self) -> bool {
        self.dirty || self.live_dirty
    }

    fn refilter_from(&mut self, old_pos: Option<usize>) {
        self.sessions.refilter_from(old_pos, self.now);
        self.sync_focus();
        self.dirty = true;
    }

    /// The position of the selection in the visible list.
    pub fn selected_index(&self) -> Option<usize> {
        self.sessions.selected_index()
    }

    pub(super) fn select_index(&mut self, i: usize) {
        if !self.sessions.select_index(i) {
            return;
        }
        // Moving in the list: the Gate view follows the focused run again.
        self.gate.chosen = None;
        self.sync_focus();
        self.dirty = true;
    }

    // ---------------------------------------------------------------------------------
    // The live view of the selected run
    // ---------------------------------------------------------------------------------

    /// Makes the live pane follow the selected run (see [`LivePane::follow`]), and tells
    /// the evidence task what the view needs.
    pub fn sync_focus(&mut self) {
        self.sync_live();
        self.watch_view();
        self.follow_activity();
    }

    /// The candidate the Gate view shows: the one chosen from an intent or a receipt, else
    /// the focused run's latest.
    pub fn gate_candidate(&self) -> Option<String> {
        self.gate.candidate(self.sessions.selected.as_deref())
    }

    /// Tells the evidence task what the current view needs, when that changed.
    fn watch_view(&mut self) {
        let w = ViewWatch {
            shown: super::views::shown_feeds(self.tab),
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
            self.gate.scroll = 0;
        }
        self.focus = tab.panes()[0];
        self.watch_view();
        self.ask_activity();
    }

    /// The intents, newest first (empty before the first answer).
    pub fn intent_list(&self) -> &[IntentView] {
        self.intents.items()
    }

    /// The selected intent: the one chosen, else the newest.
    pub fn selected_intent(&self) -> Option<&IntentView> {
        self.intents.current()
    }

    /// How many intents await a person's authority.
    pub fn awaiting_authority(&self) -> usize {
        self.intents.awaiting()
    }

    /// The receipts, newest first.
    pub fn receipt_list(&self) -> &[ReceiptItem] {
        self.receipts.listing.items()
    }

    pub fn selected_receipt(&self) -> Option<&ReceiptItem> {
        self.receipts.listing.current()
    }

    /// The gate state of a run's latest candidate, as last heard (see
    /// [`GatePane::run_gate`]).
    pub fn run_gate(&self, run: &str) -> Option<Result<Option<ev::GateState>, String>> {
        self.gate.run_gate(run)
    }

    /// Verifies `items` (marked pending until their answer).
    pub fn verify(&mut self, items: Vec<ReceiptItem>) {
        if items.is_empty() {
            return;
        }
        self.receipts.pending(&items);
        self.push(Effect::Verify(items));
    }

    fn sync_live(&mut self) {
        let want = self.selected_run().map(|r| Want {
            tool: r.tool.clone(),
            run: r.run_ref.clone(),
            pty: r.is_pty(),
            generation: r.generation,
            live: r.state().is_live(),
            first_seq: r.output.as_ref().map_or(1, |o| o.first_seq.max(1)),
        });
        match self.live.follow(want, &mut self.effects) {
            Followed::Nothing => self.events.items = None,
            Followed::Same => {}
            Followed::Switched => {
                if self.mode.is_attach() {
                    self.mode = Mode::Normal;
                }
                self.events.clear();
            }
        }
    }

    fn pane_size(&self) -> (u16, u16) {
        self.live.pane_size()
    }

    /// The resize the PTY of the focused run needs to match the live pane, if any: only a
    /// live PTY run, with a token that may resize, and not one already asked for.
    pub fn desired_resize(&self) -> Option<(String, u16, u16)> {
        let run = self.selected_run()?;
        if !run.is_pty() || !run.state().is_live() || !self.can(Action::Attach) {
            return None;
        }
        let slot = self.live.slot.as_ref()?;
        if slot.run != run.run_ref || slot.state == LiveState::Connecting {
            return None;
        }
        let LiveBuf::Pty(term) = &slot.buf else {
            return None;
        };
        if self.live.inner.height == 0 || self.live.inner.width == 0 {
            return None;
        }
        let (rows, cols) = self.pane_size();
        if term.size() == (rows, cols) {
            return None;
        }
        let want = (run.run_ref.clone(), rows, cols);
        if self.live.resize_sent.as_ref() == Some(&want) {
            return None;
        }
        Some(want)
    }

    /// Asks the server to resize (called by the event loop once the size has settled).
    pub fn send_resize(&mut self, run: String, rows: u16, cols: u16) {
        self.live.resize_sent = Some((run.clone(), rows, cols));
        let path = wire::at(wire::RESIZE, &run);
        self.push(Effect::Call(Call::to(
            CallTag::Resize {
                run: run.clone(),
                rows,
                cols,
            },
            Method::POST,
            path,
            Some(&SizeBody {
                rows: Some(rows),
                cols: Some(cols),
            }),
        )));
    }

    // ---------------------------------------------------------------------------------
    // Messages from the tasks
    // ---------------------------------------------------------------------------------

    /// Whether `msg` (a poll's answer, most often) would change nothing the cockpit holds:
    /// the same list, the same events, the same candidates, gate or feed as already held, or
    /// a message of a stream no longer shown. Such a message is dropped: no state is
    /// recomputed and no frame is drawn for it.
    pub fn unchanged(&self, msg: &Msg) -> bool {
        match msg {
            Msg::Runs(Ok(page)) => {
                let s = &self.sessions;
                s.loaded
                    && s.server_error.is_none()
                    && s.total == page.total
                    && s.counts == page.counts
                    && s.runs == page.items
            }
            Msg::Runs(Err(e)) => {
                self.sessions.server_error.as_deref() == Some(text::one_line(e, 300).as_str())
            }
            Msg::HostRuns { host, result } => self.hosts.unchanged(host, result),
            Msg::HostVersion { host, version } => self
                .hosts
                .list
                .iter()
                .any(|h| h.name == *host && h.version.as_deref() == Some(version.as_str())),
            Msg::Factory(answer) => match (answer, &self.factory.runs) {
                // The part keeps them sorted by id (the server's own order).
                (Ok(v), Some(Ok(held))) => v == held,
                (Err(e), Some(Err(held))) => e == held,
                _ => false,
            },
            Msg::Events { run, result } => {
                self.sessions.selected.as_deref() != Some(run.as_str())
                    || matches!(result, Ok(items) if self
                        .events
                        .items
                        .as_ref()
                        .is_some_and(|(r, held)| r == run && held == items))
            }
            Msg::Live { epoch, .. } => self.live.slot.as_ref().is_none_or(|s| s.epoch != *epoch),
            Msg::Candidates(Ok(list)) => {
                let g = &self.gate;
                g.error.is_none()
                    && ev::latest_by_run(list) == g.candidates
                    && g.gates.keys().all(|id| list.iter().any(|c| &c.id == id))
            }
            Msg::Candidates(Err(e)) => {
                self.gate.error.as_deref() == Some(text::one_line(e, 300).as_str())
            }
            Msg::Gate { candidate, result } => self.gate.gates.get(candidate) == Some(result),
            Msg::Feed { pane, answer } => self
                .feeds_taken
                .get(pane)
                .is_some_and(|held| super::views::same(*pane, held, answer)),
            Msg::CallDone { .. }
            | Msg::TypeFailed(_)
            | Msg::NotifyFailed(_)
            | Msg::Verified { .. }
            | Msg::Approval(_) => false,
        }
    }

    /// Whether `page` differs from the list the cockpit holds only in its runs' output
    /// (the ring's seqs and size, the instant of the last output, the bytes its transcript
    /// holds): what a narrating session changes at every poll.
    fn only_output_changed(&self, page: &RunsPage) -> bool {
        let s = &self.sessions;
        s.loaded
            && s.server_error.is_none()
            && s.total == page.total
            && s.counts == page.counts
            && s.runs.len() == page.items.len()
            && s.runs.iter().zip(&page.items).all(|(held, new)| {
                held.output.is_some() == new.output.is_some() && {
                    let mut masked = new.clone();
                    masked.output.clone_from(&held.output);
                    if let (Some(m), Some(h)) = (&mut masked.transcript, &held.transcript) {
                        m.bytes = h.bytes;
                    }
                    *held == masked
                }
            })
    }

    pub fn on_msg(&mut self, msg: Msg) {
        if self.unchanged(&msg) {
            return;
        }
        // A list whose runs changed only in their output is taken (the order by activity,
        // an output's instant), but draws a frame only when a row shows something else.
        if let Msg::Runs(Ok(page)) = &msg
            && self.only_output_changed(page)
        {
            let was_dirty = self.dirty;
            let before = super::ui::sessions::shown(self);
            let Msg::Runs(Ok(page)) = msg else {
                unreachable!()
            };
            self.note_waiting(&page.items);
            self.replace_runs(page.items);
            self.dirty = was_dirty || super::ui::sessions::shown(self) != before;
            return;
        }
        // Factory runs that changed only in what no row shows (a running run's provider
        // bound, counted down by the server at every poll, within the same minute) are
        // taken, but draw nothing.
        if let Msg::Factory(Ok(_)) = &msg
            && let Some(Ok(_)) = &self.factory.runs
        {
            let was_dirty = self.dirty;
            let before = super::ui::factory::lines(self, usize::MAX);
            let Msg::Factory(answer) = msg else {
                unreachable!()
            };
            self.factory.on_runs(answer);
            self.dirty = was_dirty || super::ui::factory::lines(self, usize::MAX) != before;
            return;
        }
        // New output of the focused terminal while it streams changes the live pane's
        // cells and nothing else.
        if let Msg::Live {
            epoch,
            ev: LiveEvent::Output(_),
        } = &msg
            && self
                .live
                .slot
                .as_ref()
                .is_some_and(|s| s.epoch == *epoch && matches!(s.state, LiveState::Streaming))
        {
            let Msg::Live { epoch, ev } = msg else {
                unreachable!()
            };
            self.on_live(epoch, ev);
            self.live_dirty = true;
            return;
        }
        self.dirty = true;
        match msg {
            Msg::Runs(Ok(page)) => {
                self.sessions.server_error = None;
                self.sessions.loaded = true;
                self.sessions.total = page.total;
                self.sessions.counts = page.counts;
                self.note_waiting(&page.items);
                self.replace_runs(page.items);
            }
            Msg::Runs(Err(e)) => {
                self.sessions.server_error = Some(text::one_line(&e, 300));
            }
            Msg::HostRuns { host, result } => {
                self.hosts.on_runs(&host, result, Utc::now());
                // The one list of every host; a host's staleness changes rows the merged
                // list alone would not (so the frame is drawn whatever it says).
                let merged = self.hosts.merged();
                self.on_msg(Msg::Runs(Ok(merged)));
                self.dirty = true;
            }
            Msg::HostVersion { host, version } => self.hosts.on_version(&host, version),
            Msg::Factory(answer) => self.factory.on_runs(answer),
            Msg::Events { run, result } => {
                if self.sessions.selected.as_deref() != Some(run.as_str()) {
                    return;
                }
                match result {
                    Ok(items) => {
                        self.events.items = Some((run, items));
                        // The focused run's ledger moved: its activity may have.
                        self.follow_activity();
                    }
                    Err(e) => self.error(format!("events of {run}: {e}")),
                }
            }
            Msg::Live { epoch, ev } => self.on_live(epoch, ev),
            Msg::CallDone { tag, result } => {
                // An action may change a part's state before its next poll.
                self.feeds_taken.clear();
                self.on_call_done(tag, result)
            }
            Msg::TypeFailed(e) => {
                self.error(format!("typing into the session failed: {e}"));
            }
            Msg::NotifyFailed(e) => {
                self.error(format!(
                    "the notify command failed: {}",
                    text::one_line(&e, 200)
                ));
            }
            Msg::Candidates(result) => {
                let listed = result.is_ok();
                self.gate.on_candidates(result);
                if listed {
                    self.watch_view();
                }
            }
            Msg::Gate { candidate, result } => {
                self.gate.gates.insert(candidate, result);
            }
            Msg::Feed { pane, answer } => {
                super::views::take(self, pane, &answer);
                self.feeds_taken.insert(pane, answer);
            }
            Msg::Verified { id, verification } => {
                self.receipts
                    .verifications
                    .insert(id, VerifyState::Done(verification));
            }
            Msg::Approval(event) => {
                self.feeds_taken.clear();
                self.on_approval(event)
            }
        }
    }

    fn on_live(&mut self, epoch: u64, ev: LiveEvent) {
        if self.live.on_live(epoch, ev) && self.mode.is_attach() && !self.live.streaming() {
            self.mode = Mode::Normal;
            self.info("the session ended: back to the cockpit");
        }
    }

    fn on_call_done(&mut self, tag: CallTag, result: Result<Value, String>) {
        match tag {
            CallTag::Resize { run, rows, cols } => match result {
                Ok(_) => {
                    // Resynchronise at the new size: the server's screen, then the stream.
                    if self.live.slot.as_ref().is_some_and(|s| s.run == run) {
                        let epoch = self.live.bump_epoch();
                        if let Some(slot) = &mut self.live.slot {
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
            CallTag::Permissions { run, quiet } => self.on_permissions(run, quiet, result),
            CallTag::Permit { run, id } => self.on_permit(run, id, result),
            CallTag::RigAudit { rig } => self.on_rig_audit(rig, result),
            CallTag::Activity { run } => self.on_activity(run, result),
            CallTag::Messages { run, query, cursor } => {
                self.on_messages(run, query, cursor, result)
            }
            CallTag::Action { action, run } => {
                match result {
                    Ok(v) => {
                        if rigs::rig_route(action).is_some() {
                            self.rigs.on_rig(&v);
                        }
                        self.success(done_message(action, &run, v))
                    }
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
                            // A search's pages come back as `CallTag::Messages`.
                            PromptFor::SearchMessages(r) => format!("searched {r}"),
                            PromptFor::Snooze(r) => {
                                match answer::<MarksView>(v).and_then(|m| m.snoozed_until) {
                                    Some(u) => {
                                        format!("{r} snoozed until {}", text::one_line(&u, 40))
                                    }
                                    None => format!("{r} no longer snoozed"),
                                }
                            }
                            PromptFor::NewSession(first) => {
                                let r = answer::<RunView>(v)
                                    .map_or_else(|| "?".to_string(), |v| v.run_ref);
                                // A cockpit of several hosts starts on the first one.
                                let r = match self.hosts.list.first() {
                                    Some(h) => super::hosts::join(&h.name, &r),
                                    None => r,
                                };
                                self.sessions.selected = Some(r.clone());
                                self.sessions.chosen = Some(r.clone());
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
        let middle = match self.tab.body() {
            Body::Sessions(p) => p,
            Body::Whole => Pane::Live,
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
                        let i = self.sessions.offset + usize::from(m.row - first);
                        if i < self.sessions.view.len() {
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
            Mode::Modal(m) => m.handle_paste(pasted),
            Mode::Filter => {
                self.sessions.filter.insert_str(pasted);
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
        self.live.term()
    }

    fn type_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let Some(run) = self.live.slot.as_ref().map(|s| s.run.clone()) else {
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
            Mode::Modal(m) => m.contexts().to_vec(),
            Mode::Normal => vec![self.focus.context(), Context::Global],
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
                    Some(Action::Escape) => self.sessions.filter.set(""),
                    _ => {
                        self.sessions.filter.handle_key(&key);
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
                if self.selected_rig().is_none() {
                    for a in RIG_ACTIONS {
                        p.set_unavailable(a, "no rig selected (6 lists the rigs)");
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
                if self.tab.body() == Body::Whole {
                    self.show_tab(Tab::Sessions);
                }
                self.mode = Mode::Filter;
                self.focus = Pane::Sessions;
            }
            Action::Escape => {
                let first = self.tab.panes()[0];
                if self.zoomed {
                    self.zoomed = false;
                } else if self.focus == Pane::Activity && self.activity.search.is_some() {
                    self.close_search();
                } else if !self.sessions.filter.is_empty() {
                    self.sessions.filter.set("");
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
                // The Gate and Tribunal views of a narrow screen have no events pane.
                let narrow_gate = self.tab.body() != Body::Whole && self.areas.events.is_empty();
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
            Action::View(tab) => super::views::show(self, tab),
            Action::Permissions => self.ask_permissions(run.as_ref()),
            Action::OpenSeat => self.open_seat(),
            Action::SearchMessages => self.open_search(),
            Action::NextMatch | Action::PrevMatch => self.activity_navigate(action),
            Action::OpenMessage => self.open_message(),
            Action::RigLock
            | Action::RigUnlock
            | Action::RigAttach
            | Action::RigSuspend
            | Action::RigResume
            | Action::RigClose => self.rig_action(action),
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
                Ok(intent) if self.approval_host(&intent).0.is_some() => {
                    // The approval runs on the intent's host, at a terminal there: the
                    // cockpit hands this terminal to `ssh -t` (Effect::ApproveRemote).
                    let (host, own) = self.approval_host(&intent);
                    let host = host.unwrap_or_default();
                    let (h, i) = (text::one_line(&host, 24), text::one_line(&own, 24));
                    self.open(Modal::Confirm {
                        action: Action::Approve,
                        run: intent.clone(),
                        dialog: Confirm::new(
                            format!("Approve {i} on host {h}?"),
                            format!(
                                "The intent is {h}'s: it is approved on {h}, with {h}'s publish \
                                 key, and pushed to {h}'s remote of the run's repository. The \
                                 cockpit steps aside and runs `ssh -t {h} proctor publish \
                                 approve {i}` on this terminal: you type the full revision and \
                                 the passphrase of {h}'s key there (ssh carries them; the key \
                                 is decrypted on {h} and never crosses the link). The cockpit \
                                 comes back when it ends and says how."
                            ),
                            "Approve on host",
                        ),
                    });
                }
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
                    let mut dialog = Approval::new(self.approval_host(&intent).1);
                    if self.hosts.is_multi() {
                        dialog.host = Some(crate::remote::LOCAL.to_string());
                    }
                    self.open(Modal::Approval(Box::new(dialog)));
                    self.push(Effect::Approve { intent });
                }
            },
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.navigate(action),
            Action::ScrollUp | Action::ScrollDown | Action::ScrollTop | Action::ScrollBottom => {
                self.live.navigate(action)
            }
            Action::ToggleToolOutput => self.live.toggle_tool_output(),
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
                    if let Some(LiveBuf::Pty(t)) = self.live.slot.as_mut().map(|s| &mut s.buf) {
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
                    self.push(Effect::Call(Call::to::<()>(
                        CallTag::Prompt(PromptFor::Snooze(r.run_ref.clone())),
                        Method::DELETE,
                        wire::at(wire::SNOOZE, &r.run_ref),
                        None,
                    )));
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
                self.sessions.show_archived = !self.sessions.show_archived;
                self.info(if self.sessions.show_archived {
                    "archived sessions shown"
                } else {
                    "archived sessions hidden"
                });
                self.refilter();
            }
            Action::ToggleSnoozed => {
                self.sessions.show_snoozed = !self.sessions.show_snoozed;
                self.info(if self.sessions.show_snoozed {
                    "snoozed sessions shown"
                } else {
                    "snoozed sessions hidden until due"
                });
                self.refilter();
            }
            Action::Refresh => {
                self.push(Effect::Refresh);
                self.ask_activity();
            }
            Action::Confirm => {}
        }
    }

    /// Where the intent the cockpit names `id` is approved, and its id there: `Some(host)`
    /// for a remote host (by `ssh -t HOST` on this terminal: that host's key and kernel
    /// check), `None` for this machine. In a cockpit of several hosts the intent's own host
    /// (`HOST/ID`); in a cockpit of one, that host.
    pub fn approval_host(&self, id: &str) -> (Option<String>, String) {
        if self.hosts.is_multi()
            && let Some((host, own)) = super::hosts::split(id)
        {
            let remote = (host != crate::remote::LOCAL).then(|| host.to_string());
            return (remote, own.to_string());
        }
        (self.remote_intents_host.clone(), id.to_string())
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
                .sessions
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
        if it.stale {
            let h = text::one_line(it.host.as_deref().unwrap_or("?"), 24);
            return Err(format!(
                "{} is {h}'s, and {h} does not answer: its state now is unknown (approve it \
                 once {h} is back)",
                text::one_line(&it.id, 32)
            ));
        }
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

    /// A navigation key goes to the focused pane's part (see [`super::views::navigate`]).
    fn navigate(&mut self, action: Action) {
        super::views::navigate(self, self.focus, action);
    }
}

/// The actions that act on the selected session (unavailable in the palette without one).
const RUN_ACTIONS: [Action; 15] = [
    Action::Zoom,
    Action::SearchMessages,
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

/// The actions that act on the selected rig (unavailable in the palette without one).
const RIG_ACTIONS: [Action; 6] = [
    Action::RigLock,
    Action::RigUnlock,
    Action::RigAttach,
    Action::RigSuspend,
    Action::RigResume,
    Action::RigClose,
];

/// Whether resume can work for `r`, as far as the list tells: the server resumes only a
/// conversation the tool reported (`conversation_id`), and never a cleaned run.
fn resumable(r: &RunView) -> bool {
    r.conversation_id.is_some() && r.state() != super::data::RunState::Cleaned
}

/// The item a navigation key selects in a list (by id): a row, a page, the top or the
/// bottom; `None` for an empty list.
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
    if let Some((method, template)) = rigs::rig_route(action) {
        return Some(Call::to::<()>(
            CallTag::Action {
                action,
                run: run.to_string(),
            },
            method,
            crate::api::rigs::path(template, run),
            None,
        ));
    }
    let path = |pattern: &str| wire::at(pattern, run);
    let r = ctx.map(|c| c.0);
    let (method, path, body) = match action {
        Action::Interrupt => (Method::POST, path(wire::INTERRUPT), None),
        Action::Stop => (Method::POST, path(wire::STOP), None),
        Action::Resume => {
            let body = ctx.and_then(|c| c.1).map(|(rows, cols)| SizeBody {
                rows: Some(rows),
                cols: Some(cols),
            });
            (Method::POST, path(wire::RESUME), body)
        }
        Action::Pin => {
            let on = !r.is_some_and(|r| r.pinned);
            (
                if on { Method::POST } else { Method::DELETE },
                path(wire::PIN),
                None,
            )
        }
        Action::Done => {
            let on = !r.is_some_and(|r| r.done);
            (
                if on { Method::POST } else { Method::DELETE },
                path(wire::DONE),
                None,
            )
        }
        Action::Archive => {
            let on = !r.is_some_and(|r| r.is_archived());
            (
                if on { Method::POST } else { Method::DELETE },
                path(wire::ARCHIVE),
                None,
            )
        }
        Action::Cleanup => (Method::POST, path(wire::CLEANUP), None),
        Action::Delete => (Method::DELETE, path(wire::RUN), None),
        _ => return None,
    };
    Some(Call::to(
        CallTag::Action {
            action,
            run: run.to_string(),
        },
        method,
        path,
        body.as_ref(),
    ))
}

fn done_message(action: Action, run: &str, v: Value) -> String {
    if let Some(m) = rigs::rig_done(action, run, &v) {
        return m;
    }
    let marks = || answer::<MarksView>(v.clone());
    let view = || answer::<RunView>(v.clone());
    match action {
        Action::Interrupt => format!("interrupted {run}"),
        Action::Stop => format!("stopped {run}"),
        Action::Resume => format!(
            "resumed {run} (generation {})",
            view().map_or(0, |v| v.generation)
        ),
        Action::Pin if marks().is_some_and(|m| m.pinned) => format!("pinned {run}"),
        Action::Pin => format!("unpinned {run}"),
        Action::Done if marks().is_some_and(|m| m.done) => format!("{run} marked done"),
        Action::Done => format!("{run} no longer done"),
        Action::Archive if view().is_some_and(|v| v.archived_at.is_some()) => {
            format!("archived {run}")
        }
        Action::Archive => format!("unarchived {run}"),
        Action::Cleanup => format!("cleaned up {run}"),
        Action::Delete => format!("deleted {run}"),
        other => format!("{} {run}", other.name()),
    }
}

#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod tests;
