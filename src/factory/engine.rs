//! The agent factory (seed 000, "La véritable usine à agents"): one worker in a clean linked
//! worktree, its candidate bound before review, one read-only reviewer of another vendor,
//! at most one bounded repair that must change the candidate, and never a loop.
//!
//! The core owns the worktree's isolation, the candidate identity, the reviewer's
//! non-modification, the one repair and the receipt; the closed provider adapters
//! ([`super::invoke`]) own each tool's exact invocation. The engine calls them through
//! [`Invoker`], so every refusal here is tested with stand-ins in the real tools' shapes.
//!
//! The cycle, each box a refusal as much as a step:
//! 1. the input is observed ([`candidate::observe`]): a main working copy, a submodule's main
//!    copy or a dirty tree is refused; the evidence folder and the report must not be inside
//!    the candidate by filesystem identity ([`inside`]);
//! 2. the worker runs; its HEAD and index must equal the start (`worker_committed`,
//!    `index_changed`), and it must have changed something (`empty_candidate`);
//! 3. the candidate identity is bound (base, index tree, status bytes, binary patch, size and
//!    SHA-256 per changed file, and the whole tree, ignored files and `node_modules`
//!    included);
//! 4. the reviewer runs; the identity is derived again after it, and any difference (a file
//!    in `node_modules` included) refuses the review (`reviewer_modified`);
//! 5. `APPROVE` completes (no publication authority); `REQUEST_CHANGES` gets exactly one
//!    repair, which must leave HEAD and the index alone and give a different, non-empty
//!    identity (`repair_unchanged`, `repair_empty`); a fresh reviewer judges it, and a second
//!    `REQUEST_CHANGES` rejects the run (exit code 3). No path leads to a second repair.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::prompt::{self, Role, Verdict};
use crate::evidence::candidate::{self, CandidateError, Identity};
use crate::files;
use crate::home::Home;
use crate::ledger::Ledger;
use crate::providers::Tool;
use crate::providers::profile::Profile;
use crate::worktrees::WorktreeInfo;

/// The format of a factory run's record (`data/factory/fac-NNNN/run.json`).
pub const RUN_FORMAT: &str = "proctor-factory-run/1";
/// The format of the receipt (the report `factory run` prints and writes).
pub const RECEIPT_FORMAT: &str = "proctor-factory-receipt/1";
/// What the receipt says of publication, always.
pub const NO_AUTHORITY: &str = "none: an APPROVE grants no publication authority; publication \
                                is `proctor publish` by a person at a terminal";
/// The most provider invocations a run can make: worker, review, repair, review.
pub const MAX_INVOCATIONS: u32 = 4;
/// The longest task accepted (bytes).
pub const MAX_TASK: usize = 64 * 1024;

/// The folder of every factory run's evidence.
pub fn factory_dir(home: &Home) -> PathBuf {
    home.data.join("factory")
}

/// The folder of one run (`fac-0001`).
pub fn run_dir(home: &Home, id: &str) -> PathBuf {
    factory_dir(home).join(id)
}

/// A tool, its account profile and its model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentRef {
    pub tool: String,
    pub profile: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// What the engine needs of a provider: one bounded headless invocation.
#[derive(Debug, Clone)]
pub struct Agent {
    pub tool: Tool,
    pub profile: Profile,
    pub model: Option<String>,
}

impl Agent {
    pub fn view(&self) -> AgentRef {
        AgentRef {
            tool: self.tool.name().to_string(),
            profile: self.profile.name.clone(),
            model: self.model.clone(),
        }
    }
}

/// The vendor behind a tool: a reviewer must not be the worker's.
pub fn vendor(tool: Tool) -> &'static str {
    match tool {
        Tool::Claude => "anthropic",
        Tool::Codex => "openai",
        Tool::Gemini => "google",
        Tool::Grok => "xai",
        Tool::Opencode => "opencode",
    }
}

