//! The publication state machine: intents judged now, approvals opened, checked, refused,
//! authorised (minted), spent once (the adapter runs here) and their receipts signed. It is
//! one value ([`PublishState`]) held by the server's state, never a process-wide static; its
//! methods take the home's parts ([`Context`]) and the actor, and return `publish`'s own
//! values ([`super::views`]) or a [`PublishError`] that names its kind, code and remedy. The
//! server's route file (`server/publish_api.rs`) only maps HTTP to these methods.
//!
//! Approvals live in memory: an approval does not survive the server; its receipt does
//! (`docs/security.md`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Map, Value, json};

use super::adapter::{self, Effects, Plan};
use super::authorisation::{self, Grant, LedgerHead, Payload};
use super::forge::{self, PullRequestAsk};
use super::intent::{self, CommitRecipe, Intent, IntentError, IntentState};
use super::receipt::{self, AuthorisationView, Facts, Outcome, Refusal};
use super::views::{
    CheckView, Failure, IntentOutcome, IntentView, MintedAnswer, OpenedApproval, ProposeRequest,
    ReceiptRef, ReceiptRequest, RefusalAnswer, RefusalRequest, SignedReceipt, SpendAnswer,
};
use crate::auth::Actor;
use crate::authority::dsse::{self, Envelope};
use crate::authority::{keys, passphrase, sshsig, statement};
use crate::candidate::{self, Currency};
use crate::evidence::checks::InProgress;
use crate::gate::{self, GateState};
use crate::git::Git;
use crate::home::Home;
use crate::ledger::Ledger;

/// How long an approval stays open for its authorisation (the time to read and type).
pub const APPROVAL_TTL: Duration = Duration::from_secs(600);
/// How long a re-evaluated intent state is reused (each evaluation hashes the worktree).
const JUDGED_FOR: Duration = Duration::from_secs(20);

/// The refusals a terminal may report.
pub const TERMINAL_REFUSALS: [&str; 10] = [
    "no_terminal",
    "answer_offered_outside_the_terminal",
    "aborted",
    "prompt_failed",
    "wrong_revision",
    "wrong_passphrase",
    "key_unavailable",
    "key_not_registered",
    "mint_failed",
    "server_answer",
];

/// What kind of refusal a [`PublishError`] is (the server maps it to an HTTP status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request itself is wrong (400).
    BadRequest,
    /// Another token's approval (403).
    Forbidden,
    /// No such intent or approval (404).
    NotFound,
    /// The state does not allow it (409).
    Conflict,
    /// The request is well formed but cannot be done as asked (422).
    Unprocessable,
    /// A key must still wait after wrong passphrases (429).
    TooManyRequests,
    /// The remote cannot be read (502).
    BadGateway,
    /// Something inside failed (500).
    Internal,
    /// A refusal that closed the approval but is answered as a success (200): a refusal the
    /// terminal reported.
    Ok,
}

/// A refusal of the publication machine: its kind, a stable code and a sentence.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct PublishError {
    pub kind: Kind,
    pub code: &'static str,
    pub message: String,
}

impl PublishError {
    pub fn new(kind: Kind, code: &'static str, message: impl Into<String>) -> PublishError {
        PublishError {
            kind,
            code,
            message: message.into(),
        }
    }
    fn internal(e: impl std::fmt::Display) -> PublishError {
        Self::new(Kind::Internal, "internal", e.to_string())
    }
    fn bad(m: impl Into<String>) -> PublishError {
        Self::new(Kind::BadRequest, "bad_request", m)
    }
    fn unprocessable(m: impl Into<String>) -> PublishError {
        Self::new(Kind::Unprocessable, "unprocessable", m)
    }
    fn conflict(code: &'static str, m: impl Into<String>) -> PublishError {
        Self::new(Kind::Conflict, code, m)
    }
}

impl From<IntentError> for PublishError {
    fn from(e: IntentError) -> Self {
        match e {
            IntentError::NotFound(_) => {
                PublishError::new(Kind::NotFound, "not_found", e.to_string())
            }
            IntentError::BadId(_) => PublishError::bad(e.to_string()),
            other => PublishError::internal(other),
        }
    }
}

type Result<T> = std::result::Result<T, PublishError>;
use PublishError as E;

/// The parts of a home the machine works on: its files, its ledger (every step is recorded
/// there, fsync'd) and the evidence checks in progress (the gate counts them).
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub home: &'a Home,
    pub ledger: &'a Ledger,
    pub checks: &'a InProgress,
}

impl Context<'_> {
    fn record(&self, kind: &str, fields: Value) -> Result<u64> {
        let map = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.ledger.append(kind, &map).map_err(E::internal)
    }
}

/// Recent re-evaluations: candidate id → (when, allowed, causes, evaluated_at).
type Judged = HashMap<String, (Instant, bool, Vec<String>, String)>;

struct Minted {
    payload: Payload,
    seq: u64,
}

