//! The cockpit's views and panes, registered in one place.
//!
//! A view is a tab (its key shows it) made of panes. Each pane's state and keys are its own
//! part of the app (`src/tui/app/<pane>.rs`: what it holds, `navigate` for its keys,
//! `lay_out` for the scroll that keeps its selection in view, and its [`Feed`]: what it
//! fetches, at which pace, and how it takes the answer), and its drawing its own file
//! (`src/tui/ui/<pane>.rs`, from `&App`). This file is where they are registered: the tab's
//! title, the name and description of its action ([`Action::View`]), its panes and how its
//! body is laid out; each pane's keymap context ([`Context::Pane`]: its name and help title)
//! and status-bar hints; and which part gets a pane's keys, lays it out, draws it and takes
//! its data. The actions, the keymap, the palette, help, the status bar, `App`, `Msg` and the
//! event loop read this registry and name no view. Adding a view is its own files, its
//! entries here, its part's field on `App`, and its default keys in `assets/keymap.toml`
//! (`docs/cockpit.md`, "Adding a view").

use std::any::Any;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use ratatui::buffer::Buffer;

use crate::client::{Client, ClientError};
use crate::tui::action::Action;
use crate::tui::app::{App, Msg};
use crate::tui::keymap::Context;
use crate::tui::ui::{self, Areas};

/// The top-level views, each a tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tab {
    /// The sessions list, the live terminal, the events.
    Sessions,
    /// The sessions list, the gate of the focused run's candidate, the events.
    Gate,
    /// The publication intents.
    Intents,
    /// The receipts and whether they verify.
    Receipts,
    /// The sessions list, the tribunal's seats of the focused run's candidate, the events.
    Tribunal,
    /// The rigs: their boundary, state, control lock, TTL, idle time and memory, and the
    /// selected rig's audit tail.
    Rigs,
    /// The sessions list, what the focused session's tool recorded (context, tasks, files,
    /// todos, agents) and the search of its messages, the events.
    Activity,
}

/// The panes that can hold the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pane {
    Sessions,
    Live,
    Events,
    /// The gate of the focused run's candidate (in the Gate view, where the live terminal
    /// is in the Sessions view).
    Gate,
    Intents,
    Receipts,
    /// The tribunal's seats of the focused run's latest candidate.
    Tribunal,
    /// The rigs and the selected rig's audit tail.
    Rigs,
    /// The focused session's activity and message search.
    Activity,
}

/// How a view's body is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// The sessions list and the events around this pane (the live terminal, the gate).
    Sessions(Pane),
    /// The view takes the whole body.
    Whole,
}

impl Tab {
    /// Every view, in the tab bar's order.
    pub const ALL: [Tab; 7] = [
        Tab::Sessions,
        Tab::Gate,
        Tab::Intents,
        Tab::Receipts,
        Tab::Tribunal,
        Tab::Rigs,
        Tab::Activity,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Sessions => "Sessions",
            Tab::Gate => "Gate",
            Tab::Intents => "Intents",
            Tab::Receipts => "Receipts",
            Tab::Tribunal => "Tribunal",
            Tab::Rigs => "Rigs",
            Tab::Activity => "Activity",
        }
    }

    /// The action that shows it.
    pub fn action(self) -> Action {
        Action::View(self)
    }

    /// The name of its action in keymap files and the palette (`view-<tab>`; the status bar's
    /// hint is the part after `view-`).
    pub fn action_name(self) -> &'static str {
        match self {
            Tab::Sessions => "view-sessions",
            Tab::Gate => "view-gate",
            Tab::Intents => "view-intents",
            Tab::Receipts => "view-receipts",
            Tab::Tribunal => "view-tribunal",
            Tab::Rigs => "view-rigs",
            Tab::Activity => "view-activity",
        }
    }

    /// What its action does, for help and the palette.
    pub fn describe(self) -> &'static str {
        match self {
            Tab::Sessions => "show the sessions with the live terminal",
            Tab::Gate => "show the gate of the focused run's candidate: what blocks it, and why",
            Tab::Intents => "show the publication intents",
            Tab::Receipts => "show the receipts and whether they verify",
            Tab::Tribunal => {
                "show the tribunal's seats on the focused run's candidate: who sits, their verdicts"
            }
            Tab::Rigs => {
                "show the rigs: boundary, state, who holds the control lock, TTL, memory, audit"
            }
            Tab::Activity => {
                "show what the focused session's tool recorded: context, tasks, files, todos, \
                 agents; search its messages"
            }
        }
    }

    /// The panes Tab cycles through, the first one focused when the view opens.
    pub fn panes(self) -> &'static [Pane] {
        match self {
            Tab::Sessions => &[Pane::Sessions, Pane::Live, Pane::Events],
            Tab::Gate => &[Pane::Gate, Pane::Sessions, Pane::Events],
            Tab::Intents => &[Pane::Intents],
            Tab::Receipts => &[Pane::Receipts],
            Tab::Tribunal => &[Pane::Tribunal, Pane::Sessions, Pane::Events],
            Tab::Rigs => &[Pane::Rigs],
            Tab::Activity => &[Pane::Activity, Pane::Sessions, Pane::Events],
        }
    }

    /// How its body is laid out.
    pub fn body(self) -> Body {
        match self {
            Tab::Sessions => Body::Sessions(Pane::Live),
            Tab::Gate => Body::Sessions(Pane::Gate),
            Tab::Tribunal => Body::Sessions(Pane::Tribunal),
            Tab::Activity => Body::Sessions(Pane::Activity),
            Tab::Intents | Tab::Receipts | Tab::Rigs => Body::Whole,
        }
    }
}

