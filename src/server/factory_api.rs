//! Routes under `/v1/m/factory` (the contract: [`crate::api::factory`]): start an
//! agent-factory run (`write`), list and show runs and read a receipt (`read`). A run is
//! checked and numbered on the request's thread, then runs to its end on a thread of its
//! own, so it outlives the client that started it; its record is kept in memory while it
//! runs and on disk (`data/factory/fac-NNNN/run.json`) at every phase.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::Items;
use crate::api::factory::{self as wire, FactoryRun, ReceiptView, StartRequest};
use crate::factory::engine::{self, Agent, Spec, StartError, Watch};
use crate::providers::Tool;
use crate::providers::profile::Store;

/// The default deadline of one provider invocation.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The longest deadline accepted.
pub const MAX_TIMEOUT_SECS: u64 = 24 * 3600;

/// The runs in progress, by id (the latest record of each).
#[derive(Debug, Default, Clone)]
pub struct FactoryState {
    live: Arc<Mutex<HashMap<String, FactoryRun>>>,
    /// Set when the server stops: every invocation in progress is stopped.
    cancel: Arc<std::sync::atomic::AtomicBool>,
    /// Counts the updates of the runs in progress (the change stream's `factory`).
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Watch for FactoryState {
    fn update(&self, run: &FactoryRun) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if run.status == engine::RunStatus::Running {
            live.insert(run.id.clone(), run.clone());
        } else {
            live.remove(&run.id);
        }
        drop(live);
        self.changed.send_modify(|n| *n += 1);
    }
}