/// What one invocation gave back. Every file it left (prompt, stdout, stderr, last message)
/// is raw model output: local sensitive evidence, bound by path, size and SHA-256.
#[derive(Debug, Clone)]
pub struct Invoked {
    /// The tool's final message, or why there is none.
    pub answer: Result<String, String>,
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub files: Vec<PathBuf>,
    /// What a copy through a rig moved (`factory run --rig`), for the receipt.
    pub rig_copy: Option<Value>,
    /// A typed failure of the invoker itself (a rig copy refused), not the provider's.
    pub error: Option<(&'static str, String)>,
}

impl Default for Invoked {
    fn default() -> Self {
        Invoked {
            answer: Err("no answer".into()),
            exit: None,
            timed_out: false,
            files: Vec::new(),
            rig_copy: None,
            error: None,
        }
    }
}

/// One bounded headless invocation of a provider in `worktree`, its files in `scratch`.
pub trait Invoker: Send + Sync {
    fn invoke(
        &self,
        agent: &Agent,
        role: Role,
        worktree: &Path,
        scratch: &Path,
        prompt: String,
        deadline: Duration,
    ) -> Invoked;
}

/// Who judges the candidate: one reviewer CLI, or the tribunal's seats.
#[derive(Debug, Clone)]
pub enum Reviewer {
    Agent(Agent),
    /// `--reviewer tribunal`: a round of the blind tribunal on the candidate's bytes; a
    /// unanimous pass is APPROVE, a refusal REQUEST_CHANGES, anything else no verdict.
    Tribunal,
}

impl Reviewer {
    pub fn view(&self) -> AgentRef {
        match self {
            Reviewer::Agent(a) => a.view(),
            Reviewer::Tribunal => AgentRef {
                tool: "tribunal".into(),
                profile: "tribunal".into(),
                model: None,
            },
        }
    }

    fn tool_name(&self) -> &'static str {
        match self {
            Reviewer::Agent(a) => a.tool.name(),
            Reviewer::Tribunal => "tribunal",
        }
    }
}

/// The tribunal as a reviewer: seats a round on the worktree's current bytes and answers in
/// a reviewer's shape (first line `APPROVE` or `REQUEST_CHANGES`, then the findings), or
/// why it gave no verdict. Its files (the round's record) go in `scratch`.
pub trait Panel: Send + Sync {
    fn convene(
        &self,
        run: &str,
        info: &WorktreeInfo,
        task: &str,
        builder_vendor: &str,
        review: u32,
        scratch: &Path,
    ) -> Convened;
}

/// What a tribunal round gave a review: the answer in a reviewer's shape with its files, and
/// the candidate and round it judged (the receipt's review names them).
#[derive(Debug, Clone)]
pub struct Convened {
    pub invoked: Invoked,
    /// The candidate bound for the round (`cand-NNNN`), once bound.
    pub candidate: Option<String>,
    /// The round (`rnd-NNNN`), once one was seated.
    pub round: Option<String>,
}

/// A factory run's request, checked.
#[derive(Debug, Clone)]
pub struct Spec {
    pub workspace: PathBuf,
    pub task: String,
    pub worker: Agent,
    pub reviewer: Reviewer,
    pub timeout: Duration,
    /// Where the caller will write the report (checked against the candidate).
    pub out: Option<PathBuf>,
    /// A provider is one of the demo's fakes: the run and its receipt are labelled demo.
    pub demo: bool,
    /// The rig the worker and the repair run in (`--rig`), or none: the host user.
    pub rig: Option<RigSeat>,
}

/// The rig a run's worker is behind: its id and its boundary's words.
#[derive(Debug, Clone)]
pub struct RigSeat {
    pub id: String,
    /// `namespace boundary: weaker than a VM (shares the host kernel)`.
    pub boundary: String,
}

/// A run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// Approved: grants no publication authority.
    Completed,
    /// A second REQUEST_CHANGES: exit code 3.
    Rejected,
    /// A refusal or a failure, with its typed error.
    Failed,
}

impl RunStatus {
    pub fn exit_code(self) -> i32 {
        match self {
            RunStatus::Completed => 0,
            RunStatus::Rejected => 3,
            RunStatus::Running | RunStatus::Failed => 1,
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Validating,
    Worker,
    Binding,
    Review,
    Repair,
    Receipt,
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Validating => "validating",
            Phase::Worker => "worker",
            Phase::Binding => "binding",
            Phase::Review => "review",
            Phase::Repair => "repair",
            Phase::Receipt => "receipt",
            Phase::Done => "done",
        }
    }
}

/// One provider invocation of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepView {
    /// `worker`, `review-1`, `repair` or `review-2`.
    pub role: String,
    pub tool: String,
    /// `running`, `done`, `failed` or `timed_out`.
    pub state: String,
    pub started_at: String,
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    #[serde(default)]
    pub exit: Option<i32>,
    /// A review's verdict (`APPROVE`, `REQUEST_CHANGES`).
    #[serde(default)]
    pub verdict: Option<String>,
}

/// A typed failure of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

