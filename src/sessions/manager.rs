//! The session manager: owns every run's record, its live process (through
//! [`crate::runs`]), its stdio conversation (through [`crate::providers::protocol`]) and the
//! callers' marks. Every lifecycle fact is appended to the ledger and to the run's record;
//! the run's state is derived from those facts, never set.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::marks::{Mark, Marks, MarksError};
use super::permissions::{self, PermissionList, PermissionView, PermitDecision, PermitRequest};
use super::record::{Derived, RunEvent, RunRecord, State, kinds};
use super::view::{
    BoundaryKind, Cleaned, CleanedUp, ContainmentView, Deleted, HoldView, MarksView, OutputView,
    RunBoundary, RunEvents, RunPage, RunView, StopSignals, Stopped, TranscriptView, WorktreeView,
};
use crate::files;
use crate::home::Home;
use crate::ledger::Ledger;
use crate::providers::profile::{ProfileError, Store};
use crate::providers::protocol::{Event, StdioSession};
use crate::providers::{self, PathFrom, ProviderError, Tool, Transport};
use crate::runs::{self, ReadOutcome, Run, RunError, RunSpec, Stream, TermSize};
use crate::text;
use crate::workspaces::{self, AdmitError};
use crate::worktrees::{self, WorktreeError};

mod pty_hooks;
pub use pty_hooks::HookSaid;

/// The environment variable that tags a run's processes as ours, so a later server can
/// recognise its orphans (with the recorded pid and start time).
pub const TAG_VAR: &str = "PROCTOR_RUN_TAG";

/// Why a call failed, with the HTTP status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no run {0}. Remedy: list the runs with `proctor session list` (--all shows archived \
         and snoozed ones too)"
    )]
    NotFound(String),
    /// 404 for a thing inside a run (a permission request); the message names the remedy.
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    /// 503: the server cannot do it in its present state (e.g. no worktrees folder).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl SessionError {
    fn internal(e: impl std::fmt::Display) -> Self {
        SessionError::Internal(e.to_string())
    }
}

impl From<MarksError> for SessionError {
    fn from(e: MarksError) -> Self {
        SessionError::internal(e)
    }
}

impl From<WorktreeError> for SessionError {
    fn from(e: WorktreeError) -> Self {
        match e {
            WorktreeError::Unprocessable(m) => SessionError::Unprocessable(m),
            WorktreeError::Conflict(m) => SessionError::Conflict(m),
            WorktreeError::NotFound(m) => SessionError::Conflict(m),
            WorktreeError::TooLarge(m) => SessionError::Unprocessable(m),
            WorktreeError::Unavailable(m) => SessionError::Unavailable(m),
            WorktreeError::Internal(m) => SessionError::Internal(m),
        }
    }
}

/// A workspace admission refusal, as the session API answers it.
fn admit_error(e: AdmitError) -> SessionError {
    match e {
        AdmitError::Unprocessable(m) => SessionError::Unprocessable(m),
        AdmitError::Conflict(m) => SessionError::Conflict(m),
        AdmitError::Internal(m) => SessionError::Internal(m),
    }
}

impl From<files::FilesError> for SessionError {
    fn from(e: files::FilesError) -> Self {
        SessionError::internal(e)
    }
}

impl From<crate::ledger::LedgerError> for SessionError {
    fn from(e: crate::ledger::LedgerError) -> Self {
        SessionError::internal(e)
    }
}

/// The longest `path` a start request may carry, in bytes.
pub const MAX_CLIENT_PATH_BYTES: usize = 16 * 1024;
/// The most entries a start request's `path` may have.
pub const MAX_CLIENT_PATH_ENTRIES: usize = 256;

/// Checks a start request's `path` (the client's PATH): bounded in bytes and entries, no NUL
/// (an environment variable cannot hold one). Relative and empty entries are allowed here
/// (the caller's shell may have them) and are never searched for the tool.
pub fn check_client_path(path: &str) -> Result<(), SessionError> {
    let refuse = |why: String| {
        SessionError::Unprocessable(format!(
            "refusing the start request's path: {why}. Remedy: send a shorter PATH (the \
             folders the tools live in are enough), or leave \"path\" out to use the server's"
        ))
    };
    if path.len() > MAX_CLIENT_PATH_BYTES {
        return Err(refuse(format!(
            "it has {} bytes, more than {MAX_CLIENT_PATH_BYTES}",
            path.len()
        )));
    }
    let entries = path.split(':').count();
    if entries > MAX_CLIENT_PATH_ENTRIES {
        return Err(refuse(format!(
            "it has {entries} entries, more than {MAX_CLIENT_PATH_ENTRIES}"
        )));
    }
    if path.contains('\0') {
        return Err(refuse("it contains a NUL byte".into()));
    }
    Ok(())
}

/// What `POST /runs` asks for.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    pub tool: Option<String>,
    pub profile: Option<String>,
    pub transport: Option<String>,
    pub workspace: Option<String>,
    pub name: Option<String>,
    /// A first turn for a stdio run, or text typed into a PTY run.
    pub prompt: Option<String>,
    pub rows: Option<u16>,
    pub cols: Option<u16>,
    /// True: the run works in a new linked worktree on a new branch of the workspace's
    /// repository (absent, null or false: in the workspace itself).
    pub worktree: Option<bool>,
    /// With `worktree`: the full commit id or the local branch the worktree starts at
    /// (default: the workspace's current commit).
    pub worktree_from: Option<String>,
    /// With `worktree`: skip the workspace's setup command for this one start.
    pub no_setup: Option<bool>,
    /// The client's PATH: the tool is resolved on it and the child runs with it (absent:
    /// the server's). Bounded by [`check_client_path`].
    pub path: Option<String>,
    /// The rig the provider process runs in (`session start --rig RIG`): a namespace
    /// rig's namespaces, its `/work` (or `/root`) as the working folder; the run's boundary
    /// is the rig's. Absent: on the host, not confined.
    pub rig: Option<String>,
}

/// How a run's provider process enters a rig, resolved by the server face from the rigs
/// (the sessions domain does not know rigs): [`Sessions::start_in`].
#[derive(Debug, Clone)]
pub struct Enclosure {
    /// The boundary the run's record, view and receipts name.
    pub boundary: RunBoundary,
    /// The host argv that enters the guest; the provider's argv is appended.
    pub prefix: Vec<String>,
    /// The guest's root as the host sees it: a program runs in the rig only if the same
    /// file is there at the same path.
    pub root: PathBuf,
    /// The proctor binary inside the guest (a demo shim's `demo-agent` runs as it).
    pub proctor: String,
    /// The guest's PATH.
    pub path: String,
    /// The guest folder the provider works in.
    pub cwd: String,
    /// Held while the provider process lives (the rig counts it as use), dropped at its end.
    pub hold: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// A start's checked inputs ([`Sessions::plan_start`]), ready to launch.
struct StartPlan {
    profile: providers::profile::Profile,
    transport: Transport,
    name: Option<String>,
    size: TermSize,
    path_var: Option<OsString>,
    path_from: PathFrom,
    program: PathBuf,
    demo: bool,
    admitted: workspaces::Admitted,
    /// For a worktree start: the repository and the commit it starts at.
    worktree: Option<(worktrees::Repo, String)>,
}

/// What `POST /runs/{ref}/input` carries: exactly one of `text`, `line`, `message`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputRequest {
    /// Text: a user turn for stdio forms, typed bytes for PTY forms.
    pub text: Option<String>,
    /// claude stream-json only: one whole protocol line, passed as is.
    pub line: Option<String>,
    /// claude stream-json only: a `message` object, wrapped in a user frame.
    #[schema(value_type = Option<Object>)]
    pub message: Option<Value>,
}

/// One live process generation of a run.
struct Live {
    run: Run,
    generation: u64,
    transport: Transport,
    stdio: Option<Arc<Mutex<StdioLink>>>,
    stop_requested: bool,
}

/// One run a previous server left live, as its sweep found it.
struct Sweep {
    run_ref: String,
    generation: u64,
    pid: Option<u32>,
    /// Its cgroup folder's name.
    folder: String,
    cgroups: Vec<PathBuf>,
    pids: Vec<runs::Ident>,
    /// Something of it was still there.
    found: bool,
}

/// What a stop's first step found.
enum Begun {
    /// Nothing to signal (the run is not live, or a previous server's sweep ended it).
    Done(Box<Stopped>),
    Stop(Run),
}

/// Input waiting for the handshake: a turn to encode, or a raw protocol line.
enum Queued {
    Text(String),
    Line(Vec<u8>),
}

/// The stdio conversation and what waits for it to be ready.
struct StdioLink {
    session: StdioSession,
    /// Input accepted before the handshake completed, sent in order once it has.
    queued: VecDeque<Queued>,
    /// Set when the tool answered with something that forbids going on (resume refused
    /// or diverged): the run is stopped and recorded as failed with this reason.
    fatal: Option<String>,
    /// The tool's permission requests held open for a person.
    permissions: permissions::Table,
    /// The profile refuses every permission request without asking.
    deny_all: bool,
}

struct Inner {
    records: BTreeMap<String, RunRecord>,
    live: HashMap<String, Live>,
    marks: Marks,
    next_number: u64,
    /// Runs a previous server left live, not swept yet: shown `recovering`.
    recovering: BTreeSet<String>,
    /// When each reader's reads of a run were last audited, per audit kind: a read is
    /// recorded once per reader, run and kind per [`READ_AUDIT_WINDOW`].
    read_audits: HashMap<(String, String, &'static str), std::time::Instant>,
}

/// How long one reader's reads of one run are recorded once (seed 002: 15 minutes).
pub const READ_AUDIT_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Settings of a manager (tests shorten the stop grace).
#[derive(Debug, Clone)]
pub struct Settings {
    pub stop_grace: Duration,
    pub ring_bytes: usize,
    pub transcript_cap: u64,
    /// Hold runs in cgroups where one is writable (tests turn it off to exercise the
    /// subreaper fallback).
    pub cgroups: bool,
    /// Test hook: abort the server at a point of a run's start (the crash windows a
    /// restart must handle).
    pub abort_at: Option<AbortAt>,
    /// Resolve and run the tools with the server's own PATH, ignoring a request's `path`
    /// (`proctor serve --keep-server-path`; the demo's server).
    pub keep_server_path: bool,
    /// How long a handoff waits for its new session's tool to confirm the first turn
    /// (`proctor serve --handoff-delivery-wait-ms`; [`HANDOFF_DELIVERY_WAIT`] by default).
    pub handoff_delivery_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stop_grace: runs::DEFAULT_STOP_GRACE,
            ring_bytes: runs::ring::DEFAULT_RING_BYTES,
            transcript_cap: runs::transcript::DEFAULT_TRANSCRIPT_CAP,
            cgroups: true,
            abort_at: None,
            keep_server_path: false,
            handoff_delivery_wait: HANDOFF_DELIVERY_WAIT,
        }
    }
}

/// Where the test hook aborts the server during a run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortAt {
    /// Right after the spawn, before `started` is appended to the ledger.
    Spawn,
    /// Right after `started` is in the ledger, before the run's `run.json` has it.
    StartedInLedger,
}

/// How this server holds its runs' processes.
#[derive(Debug, Clone)]
pub enum Containment {
    /// A cgroup per run under this folder.
    Cgroups(runs::cgroup::Base),
    /// The subreaper fallback, and why no cgroup is used.
    Subreaper { reason: String },
}

/// How long a stop waits, after the process is gone and its output drained, for the watcher
/// to record the exit. Generous: on a loaded machine the follower may still be reading.
const STOP_RECORD_WAIT: Duration = Duration::from_secs(15);

/// How many runs' end bookkeeping (records under the manager's lock, an attribution scan)
/// run at once on the blocking pool: they wait for the same lock, so more would only hold
/// more threads when many runs end together.
const END_SLOTS: usize = 2;

/// How often the keeper scans each run's processes under the subreaper fallback, where
/// attribution by scanning is the only way to know a reparented process's run; and the
/// shortest time between two passes anywhere.
const KEEP_INTERVAL: Duration = Duration::from_millis(200);
/// Under cgroups the kernel attributes every process (its cgroup), so the keeper's only
/// work is reaping the zombies of adopted processes: it passes when a child's exit is
/// signalled (SIGCHLD), and at least this often, in case a signal was missed.
const KEEP_IDLE_INTERVAL: Duration = Duration::from_secs(5);

/// What wakes the keeper before its interval: a SIGCHLD (an adopted process, or a run's
/// leader, exited).
#[derive(Default)]
struct KeeperBell {
    rang: Mutex<bool>,
    cv: Condvar,
}

