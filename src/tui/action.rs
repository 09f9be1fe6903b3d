//! Everything the operator can ask the cockpit to do. The keymap binds keys to these, the
//! command palette lists them, and the help screen describes them; nothing else invents
//! actions. The views' actions are one [`Action::View`] each, named and described by the
//! views' registry ([`super::views`]).

use super::views::Tab;

/// One cockpit action. Its `name` is what keymap files and the palette use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Quit,
    Help,
    Palette,
    Filter,
    Escape,
    FocusNext,
    FocusPrev,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Zoom,
    /// Show a view (`view-<tab>`; one per [`Tab`], in [`Tab::ALL`]'s order).
    View(Tab),
    Attach,
    NewSession,
    SendInput,
    Interrupt,
    Stop,
    Resume,
    Rename,
    Pin,
    Snooze,
    Done,
    Archive,
    Cleanup,
    Delete,
    Approve,
    ToggleArchived,
    ToggleSnoozed,
    ScrollUp,
    ScrollDown,
    ScrollTop,
    ScrollBottom,
    Confirm,
    Refresh,
    Verify,
    ToggleToolOutput,
    Permissions,
    /// Open the selected tribunal seat: its routing and its findings.
    OpenSeat,
    /// The Rigs view's actions on the selected rig.
    RigLock,
    RigUnlock,
    RigAttach,
    RigSuspend,
    RigResume,
    RigClose,
    /// The Activity view's message search: a prompt, then the matches.
    SearchMessages,
    NextMatch,
    PrevMatch,
    /// Show the selected match's text.
    OpenMessage,
}

/// What an action needs from the caller's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Needs {
    Read,
    Write,
    Admin,
}

/// The actions listed before the views'.
const BEFORE_VIEWS: [Action; 14] = [
    Action::Quit,
    Action::Help,
    Action::Palette,
    Action::Filter,
    Action::Escape,
    Action::FocusNext,
    Action::FocusPrev,
    Action::Up,
    Action::Down,
    Action::PageUp,
    Action::PageDown,
    Action::Top,
    Action::Bottom,
    Action::Zoom,
];

/// The actions listed after the views'.
const AFTER_VIEWS: [Action; 36] = [
    Action::Attach,
    Action::NewSession,
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
    Action::Approve,
    Action::ToggleArchived,
    Action::ToggleSnoozed,
    Action::ScrollUp,
    Action::ScrollDown,
    Action::ScrollTop,
    Action::ScrollBottom,
    Action::Confirm,
    Action::Refresh,
    Action::Verify,
    Action::ToggleToolOutput,
    Action::Permissions,
    Action::OpenSeat,
    Action::RigLock,
    Action::RigUnlock,
    Action::RigAttach,
    Action::RigSuspend,
    Action::RigResume,
    Action::RigClose,
    Action::SearchMessages,
    Action::NextMatch,
    Action::PrevMatch,
    Action::OpenMessage,
];

impl Action {
    /// Every action, in the palette's order: the views' in [`Tab::ALL`]'s order after
    /// `zoom`.
    pub const ALL: [Action; BEFORE_VIEWS.len() + Tab::ALL.len() + AFTER_VIEWS.len()] = {
        let mut all = [Action::Quit; BEFORE_VIEWS.len() + Tab::ALL.len() + AFTER_VIEWS.len()];
        let mut i = 0;
        while i < BEFORE_VIEWS.len() {
            all[i] = BEFORE_VIEWS[i];
            i += 1;
        }
        let mut t = 0;
        while t < Tab::ALL.len() {
            all[i] = Action::View(Tab::ALL[t]);
            i += 1;
            t += 1;
        }
        let mut a = 0;
        while a < AFTER_VIEWS.len() {
            all[i] = AFTER_VIEWS[a];
            i += 1;
            a += 1;
        }
        all
    };

