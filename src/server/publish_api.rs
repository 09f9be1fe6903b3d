//! Routes under `/v1/m/publish`: intents, and the server's half of the approval flow.
//!
//! - `GET /intents` (read) → `{items: [intent]}`; `GET /intents/{intent}` (read).
//! - `POST /intents` (write) `{run, remote, branch, title, body?}` → 201 intent
//!   (AWAITING_AUTHORITY or BLOCKED with causes); records `publish.intent.proposed`.
//! - `POST /intents/{intent}/approvals` (write, person) → 201 `{approval, intent, receipt}`:
//!   the receipt file is reserved (and holds an "incomplete" receipt from now on);
//!   records `publish.approval.opened`.
//! - `POST /approvals/{approval}/check` (write, person) → 200 the check view (the intent, the
//!   remote tip re-read now, the ledger head to bind, the gate, the trusted key ids), or 409
//!   naming what moved (stale candidate, lease moved, gate, revision, remote URL, forge
//!   configuration, no key) with a redacted receipt.
//! - `POST /approvals/{approval}/refusal` (write, person) `{code, message}`: a refusal at the
//!   terminal (no terminal, Ctrl-C, wrong revision, wrong passphrase, …) → redacted receipt.
//! - `POST /approvals/{approval}/authorisation` (write, person) `{envelope}`: verifies the
//!   signature against the registered keys, every binding, the expiry and that the nonce is
//!   unseen; appends `publish.authorisation.minted` (fsync'd) → 201.
//! - `POST /approvals/{approval}/spend` (write, person) `{envelope}`: spends it exactly once
//!   (a second spend is a replay: 409, recorded as `publish.authorisation.replay_refused`),
//!   records `publish.authorisation.spent` (fsync'd), runs the adapter here, records
//!   `publish.adapter.finished`, writes the receipt (unsigned) → 200 with the statement to
//!   sign.
//! - `POST /approvals/{approval}/receipt` (write, person) `{envelope_json, sshsig}`: checks
//!   the payload is the statement written, the DSSE signature and the SSHSIG against the
//!   registered key, and replaces the receipt with the signed one (+ `.sig`).
//!
//! Why the adapter runs here, in the server, after the spend is durable: the spend and the
//! effects are then one step of one process, so one authorisation can cause at most one run
//! of the adapter, whatever a client does afterwards; the ledger records the spend before the
//! first effect and the adapter's observed result before anyone is told; and the CLI and the
//! cockpit stay thin clients. The key never leaves the terminal: the server only verifies.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::auth::Role;
use crate::authority::dsse::{self, Envelope};
use crate::authority::{keys, sshsig, statement};
use crate::candidate::{self, Currency};
use crate::gate::{self, GateState};
use crate::git::Git;
use crate::publish::adapter::{self, Effects, Plan};
use crate::publish::authorisation::{self, Grant, LedgerHead, Payload};
use crate::publish::forge::{self, PullRequestAsk};
use crate::publish::intent::{self, CommitRecipe, Intent, IntentError, IntentState};
use crate::publish::receipt::{self, AuthorisationView, Facts, Outcome, Refusal};

pub const BASE: &str = "/v1/m/publish";
/// How long an approval stays open for its authorisation (the time to read and type).
const APPROVAL_TTL: Duration = Duration::from_secs(600);

/// The role each publish route needs (`route` is the full matched route).
pub fn publish_role(method: &str, route: &str) -> Option<Role> {
    Some(match (method, route.strip_prefix(BASE)?) {
        ("GET", "/intents" | "/intents/{intent}") => Role::Read,
        ("POST", "/intents" | "/intents/{intent}/approvals") => Role::Write,
        (
            "POST",
            "/approvals/{approval}/check"
            | "/approvals/{approval}/refusal"
            | "/approvals/{approval}/authorisation"
            | "/approvals/{approval}/spend"
            | "/approvals/{approval}/receipt",
        ) => Role::Write,
        _ => return None,
    })
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/intents", get(list).post(propose))
        .route("/intents/{intent}", get(show))
        .route("/intents/{intent}/approvals", post(open))
        .route("/approvals/{approval}/check", post(check))
        .route("/approvals/{approval}/refusal", post(refusal))
        .route("/approvals/{approval}/authorisation", post(authorise))
        .route("/approvals/{approval}/spend", post(spend))
        .route("/approvals/{approval}/receipt", post(sign_receipt))
}

