//! The runs routes' contract (see [`crate::api`]): everything under `/v1/m/sessions/runs`.
//!
//! The route patterns are the constants below (axum's and OpenAPI's `{run}` syntax); a
//! client fills one in with [`at`] (or the functions for routes with a query). The bodies
//! the session manager answers are its own typed values ([`crate::sessions::view`]),
//! re-exported here; the requests, the answers the routes build and the frames of the
//! attach stream are declared here.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

pub use crate::providers::conversation::{PlanEntry, Said, ToolStatus, TurnOutcome};
pub use crate::runs::{ScreenSnapshot, Stream, TermSize};
pub use crate::sessions::activity::{
    ActivityAgent, ActivityTask, ActivityTodo, AgentTranscript, AgentTurn, FileActivity, McpServer,
    RunActivity, SummaryRead, WorkState, Workflow, WorkflowPhase,
};
pub use crate::sessions::handoff::{Handoff, HandoffBody, HandoffPreview, SummaryState};
pub use crate::sessions::manager::{InputRequest, ListQuery, StartRequest};
pub use crate::sessions::messages::{
    MessageItem, MessagePage, MessagesQuery, Role as MessageRole, TranscriptState,
};
pub use crate::sessions::permissions::{
    DecidedBy, PermissionList, PermissionState, PermissionView, PermitDecision, PermitRequest,
};
pub use crate::sessions::record::{
    Blocked, Limit, LimitKind, RunEvent, State, WaitSource, Waiting,
};
pub use crate::sessions::view::{
    BoundaryKind, Cleaned, CleanedUp, ContainmentView, Deleted, HoldView, MarksView, OutputView,
    RunBoundary, RunEvents, RunPage, RunView, StopSignals, Stopped, TranscriptView, WorktreeView,
};
pub use crate::worktrees::{Diff, DiffEntry, DiffFile};

use super::ErrorBody;

/// The prefix of the runs area (the router nests [`crate::server`]'s run routes under it).
pub const BASE: &str = "/v1/m/sessions";
/// `GET` (list) and `POST` (start).
pub const RUNS: &str = "/v1/m/sessions/runs";
/// `GET` (show) and `DELETE`.
pub const RUN: &str = "/v1/m/sessions/runs/{run}";
pub const EVENTS: &str = "/v1/m/sessions/runs/{run}/events";
pub const ATTACH: &str = "/v1/m/sessions/runs/{run}/attach";
pub const SCREEN: &str = "/v1/m/sessions/runs/{run}/screen";
pub const INPUT: &str = "/v1/m/sessions/runs/{run}/input";
pub const INTERRUPT: &str = "/v1/m/sessions/runs/{run}/interrupt";
pub const STOP: &str = "/v1/m/sessions/runs/{run}/stop";
pub const RESUME: &str = "/v1/m/sessions/runs/{run}/resume";
pub const RESIZE: &str = "/v1/m/sessions/runs/{run}/resize";
/// `POST {provider_profile_ref}`: a stopped or failed Claude Code run to another profile.
pub const MOVE: &str = "/v1/m/sessions/runs/{run}/move";
/// `GET`: the digest a handoff would start from; `POST {provider_profile_ref, summary?,
/// name?}`: a new session in that profile, started from this one's conversation.
pub const HANDOFF: &str = "/v1/m/sessions/runs/{run}/handoff";
/// `GET`: a PTY run's output as an asciicast (`?version=2|3`, `&generation=N`).
pub const CAST: &str = "/v1/m/sessions/runs/{run}/cast";
/// The media type of `GET /runs/{ref}/cast`'s answer (asciinema's).
pub const CAST_MEDIA_TYPE: &str = "application/x-asciicast";
/// `POST` sets, `DELETE` clears (the caller's own mark).
pub const PIN: &str = "/v1/m/sessions/runs/{run}/pin";
pub const SNOOZE: &str = "/v1/m/sessions/runs/{run}/snooze";
pub const DONE: &str = "/v1/m/sessions/runs/{run}/done";
/// `PUT`.
pub const NAME: &str = "/v1/m/sessions/runs/{run}/name";
/// `POST` archives, `DELETE` unarchives (for everyone).
pub const ARCHIVE: &str = "/v1/m/sessions/runs/{run}/archive";
pub const CLEANUP: &str = "/v1/m/sessions/runs/{run}/cleanup";
pub const DIFF: &str = "/v1/m/sessions/runs/{run}/diff";
pub const DIFF_FILE: &str = "/v1/m/sessions/runs/{run}/diff/file";
/// `GET`: the current generation's permission requests.
pub const PERMISSIONS: &str = "/v1/m/sessions/runs/{run}/permissions";
/// `GET`: the run's messages, read from its tool's own record (claude, codex).
pub const MESSAGES: &str = "/v1/m/sessions/runs/{run}/messages";
/// `GET`: what the run's tool did, read from its own record (claude, codex).
pub const ACTIVITY: &str = "/v1/m/sessions/runs/{run}/activity";
/// `GET`: a Claude Code sub-agent's transcript in simple turns.
pub const ACTIVITY_AGENT: &str = "/v1/m/sessions/runs/{run}/activity/agents/{agent}";
/// `POST`: a person's decision on one (write role and a person principal).
pub const PERMISSION: &str = "/v1/m/sessions/runs/{run}/permissions/{id}";
/// `POST`: a tool's own hook reports (claude's on a PTY run, through `proctor session
/// hook`). No token: the kernel's attribution of the caller's pid to a live run authorises
/// it, and it is recorded for that run only.
pub const HOOK: &str = "/v1/m/sessions/hook";
/// `GET`: a stream (server-sent events) of [`ChangesEvent`]: one when it opens, then one
/// whenever something the sessions list, a run's events or the factory runs show may have
/// changed. A client refetches what a count says changed, instead of polling.
pub const CHANGES: &str = "/v1/m/sessions/changes";