/// A run as the server holds and serves it (`GET /v1/m/factory/runs/{id}`). Never holds the
/// task's text, a provider's output or a secret: only their identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FactoryRun {
    pub format: String,
    pub id: String,
    pub status: RunStatus,
    pub phase: Phase,
    pub started_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub workspace: String,
    pub task_sha256: String,
    pub worker: AgentRef,
    pub reviewer: AgentRef,
    pub timeout_ms: u64,
    /// Backed by a stand-in (the demo's fakes), not a real provider: no model ran.
    #[serde(default)]
    pub demo: bool,
    /// The rig the worker and the repair run in (`--rig`); none: the host user.
    #[serde(default)]
    pub rig: Option<String>,
    pub steps: Vec<StepView>,
    /// Provider invocations still reachable after the current one.
    pub reachable_after: u32,
    /// An upper bound of provider time left, in ms (timeout × invocations still
    /// reachable, less what the current one has used): never an estimate.
    #[serde(default)]
    pub provider_bound_ms: u64,
    #[serde(default)]
    pub candidate: Option<String>,
    #[serde(default)]
    pub error: Option<RunError>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The receipt's path, size and SHA-256 once written.
    #[serde(default)]
    pub receipt: Option<Bound>,
    /// The seq of the latest ledger event this run recorded: the server's start refuses a
    /// ledger that lost it (`server::start_check`).
    #[serde(default)]
    pub ledger_seq: Option<u64>,
}

/// A file bound by path, size and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Bound {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// The upper bound of provider time left now, in ms: the caller's timeout × the provider
/// invocations still reachable after the current one, plus what the current one (a step
/// still running) has left of its deadline. 0 once the run is over. Never an estimate.
pub fn bound_now(run: &FactoryRun) -> u64 {
    if run.status != RunStatus::Running {
        return 0;
    }
    let current = run
        .steps
        .last()
        .filter(|s| s.state == "running")
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s.started_at).ok())
        .map(|t| {
            let used = (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
                .num_milliseconds()
                .max(0) as u64;
            run.timeout_ms.saturating_sub(used)
        })
        .unwrap_or(0);
    current + u64::from(run.reachable_after) * run.timeout_ms
}

/// Why a run could not even start (the request is refused before a number is taken).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Refused(String, &'static str),
    #[error(transparent)]
    Candidate(#[from] CandidateError),
    #[error(transparent)]
    Files(#[from] files::FilesError),
}

impl StartError {
    pub fn code(&self) -> &'static str {
        match self {
            StartError::Refused(_, c) => c,
            StartError::Candidate(e) => e.code(),
            StartError::Files(_) => "internal",
        }
    }
}

/// True when `path` (or, for a path that does not exist yet, its nearest existing
/// ancestor) is `root` or lies under it, judged by filesystem identity (device and inode of
/// every ancestor), so that a symbolic link, a bind mount or `..` cannot alias it.
pub fn inside(path: &Path, root: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let r = std::fs::metadata(root)?;
    let id = (r.dev(), r.ino());
    let mut p = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    // The nearest existing ancestor, resolved.
    let mut existing = loop {
        match std::fs::canonicalize(&p) {
            Ok(c) => break c,
            Err(_) => match p.parent() {
                Some(up) => p = up.to_path_buf(),
                None => return Ok(false),
            },
        }
    };
    loop {
        if let Ok(m) = std::fs::metadata(&existing)
            && (m.dev(), m.ino()) == id
        {
            return Ok(true);
        }
        if !existing.pop() {
            return Ok(false);
        }
    }
}

/// Checks a request before anything runs: the input is a clean linked worktree, the
/// reviewer is of another vendor, the task is bounded, and neither the evidence folder nor
/// the report would land inside the candidate. Returns the observed starting point.
pub fn validate(home: &Home, spec: &Spec) -> Result<WorktreeInfo, StartError> {
    if spec.task.trim().is_empty() {
        return Err(StartError::Refused(
            "the task is empty: say what the worker should do (--task TEXT)".into(),
            "bad_request",
        ));
    }
    if spec.task.len() > MAX_TASK {
        return Err(StartError::Refused(
            format!(
                "the task is {} bytes; at most {MAX_TASK} are accepted. Remedy: shorten it",
                spec.task.len()
            ),
            "bad_request",
        ));
    }
    if let Reviewer::Agent(reviewer) = &spec.reviewer
        && vendor(spec.worker.tool) == vendor(reviewer.tool)
    {
        return Err(StartError::Refused(
            format!(
                "the reviewer ({}) is of the worker's vendor ({}): a vendor never reviews its own \
                 work. Remedy: --reviewer codex for a claude worker, --reviewer claude for a codex one",
                reviewer.tool.name(),
                vendor(spec.worker.tool)
            ),
            "same_vendor",
        ));
    }
    let info = candidate::observe(&spec.workspace)?;
    if !info.clean_at_start {
        return Err(StartError::Refused(
            format!(
                "{} is not clean (git status shows changes, untracked or ignored files): what a \
                 worker changed would have no exact answer. Remedy: give a fresh linked worktree \
                 (`git worktree add ../NAME`)",
                crate::digest::escape_path(&spec.workspace)
            ),
            "dirty_input",
        ));
    }
    let root = Path::new(&info.path);
    for (what, p) in [
        ("the evidence folder", Some(factory_dir(home))),
        ("the report", spec.out.clone()),
    ] {
        let Some(p) = p else { continue };
        if inside(&p, root).unwrap_or(true) {
            return Err(StartError::Refused(
                format!(
                    "{what} ({}) would be inside the candidate {}: evidence never lives in the \
                     tree it judges. Remedy: put it elsewhere (a home outside the worktree, \
                     --out outside it)",
                    crate::digest::escape_path(&p),
                    crate::digest::escape_path(root)
                ),
                "evidence_inside_candidate",
            ));
        }
    }
    Ok(info)
}