struct Approval {
    id: String,
    intent: String,
    token_id: String,
    receipt_id: String,
    receipt_path: PathBuf,
    opened: Instant,
    head: Option<LedgerHead>,
    evidence: Value,
    minted: Option<Minted>,
    spent: Option<(String, u64)>,
    closed: bool,
    /// The statement written last (unsigned), which the person's key may sign.
    statement: Option<Vec<u8>>,
    signed: bool,
}

impl Approval {
    fn receipt_ref(&self) -> ReceiptRef {
        ReceiptRef {
            id: self.receipt_id.clone(),
            path: self.receipt_path.clone(),
            signed: self.signed,
        }
    }
    fn statement_b64(&self) -> Option<String> {
        self.statement
            .as_ref()
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
    }
}

/// The publish path's state in the server: part of the server's state, never a process-wide
/// static. It lives as long as the server (open approvals are lost on a restart).
#[derive(Default)]
pub struct PublishState {
    /// Open and recent approvals, by id.
    approvals: Mutex<HashMap<String, Approval>>,
    /// Nonce digests of every authorisation appended, and of every one spent.
    minted: Mutex<HashSet<String>>,
    spent: Mutex<HashSet<String>>,
    /// One spend at a time: the intent's state is judged and changed under it.
    spending: Mutex<()>,
    /// Recent re-evaluations of awaiting intents.
    judged: Mutex<Judged>,
    /// The lock of this home's intent files.
    pub intents: intent::Store,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| E::internal("a lock inside the server was poisoned"))
}

fn normalise_run(raw: &str) -> Result<String> {
    let digits = raw.strip_prefix("run-").unwrap_or(raw);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(E::bad(format!("{raw:?} is not a run ref (run-0001)")));
    }
    let n: u64 = digits.parse().map_err(|_| E::bad("bad run ref"))?;
    Ok(format!("run-{n:04}"))
}

fn check_title(title: &str) -> Result<String> {
    let t = title.trim();
    if t.is_empty() {
        return Err(E::bad("the title is empty"));
    }
    if t.chars().count() > intent::MAX_TITLE_CHARS {
        return Err(E::bad(format!(
            "the title is longer than {} characters",
            intent::MAX_TITLE_CHARS
        )));
    }
    if t.chars()
        .any(|c| c.is_control() || crate::text::is_invisible(c))
    {
        return Err(E::bad(
            "the title holds a control or invisible character; a title is one visible line",
        ));
    }
    Ok(t.to_string())
}