/// A route pattern with its run filled in: `at(STOP, "run-0001")`. The ref must already be
/// a ref (`run-` and digits), which never needs escaping.
pub fn at(pattern: &str, run: &str) -> String {
    pattern.replace("{run}", run)
}

/// `POST /runs/{ref}/permissions/{id}` (the id is proctor's, digits only).
pub fn permission(run: &str, id: &str) -> String {
    at(PERMISSION, run).replace("{id}", &percent_encode(id))
}

/// `GET /runs/{ref}/activity/agents/{agent}` (the agent id percent-encoded).
pub fn activity_agent(run: &str, agent: &str) -> String {
    at(ACTIVITY_AGENT, run).replace("{agent}", &percent_encode(agent))
}

/// `GET /runs?limit=N[&state=S]`.
pub fn list(limit: usize, state: Option<State>) -> String {
    match state {
        Some(s) => format!("{RUNS}?limit={limit}&state={}", s.as_str()),
        None => format!("{RUNS}?limit={limit}"),
    }
}

/// `GET /runs/{ref}/attach?from=N`.
pub fn attach(run: &str, from: u64) -> String {
    format!("{}?from={from}", at(ATTACH, run))
}

/// `GET /runs/{ref}/messages?…`: the query's parameters that are set, percent-encoded.
pub fn messages(run: &str, q: &MessagesQuery) -> String {
    let mut parts = Vec::new();
    let fields = [
        ("role", &q.role),
        ("q", &q.q),
        ("at", &q.at),
        ("order", &q.order),
        ("limit", &q.limit),
        ("cursor", &q.cursor),
        ("id", &q.id),
        ("text", &q.text),
    ];
    for (k, v) in fields {
        if let Some(v) = v {
            parts.push(format!("{k}={}", percent_encode(v)));
        }
    }
    if parts.is_empty() {
        at(MESSAGES, run)
    } else {
        format!("{}?{}", at(MESSAGES, run), parts.join("&"))
    }
}

