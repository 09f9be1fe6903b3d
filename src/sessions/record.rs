//! A run's record: what it is (tool, profile, transport, workspace), what the session owns
//! (name, archive mark), and the lifecycle events observed for it. Its state is never
//! stored: it is derived from the events, so nothing can claim a state nobody observed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::text;

/// The lifecycle states a run can be in, derived from its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Recorded, its process not (yet) spawned in this generation.
    Starting,
    /// Its process lives and is working (or, for PTY forms, simply lives).
    Running,
    /// Its process lives and the tool said its turn is over (stdio forms).
    Idle,
    /// Its process ended after a stop request, or exited with code 0.
    Stopped,
    /// Its process could not start, or ended on its own with a non-zero code or a signal.
    Failed,
    /// A server lost track of its process (crash); the exit code is unknown.
    Lost,
    /// Released by cleanup; only delete remains.
    Cleaned,
    /// Its process lives, and the tool said it cannot work: it refused the protocol's
    /// handshake (a missing login or key, an unreachable service). `reason` holds the
    /// tool's own words, the frame that said so, and the remedy. The next turn that starts
    /// clears it.
    Blocked,
    /// Left live by a server that stopped, and not yet swept by this one. Never derived
    /// from the events alone: the manager shows it until its sweep records `lost`.
    Recovering,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::Idle => "idle",
            State::Stopped => "stopped",
            State::Failed => "failed",
            State::Lost => "lost",
            State::Cleaned => "cleaned",
            State::Recovering => "recovering",
            State::Blocked => "blocked",
        }
    }

    /// True while a process of this run may be alive.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            State::Starting | State::Running | State::Idle | State::Recovering | State::Blocked
        )
    }
}

/// One lifecycle event of a run, as appended to the ledger (`seq` is the ledger's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct RunEvent {
    pub seq: u64,
    pub at: String,
    /// The ledger kind, e.g. `sessions.run.started`.
    pub kind: String,
    /// The event's own fields (`{}` when it has none).
    #[serde(default)]
    #[schema(value_type = Object)]
    #[schema(required = true)]
    pub fields: Map<String, Value>,
}

/// What the session owns and where it runs. Persisted as `data/runs/<ref>.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub tool: String,
    pub profile: String,
    pub transport: String,
    pub workspace: String,
    /// True when a provider fake backs the run: its output is a demo, not a model's.
    pub demo: bool,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<String>,
    /// Set for a run started with `worktree: true`: its own linked worktree and branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
    /// The PATH the run's tool was resolved on and runs with (the client's, or the
    /// server's); a resume uses it. Absent for runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The boundary the provider process runs behind; absent: the host user (not
    /// confined), as every run before `session start --rig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<super::view::RunBoundary>,
    #[serde(default)]
    pub events: Vec<RunEvent>,
}

pub use crate::worktrees::WorktreeInfo;

/// The derived, observed view of a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Derived {
    pub state: State,
    pub generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u64>,
    /// Present only once the OS reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the run cannot work, while it is `blocked` (issue 13, point 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
    /// What the run waits on a person for, while it waits (issue 13, point 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// Permission requests of the current generation not yet answered (issue 13, point 4).
    pub permissions_open: u64,
    /// The account limit the tool ended its last turn on (issue 18 §2); cleared by the next
    /// turn that completes, or by a move to another profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The run this one was handed off from (its `created` event says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_of: Option<String>,
}

/// What kind of account limit ended a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The account's plan allocation is used up.
    Usage,
    /// The provider throttles the rate of requests.
    Rate,
}

/// The account limit a run's tool ended its last turn on, as the tool said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Limit {
    pub kind: LimitKind,
    /// When the tool said the limit lifts (RFC 3339 UTC); absent when it did not say, or
    /// said a time more than a year away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// The profile the turn ran under.
    pub account_ref: String,
}

impl Limit {
    /// The limit a `limit_reached` event's fields record (`{generation, limit: {kind,
    /// resets_at?, account_ref}}`: nested, since a ledger line's own `kind` is the event's).
    pub fn from_fields(f: &Map<String, Value>) -> Option<Limit> {
        serde_json::from_value(f.get("limit")?.clone()).ok()
    }
}

/// Why a run cannot work: the tool's own words (sanitised and bounded when recorded), the
/// frame or stream that said so, and what the person can do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Blocked {
    /// The tool's words, as it said them (sanitised, bounded).
    pub words: String,
    /// Which frame said so (`session/new error`, `result api_error`, `error notification`…).
    pub source: String,
    /// What to do about it.
    pub remedy: String,
}

/// Where the knowledge that a run waits on a person comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitSource {
    /// A frame of the tool's stdio protocol (a permission request, a turn's end).
    Protocol,
    /// The tool's own hook (claude's Notification and Stop hooks on a PTY run).
    Hook,
}

/// What a run waits on a person for, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Waiting {
    pub source: WaitSource,
    /// What it waits for, in words (sanitised, bounded).
    pub reason: String,
    /// When it began waiting (RFC 3339).
    pub since: String,
}