impl KeeperBell {
    fn ring(&self) {
        *self.rang.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    /// Waits until the bell rang or `timeout` passed; clears it.
    fn wait(&self, timeout: Duration) {
        let g = self.rang.lock().unwrap_or_else(|e| e.into_inner());
        let (mut g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |rang| !*rang)
            .unwrap_or_else(|e| e.into_inner());
        *g = false;
    }
}

/// How long a PTY run's first prompt waits for the tool's first output before it is typed
/// anyway (the keys then wait in the terminal's input queue).
const FIRST_PROMPT_WAIT: Duration = Duration::from_secs(10);
/// How long the tool's output must pause, after its first output, before the first prompt
/// is typed: a tool drawing its screen writes a burst, then waits for keys.
const FIRST_PROMPT_QUIET: Duration = Duration::from_millis(200);

/// The manager; shared by every request as `Arc<Sessions>`.
pub struct Sessions {
    home: Home,
    ledger: Arc<Ledger>,
    inner: Mutex<Inner>,
    parent_env: Vec<(OsString, OsString)>,
    settings: Settings,
    tag_prefix: String,
    containment: Containment,
    /// The event loop every run of this manager is read, waited for and parsed on.
    reactor: runs::Reactor,
    /// How many runs' end bookkeeping may hold a thread of the reactor's blocking pool at
    /// once ([`END_SLOTS`]).
    end_slots: tokio::sync::Semaphore,
    /// Wakes the keeper when a child exits.
    keeper_bell: Arc<KeeperBell>,
    /// The runs whose record a limit reader is reading now (`pty_hooks`).
    limit_readers: Arc<Mutex<Vec<String>>>,
}

/// The reset time a limit shows (RFC 3339 UTC): the tool's Unix seconds, omitted when
/// absent, unrepresentable, or more than a year after `now` (issue 18 §2).
fn limit_reset(resets_at: Option<i64>, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp(resets_at?, 0)?;
    (at <= now + chrono::Duration::days(365))
        .then(|| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn runs_dir(home: &Home) -> PathBuf {
    home.data.join("runs")
}

fn record_path(home: &Home, run_ref: &str) -> PathBuf {
    runs_dir(home).join(run_ref).join("run.json")
}

/// A run's stored record (`data/runs/<ref>/run.json`), read from the file; `None` when there
/// is no such run.
pub fn stored_record(home: &Home, run_ref: &str) -> std::io::Result<Option<RunRecord>> {
    if parse_ref_number(run_ref).is_none() {
        return Ok(None);
    }
    match std::fs::read(record_path(home, run_ref)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse_ref_number(r: &str) -> Option<u64> {
    r.strip_prefix("run-")?.parse().ok()
}

/// True when `program` is a proctor demo shim (the fake stands in for the tool).
fn is_demo_shim(program: &Path) -> bool {
    crate::providers::fake::is_demo_shim(program)
}

impl Sessions {
    /// Loads every run record under `data/runs`, brings each up to the ledger (the source
    /// of truth: events a crash kept out of `run.json` are added, a missing `run.json` is
    /// rebuilt), loads the callers' marks and finds how runs will be held. Runs a previous
    /// server left live are `recovering` until [`Sessions::recover`] sweeps them.
    pub fn open(
        home: &Home,
        ledger: Arc<Ledger>,
        settings: Settings,
    ) -> Result<Arc<Sessions>, SessionError> {
        let dir = runs_dir(home);
        files::ensure_private_dir(&dir)?;
        let mut records = BTreeMap::new();
        let mut next_number = 1;
        for entry in std::fs::read_dir(&dir).map_err(SessionError::internal)? {
            let entry = entry.map_err(SessionError::internal)?;
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(n) = parse_ref_number(&name) else {
                continue;
            };
            next_number = next_number.max(n + 1);
            let path = entry.path().join("run.json");
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(SessionError::internal(format!("{}: {e}", path.display()))),
            };
            let rec: RunRecord = serde_json::from_slice(&bytes).map_err(|e| {
                SessionError::internal(format!("{} is not a run record: {e}", path.display()))
            })?;
            records.insert(rec.run_ref.clone(), rec);
        }
        // Refs are never reused, even after delete: the ledger remembers every creation.
        let from_ledger = ledger_run_events(&home.ledger_path());
        next_number = next_number.max(from_ledger.next_number);
        let mut repaired: Vec<RunRecord> = Vec::new();
        for (run_ref, events) in &from_ledger.events {
            if from_ledger.deleted.contains(run_ref) {
                continue;
            }
            match records.get_mut(run_ref) {
                Some(rec) => {
                    let last = rec.events.last().map(|e| e.seq).unwrap_or(0);
                    let missing: Vec<RunEvent> =
                        events.iter().filter(|e| e.seq > last).cloned().collect();
                    if !missing.is_empty() {
                        crate::log::log(&format!(
                            "sessions: {run_ref}: {} ledger event(s) missing from its run.json \
                             (a crash between the two writes) were added to it",
                            missing.len()
                        ));
                        // A move is one ledger event: the profile follows it.
                        for e in &missing {
                            if e.kind == kinds::MOVED
                                && let Some(to) = e.fields.get("to").and_then(Value::as_str)
                            {
                                rec.profile = to.to_string();
                            }
                        }
                        rec.events.extend(missing);
                        repaired.push(rec.clone());
                    }
                }
                None => {
                    if let Some(rec) = rebuild_record(run_ref, events) {
                        crate::log::log(&format!(
                            "sessions: {run_ref}: run.json is missing; rebuilt from its {} \
                             ledger event(s) (its name and worktree details are not in the \
                             ledger and stay unknown)",
                            events.len()
                        ));
                        repaired.push(rec.clone());
                        records.insert(run_ref.clone(), rec);
                    }
                }
            }
        }
        let recovering: BTreeSet<String> = records
            .values()
            .filter(|r| r.derive().state.is_live())
            .map(|r| r.run_ref.clone())
            .collect();
        let marks = Marks::load(&home.data.join("marks.json"))?;
        let home_key = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            home.data.to_string_lossy().as_bytes(),
        ))[..16]
            .to_string();
        let tag_prefix = format!("{home_key}:");
        let containment = if settings.cgroups {
            match runs::cgroup::Base::detect(&home_key) {
                Ok(base) => Containment::Cgroups(base),
                Err(reason) => Containment::Subreaper { reason },
            }
        } else {
            Containment::Subreaper {
                reason: "cgroups are turned off for this server".into(),
            }
        };
        match &containment {
            Containment::Cgroups(b) => crate::log::log(&format!(
                "sessions: each run is held in a cgroup of its own under {}",
                b.dir.display()
            )),
            Containment::Subreaper { reason } => crate::log::log(&format!(
                "sessions: no cgroup can hold runs ({reason}); runs are held by the subreaper \
                 fallback (descendants attributed by scanning)"
            )),
        }
        let sessions = Arc::new(Sessions {
            home: home.clone(),
            ledger,
            inner: Mutex::new(Inner {
                records,
                live: HashMap::new(),
                marks,
                next_number,
                recovering,
                read_audits: HashMap::new(),
            }),
            parent_env: std::env::vars_os().collect(),
            settings,
            tag_prefix,
            containment,
            reactor: runs::Reactor::start().map_err(SessionError::internal)?,
            end_slots: tokio::sync::Semaphore::new(END_SLOTS),
            keeper_bell: Arc::new(KeeperBell::default()),
            limit_readers: Arc::new(Mutex::new(Vec::new())),
        });
        for rec in &repaired {
            sessions.persist(rec)?;
        }
        // SIGCHLD rings the keeper's bell (tokio's handler only notifies: it reaps nothing).
        {
            let bell = Arc::clone(&sessions.keeper_bell);
            let _guard = sessions.reactor.handle().enter();
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()) {
                Ok(mut sig) => {
                    sessions.reactor.handle().spawn(async move {
                        while sig.recv().await.is_some() {
                            bell.ring();
                        }
                    });
                }
                Err(e) => crate::log::log(&format!(
                    "sessions: SIGCHLD cannot be watched ({e}); the keeper passes every {} s",
                    KEEP_IDLE_INTERVAL.as_secs()
                )),
            }
        }
        let weak = Arc::downgrade(&sessions);
        let bell = Arc::clone(&sessions.keeper_bell);
        std::thread::Builder::new()
            .name("run-keeper".into())
            .spawn(move || {
                while let Some(me) = weak.upgrade() {
                    let scan = me.keep();
                    drop(me);
                    // At most one pass per KEEP_INTERVAL; under cgroups, the next one waits
                    // for a child's exit (or the idle interval), not for the clock.
                    std::thread::sleep(KEEP_INTERVAL);
                    if !scan {
                        bell.wait(KEEP_IDLE_INTERVAL);
                    }
                }
            })
            .map_err(SessionError::internal)?;
        Ok(sessions)
    }

    /// True when the kernel places `pid` in one of this server's run cgroups (always false
    /// under the subreaper fallback, where ancestry is the only sign).
    pub fn holds_process(&self, pid: u32) -> bool {
        match &self.containment {
            Containment::Cgroups(b) => pid != 0 && b.holds(pid),
            Containment::Subreaper { .. } => false,
        }
    }

    /// Where claude's hooks on a PTY run report to: this server's own executable and its
    /// socket (none when either path is not UTF-8: the run then has no hooks, and its waiting
    /// state stays unknown rather than wrong).
    fn hook_target(&self) -> Option<providers::HookTarget> {
        let exe = std::env::current_exe().ok()?;
        Some(providers::HookTarget {
            exe: exe.to_str()?.to_string(),
            socket: self.home.socket_path().to_str()?.to_string(),
        })
    }

    /// The live run (and its generation) that holds the process `pid`, as the kernel says:
    /// a member of the run's cgroup, or a process whose ppid chain reaches the run's leader,
    /// or one the keeper attributed to the run (pid and start time). `start_time` is the
    /// caller's as read at accept: a pid that now names another process holds nothing.
    pub fn run_holding(&self, pid: u32, start_time: u64) -> Option<(String, u64)> {
        if pid <= 1 || runs::process::proc_stat(pid).map(|s| s.start_time) != Some(start_time) {
            return None;
        }
        let live: Vec<(String, u64, Run)> = {
            let inner = self.lock();
            inner
                .live
                .iter()
                .map(|(r, l)| (r.clone(), l.generation, l.run.clone()))
                .collect()
        };
        // The chain of ancestors of the caller, each (pid, start time), up to init.
        let mut chain: Vec<(u32, u64)> = Vec::new();
        let mut cur = pid;
        for _ in 0..4096 {
            let Some(st) = runs::process::proc_stat(cur) else {
                break;
            };
            chain.push((cur, st.start_time));
            let Ok(ppid) = u32::try_from(st.ppid) else {
                break;
            };
            if ppid <= 1 || ppid == std::process::id() {
                break;
            }
            cur = ppid;
        }
        // The caller's own cgroup, read once: which run folder (if any) the kernel places it
        // in. Reading every run's members instead cost one walk per live run per call
        // (measured with 1,000 runs: hooks queued on it, 180 threads waiting).
        let caller_folder = match &self.containment {
            Containment::Cgroups(base) => base.run_folder_of(pid),
            Containment::Subreaper { .. } => None,
        };
        let found = live.into_iter().find(|(_, _, run)| {
            let in_cgroup = caller_folder.as_deref().is_some_and(|name| {
                run.hold()
                    .cgroup()
                    .and_then(|dir| dir.file_name())
                    .is_some_and(|f| f == std::ffi::OsStr::new(name))
            });
            let leader = run.start_time().map(|t| (run.pid(), t));
            let tracked = run.tracked().snapshot();
            in_cgroup
                || chain
                    .iter()
                    .any(|id| Some(*id) == leader || tracked.contains(id))
        });
        // The caller must still be the process it was: a pid reused meanwhile is refused.
        if runs::process::proc_stat(pid).map(|s| s.start_time) != Some(start_time) {
            return None;
        }
        found.map(|(r, g, _)| (r, g))
    }

    /// Records what a tool's own hook reported (`sessions.run.hook`) for the run that holds
    /// the calling process `pid` (see [`Sessions::run_holding`]), and only that run. `None`
    /// when no live run holds it: the caller is refused, whatever else it presents. The
    /// hook's session id becomes the run's conversation ([`pty_hooks`]); a `StopFailure`
    /// makes the server read the run's record for a limit.
    pub fn record_hook(
        self: &Arc<Self>,
        pid: u32,
        start_time: u64,
        said: &HookSaid<'_>,
    ) -> Result<Option<String>, SessionError> {
        let Some((run_ref, generation)) = self.run_holding(pid, start_time) else {
            return Ok(None);
        };
        let mut inner = self.lock();
        if inner.live.get(&run_ref).map(|l| l.generation) != Some(generation) {
            return Ok(None);
        }
        let message = said.message.map(|m| text::one_line(m, 300));
        self.record(
            &mut inner,
            &run_ref,
            kinds::HOOK,
            json!({"generation": generation, "event": said.event, "message": message, "pid": pid,
                   "source": said.source.map(|s| text::one_line(s, 32))}),
        )?;
        if let Some(id) = said.session_id {
            self.hook_conversation(&mut inner, &run_ref, generation, id, said)?;
        }
        drop(inner);
        if said.event == "StopFailure" {
            self.read_pty_limit(&run_ref, generation);
        }
        Ok(Some(run_ref))
    }

    /// How runs are held, for `GET /v1/server`.
    pub fn containment_view(&self) -> ContainmentView {
        let recovering = self.lock().recovering.len();
        match &self.containment {
            Containment::Cgroups(b) => ContainmentView::Cgroup {
                cgroup_base: b.dir.to_string_lossy().into_owned(),
                recovering,
            },
            Containment::Subreaper { reason } => ContainmentView::Subreaper {
                reason: reason.clone(),
                recovering,
            },
        }
    }

    /// At server exit, once every run is stopped: removes the empty run cgroup folders and
    /// the home's cgroup folder (a folder that still holds a process stays, for the next
    /// server's sweep).
    pub fn release_cgroups(&self) {
        if let Containment::Cgroups(base) = &self.containment {
            // A folder whose last processes were just killed can be busy until their
            // zombies are reaped (the keeper's pass does it): a few tries, briefly.
            for _ in 0..40 {
                self.keep();
                for dir in base.folders() {
                    if !runs::cgroup::populated(&dir) {
                        let _ = runs::cgroup::remove(&dir);
                    }
                }
                if base.folders().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            base.remove_if_empty();
        }
    }

    /// How many runs a previous server left that are not swept yet.
    pub fn recovering(&self) -> usize {
        self.lock().recovering.len()
    }

    /// One pass of the keeper: attributes the processes of each live run held by the
    /// subreaper fallback (its descendants, recorded with their start times so a
    /// reparented one stays known), and reaps the zombies of adopted run processes. A run
    /// in a cgroup needs no attribution: the kernel names its processes' cgroup whenever it
    /// is asked ([`Sessions::run_holding`], [`runs::Run::extra_members`]). Returns whether a
    /// live run needs the next scan on the clock (one held by the subreaper fallback).
    fn keep(&self) -> bool {
        let runs: Vec<(String, u64, Run)> = {
            let inner = self.lock();
            inner
                .live
                .iter()
                .map(|(r, l)| (r.clone(), l.generation, l.run.clone()))
                .collect()
        };
        let scan = runs
            .iter()
            .any(|(_, _, r)| r.hold() == runs::Hold::Subreaper);
        if runs.is_empty() {
            return scan;
        }
        let snap = runs::tree::Snapshot::take();
        let me = std::process::id() as i32;
        let mut candidates: Vec<runs::Ident> = Vec::new();
        // Orphans adopted by the server (it is a child subreaper) that no scan saw yet, e.g.
        // the grandchild of a double fork whose middle process exited between two scans:
        // the run tag in their environment names their run (unless they cleared it).
        let known: BTreeSet<u32> = runs
            .iter()
            .flat_map(|(_, _, r)| {
                let mut v: Vec<u32> = r.tracked().snapshot().into_iter().map(|(p, _)| p).collect();
                v.push(r.pid());
                v
            })
            .collect();
        let mut adopted: HashMap<String, Vec<runs::Ident>> = HashMap::new();
        if runs
            .iter()
            .any(|(_, _, r)| r.hold() == runs::Hold::Subreaper)
        {
            for (pid, st) in snap.iter() {
                if st.ppid != me || st.state == 'Z' || known.contains(pid) {
                    continue;
                }
                let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                    continue;
                };
                let want = format!("{TAG_VAR}=");
                if let Some(kv) = env
                    .split(|b| *b == 0)
                    .find(|kv| kv.starts_with(want.as_bytes()))
                {
                    let tag = String::from_utf8_lossy(&kv[want.len()..]).to_string();
                    adopted.entry(tag).or_default().push((*pid, st.start_time));
                }
            }
        }
        for (run_ref, generation, run) in &runs {
            let t = run.tracked();
            let leader = run.pid();
            let mut changed = match run.hold() {
                // The kernel keeps the attribution: nothing to scan.
                runs::Hold::Cgroup { .. } => continue,
                runs::Hold::Subreaper => {
                    let mut roots: Vec<u32> = t
                        .snapshot()
                        .into_iter()
                        .filter(|id| snap.living(*id))
                        .map(|(p, _)| p)
                        .collect();
                    let tag = format!("{}{run_ref}:{generation}", self.tag_prefix);
                    let orphans = adopted.remove(&tag).unwrap_or_default();
                    roots.extend(orphans.iter().map(|(p, _)| *p));
                    if !run.reaped() {
                        roots.push(leader);
                    }
                    t.add(orphans) | t.add(snap.descendants(&roots))
                }
            };
            for id in t.snapshot() {
                if snap
                    .get(id.0)
                    .is_some_and(|s| s.start_time == id.1 && s.ppid == me && s.state == 'Z')
                {
                    candidates.push(id);
                }
            }
            changed |= t.prune(&snap);
            // Kept on disk for a later server's sweep, at most once a second per run (each
            // write is fsync'd).
            if run.hold() == runs::Hold::Subreaper && t.due(changed, Duration::from_secs(1)) {
                let ids = t.snapshot();
                let path = runs_dir(&self.home)
                    .join(run_ref)
                    .join(format!("gen-{generation}"))
                    .join(PROCS_FILE);
                if let Ok(bytes) = serde_json::to_vec(&ids) {
                    let _ = files::ensure_private_dir(&files::parent_of(&path))
                        .and_then(|_| files::write_atomic(&path, &bytes));
                }
            }
        }
        // Under cgroups, a process killed between two scans may never have been seen: its
        // zombie still names the run's cgroup.
        if let Containment::Cgroups(base) = &self.containment {
            for (pid, s) in snap.iter() {
                if s.ppid == me && s.state == 'Z' && base.holds(*pid) {
                    candidates.push((*pid, s.start_time));
                }
            }
        }
        if candidates.is_empty() {
            return scan;
        }
        // Under the lock: every leader spawned so far is in `live` (spawns hold it), and a
        // leader is reaped by its own waiter only.
        let inner = self.lock();
        let leaders: BTreeSet<u32> = inner
            .live
            .values()
            .filter(|l| !l.run.reaped())
            .map(|l| l.run.pid())
            .collect();
        for id in candidates {
            if !leaders.contains(&id.0) {
                runs::tree::reap_adopted(id);
            }
        }
        scan
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a lifecycle fact to the ledger and to the run's record, and persists it.
    fn record(
        &self,
        inner: &mut Inner,
        run_ref: &str,
        kind: &str,
        fields: Value,
    ) -> Result<u64, SessionError> {
        let mut map = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut ledger_fields = map.clone();
        ledger_fields.insert("run".into(), Value::String(run_ref.to_string()));
        let seq = self.ledger.append(kind, &ledger_fields)?;
        if kind == kinds::STARTED && self.settings.abort_at == Some(AbortAt::StartedInLedger) {
            crate::log::log("test hook: aborting with `started` in the ledger only");
            std::process::abort();
        }
        map.remove("run");
        let rec = inner
            .records
            .get_mut(run_ref)
            .ok_or_else(|| SessionError::NotFound(run_ref.to_string()))?;
        rec.events.push(RunEvent {
            seq,
            at: now(),
            kind: kind.to_string(),
            fields: map,
        });
        self.persist(rec)?;
        Ok(seq)
    }

    fn persist(&self, rec: &RunRecord) -> Result<(), SessionError> {
        let path = record_path(&self.home, &rec.run_ref);
        files::ensure_private_dir(&files::parent_of(&path))?;
        let mut bytes = serde_json::to_vec_pretty(rec).map_err(SessionError::internal)?;
        bytes.push(b'\n');
        files::write_atomic(&path, &bytes)?;
        Ok(())
    }

    /// Sweeps what a previous server left: every run it left live (by the ledger's events)
    /// has its processes ended, all runs at once, each within the stop grace, and is
    /// recorded `lost` with no exit code; then every run cgroup folder still under this
    /// home's cgroup (a crash between creating it and recording the start) is emptied and
    /// removed. Meant to run on its own thread once the socket listens; until a run is
    /// swept it shows `recovering`.
    pub fn recover(self: &Arc<Self>) {
        let refs: Vec<String> = self.lock().recovering.iter().cloned().collect();
        if refs.is_empty() {
            self.sweep_cgroup_leftovers(&BTreeSet::new());
            return;
        }
        crate::log::log(&format!(
            "sessions: sweeping {} run(s) a previous server left live",
            refs.len()
        ));
        let tags = tagged_processes_all(&self.tag_prefix);
        // What each run left, from one look at the processes (nothing is signalled yet).
        let snap = runs::tree::Snapshot::take();
        let plans: Vec<Sweep> = refs
            .iter()
            .filter_map(|r| self.sweep_plan(r, &tags, &snap))
            .collect();
        drop(snap);
        // Ended all at once, on timers on the reactor (no thread per run); each is recorded
        // lost here as soon as its own processes are gone.
        let grace = self.settings.stop_grace;
        let (tx, rx) = std::sync::mpsc::channel();
        let work: Vec<(Vec<runs::Ident>, Vec<PathBuf>, bool)> = plans
            .iter()
            .map(|p| (p.pids.clone(), p.cgroups.clone(), p.found))
            .collect();
        self.reactor.handle().spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, (pids, cgroups, found)) in work.into_iter().enumerate() {
                set.spawn(async move {
                    let ended = !found || end_processes(&pids, &cgroups, grace).await;
                    (i, ended)
                });
            }
            while let Some(done) = set.join_next().await {
                if let Ok(done) = done {
                    let _ = tx.send(done);
                }
            }
        });
        let mut swept = BTreeSet::new();
        for (i, ended) in rx {
            swept.insert(self.sweep_finish(&plans[i], ended));
        }
        self.sweep_cgroup_leftovers(&swept);
        crate::log::log("sessions: sweep done");
    }

    /// What one run a previous server left live holds: its processes and cgroups.
    fn sweep_plan(
        &self,
        run_ref: &str,
        tags: &HashMap<String, Vec<u32>>,
        snap: &runs::tree::Snapshot,
    ) -> Option<Sweep> {
        let (d, started) = {
            let inner = self.lock();
            let rec = inner.records.get(run_ref)?;
            let d = rec.derive();
            let started = rec
                .events
                .iter()
                .rev()
                .find(|e| {
                    e.kind == kinds::STARTED
                        && e.fields.get("generation").and_then(Value::as_u64) == Some(d.generation)
                })
                .map(|e| e.fields.clone())
                .unwrap_or_default();
            (d, started)
        };
        let pid = started
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok());
        let start_time = started.get("start_time").and_then(Value::as_u64);
        let tag = started
            .get("tag")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}{run_ref}:{}", self.tag_prefix, d.generation));
        // The processes: the cgroup's members, the tagged ones, the leader if it is still
        // the one started (pid and start time), those the previous server attributed, and
        // every descendant of all of them.
        let folder = runs::cgroup::Base::name(run_ref, d.generation);
        let mut cgroups: Vec<PathBuf> = Vec::new();
        if let Some(p) = started.get("cgroup").and_then(Value::as_str) {
            cgroups.push(PathBuf::from(p));
        }
        if let Containment::Cgroups(b) = &self.containment {
            let p = b.dir.join(&folder);
            if !cgroups.contains(&p) {
                cgroups.push(p);
            }
        }
        cgroups.retain(|p| p.join("cgroup.procs").exists());
        let mut ids: BTreeSet<runs::Ident> = BTreeSet::new();
        let mut roots: Vec<u32> = tags.get(&tag).cloned().unwrap_or_default();
        if let (Some(pid), Some(st)) = (pid, start_time)
            && runs::is_same_process(pid, st)
        {
            roots.push(pid);
        }
        let procs_file = runs_dir(&self.home)
            .join(run_ref)
            .join(format!("gen-{}", d.generation))
            .join(PROCS_FILE);
        if let Ok(bytes) = std::fs::read(&procs_file)
            && let Ok(list) = serde_json::from_slice::<Vec<runs::Ident>>(&bytes)
        {
            roots.extend(
                list.into_iter()
                    .filter(|id| snap.living(*id))
                    .map(|(p, _)| p),
            );
        }
        for c in &cgroups {
            roots.extend(runs::cgroup::members(c));
        }
        roots.retain(|p| *p != std::process::id());
        for &p in &roots {
            if let Some(s) = snap.get(p) {
                ids.insert((p, s.start_time));
            }
        }
        ids.extend(snap.descendants(&roots));
        let pids: Vec<runs::Ident> = ids.into_iter().collect();
        let found = !pids.is_empty() || cgroups.iter().any(|c| runs::cgroup::populated(c));
        Some(Sweep {
            run_ref: run_ref.to_string(),
            generation: d.generation,
            pid,
            folder,
            cgroups,
            pids,
            found,
        })
    }

    /// Once a swept run's processes are ended: removes its cgroups and records it lost.
    /// Returns its cgroup folder name.
    fn sweep_finish(&self, sweep: &Sweep, ended: bool) -> String {
        let run_ref = &sweep.run_ref;
        for c in &sweep.cgroups {
            if let Err(e) = runs::cgroup::remove(c) {
                crate::log::log(&format!(
                    "sessions: {run_ref}: cannot remove the cgroup {}: {e}",
                    c.display()
                ));
            }
        }
        let reason = if sweep.found {
            "the server that owned it stopped; the processes it left were ended at restart"
        } else {
            "the server that owned it stopped; its process was gone at restart"
        };
        let mut inner = self.lock();
        let _ = self
            .record(
                &mut inner,
                run_ref,
                kinds::LOST,
                json!({"generation": sweep.generation, "pid": sweep.pid, "found": sweep.found, "ended": ended, "processes": sweep.pids.len(), "reason": reason}),
            )
            .inspect_err(|e| {
                crate::log::log(&format!("sessions: {run_ref}: cannot record lost: {e}"))
            });
        inner.recovering.remove(run_ref);
        sweep.folder.clone()
    }

    /// Empties and removes the run cgroup folders under this home's cgroup that no swept
    /// run accounted for (a crash after the folder was made, before the start was recorded).
    fn sweep_cgroup_leftovers(&self, swept: &BTreeSet<String>) {
        let Containment::Cgroups(base) = &self.containment else {
            return;
        };
        // Listed under the lock: a run started meanwhile has its folder made and its
        // process recorded as live under the same lock, so it is never taken for a leftover.
        let leftovers: Vec<PathBuf> = {
            let inner = self.lock();
            let live: BTreeSet<String> = inner
                .live
                .iter()
                .map(|(r, l)| runs::cgroup::Base::name(r, l.generation))
                .collect();
            base.folders()
                .into_iter()
                .filter(|dir| {
                    let name = dir
                        .file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default();
                    !live.contains(&name) && !swept.contains(&name)
                })
                .collect()
        };
        for dir in leftovers {
            let e = runs::cgroup::end_all(&dir, self.settings.stop_grace, runs::KILL_WAIT);
            if e.found || !e.removed {
                crate::log::log(&format!(
                    "sessions: a run cgroup left behind, {}: {}",
                    dir.display(),
                    if e.found {
                        format!(
                            "its processes were ended ({}), folder {}",
                            if e.sent_kill { "SIGKILL" } else { "SIGTERM" },
                            if e.removed { "removed" } else { "NOT removed" }
                        )
                    } else {
                        "empty, but it could not be removed".into()
                    }
                ));
            }
        }
    }

    /// A variable of the server's own environment (what it was started with).
    fn parent_var(&self, name: &str) -> Option<OsString> {
        self.parent_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// The user's home folder, where the tools' default account homes live.
    fn user_home(&self) -> PathBuf {
        self.parent_var("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"))
    }

    /// Starts a run.
    pub fn start(self: &Arc<Self>, req: StartRequest) -> Result<RunView, SessionError> {
        if let Some(r) = &req.rig {
            return Err(SessionError::BadRequest(format!(
                "rig {}: a session in a rig is started through the server (`proctor session \
                 start --rig`), which resolves the rig",
                text::one_line(r, 60)
            )));
        }
        self.start_in(req, None)
    }

    /// [`Sessions::start`], with the provider process in a rig when `enclosure` is given
    /// (the server resolved `req.rig` into it). A run in a rig has no host worktree.
    pub fn start_in(
        self: &Arc<Self>,
        req: StartRequest,
        enclosure: Option<Enclosure>,
    ) -> Result<RunView, SessionError> {
        let plan = self.plan_start(&req, enclosure.as_ref())?;
        let prompt = req.prompt.filter(|p| !p.is_empty());
        let (run_ref, mut inner) = self.launch_planned(plan, enclosure, None)?;
        if let Some(prompt) = prompt
            && inner.live.contains_key(&run_ref)
        {
            self.first_turn_locked(&mut inner, &run_ref, prompt)?;
        }
        self.view(&inner, &run_ref, None)
    }

    /// Sends a new run's first turn: typed into a PTY run once the tool is up
    /// ([`Self::type_first_prompt`]), a turn of a stdio run (queued until its handshake).
    fn first_turn_locked(
        self: &Arc<Self>,
        inner: &mut Inner,
        run_ref: &str,
        prompt: String,
    ) -> Result<(), SessionError> {
        let pty = inner
            .live
            .get(run_ref)
            .is_some_and(|l| l.transport == Transport::Pty);
        if pty {
            self.type_first_prompt(inner, run_ref, prompt);
            return Ok(());
        }
        self.input_locked(
            inner,
            run_ref,
            &InputRequest {
                text: Some(prompt),
                ..Default::default()
            },
        )
    }

    /// Every check of a start, before anything is created: the profile, the transport, the
    /// name, the tool on the PATH, the workspace's admission and, for a worktree, its
    /// repository and starting commit.
    fn plan_start(
        &self,
        req: &StartRequest,
        enclosure: Option<&Enclosure>,
    ) -> Result<StartPlan, SessionError> {
        if enclosure.is_some() && req.worktree.unwrap_or(false) {
            return Err(SessionError::Unprocessable(
                "a run in a rig works in the rig's own /work (the copy `rig open --workspace` \
                 made), not in a host worktree the rig cannot see: leave --worktree out; the \
                 rig's commits come back with `proctor rig fetch RIG`"
                    .into(),
            ));
        }
        let store = Store::new(&self.home.config);
        let user_home = self.user_home();
        let profile = match (&req.profile, &req.tool) {
            (Some(p), _) => store.find(p, &user_home).map_err(|e| match e {
                ProfileError::NotFound { .. } => SessionError::Unprocessable(e.to_string()),
                other => SessionError::BadRequest(other.to_string()),
            })?,
            (None, Some(t)) => {
                let tool =
                    Tool::parse(t).map_err(|e| SessionError::Unprocessable(e.to_string()))?;
                providers::profile::Profile::default_for(tool, &user_home)
            }
            (None, None) => {
                return Err(SessionError::BadRequest(format!(
                    "name a tool ({}) or a profile",
                    Tool::names()
                )));
            }
        };
        if let Some(t) = &req.tool
            && t != profile.tool.name()
        {
            return Err(SessionError::BadRequest(format!(
                "profile {} runs {}, not {t}",
                profile.name,
                profile.tool.name()
            )));
        }
        let transport = match req
            .transport
            .as_deref()
            .unwrap_or(providers::DEFAULT_TRANSPORT.name())
        {
            "pipe" => Transport::Pipe,
            "pty" => Transport::Pty,
            other => {
                return Err(SessionError::BadRequest(format!(
                    "transport {other:?} is not pty or pipe"
                )));
            }
        };
        let worktree = req.worktree.unwrap_or(false);
        if req.worktree_from.is_some() && !worktree {
            return Err(SessionError::Unprocessable(
                "worktree_from names where a new worktree starts, and this start has no \
                 worktree: add \"worktree\": true (`--worktree`), or leave worktree_from out"
                    .into(),
            ));
        }
        let workspace_arg = req.workspace.clone().ok_or_else(|| {
            SessionError::BadRequest(
                "workspace is required: an absolute path to a folder, or a workspace ref".into(),
            )
        })?;
        let name = match &req.name {
            Some(n) => {
                text::validate_run_name(n).map_err(|e| SessionError::BadRequest(e.to_string()))?
            }
            None => None,
        };
        let size = TermSize {
            rows: req.rows.unwrap_or(24).max(1),
            cols: req.cols.unwrap_or(80).max(1),
        };
        if let Some(p) = &req.path {
            check_client_path(p)?;
        }
        let (path_var, path_from) = match &req.path {
            Some(p) if !self.settings.keep_server_path => {
                (Some(OsString::from(p)), PathFrom::Client)
            }
            _ => (self.parent_var("PATH"), PathFrom::Server),
        };
        let program = providers::resolve_from(profile.tool, path_var.as_deref(), path_from)
            .map_err(|e| match e {
                ProviderError::NotInstalled { .. } => SessionError::Unprocessable(e.to_string()),
                other => SessionError::BadRequest(other.to_string()),
            })?;
        let demo = is_demo_shim(&program);

        // Admission and every check come before anything is created.
        let admitted = workspaces::admit_start(
            &self.home,
            &workspace_arg,
            worktree,
            req.no_setup.unwrap_or(false),
        )
        .map_err(admit_error)?;
        let ws_ref = admitted.workspace_ref.clone();
        let worktree_plan = if worktree {
            let repo = worktrees::validate_repo(&admitted.path)?;
            let commit = worktrees::resolve_from(&repo, req.worktree_from.as_deref())?;
            Some((repo, commit))
        } else {
            workspaces::admit_folder(&self.home, ws_ref.as_deref(), profile.tool, &admitted.path)
                .map_err(admit_error)?;
            None
        };
        Ok(StartPlan {
            profile,
            transport,
            name,
            size,
            path_var,
            path_from,
            program,
            demo,
            admitted,
            worktree: worktree_plan,
        })
    }

    /// Creates and launches the run a [`StartPlan`] checked; its ref, and the manager's lock
    /// still held since the launch (so a first turn goes to the process just spawned).
    /// `handoff_of` names the run a handoff started it from (its `created` event carries
    /// it). A launch that fails after the run is created is recorded (`launch_failed`), and
    /// the ref is still given.
    fn launch_planned(
        self: &Arc<Self>,
        plan: StartPlan,
        enclosure: Option<Enclosure>,
        handoff_of: Option<&str>,
    ) -> Result<(String, MutexGuard<'_, Inner>), SessionError> {
        let StartPlan {
            profile,
            transport,
            name,
            size,
            path_var,
            path_from,
            program,
            demo,
            admitted,
            worktree: plan,
        } = plan;
        let ws_ref = admitted.workspace_ref.clone();
        let (number, run_ref) = self.reserve_ref();
        let info = match plan {
            None => None,
            Some((repo, commit)) => {
                let info =
                    worktrees::create(&self.home, &repo, &run_ref, &commit, ws_ref.as_deref())
                        .inspect_err(|_| self.give_back_ref(number))?;
                // The new worktree may carry other agent configuration than the workspace.
                if let Err(e) = workspaces::admit_worktree(
                    &self.home,
                    ws_ref.as_deref(),
                    profile.tool,
                    Path::new(&info.path),
                    &commit,
                ) {
                    let cleanup = match worktrees::remove(&info) {
                        Ok(()) => {
                            self.give_back_ref(number);
                            "the new worktree and its branch were removed".to_string()
                        }
                        Err(r) => format!(
                            "removing the new worktree and its branch failed too ({r}); remove \
                             {} and branch {} by hand",
                            text::one_line(&info.path, 300),
                            info.branch
                        ),
                    };
                    return Err(match admit_error(e) {
                        SessionError::Conflict(m) => {
                            SessionError::Conflict(format!("{m} ({cleanup})"))
                        }
                        SessionError::Unprocessable(m) => {
                            SessionError::Unprocessable(format!("{m} ({cleanup})"))
                        }
                        other => SessionError::Internal(format!("{other} ({cleanup})")),
                    });
                }
                Some(info)
            }
        };
        let workspace = match &info {
            Some(w) => PathBuf::from(&w.path),
            None => admitted.path.clone(),
        };
        let mut created = json!({"tool": profile.tool.name(), "profile": profile.name, "transport": transport, "demo": demo, "workspace": workspace.to_string_lossy()});
        if let Some(r) = &ws_ref {
            created["workspace_ref"] = json!(r);
        }
        let recorded_path = path_var.as_ref().map(|p| p.to_string_lossy().into_owned());
        if let Some(p) = &recorded_path {
            created["path"] = json!(p);
        }
        if let Some(w) = &info {
            created["worktree_branch"] = json!(w.branch);
            created["worktree_base"] = json!(w.base);
        }
        if let Some(enc) = &enclosure {
            created["boundary"] = json!(enc.boundary);
        }
        if let Some(from) = handoff_of {
            created["handoff_of"] = json!(from);
        }

        let mut inner = self.lock();
        let rec = RunRecord {
            run_ref: run_ref.clone(),
            tool: profile.tool.name().to_string(),
            profile: profile.name.clone(),
            transport: match transport {
                Transport::Pipe => "pipe".into(),
                Transport::Pty => "pty".into(),
            },
            workspace: workspace.to_string_lossy().to_string(),
            demo,
            created_at: now(),
            name,
            archived_at: None,
            worktree: info,
            path: recorded_path,
            boundary: enclosure.as_ref().map(|e| e.boundary.clone()),
            events: Vec::new(),
        };
        inner.records.insert(run_ref.clone(), rec);
        self.record(&mut inner, &run_ref, kinds::CREATED, created)?;
        let launch = self.spawn_generation(
            &mut inner,
            &run_ref,
            1,
            &profile,
            transport,
            size,
            None,
            &program,
            (path_var.as_deref(), path_from),
            enclosure.as_ref(),
        );
        if let Err(e) = launch {
            self.record(
                &mut inner,
                &run_ref,
                kinds::LAUNCH_FAILED,
                json!({"generation": 1, "error": e.to_string()}),
            )?;
        }
        Ok((run_ref, inner))
    }

    /// A PTY run's first prompt is typed as a person would: once the tool has written its
    /// first output and paused ([`FIRST_PROMPT_QUIET`]; at most [`FIRST_PROMPT_WAIT`] after
    /// the spawn: a tool that switches its terminal to raw mode may discard keys typed
    /// earlier),
    /// the text, then Enter as a key of its own, so that the tool takes it as a submitted
    /// turn and not as text pasted ahead of its prompt. A run that ends first gets nothing.
    /// A task on the reactor waits for that (no thread is held); the typing goes to the
    /// blocking pool.
    fn type_first_prompt(self: &Arc<Self>, inner: &Inner, run_ref: &str, prompt: String) {
        let Some(ring) = inner.live.get(run_ref).map(|l| l.run.ring().clone()) else {
            return;
        };
        let text = prompt.trim_end_matches(['\r', '\n']).to_string();
        let me = Arc::clone(self);
        let run = run_ref.to_string();
        self.reactor.handle().spawn(async move {
            // Up: it has drawn something, and then gone quiet (waiting for keys).
            let deadline = tokio::time::Instant::now() + FIRST_PROMPT_WAIT;
            let _ = tokio::time::timeout_at(deadline, ring.readable(1)).await;
            loop {
                let next = ring.status().next_seq;
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if ring.ended().is_some()
                    || left.is_zero()
                    || tokio::time::timeout(FIRST_PROMPT_QUIET.min(left), ring.readable(next))
                        .await
                        .is_err()
                {
                    break;
                }
            }
            if ring.ended().is_some() {
                return;
            }
            for (i, keys) in [text, "\r".to_string()].into_iter().enumerate() {
                if i == 1 {
                    // The tool reads the text before the key that submits it.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let (me, run) = (Arc::clone(&me), run.clone());
                let typed = tokio::task::spawn_blocking(move || {
                    me.input(
                        &run,
                        &InputRequest {
                            text: Some(keys),
                            ..Default::default()
                        },
                    )
                })
                .await;
                if !matches!(typed, Ok(Ok(()))) {
                    return; // the run is no longer live: nothing waits for the prompt
                }
            }
        });
    }

    /// The next run ref, taken now (refs are never reused once recorded).
    fn reserve_ref(&self) -> (u64, String) {
        let mut inner = self.lock();
        let n = inner.next_number;
        inner.next_number += 1;
        (n, format!("run-{n:04}"))
    }

    /// Gives back a reserved ref that nothing recorded or left behind, when no later one
    /// was taken meanwhile (so refused starts leave no gap).
    fn give_back_ref(&self, n: u64) {
        let mut inner = self.lock();
        if inner.next_number == n + 1 {
            inner.next_number = n;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_generation(
        self: &Arc<Self>,
        inner: &mut Inner,
        run_ref: &str,
        generation: u64,
        profile: &providers::profile::Profile,
        transport: Transport,
        size: TermSize,
        resume: Option<&str>,
        program: &Path,
        (path_var, path_from): (Option<&std::ffi::OsStr>, PathFrom),
        enclosure: Option<&Enclosure>,
    ) -> Result<(), SessionError> {
        // In a rig the server's socket is not reachable: no hooks.
        let hooks = match enclosure {
            None => self.hook_target(),
            Some(_) => None,
        };
        let launch = providers::launch_with_hooks(profile.tool, transport, resume, hooks.as_ref())
            .map_err(|e| SessionError::BadRequest(e.to_string()))?;
        // The child's PATH is the one the tool was resolved on; the rest of the allowlist
        // comes from the server's own environment.
        let parent = self
            .parent_env
            .iter()
            .filter(|(k, _)| k != "PATH")
            .cloned()
            .chain(path_var.map(|p| (OsString::from("PATH"), p.to_os_string())));
        let mut env = providers::env::launch_env(profile, parent, transport);
        let tag = format!("{}{run_ref}:{generation}", self.tag_prefix);
        env.insert(OsString::from(TAG_VAR), OsString::from(&tag));
        let workspace = PathBuf::from(&inner.records[run_ref].workspace);
        let mut argv: Vec<OsString> = Vec::new();
        match enclosure {
            None => argv.push(program.as_os_str().to_owned()),
            Some(enc) => {
                argv.extend(enc.prefix.iter().map(OsString::from));
                if is_demo_shim(program) {
                    // The shim execs `proctor demo-agent TOOL`: the guest's own proctor.
                    argv.push(OsString::from(&enc.proctor));
                    argv.push("demo-agent".into());
                    argv.push(profile.tool.name().into());
                } else if crate::files::same_file_under(&enc.root, program) {
                    argv.push(program.as_os_str().to_owned());
                } else {
                    return Err(SessionError::Unprocessable(format!(
                        "{} resolved {} on the host, and the rig {} does not see that file \
                         at that path (a namespace rig sees the host's /usr read-only, or its \
                         image's root, plus /work and its writable /root, /opt, …): install \
                         the tool under /usr on the host (a rig without an image sees it), \
                         or start the session on the host without --rig",
                        profile.tool.name(),
                        text::one_line(&program.to_string_lossy(), 200),
                        enc.boundary.rig.as_deref().unwrap_or("?")
                    )));
                }
                // The guest's PATH and home, not the host's.
                env.insert(OsString::from("PATH"), OsString::from(&enc.path));
                env.insert(OsString::from("HOME"), OsString::from("/root"));
            }
        }
        argv.extend(launch.args.iter().map(OsString::from));
        let mut spec = RunSpec::new(
            argv,
            &workspace,
            env,
            match transport {
                Transport::Pty => runs::Transport::Pty(size),
                Transport::Pipe => runs::Transport::Pipe,
            },
        );
        spec.ring_bytes = self.settings.ring_bytes;
        spec.reactor = Some(self.reactor.clone());
        let mut tspec = runs::TranscriptSpec::new(
            runs_dir(&self.home)
                .join(run_ref)
                .join(format!("gen-{generation}")),
        );
        tspec.cap_bytes = self.settings.transcript_cap;
        spec.transcript = Some(tspec);
        let stdio = match transport {
            Transport::Pipe => Some(
                StdioSession::new(
                    profile.tool,
                    enclosure.map_or(workspace.as_path(), |e| Path::new(&e.cwd)),
                    resume,
                )
                .map_err(|e| SessionError::BadRequest(e.to_string()))?,
            ),
            Transport::Pty => None,
        };
        // The run's own cgroup, made before the spawn (a crash from here on leaves a folder
        // the next server's sweep finds by its name).
        if let Containment::Cgroups(base) = &self.containment {
            match base.create(run_ref, generation) {
                Ok(dir) => spec.cgroup = Some(dir),
                Err(e) => crate::log::log(&format!(
                    "sessions: {run_ref}: cannot create its cgroup under {} ({e}); it is held \
                     by the subreaper fallback",
                    base.dir.display()
                )),
            }
        }
        let cgroup = spec.cgroup.clone();
        let run = Run::spawn(spec).map_err(|e: RunError| {
            if let Some(dir) = &cgroup {
                let _ = runs::cgroup::remove(dir);
            }
            SessionError::Unprocessable(e.to_string())
        })?;
        if self.settings.abort_at == Some(AbortAt::Spawn) {
            crate::log::log("test hook: aborting right after a spawn, before `started`");
            std::process::abort();
        }
        let pid = run.pid();
        let mut started = json!({"generation": generation, "pid": pid, "start_time": run.start_time(), "tag": tag, "program": program.to_string_lossy(), "hold": run.hold().name(), "path": path_var.map(|p| p.to_string_lossy()), "path_from": path_from.name()});
        if let Some(dir) = &cgroup {
            started["cgroup"] = json!(dir.to_string_lossy());
        }
        // The account home this generation runs with: a blocked run's remedy names it.
        started["account_home"] = json!(profile.home.to_string_lossy());
        self.record(inner, run_ref, kinds::STARTED, started)?;
        let asked_before = permissions::requested_count(&inner.records[run_ref].events);
        let deny_all = profile.permissions == providers::profile::PermissionPolicy::Deny;
        let link = stdio.map(|mut session| {
            let opening = session.start();
            for line in opening {
                let _ = run.write_input(&line);
            }
            Arc::new(Mutex::new(StdioLink {
                session,
                queued: VecDeque::new(),
                fatal: None,
                permissions: permissions::Table::starting_after(asked_before),
                deny_all,
            }))
        });
        inner.live.insert(
            run_ref.to_string(),
            Live {
                run: run.clone(),
                generation,
                transport,
                stdio: link.clone(),
                stop_requested: false,
            },
        );
        let run_ref = run_ref.to_string();
        let hold = enclosure.and_then(|e| e.hold.clone());
        // No thread is held per run: a task on the reactor follows it (a stdio run's lines,
        // a PTY run's end alone) and hands what blocks (the protocol's replies and records,
        // the end's bookkeeping) to the reactor's blocking pool.
        let Some(link) = link else {
            // A PTY run has no protocol to follow: only its end matters.
            let me = Arc::downgrade(self);
            let mut ended = run.ring().subscribe();
            self.reactor.handle().spawn(async move {
                let _hold = hold;
                let _ = ended.wait_for(|s| s.end.is_some()).await;
                let end = run.ring().ended();
                if let (Some(me), Some(end)) = (me.upgrade(), end) {
                    me.after_end(run_ref, generation, run, None, end).await;
                }
            });
            return Ok(());
        };
        let me = Arc::clone(self);
        self.reactor.handle().spawn(async move {
            let _hold = hold;
            let end = me.follow(&run_ref, generation, &run, &link).await;
            me.after_end(run_ref, generation, run, Some(link), end)
                .await;
        });
        Ok(())
    }

    /// A generation's end (its output ended, its exit observed): records the exit the OS
    /// reported (and what the tool left open) on the blocking pool, a few runs at a time,
    /// then ends what the run left behind on timers.
    async fn after_end(
        self: Arc<Self>,
        run_ref: String,
        generation: u64,
        run: Run,
        link: Option<Arc<Mutex<StdioLink>>>,
        end: runs::End,
    ) {
        {
            // Records wait for the manager's lock anyway: many runs ending at once (a
            // shutdown) take a few of the pool's threads, not one each.
            let _slot = self.end_slots.acquire().await;
            let me = Arc::clone(&self);
            let (r, g) = (run_ref.clone(), run.clone());
            let _ = tokio::task::spawn_blocking(move || {
                me.record_end(&r, generation, &g, link, end);
                // Whatever the run left (a daemon it double-forked, a process that changed
                // its session) ends with it: a fresh attribution first.
                me.keep();
            })
            .await;
        }
        // Its cgroup folder goes once it is empty.
        if !run.end_remaining_async(self.settings.stop_grace).await {
            crate::log::log(&format!(
                "sessions: {run_ref}: processes it left could not all be ended"
            ));
        }
    }

    /// Records one generation's end: the permission requests left open expire, and the
    /// exit the OS reported.
    fn record_end(
        &self,
        run_ref: &str,
        generation: u64,
        run: &Run,
        link: Option<Arc<Mutex<StdioLink>>>,
        end: runs::End,
    ) {
        let fatal = link
            .as_ref()
            .and_then(|l| l.lock().ok().and_then(|l| l.fatal.clone()));
        // Requests still open: the tool never got an answer, and never will.
        let expired = link
            .as_ref()
            .map(|l| {
                l.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .permissions
                    .drain()
            })
            .unwrap_or_default();
        let mut fields = json!({"generation": generation});
        if let Some(exit) = end.exit {
            if let Some(code) = exit.exit_code() {
                fields["exit_code"] = json!(code);
            }
            if let Some(sig) = exit.signal() {
                fields["signal"] = json!(runs::signal_name(sig));
            }
        } else {
            fields["unobserved"] = json!(true);
        }
        if let Some(reason) = fatal {
            fields["reason"] = json!(reason);
        }
        if let Some(t) = run.transcript()
            && t.capped
        {
            fields["transcript_capped"] = json!(true);
        }
        let mut inner = self.lock();
        let current = inner.live.get(run_ref).map(|l| l.generation) == Some(generation);
        if current {
            for id in expired {
                let _ = self.record(
                    &mut inner,
                    run_ref,
                    kinds::PERMISSION_EXPIRED,
                    json!({"generation": generation, "id": id}),
                );
            }
            let _ = self.record(&mut inner, run_ref, kinds::EXITED, fields);
        }
    }

    /// Reads a stdio run's output line by line and speaks its protocol, until the end: on
    /// the reactor, which waits for the ring and splits the lines; each batch of complete
    /// lines goes to the blocking pool (replies are written to the tool's stdin, facts
    /// recorded), awaited, so a run's lines are handled in order.
    async fn follow(
        self: &Arc<Self>,
        run_ref: &str,
        generation: u64,
        run: &Run,
        link: &Arc<Mutex<StdioLink>>,
    ) -> runs::End {
        let ring = run.ring().clone();
        let mut cursor = 1u64;
        let mut partial: HashMap<Stream, Vec<u8>> = HashMap::new();
        loop {
            let mut lines: Vec<(Stream, Vec<u8>)> = Vec::new();
            match ring.read_from(cursor, 1 << 20) {
                ReadOutcome::Frames(frames) => {
                    for f in frames {
                        cursor = f.seq + 1;
                        if f.stream == Stream::Stdin {
                            continue; // what the server itself wrote
                        }
                        let buf = partial.entry(f.stream).or_default();
                        buf.extend_from_slice(&f.bytes);
                        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                            lines.push((f.stream, buf.drain(..=pos).collect()));
                        }
                        if buf.len() > 8 << 20 {
                            buf.clear(); // an unbounded line is not protocol
                        }
                    }
                }
                ReadOutcome::Lag { first_available } => cursor = first_available,
                ReadOutcome::Pending { .. } => ring.readable(cursor).await,
                ReadOutcome::Ahead { next } => cursor = next,
                ReadOutcome::End(end) => return end,
            }
            if lines.is_empty() {
                continue;
            }
            let me = Arc::clone(self);
            let (r, g, l) = (run_ref.to_string(), run.clone(), Arc::clone(link));
            let _ = tokio::task::spawn_blocking(move || {
                for (stream, line) in lines {
                    me.on_line(&r, generation, &g, &l, stream, &line);
                }
            })
            .await;
        }
    }

    fn on_line(
        &self,
        run_ref: &str,
        generation: u64,
        run: &Run,
        link: &Arc<Mutex<StdioLink>>,
        stream: Stream,
        line: &[u8],
    ) {
        let mut l = link.lock().unwrap_or_else(|e| e.into_inner());
        if stream == Stream::Stderr {
            let s = String::from_utf8_lossy(line);
            if let Some(msg) = providers::protocol::resume_refusal_in_stderr(l.session.tool(), &s) {
                l.fatal = Some(format!("resume refused by the tool: {msg}"));
            }
            if let Some(words) = providers::protocol::blocked_in_stderr(l.session.tool(), &s) {
                drop(l);
                let mut inner = self.lock();
                if inner.live.get(run_ref).map(|l| l.generation) == Some(generation) {
                    let fields = json!({"generation": generation, "source": "stderr", "words": text::one_line(&words, 500)});
                    let _ = self.record(&mut inner, run_ref, kinds::BLOCKED, fields);
                }
            }
            return;
        }
        let observed = l.session.observe(line);
        for reply in &observed.replies {
            let _ = run.write_input(reply);
        }
        let mut facts: Vec<(&str, Value)> = Vec::new();
        let mut stop = false;
        for ev in observed.events {
            match ev {
                Event::ConversationId(id) => facts.push((kinds::CONVERSATION, json!({"conversation_id": id, "generation": generation}))),
                Event::Ready => {
                    while let Some(q) = l.queued.pop_front() {
                        let bytes = match q {
                            Queued::Line(b) => Ok(b),
                            Queued::Text(t) => l.session.input(&t),
                        };
                        match bytes {
                            Ok(b) => {
                                let _ = run.write_input(&b);
                            }
                            Err(e) => facts.push((
                                "sessions.run.input_refused",
                                json!({"generation": generation, "error": text::one_line(&e.to_string(), 300)}),
                            )),
                        }
                    }
                }
                Event::TurnStarted { .. } => facts.push((kinds::TURN_STARTED, json!({"generation": generation}))),
                Event::TurnEnded { outcome, detail } => facts.push((
                    kinds::TURN_ENDED,
                    json!({"generation": generation, "outcome": format!("{outcome:?}").to_lowercase(), "detail": detail}),
                )),
                Event::ResumeRefused { message } => {
                    l.fatal = Some(format!("resume refused by the tool: {message}"));
                    stop = true;
                }
                Event::ResumeDiverged { expected, reported } => {
                    l.fatal = Some(format!(
                        "asked to resume {expected}, the tool reported {reported}: never a silent new conversation"
                    ));
                    stop = true;
                }
                Event::PermissionRequested { method, id, ask } => {
                    let options: Vec<&str> = ask.options.iter().map(|d| d.as_str()).collect();
                    if l.deny_all {
                        let _ = run.write_input(&l.session.cancel_request(&id));
                        facts.push((
                            kinds::PERMISSION_REFUSED,
                            json!({"generation": generation, "method": method, "by": "profile",
                                   "tool_name": ask.tool_name, "what": ask.what, "reason": ask.reason}),
                        ));
                    } else {
                        let pid = l.permissions.open(id);
                        facts.push((
                            kinds::PERMISSION_REQUESTED,
                            json!({"generation": generation, "id": pid, "method": method,
                                   "tool_name": ask.tool_name, "what": ask.what,
                                   "reason": ask.reason, "options": options}),
                        ));
                    }
                }
                Event::PermissionWithdrawn { id } => {
                    if let Some(pid) = l.permissions.proctor_id(&id) {
                        l.permissions.close(&pid);
                        facts.push((
                            kinds::PERMISSION_EXPIRED,
                            json!({"generation": generation, "id": pid, "reason": "withdrawn by the tool"}),
                        ));
                    }
                }
                Event::RequestFailed { method, message } => facts.push((
                    "sessions.run.request_failed",
                    json!({"generation": generation, "method": method, "message": text::one_line(&message, 500)}),
                )),
                Event::AgentText(_) => {}
                Event::Blocked { source, words } => facts.push((
                    kinds::BLOCKED,
                    json!({"generation": generation, "source": source, "words": text::one_line(&words, 500)}),
                )),
                Event::Retrying { words } => facts.push((
                    kinds::RETRYING,
                    json!({"generation": generation, "words": text::one_line(&words, 500)}),
                )),
                Event::Warning { words } => facts.push((
                    kinds::WARNING,
                    json!({"generation": generation, "words": text::one_line(&words, 500)}),
                )),
                Event::LimitReached { kind, resets_at } => {
                    // Nested: a ledger line's own `kind` is the event's.
                    let mut f = json!({"generation": generation, "limit": {"kind": kind.as_str()}});
                    if let Some(at) = limit_reset(resets_at, chrono::Utc::now()) {
                        f["limit"]["resets_at"] = json!(at);
                    }
                    facts.push((kinds::LIMIT_REACHED, f));
                }
            }
        }
        drop(l);
        if !facts.is_empty() {
            let mut inner = self.lock();
            if inner.live.get(run_ref).map(|l| l.generation) == Some(generation) {
                for (kind, mut fields) in facts {
                    if kind == kinds::LIMIT_REACHED {
                        // The profile the turn ran under; the same fact again adds nothing.
                        let Some(rec) = inner.records.get(run_ref) else {
                            continue;
                        };
                        fields["limit"]["account_ref"] = json!(rec.profile);
                        let fact = fields
                            .as_object()
                            .and_then(super::record::Limit::from_fields);
                        if fact.is_some() && fact == rec.derive().limit {
                            continue;
                        }
                    }
                    let _ = self.record(&mut inner, run_ref, kind, fields);
                }
            }
        }
        if stop {
            // On timers on the reactor: no thread waits out the grace.
            let run = run.clone();
            let grace = self.settings.stop_grace;
            self.reactor.handle().spawn(async move {
                let _ = run.stop_async(grace).await;
            });
        }
    }

    fn get_record<'a>(
        &self,
        inner: &'a Inner,
        run_ref: &str,
    ) -> Result<&'a RunRecord, SessionError> {
        inner
            .records
            .get(run_ref)
            .ok_or_else(|| SessionError::NotFound(run_ref.to_string()))
    }

    /// A run as the API shows it, with the caller's marks (none for a caller of `None`).
    fn view(
        &self,
        inner: &Inner,
        run_ref: &str,
        caller: Option<&str>,
    ) -> Result<RunView, SessionError> {
        let rec = self.get_record(inner, run_ref)?;
        let d: Derived = rec.derive();
        // Left live by a previous server, not swept yet: derived, never recorded.
        let state = if inner.recovering.contains(run_ref) {
            State::Recovering
        } else {
            d.state
        };
        let live = inner.live.get(run_ref);
        let output = live.map(|live| {
            let st = live.run.ring().status();
            OutputView {
                first_seq: st.first_available,
                next_seq: st.next_seq,
                bytes: st.total_bytes,
                last_at: st
                    .last_push_ms
                    .and_then(|ms| i64::try_from(ms).ok())
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            }
        });
        let transcript = live
            .and_then(|l| l.run.transcript())
            .map(|t| TranscriptView {
                bytes: t.bytes_written,
                cap: t.cap_bytes,
                capped: t.capped,
            });
        let m: Mark = match caller {
            Some(c) => inner.marks.get(c, run_ref, &now()),
            None => Mark::default(),
        };
        Ok(RunView {
            run_ref: rec.run_ref.clone(),
            tool: rec.tool.clone(),
            profile: rec.profile.clone(),
            transport: rec.transport.clone(),
            workspace: rec.workspace.clone(),
            demo: rec.demo,
            created_at: rec.created_at.clone(),
            name: rec.name.clone(),
            state,
            generation: d.generation,
            pid: d.pid,
            exit_code: d.exit_code,
            signal: d.signal,
            started_at: d.started_at,
            ended_at: d.ended_at,
            conversation_id: d.conversation_id,
            reason: d.reason,
            blocked: d.blocked,
            // A run left by an earlier server waits on its sweep, not on a person.
            waiting: d.waiting.filter(|_| state != State::Recovering),
            waiting_known: rec.waiting_known(),
            permissions_open: d.permissions_open,
            limit: d.limit,
            handoff_of: d.handoff_of,
            hold: hold_view(inner, rec),
            archived_at: rec.archived_at.clone(),
            worktree_branch: rec.worktree.as_ref().map(|w| w.branch.clone()),
            worktree: rec.worktree.as_ref().map(|w| WorktreeView {
                path: w.path.clone(),
                branch: w.branch.clone(),
                base: w.base.clone(),
                repo: w.repo.clone(),
            }),
            output,
            transcript,
            pinned: m.pinned_at.is_some(),
            pinned_at: m.pinned_at,
            snoozed_until: m.snoozed_until,
            done: m.done,
            boundary: rec.boundary.clone().unwrap_or_default(),
        })
    }

    /// The worktree a run works in, if it was started with one.
    pub fn worktree_info(
        &self,
        run_ref: &str,
    ) -> Result<Option<crate::sessions::record::WorktreeInfo>, SessionError> {
        let inner = self.lock();
        Ok(self.get_record(&inner, run_ref)?.worktree.clone())
    }

    pub fn get(&self, run_ref: &str, caller: &str) -> Result<RunView, SessionError> {
        let inner = self.lock();
        self.view(&inner, run_ref, Some(caller))
    }

    /// A page of runs, newest first, plus the caller's pinned runs outside the page.
    pub fn list(&self, caller: &str, q: &ListQuery) -> Result<RunPage, SessionError> {
        let inner = self.lock();
        let limit = q.limit.unwrap_or(50);
        if limit == 0 || limit > 200 {
            return Err(SessionError::BadRequest(
                "limit must be between 1 and 200".into(),
            ));
        }
        let mut all: Vec<&RunRecord> = inner.records.values().collect();
        let num = |r: &str| parse_ref_number(r).unwrap_or(0);
        all.sort_by_key(|r| std::cmp::Reverse(num(&r.run_ref)));
        if let Some(s) = &q.state {
            all.retain(|r| {
                let st = if inner.recovering.contains(&r.run_ref) {
                    State::Recovering
                } else {
                    r.derive().state
                };
                st.as_str() == s
            });
        }
        let cursor_mode = q.pagination.as_deref() == Some("cursor");
        let (page, next): (Vec<&RunRecord>, Option<String>) = if cursor_mode {
            let start = match &q.cursor {
                Some(c) => {
                    let c = parse_ref_number(c).ok_or_else(|| {
                        SessionError::BadRequest(format!("cursor {c:?} is not a run ref"))
                    })?;
                    all.iter()
                        .position(|r| num(&r.run_ref) < c)
                        .unwrap_or(all.len())
                }
                None => 0,
            };
            let page: Vec<&RunRecord> = all[start..].iter().take(limit).copied().collect();
            let next = (start + page.len() < all.len())
                .then(|| page.last().map(|r| r.run_ref.clone()))
                .flatten();
            (page, next)
        } else {
            let offset = q.offset.unwrap_or(0);
            (all.iter().skip(offset).take(limit).copied().collect(), None)
        };
        let mut items: Vec<RunView> = page
            .iter()
            .map(|r| self.view(&inner, &r.run_ref, Some(caller)))
            .collect::<Result<_, _>>()?;
        let mut pinned_extra = Vec::new();
        if !cursor_mode {
            let in_page: std::collections::HashSet<&str> =
                page.iter().map(|r| r.run_ref.as_str()).collect();
            for (r, _) in inner.marks.pinned(caller) {
                if !in_page.contains(r.as_str())
                    && inner.records.contains_key(&r)
                    && pinned_extra.len() < super::marks::MAX_PINS
                {
                    pinned_extra.push(self.view(&inner, &r, Some(caller))?);
                }
            }
        }
        let total = all.len();
        let pinned_outside_page = pinned_extra.len();
        items.extend(pinned_extra);
        Ok(RunPage {
            items,
            total,
            pinned_outside_page,
            next,
        })
    }

    /// `GET /runs/{ref}/messages`: a page of the run's conversation, read now from its
    /// tool's own record under the profile's account home. 422 for a tool whose record is
    /// not read, 409 for a run in a rig (its record is inside the rig), 400 for an invalid
    /// parameter, 404 for an unknown id. Audited once per reader, run and kind
    /// (`sessions.run.messages`, `sessions.run.messages.text` for text) per 15 minutes.
    pub fn messages(
        &self,
        run_ref: &str,
        query: &super::messages::MessagesQuery,
        caller: &str,
    ) -> Result<super::messages::MessagePage, SessionError> {
        use crate::providers::records;
        let q = super::messages::Query::parse(query)?;
        let (rec, tool, live, conversation, home, exporter) =
            self.record_target(run_ref, |tool| records::Unsupported(tool).to_string())?;
        let read = records::messages(
            &records::Target {
                tool,
                home: &home,
                cwd: Path::new(&rec.workspace),
                conversation_id: conversation.as_deref(),
                live,
                exporter: exporter.as_ref(),
            },
            &mut records::Budget::default(),
        )
        .map_err(|e| SessionError::Unprocessable(e.to_string()))?;
        let page = super::messages::page(run_ref, &read, &q)?;
        let kind = if q.text || q.id.is_some() {
            kinds::MESSAGES_TEXT
        } else {
            kinds::MESSAGES
        };
        self.audit_read(
            run_ref,
            caller,
            kind,
            json!({"by": caller, "transcript": read.state.as_str()}),
        )?;
        Ok(page)
    }

    /// What `messages`, `activity` and `agent_transcript` read from: the run's tool, whether
    /// it may still write, its conversation, its profile's account home and, for opencode,
    /// how to run its `opencode export` (the program the run resolved on its recorded PATH,
    /// the profile's launch environment, from the account home's folder). 422 for a tool
    /// whose record is not read (`unsupported` says why), 409 for a run in a rig or a
    /// profile no longer usable.
    #[allow(clippy::type_complexity)]
    fn record_target(
        &self,
        run_ref: &str,
        unsupported: impl FnOnce(Tool) -> String,
    ) -> Result<
        (
            RunRecord,
            Tool,
            bool,
            Option<String>,
            std::path::PathBuf,
            Option<crate::providers::records::opencode::Exporter>,
        ),
        SessionError,
    > {
        use crate::providers::records;
        let (rec, live, conversation) = {
            let inner = self.lock();
            let rec = self.get_record(&inner, run_ref)?.clone();
            let d = rec.derive();
            let live = d.state.is_live() || inner.recovering.contains(run_ref);
            (rec, live, d.conversation_id)
        };
        let tool = Tool::parse(&rec.tool).map_err(|e| SessionError::Internal(e.to_string()))?;
        if !records::has_messages(tool) {
            return Err(SessionError::Unprocessable(unsupported(tool)));
        }
        if let Some(b) = &rec.boundary
            && b.kind != BoundaryKind::Host
        {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} ran in rig {}: its tool's record is inside the rig, and proctor \
                 reads records on the host only",
                b.rig.as_deref().unwrap_or("?")
            )));
        }
        let profile = Store::new(&self.home.config)
            .find(&rec.profile, &self.user_home())
            .map_err(|e| {
                SessionError::Conflict(format!(
                    "profile {} is no longer usable, so its account home is unknown: {e}",
                    rec.profile
                ))
            })?;
        let exporter = (tool == Tool::Opencode).then(|| self.exporter(&rec, &profile));
        Ok((rec, tool, live, conversation, profile.home, exporter))
    }

    /// How to run `opencode export` for run `rec` under `profile`: the program on the PATH
    /// the run was started with (as a resume finds it), the profile's launch environment
    /// (the allowlist, its account-home variable) with that PATH. A program that is no
    /// longer there is run by name and fails, which the record reports as unreadable.
    fn exporter(
        &self,
        rec: &RunRecord,
        profile: &providers::profile::Profile,
    ) -> crate::providers::records::opencode::Exporter {
        use crate::providers::records::opencode;
        let path_var = rec
            .path
            .clone()
            .or_else(|| recorded_path(rec))
            .map(OsString::from)
            .or_else(|| self.parent_var("PATH"));
        let program = providers::resolve(profile.tool, path_var.as_deref())
            .unwrap_or_else(|_| PathBuf::from(profile.tool.name()));
        let parent = self
            .parent_env
            .iter()
            .filter(|(k, _)| k != "PATH")
            .cloned()
            .chain(path_var.map(|p| (OsString::from("PATH"), p)));
        let env = providers::env::launch_env(profile, parent, Transport::Pipe);
        opencode::Exporter {
            program,
            env: env.into_iter().collect(),
            dir: opencode::run_dir(&profile.home),
            deadline: opencode::EXPORT_DEADLINE,
        }
    }

    /// `GET /runs/{ref}/activity`: what the run's tool did, read now from its own record.
    /// 422 / 409 as [`Self::messages`]. Audited once per reader and run per 15 minutes
    /// (`sessions.run.activity`).
    pub fn activity(
        &self,
        run_ref: &str,
        caller: &str,
    ) -> Result<super::activity::RunActivity, SessionError> {
        use crate::providers::records::{self, activity};
        let (rec, tool, live, conversation, home, exporter) =
            self.record_target(run_ref, no_activity)?;
        let cwd = Path::new(&rec.workspace);
        let t = records::Target {
            tool,
            home: &home,
            cwd,
            conversation_id: conversation.as_deref(),
            live,
            exporter: exporter.as_ref(),
        };
        let mut budget = records::Budget::default();
        let raw = records::raw(&t, &mut budget)
            .map_err(|e| SessionError::Unprocessable(e.to_string()))?;
        let mut a = match (&raw.bytes, tool) {
            (Some(b), Tool::Codex) => activity::codex(b, live),
            (Some(b), Tool::Gemini) => activity::gemini(b, live),
            (Some(b), Tool::Opencode) => activity::opencode(b, live),
            (Some(b), _) => {
                let id = conversation.clone().unwrap_or_default();
                activity::claude(b, live, &|agent| {
                    records::claude::agent_path(&home, cwd, &id, agent)
                        .is_some_and(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
                })
            }
            (None, _) => activity::Activity::default(),
        };
        let generation = rec.derive().generation;
        let stdout = runs_dir(&self.home)
            .join(run_ref)
            .join(format!("gen-{generation}"))
            .join(runs::transcript::file_name(false, Stream::Stdout));
        // Codex: the plan of a Code Mode call is not kept in its rollout; while this server
        // holds the run's bridge, its last `turn/plan/updated` notification is read too
        // (seed 002). Once the bridge is gone, only what Codex kept is read.
        if tool == Tool::Codex
            && live
            && self.lock().live.get(run_ref).map(|l| l.generation) == Some(generation)
            && let Some(plan) = super::activity::read_live(&stdout, false)
                .and_then(|l| activity::codex_bridge_plan(&l.tail))
        {
            a.todos = plan;
        }
        if tool != Tool::Claude {
            let out = super::activity::RunActivity::new(
                run_ref,
                tool.name(),
                a,
                raw.state,
                raw.reason,
                None,
            );
            self.audit_read(
                run_ref,
                caller,
                kinds::ACTIVITY,
                json!({"by": caller, "transcript": raw.state.as_str()}),
            )?;
            return Ok(out);
        }
        // Claude's current launch, in its stream-json output (the attach stream's bytes, as
        // the server stored them; a new launch starts a new generation's output): its window
        // report (the previous launch's no longer counts), its announced skills and MCP
        // servers, its live workflow snapshots. Then the finished workflows' own summaries.
        let capped = self.output_capped(&rec, generation);
        let live_out = super::activity::read_live(&stdout, capped);
        let (window, workflows) = match &live_out {
            Some(l) => (
                activity::claude_reported_window(&l.tail, a.model.as_deref()),
                activity::claude_workflows(&l.tail),
            ),
            None => (None, Vec::new()),
        };
        if let Some(n) = live_out.as_ref().and_then(|l| l.announced.as_ref()) {
            a.announce(n);
        }
        let summaries = conversation
            .as_deref()
            .map(|id| records::claude::workflow_summaries(&home, cwd, id, &mut budget))
            .unwrap_or_default();
        let mut out = super::activity::RunActivity::new(
            run_ref,
            tool.name(),
            a,
            raw.state,
            raw.reason,
            window,
        );
        if let Some(gap) = live_out.and_then(|l| l.gap) {
            out.add_unreadable(gap);
        }
        for (_, s) in &summaries.read {
            if let Err(why) = s {
                out.add_unreadable(format!("a workflow summary is unreadable: {why}"));
            }
        }
        if let Some(why) = summaries.overflow {
            out.add_unreadable(why);
        }
        out.workflows = activity::merge_summaries(workflows, summaries.read);
        self.audit_read(
            run_ref,
            caller,
            kinds::ACTIVITY,
            json!({"by": caller, "transcript": raw.state.as_str()}),
        )?;
        Ok(out)
    }

    /// Whether generation `generation` of the run's transcript reached its cap: the live
    /// run's transcript says so, or its recorded end does.
    fn output_capped(&self, rec: &RunRecord, generation: u64) -> bool {
        let live = {
            let inner = self.lock();
            inner
                .live
                .get(&rec.run_ref)
                .filter(|l| l.generation == generation)
                .and_then(|l| l.run.transcript())
                .is_some_and(|t| t.capped)
        };
        live || rec.events.iter().any(|e| {
            e.kind == kinds::EXITED
                && e.fields.get("generation").and_then(Value::as_u64) == Some(generation)
                && e.fields.get("transcript_capped").and_then(Value::as_bool) == Some(true)
        })
    }

    /// `GET /runs/{ref}/activity/agents/{agent}`: a Claude Code sub-agent's transcript in
    /// simple turns. 404 for an agent the session does not have (an id that could not name
    /// a sub-agent file, `../` included, is unknown too); 422 for codex (its children's
    /// state is in the activity, their transcripts are not offered). Audited
    /// (`sessions.run.activity.agent`) once per reader and run per 15 minutes.
    pub fn agent_transcript(
        &self,
        run_ref: &str,
        agent: &str,
        caller: &str,
    ) -> Result<super::activity::AgentTranscript, SessionError> {
        use crate::providers::records;
        let (rec, tool, _live, conversation, home, _) = self.record_target(run_ref, no_activity)?;
        if tool != Tool::Claude {
            return Err(SessionError::Unprocessable(format!(
                "{tool} reports its child agents' state in the activity; their transcripts \
                 are not offered (Claude Code sub-agents only)"
            )));
        }
        let unknown = || {
            SessionError::NotFound(format!(
                "agent {} of run {run_ref}: no such sub-agent transcript",
                crate::text::one_line(agent, 80)
            ))
        };
        let id = conversation.ok_or_else(unknown)?;
        let path = records::claude::agent_path(&home, Path::new(&rec.workspace), &id, agent)
            .ok_or_else(unknown)?;
        let mut budget = records::Budget::default();
        let (state, reason, turns) = match records::read_file(&home, &path, &mut budget) {
            Ok(None) => return Err(unknown()),
            Ok(Some(bytes)) => (
                records::TranscriptState::Read,
                None,
                records::claude::agent_turns(&bytes)
                    .into_iter()
                    .map(|m| super::activity::AgentTurn {
                        role: m.role,
                        text: super::activity::clip(&m.text),
                    })
                    .collect(),
            ),
            Err(e) => (
                records::TranscriptState::Unreadable,
                Some(e.to_string()),
                Vec::new(),
            ),
        };
        self.audit_read(
            run_ref,
            caller,
            kinds::ACTIVITY_AGENT,
            json!({"by": caller, "agent": agent, "transcript": state.as_str()}),
        )?;
        Ok(super::activity::AgentTranscript {
            run_ref: run_ref.to_string(),
            agent: agent.to_string(),
            turns,
            transcript: state,
            reason,
        })
    }

    /// Records a read of `run_ref` by `caller` under `kind`, unless the same reader's read
    /// of the same kind was recorded less than [`READ_AUDIT_WINDOW`] ago.
    fn audit_read(
        &self,
        run_ref: &str,
        caller: &str,
        kind: &'static str,
        fields: Value,
    ) -> Result<(), SessionError> {
        let mut inner = self.lock();
        let key = (caller.to_string(), run_ref.to_string(), kind);
        let now = std::time::Instant::now();
        if inner
            .read_audits
            .get(&key)
            .is_some_and(|t| now.duration_since(*t) < READ_AUDIT_WINDOW)
        {
            return Ok(());
        }
        self.record(&mut inner, run_ref, kind, fields)?;
        inner
            .read_audits
            .retain(|_, t| now.duration_since(*t) < READ_AUDIT_WINDOW);
        inner.read_audits.insert(key, now);
        Ok(())
    }

    pub fn events(&self, run_ref: &str) -> Result<RunEvents, SessionError> {
        let inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        Ok(RunEvents {
            run_ref: run_ref.to_string(),
            items: rec.events.clone(),
        })
    }

    /// The permission requests of the run's current generation, from its recorded events.
    pub fn permissions(&self, run_ref: &str) -> Result<PermissionList, SessionError> {
        let inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        let generation = rec.derive().generation;
        Ok(PermissionList {
            run_ref: rec.run_ref.clone(),
            generation,
            items: permissions::list(&rec.events, generation),
        })
    }

    /// A person's decision on the open permission request `id`: written to the tool in its
    /// own shape, then recorded (`permission_decided`, naming `by`). 404 for an id the run
    /// never had, 409 for one already decided or expired (nothing is written to the tool),
    /// or a run with no live process; 400 for a decision the tool did not offer.
    pub fn decide(
        &self,
        run_ref: &str,
        id: &str,
        req: &PermitRequest,
        by: &crate::auth::Actor,
    ) -> Result<PermissionView, SessionError> {
        let Some(decision) = req.decision else {
            return Err(SessionError::BadRequest(
                "the body needs \"decision\": \"allow\" or \"deny\" (and \"for_session\": true \
                 to allow for the rest of the session)"
                    .into(),
            ));
        };
        let for_session = req.for_session == Some(true);
        if for_session && decision == PermitDecision::Deny {
            return Err(SessionError::BadRequest(
                "for_session goes with allow only: a denial is for this request".into(),
            ));
        }
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        let generation = rec.derive().generation;
        let known = permissions::list(&rec.events, generation);
        let Some(item) = known.iter().find(|p| p.id.as_deref() == Some(id)) else {
            return Err(SessionError::Missing(format!(
                "{run_ref} has no permission request {}. Remedy: `proctor session permissions \
                 {run_ref}` lists them",
                text::one_line(id, 20)
            )));
        };
        if item.state != permissions::PermissionState::Open {
            let by = item
                .by
                .as_ref()
                .map(|b| format!(" by {} ({})", text::one_line(&b.name, 60), b.token_id))
                .unwrap_or_default();
            return Err(SessionError::Conflict(format!(
                "permission request {id} of {run_ref} is already {}{by}; nothing was sent to \
                 the tool. Remedy: `proctor session permissions {run_ref}` shows it",
                item.state.as_str()
            )));
        }
        let live = inner
            .live
            .get(run_ref)
            .filter(|l| l.generation == generation && !l.run.reaped());
        let Some((run, link)) = live.and_then(|l| Some((l.run.clone(), l.stdio.clone()?))) else {
            return Err(SessionError::Conflict(format!(
                "{run_ref} has no live process to answer; its request {id} expired with it. \
                 Remedy: resume the run (`proctor session resume {run_ref}`); the tool asks again"
            )));
        };
        let proto = match (decision, for_session) {
            (PermitDecision::Allow, false) => providers::protocol::Decision::Allow,
            (PermitDecision::Allow, true) => providers::protocol::Decision::AllowForSession,
            (PermitDecision::Deny, _) => providers::protocol::Decision::Deny,
        };
        {
            let mut l = link.lock().unwrap_or_else(|e| e.into_inner());
            let Some(tool_id) = l.permissions.tool_id(id).cloned() else {
                return Err(SessionError::Conflict(format!(
                    "permission request {id} of {run_ref} is no longer open. Remedy: \
                     `proctor session permissions {run_ref}` shows it"
                )));
            };
            let bytes = l
                .session
                .answer_request(&tool_id, proto)
                .map_err(|e| SessionError::BadRequest(e.to_string()))?;
            run.write_input(&bytes).map_err(|e| {
                SessionError::Conflict(format!(
                    "cannot write the answer to {run_ref}'s tool ({e}); the request stays open"
                ))
            })?;
            l.permissions.close(id);
        }
        let by_json = serde_json::to_value(by).map_err(SessionError::internal)?;
        let decision_str = match decision {
            PermitDecision::Allow => "allow",
            PermitDecision::Deny => "deny",
        };
        self.record(
            &mut inner,
            run_ref,
            kinds::PERMISSION_DECIDED,
            json!({"generation": generation, "id": id, "decision": decision_str,
                   "for_session": for_session, "by": by_json}),
        )?;
        let rec = self.get_record(&inner, run_ref)?;
        permissions::list(&rec.events, generation)
            .into_iter()
            .find(|p| p.id.as_deref() == Some(id))
            .ok_or_else(|| SessionError::Internal("the decision was not recorded".into()))
    }

    /// The live handle of a run's current generation (also after it ended, while the
    /// server still holds its output).
    pub fn handle(&self, run_ref: &str) -> Result<(Option<Run>, State), SessionError> {
        let inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        let state = rec.derive().state;
        Ok((inner.live.get(run_ref).map(|l| l.run.clone()), state))
    }

    fn input_locked(
        &self,
        inner: &mut Inner,
        run_ref: &str,
        req: &InputRequest,
    ) -> Result<(), SessionError> {
        let state = self.get_record(inner, run_ref)?.derive().state;
        let live = inner
            .live
            .get(run_ref)
            .filter(|_| state.is_live())
            .ok_or_else(|| {
                SessionError::Conflict(format!(
                    "run {run_ref} is not live (state={})",
                    state.as_str()
                ))
            })?;
        let given = [
            req.text.is_some(),
            req.line.is_some(),
            req.message.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if given != 1 {
            return Err(SessionError::BadRequest(
                "give exactly one of text, line or message".into(),
            ));
        }
        let bytes: Vec<u8> = match (&live.stdio, live.transport) {
            (None, _) => match &req.text {
                Some(t) => t.as_bytes().to_vec(),
                None => {
                    return Err(SessionError::BadRequest(
                        "a PTY run takes text (the keys typed)".into(),
                    ));
                }
            },
            (Some(link), _) => {
                let mut l = link.lock().unwrap_or_else(|e| e.into_inner());
                if state == State::Blocked && !l.session.ready() {
                    // Its handshake was refused: input queued for it would wait forever.
                    let why = self.get_record(inner, run_ref)?.derive().reason;
                    return Err(SessionError::Conflict(format!(
                        "run {run_ref} is blocked: {}",
                        why.unwrap_or_default()
                    )));
                }
                let tool = l.session.tool();
                let bytes = if let Some(t) = &req.text {
                    if !l.session.ready() {
                        l.queued.push_back(Queued::Text(t.clone()));
                        return Ok(());
                    }
                    l.session
                        .input(t)
                        .map_err(|e| SessionError::Conflict(e.to_string()))?
                } else if tool != Tool::Claude {
                    return Err(SessionError::BadRequest(format!(
                        "{} takes text; line and message are claude stream-json forms",
                        tool.name()
                    )));
                } else if let Some(line) = &req.line {
                    let v: Value = serde_json::from_str(line)
                        .map_err(|e| SessionError::BadRequest(format!("line is not JSON: {e}")))?;
                    if !v.is_object() || line.contains('\n') {
                        return Err(SessionError::BadRequest(
                            "line must be one JSON object on one line".into(),
                        ));
                    }
                    let mut b = line.as_bytes().to_vec();
                    b.push(b'\n');
                    b
                } else {
                    let message = req.message.clone().unwrap_or(Value::Null);
                    if !message.is_object() {
                        return Err(SessionError::BadRequest("message must be an object".into()));
                    }
                    let mut b = serde_json::to_vec(&json!({"type": "user", "message": message}))
                        .map_err(SessionError::internal)?;
                    b.push(b'\n');
                    b
                };
                if !l.session.ready() {
                    l.queued.push_back(Queued::Line(bytes));
                    return Ok(());
                }
                bytes
            }
        };
        live.run
            .write_input(&bytes)
            .map_err(|e| SessionError::Conflict(e.to_string()))?;
        Ok(())
    }

    pub fn input(&self, run_ref: &str, req: &InputRequest) -> Result<(), SessionError> {
        let mut inner = self.lock();
        self.input_locked(&mut inner, run_ref, req)
    }

    pub fn interrupt(&self, run_ref: &str, by: &str) -> Result<RunView, SessionError> {
        let mut inner = self.lock();
        let state = self.get_record(&inner, run_ref)?.derive().state;
        let live = inner
            .live
            .get(run_ref)
            .filter(|_| state.is_live())
            .ok_or_else(|| {
                SessionError::Conflict(format!(
                    "run {run_ref} is not live (state={})",
                    state.as_str()
                ))
            })?;
        let mut withdrawn: Vec<String> = Vec::new();
        let method = match &live.stdio {
            Some(link) => {
                let mut l = link.lock().unwrap_or_else(|e| e.into_inner());
                let bytes = l
                    .session
                    .interrupt()
                    .map_err(|e| SessionError::Conflict(e.to_string()))?;
                live.run
                    .write_input(&bytes)
                    .map_err(|e| SessionError::Conflict(e.to_string()))?;
                // ACP: the requests of the cancelled prompt are answered `cancelled`.
                if l.session.interrupt_cancels_requests() {
                    for (pid, tool_id) in l.permissions.drain_with_tool_ids() {
                        let line = l.session.cancel_request(&tool_id);
                        let _ = live.run.write_input(&line);
                        withdrawn.push(pid);
                    }
                }
                "protocol"
            }
            None => {
                match live
                    .run
                    .interrupt()
                    .map_err(|e| SessionError::Conflict(e.to_string()))?
                {
                    runs::Interrupt::Signal { .. } => "SIGINT",
                    // A raw-mode TUI reads Ctrl-C as a key: it was typed, as a person would.
                    runs::Interrupt::Key { .. } => "ctrl-c key",
                }
            }
        };
        let generation = live.generation;
        self.record(
            &mut inner,
            run_ref,
            kinds::INTERRUPTED,
            json!({"generation": generation, "method": method, "by": by}),
        )?;
        for id in withdrawn {
            self.record(
                &mut inner,
                run_ref,
                kinds::PERMISSION_EXPIRED,
                json!({"generation": generation, "id": id, "reason": "cancelled with the turn"}),
            )?;
        }
        self.view(&inner, run_ref, Some(by))
    }

    /// Stops a run's process group (TERM, then KILL after the grace period) and returns once
    /// the exit is observed and recorded. Stopping a run that is not live changes nothing.
    pub fn stop(&self, run_ref: &str, by: &str) -> Result<Stopped, SessionError> {
        let run = match self.begin_stop(run_ref, by)? {
            Begun::Done(stopped) => return Ok(*stopped),
            Begun::Stop(run) => run,
        };
        // A fresh attribution first: a process forked since the keeper's last pass (the
        // subreaper fallback) is then signalled with the rest.
        self.keep();
        let report = run
            .stop(self.settings.stop_grace)
            .map_err(|e| SessionError::Internal(e.to_string()))?;
        self.finish_stop(run_ref, by, &run, &report)
    }

    /// [`Sessions::stop`] for a request handler: the same steps, answer and errors, but the
    /// grace, the SIGKILL, the reap and the end of the output are awaited on the reactor's
    /// timers ([`Run::stop_async`]), so a stop in progress holds no thread; only its short
    /// steps (recording the request, the attribution pass, reading the recorded exit) run
    /// on the blocking pool, each for its own length.
    pub async fn stop_async(
        self: &Arc<Self>,
        run_ref: &str,
        by: &str,
    ) -> Result<Stopped, SessionError> {
        let (me, r, b) = (self.clone(), run_ref.to_string(), by.to_string());
        let begun = tokio::task::spawn_blocking(move || me.begin_stop(&r, &b))
            .await
            .map_err(SessionError::internal)??;
        let run = match begun {
            Begun::Done(stopped) => return Ok(*stopped),
            Begun::Stop(run) => run,
        };
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.keep())
            .await
            .map_err(SessionError::internal)?;
        let grace = self.settings.stop_grace;
        let stopping = run.clone();
        let report = self
            .reactor
            .handle()
            .spawn(async move {
                let report = stopping.stop_async(grace).await;
                // The exit is recorded once the output has drained: awaited here, as the
                // blocking form's `wait_end`.
                let mut ended = stopping.ring().subscribe();
                let _ = tokio::time::timeout(
                    runs::DEFAULT_DRAIN_AFTER_EXIT + STOP_RECORD_WAIT,
                    ended.wait_for(|s| s.end.is_some()),
                )
                .await;
                report
            })
            .await
            .map_err(SessionError::internal)?
            .map_err(|e| SessionError::Internal(e.to_string()))?;
        let (me, r, b) = (self.clone(), run_ref.to_string(), by.to_string());
        tokio::task::spawn_blocking(move || me.finish_stop(&r, &b, &run, &report))
            .await
            .map_err(SessionError::internal)?
    }

    /// A stop's first step: records that it was asked for, and gives the run to signal (or
    /// the answer, when the run is not live).
    fn begin_stop(&self, run_ref: &str, by: &str) -> Result<Begun, SessionError> {
        let unsignalled = |run: RunView| Begun::Done(Box::new(Stopped { run, stop: None }));
        let mut inner = self.lock();
        let state = self.get_record(&inner, run_ref)?.derive().state;
        if !state.is_live() {
            return self.view(&inner, run_ref, Some(by)).map(unsignalled);
        }
        if inner.recovering.contains(run_ref) {
            // Left by a previous server: its sweep is ending it; answer once it has.
            drop(inner);
            let deadline = std::time::Instant::now()
                + self.settings.stop_grace
                + runs::KILL_WAIT
                + Duration::from_secs(5);
            loop {
                let inner = self.lock();
                if !inner.recovering.contains(run_ref) || std::time::Instant::now() >= deadline {
                    return self.view(&inner, run_ref, Some(by)).map(unsignalled);
                }
                drop(inner);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let Some(live) = inner.live.get_mut(run_ref) else {
            return self.view(&inner, run_ref, Some(by)).map(unsignalled);
        };
        let run = live.run.clone();
        let generation = live.generation;
        if !live.stop_requested {
            live.stop_requested = true;
            self.record(
                &mut inner,
                run_ref,
                kinds::STOP_REQUESTED,
                json!({"generation": generation, "by": by}),
            )?;
        }
        Ok(Begun::Stop(run))
    }

    /// A stop's last step, once the run is reaped: waits for its exit to be recorded.
    fn finish_stop(
        &self,
        run_ref: &str,
        by: &str,
        run: &Run,
        report: &runs::StopReport,
    ) -> Result<Stopped, SessionError> {
        // The watcher records the exit once the output has drained (at most the drain
        // period after the reap) and the follower has read the rest; wait for it so the
        // answer carries the exit code. On a loaded machine that can take seconds.
        let _ = run
            .ring()
            .wait_end(runs::DEFAULT_DRAIN_AFTER_EXIT + STOP_RECORD_WAIT);
        let deadline = std::time::Instant::now() + STOP_RECORD_WAIT;
        loop {
            let inner = self.lock();
            if !self.get_record(&inner, run_ref)?.derive().state.is_live() {
                return Ok(Stopped {
                    run: self.view(&inner, run_ref, Some(by))?,
                    stop: Some(StopSignals {
                        sent_term: report.sent_term,
                        sent_kill: report.sent_kill,
                        group_gone: report.group_gone,
                    }),
                });
            }
            drop(inner);
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(SessionError::Internal(format!(
            "the process was reaped but its exit was not recorded within {} s",
            STOP_RECORD_WAIT.as_secs()
        )))
    }

    /// Stops every live run (server shutdown), all at once, and returns when all are done
    /// and their exits recorded. The stops run on timers on the reactor (TERM, the grace,
    /// KILL, the reap, the end of the output), so stopping N runs holds no thread per run.
    pub fn stop_all(self: &Arc<Self>, by: &str) {
        let refs: Vec<String> = {
            let inner = self.lock();
            inner.live.keys().cloned().collect()
        };
        let stopping: Vec<(String, Run)> = refs
            .into_iter()
            .filter_map(|r| match self.begin_stop(&r, by) {
                Ok(Begun::Stop(run)) => Some((r, run)),
                _ => None,
            })
            .collect();
        if stopping.is_empty() {
            return;
        }
        // A fresh attribution first, as for one stop.
        self.keep();
        let grace = self.settings.stop_grace;
        let (tx, rx) = std::sync::mpsc::channel();
        let runs: Vec<Run> = stopping.iter().map(|(_, run)| run.clone()).collect();
        self.reactor.handle().spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, run) in runs.into_iter().enumerate() {
                set.spawn(async move {
                    let report = run.stop_async(grace).await;
                    let mut ended = run.ring().subscribe();
                    let _ = tokio::time::timeout(
                        runs::DEFAULT_DRAIN_AFTER_EXIT + STOP_RECORD_WAIT,
                        ended.wait_for(|s| s.end.is_some()),
                    )
                    .await;
                    (i, report)
                });
            }
            while let Some(done) = set.join_next().await {
                if let Ok(done) = done {
                    let _ = tx.send(done);
                }
            }
        });
        // Each exit's record is waited for as its stop completes (the sender goes with the
        // task, which ends the loop).
        for (i, report) in rx {
            let (r, run) = &stopping[i];
            match report {
                Ok(report) => {
                    if let Err(e) = self.finish_stop(r, by, run, &report) {
                        crate::log::log(&format!("sessions: {r}: stop: {e}"));
                    }
                }
                Err(e) => crate::log::log(&format!("sessions: {r}: stop: {e}")),
            }
        }
    }

    /// Starts a new process generation on the exact stored conversation.
    pub fn resume(
        self: &Arc<Self>,
        run_ref: &str,
        size: Option<TermSize>,
        caller: &str,
    ) -> Result<RunView, SessionError> {
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?.clone();
        let d = rec.derive();
        if let Some(b) = &rec.boundary
            && b.kind != BoundaryKind::Host
        {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} ran in rig {}: a run in a rig is not resumed (resuming it on \
                 the host would leave its boundary); start a new one with `proctor session \
                 start --rig RIG`",
                b.rig.as_deref().unwrap_or("?")
            )));
        }
        if d.state.is_live() {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} is live (state={}); stop it before resuming",
                d.state.as_str()
            )));
        }
        if d.state == State::Cleaned {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} was cleaned up"
            )));
        }
        if let Some(w) = &rec.worktree
            && !Path::new(&w.path).is_dir()
        {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} works in the worktree {}, which is gone; a run resumes only in its \
                 own worktree. Release it with `proctor session cleanup {run_ref} \
                 --discard-worktree`",
                text::one_line(&w.path, 300)
            )));
        }
        let conversation = d.conversation_id.clone().ok_or_else(|| {
            SessionError::Conflict(format!(
                "run {run_ref} has no stored conversation: the tool never reported one, so resuming would start a new conversation"
            ))
        })?;
        let store = Store::new(&self.home.config);
        let user_home = self.user_home();
        let profile = store.find(&rec.profile, &user_home).map_err(|e| {
            SessionError::Conflict(format!("profile {} is no longer usable: {e}", rec.profile))
        })?;
        // The project-config check again: the folder may have changed since the start.
        let ws_ref = match &rec.worktree {
            Some(w) => w.workspace_ref.clone(),
            None => workspaces::find(&self.home, &rec.workspace)
                .map_err(|e| SessionError::Internal(e.to_string()))?
                .map(|w| w.ws_ref),
        };
        workspaces::admit_folder(
            &self.home,
            ws_ref.as_deref(),
            profile.tool,
            Path::new(&rec.workspace),
        )
        .map_err(admit_error)?;
        let transport = if rec.transport == "pty" {
            Transport::Pty
        } else {
            Transport::Pipe
        };
        // The PATH recorded for the run (a resume runs the tool the run started with, whoever
        // asks); a run recorded before PATHs were recorded uses the server's.
        let (path_var, path_from) = match rec.path.clone().or_else(|| recorded_path(&rec)) {
            Some(p) => (Some(OsString::from(p)), PathFrom::Run),
            None => (self.parent_var("PATH"), PathFrom::Server),
        };
        let program = providers::resolve_from(profile.tool, path_var.as_deref(), path_from)
            .map_err(|e| SessionError::Unprocessable(e.to_string()))?;
        let generation = d.generation + 1;
        self.record(
            &mut inner,
            run_ref,
            kinds::RESUMED,
            json!({"generation": generation, "conversation_id": conversation}),
        )?;
        let size = size.unwrap_or_default();
        if let Err(e) = self.spawn_generation(
            &mut inner,
            run_ref,
            generation,
            &profile,
            transport,
            size,
            Some(&conversation),
            &program,
            (path_var.as_deref(), path_from),
            None,
        ) {
            self.record(
                &mut inner,
                run_ref,
                kinds::LAUNCH_FAILED,
                json!({"generation": generation, "error": e.to_string()}),
            )?;
        }
        self.view(&inner, run_ref, Some(caller))
    }

    /// What `GET /runs/{ref}/cast` exports: a PTY run's transcript and timing of
    /// `generation` (the current one by default), opened and checked, and the header's
    /// words. A pipe run, a run that never started, a generation it does not have, a
    /// transcript gone from the disk and a run recorded before output times were kept are
    /// each refused by name. A live run's buffered timing is handed to the kernel first.
    pub fn cast(
        &self,
        run_ref: &str,
        generation: Option<u64>,
    ) -> Result<(runs::cast::CastSource, runs::cast::CastMeta), SessionError> {
        let (dir, meta) = {
            let inner = self.lock();
            let rec = self.get_record(&inner, run_ref)?;
            if rec.transport != Transport::Pty.name() {
                return Err(SessionError::Unprocessable(format!(
                    "run {run_ref} is a {} run: it has no terminal output to export as a cast                      (its output is the tool's protocol, kept in stdout.raw and stderr.raw).                      Remedy: a cast is made from a PTY run (`proctor session start --transport                      pty`, the default)",
                    text::one_line(&rec.transport, 16)
                )));
            }
            let d = rec.derive();
            if d.generation == 0 {
                return Err(SessionError::Conflict(format!(
                    "run {run_ref} has not started: it has no output to export yet"
                )));
            }
            let generation = generation.unwrap_or(d.generation);
            if generation == 0 || generation > d.generation {
                return Err(SessionError::Missing(format!(
                    "run {run_ref} has no generation {generation}: its generations are 1 to {}.                      Remedy: leave the generation out for the current one",
                    d.generation
                )));
            }
            if let Some(l) = inner.live.get(run_ref)
                && l.generation == generation
            {
                l.run.flush_timing();
            }
            let meta = runs::cast::CastMeta {
                run_ref: run_ref.to_string(),
                generation,
                tool: Tool::parse(&rec.tool).ok().map(Tool::name),
                demo: rec.demo,
                exit_code: d.exit_code.filter(|_| generation == d.generation),
            };
            let dir = runs_dir(&self.home)
                .join(run_ref)
                .join(format!("gen-{generation}"));
            (dir, meta)
        };
        let g = meta.generation;
        let src = runs::cast::CastSource::open(&dir).map_err(|e| match e {
            runs::cast::CastError::NoTranscript(_) => SessionError::Missing(format!(
                "run {run_ref} generation {g} has no terminal transcript on disk (pty.raw is                  not in its folder): there is nothing to export"
            )),
            runs::cast::CastError::NoTiming(_) => SessionError::Unprocessable(format!(
                "run {run_ref} generation {g} was recorded before proctor kept the times of a                  run's output: its folder has pty.raw but no pty.timing, so its bytes are kept                  but not when they came, and an export never invents times. Remedy: runs                  started (or resumed) from now on can be exported"
            )),
            other => SessionError::Internal(format!(
                "cannot export run {run_ref} generation {g}: {other}"
            )),
        })?;
        Ok((src, meta))
    }

    pub fn resize(&self, run_ref: &str, size: TermSize) -> Result<(), SessionError> {
        let inner = self.lock();
        self.get_record(&inner, run_ref)?;
        let live = inner
            .live
            .get(run_ref)
            .ok_or_else(|| SessionError::Conflict(format!("run {run_ref} is not live")))?;
        live.run.resize(size).map_err(|e| match e {
            RunError::NotAPty { .. } => SessionError::BadRequest(e.to_string()),
            RunError::BadSize { .. } => SessionError::Unprocessable(e.to_string()),
            other => SessionError::Conflict(other.to_string()),
        })
    }

    fn ensure_not_cleaned(&self, inner: &Inner, run_ref: &str) -> Result<(), SessionError> {
        let state = self.get_record(inner, run_ref)?.derive().state;
        if state == State::Cleaned {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} was cleaned up"
            )));
        }
        Ok(())
    }

    fn marks_view(&self, inner: &Inner, run_ref: &str, caller: &str) -> MarksView {
        let m = inner.marks.get(caller, run_ref, &now());
        MarksView {
            run_ref: run_ref.to_string(),
            pinned: m.pinned_at.is_some(),
            pinned_at: m.pinned_at,
            snoozed_until: m.snoozed_until,
            done: m.done,
        }
    }

    pub fn pin(&self, run_ref: &str, caller: &str, on: bool) -> Result<MarksView, SessionError> {
        let mut inner = self.lock();
        self.ensure_not_cleaned(&inner, run_ref)?;
        if on {
            inner.marks.pin(caller, run_ref, &now())?;
        } else {
            inner.marks.unpin(caller, run_ref)?;
        }
        Ok(self.marks_view(&inner, run_ref, caller))
    }

    pub fn snooze(
        &self,
        run_ref: &str,
        caller: &str,
        until: Option<&str>,
    ) -> Result<MarksView, SessionError> {
        let mut inner = self.lock();
        self.ensure_not_cleaned(&inner, run_ref)?;
        match until {
            Some(u) => {
                let t = chrono::DateTime::parse_from_rfc3339(u).map_err(|_| {
                    SessionError::BadRequest(format!("until {u:?} is not an RFC 3339 instant"))
                })?;
                if t <= chrono::Utc::now() {
                    return Err(SessionError::BadRequest(format!(
                        "until {u} is not in the future"
                    )));
                }
                let canonical = t
                    .with_timezone(&chrono::Utc)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                inner.marks.snooze(caller, run_ref, &canonical)?;
            }
            None => inner.marks.unsnooze(caller, run_ref)?,
        }
        Ok(self.marks_view(&inner, run_ref, caller))
    }

    pub fn done(&self, run_ref: &str, caller: &str, on: bool) -> Result<MarksView, SessionError> {
        let mut inner = self.lock();
        self.ensure_not_cleaned(&inner, run_ref)?;
        inner.marks.set_done(caller, run_ref, on)?;
        Ok(self.marks_view(&inner, run_ref, caller))
    }

    /// Renames (or, with an empty name, un-names) a run. The ledger records the ref, never
    /// the name; a name that is already the run's changes and records nothing.
    /// Moves a stopped or failed Claude Code run to another profile of its tool (issue 18
    /// §2): copies that one conversation from the run's account home to the target's
    /// ([`super::moving`]), then re-attaches the run to the target profile with one ledger
    /// event (`sessions.run.moved {from, to, to_home, files, conversation_id}`). Nothing
    /// starts: the next resume runs under the target. A refusal writes nothing and removes
    /// what the move created.
    pub fn move_run(
        &self,
        run_ref: &str,
        target: &str,
        caller: &str,
    ) -> Result<RunView, SessionError> {
        self.move_run_with(run_ref, target, caller, &mut |_| {})
    }

    /// [`Sessions::move_run`], with what runs after each copied file (tests make a file
    /// appear or change at that moment).
    pub fn move_run_with(
        &self,
        run_ref: &str,
        target: &str,
        caller: &str,
        after_file: &mut dyn FnMut(&Path),
    ) -> Result<RunView, SessionError> {
        use super::moving::{self, MoveError};
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?.clone();
        let d = rec.derive();
        if rec.tool != Tool::Claude.name() {
            return Err(SessionError::Unprocessable(format!(
                "run {run_ref} is a {} session: only a Claude Code session moves (its stored \
                 conversation is carried); `handoff` continues another tool's session",
                rec.tool
            )));
        }
        if !matches!(d.state, State::Stopped | State::Failed) {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} is {}: only a stopped or failed session moves; stop it first",
                d.state.as_str()
            )));
        }
        if let Some(b) = &rec.boundary
            && b.kind != BoundaryKind::Host
        {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} ran in rig {}: its conversation is not in a home of this host",
                b.rig.as_deref().unwrap_or("?")
            )));
        }
        let store = Store::new(&self.home.config);
        let user_home = self.user_home();
        let to = store.find(target, &user_home).map_err(|e| {
            SessionError::Unprocessable(format!("no usable target profile {target}: {e}"))
        })?;
        if to.tool != Tool::Claude {
            return Err(SessionError::Conflict(format!(
                "profile {} runs {}, not claude: a move stays with the session's tool",
                to.name,
                to.tool.name()
            )));
        }
        if to.name == rec.profile {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} is already under profile {}",
                to.name
            )));
        }
        // The target as a launch would take it: its home must be usable.
        let to_home = providers::profile::check_home(to.tool, &to.home).map_err(|e| {
            SessionError::Conflict(format!("profile {} cannot take the session: {e}", to.name))
        })?;
        let from = store.find(&rec.profile, &user_home).map_err(|e| {
            SessionError::Conflict(format!(
                "the run's profile {} is no longer usable: {e}",
                rec.profile
            ))
        })?;
        let from_home = std::fs::canonicalize(&from.home).unwrap_or(from.home.clone());
        // The home the run's conversation was written in: its last start's, or its last
        // move's target. A row whose home is not its profile's is refused.
        let mut run_home: Option<String> = None;
        for e in &rec.events {
            let key = match e.kind.as_str() {
                kinds::STARTED => "account_home",
                kinds::MOVED => "to_home",
                _ => continue,
            };
            if let Some(h) = e.fields.get(key).and_then(Value::as_str) {
                run_home = Some(h.to_string());
            }
        }
        if let Some(h) = &run_home {
            let h = std::fs::canonicalize(h).unwrap_or_else(|_| PathBuf::from(h));
            if h != from_home {
                return Err(SessionError::Conflict(format!(
                    "run {run_ref} ran with the account home {}, which is not its profile {}'s \
                     ({}): the move would not carry the conversation it wrote",
                    text::one_line(&h.to_string_lossy(), 300),
                    rec.profile,
                    text::one_line(&from_home.to_string_lossy(), 300)
                )));
            }
        }
        let conversation = d.conversation_id.clone();
        if let Some(id) = &conversation {
            for (other_ref, other) in &inner.records {
                if other_ref != run_ref
                    && other.profile == to.name
                    && other.derive().conversation_id.as_deref() == Some(id.as_str())
                {
                    return Err(SessionError::Conflict(format!(
                        "conversation {id} is already the session {other_ref}'s under profile {}",
                        to.name
                    )));
                }
            }
        }
        // A copy this run's own earlier move left on the target is replaced.
        let replace = rec.events.iter().any(|e| {
            e.kind == kinds::MOVED
                && e.fields.get("to").and_then(Value::as_str) == Some(to.name.as_str())
        });
        let cwd = rec
            .worktree
            .as_ref()
            .map(|w| PathBuf::from(&w.path))
            .unwrap_or_else(|| PathBuf::from(&rec.workspace));
        let moved_err = |e: MoveError| match e {
            MoveError::Unsafe(m) => SessionError::Unprocessable(m),
            MoveError::Conflict(m) | MoveError::Missing(m) => SessionError::Conflict(m),
        };
        let placed = match &conversation {
            None => None,
            Some(id) => match moving::plan(&from_home, &cwd, id).map_err(moved_err)? {
                Some(plan) => {
                    let files = plan.files();
                    Some((
                        moving::copy(&plan, &to_home, replace, after_file).map_err(moved_err)?,
                        files,
                    ))
                }
                // claude's PTY form names its session at startup (its SessionStart hook) and
                // writes the transcript only with the first message: a PTY run stopped before
                // one has no conversation yet, and moves with nothing to carry.
                None if rec.transport == "pty" => None,
                None => {
                    return Err(SessionError::Conflict(format!(
                        "conversation {id} of run {run_ref} is not in its account home {} \
                         (projects/…/{id}.jsonl): nothing to move",
                        text::one_line(&from_home.to_string_lossy(), 300)
                    )));
                }
            },
        };
        let files = placed.as_ref().map_or(0, |p| p.1);
        let before = rec.profile.clone();
        if let Some(r) = inner.records.get_mut(run_ref) {
            r.profile = to.name.clone();
        }
        let fields = json!({"from": before, "to": to.name, "to_home": to_home.to_string_lossy(),
                            "files": files, "conversation_id": conversation, "by": caller});
        if let Err(e) = self.record(&mut inner, run_ref, kinds::MOVED, fields) {
            if let Some(r) = inner.records.get_mut(run_ref) {
                r.profile = before;
            }
            if let Some((p, _)) = placed {
                p.undo();
            }
            return Err(e);
        }
        if let Some((p, _)) = placed {
            p.commit();
        }
        self.view(&inner, run_ref, Some(caller))
    }

    /// The source of a handoff (`GET`/`POST /runs/{ref}/handoff`): a run whose tool's
    /// conversation proctor reads (422 otherwise, grok included), that started (409 for one
    /// that never did), that is not cleaned up, on the host, under a usable profile (409).
    fn handoff_source(&self, run_ref: &str) -> Result<HandoffSource, SessionError> {
        let (rec, tool, live, conversation, home, exporter) =
            self.record_target(run_ref, |tool| {
                format!(
                    "{tool} sessions have no conversation proctor reads, so none is handed off: a \
                 handoff reads the stored conversation of {}",
                    handoff_readers()
                )
            })?;
        let d = rec.derive();
        if d.started_at.is_none() {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} never started (state={}): it has no conversation to hand off",
                d.state.as_str()
            )));
        }
        if d.state == State::Cleaned {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} was cleaned up: a handoff continues a stopped, failed, running \
                 or idle session"
            )));
        }
        Ok(HandoffSource {
            rec,
            tool,
            live,
            conversation,
            home,
            exporter,
        })
    }

    /// Reads the source's conversation through its tool's reader (bounded: 256 MiB for the
    /// request, the reader's own bounds per file). An unreadable record is refused (422),
    /// naming the size rule it breaks when it breaks one.
    fn handoff_read(
        &self,
        src: &HandoffSource,
        live: bool,
    ) -> Result<HandoffConversation, SessionError> {
        use super::handoff;
        use crate::providers::records;
        let cwd = Path::new(&src.rec.workspace);
        let target = records::Target {
            tool: src.tool,
            home: &src.home,
            cwd,
            conversation_id: src.conversation.as_deref(),
            live,
            exporter: src.exporter.as_ref(),
        };
        // A handoff takes a record of up to 256 MiB (not the 8 MiB of a route's read).
        let budget = || records::Budget::with_file_max(handoff::MAX_TOTAL, handoff::MAX_TOTAL);
        let read = records::messages(&target, &mut budget())
            .map_err(|e| SessionError::Unprocessable(e.to_string()))?;
        // A record read whole may still hold one record over 32 MiB (only a file larger
        // than that can).
        if read.state == records::TranscriptState::Read
            && let Some(p) = read.path.as_deref()
            && std::fs::symlink_metadata(p).is_ok_and(|m| m.len() > handoff::MAX_RECORD)
            && let Some(why) = handoff::oversize(p)
        {
            return Err(SessionError::Unprocessable(format!(
                "the conversation of run {} cannot be handed off: {why}",
                src.rec.run_ref
            )));
        }
        if read.state == records::TranscriptState::Unreadable {
            let why = read
                .path
                .as_deref()
                .and_then(handoff::oversize)
                .or(read.reason.clone())
                .unwrap_or_else(|| "the record could not be read".into());
            return Err(SessionError::Unprocessable(format!(
                "the conversation of run {} cannot be handed off: {why}",
                src.rec.run_ref
            )));
        }
        let bytes = match (&read.path, read.state) {
            (Some(p), records::TranscriptState::Read) => {
                std::fs::symlink_metadata(p).map_or(0, |m| m.len())
            }
            _ => 0,
        };
        // The tool calls and the lines no reader took, for the tools whose record is JSON
        // lines that proctor's activity reader knows.
        let (activity, unreadable) = match src.tool {
            Tool::Claude | Tool::Codex if read.state == records::TranscriptState::Read => {
                match records::raw(&target, &mut budget()) {
                    Ok(records::Raw { bytes: Some(b), .. }) => {
                        let a = if src.tool == Tool::Codex {
                            records::activity::codex(&b, false)
                        } else {
                            records::activity::claude(&b, false, &|_| false)
                        };
                        (Some(a), Some(handoff::unreadable_lines(&b)))
                    }
                    _ => (None, None),
                }
            }
            _ => (None, None),
        };
        Ok(HandoffConversation {
            read,
            bytes,
            activity,
            unreadable,
        })
    }

    /// `GET /runs/{ref}/handoff`: the digest a handoff would start from, made without a
    /// model from the stored conversation (a running session is read as it is). Every read
    /// is audited (`sessions.run.handoff_preview`).
    pub fn handoff_preview(
        &self,
        run_ref: &str,
        caller: &str,
    ) -> Result<super::handoff::HandoffPreview, SessionError> {
        let src = self.handoff_source(run_ref)?;
        let conv = self.handoff_read(&src, src.live)?;
        let msgs = &conv.read.messages;
        let out = super::handoff::HandoffPreview {
            run_ref: run_ref.to_string(),
            summary: super::handoff::digest(run_ref, src.tool.name(), &src.rec.profile, msgs),
            source_driver: src.tool.name().to_string(),
            turns: msgs
                .iter()
                .filter(|m| m.role == crate::providers::records::Role::User)
                .count() as u64,
            messages: msgs.len() as u64,
            transcript_bytes: conv.bytes,
            transcript: conv.read.state,
        };
        // Every read is recorded (seed 002: « chaque lecture en est consignée »), not once
        // per window as the other reads: a preview is what a handoff would send elsewhere.
        {
            let mut inner = self.lock();
            self.record(
                &mut inner,
                run_ref,
                kinds::HANDOFF_PREVIEW,
                json!({"by": caller, "transcript": conv.read.state.as_str()}),
            )?;
        }
        Ok(out)
    }

    /// `POST /runs/{ref}/handoff`: starts a new session in profile `target` (any tool), in
    /// the source's workspace (a new worktree when the source had one) and transport, whose
    /// first turn is the summary (reviewed, or the digest) and the path of a transcript file
    /// written under the target's account home. Every refusal that needs no stop comes
    /// first (the body, the source, the target profile, the new start's own checks, a
    /// hostile record); then a running source is stopped as `POST /stop` does
    /// ([`Sessions::stop_async`]) and its conversation read once its tool has ended; a
    /// refusal after the stop says so. A refusal writes nothing (no transcript file, no
    /// run). The new run's `created` event carries `handoff_of`; the source's ledger gets
    /// `sessions.run.handed_off`.
    ///
    /// For a request handler: the stop's grace and the wait for the first turn's delivery
    /// are awaited on timers, so a handoff in progress holds no thread; only its short
    /// steps (the checks, the reads, the launch, each look at the new run's record) run on
    /// the blocking pool, each for its own length.
    pub async fn handoff(
        self: &Arc<Self>,
        run_ref: &str,
        body: &super::handoff::HandoffBody,
        caller: &str,
    ) -> Result<super::handoff::Handoff, SessionError> {
        use super::handoff::SummaryState;
        let (me, r, b) = (self.clone(), run_ref.to_string(), body.clone());
        let prepared = tokio::task::spawn_blocking(move || me.handoff_prepare(&r, &b))
            .await
            .map_err(SessionError::internal)??;
        let stopped = if prepared.live {
            self.stop_async(run_ref, caller).await?;
            true
        } else {
            false
        };
        let (me, r, c) = (self.clone(), run_ref.to_string(), caller.to_string());
        let launched =
            tokio::task::spawn_blocking(move || me.handoff_launch(&r, prepared, stopped, &c))
                .await
                .map_err(SessionError::internal)??;
        let state = if launched.sent {
            self.handoff_delivery(&launched.new_ref, &launched.to_home, &launched.first)
                .await
        } else {
            SummaryState::NotDelivered
        };
        let (me, c) = (self.clone(), caller.to_string());
        let new_ref = launched.new_ref.clone();
        let run = tokio::task::spawn_blocking(move || {
            let inner = me.lock();
            me.view(&inner, &new_ref, Some(&c))
        })
        .await
        .map_err(SessionError::internal)??;
        Ok(super::handoff::Handoff {
            run,
            summary_state: state,
            first_turn: (state != SummaryState::Delivered).then_some(launched.first),
            transcript_path: launched.transcript.to_string_lossy().into_owned(),
            stopped_source: stopped,
        })
    }

    /// A handoff's refusals that need no stop: the body, the source, the target profile,
    /// the new start as `POST /runs` would take it, a hostile record (read as it is).
    fn handoff_prepare(
        &self,
        run_ref: &str,
        body: &super::handoff::HandoffBody,
    ) -> Result<HandoffPrepared, SessionError> {
        use super::handoff as h;
        let target = body
            .provider_profile_ref
            .as_deref()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                SessionError::BadRequest(
                    "handoff needs {\"provider_profile_ref\": string}, the profile the new \
                     session starts in"
                        .into(),
                )
            })?;
        let summary = body
            .summary
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string);
        if let Some(s) = &summary {
            if s.contains('\0') {
                return Err(SessionError::BadRequest(
                    "the summary holds a NUL byte, which no tool's input can carry".into(),
                ));
            }
            if s.len() > h::MAX_SUMMARY {
                return Err(SessionError::Unprocessable(format!(
                    "the summary is {} bytes, more than the {} a handoff takes",
                    s.len(),
                    h::MAX_SUMMARY
                )));
            }
        }
        if let Some(n) = &body.name {
            text::validate_run_name(n).map_err(|e| SessionError::BadRequest(e.to_string()))?;
        }
        let src = self.handoff_source(run_ref)?;
        let store = Store::new(&self.home.config);
        let to = store.find(target, &self.user_home()).map_err(|e| match e {
            ProfileError::NotFound { .. } => {
                SessionError::Unprocessable(format!("no target profile {target}: {e}"))
            }
            other => SessionError::BadRequest(other.to_string()),
        })?;
        let to_home = providers::profile::check_home(to.tool, &to.home).map_err(|e| {
            SessionError::Conflict(format!("profile {} cannot take the session: {e}", to.name))
        })?;
        // The new start as POST /runs would take it, checked now: before any stop.
        let workspace = match &src.rec.worktree {
            Some(w) => w.workspace_ref.clone().unwrap_or_else(|| w.repo.clone()),
            None => src.rec.workspace.clone(),
        };
        let req = StartRequest {
            profile: Some(to.name.clone()),
            transport: Some(src.rec.transport.clone()),
            workspace: Some(workspace),
            name: body.name.clone(),
            worktree: src.rec.worktree.as_ref().map(|_| true),
            path: src.rec.path.clone().or_else(|| recorded_path(&src.rec)),
            ..Default::default()
        };
        let plan = self.plan_start(&req, None)?;
        // A hostile record is refused before the stop too (read as it is).
        self.handoff_read(&src, src.live)?;
        Ok(HandoffPrepared {
            live: src.live,
            summary,
            to_name: to.name,
            to_tool: to.tool,
            to_home,
            plan,
        })
    }

    /// A handoff's steps once a live source is stopped (`stopped`): its conversation read,
    /// the transcript file written, the new session launched and its first turn sent, the
    /// source's `handed_off` recorded. A refusal from here on says that the source was
    /// stopped and can be resumed, and removes the file it wrote.
    fn handoff_launch(
        self: &Arc<Self>,
        run_ref: &str,
        p: HandoffPrepared,
        stopped: bool,
        caller: &str,
    ) -> Result<HandoffLaunched, SessionError> {
        use super::handoff as h;
        let after = |e: SessionError| -> SessionError {
            if !stopped {
                return e;
            }
            let note = format!(
                " (run {run_ref} was stopped by this handoff and can be resumed: `proctor \
                 session resume {run_ref}`)"
            );
            match e {
                SessionError::Conflict(m) => SessionError::Conflict(m + &note),
                SessionError::Unprocessable(m) => SessionError::Unprocessable(m + &note),
                SessionError::BadRequest(m) => SessionError::BadRequest(m + &note),
                SessionError::Missing(m) => SessionError::Missing(m + &note),
                SessionError::Unavailable(m) => SessionError::Unavailable(m + &note),
                SessionError::Internal(m) => SessionError::Internal(m + &note),
                SessionError::NotFound(m) => SessionError::Conflict(m + &note),
            }
        };
        // The conversation as the tool left it.
        let src = self.handoff_source(run_ref).map_err(after)?;
        let conv = self.handoff_read(&src, false).map_err(after)?;
        if conv.read.state != crate::providers::records::TranscriptState::Read
            || conv.read.messages.is_empty()
        {
            return Err(after(SessionError::Conflict(format!(
                "run {run_ref} has no recorded conversation to hand off (its record is {})",
                conv.read.state.as_str()
            ))));
        }
        let msgs = &conv.read.messages;
        let generated = p.summary.is_none();
        let summary = p
            .summary
            .unwrap_or_else(|| h::digest(run_ref, src.tool.name(), &src.rec.profile, msgs));
        // The transcript file: a name of its own, 0600, in a 0700 folder of the target home.
        let dir = p.to_home.join(h::FOLDER);
        let made_dir = std::fs::symlink_metadata(&dir).is_err();
        files::ensure_private_dir(&dir).map_err(|e| {
            after(SessionError::Conflict(format!(
                "the transcript folder in profile {}'s home cannot be used: {e}",
                p.to_name
            )))
        })?;
        let mut rand = [0u8; 6];
        let _ = getrandom::fill(&mut rand);
        let written_at = now();
        let path = dir.join(format!(
            "{run_ref}-{}-{}.md",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ"),
            hex::encode(rand)
        ));
        let bytes = h::transcript(
            &h::Source {
                run_ref,
                tool: src.tool.name(),
                profile: &src.rec.profile,
                conversation_id: src.conversation.as_deref(),
                worktree: src
                    .rec
                    .worktree
                    .as_ref()
                    .map(|w| (w.path.as_str(), w.branch.as_str())),
                record: conv.read.path.as_deref(),
                written_at: &written_at,
                unreadable: conv.unreadable,
                activity: conv.activity.as_ref(),
            },
            msgs,
        );
        let remove = |path: &Path| {
            let _ = std::fs::remove_file(path);
            if made_dir {
                let _ = std::fs::remove_dir(&dir);
            }
        };
        let wrote = files::create_private_new(&path).and_then(|mut f| {
            use std::io::Write;
            f.write_all(&bytes)
                .and_then(|()| f.sync_all())
                .map_err(|e| files::FilesError::io("write", &path, e))
        });
        if let Err(e) = wrote {
            remove(&path);
            return Err(after(SessionError::Internal(format!(
                "writing the transcript file failed: {e}"
            ))));
        }
        let first = h::first_turn(&summary, run_ref, src.tool.name(), &path);
        let (new_ref, mut inner) = match self.launch_planned(p.plan, None, Some(run_ref)) {
            Ok(x) => x,
            Err(e) => {
                remove(&path);
                return Err(after(e));
            }
        };
        let sent = inner.live.contains_key(&new_ref)
            && self
                .first_turn_locked(&mut inner, &new_ref, first.clone())
                .is_ok();
        self.record(
            &mut inner,
            run_ref,
            kinds::HANDED_OFF,
            json!({"to_run": new_ref, "to_profile": p.to_name, "to_tool": p.to_tool.name(),
                   "transcript": path.to_string_lossy(), "messages": msgs.len(),
                   "summary": if generated { "generated" } else { "reviewed" },
                   "stopped": stopped, "by": caller}),
        )?;
        Ok(HandoffLaunched {
            new_ref,
            to_home: p.to_home,
            first,
            sent,
            transcript: path,
        })
    }

    /// Whether a handed-off run's first turn reached it: its tool reported a turn of its
    /// first generation, or recorded the turn in its own record. Waits at most
    /// [`Settings::handoff_delivery_wait`] on the reactor's timers (each look runs on the blocking
    /// pool for its own length); a run that ends or a wait that runs out unconfirmed is
    /// `unknown`.
    async fn handoff_delivery(
        self: &Arc<Self>,
        run_ref: &str,
        home: &Path,
        first: &str,
    ) -> super::handoff::SummaryState {
        use super::handoff::SummaryState;
        let deadline = tokio::time::Instant::now() + self.settings.handoff_delivery_wait;
        // An OpenCode target's record is read through its own `opencode export`.
        let (me, r) = (self.clone(), run_ref.to_string());
        let exporter = tokio::task::spawn_blocking(move || {
            me.record_target(&r, |tool| tool.to_string())
                .ok()
                .and_then(|t| t.5)
        })
        .await
        .ok()
        .flatten();
        let mut exported: Option<std::time::Instant> = None;
        loop {
            let (me, r, h, f, x) = (
                self.clone(),
                run_ref.to_string(),
                home.to_path_buf(),
                first.to_string(),
                exporter.clone(),
            );
            let look = tokio::task::spawn_blocking(move || {
                me.handoff_delivery_look(&r, &h, &f, x.as_ref(), exported)
            })
            .await;
            let Ok(look) = look else {
                return SummaryState::Unknown;
            };
            match look {
                DeliveryLook::Delivered => return SummaryState::Delivered,
                DeliveryLook::Ended => return SummaryState::Unknown,
                DeliveryLook::Waiting { exported_at } => exported = exported_at,
            }
            if tokio::time::Instant::now() >= deadline {
                return SummaryState::Unknown;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One look of [`Sessions::handoff_delivery`]: the new run's turns, then its tool's own
    /// record (an `opencode export` at most once a second, `exported` being the last).
    fn handoff_delivery_look(
        &self,
        run_ref: &str,
        home: &Path,
        first: &str,
        exporter: Option<&crate::providers::records::opencode::Exporter>,
        exported: Option<std::time::Instant>,
    ) -> DeliveryLook {
        use crate::providers::records;
        let (tool, cwd, conversation, live, turned) = {
            let inner = self.lock();
            let Some(rec) = inner.records.get(run_ref) else {
                return DeliveryLook::Ended;
            };
            let d = rec.derive();
            let turned = rec.events.iter().any(|e| {
                (e.kind == kinds::TURN_STARTED || e.kind == kinds::TURN_ENDED)
                    && e.fields.get("generation").and_then(Value::as_u64) == Some(1)
            });
            (
                Tool::parse(&rec.tool).ok(),
                rec.workspace.clone(),
                d.conversation_id,
                d.state.is_live(),
                turned,
            )
        };
        if turned {
            return DeliveryLook::Delivered;
        }
        // An `opencode export` is a process: run once a second at most.
        let due = tool != Some(Tool::Opencode)
            || exported.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        let mut exported_at = exported;
        if let (Some(tool), Some(id), true) = (tool, &conversation, due)
            && records::has_messages(tool)
        {
            exported_at = Some(std::time::Instant::now());
            let t = records::Target {
                tool,
                home,
                cwd: Path::new(&cwd),
                conversation_id: Some(id),
                live,
                exporter,
            };
            if let Ok(r) = records::messages(&t, &mut records::Budget::default())
                && r.messages
                    .iter()
                    .any(|m| m.role == records::Role::User && m.text.trim() == first.trim())
            {
                return DeliveryLook::Delivered;
            }
        }
        if !live {
            return DeliveryLook::Ended;
        }
        DeliveryLook::Waiting { exported_at }
    }

    pub fn rename(&self, run_ref: &str, raw: &str, caller: &str) -> Result<RunView, SessionError> {
        let name =
            text::validate_run_name(raw).map_err(|e| SessionError::BadRequest(e.to_string()))?;
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        if rec.name == name {
            return self.view(&inner, run_ref, Some(caller));
        }
        let rec = inner.records.get_mut(run_ref).expect("checked");
        let before = rec.name.clone();
        rec.name = name;
        if let Err(e) = self.record(&mut inner, run_ref, kinds::RENAMED, json!({})) {
            if let Some(r) = inner.records.get_mut(run_ref) {
                r.name = before;
            }
            return Err(e);
        }
        self.view(&inner, run_ref, Some(caller))
    }

    /// Archives or unarchives, for everyone. Idempotent, and a no-op records nothing.
    pub fn archive(&self, run_ref: &str, on: bool, caller: &str) -> Result<RunView, SessionError> {
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        if rec.archived_at.is_some() == on {
            return self.view(&inner, run_ref, Some(caller));
        }
        let rec = inner.records.get_mut(run_ref).expect("checked");
        rec.archived_at = on.then(now);
        let kind = if on {
            kinds::ARCHIVED
        } else {
            kinds::UNARCHIVED
        };
        self.record(&mut inner, run_ref, kind, json!({}))?;
        self.view(&inner, run_ref, Some(caller))
    }

    /// Releases a run that has no live process: marks are dropped, its output handle
    /// released. A worktree run is released only when its worktree can go without losing
    /// work (merged, on its branch, clean), or when `discard_worktree` confirms; see
    /// [`worktrees::release`]. Cleaning a cleaned run changes nothing.
    pub fn cleanup(
        &self,
        run_ref: &str,
        by: &str,
        discard_worktree: bool,
    ) -> Result<CleanedUp, SessionError> {
        let mut inner = self.lock();
        let rec = self.get_record(&inner, run_ref)?;
        let state = rec.derive().state;
        if state == State::Cleaned {
            return Ok(CleanedUp {
                run: self.view(&inner, run_ref, Some(by))?,
                cleaned: None,
            });
        }
        if state.is_live() {
            return Err(SessionError::Conflict(format!(
                "run {run_ref} is live (state={}); stop it before cleanup",
                state.as_str()
            )));
        }
        // The ledger's fields as they always were (`{"worktree": "none", "by"}` without a
        // worktree); the answer carries the same facts with every field present.
        let (fields, cleaned) = match rec.worktree.clone() {
            None => (
                json!({"worktree": "none", "by": by}),
                Cleaned {
                    worktree: "none".into(),
                    path: None,
                    branch: None,
                    branch_tip: None,
                    branch_deleted: None,
                    discarded: None,
                    by: by.to_string(),
                },
            ),
            Some(info) => {
                let r = worktrees::release(&info, discard_worktree)?;
                let fields = json!({
                    "worktree": r.worktree,
                    "path": r.path,
                    "branch": r.branch,
                    "branch_tip": r.branch_tip,
                    "branch_deleted": r.branch_deleted,
                    "discarded": r.discarded,
                    "by": by,
                });
                let cleaned = Cleaned {
                    worktree: r.worktree.to_string(),
                    path: Some(r.path),
                    branch: Some(r.branch),
                    branch_tip: r.branch_tip,
                    branch_deleted: Some(r.branch_deleted),
                    discarded: Some(r.discarded),
                    by: by.to_string(),
                };
                (fields, cleaned)
            }
        };
        inner.live.remove(run_ref);
        inner.marks.forget_run(run_ref)?;
        self.record(&mut inner, run_ref, kinds::CLEANED, fields)?;
        Ok(CleanedUp {
            run: self.view(&inner, run_ref, Some(by))?,
            cleaned: Some(cleaned),
        })
    }

    /// Deletes a cleaned run's record and its transcripts.
    pub fn delete(&self, run_ref: &str, by: &str) -> Result<Deleted, SessionError> {
        let mut inner = self.lock();
        let state = self.get_record(&inner, run_ref)?.derive().state;
        if state != State::Cleaned {
            return Err(SessionError::Conflict(format!(
                "session must be cleaned before delete (state={})",
                state.as_str()
            )));
        }
        let mut fields = Map::new();
        fields.insert("run".into(), json!(run_ref));
        fields.insert("by".into(), json!(by));
        self.ledger.append(kinds::DELETED, &fields)?;
        inner.records.remove(run_ref);
        inner.live.remove(run_ref);
        inner.marks.forget_run(run_ref)?;
        let dir = runs_dir(&self.home).join(run_ref);
        std::fs::remove_dir_all(&dir)
            .map_err(|e| SessionError::internal(format!("{}: {e}", dir.display())))?;
        Ok(Deleted {
            run_ref: run_ref.to_string(),
            deleted: true,
        })
    }
}

/// How the run's current generation is held: `{"mechanism": "cgroup", "path": …}` or
/// `{"mechanism": "subreaper"}`, from the live process or from its `started` event; null
/// before any start.
fn hold_view(inner: &Inner, rec: &RunRecord) -> Option<HoldView> {
    if let Some(l) = inner.live.get(&rec.run_ref) {
        return Some(match l.run.hold() {
            runs::tree::Hold::Cgroup { path } => HoldView::Cgroup {
                path: Some(path.to_string_lossy().into_owned()),
            },
            runs::tree::Hold::Subreaper => HoldView::Subreaper,
        });
    }
    let e = rec.events.iter().rev().find(|e| e.kind == kinds::STARTED)?;
    let cgroup = e.fields.get("cgroup").and_then(Value::as_str);
    Some(match e.fields.get("hold").and_then(Value::as_str) {
        Some("cgroup") => HoldView::Cgroup {
            path: cgroup.map(str::to_string),
        },
        Some(_) => HoldView::Subreaper,
        // Started by a server from before holds were recorded: its process group only.
        None => HoldView::ProcessGroup,
    })
}

/// `GET /runs` query.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    pub limit: Option<usize>,
    pub offset: Option<usize>,
    pub state: Option<String>,
    pub pagination: Option<String>,
    pub cursor: Option<String>,
}

/// The file, in a generation's folder, where the subreaper fallback keeps the processes it
/// attributed to the run (pid and start time), for a later server's sweep.
const PROCS_FILE: &str = "procs.json";

/// Every live process (not zombies) whose environment holds a `PROCTOR_RUN_TAG` of this
/// home (`<prefix>…`), by tag.
fn tagged_processes_all(prefix: &str) -> HashMap<String, Vec<u32>> {
    let me = std::process::id();
    let mut out: HashMap<String, Vec<u32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let want = format!("{TAG_VAR}={prefix}");
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if pid == me || !living(pid) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        for kv in env.split(|b| *b == 0) {
            if kv.starts_with(want.as_bytes()) {
                let tag = String::from_utf8_lossy(&kv[TAG_VAR.len() + 1..]).to_string();
                out.entry(tag).or_default().push(pid);
            }
        }
    }
    out
}