/// `GET /runs/{ref}/cast?version=V[&generation=N]`.
pub fn cast(run: &str, version: u8, generation: Option<u64>) -> String {
    match generation {
        Some(g) => format!("{}?version={version}&generation={g}", at(CAST, run)),
        None => format!("{}?version={version}", at(CAST, run)),
    }
}

/// `GET /runs/{ref}/diff/file?path=P` (P percent-encoded).
pub fn diff_file(run: &str, path: &str) -> String {
    format!("{}?path={}", at(DIFF_FILE, run), percent_encode(path))
}

/// A query value: every byte but the unreserved ones (RFC 3986) and `/` as %XX.
pub fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The body of `POST /runs/{ref}/resume` (optional) and `POST /runs/{ref}/resize` (both
/// fields needed): a PTY run's terminal size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SizeBody {
    pub rows: Option<u16>,
    pub cols: Option<u16>,
}

/// The body of `POST /runs/{ref}/snooze`: an RFC 3339 instant in the future.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnoozeBody {
    pub until: Option<String>,
}

/// The body of `POST /runs/{ref}/move`: the profile (of the same tool) to re-attach the run
/// to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MoveBody {
    pub provider_profile_ref: Option<String>,
}

/// The body of `PUT /runs/{ref}/name` (an empty name clears it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RenameBody {
    pub name: Option<String>,
}

/// The body of `POST /runs/{ref}/cleanup` (any body is accepted; only an explicit
/// `"discard_worktree": true` confirms a discard).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CleanupBody {
    pub discard_worktree: Option<bool>,
}

/// `POST /runs/{ref}/input` answers 202 with this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Accepted {
    pub accepted: bool,
}

/// `POST /runs/{ref}/resize`: the size the run's terminal has now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Resized {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub rows: u16,
    pub cols: u16,
}

/// `GET /runs/{ref}/diff`: the paths the run's branch changed since it left the
/// workspace's current commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunDiff {
    #[serde(rename = "ref")]
    pub run_ref: String,
    #[serde(flatten)]
    pub diff: Diff,
}

/// `GET /runs/{ref}/diff/file?path=`: one changed path's text at base and at head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunDiffFile {
    #[serde(rename = "ref")]
    pub run_ref: String,
    #[serde(flatten)]
    pub file: DiffFile,
}

/// The query of `GET /runs/{ref}/attach`: the first seq wanted (default: `Last-Event-ID` +
/// 1, else 1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AttachQuery {
    pub from: Option<u64>,
}

/// The query of `GET /runs/{ref}/cast`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CastQuery {
    /// The asciicast version: 2 (the default) or 3.
    pub version: Option<u8>,
    /// The process generation (1 for the first start, one more for each resume); the
    /// current one when absent.
    pub generation: Option<u64>,
}

/// The query of `GET /runs/{ref}/diff/file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffFileQuery {
    /// A path `GET …/diff` lists.
    pub path: Option<String>,
}

/// The SSE event names of `GET /runs/{ref}/attach`.
pub mod sse {
    /// Data: [`super::OutputEvent`]; its `id` is the last frame's seq.
    pub const OUTPUT: &str = "output";
    /// Data: [`super::LagEvent`].
    pub const LAG: &str = "lag";
    /// Data: [`super::EndEvent`]; the stream ends.
    pub const END: &str = "end";
    /// Data: [`super::NoticeEvent`].
    pub const NOTICE: &str = "notice";
}

/// The SSE event name of `GET /v1/m/sessions/changes`; data: [`ChangesEvent`].
pub const CHANGES_EVENT: &str = "changes";