/// What a run reports to whoever watches it (the server's state).
pub trait Watch: Send + Sync {
    fn update(&self, run: &FactoryRun);
}

/// The surroundings of one run.
pub struct Ctx<'a> {
    pub home: &'a Home,
    pub ledger: &'a Ledger,
    pub invoker: &'a dyn Invoker,
    /// The tribunal, for `--reviewer tribunal` (none: such a run fails `no_tribunal`).
    pub panel: Option<&'a dyn Panel>,
    pub watch: &'a dyn Watch,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn sha256_hex(b: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(b))
}

/// A failure inside a run: its code and message become the receipt's `error`.
struct Fail {
    code: &'static str,
    message: String,
}

fn fail(code: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

fn cand_fail(e: CandidateError) -> Fail {
    Fail {
        code: e.code(),
        message: e.to_string(),
    }
}

/// A review's record in the receipt.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewRecord {
    review: u32,
    reviewer: AgentRef,
    /// The identity the reviewer was given.
    identity: String,
    verdict: String,
    /// SHA-256 of the reviewer's exact final message (its bytes are local evidence).
    answer_sha256: String,
    /// A tribunal review: the round that judged (`rnd-NNNN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    round: Option<String>,
    /// A tribunal review: the candidate bound for the round (`cand-NNNN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    candidate: Option<String>,
}

/// The run in progress: its public record, and what the receipt gathers.
struct Running<'a> {
    ctx: &'a Ctx<'a>,
    spec: &'a Spec,
    info: WorktreeInfo,
    dir: PathBuf,
    run: Mutex<FactoryRun>,
    invocation_started: Mutex<Option<Instant>>,
    evidence: Vec<Value>,
    reviews: Vec<ReviewRecord>,
    identities: Vec<Identity>,
    /// What each copy through the rig moved (`--rig`).
    rig_copies: Vec<Value>,
}