/// True for a process that exists and is not a zombie (a zombie has ended; only its
/// parent's wait is missing).
fn living(pid: u32) -> bool {
    runs::proc_stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Ends orphaned processes: SIGTERM to each (and its group) and to every member of the
/// cgroups, then SIGKILL (and `cgroup.kill`) after the grace, on timers (the looks are
/// reads of `/proc/PID/stat` and of the cgroups' files). True when none is left alive.
async fn end_processes(ids: &[runs::Ident], cgroups: &[PathBuf], grace: Duration) -> bool {
    let same = |id: &runs::Ident| runs::proc_stat(id.0).is_some_and(|s| s.start_time == id.1);
    let signal_all = |sig: libc::c_int| {
        for id in ids.iter().filter(|id| same(id)) {
            // Its group too, when it leads one (ESRCH otherwise); pids 0 and 1 refused.
            let _ = crate::process_group::signal_group(id.0, sig);
            let _ = crate::process_group::signal_process(id.0, sig);
            if sig == libc::SIGTERM {
                let _ = crate::process_group::signal_process(id.0, libc::SIGCONT);
            }
        }
        for c in cgroups {
            if sig == libc::SIGKILL {
                let _ = runs::cgroup::kill(c);
            } else {
                runs::cgroup::signal_members(c, sig);
            }
        }
    };
    let all_gone = || {
        ids.iter()
            .all(|id| runs::proc_stat(id.0).is_none_or(|s| s.start_time != id.1 || s.state == 'Z'))
            && cgroups.iter().all(|c| !runs::cgroup::populated(c))
    };
    signal_all(libc::SIGTERM);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if all_gone() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_all(libc::SIGKILL);
    for _ in 0..250 {
        if all_gone() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The `sessions.run.*` events the ledger holds, by run.
struct LedgerRuns {
    events: BTreeMap<String, Vec<RunEvent>>,
    deleted: BTreeSet<String>,
    /// One more than the highest run number ever created.
    next_number: u64,
}

fn ledger_run_events(path: &Path) -> LedgerRuns {
    let mut out = LedgerRuns {
        events: BTreeMap::new(),
        deleted: BTreeSet::new(),
        next_number: 1,
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return out;
    };
    for line in text.lines().filter(|l| l.contains("\"sessions.run.")) {
        let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(seq), Some(kind), Some(at), Some(run)) = (
            m.get("seq").and_then(Value::as_u64),
            m.get("kind").and_then(Value::as_str).map(str::to_string),
            m.get("at").and_then(Value::as_str).map(str::to_string),
            m.get("run").and_then(Value::as_str).map(str::to_string),
        ) else {
            continue;
        };
        if !kind.starts_with("sessions.run.") {
            continue;
        }
        if kind == kinds::CREATED
            && let Some(n) = parse_ref_number(&run)
        {
            out.next_number = out.next_number.max(n + 1);
        }
        if kind == kinds::DELETED {
            out.deleted.insert(run.clone());
        }
        for k in ["seq", "kind", "at", "prev", "run"] {
            m.remove(k);
        }
        out.events.entry(run).or_default().push(RunEvent {
            seq,
            at,
            kind,
            fields: m,
        });
    }
    out
}

/// A run record rebuilt from the ledger's events alone (its `run.json` is gone). The name
/// and the worktree details are not in the ledger: they stay unknown.
fn rebuild_record(run_ref: &str, events: &[RunEvent]) -> Option<RunRecord> {
    let created = events.iter().find(|e| e.kind == kinds::CREATED)?;
    let f = &created.fields;
    let text = |k: &str| f.get(k).and_then(Value::as_str).map(str::to_string);
    let mut archived_at = None;
    let mut profile = text("profile");
    for e in events {
        match e.kind.as_str() {
            kinds::MOVED => {
                if let Some(to) = e.fields.get("to").and_then(Value::as_str) {
                    profile = Some(to.to_string());
                }
            }
            kinds::ARCHIVED => archived_at = Some(e.at.clone()),
            kinds::UNARCHIVED => archived_at = None,
            _ => {}
        }
    }
    Some(RunRecord {
        run_ref: run_ref.to_string(),
        tool: text("tool").unwrap_or_else(|| "unknown".into()),
        profile: profile.unwrap_or_else(|| "unknown".into()),
        transport: text("transport").unwrap_or_else(|| "pipe".into()),
        workspace: text("workspace").unwrap_or_default(),
        demo: f.get("demo").and_then(Value::as_bool).unwrap_or(false),
        created_at: created.at.clone(),
        name: None,
        archived_at,
        worktree: None,
        path: text("path"),
        boundary: f
            .get("boundary")
            .and_then(|b| serde_json::from_value(b.clone()).ok()),
        events: events.to_vec(),
    })
}

/// The PATH a run's `created` event recorded, if any.
fn recorded_path(rec: &RunRecord) -> Option<String> {
    rec.events
        .iter()
        .find(|e| e.kind == kinds::CREATED)
        .and_then(|e| e.fields.get("path"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// How long a handoff waits for its new session's tool to confirm the first turn, by
/// default.
pub const HANDOFF_DELIVERY_WAIT: Duration = Duration::from_secs(20);

/// A handoff's source run, as [`Sessions::handoff_source`] checked it.
struct HandoffSource {
    rec: RunRecord,
    tool: Tool,
    live: bool,
    conversation: Option<String>,
    /// Its profile's account home.
    home: PathBuf,
    /// How its record is read when its tool is OpenCode (its own `opencode export`).
    exporter: Option<crate::providers::records::opencode::Exporter>,
}

/// What a handoff checked before any stop, for its steps after it.
struct HandoffPrepared {
    /// The source was live: it is stopped before its conversation is read.
    live: bool,
    /// The reviewed summary (`None`: the digest).
    summary: Option<String>,
    to_name: String,
    to_tool: Tool,
    to_home: PathBuf,
    plan: StartPlan,
}

/// What a handoff launched.
struct HandoffLaunched {
    new_ref: String,
    to_home: PathBuf,
    first: String,
    /// The first turn was given to the new run's input.
    sent: bool,
    transcript: PathBuf,
}

/// One look at a handed-off run's first turn.
enum DeliveryLook {
    Delivered,
    /// The run is gone or no longer live, unconfirmed.
    Ended,
    Waiting {
        exported_at: Option<std::time::Instant>,
    },
}

/// A handoff source's conversation as read.
struct HandoffConversation {
    read: crate::providers::records::Read,
    /// The record's size (0 when none was read).
    bytes: u64,
    activity: Option<crate::providers::records::activity::Activity>,
    unreadable: Option<u64>,
}

/// The tools whose conversation a handoff reads, in words.
fn handoff_readers() -> String {
    let names: Vec<&str> = Tool::ALL
        .iter()
        .filter(|t| crate::providers::records::has_messages(**t))
        .map(|t| t.name())
        .collect();
    names.join(", ")
}

/// Why a tool's session has no activity to read (the 422 of `activity` and its agents).
fn no_activity(tool: Tool) -> String {
    format!(
        "{tool} sessions have no activity proctor reads: activity is read from Claude Code's \
         transcript, Codex's rollout, Gemini CLI's chat log and OpenCode's export only"
    )
}