    /// The name used in keymap files and the palette (kebab-case).
    pub fn name(self) -> &'static str {
        match self {
            Action::Quit => "quit",
            Action::Help => "help",
            Action::Palette => "palette",
            Action::Filter => "filter",
            Action::Escape => "escape",
            Action::FocusNext => "focus-next",
            Action::FocusPrev => "focus-prev",
            Action::Up => "up",
            Action::Down => "down",
            Action::PageUp => "page-up",
            Action::PageDown => "page-down",
            Action::Top => "top",
            Action::Bottom => "bottom",
            Action::Zoom => "zoom",
            Action::View(tab) => tab.action_name(),
            Action::Attach => "attach",
            Action::NewSession => "new-session",
            Action::SendInput => "send-input",
            Action::Interrupt => "interrupt",
            Action::Stop => "stop",
            Action::Resume => "resume",
            Action::Rename => "rename",
            Action::Pin => "pin",
            Action::Snooze => "snooze",
            Action::Done => "done",
            Action::Archive => "archive",
            Action::Cleanup => "cleanup",
            Action::Delete => "delete",
            Action::Approve => "approve-publication",
            Action::ToggleArchived => "toggle-archived",
            Action::ToggleSnoozed => "toggle-snoozed",
            Action::ScrollUp => "scroll-up",
            Action::ScrollDown => "scroll-down",
            Action::ScrollTop => "scroll-top",
            Action::ScrollBottom => "scroll-bottom",
            Action::Confirm => "confirm",
            Action::Refresh => "refresh",
            Action::Verify => "verify-receipts",
            Action::ToggleToolOutput => "toggle-tool-output",
            Action::Permissions => "permissions",
            Action::OpenSeat => "open-seat",
            Action::RigLock => "rig-lock",
            Action::RigUnlock => "rig-unlock",
            Action::RigAttach => "rig-attach",
            Action::RigSuspend => "rig-suspend",
            Action::RigResume => "rig-resume",
            Action::RigClose => "rig-close",
            Action::SearchMessages => "search-messages",
            Action::NextMatch => "next-match",
            Action::PrevMatch => "previous-match",
            Action::OpenMessage => "open-message",
        }
    }

    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What the action does, for help and the palette (a keymap file may override it).
    pub fn describe(self) -> &'static str {
        match self {
            Action::Quit => "quit the cockpit (sessions keep running)",
            Action::Help => "show the keys of this context",
            Action::Palette => "run any action by name",
            Action::Filter => "filter the sessions list",
            Action::Escape => "close, cancel or clear",
            Action::FocusNext => "focus the next pane",
            Action::FocusPrev => "focus the previous pane",
            Action::Up => "select the previous item",
            Action::Down => "select the next item",
            Action::PageUp => "move a page up",
            Action::PageDown => "move a page down",
            Action::Top => "go to the first item",
            Action::Bottom => "go to the last item",
            Action::Zoom => "zoom the live terminal to the full screen, or back",
            Action::View(tab) => tab.describe(),
            Action::Attach => "type into the session (the prefix key comes back)",
            Action::NewSession => "start a new session",
            Action::SendInput => "send a line of input to the session",
            Action::Interrupt => "interrupt the current turn (the process stays)",
            Action::Stop => "stop the session (TERM, then KILL)",
            Action::Resume => "resume the stored conversation in a new process",
            Action::Rename => "rename the session",
            Action::Pin => "pin or unpin the session (for you)",
            Action::Snooze => "snooze the session until a time (for you)",
            Action::Done => "mark the session done, or not (for you)",
            Action::Archive => "archive or unarchive the session (for everyone)",
            Action::Cleanup => "release a stopped session (admin)",
            Action::Delete => "delete a cleaned session (admin)",
            Action::Approve => {
                "authorise the selected intent: type its full revision, then your passphrase"
            }
            Action::ToggleArchived => "show or hide archived sessions",
            Action::ToggleSnoozed => "show or hide snoozed sessions",
            Action::ScrollUp => "scroll the live terminal back",
            Action::ScrollDown => "scroll the live terminal forward",
            Action::ScrollTop => "scroll to the oldest line kept",
            Action::ScrollBottom => "follow the live output again",
            Action::Confirm => "confirm",
            Action::Refresh => "reload from the server now",
            Action::Verify => "verify every receipt again now",
            Action::ToggleToolOutput => {
                "show or hide each tool call's output under its line (pipe sessions)"
            }
            Action::Permissions => {
                "answer what a session's tool asks permission for (allow / deny)"
            }
            Action::OpenSeat => {
                "open the selected seat: the rungs tried, the one that sat, its findings"
            }
            Action::RigLock => {
                "take the selected rig's control lock: agents' actions on it are refused (a person's)"
            }
            Action::RigUnlock => "release the selected rig's control lock",
            Action::RigAttach => {
                "attach to the selected rig's terminal (`proctor rig attach`; the cockpit comes back)"
            }
            Action::RigSuspend => "suspend the selected rig (a VM keeps its memory)",
            Action::RigResume => "resume the selected suspended rig",
            Action::RigClose => {
                "close the selected rig: its engine ends, its disk changes are dropped"
            }
            Action::SearchMessages => {
                "search the focused session's messages (its tool's own transcript)"
            }
            Action::NextMatch => "select the next message found",
            Action::PrevMatch => "select the previous message found",
            Action::OpenMessage => "show the selected message's text",
        }
    }

    /// The least role the action needs; with a lesser token it is shown as unavailable
    /// and never attempted.
    pub fn needs(self) -> Needs {
        match self {
            Action::NewSession
            | Action::SendInput
            | Action::Attach
            | Action::Interrupt
            | Action::Stop
            | Action::Resume
            | Action::Rename
            | Action::Archive
            | Action::Approve
            | Action::Permissions
            | Action::RigLock
            | Action::RigUnlock
            | Action::RigAttach
            | Action::RigSuspend
            | Action::RigResume
            | Action::RigClose => Needs::Write,
            Action::Cleanup | Action::Delete => Needs::Admin,
            _ => Needs::Read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for a in Action::ALL {
            assert!(seen.insert(a.name()), "{} twice", a.name());
            assert_eq!(Action::from_name(a.name()), Some(a));
            assert!(!a.describe().is_empty());
        }
        assert_eq!(Action::from_name("merge"), None);
    }
}