impl Running<'_> {
    fn publish(&self) {
        let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        run.provider_bound_ms = self.bound_ms(&run);
        let _ = files::write_atomic(
            &self.dir.join("run.json"),
            &serde_json::to_vec_pretty(&*run).unwrap_or_default(),
        );
        self.ctx.watch.update(&run);
    }

    fn bound_ms(&self, run: &FactoryRun) -> u64 {
        let current = self
            .invocation_started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| {
                run.timeout_ms
                    .saturating_sub(t.elapsed().as_millis() as u64)
            })
            .unwrap_or(0);
        current + u64::from(run.reachable_after) * run.timeout_ms
    }

    fn set_phase(&self, phase: Phase, reachable_after: u32) {
        {
            let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            run.phase = phase;
            run.reachable_after = reachable_after;
        }
        self.publish();
    }

    /// Appends one event; the run's record names its seq (written at the next publish).
    fn record(&self, kind: &str, fields: Value) {
        if let Value::Object(m) = fields
            && let Ok(seq) = self.ctx.ledger.append(kind, &m)
        {
            self.run
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .ledger_seq = Some(seq);
        }
    }

    /// Runs one invocation; its files are bound as evidence (path, size, SHA-256).
    fn invoke(&mut self, role: Role, agent: &Agent, prompt: String) -> Result<Invoked, Fail> {
        let invoker = self.ctx.invoker;
        let (worktree, timeout) = (PathBuf::from(&self.info.path), self.spec.timeout);
        self.step(role, agent.tool.name(), |scratch| {
            invoker.invoke(agent, role, &worktree, scratch, prompt, timeout)
        })
    }

    /// Records one step around `call` (given its private folder), and binds its files.
    fn step(
        &mut self,
        role: Role,
        tool: &str,
        call: impl FnOnce(&Path) -> Invoked,
    ) -> Result<Invoked, Fail> {
        let name = role_name(role);
        let scratch = self.dir.join(&name);
        files::ensure_private_dir(&scratch).map_err(|e| fail("internal", e.to_string()))?;
        let started = Instant::now();
        *self
            .invocation_started
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(started);
        {
            let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            run.steps.push(StepView {
                role: name.clone(),
                tool: tool.to_string(),
                state: "running".into(),
                started_at: now(),
                elapsed_ms: None,
                exit: None,
                verdict: None,
            });
        }
        self.publish();
        let id = self.run.lock().map(|r| r.id.clone()).unwrap_or_default();
        self.record(
            "factory.step.started",
            json!({"run": id, "role": name, "tool": tool}),
        );
        let out = call(&scratch);
        *self
            .invocation_started
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        let state = if out.timed_out {
            "timed_out"
        } else if out.answer.is_err() {
            "failed"
        } else {
            "done"
        };
        {
            let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(s) = run.steps.last_mut() {
                s.state = state.into();
                s.elapsed_ms = Some(started.elapsed().as_millis() as u64);
                s.exit = out.exit;
            }
        }
        for f in &out.files {
            if let Ok(Some((bytes, sha))) = files::hash_file(f) {
                self.evidence.push(json!({
                    "role": name,
                    "file": f.file_name().map(|n| n.to_string_lossy().into_owned()),
                    "path": f.to_string_lossy(),
                    "bytes": bytes,
                    "sha256": sha,
                }));
            }
        }
        if let Some(c) = &out.rig_copy {
            self.rig_copies.push(json!({"role": name, "copy": c}));
        }
        self.record(
            "factory.step.finished",
            json!({"run": id, "role": name, "state": state, "exit": out.exit}),
        );
        self.publish();
        Ok(out)
    }

    fn set_verdict(&self, verdict: &str) {
        let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = run.steps.last_mut() {
            s.verdict = Some(verdict.to_string());
        }
    }

    /// The identity now, or the typed refusal that a moved HEAD or index gives.
    fn identity(&self) -> Result<Identity, CandidateError> {
        candidate::derive(&self.info)
    }

    /// A worker's (or the repair's) turn: it must answer, leave HEAD and the index alone,
    /// and leave a non-empty candidate.
    fn work(&mut self, role: Role, prompt: String) -> Result<Identity, Fail> {
        let agent = self.spec.worker.clone();
        let out = self.invoke(role, &agent, prompt)?;
        let who = role_name(role);
        if let Some((code, message)) = out.error.clone() {
            return Err(fail(code, message));
        }
        if out.timed_out {
            return Err(fail(
                "provider_timed_out",
                format!(
                    "the {who} did not finish within {} s; its whole process tree was stopped",
                    self.spec.timeout.as_secs()
                ),
            ));
        }
        if let Err(why) = &out.answer {
            return Err(fail(
                "provider_failed",
                format!(
                    "the {who} ({tool}) gave no answer: {}. Remedy: check that `{tool}` works for \
                     this account (run it once in a terminal: the factory uses the installed \
                     login, never an API key)",
                    crate::text::one_line(why, 300),
                    tool = agent.tool.name(),
                ),
            ));
        }
        self.set_phase(
            Phase::Binding,
            self.run.lock().map(|r| r.reachable_after).unwrap_or(0),
        );
        let id = self.identity().map_err(cand_fail)?;
        if id.files.is_empty() {
            return Err(fail(
                if role == Role::Repair {
                    "repair_empty"
                } else {
                    "empty_candidate"
                },
                format!("the {who} changed nothing: there is no candidate to review"),
            ));
        }
        Ok(id)
    }

    /// One review of `identity` by a fresh reviewer: the tree, HEAD, the index and the
    /// identity must be the same after it.
    fn review(&mut self, n: u32, identity: &Identity) -> Result<(Verdict, String), Fail> {
        let reviewer = self.spec.reviewer.clone();
        // A tribunal review's candidate and round, once the panel names them.
        let mut judged_by: (Option<String>, Option<String>) = (None, None);
        let out = match &reviewer {
            Reviewer::Agent(agent) => {
                let doc = serde_json::to_string_pretty(identity).unwrap_or_default();
                self.invoke(
                    Role::Reviewer { review: n },
                    agent,
                    prompt::reviewer_prompt(&self.spec.task, &doc, n),
                )?
            }
            Reviewer::Tribunal => {
                let Some(panel) = self.ctx.panel else {
                    return Err(fail(
                        "no_tribunal",
                        "this server offers no tribunal to seat",
                    ));
                };
                let id = self.run.lock().map(|r| r.id.clone()).unwrap_or_default();
                let (info, task) = (self.info.clone(), self.spec.task.clone());
                let builder = vendor(self.spec.worker.tool);
                self.step(Role::Reviewer { review: n }, "tribunal", |scratch| {
                    let c = panel.convene(&id, &info, &task, builder, n, scratch);
                    judged_by = (c.candidate, c.round);
                    c.invoked
                })?
            }
        };
        // Judge the tree first: a reviewer that wrote and then failed wrote all the same.
        match self.identity() {
            Err(e) => {
                return Err(fail(
                    "reviewer_modified",
                    format!("review {n}: the reviewer moved HEAD or the index ({e})"),
                ));
            }
            Ok(after) if after.digest != identity.digest => {
                let what = if after.inventory.digest != identity.inventory.digest {
                    "the tree's bytes (ignored files and node_modules included)"
                } else {
                    "the candidate identity"
                };
                return Err(fail(
                    "reviewer_modified",
                    format!(
                        "review {n}: {what} changed during the review; a review of a tree that no \
                         longer exists is refused"
                    ),
                ));
            }
            Ok(_) => {}
        }
        if out.timed_out {
            return Err(fail(
                "provider_timed_out",
                format!(
                    "review {n} did not finish within {} s; its whole process tree was stopped",
                    self.spec.timeout.as_secs()
                ),
            ));
        }
        let answer = out.answer.map_err(|why| match &reviewer {
            Reviewer::Agent(_) => fail(
                "provider_failed",
                format!(
                    "review {n} ({}) gave no answer: {}",
                    reviewer.tool_name(),
                    crate::text::one_line(&why, 300)
                ),
            ),
            // Held, invalid or never seated: no verdict, and never an approval.
            Reviewer::Tribunal => fail(
                "tribunal_no_verdict",
                format!(
                    "review {n} (tribunal) gave no verdict: {}. Remedy: {}",
                    crate::text::one_line(&why, 600),
                    match &judged_by.1 {
                        Some(round) => format!(
                            "`proctor tribunal show {round}` names each seat's cause; mend \
                             config/tribunal.toml (`proctor tribunal seats` probes every rung) \
                             and run the factory again"
                        ),
                        None => "`proctor tribunal seats` shows the registry and probes every \
                                 rung; mend config/tribunal.toml and run the factory again"
                            .to_string(),
                    }
                ),
            ),
        })?;
        let (verdict, _) = prompt::parse_verdict(&answer).map_err(|e| {
            fail(
                "verdict_unreadable",
                format!("review {n}: {e}; an unreadable verdict is never an approval"),
            )
        })?;
        let word = match verdict {
            Verdict::Approve => "APPROVE",
            Verdict::RequestChanges => "REQUEST_CHANGES",
        };
        self.set_verdict(word);
        self.reviews.push(ReviewRecord {
            review: n,
            reviewer: reviewer.view(),
            identity: identity.digest.clone(),
            verdict: word.into(),
            answer_sha256: sha256_hex(answer.as_bytes()),
            candidate: judged_by.0,
            round: judged_by.1,
        });
        Ok((verdict, answer))
    }

    /// The whole cycle. `Ok(status)` for completed or rejected.
    fn cycle(&mut self) -> Result<RunStatus, Fail> {
        self.set_phase(Phase::Worker, MAX_INVOCATIONS - 1);
        let first = self.work(Role::Worker, prompt::worker_prompt(&self.spec.task))?;
        self.identities.push(first.clone());
        {
            let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            run.candidate = Some(first.digest.clone());
        }
        self.set_phase(Phase::Review, 2);
        let (verdict, review_output) = self.review(1, &first)?;
        if verdict == Verdict::Approve {
            return Ok(RunStatus::Completed);
        }
        self.set_phase(Phase::Repair, 1);
        let doc = serde_json::to_string_pretty(&first).unwrap_or_default();
        let repaired = self.work(
            Role::Repair,
            prompt::repair_prompt(&self.spec.task, &doc, &review_output),
        )?;
        if repaired.digest == first.digest {
            return Err(fail(
                "repair_unchanged",
                "the repair left the candidate as it was: a repair that changes nothing is not \
                 reviewed again",
            ));
        }
        self.identities.push(repaired.clone());
        {
            let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            run.candidate = Some(repaired.digest.clone());
        }
        self.set_phase(Phase::Review, 0);
        let (verdict, _) = self.review(2, &repaired)?;
        Ok(match verdict {
            Verdict::Approve => RunStatus::Completed,
            // A second reject ends the run: no path leads to another repair.
            Verdict::RequestChanges => RunStatus::Rejected,
        })
    }

    fn receipt(&self, status: RunStatus, error: Option<&RunError>) -> Value {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let (boundary, worker_unproven) = match &self.spec.rig {
            None => (
                json!({
                    "requested": "host-user",
                    "observed": "host-user: the worker and the reviewer ran as the host user, in \
                                 their own process groups; not confined",
                }),
                "the worker ran as the host user: not confined; a prompt and an observation of \
                 the worktree afterwards cannot prove it avoided the network, secrets, installs \
                 or writes elsewhere"
                    .to_string(),
            ),
            Some(rig) => (
                json!({
                    "requested": "rig",
                    "rig": rig.id,
                    "worker": format!("the worker and the repair ran in {}: {}", rig.id, rig.boundary),
                    "reviewer": "the reviewer ran as the host user, read-only, in its own process \
                                 group; not confined",
                    "copies": self.rig_copies,
                }),
                format!(
                    "the worker ran behind {}'s boundary ({}), not a VM's unless it says so; it \
                     saw a copy of the candidate's files (no .git, no file matching the rigs' \
                     secret patterns) and the rig's own network; what it wrote came back only \
                     as regular files of the copy, judged entry by entry; the reviewer ran as \
                     the host user: not confined",
                    rig.id, rig.boundary
                ),
            ),
        };
        json!({
            "format": RECEIPT_FORMAT,
            "ok": status == RunStatus::Completed,
            "status": status,
            "command": "factory-run",
            "run": run.id,
            "execution": match (self.spec.demo, &self.spec.rig) {
                (true, _) => "agent-factory (demo): stand-in providers, no model ran".to_string(),
                (false, None) => "agent-factory; provider CLIs ran headless as the host user".to_string(),
                (false, Some(r)) => format!(
                    "agent-factory; the worker ran headless in {}, the reviewer as the host user",
                    r.id
                ),
            },
            "demo": self.spec.demo,
            "publicationAuthority": NO_AUTHORITY,
            "workspace": {
                "path": self.info.path,
                "branch": self.info.branch,
                "base": self.info.base,
                "indexTree": self.info.index_tree,
            },
            "task": {"bytes": self.spec.task.len(), "sha256": sha256_hex(self.spec.task.as_bytes())},
            "worker": self.spec.worker.view(),
            "reviewer": self.spec.reviewer.view(),
            "timeoutMs": run.timeout_ms,
            "candidate": self.identities.first(),
            "repairedCandidate": self.identities.get(1),
            "repairs": self.identities.len().saturating_sub(1),
            "reviews": self.reviews,
            "steps": run.steps,
            "evidence": self.evidence,
            "boundary": boundary,
            "notProven": [
                worker_unproven,
                "a transient git action that restored the observed HEAD and index before the \
                 worker returned is not seen",
                "an APPROVE binds a reviewer's word to exact bytes; it does not prove the change \
                 correct",
            ],
            "error": error,
            "exitCode": status.exit_code(),
        })
    }
}