impl FactoryState {
    /// The count of updates of the runs in progress, changed at each.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Stops every run in progress (its provider's whole tree) and waits, at most `bound`,
    /// for their records to be final.
    pub fn stop_all(&self, bound: Duration) {
        self.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        let end = std::time::Instant::now() + bound;
        while std::time::Instant::now() < end
            && !self
                .live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A run in progress, its provider bound as of now.
    fn get(&self, id: &str) -> Option<FactoryRun> {
        let mut run = self
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()?;
        run.provider_bound_ms = engine::bound_now(&run);
        Some(run)
    }
}

/// The role each factory route needs (`route` is the full matched path).
pub fn factory_role(method: &str, route: &str) -> Option<crate::auth::Role> {
    use crate::auth::Role::*;
    use wire::*;
    Some(match (method, route) {
        ("POST", RUNS) => Write,
        ("GET", RUNS | RUN | RUN_RECEIPT) => Read,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    use wire::*;
    Router::new()
        .route(RUNS, get(list).post(start))
        .route(RUN, get(show))
        .route(RUN_RECEIPT, get(receipt))
}

type ApiResult = Result<Response, ApiError>;

impl From<StartError> for ApiError {
    fn from(e: StartError) -> Self {
        let code = e.code();
        let status = match code {
            "bad_request" => StatusCode::BAD_REQUEST,
            "internal" => StatusCode::INTERNAL_SERVER_ERROR,
            "worktree_missing" => StatusCode::NOT_FOUND,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// The closed profiles: a worker or reviewer is claude or codex, by a profile of that tool.
fn agent(s: &Shared, role: &str, profile: &str, model: Option<String>) -> Result<Agent, ApiError> {
    let user_home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/"));
    let p = Store::new(&s.home.config)
        .find(profile, &user_home)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "unknown_profile", e.to_string()))?;
    let allowed = match role {
        "worker" => matches!(p.tool, Tool::Claude | Tool::Codex),
        _ => matches!(p.tool, Tool::Claude | Tool::Codex | Tool::Gemini),
    };
    if !allowed {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported_tool",
            format!(
                "the {role} profile `{profile}` runs {}; the factory's closed profiles are claude \
                 and codex for the worker, and claude, codex and gemini for the reviewer. \
                 Remedy: --{role} claude or --{role} codex",
                p.tool.name()
            ),
        ));
    }
    if let Some(m) = &model
        && (m.is_empty()
            || m.len() > 128
            || !m
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:/@[]".contains(&b)))
    {
        return Err(ApiError::bad_request(format!(
            "the {role} model {} is not a model name (letters, digits and -._:/@[], at most 128)",
            crate::text::one_line(m, 60)
        )));
    }
    Ok(Agent {
        tool: p.tool,
        profile: p,
        model,
    })
}

async fn start(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: StartRequest = crate::api::parse_body(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "this route needs a JSON body {{\"workspace\": \"/abs/worktree\", \"task\": \"text\"}}: {e}"
        ))
    })?;
    let timeout = b.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if timeout == 0 || timeout > MAX_TIMEOUT_SECS {
        return Err(ApiError::bad_request(format!(
            "timeout_secs is {timeout}: give 1 to {MAX_TIMEOUT_SECS} seconds per provider invocation"
        )));
    }
    let otel = match &b.otel {
        Some(raw) => Some(crate::factory::otel::check_endpoint(raw).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, "otel_not_loopback", e.to_string())
        })?),
        None => None,
    };
    let workspace = std::path::PathBuf::from(&b.workspace);
    if !workspace.is_absolute() {
        return Err(ApiError::bad_request(
            "workspace must be an absolute path (the CLI resolves it)",
        ));
    }
    let worker = agent(
        &s,
        "worker",
        b.worker.as_deref().unwrap_or("claude"),
        b.worker_model,
    )?;
    let reviewer = match b.reviewer.as_deref().unwrap_or("codex") {
        "tribunal" => engine::Reviewer::Tribunal,
        name => engine::Reviewer::Agent(agent(&s, "reviewer", name, b.reviewer_model)?),
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut tools = vec![worker.tool];
    if let engine::Reviewer::Agent(a) = &reviewer {
        tools.push(a.tool);
    }
    let mut demo = false;
    for t in tools {
        // A tool that is not installed is refused before a run is numbered.
        let program = crate::providers::resolve(t, Some(&path)).map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "tool_not_installed",
                e.to_string(),
            )
        })?;
        demo |= crate::providers::fake::is_demo_shim(&program);
    }
    if let Some(r) = &b.rig
        && !crate::files::valid_id(r, "rig-")
    {
        return Err(ApiError::bad_request(format!(
            "{} is not a rig id: give one `proctor rig list` shows, for example rig-0001",
            crate::text::one_line(r, 60)
        )));
    }
    let worker_program = crate::providers::resolve(worker.tool, Some(&path)).ok();
    let spec = Spec {
        demo,
        workspace,
        task: b.task,
        worker,
        reviewer,
        timeout: Duration::from_secs(timeout),
        out: b.out.map(std::path::PathBuf::from),
        rig: None,
    };
    let s2 = s.clone();
    let by = c.actor();
    let rig_id = b.rig.clone();
    let (spec, info, run, cell) = blocking(move || -> Result<_, ApiError> {
        let mut spec = spec;
        let info = engine::validate(&s2.home, &spec)?;
        // The rig is entered once the request is otherwise good, before a number is
        // taken: its refusals (unknown, closed, a VM, a person's lock) are the rigs'.
        let cell = match rig_id {
            None => None,
            Some(id) => {
                let entry = s2.rigs.enter_as(&by, &id, "factory", Some("/srv"))?;
                let cell = crate::factory::rig::Cell::new(id, entry);
                if let Some(p) = &worker_program
                    && !cell.runs(p)
                {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "tool_not_in_rig",
                        format!(
                            "the worker's {} resolved {} on the host, and {} does not see that \
                             file at that path (a namespace rig sees the host's /usr read-only, or \
                             its image's root): install the tool under /usr on the host, or run \
                             the worker on the host without --rig",
                            spec.worker.tool.name(),
                            crate::text::one_line(&p.to_string_lossy(), 200),
                            cell.rig
                        ),
                    ));
                }
                spec.rig = Some(engine::RigSeat {
                    id: cell.rig.clone(),
                    boundary: cell.boundary.clone(),
                });
                Some(Arc::new(cell))
            }
        };
        let run = engine::reserve(&s2.home, &spec)?;
        Ok((spec, info, run, cell))
    })
    .await?;
    s.factory.update(&run);
    let first = run.clone();
    let s3 = s.clone();
    let by = c.actor();
    std::thread::Builder::new()
        .name(format!("factory-{}", run.id))
        .spawn(move || {
            let mut invoker =
                crate::factory::provider::Provider::from_env(s3.factory.cancel.clone());
            invoker.rig = cell.map(|c| (c, run.id.clone()));
            let panel = TribunalPanel {
                shared: s3.clone(),
                by,
            };
            let ctx = engine::Ctx {
                home: &s3.home,
                ledger: &s3.ledger,
                invoker: &invoker,
                panel: Some(&panel),
                watch: &s3.factory,
            };
            let (done, _) = engine::execute(&ctx, &spec, info, run);
            if let Some(url) = otel
                && let Err(e) = crate::factory::otel::export(&url, &done)
            {
                // Swallowed: observation never changes the outcome.
                crate::log::log(&format!(
                    "factory {}: the OpenTelemetry export failed: {e}",
                    done.id
                ));
            }
        })
        .map_err(ApiError::internal)?;
    Ok((StatusCode::ACCEPTED, axum::Json(first)).into_response())
}

fn check_id(id: &str) -> Result<(), ApiError> {
    if crate::files::valid_id(id, "fac-") {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{} is not a factory run id: give fac-0001",
            crate::text::one_line(id, 60)
        )))
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no factory run {id}. Remedy: `proctor factory list` shows them"),
    )
}

async fn list(State(s): State<Arc<Shared>>) -> Result<axum::Json<Items<FactoryRun>>, ApiError> {
    let s2 = s.clone();
    let mut runs = blocking(move || Ok::<_, ApiError>(engine::list(&s2.home))).await?;
    for r in &mut runs {
        if let Some(live) = s.factory.get(&r.id) {
            *r = live;
        }
    }
    Ok(axum::Json(Items::new(runs)))
}

