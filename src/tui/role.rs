//! Semantic style roles: themes colour these, widgets ask for these. No widget picks a
//! colour itself.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Ordinary text.
    Text,
    /// Secondary text: ages, sources, hints.
    Dim,
    /// Pane titles.
    Title,
    /// The border of a pane without focus.
    Border,
    /// The border of the focused pane.
    BorderFocused,
    /// The selected row.
    Selected,
    /// The header line.
    Header,
    /// The status bar.
    StatusBar,
    /// A key name in the status bar or help.
    Key,
    /// States.
    StateRunning,
    StateIdle,
    StateStarting,
    StateStopped,
    StateFailed,
    StateLost,
    StateCleaned,
    /// The demo label.
    Demo,
    /// Pinned, snoozed, done markers.
    Marker,
    /// An error message shown in place.
    Error,
    /// A warning or a confirmation prompt.
    Warning,
    /// Something that worked.
    Success,
    /// An action the token cannot perform.
    Unavailable,
    /// A modal's frame and text input.
    Modal,
    Input,
    /// A match of the filter.
    Highlight,
    /// The gate of a candidate: nothing judged these bytes yet.
    GateNotStarted,
    /// A check failed on these bytes.
    GateCheckFailed,
    /// What was recorded names other bytes or another policy.
    GateStale,
    /// Every check passed; a person has not decided. Must never look like passed: themes
    /// that style it like `gate_passed` are refused.
    GateAwaitingHuman,
    /// A person's publication authorisation for these bytes was spent.
    GatePassed,
    /// A row of a host that does not answer (a cockpit of several hosts): its state is
    /// unknown, never shown as live.
    Stale,
}

impl Role {
    pub const ALL: [Role; 31] = [
        Role::Text,
        Role::Dim,
        Role::Title,
        Role::Border,
        Role::BorderFocused,
        Role::Selected,
        Role::Header,
        Role::StatusBar,
        Role::Key,
        Role::StateRunning,
        Role::StateIdle,
        Role::StateStarting,
        Role::StateStopped,
        Role::StateFailed,
        Role::StateLost,
        Role::StateCleaned,
        Role::Demo,
        Role::Marker,
        Role::Error,
        Role::Warning,
        Role::Success,
        Role::Unavailable,
        Role::Modal,
        Role::Input,
        Role::Highlight,
        Role::GateNotStarted,
        Role::GateCheckFailed,
        Role::GateStale,
        Role::GateAwaitingHuman,
        Role::GatePassed,
        Role::Stale,
    ];

    /// The key used in theme files (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::Dim => "dim",
            Role::Title => "title",
            Role::Border => "border",
            Role::BorderFocused => "border_focused",
            Role::Selected => "selected",
            Role::Header => "header",
            Role::StatusBar => "status_bar",
            Role::Key => "key",
            Role::StateRunning => "state_running",
            Role::StateIdle => "state_idle",
            Role::StateStarting => "state_starting",
            Role::StateStopped => "state_stopped",
            Role::StateFailed => "state_failed",
            Role::StateLost => "state_lost",
            Role::StateCleaned => "state_cleaned",
            Role::Demo => "demo",
            Role::Marker => "marker",
            Role::Error => "error",
            Role::Warning => "warning",
            Role::Success => "success",
            Role::Unavailable => "unavailable",
            Role::Modal => "modal",
            Role::Input => "input",
            Role::Highlight => "highlight",
            Role::GateNotStarted => "gate_not_started",
            Role::GateCheckFailed => "gate_check_failed",
            Role::GateStale => "gate_stale",
            Role::GateAwaitingHuman => "gate_awaiting_human",
            Role::GatePassed => "gate_passed",
            Role::Stale => "stale",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }
}