/// What may have changed, as counts that only grow while the server runs (compare with
/// the previous event; a new server starts them again). `ledger` is the ledger's head seq:
/// every lifecycle fact of a run (state, waiting, name, limit, archive, …) is a ledger
/// event, so a list or a run's events read after it has moved show the change. `factory`
/// counts the updates of the factory runs in progress; `marks` the callers' marks set or
/// cleared (pin, snooze, done). A run's output is not in it: it has its own stream
/// (`attach`), and the list's output counters are read when the list is read. Bursts are
/// coalesced (an event at most every 100 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct ChangesEvent {
    pub ledger: u64,
    pub factory: u64,
    pub marks: u64,
}

/// An `output` event: frames of the run's output, in seq order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutputEvent {
    #[schema(required = true)]
    pub first: Option<u64>,
    #[schema(required = true)]
    pub last: Option<u64>,
    pub frames: Vec<OutputFrame>,
}

/// One frame of output: its seq, its stream and its bytes in standard base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutputFrame {
    pub seq: u64,
    pub stream: Stream,
    pub b64: String,
}

/// A `lag` event: the ring no longer holds what the cursor asked for; the stream goes on
/// from `first_available`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LagEvent {
    pub requested: u64,
    pub first_available: u64,
}

/// An `end` event: the generation's process ended; its exit as observed (both null and
/// `unobserved` true when the wait failed: never fabricated).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct EndEvent {
    pub last_seq: u64,
    #[serde(default)]
    #[schema(required = true)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    #[schema(required = true)]
    pub signal: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub unobserved: bool,
}

/// A `notice` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum NoticeEvent {
    /// The server holds no output for the run (sent once; the stream ends).
    NotLive { state: State, message: String },
    /// The cursor is past the ring's next seq; the stream goes on from `next`.
    CursorAhead { requested: u64, next: u64 },
}

/// The body of `POST /v1/m/sessions/hook`: what claude's hook said (`hook_event_name`,
/// `message` and `session_id` of the JSON claude writes on the hook's stdin; never its
/// `transcript_path`: the server derives the record's path itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HookReport {
    /// `SessionStart`, `Notification`, `Stop`, `StopFailure` or `UserPromptSubmit`.
    pub event: String,
    /// The notification's words (`Notification` only; sanitised and bounded when recorded).
    #[serde(default)]
    #[schema(required = true)]
    pub message: Option<String>,
    /// claude's session id (its conversation): a lowercase UUID, anything else is refused
    /// (400). Recorded as the conversation of the caller's run when it is new for the run's
    /// generation.
    #[serde(default)]
    pub session_id: Option<String>,
    /// `SessionStart`'s `source` (`startup`, `resume`, `clear`, `compact`, `fork`): why
    /// claude's session began (at most 32 bytes; kept in the ledger only).
    #[serde(default)]
    pub source: Option<String>,
}

/// `POST /v1/m/sessions/hook`: the run the kernel attributed the caller to, and what was
/// recorded for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HookRecorded {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub event: String,
}

/// The longest body `POST /v1/m/sessions/hook` reads (bytes).
pub const HOOK_BODY_MAX: usize = 16 * 1024;