fn role_name(role: Role) -> String {
    match role {
        Role::Worker => "worker".into(),
        Role::Repair => "repair".into(),
        Role::Reviewer { review } => format!("review-{review}"),
    }
}

/// Reserves a run's number and folder and returns its first record (status running).
pub fn reserve(home: &Home, spec: &Spec) -> Result<FactoryRun, StartError> {
    let (id, _dir) = files::reserve_numbered(&factory_dir(home), "fac-", "")?;
    Ok(FactoryRun {
        format: RUN_FORMAT.into(),
        id,
        status: RunStatus::Running,
        phase: Phase::Validating,
        started_at: now(),
        finished_at: None,
        workspace: spec.workspace.to_string_lossy().into_owned(),
        task_sha256: sha256_hex(spec.task.as_bytes()),
        worker: spec.worker.view(),
        reviewer: spec.reviewer.view(),
        timeout_ms: spec.timeout.as_millis() as u64,
        demo: spec.demo,
        rig: spec.rig.as_ref().map(|r| r.id.clone()),
        steps: Vec::new(),
        reachable_after: MAX_INVOCATIONS,
        provider_bound_ms: spec.timeout.as_millis() as u64 * u64::from(MAX_INVOCATIONS),
        candidate: None,
        error: None,
        exit_code: None,
        receipt: None,
        ledger_seq: None,
    })
}

