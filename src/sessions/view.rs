//! What the session manager answers: a run as a caller sees it, a page of runs, a run's
//! events, a caller's marks, and what stop, cleanup and delete did. These are the domain's
//! own typed values; the wire contract (`crate::api::runs`) re-exports them, since their
//! shape is the wire's. Every field is always present: an absent value is `null`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::record::{Blocked, Limit, RunEvent, State, Waiting};

/// One run as a caller sees it: what it runs and where, its derived state, how it is held,
/// its worktree, its output (while this server holds it) and the caller's marks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// The run's ref, `run-0001`.
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub tool: String,
    pub profile: String,
    /// `pty` or `pipe`.
    pub transport: String,
    #[serde(default)]
    #[schema(required = true)]
    pub workspace: String,
    /// True when a provider fake backs the run: its output is a demo, not a model's.
    #[serde(default)]
    #[schema(required = true)]
    pub demo: bool,
    #[serde(default)]
    #[schema(required = true)]
    pub created_at: String,
    #[serde(default)]
    #[schema(required = true)]
    pub name: Option<String>,
    pub state: State,
    /// The process generation (0 before the first start; each resume adds one).
    #[serde(default)]
    #[schema(required = true)]
    pub generation: u64,
    #[serde(default)]
    #[schema(required = true)]
    pub pid: Option<u64>,
    /// Present only once the OS reported it.
    #[serde(default)]
    #[schema(required = true)]
    pub exit_code: Option<i64>,
    #[serde(default)]
    #[schema(required = true)]
    pub signal: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub started_at: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub ended_at: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub conversation_id: Option<String>,
    /// Why the run failed to launch or was lost.
    #[serde(default)]
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Why the run cannot work, while it is `blocked`: the tool's words, the frame that
    /// said so, the remedy.
    #[serde(default)]
    #[schema(required = true)]
    pub blocked: Option<Blocked>,
    /// What the run waits on a person for (an open permission request, a question, a turn
    /// ended with the tool idle for input), with its source; null when it waits on no one
    /// or when that is unknown (a PTY form without hooks).
    #[serde(default)]
    #[schema(required = true)]
    pub waiting: Option<Waiting>,
    /// Whether the run's form can say that it waits: true for every stdio form and for
    /// claude's PTY form (its own hooks report); false for another PTY form, whose `waiting`
    /// is then null because it is unknown, never guessed from the screen.
    #[serde(default)]
    #[schema(required = true)]
    pub waiting_known: bool,
    /// Permission requests of the current generation that wait for a person's answer.
    #[serde(default)]
    #[schema(required = true)]
    pub permissions_open: u64,
    /// The account limit the tool ended its last turn on (`usage` or `rate`, its reset time
    /// when the tool gave one, the profile the turn ran under); null otherwise. Cleared by
    /// the next turn that completes, or by a move.
    #[serde(default)]
    #[schema(required = true)]
    pub limit: Option<Limit>,
    /// The run this one was started from by a handoff (`POST /runs/{ref}/handoff`); null
    /// otherwise.
    #[serde(default)]
    #[schema(required = true)]
    pub handoff_of: Option<String>,
    /// How the current generation's processes are held (null before any start).
    #[serde(default)]
    #[schema(required = true)]
    pub hold: Option<HoldView>,
    #[serde(default)]
    #[schema(required = true)]
    pub archived_at: Option<String>,
    /// The branch of the run's own worktree (`proctor/run-0003`), for a worktree run.
    #[serde(default)]
    #[schema(required = true)]
    pub worktree_branch: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub worktree: Option<WorktreeView>,
    /// The output ring, while this server holds the run's output.
    #[serde(default)]
    #[schema(required = true)]
    pub output: Option<OutputView>,
    /// The transcript on disk, while this server holds the run's output.
    #[serde(default)]
    #[schema(required = true)]
    pub transcript: Option<TranscriptView>,
    /// The caller's marks.
    #[serde(default)]
    #[schema(required = true)]
    pub pinned: bool,
    #[serde(default)]
    #[schema(required = true)]
    pub pinned_at: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub snoozed_until: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub done: bool,
    /// The boundary the run's provider process runs behind: the host user (not confined),
    /// or a rig's (`session start --rig`).
    #[serde(default)]
    #[schema(required = true)]
    pub boundary: RunBoundary,
}

/// What a run's provider process runs behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BoundaryKind {
    /// The host user: not confined.
    #[default]
    Host,
    /// A namespace rig: the host's kernel, the rig's namespaces (weaker than a VM).
    Namespace,
    /// A VM rig: its own kernel.
    Vm,
}

/// The boundary of a run, as its record, its view and its receipts name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunBoundary {
    pub kind: BoundaryKind,
    /// The rig the provider process runs in; `null` on the host.
    #[serde(default)]
    #[schema(required = true)]
    pub rig: Option<String>,
    /// One line a person reads: [`HOST_DETAIL`], or the rig's boundary summary.
    pub detail: String,
}