/// Verifies an authorisation against every registered key; the payload when one holds.
fn verify_authorisation(
    home: &Home,
    env: &Envelope,
    grant: &Grant,
) -> std::result::Result<Payload, authorisation::AuthorisationError> {
    let trusted = keys::trusted_keys(home)
        .map_err(|e| authorisation::AuthorisationError::Signature(e.to_string()))?;
    let now = chrono::Utc::now();
    let mut last = authorisation::AuthorisationError::Signature("no key is registered".into());
    for key in &trusted {
        match authorisation::verify(env, key, grant, now) {
            Ok(p) => return Ok(p),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn grant_of(a: &Approval, it: &Intent) -> Result<Grant> {
    Ok(Grant {
        approval: a.id.clone(),
        intent: it.id.clone(),
        revision: it.revision.clone(),
        identity: it.candidate.digest.clone(),
        ledger_head: a
            .head
            .clone()
            .ok_or_else(|| E::conflict("not_checked", "this approval was not checked yet"))?,
    })
}

/// The approval's intent and the authorisation's payload once `env` verifies against the
/// approval's grant; otherwise the approval is closed as refused.
fn verified(cx: Context<'_>, a: &mut Approval, env: &Envelope) -> Result<(Intent, Payload)> {
    let it = intent::load(cx.home, &a.intent)?;
    let grant = grant_of(a, &it)?;
    match verify_authorisation(cx.home, env, &grant) {
        Ok(p) => Ok((it, p)),
        Err(e) => {
            let code = auth_error_code(&e);
            Err(refuse(cx, a, Kind::Unprocessable, code, e.to_string()))
        }
    }
}

fn auth_error_code(e: &authorisation::AuthorisationError) -> &'static str {
    match e {
        authorisation::AuthorisationError::Expired { .. } => "expired",
        _ => "bad_authorisation",
    }
}

/// The intent state the evidence allows now, with the causes, and the gate as seen.
fn judge(
    cx: Context<'_>,
    cand: &candidate::Candidate,
) -> Result<(IntentState, Vec<String>, Value, String)> {
    let g = gate::evaluate(cx.home, &cand.id, cx.checks).map_err(E::internal)?;
    let mut causes = g.causes.clone();
    // `passed` means an authorisation for these bytes was spent before (an earlier intent,
    // perhaps one whose push failed); a new intent still needs its own authorisation.
    let ok = matches!(g.state, GateState::AwaitingHuman | GateState::Passed) && g.evidence_ok;
    if !ok && causes.is_empty() {
        causes.push(format!("the gate is {}", g.state.as_str()));
    }
    let view = json!({
        "state": g.state, "evidence_ok": g.evidence_ok, "policy": g.policy,
        "evaluated_at": g.evaluated_at,
        "evidence": g.history.iter().filter(|h| h.fresh).collect::<Vec<_>>(),
    });
    let state = if ok {
        IntentState::AwaitingAuthority
    } else {
        IntentState::Blocked
    };
    Ok((
        state,
        if ok { Vec::new() } else { causes },
        view,
        g.evaluated_at.clone(),
    ))
}

/// The evidence part of a gate view (the fresh history items).
fn evidence_of(gate_view: &Value) -> Value {
    gate_view
        .as_object()
        .and_then(|m| m.get("evidence"))
        .cloned()
        .unwrap_or(Value::Null)
}

impl PublishState {
    // -----------------------------------------------------------------------------------------
    // Intents
    // -----------------------------------------------------------------------------------------

    /// Every intent as it stands now, oldest first (a judgement younger than 20 s is reused).
    pub fn list(&self, cx: Context<'_>) -> Result<Vec<IntentView>> {
        Ok(intent::list(cx.home)?
            .into_iter()
            .map(|it| self.as_now(cx, it, true))
            .collect())
    }

    /// One intent as it stands now (always judged afresh).
    pub fn show(&self, cx: Context<'_>, id: &str) -> Result<IntentView> {
        let it = intent::load(cx.home, id)?;
        Ok(self.as_now(cx, it, false))
    }

    /// An intent as it stands now. One recorded AWAITING_AUTHORITY is judged again (the gate
    /// is evaluated, at most every 20 s per candidate): when its evidence no longer passes —
    /// the worktree moved, the policy changed — it is shown BLOCKED with the causes, and
    /// `recorded_state` keeps what was recorded. Other states are facts and shown as
    /// recorded. A list (polled by the cockpit) may reuse an evaluation younger than 20 s
    /// (`reuse`); one intent is always evaluated afresh. `state_evaluated_at` says when.
    fn as_now(&self, cx: Context<'_>, mut it: Intent, reuse: bool) -> IntentView {
        let recorded = it.state;
        if recorded != IntentState::AwaitingAuthority {
            return IntentView {
                intent: it,
                recorded_state: None,
                state_evaluated_at: None,
            };
        }
        let cached = lock(&self.judged).ok().filter(|_| reuse).and_then(|m| {
            m.get(&it.candidate.id)
                .filter(|(at, ..)| at.elapsed() < JUDGED_FOR)
                .cloned()
        });
        let (ok, causes, at) = match cached {
            Some((_, ok, causes, at)) => (ok, causes, at),
            None => {
                let judged = candidate::load(cx.home, &it.candidate.id)
                    .map_err(E::internal)
                    .and_then(|c| c.ok_or_else(|| E::internal("the candidate is gone")))
                    .and_then(|c| judge(cx, &c));
                let (ok, causes, at) = match judged {
                    Ok((state, causes, _, at)) => {
                        (state == IntentState::AwaitingAuthority, causes, at)
                    }
                    Err(e) => (
                        false,
                        vec![format!("the gate cannot be evaluated: {}", e.message)],
                        String::new(),
                    ),
                };
                if let Ok(mut m) = lock(&self.judged) {
                    m.insert(
                        it.candidate.id.clone(),
                        (Instant::now(), ok, causes.clone(), at.clone()),
                    );
                }
                (ok, causes, at)
            }
        };
        let mut recorded_state = None;
        if !ok {
            recorded_state = Some(recorded);
            it.state = IntentState::Blocked;
            it.causes = causes;
        }
        IntentView {
            intent: it,
            recorded_state,
            state_evaluated_at: Some(at),
        }
    }

    /// Makes an intent from `req.run`'s latest bound candidate: the commit object built (no
    /// ref moves), the lease read, the forge target resolved, the state judged; records
    /// `publish.intent.proposed`.
    pub fn propose(&self, cx: Context<'_>, by: &Actor, req: ProposeRequest) -> Result<Intent> {
        let run = normalise_run(&req.run)?;
        let title = check_title(&req.title)?;
        if req.body.len() > intent::MAX_BODY_BYTES || req.body.contains('\0') {
            return Err(E::bad(format!(
                "the body must be text of at most {} bytes",
                intent::MAX_BODY_BYTES
            )));
        }
        let home = cx.home;
        let cand = candidate::latest_for_run(home, &run)
            .map_err(E::internal)?
            .ok_or_else(|| {
                E::unprocessable(format!(
                    "{run} has no bound candidate. Remedy: bind one first (POST \
                     /v1/m/evidence/candidates {{\"run\": \"{run}\"}}), then run its checks"
                ))
            })?;
        let repo = PathBuf::from(&cand.repo);
        let git = Git::new(&repo);
        adapter::check_branch(&git, &req.branch).map_err(|e| E::bad(e.to_string()))?;
        if let Some(wt) = adapter::checked_out_in(&git, &req.branch).map_err(E::internal)? {
            return Err(E::unprocessable(format!(
                "the branch {} is checked out in {}; publishing moves its ref. Remedy: choose \
                 another branch name",
                req.branch,
                wt.display()
            )));
        }
        let url = adapter::remote_url(&git, &req.remote).map_err(|e| {
            E::unprocessable(format!(
                "the repository {} has no remote {:?} ({e}). Remedy: `git remote -v` there",
                repo.display(),
                req.remote
            ))
        })?;
        adapter::check_remote_url(&url).map_err(|e| E::unprocessable(e.to_string()))?;
        let expected_tip = adapter::remote_tip(&git, &url, &req.branch).map_err(|e| {
            E::new(
                Kind::BadGateway,
                "remote_unreachable",
                format!("cannot read the remote {url}: {e}"),
            )
        })?;
        let cfg = forge::load_config(home).map_err(|e| E::unprocessable(e.to_string()))?;
        let (owner, forge_repo) =
            forge::resolve_repo(&cfg, &url, home).map_err(|e| E::unprocessable(e.to_string()))?;
        let ident = |key: &str| {
            git.text(&["config", "--get", key])
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| {
                    E::unprocessable(format!(
                        "git has no {key} for {}; the commit needs an author. Remedy: `git -C \
                         {} config {key} ...`",
                        repo.display(),
                        repo.display()
                    ))
                })
        };
        let commit = CommitRecipe {
            tree: cand.identity.worktree_tree.clone(),
            parent: cand.identity.base.clone(),
            message: CommitRecipe::message_for(&title, &req.body),
            author_name: ident("user.name")?,
            author_email: ident("user.email")?,
            date: format!("{} +0000", chrono::Utc::now().timestamp()),
        };
        let revision = commit.build(&git).map_err(E::internal)?;

        let (state, causes, gate_view, _) = judge(cx, &cand)?;
        let made = intent::create(
            &self.intents,
            home,
            Intent {
                format: intent::FORMAT.to_string(),
                id: String::new(),
                created_at: crate::ledger::now_at(),
                proposed_by: by.token_id.clone(),
                run: run.clone(),
                candidate: intent::CandidateRef {
                    id: cand.id.clone(),
                    digest: cand.identity.digest.clone(),
                    recipe: candidate::IDENTITY_RECIPE.to_string(),
                    base: cand.identity.base.clone(),
                    index_tree: cand.identity.index_tree.clone(),
                    worktree_tree: cand.identity.worktree_tree.clone(),
                },
                repo: repo.clone(),
                worktree: PathBuf::from(&cand.worktree),
                remote: intent::Remote {
                    name: req.remote.clone(),
                    url,
                },
                branch: req.branch.clone(),
                expected_tip,
                title,
                body: req.body,
                commit,
                revision,
                forge: intent::ForgeTarget {
                    api_base: cfg.api_base.clone(),
                    owner,
                    repo: forge_repo,
                    base: cfg.base.clone(),
                },
                state,
                causes,
                gate: gate_view,
                outcome: None,
            },
        )?;
        cx.record(
            "publish.intent.proposed",
            json!({
                "intent": made.id, "run": made.run, "candidate": made.candidate.id,
                "identity": made.candidate.digest, "revision": made.revision,
                "branch": made.branch, "remote_url": made.remote.url,
                "expected_tip": made.expected_tip, "state": made.state.as_str(),
                "causes": made.causes, "by": by.token_id,
            }),
        )?;
        Ok(made)
    }

    // -----------------------------------------------------------------------------------------
    // Approvals
    // -----------------------------------------------------------------------------------------

    /// Opens an approval of the intent `id` (AWAITING_AUTHORITY only): reserves its receipt
    /// (which says "incomplete" from now on) and records `publish.approval.opened`.
    pub fn open(&self, cx: Context<'_>, by: &Actor, id: &str) -> Result<OpenedApproval> {
        let it = intent::load(cx.home, id)?;
        if it.state != IntentState::AwaitingAuthority {
            return Err(E::conflict(
                "not_awaiting_authority",
                format!(
                    "{} is {}{}; only an intent AWAITING_AUTHORITY can be approved",
                    it.id,
                    it.state.label(),
                    if it.causes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", it.causes.join("; "))
                    }
                ),
            ));
        }
        let (receipt_id, receipt_path) =
            crate::receipts::reserve(cx.home, receipt::KIND).map_err(E::internal)?;
        let mut rnd = [0u8; 12];
        getrandom::fill(&mut rnd).map_err(E::internal)?;
        let mut a = Approval {
            id: format!("apr-{}", hex::encode(rnd)),
            intent: it.id.clone(),
            token_id: by.token_id.clone(),
            receipt_id,
            receipt_path,
            opened: Instant::now(),
            head: None,
            evidence: evidence_of(&it.gate),
            minted: None,
            spent: None,
            closed: false,
            statement: None,
            signed: false,
        };
        cx.record(
            "publish.approval.opened",
            json!({"approval": a.id, "intent": it.id, "revision": it.revision,
                   "receipt": a.receipt_id, "by": by.token_id}),
        )?;
        write_receipt(
            cx,
            &mut a,
            &it,
            Outcome::Incomplete,
            None,
            Effects::default(),
        )?;
        let out = OpenedApproval {
            approval: a.id.clone(),
            intent: it.id.clone(),
            receipt: a.receipt_ref(),
        };
        lock(&self.approvals)?.insert(a.id.clone(), a);
        Ok(out)
    }

    /// Re-reads everything that must not have moved since the proposal and binds the ledger
    /// head; a refusal names what moved and closes the approval with a redacted receipt.
    pub fn check(&self, cx: Context<'_>, by: &Actor, id: &str) -> Result<CheckView> {
        self.with_approval(cx, id, by, |a| {
            if a.head.is_some() {
                return Err(E::conflict(
                    "already_checked",
                    "this approval was already checked",
                ));
            }
            let it = intent::load(cx.home, &a.intent)?;
            let (tip, gate_view) = match recheck(cx, &it) {
                Ok(v) => v,
                Err((code, message)) => {
                    return Err(refuse(cx, a, Kind::Conflict, code, message));
                }
            };
            a.evidence = evidence_of(&gate_view);
            cx.record(
                "publish.approval.checked",
                json!({"approval": a.id, "intent": it.id, "identity": it.candidate.digest,
                       "revision": it.revision, "remote_tip": tip}),
            )?;
            let point = receipt::ledger_point(cx.ledger).map_err(E::internal)?;
            let head = LedgerHead {
                seq: point.events,
                line_sha256: point.last_line_sha256,
            };
            a.head = Some(head.clone());
            // The keys that may sign now (a revoked key signs nothing new).
            let key_ids: Vec<String> = keys::registered(cx.home)
                .map_err(E::internal)?
                .into_iter()
                .filter(|k| k.is_active())
                .map(|k| k.key_id)
                .collect();
            let gate_state = gate_view
                .as_object()
                .and_then(|m| m.get("state"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let evidence = match &a.evidence {
                Value::Array(v) => v.clone(),
                _ => Vec::new(),
            };
            Ok(CheckView {
                approval: a.id.clone(),
                intent: it,
                remote_tip: tip,
                ledger_head: head,
                gate_state,
                evidence,
                key_ids,
                receipt: Some(a.receipt_ref()),
            })
        })
    }

    /// A refusal at the terminal: closes the approval with a redacted receipt.
    pub fn refusal(
        &self,
        cx: Context<'_>,
        by: &Actor,
        id: &str,
        req: RefusalRequest,
    ) -> Result<RefusalAnswer> {
        let code = TERMINAL_REFUSALS
            .iter()
            .copied()
            .find(|c| *c == req.code)
            .ok_or_else(|| E::bad(format!("{:?} is not a terminal refusal code", req.code)))?;
        let message: String = req.message.chars().take(1000).collect();
        self.with_approval(cx, id, by, |a| {
            if a.spent.is_some() {
                return Err(E::conflict("spent", "the authorisation was already spent"));
            }
            let e = refuse(cx, a, Kind::Ok, code, message);
            Ok(RefusalAnswer {
                refused: Failure {
                    code: code.to_string(),
                    message: e.message,
                },
                receipt: a.receipt_ref(),
                statement_b64: a.statement_b64(),
            })
        })
    }

    /// Verifies the authorisation (signature against the registered keys, every binding,
    /// the expiry, the back-off, an unseen nonce) and appends `publish.authorisation.minted`.
    pub fn authorise(
        &self,
        cx: Context<'_>,
        by: &Actor,
        id: &str,
        env: &Envelope,
    ) -> Result<MintedAnswer> {
        self.with_approval(cx, id, by, |a| {
            if a.minted.is_some() {
                return Err(E::conflict(
                    "already_authorised",
                    "an authorisation was already appended for this approval",
                ));
            }
            let (it, p) = verified(cx, a, env)?;
            let wait = passphrase::backoff_message(cx.home, &p.key_id).map_err(E::internal)?;
            if let Some(message) = wait {
                return Err(refuse(
                    cx,
                    a,
                    Kind::TooManyRequests,
                    "passphrase_backoff",
                    message,
                ));
            }
            let nonce = p.nonce_sha256();
            if !lock(&self.minted)?.insert(nonce.clone()) {
                return Err(refuse(
                    cx,
                    a,
                    Kind::Conflict,
                    "replay",
                    "this authorisation's nonce was already seen".into(),
                ));
            }
            let seq = cx.record(
                "publish.authorisation.minted",
                json!({"approval": a.id, "intent": it.id, "revision": p.revision,
                       "identity": p.identity, "key_id": p.key_id, "nonce_sha256": nonce,
                       "ledger_head_seq": p.ledger_head.seq,
                       "ledger_head_sha256": p.ledger_head.line_sha256,
                       "minted_at": p.minted_at, "expires_at": p.expires_at,
                       "by": by.token_id}),
            )?;
            let out = MintedAnswer {
                nonce_sha256: nonce,
                seq,
                expires_at: p.expires_at.clone(),
            };
            a.minted = Some(Minted { payload: p, seq });
            Ok(out)
        })
    }

    /// Spends the authorisation exactly once (a second spend is a replay, recorded), records
    /// the spend (fsync'd), runs the adapter, records its result, and writes the receipt
    /// (unsigned) whose statement the person's key signs next.
    pub fn spend(
        &self,
        cx: Context<'_>,
        by: &Actor,
        id: &str,
        env: &Envelope,
    ) -> Result<SpendAnswer> {
        let _one = lock(&self.spending)?;
        // A replay is recognised by the nonce before anything else, whatever the approval.
        let claimed: Option<Payload> = env
            .payload_bytes()
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(p) = &claimed
            && lock(&self.spent)?.contains(&p.nonce_sha256())
        {
            cx.record(
                "publish.authorisation.replay_refused",
                json!({"approval": id, "intent": p.intent, "nonce_sha256": p.nonce_sha256(),
                       "by": by.token_id}),
            )?;
            return Err(E::conflict(
                "replay",
                "this authorisation was already spent; an authorisation is spent exactly once. \
                 Nothing was done",
            ));
        }
        // Verify and record the spend under the approval's lock; run the adapter outside it.
        let (plan, it) = self.with_approval(cx, id, by, |a| {
            let Some(minted_nonce) = a.minted.as_ref().map(|m| m.payload.nonce.clone()) else {
                return Err(E::conflict(
                    "not_authorised",
                    "no authorisation was appended for this approval",
                ));
            };
            let (it, p) = verified(cx, a, env)?;
            if p.nonce != minted_nonce {
                return Err(refuse(
                    cx,
                    a,
                    Kind::Unprocessable,
                    "bad_authorisation",
                    "this is not the authorisation appended for this approval".into(),
                ));
            }
            if it.state != IntentState::AwaitingAuthority {
                return Err(refuse(
                    cx,
                    a,
                    Kind::Conflict,
                    "not_awaiting_authority",
                    format!("{} is {} now", it.id, it.state.label()),
                ));
            }
            let cfg = forge::load_config(cx.home);
            lock(&self.spent)?.insert(p.nonce_sha256());
            let spent_at = crate::ledger::now_at();
            let seq = cx.record(
                gate::AUTHORISATION_SPENT_KIND,
                json!({"approval": a.id, "intent": it.id, "revision": it.revision,
                       "identity": it.candidate.digest, "nonce_sha256": p.nonce_sha256(),
                       "key_id": p.key_id, "spent_at": spent_at, "by": by.token_id}),
            )?;
            a.spent = Some((spent_at, seq));
            let plan = cfg.map(|cfg| Plan {
                repo: it.repo.clone(),
                remote_url: it.remote.url.clone(),
                branch: it.branch.clone(),
                revision: it.revision.clone(),
                expected_tip: it.expected_tip.clone(),
                pull_request: PullRequestAsk {
                    api_base: it.forge.api_base.clone(),
                    owner: it.forge.owner.clone(),
                    repo: it.forge.repo.clone(),
                    head: it.branch.clone(),
                    base: it.forge.base.clone(),
                    title: it.title.clone(),
                    body: it.body.clone(),
                },
                token: cfg.token,
            });
            Ok((plan, it))
        })?;

        let (effects, error) = match plan {
            Ok(plan) => {
                let out = adapter::run(&plan);
                (
                    out.effects,
                    out.error.map(|e| Failure {
                        code: e.code().to_string(),
                        message: e.to_string(),
                    }),
                )
            }
            Err(e) => (
                Effects::default(),
                Some(Failure {
                    code: "forge_config".to_string(),
                    message: e.to_string(),
                }),
            ),
        };
        let outcome = if error.is_none() {
            Outcome::Published
        } else {
            Outcome::Failed
        };
        cx.record(
            "publish.adapter.finished",
            json!({"approval": id, "intent": it.id, "revision": it.revision,
                   "outcome": outcome, "effects": effects, "error": error}),
        )?;
        intent::update(&self.intents, cx.home, &it.id, |i| {
            i.state = if outcome == Outcome::Published {
                IntentState::Published
            } else {
                IntentState::Failed
            };
            i.outcome = Some(IntentOutcome {
                approval: id.to_string(),
                effects: effects.clone(),
                error: error.clone(),
            });
        })?;
        let mut all = lock(&self.approvals)?;
        let a = all
            .get_mut(id)
            .ok_or_else(|| E::internal("the approval vanished during its spend"))?;
        a.closed = true;
        let refusal = error.clone().map(|f| Refusal {
            code: f.code,
            message: f.message,
        });
        write_receipt(cx, a, &it, outcome, refusal, effects.clone())?;
        Ok(SpendAnswer {
            outcome,
            effects,
            error,
            receipt: a.receipt_ref(),
            statement_b64: a.statement_b64(),
        })
    }

    /// Checks the signed receipt (the payload is the statement written, the DSSE signature
    /// and the SSHSIG verify against a registered key) and replaces the unsigned one with it.
    pub fn sign_receipt(
        &self,
        cx: Context<'_>,
        by: &Actor,
        id: &str,
        req: &ReceiptRequest,
    ) -> Result<SignedReceipt> {
        let mut all = lock(&self.approvals)?;
        let a = owned_approval(&mut all, id, by)?;
        if a.signed {
            return Err(E::conflict(
                "already_signed",
                "the receipt is already signed",
            ));
        }
        let Some(stmt) = &a.statement else {
            return Err(E::conflict(
                "no_statement",
                "no receipt statement to sign yet",
            ));
        };
        let bytes = req.envelope_json.as_bytes();
        let env = Envelope::from_json(bytes).map_err(|e| E::bad(e.to_string()))?;
        if receipt::file_bytes(&env) != bytes {
            return Err(E::bad(
                "envelope_json is not the envelope's canonical file bytes",
            ));
        }
        if env.payload_type != dsse::PAYLOAD_TYPE
            || env.payload_bytes().ok().as_deref() != Some(stmt.as_slice())
        {
            return Err(E::unprocessable(
                "the envelope's payload is not the statement this server wrote",
            ));
        }
        let trusted = keys::trusted_keys(cx.home).map_err(E::internal)?;
        let key = trusted
            .iter()
            .find(|k| dsse::verify(&env, k).is_ok())
            .ok_or_else(|| E::unprocessable("no registered key signed this envelope"))?;
        sshsig::verify(&req.sshsig, bytes, key)
            .map_err(|e| E::unprocessable(format!("the SSHSIG does not verify: {e}")))?;
        receipt::write(&a.receipt_path, bytes).map_err(E::internal)?;
        let sig_path = statement::sig_path(&a.receipt_path);
        receipt::write(&sig_path, req.sshsig.as_bytes()).map_err(E::internal)?;
        a.signed = true;
        cx.record(
            "publish.receipt.signed",
            json!({"receipt": a.receipt_id, "approval": a.id, "intent": a.intent,
                   "key_id": keys::key_id(key)}),
        )?;
        Ok(SignedReceipt {
            receipt: a.receipt_ref(),
            sig: sig_path,
        })
    }

    /// The open approval `id` of `by`, refusing a closed, foreign or expired one.
    fn with_approval<T>(
        &self,
        cx: Context<'_>,
        id: &str,
        by: &Actor,
        f: impl FnOnce(&mut Approval) -> Result<T>,
    ) -> Result<T> {
        let mut all = lock(&self.approvals)?;
        let a = owned_approval(&mut all, id, by)?;
        if a.closed {
            return Err(E::conflict(
                "closed",
                format!("the approval {id} is closed; open a new one"),
            ));
        }
        if a.opened.elapsed() > APPROVAL_TTL && a.spent.is_none() {
            return Err(refuse(
                cx,
                a,
                Kind::Conflict,
                "expired",
                format!(
                    "the approval was opened more than {} s ago; open a new one",
                    APPROVAL_TTL.as_secs()
                ),
            ));
        }
        f(a)
    }
}

/// The approval `id`, refused when unknown (approvals live in the server's memory only) or
/// opened with another token.
fn owned_approval<'a>(
    all: &'a mut HashMap<String, Approval>,
    id: &str,
    by: &Actor,
) -> Result<&'a mut Approval> {
    let a = all.get_mut(id).ok_or_else(|| {
        E::new(
            Kind::NotFound,
            "not_found",
            format!("no approval {id} (approvals live in the server's memory only)"),
        )
    })?;
    if a.token_id != by.token_id {
        return Err(E::new(
            Kind::Forbidden,
            "forbidden",
            "this approval was opened with another token",
        ));
    }
    Ok(a)
}