/// Short names of the lifecycle kinds, under `sessions.run.`.
pub mod kinds {
    pub const CREATED: &str = "sessions.run.created";
    pub const STARTED: &str = "sessions.run.started";
    pub const LAUNCH_FAILED: &str = "sessions.run.launch_failed";
    pub const CONVERSATION: &str = "sessions.run.conversation";
    pub const TURN_STARTED: &str = "sessions.run.turn_started";
    pub const TURN_ENDED: &str = "sessions.run.turn_ended";
    pub const STOP_REQUESTED: &str = "sessions.run.stop_requested";
    pub const INTERRUPTED: &str = "sessions.run.interrupted";
    pub const EXITED: &str = "sessions.run.exited";
    pub const RESUMED: &str = "sessions.run.resumed";
    pub const LOST: &str = "sessions.run.lost";
    pub const RENAMED: &str = "sessions.run.renamed";
    pub const ARCHIVED: &str = "sessions.run.archived";
    pub const UNARCHIVED: &str = "sessions.run.unarchived";
    pub const CLEANED: &str = "sessions.run.cleaned";
    pub const REQUEST_FAILED: &str = "sessions.run.request_failed";
    pub const DELETED: &str = "sessions.run.deleted";
    pub const TRANSCRIPT_CAPPED: &str = "sessions.run.transcript_capped";
    /// A tool asked for a permission; the server holds it open for a person (issue 13 §4).
    pub const PERMISSION_REQUESTED: &str = "sessions.run.permission_requested";
    /// A person answered a permission request (`by` names them).
    pub const PERMISSION_DECIDED: &str = "sessions.run.permission_decided";
    /// A permission request was still open when its process ended.
    pub const PERMISSION_EXPIRED: &str = "sessions.run.permission_expired";
    /// A permission request refused without asking (the profile denies every request).
    pub const PERMISSION_REFUSED: &str = "sessions.run.permission_refused";
    /// A tool's own hook reported to the server (claude's Notification/Stop on a PTY run).
    pub const HOOK: &str = "sessions.run.hook";
    /// The tool said it cannot work (`{generation, source, words}`): the run is `blocked`.
    pub const BLOCKED: &str = "sessions.run.blocked";
    /// The tool retries an error on its own (`{generation, words}`), e.g. codex's
    /// "Reconnecting... 2/5": the run is still running, and its `reason` says so.
    pub const RETRYING: &str = "sessions.run.retrying";
    /// A warning the tool reported (`{generation, words}`).
    pub const WARNING: &str = "sessions.run.warning";
    /// The tool ended a turn on an account limit (`{generation, limit: {kind, resets_at?,
    /// account_ref}}`), recorded once per fact (issue 18 §2).
    pub const LIMIT_REACHED: &str = "sessions.run.limit_reached";
    /// The run was re-attached to another profile of its tool, its conversation copied
    /// (`{from, to, files, conversation_id?}`).
    pub const MOVED: &str = "sessions.run.moved";
    /// A reader read the run's messages (`{by, transcript}`), once per reader per 15
    /// minutes.
    pub const MESSAGES: &str = "sessions.run.messages";
    /// The same for a read of whole texts (`text=1`, or one message by `id`).
    pub const MESSAGES_TEXT: &str = "sessions.run.messages.text";
    /// A reader read the run's activity (`{by, transcript}`), once per reader per 15
    /// minutes.
    pub const ACTIVITY: &str = "sessions.run.activity";
    /// A reader read a sub-agent's transcript (`{by, agent, transcript}`), once per reader
    /// and run per 15 minutes (the first agent read in the window is the one named).
    pub const ACTIVITY_AGENT: &str = "sessions.run.activity.agent";
    /// A reader read the run's handoff preview (`{by, transcript}`), once per reader and
    /// run per 15 minutes.
    pub const HANDOFF_PREVIEW: &str = "sessions.run.handoff_preview";
    /// The run was handed off: a new session started from its conversation (`{to_run,
    /// to_profile, to_tool, transcript, summary, stopped, by}`).
    pub const HANDED_OFF: &str = "sessions.run.handed_off";
}

/// The protocol requests without which a stdio tool cannot work: a refusal of one of them
/// (an error answer) blocks the run.
const HANDSHAKE: &[&str] = &["initialize", "session/new", "thread/start"];

/// What a person can do about a blocked run: log in with the profile's account home (the
/// variable and value that point the tool at it, as `proctor` launches it), or check the
/// network when the tool could not reach its service; then what to do next.
pub fn blocked_remedy(
    tool: &str,
    profile: &str,
    account_home: Option<&str>,
    source: &str,
) -> String {
    use crate::providers::{HomeVarTarget, Tool};
    let Ok(t) = Tool::parse(tool) else {
        return format!("log in to {tool} for this profile's account, then resume the session");
    };
    let spec = t.spec();
    let login = match t {
        Tool::Claude => "`claude` once (then /login)".to_string(),
        Tool::Codex => "`codex login`".to_string(),
        Tool::Opencode => "`opencode auth login`".to_string(),
        _ => format!("`{}` once", spec.program),
    };
    // A default profile sets no variable: the tool finds its home from HOME. An added one
    // sets the tool's own variable (providers::env::launch_env).
    let place = match account_home {
        Some(home) if profile == tool => match home.strip_suffix(spec.default_home) {
            Some(user) => format!(
                "HOME={} (the account home {home})",
                user.strip_suffix('/')
                    .filter(|u| !u.is_empty())
                    .unwrap_or("/")
            ),
            None => format!("the HOME whose {} is {home}", spec.default_home),
        },
        Some(home) => {
            let value = match spec.home_var_target {
                HomeVarTarget::Folder => home.to_string(),
                HomeVarTarget::Parent { .. } => crate::files::parent_of(std::path::Path::new(home))
                    .to_string_lossy()
                    .into_owned(),
            };
            format!("{}={value} (the account home {home})", spec.home_var)
        }
        None => "this profile's account home".to_string(),
    };
    let log_in = format!("log in by running {login} in a terminal with {place}");
    match source {
        "error notification" | "turn/completed error" | "session/prompt error" => format!(
            "check the network ({tool} could not reach its service) or the account: {log_in}; \
             then send the turn again"
        ),
        "result api_error" | "stderr" => format!("{log_in}, then send the turn again"),
        _ => format!("{log_in}, then resume the session"),
    }
}