/// What a run on the host runs behind.
pub const HOST_DETAIL: &str = crate::evidence::receipts::HOST_BOUNDARY;

impl Default for RunBoundary {
    fn default() -> Self {
        RunBoundary {
            kind: BoundaryKind::Host,
            rig: None,
            detail: HOST_DETAIL.into(),
        }
    }
}

impl RunBoundary {
    /// The line a receipt's "not proven" list carries about the worker.
    pub fn not_proven_line(&self) -> String {
        match self.kind {
            BoundaryKind::Host => "the worker ran as the host user: it was not confined, and \
                 nothing here attests what it did outside its worktree (network, secrets, other \
                 files)"
                .into(),
            _ => format!(
                "the worker ran in rig {} behind a {}: it did not run as the host user, and \
                 nothing here attests what it did inside the rig",
                self.rig.as_deref().unwrap_or("?"),
                self.detail
            ),
        }
    }
}

/// How a run's processes are held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "mechanism", rename_all = "snake_case")]
pub enum HoldView {
    /// A cgroup v2 folder of its own.
    Cgroup {
        #[schema(required = true)]
        path: Option<String>,
    },
    /// The server is a child subreaper and attributes descendants by scanning.
    Subreaper,
    /// Started by a server from before holds were recorded: its process group only.
    ProcessGroup,
}

/// A worktree run's worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorktreeView {
    pub path: String,
    pub branch: String,
    pub base: String,
    pub repo: String,
}

/// The output ring of a live run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct OutputView {
    #[serde(default)]
    #[schema(required = true)]
    pub first_seq: u64,
    #[serde(default)]
    #[schema(required = true)]
    pub next_seq: u64,
    #[serde(default)]
    #[schema(required = true)]
    pub bytes: u64,
    /// When the run last wrote output (null before its first byte).
    #[serde(default)]
    #[schema(required = true)]
    pub last_at: Option<String>,
}

/// The transcript of a live run's generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TranscriptView {
    pub bytes: u64,
    pub cap: u64,
    /// True once the cap was reached: later output was not kept on disk.
    pub capped: bool,
}

/// `GET /runs`: a page of runs, newest first, then the caller's pinned runs outside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunPage {
    pub items: Vec<RunView>,
    /// How many runs match (all pages).
    pub total: usize,
    /// How many of `items` are pinned runs appended from outside the page.
    pub pinned_outside_page: usize,
    /// With `pagination=cursor`: the cursor of the next page (null on the last).
    #[schema(required = true)]
    pub next: Option<String>,
}

/// `GET /runs/{ref}/events`: the run's lifecycle events, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunEvents {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub items: Vec<RunEvent>,
}

/// The caller's marks on one run (pin, snooze and done answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MarksView {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub pinned: bool,
    #[schema(required = true)]
    pub pinned_at: Option<String>,
    #[schema(required = true)]
    pub snoozed_until: Option<String>,
    pub done: bool,
}

/// What a stop signalled (`stop` of a stop answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StopSignals {
    pub sent_term: bool,
    pub sent_kill: bool,
    /// No live member of the run's processes was left afterwards.
    pub group_gone: bool,
}

/// `POST /runs/{ref}/stop`: the run, and what the stop did (null when the run was not
/// live: nothing was signalled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stopped {
    #[serde(flatten)]
    pub run: RunView,
    #[schema(required = true)]
    pub stop: Option<StopSignals>,
}

/// What cleanup released (`cleaned` of a cleanup answer; the ledger's
/// `sessions.run.cleaned` fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cleaned {
    /// `none` (no worktree), `removed`, or `left_inaccessible` (a worktree this machine
    /// cannot reach, left where it is).
    pub worktree: String,
    #[schema(required = true)]
    pub path: Option<String>,
    #[schema(required = true)]
    pub branch: Option<String>,
    /// The branch's tip at cleanup (null when the branch or the repository was gone).
    #[schema(required = true)]
    pub branch_tip: Option<String>,
    #[schema(required = true)]
    pub branch_deleted: Option<bool>,
    #[schema(required = true)]
    pub discarded: Option<bool>,
    /// The token that cleaned up.
    pub by: String,
}

/// `POST /runs/{ref}/cleanup`: the run, and what was released (null when it was already
/// cleaned: nothing changed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CleanedUp {
    #[serde(flatten)]
    pub run: RunView,
    #[schema(required = true)]
    pub cleaned: Option<Cleaned>,
}

/// `DELETE /runs/{ref}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Deleted {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub deleted: bool,
}

/// How this server holds its runs' processes (`runs_held_by` of `GET /v1/server`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "mechanism", rename_all = "snake_case")]
pub enum ContainmentView {
    /// A cgroup per run under `cgroup_base`.
    Cgroup {
        cgroup_base: String,
        /// Runs a previous server left that this one is still sweeping.
        recovering: usize,
    },
    /// The subreaper fallback, and why no cgroup is used.
    Subreaper { reason: String, recovering: usize },
}