type ApiResult = Result<Response, ApiError>;

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e)
}
fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m)
}
fn unprocessable(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", m)
}
fn conflict(code: &'static str, m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, m)
}

impl From<IntentError> for ApiError {
    fn from(e: IntentError) -> Self {
        match e {
            IntentError::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            IntentError::BadId(_) => bad(e.to_string()),
            other => internal(other),
        }
    }
}

fn person_only(caller: &Caller, what: &str) -> Result<(), ApiError> {
    super::api::person_only(
        caller,
        what,
        "only a person at a terminal authorises a publication",
    )
}

fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad(format!("bad JSON body: {e}")))
}

fn record(s: &Shared, kind: &str, fields: Value) -> Result<u64, ApiError> {
    s.record(kind, fields).map_err(internal)
}

// ---------------------------------------------------------------------------------------------
// Intents
// ---------------------------------------------------------------------------------------------

async fn list(State(s): State<Arc<Shared>>) -> ApiResult {
    let items = blocking(move || {
        let items = intent::list(&s.home)?;
        Ok::<_, ApiError>(
            items
                .into_iter()
                .map(|it| as_now(&s, it, true))
                .collect::<Vec<_>>(),
        )
    })
    .await?;
    Ok(axum::Json(json!({"items": items})).into_response())
}