/// Writes the approval's receipt (unsigned) for the state given, keeps its statement for
/// signing, and records it.
fn write_receipt(
    cx: Context<'_>,
    a: &mut Approval,
    it: &Intent,
    outcome: Outcome,
    refusal: Option<Refusal>,
    effects: Effects,
) -> Result<()> {
    let files: Vec<(String, String)> = candidate::load(cx.home, &it.candidate.id)
        .ok()
        .flatten()
        .map(|c| {
            c.identity
                .files
                .iter()
                .filter_map(|f| Some((f.path.clone(), f.sha256.clone()?)))
                .collect()
        })
        .unwrap_or_default();
    let authorisation = a.minted.as_ref().map(|m| AuthorisationView {
        nonce_sha256: m.payload.nonce_sha256(),
        key_id: m.payload.key_id.clone(),
        key_id_recipe: keys::KEY_ID_RECIPE.to_string(),
        ledger_head: m.payload.ledger_head.clone(),
        minted_at: m.payload.minted_at.clone(),
        expires_at: m.payload.expires_at.clone(),
        minted_seq: m.seq,
        spent_at: a.spent.as_ref().map(|(at, _)| at.clone()),
        spent_seq: a.spent.as_ref().map(|(_, seq)| *seq),
    });
    let ledger = receipt::ledger_point(cx.ledger).map_err(E::internal)?;
    let facts = Facts {
        receipt_id: &a.receipt_id,
        approval: &a.id,
        intent: it,
        outcome,
        refusal,
        files,
        evidence: a.evidence.clone(),
        authorisation,
        effects,
        ledger,
        written_at: crate::ledger::now_at(),
    };
    let stmt = receipt::statement_of(&facts);
    let payload = receipt::payload_of(&stmt);
    receipt::write(
        &a.receipt_path,
        &receipt::file_bytes(&receipt::unsigned(&payload)),
    )
    .map_err(E::internal)?;
    a.statement = Some(payload);
    cx.record(
        "publish.receipt.written",
        json!({"receipt": a.receipt_id, "approval": a.id, "intent": a.intent,
               "outcome": outcome, "signed": false}),
    )?;
    Ok(())
}