/// Runs a reserved run to its end (blocking): the cycle, then the receipt, persisted and
/// replayed (every evidence file hashed again after it is written). Returns the final
/// record and the receipt.
pub fn execute(
    ctx: &Ctx<'_>,
    spec: &Spec,
    info: WorktreeInfo,
    run: FactoryRun,
) -> (FactoryRun, Value) {
    let dir = run_dir(ctx.home, &run.id);
    let id = run.id.clone();
    let mut r = Running {
        ctx,
        spec,
        info,
        dir: dir.clone(),
        run: Mutex::new(run),
        invocation_started: Mutex::new(None),
        evidence: Vec::new(),
        reviews: Vec::new(),
        identities: Vec::new(),
        rig_copies: Vec::new(),
    };
    r.record(
        "factory.run.started",
        json!({"run": id, "worker": spec.worker.tool.name(), "reviewer": spec.reviewer.tool_name()}),
    );
    r.publish();
    let (status, error) = match r.cycle() {
        Ok(s) => (s, None),
        Err(f) => (
            RunStatus::Failed,
            Some(RunError {
                code: f.code.into(),
                message: f.message,
            }),
        ),
    };
    r.set_phase(Phase::Receipt, 0);
    // The evidence is replayed after persistence: a file that changed is named.
    let mut error = error;
    let mut status = status;
    for e in &r.evidence {
        let path = e["path"].as_str().unwrap_or_default();
        let again = files::hash_file(Path::new(path)).ok().flatten();
        if again.as_ref().map(|(_, s)| s.as_str()) != e["sha256"].as_str() {
            status = RunStatus::Failed;
            error = Some(RunError {
                code: "evidence_changed".into(),
                message: format!("the evidence file {path} changed after it was bound"),
            });
            break;
        }
    }
    let receipt = r.receipt(status, error.as_ref());
    let bytes = serde_json::to_vec_pretty(&receipt).unwrap_or_default();
    let receipt_path = dir.join("receipt.json");
    let bound = match files::write_atomic(&receipt_path, &bytes) {
        Ok(()) => Some(Bound {
            path: receipt_path.to_string_lossy().into_owned(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        }),
        Err(_) => None,
    };
    {
        let mut run = r.run.lock().unwrap_or_else(|p| p.into_inner());
        run.status = status;
        run.phase = Phase::Done;
        run.reachable_after = 0;
        run.finished_at = Some(now());
        run.error = error.clone();
        run.exit_code = Some(status.exit_code());
        run.receipt = bound.clone();
    }
    r.record(
        "factory.run.finished",
        json!({
            "run": id,
            "status": status,
            "error": error.as_ref().map(|e| e.code.clone()),
            "receipt_sha256": bound.as_ref().map(|b| b.sha256.clone()),
            "receipt_bytes": bound.as_ref().map(|b| b.bytes),
        }),
    );
    r.publish();
    let final_run = r.run.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (final_run, receipt)
}

/// Marks every run a stopped server left running as failed (`server_stopped`).
pub fn recover(home: &Home) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(list) = files::numbered(&factory_dir(home), "fac-", "") else {
        return out;
    };
    for (_, id) in list {
        let p = run_dir(home, &id).join("run.json");
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Ok(mut run) = serde_json::from_slice::<FactoryRun>(&bytes) else {
            continue;
        };
        if run.status == RunStatus::Running {
            // What its providers had started is ended first (their cgroups).
            let swept: usize = run
                .steps
                .iter()
                .map(|st| super::invoke::sweep_left(&run_dir(home, &id).join(&st.role)))
                .sum();
            run.status = RunStatus::Failed;
            run.phase = Phase::Done;
            run.reachable_after = 0;
            run.provider_bound_ms = 0;
            run.exit_code = Some(1);
            run.error = Some(RunError {
                code: "server_stopped".into(),
                message: format!(
                    "the server stopped while this run was in progress; its providers were \
                     stopped with it{} and no receipt was written",
                    if swept > 0 {
                        format!(" (what {swept} of them had left running was ended at this start)")
                    } else {
                        String::new()
                    }
                ),
            });
            if files::write_atomic(&p, &serde_json::to_vec_pretty(&run).unwrap_or_default()).is_ok()
            {
                out.push(id);
            }
        }
    }
    out
}

/// Every run on record, oldest first.
pub fn list(home: &Home) -> Vec<FactoryRun> {
    files::numbered(&factory_dir(home), "fac-", "")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(_, id)| load(home, &id))
        .collect()
}

/// One run's record.
pub fn load(home: &Home, id: &str) -> Option<FactoryRun> {
    if !files::valid_id(id, "fac-") {
        return None;
    }
    let bytes = std::fs::read(run_dir(home, id).join("run.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// One run's receipt, as written.
pub fn receipt(home: &Home, id: &str) -> Option<Value> {
    if !files::valid_id(id, "fac-") {
        return None;
    }
    let bytes = std::fs::read(run_dir(home, id).join("receipt.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests;