async fn show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult {
    let v = blocking(move || {
        let it = intent::load(&s.home, &id)?;
        Ok::<_, ApiError>(as_now(&s, it, false))
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

/// How long a re-evaluated intent state is reused (each evaluation hashes the worktree).
const JUDGED_FOR: std::time::Duration = std::time::Duration::from_secs(20);

/// Recent re-evaluations: candidate id → (when, allowed, causes, evaluated_at).
type Judged = HashMap<String, (std::time::Instant, bool, Vec<String>, String)>;

/// An intent as it stands now. One recorded AWAITING_AUTHORITY is judged again (the gate is
/// evaluated, at most every 20 s per candidate): when its evidence no longer passes — the
/// worktree moved, the policy changed — it is shown BLOCKED with the causes, and
/// `recorded_state` keeps what was recorded. Other states are facts and shown as recorded.
/// A list (polled by the cockpit) may reuse an evaluation younger than 20 s (`reuse`); one
/// intent is always evaluated afresh. `state_evaluated_at` says when.
fn as_now(s: &Shared, it: intent::Intent, reuse: bool) -> Value {
    let recorded = it.state;
    let mut v = serde_json::to_value(&it).unwrap_or(Value::Null);
    if recorded != IntentState::AwaitingAuthority {
        return v;
    }
    let cached = lock(&s.publish.judged)
        .ok()
        .filter(|_| reuse)
        .and_then(|m| {
            m.get(&it.candidate.id)
                .filter(|(at, ..)| at.elapsed() < JUDGED_FOR)
                .cloned()
        });
    let (ok, causes, at) = match cached {
        Some((_, ok, causes, at)) => (ok, causes, at),
        None => {
            let judged = candidate::load(&s.home, &it.candidate.id)
                .map_err(internal)
                .and_then(|c| c.ok_or_else(|| internal("the candidate is gone")))
                .and_then(|c| judge(s, &c));
            let (ok, causes, at) = match judged {
                Ok((state, causes, view)) => (
                    state == IntentState::AwaitingAuthority,
                    causes,
                    view["evaluated_at"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
                Err(e) => (
                    false,
                    vec![format!("the gate cannot be evaluated: {}", e.message)],
                    String::new(),
                ),
            };
            if let Ok(mut m) = lock(&s.publish.judged) {
                m.insert(
                    it.candidate.id.clone(),
                    (std::time::Instant::now(), ok, causes.clone(), at.clone()),
                );
            }
            (ok, causes, at)
        }
    };
    v["state_evaluated_at"] = json!(at);
    if !ok {
        v["recorded_state"] = json!(recorded);
        v["state"] = json!(IntentState::Blocked);
        v["causes"] = json!(causes);
    }
    v
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposeBody {
    run: String,
    remote: String,
    branch: String,
    title: String,
    #[serde(default)]
    body: String,
}

fn normalise_run(raw: &str) -> Result<String, ApiError> {
    let digits = raw.strip_prefix("run-").unwrap_or(raw);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("{raw:?} is not a run ref (run-0001)")));
    }
    let n: u64 = digits.parse().map_err(|_| bad("bad run ref"))?;
    Ok(format!("run-{n:04}"))
}

fn check_title(title: &str) -> Result<String, ApiError> {
    let t = title.trim();
    if t.is_empty() {
        return Err(bad("the title is empty"));
    }
    if t.chars().count() > intent::MAX_TITLE_CHARS {
        return Err(bad(format!(
            "the title is longer than {} characters",
            intent::MAX_TITLE_CHARS
        )));
    }
    if t.chars()
        .any(|c| c.is_control() || crate::text::is_invisible(c))
    {
        return Err(bad(
            "the title holds a control or invisible character; a title is one visible line",
        ));
    }
    Ok(t.to_string())
}

async fn propose(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let req: ProposeBody = json_body(&body)?;
    let run = normalise_run(&req.run)?;
    let title = check_title(&req.title)?;
    if req.body.len() > intent::MAX_BODY_BYTES || req.body.contains('\0') {
        return Err(bad(format!(
            "the body must be text of at most {} bytes",
            intent::MAX_BODY_BYTES
        )));
    }
    let s2 = s.clone();
    let made = blocking(move || propose_blocking(&s2, &caller, run, req, title)).await?;
    Ok((StatusCode::CREATED, axum::Json(made)).into_response())
}

fn propose_blocking(
    s: &Shared,
    caller: &Caller,
    run: String,
    req: ProposeBody,
    title: String,
) -> Result<Intent, ApiError> {
    let home = &s.home;
    let cand = candidate::latest_for_run(home, &run)
        .map_err(internal)?
        .ok_or_else(|| {
            unprocessable(format!(
                "{run} has no bound candidate. Remedy: bind one first (POST \
                 /v1/m/evidence/candidates {{\"run\": \"{run}\"}}), then run its checks"
            ))
        })?;
    let repo = PathBuf::from(&cand.repo);
    let git = Git::new(&repo);
    adapter::check_branch(&git, &req.branch).map_err(|e| bad(e.to_string()))?;
    if let Some(wt) = adapter::checked_out_in(&git, &req.branch).map_err(internal)? {
        return Err(unprocessable(format!(
            "the branch {} is checked out in {}; publishing moves its ref. Remedy: choose \
             another branch name",
            req.branch,
            wt.display()
        )));
    }
    let url = adapter::remote_url(&git, &req.remote).map_err(|e| {
        unprocessable(format!(
            "the repository {} has no remote {:?} ({e}). Remedy: `git remote -v` there",
            repo.display(),
            req.remote
        ))
    })?;
    adapter::check_remote_url(&url).map_err(|e| unprocessable(e.to_string()))?;
    let expected_tip = adapter::remote_tip(&git, &url, &req.branch).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "remote_unreachable",
            format!("cannot read the remote {url}: {e}"),
        )
    })?;
    let cfg = forge::load_config(home).map_err(|e| unprocessable(e.to_string()))?;
    let (owner, forge_repo) =
        forge::resolve_repo(&cfg, &url, home).map_err(|e| unprocessable(e.to_string()))?;
    let ident = |key: &str| {
        git.text(&["config", "--get", key])
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                unprocessable(format!(
                    "git has no {key} for {}; the commit needs an author. Remedy: `git -C {} \
                     config {key} ...`",
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
    let revision = commit.build(&git).map_err(internal)?;

    let (state, causes, gate_view) = judge(s, &cand)?;
    let made = intent::create(
        &s.publish.intents,
        home,
        Intent {
            format: intent::FORMAT.to_string(),
            id: String::new(),
            created_at: crate::ledger::now_at(),
            proposed_by: caller.token_id.clone(),
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
    record(
        s,
        "publish.intent.proposed",
        json!({
            "intent": made.id, "run": made.run, "candidate": made.candidate.id,
            "identity": made.candidate.digest, "revision": made.revision,
            "branch": made.branch, "remote_url": made.remote.url,
            "expected_tip": made.expected_tip, "state": made.state.as_str(),
            "causes": made.causes, "by": caller.token_id,
        }),
    )?;
    Ok(made)
}

/// The intent state the evidence allows now, with the causes, and the gate as seen.
fn judge(
    s: &Shared,
    cand: &candidate::Candidate,
) -> Result<(IntentState, Vec<String>, Value), ApiError> {
    let g = gate::evaluate(&s.home, &cand.id, &s.checks).map_err(internal)?;
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
    Ok((state, if ok { Vec::new() } else { causes }, view))
}

// ---------------------------------------------------------------------------------------------
// Approvals (in memory: an approval does not survive the server; its receipt does)
// ---------------------------------------------------------------------------------------------

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

/// The publish path's state in the server: part of [`Shared`], never a process-wide static.
/// It lives as long as the server (open approvals are lost on a restart: docs/security.md).
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

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, ApiError> {
    m.lock()
        .map_err(|_| internal("a lock inside the server was poisoned"))
}

fn receipt_ref(a: &Approval) -> Value {
    json!({"id": a.receipt_id, "path": a.receipt_path, "signed": a.signed})
}

/// Writes the approval's receipt (unsigned) for the state given, keeps its statement for
/// signing, and records it.
fn write_receipt(
    s: &Shared,
    a: &mut Approval,
    it: &Intent,
    outcome: Outcome,
    refusal: Option<Refusal>,
    effects: Effects,
) -> Result<(), ApiError> {
    let files: Vec<(String, String)> = candidate::load(&s.home, &it.candidate.id)
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
    let ledger = receipt::ledger_point(&s.ledger).map_err(internal)?;
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
    .map_err(internal)?;
    a.statement = Some(payload);
    record(
        s,
        "publish.receipt.written",
        json!({"receipt": a.receipt_id, "approval": a.id, "intent": a.intent,
               "outcome": outcome, "signed": false}),
    )?;
    Ok(())
}

/// Closes the approval as refused: records it, writes the redacted receipt, and returns the
/// error to answer with.
fn refuse(
    s: &Shared,
    a: &mut Approval,
    status: StatusCode,
    code: &'static str,
    message: String,
) -> ApiError {
    a.closed = true;
    let result = (|| {
        record(
            s,
            "publish.approval.refused",
            json!({"approval": a.id, "intent": a.intent, "code": code, "message": message,
                   "receipt": a.receipt_id}),
        )?;
        let it = intent::load(&s.home, &a.intent)?;
        write_receipt(
            s,
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
        Ok(()) => ApiError::new(
            status,
            code,
            format!("{message} (redacted receipt {})", a.receipt_path.display()),
        ),
        Err(e) => ApiError::new(
            status,
            code,
            format!(
                "{message} (the redacted receipt could not be written: {})",
                e.message
            ),
        ),
    }
}

/// The approval `id`, refused when unknown (approvals live in the server's memory only) or
/// opened with another token.
fn owned_approval<'a>(
    all: &'a mut HashMap<String, Approval>,
    id: &str,
    caller: &Caller,
) -> Result<&'a mut Approval, ApiError> {
    let a = all.get_mut(id).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no approval {id} (approvals live in the server's memory only)"),
        )
    })?;
    if a.token_id != caller.token_id {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this approval was opened with another token",
        ));
    }
    Ok(a)
}

/// The open approval `id` of `caller`, refusing a closed, foreign or expired one.
fn with_approval<T>(
    s: &Shared,
    id: &str,
    caller: &Caller,
    f: impl FnOnce(&Shared, &mut Approval) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let mut all = lock(&s.publish.approvals)?;
    let a = owned_approval(&mut all, id, caller)?;
    if a.closed {
        return Err(conflict(
            "closed",
            format!("the approval {id} is closed; open a new one"),
        ));
    }
    if a.opened.elapsed() > APPROVAL_TTL && a.spent.is_none() {
        return Err(refuse(
            s,
            a,
            StatusCode::CONFLICT,
            "expired",
            format!(
                "the approval was opened more than {} s ago; open a new one",
                APPROVAL_TTL.as_secs()
            ),
        ));
    }
    f(s, a)
}

async fn open(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let v = blocking(move || {
        let it = intent::load(&s.home, &id)?;
        if it.state != IntentState::AwaitingAuthority {
            return Err(conflict(
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
            crate::receipts::reserve(&s.home, receipt::KIND).map_err(internal)?;
        let mut rnd = [0u8; 12];
        getrandom::fill(&mut rnd).map_err(internal)?;
        let mut a = Approval {
            id: format!("apr-{}", hex::encode(rnd)),
            intent: it.id.clone(),
            token_id: caller.token_id.clone(),
            receipt_id,
            receipt_path,
            opened: Instant::now(),
            head: None,
            evidence: it.gate["evidence"].clone(),
            minted: None,
            spent: None,
            closed: false,
            statement: None,
            signed: false,
        };
        record(
            &s,
            "publish.approval.opened",
            json!({"approval": a.id, "intent": it.id, "revision": it.revision,
                   "receipt": a.receipt_id, "by": caller.token_id}),
        )?;
        write_receipt(
            &s,
            &mut a,
            &it,
            Outcome::Incomplete,
            None,
            Effects::default(),
        )?;
        let out = json!({"approval": a.id, "intent": it.id, "receipt": receipt_ref(&a)});
        lock(&s.publish.approvals)?.insert(a.id.clone(), a);
        Ok(out)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(v)).into_response())
}

/// Everything that must not have moved since the proposal, re-read now.
fn recheck(s: &Shared, it: &Intent) -> Result<(Option<String>, Value), (&'static str, String)> {
    let home = &s.home;
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
    let (state, causes, gate_view) = judge(s, &cand).map_err(|e| ("gate", e.message))?;
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

async fn check(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let v = blocking(move || {
        with_approval(&s, &id, &caller, |s, a| {
            if a.head.is_some() {
                return Err(conflict(
                    "already_checked",
                    "this approval was already checked",
                ));
            }
            let it = intent::load(&s.home, &a.intent)?;
            let (tip, gate_view) = match recheck(s, &it) {
                Ok(v) => v,
                Err((code, message)) => {
                    return Err(refuse(s, a, StatusCode::CONFLICT, code, message));
                }
            };
            a.evidence = gate_view["evidence"].clone();
            record(
                s,
                "publish.approval.checked",
                json!({"approval": a.id, "intent": it.id, "identity": it.candidate.digest,
                       "revision": it.revision, "remote_tip": tip}),
            )?;
            let point = receipt::ledger_point(&s.ledger).map_err(internal)?;
            let head = LedgerHead {
                seq: point.events,
                line_sha256: point.last_line_sha256,
            };
            a.head = Some(head.clone());
            // The keys that may sign now (a revoked key signs nothing new).
            let key_ids: Vec<String> = keys::registered(&s.home)
                .map_err(internal)?
                .into_iter()
                .filter(|k| k.is_active())
                .map(|k| k.key_id)
                .collect();
            Ok(json!({
                "approval": a.id, "intent": it, "remote_tip": tip, "ledger_head": head,
                "gate_state": gate_view["state"], "evidence": a.evidence, "key_ids": key_ids,
                "receipt": receipt_ref(a),
            }))
        })
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

/// The refusals a terminal may report.
const TERMINAL_REFUSALS: [&str; 10] = [
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefusalBody {
    code: String,
    #[serde(default)]
    message: String,
}

async fn refusal(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let req: RefusalBody = json_body(&body)?;
    let code = TERMINAL_REFUSALS
        .iter()
        .copied()
        .find(|c| *c == req.code)
        .ok_or_else(|| bad(format!("{:?} is not a terminal refusal code", req.code)))?;
    let message: String = req.message.chars().take(1000).collect();
    let v = blocking(move || {
        with_approval(&s, &id, &caller, |s, a| {
            if a.spent.is_some() {
                return Err(conflict("spent", "the authorisation was already spent"));
            }
            let e = refuse(s, a, StatusCode::OK, code, message);
            Ok(json!({"refused": {"code": code, "message": e.message},
                      "receipt": receipt_ref(a),
                      "statement_b64": a.statement.as_ref().map(|b| base64::engine::general_purpose::STANDARD.encode(b))}))
        })
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeBody {
    envelope: Envelope,
}

/// Verifies an authorisation against every registered key; the payload when one holds.
fn verify_authorisation(
    s: &Shared,
    env: &Envelope,
    grant: &Grant,
) -> Result<Payload, authorisation::AuthorisationError> {
    let trusted = keys::trusted_keys(&s.home)
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

fn grant_of(a: &Approval, it: &Intent) -> Result<Grant, ApiError> {
    Ok(Grant {
        approval: a.id.clone(),
        intent: it.id.clone(),
        revision: it.revision.clone(),
        identity: it.candidate.digest.clone(),
        ledger_head: a
            .head
            .clone()
            .ok_or_else(|| conflict("not_checked", "this approval was not checked yet"))?,
    })
}

fn auth_error_code(e: &authorisation::AuthorisationError) -> &'static str {
    match e {
        authorisation::AuthorisationError::Expired { .. } => "expired",
        _ => "bad_authorisation",
    }
}

async fn authorise(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "authorise a publication")?;
    let req: EnvelopeBody = json_body(&body)?;
    let v = blocking(move || {
        with_approval(&s, &id, &caller, |s, a| {
            if a.minted.is_some() {
                return Err(conflict(
                    "already_authorised",
                    "an authorisation was already appended for this approval",
                ));
            }
            let it = intent::load(&s.home, &a.intent)?;
            let grant = grant_of(a, &it)?;
            let p = match verify_authorisation(s, &req.envelope, &grant) {
                Ok(p) => p,
                Err(e) => {
                    let code = auth_error_code(&e);
                    return Err(refuse(
                        s,
                        a,
                        StatusCode::UNPROCESSABLE_ENTITY,
                        code,
                        e.to_string(),
                    ));
                }
            };
            if let Some(message) = super::authority_api::passphrase_wait(s, &p.key_id) {
                return Err(refuse(
                    s,
                    a,
                    StatusCode::TOO_MANY_REQUESTS,
                    "passphrase_backoff",
                    message,
                ));
            }
            let nonce = p.nonce_sha256();
            if !lock(&s.publish.minted)?.insert(nonce.clone()) {
                return Err(refuse(
                    s,
                    a,
                    StatusCode::CONFLICT,
                    "replay",
                    "this authorisation's nonce was already seen".into(),
                ));
            }
            let seq = record(
                s,
                "publish.authorisation.minted",
                json!({"approval": a.id, "intent": it.id, "revision": p.revision,
                       "identity": p.identity, "key_id": p.key_id, "nonce_sha256": nonce,
                       "ledger_head_seq": p.ledger_head.seq,
                       "ledger_head_sha256": p.ledger_head.line_sha256,
                       "minted_at": p.minted_at, "expires_at": p.expires_at,
                       "by": caller.token_id}),
            )?;
            let out = json!({"nonce_sha256": nonce, "seq": seq, "expires_at": p.expires_at});
            a.minted = Some(Minted { payload: p, seq });
            Ok(out)
        })
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(v)).into_response())
}

async fn spend(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "spend a publication authorisation")?;
    let req: EnvelopeBody = json_body(&body)?;
    let v = blocking(move || spend_blocking(&s, &caller, &id, &req.envelope)).await?;
    Ok(axum::Json(v).into_response())
}

fn spend_blocking(
    s: &Shared,
    caller: &Caller,
    id: &str,
    env: &Envelope,
) -> Result<Value, ApiError> {
    let _one = lock(&s.publish.spending)?;
    // A replay is recognised by the nonce before anything else, whatever the approval.
    let claimed: Option<Payload> = env
        .payload_bytes()
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(p) = &claimed
        && lock(&s.publish.spent)?.contains(&p.nonce_sha256())
    {
        record(
            s,
            "publish.authorisation.replay_refused",
            json!({"approval": id, "intent": p.intent, "nonce_sha256": p.nonce_sha256(),
                   "by": caller.token_id}),
        )?;
        return Err(conflict(
            "replay",
            "this authorisation was already spent; an authorisation is spent exactly once. \
             Nothing was done",
        ));
    }
    // Verify and record the spend under the approval's lock; run the adapter outside it.
    let (plan, it) = with_approval(s, id, caller, |s, a| {
        let Some(minted) = &a.minted else {
            return Err(conflict(
                "not_authorised",
                "no authorisation was appended for this approval",
            ));
        };
        let it = intent::load(&s.home, &a.intent)?;
        let grant = grant_of(a, &it)?;
        let p = match verify_authorisation(s, env, &grant) {
            Ok(p) => p,
            Err(e) => {
                let code = auth_error_code(&e);
                return Err(refuse(
                    s,
                    a,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    code,
                    e.to_string(),
                ));
            }
        };
        if p.nonce != minted.payload.nonce {
            return Err(refuse(
                s,
                a,
                StatusCode::UNPROCESSABLE_ENTITY,
                "bad_authorisation",
                "this is not the authorisation appended for this approval".into(),
            ));
        }
        if it.state != IntentState::AwaitingAuthority {
            return Err(refuse(
                s,
                a,
                StatusCode::CONFLICT,
                "not_awaiting_authority",
                format!("{} is {} now", it.id, it.state.label()),
            ));
        }
        let cfg = forge::load_config(&s.home);
        lock(&s.publish.spent)?.insert(p.nonce_sha256());
        let spent_at = crate::ledger::now_at();
        let seq = record(
            s,
            gate::AUTHORISATION_SPENT_KIND,
            json!({"approval": a.id, "intent": it.id, "revision": it.revision,
                   "identity": it.candidate.digest, "nonce_sha256": p.nonce_sha256(),
                   "key_id": p.key_id, "spent_at": spent_at, "by": caller.token_id}),
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
                out.error.map(|e| (e.code().to_string(), e.to_string())),
            )
        }
        Err(e) => (
            Effects::default(),
            Some(("forge_config".to_string(), e.to_string())),
        ),
    };
    let outcome = if error.is_none() {
        Outcome::Published
    } else {
        Outcome::Failed
    };
    let error_json = error
        .as_ref()
        .map(|(code, message)| json!({"code": code, "message": message}));
    record(
        s,
        "publish.adapter.finished",
        json!({"approval": id, "intent": it.id, "revision": it.revision,
               "outcome": outcome, "effects": effects, "error": error_json}),
    )?;
    intent::update(&s.publish.intents, &s.home, &it.id, |i| {
        i.state = if outcome == Outcome::Published {
            IntentState::Published
        } else {
            IntentState::Failed
        };
        i.outcome = Some(json!({"approval": id, "effects": effects, "error": error_json}));
    })?;
    let mut all = lock(&s.publish.approvals)?;
    let a = all
        .get_mut(id)
        .ok_or_else(|| internal("the approval vanished during its spend"))?;
    a.closed = true;
    let refusal = error.map(|(code, message)| Refusal { code, message });
    write_receipt(s, a, &it, outcome, refusal, effects.clone())?;
    Ok(json!({
        "outcome": outcome, "effects": effects, "error": error_json,
        "receipt": receipt_ref(a),
        "statement_b64": a.statement.as_ref().map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiptBody {
    envelope_json: String,
    sshsig: String,
}

async fn sign_receipt(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "sign a publication receipt")?;
    let req: ReceiptBody = json_body(&body)?;
    let v = blocking(move || {
        let mut all = lock(&s.publish.approvals)?;
        let a = owned_approval(&mut all, &id, &caller)?;
        if a.signed {
            return Err(conflict("already_signed", "the receipt is already signed"));
        }
        let Some(stmt) = &a.statement else {
            return Err(conflict("no_statement", "no receipt statement to sign yet"));
        };
        let bytes = req.envelope_json.as_bytes();
        let env = Envelope::from_json(bytes).map_err(|e| bad(e.to_string()))?;
        if receipt::file_bytes(&env) != bytes {
            return Err(bad(
                "envelope_json is not the envelope's canonical file bytes",
            ));
        }
        if env.payload_type != dsse::PAYLOAD_TYPE
            || env.payload_bytes().ok().as_deref() != Some(stmt.as_slice())
        {
            return Err(unprocessable(
                "the envelope's payload is not the statement this server wrote",
            ));
        }
        let trusted = keys::trusted_keys(&s.home).map_err(internal)?;
        let key = trusted
            .iter()
            .find(|k| dsse::verify(&env, k).is_ok())
            .ok_or_else(|| unprocessable("no registered key signed this envelope"))?;
        sshsig::verify(&req.sshsig, bytes, key)
            .map_err(|e| unprocessable(format!("the SSHSIG does not verify: {e}")))?;
        receipt::write(&a.receipt_path, bytes).map_err(internal)?;
        let sig_path = statement::sig_path(&a.receipt_path);
        receipt::write(&sig_path, req.sshsig.as_bytes()).map_err(internal)?;
        a.signed = true;
        record(
            &s,
            "publish.receipt.signed",
            json!({"receipt": a.receipt_id, "approval": a.id, "intent": a.intent,
                   "key_id": keys::key_id(key)}),
        )?;
        Ok(json!({"receipt": receipt_ref(a), "sig": sig_path}))
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

#[cfg(test)]
mod tests;