async fn show(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<axum::Json<FactoryRun>, ApiError> {
    check_id(&id)?;
    if let Some(live) = s.factory.get(&id) {
        return Ok(axum::Json(live));
    }
    let s2 = s.clone();
    let id2 = id.clone();
    blocking(move || engine::load(&s2.home, &id2).ok_or_else(|| not_found(&id2)))
        .await
        .map(axum::Json)
}

async fn receipt(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<axum::Json<ReceiptView>, ApiError> {
    check_id(&id)?;
    let s2 = s.clone();
    blocking(move || {
        let run = engine::load(&s2.home, &id).ok_or_else(|| not_found(&id))?;
        let bound = run.receipt.ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_finished",
                format!("{id} has no receipt yet: it is {}", run.phase.as_str()),
            )
        })?;
        let receipt = engine::receipt(&s2.home, &id).ok_or_else(|| not_found(&id))?;
        Ok::<_, ApiError>(ReceiptView {
            run: id,
            bound,
            receipt,
        })
    })
    .await
    .map(axum::Json)
}

/// The tribunal as the factory's reviewer: the candidate is bound (`candidate bind`'s
/// record, run ref the factory run's id) and a round convened on it by the person or agent
/// who started the run; the round's record is the step's evidence.
struct TribunalPanel {
    shared: Arc<Shared>,
    by: crate::auth::Actor,
}

impl engine::Panel for TribunalPanel {
    fn convene(
        &self,
        run: &str,
        info: &crate::worktrees::WorktreeInfo,
        task: &str,
        builder_vendor: &str,
        review: u32,
        scratch: &std::path::Path,
    ) -> engine::Convened {
        use crate::tribunal::model::RoundState;
        use crate::tribunal::{round, store};
        let s = &self.shared;
        let no = |why: String, candidate: Option<String>| engine::Convened {
            invoked: engine::Invoked {
                answer: Err(why),
                ..engine::Invoked::default()
            },
            candidate,
            round: None,
        };
        let cand =
            match crate::evidence::candidate::bind(&s.home, &s.ledger, run, Some(info), &self.by) {
                Ok(c) => c,
                Err(e) => return no(format!("the candidate cannot be bound: {e}"), None),
            };
        let ctx = round::Ctx {
            home: &s.home,
            ledger: &s.ledger,
            env: super::tribunal_api::env(&s.home, s.tribunal.probes.clone()),
            live: &s.tribunal.live,
        };
        let req = round::Convene {
            candidate: cand.id.clone(),
            builder: builder_vendor.to_string(),
            intent: format!("factory {run}, review {review}"),
            criteria: task.to_string(),
            out: None,
            solo: false,
        };
        let r = match round::convene(&ctx, &req, &self.by) {
            Ok(r) => r,
            Err(e) => {
                return no(
                    format!("the tribunal could not be seated: {e}"),
                    Some(cand.id),
                );
            }
        };
        // The round's record as the tribunal stored it: its SHA-256 is the ledger's
        // `round_sha256`.
        let file = scratch.join("round.json");
        let files = match crate::files::write_atomic(&file, &store::bytes(&r)) {
            Ok(()) => vec![file],
            Err(_) => Vec::new(),
        };
        let answer = match r.state {
            RoundState::UnanimousPass => Ok(format!(
                "APPROVE\ntribunal round {} ({}): unanimous pass",
                r.id, r.mode_note
            )),
            RoundState::Refused => Ok(format!(
                "REQUEST_CHANGES\ntribunal round {} refused the candidate ({}):\n{}",
                r.id,
                r.causes.join("; "),
                findings(&r).join("\n")
            )),
            other => Err(format!(
                "tribunal round {} gave no verdict (state {}): {}",
                r.id,
                other.as_str(),
                r.causes.join("; ")
            )),
        };
        engine::Convened {
            invoked: engine::Invoked {
                answer,
                files,
                ..engine::Invoked::default()
            },
            candidate: Some(cand.id),
            round: Some(r.id),
        }
    }
}

/// What a refused round tells the repair, a line each: every finding of every seat (its
/// juror's and its verifier's), and the cause of a refusing seat that listed none (an answer
/// that was garbage counts as refuse, and says so only in its cause).
fn findings(r: &crate::tribunal::model::Round) -> Vec<String> {
    use crate::tribunal::model::{Judged, SeatState};
    let mut out = Vec::new();
    for seat in &r.seats {
        let before = out.len();
        let verifier = seat.verification.as_ref().and_then(|v| v.judged.as_ref());
        for judged in seat.judged.iter().chain(verifier) {
            if let Judged::Verdict { verdict, .. } = judged {
                for f in &verdict.findings {
                    out.push(format!(
                        "- [{}] {:?}: {} ({})",
                        seat.lens, f.severity, f.claim, f.evidence
                    ));
                }
            }
        }
        if seat.state == SeatState::Refuse && out.len() == before {
            out.push(format!(
                "- [{}] refuse: {}",
                seat.lens,
                seat.cause
                    .as_deref()
                    .unwrap_or("refused, no finding listed")
            ));
        }
    }
    out
}