impl Pane {
    /// Every pane, in the order of their keymap contexts (after `[global]`).
    pub const ALL: [Pane; 9] = [
        Pane::Sessions,
        Pane::Live,
        Pane::Events,
        Pane::Gate,
        Pane::Intents,
        Pane::Receipts,
        Pane::Tribunal,
        Pane::Rigs,
        Pane::Activity,
    ];

    /// The keymap context of its keys (looked up before `[global]`).
    pub fn context(self) -> Context {
        Context::Pane(self)
    }

    /// The name of its keymap context: its table in `keymap.toml`.
    pub fn context_name(self) -> &'static str {
        match self {
            Pane::Sessions => "sessions",
            Pane::Live => "live",
            Pane::Events => "events",
            Pane::Gate => "gate",
            Pane::Intents => "intents",
            Pane::Receipts => "receipts",
            Pane::Tribunal => "tribunal",
            Pane::Rigs => "rigs",
            Pane::Activity => "activity",
        }
    }

    /// The heading of its keys on the help screen.
    pub fn context_title(self) -> &'static str {
        match self {
            Pane::Sessions => "Sessions list",
            Pane::Live => "Live terminal",
            Pane::Events => "Events",
            Pane::Gate => "Gate",
            Pane::Intents => "Publication intents",
            Pane::Receipts => "Receipts",
            Pane::Tribunal => "Tribunal seats",
            Pane::Rigs => "Rigs",
            Pane::Activity => "Activity",
        }
    }

    /// The actions the status bar offers while it has the focus, in order.
    pub fn hints(self) -> &'static [Action] {
        match self {
            Pane::Sessions => &[
                Action::Down,
                Action::Zoom,
                Action::Attach,
                Action::NewSession,
                Action::SendInput,
                Action::Stop,
                Action::Resume,
                Action::Rename,
                Action::Pin,
                Action::Snooze,
                Action::Filter,
                Action::FocusNext,
                Action::Palette,
                Action::Help,
                Action::Quit,
            ],
            Pane::Live => &[
                Action::PageUp,
                Action::ScrollUp,
                Action::ScrollBottom,
                Action::Zoom,
                Action::Attach,
                Action::FocusNext,
                Action::Help,
                Action::Quit,
            ],
            Pane::Events => &[
                Action::Up,
                Action::Down,
                Action::Bottom,
                Action::FocusNext,
                Action::Help,
                Action::Quit,
            ],
            Pane::Gate => &[
                Action::Down,
                Action::PageDown,
                Action::FocusNext,
                Action::View(Tab::Sessions),
                Action::View(Tab::Intents),
                Action::View(Tab::Receipts),
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
            Pane::Intents => &[
                Action::Down,
                Action::Approve,
                Action::View(Tab::Gate),
                Action::View(Tab::Sessions),
                Action::View(Tab::Receipts),
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
            Pane::Receipts => &[
                Action::Down,
                Action::Verify,
                Action::View(Tab::Gate),
                Action::View(Tab::Sessions),
                Action::View(Tab::Intents),
                Action::Help,
                Action::Quit,
            ],
            Pane::Tribunal => &[
                Action::Down,
                Action::OpenSeat,
                Action::FocusNext,
                Action::View(Tab::Gate),
                Action::View(Tab::Sessions),
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
            Pane::Rigs => &[
                Action::Down,
                Action::RigLock,
                Action::RigUnlock,
                Action::RigAttach,
                Action::RigSuspend,
                Action::RigResume,
                Action::RigClose,
                Action::Help,
                Action::Quit,
            ],
            Pane::Activity => &[
                Action::Down,
                Action::SearchMessages,
                Action::NextMatch,
                Action::OpenMessage,
                Action::FocusNext,
                Action::View(Tab::Sessions),
                Action::Refresh,
                Action::Help,
                Action::Quit,
            ],
        }
    }
}

/// Shows `tab` by its action: what the view takes from the one it leaves, then
/// [`App::show_tab`].
pub fn show(app: &mut App, tab: Tab) {
    if tab == Tab::Gate {
        // From an intent or a receipt: that candidate; else the focused run's.
        let chosen = match app.tab {
            Tab::Intents => app.selected_intent().map(|i| i.candidate.id.clone()),
            Tab::Receipts => app
                .selected_receipt()
                .and_then(|r| r.subject.clone())
                .filter(|s| crate::evidence::valid_id(s, "cand-")),
            _ => None,
        };
        if chosen.is_some() {
            app.gate.chosen = chosen;
        }
    }
    app.show_tab(tab);
}

/// A navigation key (up, down, a page, the top, the bottom) for `pane`: its part moves its
/// selection or scrolls.
pub fn navigate(app: &mut App, pane: Pane, action: Action) {
    match pane {
        Pane::Sessions => {
            if let Some(i) = app.sessions.target(action) {
                app.select_index(i);
            }
        }
        Pane::Live => app.live.navigate(action),
        Pane::Events => app.events.navigate(action),
        Pane::Gate => app.gate.navigate(action),
        Pane::Intents => app.intents.navigate(action),
        Pane::Receipts => app.receipts.listing.navigate(action),
        Pane::Tribunal => {
            let seats = app.tribunal_round().map_or(0, |r| r.seats.len());
            app.tribunal.navigate(action, seats);
        }
        Pane::Rigs => {
            app.rigs.navigate(action);
            app.ask_rig_audit();
        }
        Pane::Activity => app.activity_navigate(action),
    }
}

/// The view's own layout at the current size (after the areas, the live terminal's size and
/// the sessions list's scroll): the rows and scroll of its panes.
pub fn lay_out(app: &mut App, areas: Areas) {
    match app.tab {
        Tab::Sessions => {}
        Tab::Gate => app.follow_gate(ui::inner(areas.live)),
        Tab::Intents => app.intents.lay_out(areas.main),
        Tab::Receipts => app.receipts.lay_out(areas.main),
        Tab::Tribunal => {
            let seats = app.tribunal_round().map_or(0, |r| r.seats.len());
            app.tribunal.lay_out(ui::inner(areas.live), seats);
        }
        Tab::Rigs => app.rigs.lay_out(areas.main),
        Tab::Activity => app.activity.lay_out(ui::inner(areas.live)),
    }
}

/// Draws the view's body; returns the live terminal's cursor when it is shown.
pub fn draw(app: &App, areas: &Areas, buf: &mut Buffer) -> Option<(u16, u16)> {
    match app.tab.body() {
        Body::Sessions(middle) => {
            if !areas.zoomed {
                ui::sessions::draw(app, areas.sessions, buf);
                if !areas.events.is_empty() {
                    ui::events::draw(app, areas.events, buf);
                }
            }
            match middle {
                Pane::Gate => {
                    ui::gate::draw(app, areas.live, buf);
                    None
                }
                Pane::Tribunal => {
                    ui::tribunal::draw(app, areas.live, buf);
                    None
                }
                Pane::Activity => {
                    ui::activity::draw(app, areas.live, buf);
                    None
                }
                _ => ui::live::draw(app, areas.live, areas.zoomed, buf),
            }
        }
        Body::Whole => {
            match app.tab {
                Tab::Intents => ui::intents::draw(app, areas.main, buf),
                Tab::Receipts => ui::receipts::draw(app, areas.main, buf),
                Tab::Rigs => ui::rigs::draw(app, areas.main, buf),
                Tab::Sessions | Tab::Gate | Tab::Tribunal | Tab::Activity => {}
            }
            None
        }
    }
}

/// How often a view's data is fetched (by the evidence task, one round at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// At every round: the quiet pace (every 5 s), at once after an action or a refresh.
    Always,
    /// Only while its view is shown; at once when the view opens.
    WhileShown,
}