/// Closes the approval as refused: records it, writes the redacted receipt, and returns the
/// error to answer with.
fn refuse(
    cx: Context<'_>,
    a: &mut Approval,
    kind: Kind,
    code: &'static str,
    message: String,
) -> PublishError {
    a.closed = true;
    let result = (|| {
        cx.record(
            "publish.approval.refused",
            json!({"approval": a.id, "intent": a.intent, "code": code, "message": message,
                   "receipt": a.receipt_id}),
        )?;
        let it = intent::load(cx.home, &a.intent)?;
        write_receipt(
            cx,
            a,
            &it,
            Outcome::Refused,
            Some(Refusal {
                code: code.to_string(),
                message: message.clone(),
            }),
            Effects::default(),
        )
    })();
    match result {
        Ok(()) => E::new(
            kind,
            code,
            format!("{message} (redacted receipt {})", a.receipt_path.display()),
        ),
        Err(e) => E::new(
            kind,
            code,
            format!(
                "{message} (the redacted receipt could not be written: {})",
                e.message
            ),
        ),
    }
}

/// Everything that must not have moved since the proposal, re-read now: the remote tip and
/// the gate as seen.
fn recheck(
    cx: Context<'_>,
    it: &Intent,
) -> std::result::Result<(Option<String>, Value), (&'static str, String)> {
    let home = cx.home;
    let cand = candidate::require(home, &it.candidate.id)
        .map_err(|e| ("stale", format!("the candidate cannot be read: {e}")))?;
    if cand.identity.digest != it.candidate.digest {
        return Err((
            "stale",
            "the candidate's stored identity is not the one the intent names".into(),
        ));
    }
    match candidate::currency(&cand) {
        Currency::Current => {}
        Currency::Changed { now } => {
            return Err((
                "stale",
                format!(
                    "the candidate changed after the proposal: its worktree is now {}, not {}. \
                     Remedy: bind the new state, run its checks, and propose again",
                    candidate::render_digest(&now.digest),
                    candidate::render_digest(&it.candidate.digest)
                ),
            ));
        }
        Currency::Unavailable { code, detail } => {
            return Err((
                "stale",
                format!("the candidate cannot be re-derived now ({code}): {detail}"),
            ));
        }
    }
    let (state, causes, gate_view, _) = judge(cx, &cand).map_err(|e| ("gate", e.message))?;
    if state != IntentState::AwaitingAuthority {
        return Err((
            "gate",
            format!(
                "the evidence no longer passes for this candidate: {}",
                causes.join("; ")
            ),
        ));
    }
    let git = Git::new(&it.repo);
    match it.commit.build(&git) {
        Ok(rev) if rev == it.revision => {}
        Ok(rev) => {
            return Err((
                "revision_moved",
                format!("the stored recipe now builds {rev}, not {}", it.revision),
            ));
        }
        Err(e) => {
            return Err((
                "revision_moved",
                format!("the commit cannot be rebuilt: {e}"),
            ));
        }
    }
    match adapter::remote_url(&git, &it.remote.name) {
        Ok(url) if url == it.remote.url => {}
        Ok(url) => {
            return Err((
                "remote_changed",
                format!(
                    "the remote {} now points at {url}, not {}",
                    it.remote.name, it.remote.url
                ),
            ));
        }
        Err(e) => return Err(("remote_changed", format!("the remote cannot be read: {e}"))),
    }
    let tip = adapter::remote_tip(&git, &it.remote.url, &it.branch)
        .map_err(|e| ("remote_unreachable", format!("cannot read the remote: {e}")))?;
    if tip != it.expected_tip {
        return Err((
            "lease_moved",
            format!(
                "the remote branch {} moved: expected {}, found {}. Nothing will be pushed \
                 over it. Remedy: propose again from the remote's current state",
                it.branch,
                adapter::tip_name(&it.expected_tip),
                adapter::tip_name(&tip)
            ),
        ));
    }
    if let Err(e) = forge::load_config(home) {
        return Err(("forge_config", e.to_string()));
    }
    match keys::trusted_keys(home) {
        Ok(k) if !k.is_empty() => {}
        Ok(_) => {
            return Err((
                "no_key",
                "the server trusts no publish key. Remedy: `proctor key generate`".into(),
            ));
        }
        Err(e) => return Err(("no_key", e.to_string())),
    }
    Ok((tip, gate_view))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_refs_and_titles_are_checked_before_anything_is_read() {
        assert_eq!(normalise_run("7").unwrap(), "run-0007");
        assert_eq!(normalise_run("run-0012").unwrap(), "run-0012");
        assert_eq!(normalise_run("run-x").unwrap_err().kind, Kind::BadRequest);
        assert_eq!(check_title("  Fix it ").unwrap(), "Fix it");
        assert!(check_title("").is_err());
        assert!(check_title("a\u{202e}b").is_err());
        assert!(check_title(&"x".repeat(intent::MAX_TITLE_CHARS + 1)).is_err());
    }
}