/// The operations of this area, as the OpenAPI document declares them. They are declared
/// here, in the contract, rather than on the server's handlers: the contract layer may not
/// name the faces (`docs/architecture.md`, "Layers"). Each names the route constant and the
/// body types the handler in `server::runs_api` takes and answers.
#[allow(dead_code)]
mod ops {
    use super::*;
    #[utoipa::path(
        get,
        path = RUNS,
        tag = "runs",
        description = "The runs, newest first (a page), then the caller's pinned runs outside the page (read).",
        params(ListQuery),
        responses(
        (status = 200, description = "the answer", body = RunPage),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn list() {}
    #[utoipa::path(
        post,
        path = RUNS,
        tag = "runs",
        description = "Starts a run (write). A launch failure is a 201 with state failed and its reason.",
        request_body = StartRequest,
        responses(
        (status = 201, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn start() {}
    #[utoipa::path(
        get,
        path = RUN,
        tag = "runs",
        description = "One run with the caller's marks (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn show() {}
    #[utoipa::path(
        delete,
        path = RUN,
        tag = "runs",
        description = "Deletes a cleaned run's record and transcripts (admin); 409 before cleanup.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = Deleted),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn delete_run() {}
    #[utoipa::path(
        get,
        path = EVENTS,
        tag = "runs",
        description = "The run's lifecycle events, oldest first (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunEvents),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn events() {}
    #[utoipa::path(
        post,
        path = HOOK,
        tag = "runs",
        security(()),
        description = "A tool's own hook reports (claude's Notification, Stop and UserPromptSubmit on a PTY run, sent by `proctor session hook`). No token: the caller is accepted only when the kernel places its pid in a live run (the run's cgroup, or its leader's descendants), and the hook is recorded for that run only (`sessions.run.hook`); any other caller gets 403.",
        request_body = HookReport,
        responses(
        (status = 200, description = "the answer", body = HookRecorded),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn hook() {}
    #[utoipa::path(
        get,
        path = MESSAGES,
        tag = "runs",
        description = "The messages of a Claude Code, Codex, Gemini CLI or OpenCode session, read at each request from \
            the tool's own record under the profile's account home, in pages: items (id, role, at, \
            first_line), total, next, transcript (read, pending, missing, unreadable). Only the \
            person's messages unless role=all; q (case-insensitive, at most 256 bytes), at (RFC \
            3339, the first item is the anchor), order asc|desc, limit 1..200, cursor (a next); \
            items are always oldest first. id reads one message whole (text, later_same; no \
            filter; total is the session's count). text=1 adds text (at most 50 per page, 64 KiB \
            per message, then [...] and clipped). An id is the message's position in the \
            session and does not change as the transcript grows. Audited once per reader, run \
            and 15 minutes (sessions.run.messages; sessions.run.messages.text for text). 422 a \
            tool without it; 409 a run in a rig; 404 an unknown id; 400 an invalid parameter \
            (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001"), MessagesQuery),
        responses(
        (status = 200, description = "the answer", body = MessagePage),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn messages() {}
    #[utoipa::path(
        get,
        path = ACTIVITY,
        tag = "runs",
        description = "What the tool of a Claude Code, Codex, Gemini CLI or OpenCode session did, read at each request \
            from its own record under the profile's account home (codex's rollout: no other \
            app-server): agents (claude's Task tool uses, codex's child agents), tasks (commands \
            and other tool uses: running, completed, failed, stopped or scheduled), files (path, \
            added, removed, created), todos, skills, mcp_servers, model, context_tokens (the \
            last request's, not a sum), context_window (null unless the tool reports it), \
            context_percent (claude only, null when unknown), compactions, workflows (claude \
            only: the live snapshot of each workflow, its latest system/task_progress frame in \
            the run's stream-json output; a live phase is never completed), transcript (read, \
            pending, missing, unreadable). Audited once per reader, run and 15 minutes \
            (sessions.run.activity). 422 a tool without it; 409 a run in a rig (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunActivity),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn activity() {}
    #[utoipa::path(
        get,
        path = ACTIVITY_AGENT,
        tag = "runs",
        description = "A Claude Code sub-agent's transcript in simple turns (role, text; 64 KiB \
            a turn, then [...]), read from its own file beside the session's transcript. \
            Audited once per reader, run and 15 minutes (sessions.run.activity.agent). 404 an \
            unknown agent (an id that is not letters, digits, - and _ included); 422 codex \
            (its children's state is in the activity) and tools without records; 409 a run in \
            a rig (read).",
        params(
            ("run" = String, Path, description = "the run's ref, run-0001"),
            ("agent" = String, Path, description = "an agent id from the activity's agents"),
        ),
        responses(
        (status = 200, description = "the answer", body = AgentTranscript),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn activity_agent() {}
    #[utoipa::path(
        get,
        path = ATTACH,
        tag = "runs",
        description = "Server-sent events (read): `output` (OutputEvent, id = last seq), `lag` (LagEvent), `end` (EndEvent), `notice` (NoticeEvent).",
        params(("run" = String, Path, description = "the run's ref, run-0001"), AttachQuery),
        responses(
        (status = 200, content_type = "text/event-stream", description = "the event stream"),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn attach() {}
    #[utoipa::path(
        get,
        path = CHANGES,
        tag = "runs",
        description = "Server-sent events (read): `changes` (ChangesEvent) when the stream opens, then whenever the ledger's head, the factory runs in progress or the callers' marks moved, at most one every 100 ms. A client refetches the list, a run's events or the factory runs when a count moved, instead of polling them.",
        responses(
        (status = 200, content_type = "text/event-stream", description = "the event stream"),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn changes() {}
    #[utoipa::path(
        get,
        path = SCREEN,
        tag = "runs",
        description = "The screen of a live PTY run and the seq it includes (read); 409 when not live.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = ScreenSnapshot),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn screen() {}
    #[utoipa::path(
        post,
        path = INPUT,
        tag = "runs",
        description = "Types into the run (write): a turn on a pipe run, keys on a PTY run; 409 when not live.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = InputRequest,
        responses(
        (status = 202, description = "the answer", body = Accepted),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn input() {}
    #[utoipa::path(
        post,
        path = INTERRUPT,
        tag = "runs",
        description = "Interrupts the current turn (write); 409 when not live.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn interrupt() {}
    #[utoipa::path(
        post,
        path = STOP,
        tag = "runs",
        description = "Stops the run's processes and answers once the exit is recorded (write).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = Stopped),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn stop() {}
    #[utoipa::path(
        post,
        path = RESUME,
        tag = "runs",
        description = "A new generation on the stored conversation (write); 409 when live or without one.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = SizeBody,
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn resume() {}
    #[utoipa::path(
        post,
        path = MOVE,
        tag = "runs",
        description = "Re-attaches a stopped or failed Claude Code run to another profile of the same tool, carrying its one conversation (transcript, sub-agent and tool-result files) to the target's account home; starts nothing (write). 409: a live run, a run whose row's home is not its profile's, a target of another tool or already holding another version of the conversation or binding it to another session, a file changed or appeared during the copy; 422: a link, a hard link or a special file in the conversation, another tool's session, an unknown target profile. A refusal writes nothing.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = MoveBody,
        responses(
        (status = 200, description = "the run, under its new profile", body = RunView),
        (status = "4XX", description = "refused: the error names the cause", body = ErrorBody),
    )
    )]
    pub fn move_run() {}
    #[utoipa::path(
        get,
        path = HANDOFF,
        tag = "runs",
        description = "The summary a handoff would start from (read): summary, a digest made \
            WITHOUT a model from the stored conversation (the person's first ask, the tool's \
            last answer, the counts), for a person to review and edit; source_driver, turns, \
            messages, transcript_bytes, transcript. A running session is read as it is. \
            Every read is audited (sessions.run.handoff_preview). 409 a \
            run that never started, a cleaned-up run, a run in a rig; 422 a tool whose \
            conversation proctor does not read (grok) and a record refused (a link, a hard \
            link, a special file, over 256 MiB, or one record over 32 MiB; a handoff reads \
            a record larger than the 8 MiB a route reads of one file).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = HandoffPreview),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn handoff_preview() {}
    #[utoipa::path(
        post,
        path = HANDOFF,
        tag = "runs",
        description = "Starts a new session in provider_profile_ref (any tool), in the same \
            workspace and transport (a new worktree when the source had one), linked to this \
            one (write). Refusals that need no stop come first (400 the body or the name; \
            422 an unknown target profile, the tool not installed, a refused record; 409 a \
            target whose home a launch refuses, the workspace's admission); then a running \
            source is stopped as POST /stop does (on timers: a handoff holds no server \
            thread while it waits), its conversation read, and a transcript file \
            (proctor-handoff-transcript/1) written 0600 in a 0700 folder proctor-handoffs/ of \
            the target's account home. The first turn is the summary (or the digest) and the \
            transcript's path. 201 {run (with handoff_of), summary_state delivered | \
            not_delivered | unknown, first_turn when not delivered, transcript_path, \
            stopped_source}; the source's ledger gets sessions.run.handed_off. A refusal \
            after the stop says the source was stopped and can be resumed; a refusal writes \
            no file and no run. Never 202: proctor's launch holds nothing for an approval.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = HandoffBody,
        responses(
        (status = 201, description = "the new session", body = Handoff),
        (status = "4XX", description = "refused: the error names the cause", body = ErrorBody),
    )
    )]
    pub fn handoff() {}
    #[utoipa::path(
        post,
        path = RESIZE,
        tag = "runs",
        description = "Resizes a live PTY run's terminal (write).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = SizeBody,
        responses(
        (status = 200, description = "the answer", body = Resized),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn resize() {}
    #[utoipa::path(
        get,
        path = CAST,
        tag = "runs",
        description = "A PTY run's output as an asciicast (read): newline-delimited JSON, a \
            header then `[time, code, data]` events: `o` the tool's own output bytes at the \
            time each chunk was recorded (as UTF-8 text), `r` a resize (`COLSxROWS`), `m` a \
            marker where the cast lacks something (the transcript's or the timing's cap, \
            output with no recorded time), and in v3 `x` the exit code the OS reported. The \
            header's `title` is the run's ref and tool; its `proctor` object says what the \
            cast does not hold (docs/formats.md). Streamed. 422 for a pipe run, for a \
            version other than 2 or 3, and for a run recorded before output times were \
            kept (no pty.timing); 404 for an unknown run or generation or a transcript gone \
            from the disk; 409 before the run started.",
        params(("run" = String, Path, description = "the run's ref, run-0001"), CastQuery),
        responses(
        (status = 200, content_type = "application/x-asciicast", description = "the cast"),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn cast() {}
    #[utoipa::path(
        post,
        path = PIN,
        tag = "runs",
        description = "Pins the run for the caller (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn pin() {}
    #[utoipa::path(
        delete,
        path = PIN,
        tag = "runs",
        description = "Unpins the run for the caller (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn unpin() {}
    #[utoipa::path(
        post,
        path = SNOOZE,
        tag = "runs",
        description = "Snoozes the run for the caller until an instant in the future (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = SnoozeBody,
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn snooze() {}
    #[utoipa::path(
        delete,
        path = SNOOZE,
        tag = "runs",
        description = "Ends the caller's snooze (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn unsnooze() {}
    #[utoipa::path(
        post,
        path = DONE,
        tag = "runs",
        description = "Marks the run done for the caller (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn done() {}
    #[utoipa::path(
        delete,
        path = DONE,
        tag = "runs",
        description = "Removes the caller's done mark (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = MarksView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn undone() {}
    #[utoipa::path(
        put,
        path = NAME,
        tag = "runs",
        description = "Renames the run; an empty name clears it (write).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = RenameBody,
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn rename() {}
    #[utoipa::path(
        post,
        path = ARCHIVE,
        tag = "runs",
        description = "Archives the run for everyone (write).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn archive() {}
    #[utoipa::path(
        delete,
        path = ARCHIVE,
        tag = "runs",
        description = "Unarchives the run (write).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn unarchive() {}
    #[utoipa::path(
        post,
        path = CLEANUP,
        tag = "runs",
        description = "Releases a run that is not live (admin); 409 when live or when work would be lost.",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        request_body = CleanupBody,
        responses(
        (status = 200, description = "the answer", body = CleanedUp),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn cleanup() {}
    #[utoipa::path(
        get,
        path = DIFF,
        tag = "runs",
        description = "The paths a worktree run's branch changed (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = RunDiff),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn diff() {}
    #[utoipa::path(
        get,
        path = DIFF_FILE,
        tag = "runs",
        description = "One changed path's text at base and at head (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001"), DiffFileQuery),
        responses(
        (status = 200, description = "the answer", body = RunDiffFile),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn diff_file() {}
    #[utoipa::path(
        get,
        path = PERMISSIONS,
        tag = "runs",
        description = "The permission requests of the run's current generation, oldest first, \
            with their state (open, allowed, denied, expired, refused) and who decided (read).",
        params(("run" = String, Path, description = "the run's ref, run-0001")),
        responses(
        (status = 200, description = "the answer", body = PermissionList),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn permissions() {}
    #[utoipa::path(
        post,
        path = PERMISSION,
        tag = "runs",
        description = "A person's decision on an open permission request, sent to the tool in \
            its own shape and recorded naming who decided (write, and a person: an agent \
            identity gets 403 agent_refused). 404 unknown id; 409 already decided, expired, or \
            the run is not live; 400 a decision the tool did not offer.",
        params(
            ("run" = String, Path, description = "the run's ref, run-0001"),
            ("id" = String, Path, description = "proctor's id of the request, as listed"),
        ),
        request_body = PermitRequest,
        responses(
        (status = 200, description = "the answer", body = PermissionView),
        (status = "4XX", description = "refused: the error names the remedy", body = ErrorBody),
    )
    )]
    pub fn permit() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::list,
        ops::start,
        ops::show,
        ops::delete_run,
        ops::events,
        ops::attach,
        ops::screen,
        ops::input,
        ops::interrupt,
        ops::stop,
        ops::resume,
        ops::move_run,
        ops::handoff_preview,
        ops::handoff,
        ops::resize,
        ops::cast,
        ops::pin,
        ops::unpin,
        ops::snooze,
        ops::unsnooze,
        ops::done,
        ops::undone,
        ops::rename,
        ops::archive,
        ops::unarchive,
        ops::cleanup,
        ops::diff,
        ops::diff_file,
        ops::permissions,
        ops::permit,
        ops::hook,
        ops::messages,
        ops::activity,
        ops::activity_agent,
        ops::changes,
    ),
    components(schemas(
        ErrorBody,
        RunView,
        MoveBody,
        HandoffPreview,
        HandoffBody,
        Handoff,
        SummaryState,
        State,
        Blocked,
        Limit,
        LimitKind,
        Waiting,
        WaitSource,
        HoldView,
        WorktreeView,
        OutputView,
        TranscriptView,
        RunBoundary,
        BoundaryKind,
        RunPage,
        RunEvents,
        RunEvent,
        ChangesEvent,
        MarksView,
        StopSignals,
        Stopped,
        Cleaned,
        CleanedUp,
        Deleted,
        StartRequest,
        InputRequest,
        SizeBody,
        SnoozeBody,
        RenameBody,
        CleanupBody,
        Accepted,
        Resized,
        RunDiff,
        RunDiffFile,
        Diff,
        DiffEntry,
        DiffFile,
        ScreenSnapshot,
        TermSize,
        Stream,
        OutputEvent,
        OutputFrame,
        LagEvent,
        EndEvent,
        NoticeEvent,
        Said,
        PlanEntry,
        ToolStatus,
        TurnOutcome,
        PermissionList,
        PermissionView,
        PermissionState,
        DecidedBy,
        PermitRequest,
        PermitDecision,
        HookReport,
        HookRecorded,
        MessagePage,
        RunActivity,
        ActivityAgent,
        ActivityTask,
        FileActivity,
        ActivityTodo,
        McpServer,
        WorkState,
        Workflow,
        WorkflowPhase,
        SummaryRead,
        AgentTranscript,
        AgentTurn,
        MessageItem,
        MessageRole,
        TranscriptState,
    )),
    tags((name = "runs", description = "Agent sessions (runs): start, watch, steer, tidy"))
)]
pub struct Doc;