/// The one-line `reason` of a blocked run, for clients that read only `reason`.
fn blocked_reason(tool: &str, source: &str, words: &str, remedy: &str) -> String {
    let words = words.trim_end_matches('.');
    match source.strip_suffix(" error") {
        Some(method) if HANDSHAKE.contains(&method) => {
            format!("{tool} refused {method}: {words}. Remedy: {remedy}")
        }
        _ => format!("{tool} cannot work ({source}): {words}. Remedy: {remedy}"),
    }
}

/// Why a run waits whose turn ended (a stdio turn's end, claude's `Stop` hook).
const TURN_WAIT: &str = "the turn ended; the tool waits for your input";
/// What a `Notification` hook without a message says.
const HOOK_ATTENTION: &str = "the tool asks for your attention";
/// The widest reason a waiting run shows (columns).
const WAIT_REASON_WIDTH: usize = 200;

/// The permission requests of `generation` still open, in the order asked.
fn open_permissions(
    events: &[RunEvent],
    generation: u64,
) -> Vec<super::permissions::PermissionView> {
    super::permissions::list(events, generation)
        .into_iter()
        .filter(|p| p.state == super::permissions::PermissionState::Open)
        .collect()
}

impl RunRecord {
    /// Whether this run's form can say that it waits on a person: every stdio form (its
    /// protocol ends turns and asks for permissions), and claude's PTY form (its own hooks
    /// report to the server). For any other PTY form `waiting` is null because it is
    /// unknown, never guessed from the screen.
    pub fn waiting_known(&self) -> bool {
        match self.transport.as_str() {
            "pipe" => true,
            "pty" => self.tool == "claude",
            _ => false,
        }
    }