/// A view's data: what its part fetches, at which pace, and how it takes the answer. The
/// event loop fetches every registered feed ([`feed`]) the same way and hands the answer back
/// as [`Msg::Feed`]; `App`, `Msg` and the event loop know no feed by name.
pub trait Feed {
    /// The pane whose part it is.
    const PANE: Pane;
    /// When it is fetched.
    const PACE: Pace;
    /// The answer, read as the contract's types (compared with the last one taken: an
    /// unchanged answer is not taken again and draws nothing).
    type Answer: Clone + PartialEq + Send + Sync + 'static;
    /// Fetches it (carried out by the event loop, never by the state).
    fn fetch(client: &Client) -> impl Future<Output = Result<Self::Answer, ClientError>> + Send;
    /// Takes the answer (an error: what the server said); may queue effects on `app`.
    fn take(app: &mut App, answer: Result<Self::Answer, String>);
}

/// A feed's answer on its way from the event loop to its part (it holds the feed's
/// `Result<Answer, String>`).
#[derive(Clone)]
pub struct FeedAnswer(Arc<dyn Any + Send + Sync>);

impl FeedAnswer {
    pub fn new<F: Feed>(result: Result<F::Answer, String>) -> FeedAnswer {
        FeedAnswer(Arc::new(result))
    }