    /// What the run waits on a person for, from its events alone (issue 13, point 5): an
    /// open permission request of the current generation (the earliest first), else what
    /// claude's own hooks said on a PTY run (`Notification`, `Stop`; cleared by
    /// `UserPromptSubmit` or a new turn), else a stdio turn that ended with the process
    /// alive. Only a `running` or `idle` run waits: a blocked one waits on a login, an ended
    /// one on nothing. Events of another generation say nothing about this one.
    fn waiting(&self, state: State, generation: u64) -> Option<Waiting> {
        if !self.waiting_known() || !matches!(state, State::Running | State::Idle) {
            return None;
        }
        let pty = self.transport == "pty";
        let mut hook: Option<(String, String)> = None;
        let mut turn_end: Option<String> = None;
        for e in &self.events {
            let f = &e.fields;
            if f.get("generation")
                .and_then(Value::as_u64)
                .is_some_and(|g| g != generation)
            {
                continue;
            }
            let word = |k: &str| f.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            match e.kind.as_str() {
                kinds::RESUMED | kinds::STARTED => {
                    hook = None;
                    turn_end = None;
                }
                kinds::TURN_STARTED => {
                    hook = None;
                    turn_end = None;
                }
                kinds::TURN_ENDED if !pty => turn_end = Some(e.at.clone()),
                kinds::HOOK if pty => {
                    let since = hook.as_ref().map_or_else(|| e.at.clone(), |h| h.0.clone());
                    match word("event") {
                        Some("Notification") => {
                            let said = word("message").unwrap_or(HOOK_ATTENTION);
                            hook = Some((since, text::one_line(said, WAIT_REASON_WIDTH)));
                        }
                        // `StopFailure`: the turn ended on an API error (a limit, say);
                        // claude waits for input all the same.
                        Some("Stop" | "StopFailure") => hook = Some((since, TURN_WAIT.to_string())),
                        Some("UserPromptSubmit") => hook = None,
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        // The earliest request still open (one fold of the permission events:
        // `permissions::list`, which the permissions route answers from too).
        if let Some(p) = open_permissions(&self.events, generation)
            .into_iter()
            .next()
        {
            let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
            let tool = some(&p.tool_name)
                .or(Some(p.method.clone()).filter(|m| !m.is_empty()))
                .unwrap_or_else(|| "a tool".into());
            let reason = match some(&p.what) {
                Some(what) => format!("permission: {tool} `{what}`"),
                None => format!("permission: {tool}"),
            };
            let since = p.since;
            let reason = text::one_line(&reason, WAIT_REASON_WIDTH);
            return Some(Waiting {
                source: WaitSource::Protocol,
                reason,
                since,
            });
        }
        if let Some((since, reason)) = hook {
            return Some(Waiting {
                source: WaitSource::Hook,
                reason,
                since,
            });
        }
        turn_end.map(|since| Waiting {
            source: WaitSource::Protocol,
            reason: TURN_WAIT.to_string(),
            since,
        })
    }

    /// Folds the events into the observed view.
    pub fn derive(&self) -> Derived {
        let mut d = Derived {
            state: State::Starting,
            generation: 0,
            pid: None,
            exit_code: None,
            signal: None,
            started_at: None,
            ended_at: None,
            conversation_id: None,
            reason: None,
            blocked: None,
            waiting: None,
            permissions_open: 0,
            limit: None,
            handoff_of: None,
        };
        let mut stop_requested = false;
        let mut account_home: Option<String> = None;
        let mut retrying: Option<String> = None;
        let field = |f: &Map<String, Value>, k: &str| {
            f.get(k).and_then(Value::as_str).unwrap_or("").to_string()
        };
        for e in &self.events {
            let f = &e.fields;
            let block = |d: &mut Derived, home: Option<&str>, source: String, words: String| {
                let remedy = blocked_remedy(&self.tool, &self.profile, home, &source);
                d.state = State::Blocked;
                d.reason = Some(blocked_reason(&self.tool, &source, &words, &remedy));
                d.blocked = Some(Blocked {
                    words,
                    source,
                    remedy,
                });
            };
            match e.kind.as_str() {
                kinds::CREATED => {
                    d.generation = 1;
                    d.handoff_of = f
                        .get("handoff_of")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                kinds::RESUMED => {
                    d.generation = f
                        .get("generation")
                        .and_then(Value::as_u64)
                        .unwrap_or(d.generation + 1);
                    d.state = State::Starting;
                    d.pid = None;
                    d.exit_code = None;
                    d.signal = None;
                    d.ended_at = None;
                    d.reason = None;
                    stop_requested = false;
                }
                kinds::STARTED => {
                    account_home = f
                        .get("account_home")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    retrying = None;
                    d.state = State::Running;
                    d.pid = f.get("pid").and_then(Value::as_u64);
                    d.started_at = Some(e.at.clone());
                }
                kinds::LAUNCH_FAILED => {
                    d.state = State::Failed;
                    d.ended_at = Some(e.at.clone());
                    d.reason = f.get("error").and_then(Value::as_str).map(str::to_string);
                }
                kinds::CONVERSATION => {
                    d.conversation_id = f
                        .get("conversation_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                kinds::TURN_STARTED => {
                    retrying = None;
                    if matches!(d.state, State::Idle | State::Blocked) {
                        d.state = State::Running;
                        d.reason = None;
                        d.blocked = None;
                    }
                }
                kinds::REQUEST_FAILED if d.state.is_live() => {
                    let method = field(f, "method");
                    if HANDSHAKE.contains(&method.as_str()) {
                        block(
                            &mut d,
                            account_home.as_deref(),
                            format!("{method} error"),
                            field(f, "message"),
                        );
                    }
                }
                kinds::BLOCKED if d.state.is_live() => {
                    block(
                        &mut d,
                        account_home.as_deref(),
                        field(f, "source"),
                        field(f, "words"),
                    );
                }
                kinds::RETRYING if d.state.is_live() => retrying = Some(field(f, "words")),
                kinds::LIMIT_REACHED => d.limit = Limit::from_fields(f),
                kinds::MOVED => d.limit = None,
                // claude's `Stop` hook on a PTY run: a turn that ended without an API error
                // (one that did fires `StopFailure` instead), i.e. a successful turn.
                kinds::HOOK
                    if self.transport == "pty"
                        && f.get("event").and_then(Value::as_str) == Some("Stop") =>
                {
                    d.limit = None;
                }
                kinds::TURN_ENDED => {
                    retrying = None;
                    if f.get("outcome").and_then(Value::as_str) == Some("completed") {
                        d.limit = None;
                    }
                    // A turn that worked clears a block (claude and ACP have no turn-start
                    // frame: their next turn's success is what says the tool works again).
                    let worked = f.get("outcome").and_then(Value::as_str) == Some("completed");
                    if d.state == State::Running || (d.state == State::Blocked && worked) {
                        d.state = State::Idle;
                        d.reason = None;
                        d.blocked = None;
                    }
                }
                kinds::STOP_REQUESTED => stop_requested = true,
                kinds::EXITED => {
                    d.exit_code = f.get("exit_code").and_then(Value::as_i64);
                    d.signal = f.get("signal").and_then(Value::as_str).map(str::to_string);
                    d.ended_at = Some(e.at.clone());
                    d.reason = f.get("reason").and_then(Value::as_str).map(str::to_string);
                    d.state = if d.reason.is_some() {
                        State::Failed
                    } else if stop_requested || d.exit_code == Some(0) {
                        State::Stopped
                    } else {
                        State::Failed
                    };
                }
                kinds::LOST => {
                    d.state = State::Lost;
                    d.ended_at = Some(e.at.clone());
                    d.exit_code = None;
                    d.reason = f.get("reason").and_then(Value::as_str).map(str::to_string);
                }
                kinds::CLEANED => d.state = State::Cleaned,
                _ => {}
            }
        }
        if d.state != State::Blocked {
            d.blocked = None;
        }
        if d.state == State::Running
            && let Some(words) = retrying
        {
            d.reason = Some(format!("{} retries: {words}", self.tool));
        }
        // No process, no open request (a server that crashed recorded no expiry).
        d.permissions_open = if d.state.is_live() {
            open_permissions(&self.events, d.generation).len() as u64
        } else {
            0
        };
        d.waiting = self.waiting(d.state, d.generation);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, fields: Value) -> RunEvent {
        RunEvent {
            seq: 0,
            at: "2026-11-30T00:00:00.000Z".into(),
            kind: kind.into(),
            fields: fields.as_object().cloned().unwrap_or_default(),
        }
    }

    fn rec(events: Vec<RunEvent>) -> RunRecord {
        RunRecord {
            run_ref: "run-0001".into(),
            tool: "claude".into(),
            profile: "claude".into(),
            transport: "pipe".into(),
            workspace: "/w".into(),
            demo: true,
            created_at: "2026-11-30T00:00:00.000Z".into(),
            name: None,
            archived_at: None,
            worktree: None,
            path: None,
            boundary: None,
            events,
        }
    }

    #[test]
    fn a_limit_is_derived_from_its_event_and_cleared_by_a_completed_turn_or_a_move() {
        let limit = |kind: &str| {
            json!({"generation": 1, "limit": {"kind": kind, "resets_at": "2026-11-30T05:00:00Z",
                   "account_ref": "claude"}})
        };
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 42})),
            ev(
                kinds::TURN_ENDED,
                json!({"generation": 1, "outcome": "failed"}),
            ),
            ev(kinds::LIMIT_REACHED, limit("usage")),
        ]);
        assert_eq!(
            r.derive().limit,
            Some(Limit {
                kind: LimitKind::Usage,
                resets_at: Some("2026-11-30T05:00:00Z".into()),
                account_ref: "claude".into()
            })
        );
        // A failed or interrupted turn, an exit, a resume: still limited.
        for (k, f) in [
            (
                kinds::TURN_ENDED,
                json!({"generation": 1, "outcome": "failed"}),
            ),
            (
                kinds::TURN_ENDED,
                json!({"generation": 1, "outcome": "interrupted"}),
            ),
            (kinds::EXITED, json!({"exit_code": 0})),
            (kinds::RESUMED, json!({"generation": 2})),
        ] {
            r.events.push(ev(k, f));
            assert!(r.derive().limit.is_some(), "{k}");
        }
        r.events.push(ev(
            kinds::TURN_ENDED,
            json!({"generation": 2, "outcome": "completed"}),
        ));
        assert_eq!(r.derive().limit, None);
        r.events.push(ev(kinds::LIMIT_REACHED, limit("rate")));
        assert_eq!(r.derive().limit.unwrap().kind, LimitKind::Rate);
        r.events.push(ev(
            kinds::MOVED,
            json!({"from": "claude", "to": "work", "files": 1}),
        ));
        assert_eq!(r.derive().limit, None);
    }

    #[test]
    fn a_pty_runs_limit_is_cleared_by_claudes_stop_hook_not_by_its_stop_failure() {
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 42})),
            ev(
                kinds::HOOK,
                json!({"generation": 1, "event": "StopFailure"}),
            ),
            ev(
                kinds::LIMIT_REACHED,
                json!({"generation": 1, "limit": {"kind": "rate", "account_ref": "claude"}}),
            ),
        ]);
        r.transport = "pty".into();
        assert!(r.derive().limit.is_some());
        for event in [
            "UserPromptSubmit",
            "Notification",
            "StopFailure",
            "SessionStart",
        ] {
            r.events
                .push(ev(kinds::HOOK, json!({"generation": 1, "event": event})));
            assert!(r.derive().limit.is_some(), "{event}");
        }
        r.events
            .push(ev(kinds::HOOK, json!({"generation": 1, "event": "Stop"})));
        assert_eq!(r.derive().limit, None);
        // On a stdio run a hook says nothing of a turn.
        r.transport = "pipe".into();
        r.events.push(ev(
            kinds::LIMIT_REACHED,
            json!({"generation": 1, "limit": {"kind": "rate", "account_ref": "claude"}}),
        ));
        r.events
            .push(ev(kinds::HOOK, json!({"generation": 1, "event": "Stop"})));
        assert!(r.derive().limit.is_some());
    }

    #[test]
    fn a_refused_handshake_blocks_the_run_with_the_tools_words_until_a_turn_starts() {
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 42})),
        ]);
        // A refused turn is the turn's failure, not a block.
        r.events.push(ev(
            kinds::REQUEST_FAILED,
            json!({"method": "session/prompt", "message": "overloaded"}),
        ));
        assert_eq!(r.derive().state, State::Running);
        r.events.push(ev(
            kinds::REQUEST_FAILED,
            json!({"method": "session/new",
                   "message": "Gemini API key is missing or not configured."}),
        ));
        let d = r.derive();
        assert_eq!(d.state, State::Blocked);
        assert!(d.state.is_live(), "its process still lives");
        let why = d.reason.unwrap();
        assert!(why.contains("refused session/new"), "{why}");
        assert!(why.contains("Gemini API key is missing"), "{why}");
        assert!(why.contains("Remedy: log in"), "{why}");
        r.events.push(ev(kinds::TURN_STARTED, json!({})));
        let d = r.derive();
        assert_eq!((d.state, d.reason), (State::Running, None));
        // An exit still ends it.
        r.events.push(ev(
            kinds::REQUEST_FAILED,
            json!({"method": "initialize", "message": "no"}),
        ));
        r.events.push(ev(kinds::EXITED, json!({"exit_code": 1})));
        assert_eq!(r.derive().state, State::Failed);
    }

    fn rec_of(tool: &str, profile: &str, events: Vec<RunEvent>) -> RunRecord {
        RunRecord {
            tool: tool.into(),
            profile: profile.into(),
            ..rec(events)
        }
    }

    #[test]
    fn a_gemini_refusal_fills_blocked_with_the_account_home_in_the_remedy() {
        let r = rec_of(
            "gemini",
            "gemini",
            vec![
                ev(kinds::CREATED, json!({})),
                ev(
                    kinds::STARTED,
                    json!({"pid": 4, "account_home": "/home/op/.gemini"}),
                ),
                ev(
                    kinds::REQUEST_FAILED,
                    json!({"method": "session/new",
                           "message": "Gemini API key is missing or not configured."}),
                ),
            ],
        );
        let d = r.derive();
        assert_eq!(d.state, State::Blocked);
        let b = d.blocked.expect("blocked is filled while blocked");
        assert_eq!(b.words, "Gemini API key is missing or not configured.");
        assert_eq!(b.source, "session/new error");
        assert_eq!(
            b.remedy,
            "log in by running `gemini` once in a terminal with HOME=/home/op (the account \
             home /home/op/.gemini), then resume the session"
        );
        // An added profile names the tool's own variable (the parent of `.gemini`).
        let mut r2 = r.clone();
        r2.profile = "work".into();
        r2.events[1] = ev(
            kinds::STARTED,
            json!({"pid": 4, "account_home": "/srv/acct/.gemini"}),
        );
        let b = r2.derive().blocked.unwrap();
        assert!(
            b.remedy
                .contains("GEMINI_CLI_HOME=/srv/acct (the account home /srv/acct/.gemini)"),
            "{}",
            b.remedy
        );
        assert!(
            d.reason
                .unwrap()
                .contains("Remedy: log in by running `gemini`")
        );
    }

    #[test]
    fn claude_api_error_blocks_until_a_turn_works() {
        let mut r = rec_of(
            "claude",
            "claude",
            vec![
                ev(kinds::CREATED, json!({})),
                ev(
                    kinds::STARTED,
                    json!({"pid": 4, "account_home": "/root/.claude"}),
                ),
                // What the manager records from the real frames (claude 2.1.332).
                ev(
                    kinds::TURN_ENDED,
                    json!({"outcome": "failed", "detail": "api_error"}),
                ),
                ev(
                    kinds::BLOCKED,
                    json!({"source": "result api_error",
                           "words": "Not logged in · Please run /login"}),
                ),
            ],
        );
        let d = r.derive();
        assert_eq!(d.state, State::Blocked);
        let b = d.blocked.unwrap();
        assert_eq!(
            (b.source.as_str(), b.words.as_str()),
            ("result api_error", "Not logged in · Please run /login")
        );
        assert_eq!(
            b.remedy,
            "log in by running `claude` once (then /login) in a terminal with HOME=/root (the \
             account home /root/.claude), then send the turn again"
        );
        // Another failed turn keeps it blocked; a turn that works clears it.
        r.events
            .push(ev(kinds::TURN_ENDED, json!({"outcome": "failed"})));
        assert_eq!(r.derive().state, State::Blocked);
        r.events
            .push(ev(kinds::TURN_ENDED, json!({"outcome": "completed"})));
        let d = r.derive();
        assert_eq!((d.state, d.blocked, d.reason), (State::Idle, None, None));
    }

    #[test]
    fn codex_retries_show_while_running_and_their_end_blocks() {
        let mut r = rec_of(
            "codex",
            "codex",
            vec![
                ev(kinds::CREATED, json!({})),
                ev(
                    kinds::STARTED,
                    json!({"pid": 4, "account_home": "/root/.codex"}),
                ),
                ev(kinds::TURN_STARTED, json!({})),
                ev(
                    kinds::RETRYING,
                    json!({"words": "Reconnecting... 2/5: stream disconnected"}),
                ),
            ],
        );
        let d = r.derive();
        assert_eq!(d.state, State::Running);
        assert_eq!(
            d.reason.as_deref(),
            Some("codex retries: Reconnecting... 2/5: stream disconnected")
        );
        assert_eq!(d.blocked, None);
        r.events.push(ev(
            kinds::BLOCKED,
            json!({"source": "error notification",
                   "words": "Reconnecting... waiting for network: Connection failed"}),
        ));
        let d = r.derive();
        assert_eq!(d.state, State::Blocked);
        let b = d.blocked.unwrap();
        assert!(
            b.remedy
                .starts_with("check the network (codex could not reach its service)"),
            "{}",
            b.remedy
        );
        assert!(b.remedy.contains("`codex login`"), "{}", b.remedy);
        // Interrupted, it stays blocked; the next turn that starts clears it.
        r.events
            .push(ev(kinds::TURN_ENDED, json!({"outcome": "interrupted"})));
        assert_eq!(r.derive().state, State::Blocked);
        r.events.push(ev(kinds::TURN_STARTED, json!({})));
        let d = r.derive();
        assert_eq!((d.state, d.blocked, d.reason), (State::Running, None, None));
        // Blocked again, then resumed: a new generation starts unblocked.
        r.events.push(ev(
            kinds::BLOCKED,
            json!({"source": "error notification", "words": "w"}),
        ));
        r.events.push(ev(kinds::STOP_REQUESTED, json!({})));
        r.events
            .push(ev(kinds::EXITED, json!({"signal": "SIGTERM"})));
        assert_eq!(r.derive().blocked, None, "stopped is not blocked");
        r.events.push(ev(kinds::RESUMED, json!({"generation": 2})));
        r.events.push(ev(kinds::STARTED, json!({"pid": 5})));
        let d = r.derive();
        assert_eq!((d.state, d.blocked), (State::Running, None));
    }

    #[test]
    fn a_blocked_event_after_the_exit_changes_nothing() {
        let r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 4})),
            ev(kinds::EXITED, json!({"exit_code": 0})),
            ev(
                kinds::BLOCKED,
                json!({"source": "stderr", "words": "Not logged in"}),
            ),
        ]);
        let d = r.derive();
        assert_eq!((d.state, d.blocked), (State::Stopped, None));
    }

    #[test]
    fn permissions_open_counts_the_current_generations_unanswered_requests() {
        let asked = |id: &str, g: u64| {
            ev(
                kinds::PERMISSION_REQUESTED,
                json!({"generation": g, "id": id}),
            )
        };
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"generation": 1, "pid": 1})),
            asked("1", 1),
            asked("2", 1),
        ]);
        assert_eq!(r.derive().permissions_open, 2);
        r.events.push(ev(
            kinds::PERMISSION_DECIDED,
            json!({"generation": 1, "id": "1", "decision": "allow"}),
        ));
        assert_eq!(r.derive().permissions_open, 1);
        r.events.push(ev(
            kinds::PERMISSION_EXPIRED,
            json!({"generation": 1, "id": "2"}),
        ));
        assert_eq!(r.derive().permissions_open, 0);
        r.events.push(asked("3", 1));
        r.events
            .push(ev(kinds::EXITED, json!({"generation": 1, "exit_code": 0})));
        assert_eq!(r.derive().permissions_open, 0, "no process, nothing open");
        r.events.push(ev(kinds::RESUMED, json!({"generation": 2})));
        r.events.push(asked("4", 1));
        assert_eq!(
            r.derive().permissions_open,
            0,
            "another generation's request"
        );
        r.events.push(asked("5", 2));
        assert_eq!(r.derive().permissions_open, 1);
    }

    #[test]
    fn state_follows_what_was_observed() {
        let mut r = rec(vec![ev(kinds::CREATED, json!({}))]);
        assert_eq!(r.derive().state, State::Starting);
        r.events.push(ev(kinds::STARTED, json!({"pid": 42})));
        assert_eq!(r.derive().state, State::Running);
        assert_eq!(r.derive().pid, Some(42));
        r.events.push(ev(kinds::TURN_ENDED, json!({})));
        assert_eq!(r.derive().state, State::Idle);
        r.events.push(ev(kinds::TURN_STARTED, json!({})));
        assert_eq!(r.derive().state, State::Running);
        assert_eq!(
            r.derive().exit_code,
            None,
            "no exit code before one is observed"
        );
        r.events.push(ev(kinds::EXITED, json!({"exit_code": 3})));
        let d = r.derive();
        assert_eq!((d.state, d.exit_code), (State::Failed, Some(3)));
    }

    #[test]
    fn a_requested_stop_is_stopped_whatever_the_code() {
        let r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 1})),
            ev(kinds::STOP_REQUESTED, json!({})),
            ev(kinds::EXITED, json!({"signal": "SIGKILL"})),
        ]);
        let d = r.derive();
        assert_eq!(d.state, State::Stopped);
        assert_eq!(d.exit_code, None);
        assert_eq!(d.signal.as_deref(), Some("SIGKILL"));
    }

    #[test]
    fn lost_has_no_exit_code_and_resume_starts_a_new_generation() {
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"pid": 1})),
            ev(kinds::CONVERSATION, json!({"conversation_id": "c-1"})),
            ev(kinds::LOST, json!({"reason": "server restarted"})),
        ]);
        let d = r.derive();
        assert_eq!((d.state, d.exit_code, d.generation), (State::Lost, None, 1));
        r.events.push(ev(kinds::RESUMED, json!({"generation": 2})));
        r.events.push(ev(kinds::STARTED, json!({"pid": 2})));
        let d = r.derive();
        assert_eq!((d.state, d.generation, d.pid), (State::Running, 2, Some(2)));
        assert_eq!(
            d.conversation_id.as_deref(),
            Some("c-1"),
            "the conversation carries over"
        );
    }
    fn ev_at(kind: &str, at: &str, fields: Value) -> RunEvent {
        RunEvent {
            at: at.into(),
            ..ev(kind, fields)
        }
    }

    fn live_pipe() -> RunRecord {
        rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"generation": 1, "pid": 42})),
            ev(kinds::TURN_STARTED, json!({"generation": 1})),
        ])
    }

    #[test]
    fn an_open_permission_request_waits_until_it_is_decided_or_expires() {
        let mut r = live_pipe();
        assert_eq!(r.derive().waiting, None, "a working run waits on no one");
        r.events.push(ev_at(
            kinds::PERMISSION_REQUESTED,
            "2026-11-30T00:00:05.000Z",
            json!({"generation": 1, "id": "1", "method": "can_use_tool", "tool_name": "Bash",
                   "what": "cargo test", "reason": null, "options": ["allow", "deny"]}),
        ));
        r.events.push(ev_at(
            kinds::PERMISSION_REQUESTED,
            "2026-11-30T00:00:06.000Z",
            json!({"generation": 1, "id": "2", "method": "can_use_tool", "tool_name": "Edit",
                   "what": "src/x.rs", "reason": "to fix it", "options": ["allow", "deny"]}),
        ));
        let w = r.derive().waiting.expect("an open request waits");
        assert_eq!(w.source, WaitSource::Protocol);
        assert_eq!(w.reason, "permission: Bash `cargo test`");
        assert_eq!(w.since, "2026-11-30T00:00:05.000Z");
        r.events.push(ev(
            kinds::PERMISSION_DECIDED,
            json!({"generation": 1, "id": "1", "decision": "allow", "for_session": false}),
        ));
        let w = r
            .derive()
            .waiting
            .expect("the second request is still open");
        assert_eq!(w.reason, "permission: Edit `src/x.rs`");
        assert_eq!(w.since, "2026-11-30T00:00:06.000Z");
        r.events.push(ev(
            kinds::PERMISSION_EXPIRED,
            json!({"generation": 1, "id": "2"}),
        ));
        assert_eq!(r.derive().waiting, None, "decided and expired close them");
        // A request of an earlier generation is not this generation's.
        r.events.push(ev(
            kinds::PERMISSION_REQUESTED,
            json!({"generation": 1, "id": "3", "tool_name": "Bash", "what": "ls"}),
        ));
        r.events
            .push(ev(kinds::EXITED, json!({"generation": 1, "exit_code": 0})));
        assert_eq!(r.derive().waiting, None, "an ended run waits on no one");
        r.events.push(ev(kinds::RESUMED, json!({"generation": 2})));
        r.events
            .push(ev(kinds::STARTED, json!({"generation": 2, "pid": 43})));
        assert_eq!(
            r.derive().waiting,
            None,
            "the old generation's request is gone"
        );
    }

    #[test]
    fn a_pipe_turn_that_ended_waits_for_input_until_the_next_turn() {
        let mut r = live_pipe();
        r.events.push(ev_at(
            kinds::TURN_ENDED,
            "2026-11-30T00:00:09.000Z",
            json!({"generation": 1, "outcome": "completed"}),
        ));
        let d = r.derive();
        assert_eq!(d.state, State::Idle);
        let w = d.waiting.expect("an idle pipe run waits for input");
        assert_eq!(w.source, WaitSource::Protocol);
        assert_eq!(w.reason, "the turn ended; the tool waits for your input");
        assert_eq!(w.since, "2026-11-30T00:00:09.000Z");
        assert!(r.waiting_known());
        r.events
            .push(ev(kinds::TURN_STARTED, json!({"generation": 1})));
        assert_eq!(r.derive().waiting, None, "a new turn clears it");
        r.events
            .push(ev(kinds::TURN_ENDED, json!({"generation": 1})));
        assert!(r.derive().waiting.is_some());
        r.events.push(ev(kinds::STOP_REQUESTED, json!({})));
        r.events.push(ev(
            kinds::EXITED,
            json!({"generation": 1, "signal": "SIGTERM"}),
        ));
        assert_eq!(r.derive().state, State::Stopped);
        assert_eq!(r.derive().waiting, None, "a stopped run does not wait");
    }

    #[test]
    fn a_blocked_or_failed_run_never_waits() {
        let mut r = live_pipe();
        r.events
            .push(ev(kinds::TURN_ENDED, json!({"generation": 1})));
        r.events.push(ev(
            kinds::PERMISSION_REQUESTED,
            json!({"generation": 1, "id": "1", "tool_name": "Bash", "what": "ls"}),
        ));
        assert!(r.derive().waiting.is_some());
        r.events.push(ev(
            kinds::REQUEST_FAILED,
            json!({"generation": 1, "method": "session/new", "message": "Not logged in"}),
        ));
        let d = r.derive();
        assert_eq!(d.state, State::Blocked);
        assert_eq!(
            d.waiting, None,
            "a blocked run waits on a login, not on a turn"
        );
        let mut f = live_pipe();
        f.events
            .push(ev(kinds::TURN_ENDED, json!({"generation": 1})));
        f.events
            .push(ev(kinds::EXITED, json!({"generation": 1, "exit_code": 3})));
        assert_eq!(f.derive().state, State::Failed);
        assert_eq!(f.derive().waiting, None);
    }

    #[test]
    fn claudes_hooks_on_a_pty_run_say_it_waits_and_a_prompt_clears_it() {
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"generation": 1, "pid": 42})),
        ]);
        r.transport = "pty".into();
        assert!(
            r.waiting_known(),
            "claude's PTY form reports through its hooks"
        );
        assert_eq!(r.derive().waiting, None);
        r.events.push(ev_at(
            kinds::HOOK,
            "2026-11-30T00:01:00.000Z",
            json!({"generation": 1, "event": "Notification",
                   "message": "Claude needs your permission to use Bash"}),
        ));
        let w = r.derive().waiting.expect("a Notification hook waits");
        assert_eq!(w.source, WaitSource::Hook);
        assert_eq!(w.reason, "Claude needs your permission to use Bash");
        assert_eq!(w.since, "2026-11-30T00:01:00.000Z");
        r.events.push(ev(
            kinds::HOOK,
            json!({"generation": 1, "event": "UserPromptSubmit", "message": null}),
        ));
        assert_eq!(
            r.derive().waiting,
            None,
            "the person typed: it no longer waits"
        );
        r.events.push(ev_at(
            kinds::HOOK,
            "2026-11-30T00:02:00.000Z",
            json!({"generation": 1, "event": "Stop", "message": null}),
        ));
        let w = r.derive().waiting.expect("a Stop hook waits for input");
        assert_eq!(w.source, WaitSource::Hook);
        assert_eq!(w.reason, "the turn ended; the tool waits for your input");
        assert_eq!(w.since, "2026-11-30T00:02:00.000Z");
        // A later Notification keeps the earlier since, with its own words.
        r.events.push(ev(
            kinds::HOOK,
            json!({"generation": 1, "event": "Notification",
                   "message": "Claude is waiting for your input"}),
        ));
        let w = r.derive().waiting.unwrap();
        assert_eq!(w.reason, "Claude is waiting for your input");
        assert_eq!(w.since, "2026-11-30T00:02:00.000Z");
        // A hook of another generation says nothing about this one.
        r.events
            .push(ev(kinds::EXITED, json!({"generation": 1, "exit_code": 0})));
        r.events.push(ev(kinds::RESUMED, json!({"generation": 2})));
        r.events
            .push(ev(kinds::STARTED, json!({"generation": 2, "pid": 43})));
        assert_eq!(r.derive().waiting, None, "a new generation starts working");
        r.events.push(ev(
            kinds::HOOK,
            json!({"generation": 1, "event": "Stop", "message": null}),
        ));
        assert_eq!(
            r.derive().waiting,
            None,
            "a late hook of generation 1 is ignored"
        );
    }

    #[test]
    fn a_pty_form_without_hooks_has_an_unknown_waiting_state() {
        let mut r = rec(vec![
            ev(kinds::CREATED, json!({})),
            ev(kinds::STARTED, json!({"generation": 1, "pid": 42})),
        ]);
        r.tool = "codex".into();
        r.transport = "pty".into();
        assert!(!r.waiting_known());
        // Even a hook event (none can come from codex) is not taken as knowledge.
        r.events.push(ev(
            kinds::HOOK,
            json!({"generation": 1, "event": "Stop", "message": null}),
        ));
        assert_eq!(r.derive().waiting, None, "never guessed");
        r.transport = "pipe".into();
        assert!(
            r.waiting_known(),
            "every stdio form says when its turn ends"
        );
    }
}