    fn get<F: Feed>(&self) -> Option<Result<F::Answer, String>> {
        self.0.downcast_ref::<Result<F::Answer, String>>().cloned()
    }

    /// Whether both hold the same answer of the feed `F` (the same value, not only the same
    /// allocation).
    fn same<F: Feed>(&self, other: &FeedAnswer) -> bool {
        match (
            self.0.downcast_ref::<Result<F::Answer, String>>(),
            other.0.downcast_ref::<Result<F::Answer, String>>(),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

impl std::fmt::Debug for FeedAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FeedAnswer(..)")
    }
}

impl PartialEq for FeedAnswer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Msg {
    /// The answer of the feed `F`, as the event loop sends it.
    pub fn feed<F: Feed>(result: Result<F::Answer, String>) -> Msg {
        Msg::Feed {
            pane: F::PANE,
            answer: FeedAnswer::new::<F>(result),
        }
    }
}

/// A registered feed, its type erased for the event loop.
#[derive(Clone, Copy)]
pub struct FeedEntry {
    pub pane: Pane,
    pub pace: Pace,
    /// Fetches it; an error is what the server said.
    pub fetch: for<'a> fn(&'a Client) -> BoxFuture<'a, FeedAnswer>,
    take: fn(&mut App, &FeedAnswer),
    same: fn(&FeedAnswer, &FeedAnswer) -> bool,
}

impl FeedEntry {
    fn of<F: Feed>() -> FeedEntry {
        FeedEntry {
            pane: F::PANE,
            pace: F::PACE,
            fetch: |client| {
                Box::pin(async move {
                    FeedAnswer::new::<F>(
                        F::fetch(client)
                            .await
                            .map_err(|e| super::event_loop::show(&e)),
                    )
                })
            },
            take: |app, answer| {
                if let Some(result) = answer.get::<F>() {
                    F::take(app, result);
                }
            },
            same: FeedAnswer::same::<F>,
        }
    }
}

/// The feed of `pane`'s part, if its data is one (the gate's candidates and gates, the
/// runs and the live terminal have paths of their own).
pub fn feed(pane: Pane) -> Option<FeedEntry> {
    match pane {
        Pane::Intents => Some(FeedEntry::of::<crate::tui::app::IntentsPane>()),
        Pane::Receipts => Some(FeedEntry::of::<crate::tui::app::ReceiptsPane>()),
        Pane::Tribunal => Some(FeedEntry::of::<crate::tui::app::TribunalPane>()),
        Pane::Rigs => Some(FeedEntry::of::<crate::tui::app::RigsPane>()),
        // The activity is read when the view opens and when the focused run's ledger moves
        // (`app::activity`), not at a feed's pace.
        Pane::Sessions | Pane::Live | Pane::Events | Pane::Gate | Pane::Activity => None,
    }
}

/// Every registered feed, in [`Pane::ALL`]'s order (the order of a round).
pub fn feeds() -> impl Iterator<Item = FeedEntry> {
    Pane::ALL.into_iter().filter_map(feed)
}

/// The feeds fetched only while their view is shown that `tab` shows.
pub fn shown_feeds(tab: Tab) -> Vec<Pane> {
    feeds()
        .filter(|f| f.pace == Pace::WhileShown && tab.panes().contains(&f.pane))
        .map(|f| f.pane)
        .collect()
}

/// Hands a feed's answer to its part.
pub fn take(app: &mut App, pane: Pane, answer: &FeedAnswer) {
    if let Some(f) = feed(pane) {
        (f.take)(app, answer);
    }
}

/// Whether two answers of `pane`'s feed hold the same value.
pub fn same(pane: Pane, a: &FeedAnswer, b: &FeedAnswer) -> bool {
    feed(pane).is_some_and(|f| (f.same)(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{Effect, ReceiptsPane};
    use crate::tui::evidence::ReceiptItem;
    use crate::tui::keymap::Keymap;
    use crate::tui::theme::Theme;

    /// A view's action and its panes' keymap contexts are named by the registry, and the
    /// lists built from it (the actions, the contexts) hold each once, in its order.
    #[test]
    fn the_registry_names_the_views_actions_and_the_panes_contexts() {
        let views: Vec<Action> = Action::ALL
            .into_iter()
            .filter(|a| matches!(a, Action::View(_)))
            .collect();
        assert_eq!(views, Tab::ALL.map(Tab::action).to_vec());
        let defaults = Keymap::defaults();
        for tab in Tab::ALL {
            assert_eq!(Action::from_name(tab.action_name()), Some(tab.action()));
            assert_eq!(tab.action().describe(), tab.describe());
            assert!(tab.action_name().starts_with("view-"), "{tab:?}");
            assert!(
                defaults.key_for(&[Context::Global], tab.action()).is_some(),
                "{tab:?} has no default key in [global]"
            );
            assert!(!tab.panes().is_empty(), "{tab:?} has no pane");
        }
        let panes: Vec<Context> = Context::ALL
            .into_iter()
            .filter(|c| matches!(c, Context::Pane(_)))
            .collect();
        assert_eq!(panes, Pane::ALL.map(Pane::context).to_vec());
        for pane in Pane::ALL {
            assert_eq!(
                Context::from_name(pane.context_name()),
                Some(pane.context())
            );
            assert!(!pane.hints().is_empty(), "{pane:?} has no hints");
        }
    }

    /// Every feed is registered under its own pane; the receipts are fetched only while their
    /// view is shown.
    #[test]
    fn feeds_are_registered_under_their_pane_at_their_pace() {
        for pane in Pane::ALL {
            if let Some(f) = feed(pane) {
                assert_eq!(f.pane, pane);
            }
        }
        assert_eq!(shown_feeds(Tab::Receipts), vec![Pane::Receipts]);
        assert_eq!(shown_feeds(Tab::Tribunal), vec![Pane::Tribunal]);
        assert_eq!(shown_feeds(Tab::Rigs), vec![Pane::Rigs]);
        for tab in [Tab::Sessions, Tab::Gate, Tab::Intents, Tab::Activity] {
            assert_eq!(shown_feeds(tab), Vec::<Pane>::new(), "{tab:?}");
        }
        assert_eq!(feed(Pane::Intents).map(|f| f.pace), Some(Pace::Always));
    }

    /// A feed's answer goes to its part through the one generic message: the receipts are
    /// listed and the new ones verified; an answer of another feed's type is not taken.
    #[test]
    fn a_feeds_answer_reaches_its_part() {
        let mut app = App::new(
            "local".into(),
            "home".into(),
            Keymap::defaults(),
            Theme::default_theme(),
        );
        let item: ReceiptItem =
            serde_json::from_value(serde_json::json!({"id": "rcpt-0001", "kind": "signed"}))
                .unwrap();
        app.on_msg(Msg::feed::<ReceiptsPane>(Ok(vec![item.clone()])));
        assert_eq!(app.receipt_list(), std::slice::from_ref(&item));
        assert!(
            app.take_effects()
                .iter()
                .any(|e| matches!(e, Effect::Verify(v) if *v == vec![item.clone()]))
        );
        // A mislabelled answer (the intents' type under the receipts' pane) changes nothing.
        app.on_msg(Msg::Feed {
            pane: Pane::Receipts,
            answer: FeedAnswer::new::<crate::tui::app::IntentsPane>(Ok(Vec::new())),
        });
        assert_eq!(app.receipt_list(), std::slice::from_ref(&item));
    }
}
