//! Routes under `/v1/m/evidence`: candidates bound to a worktree run's exact bytes, the
//! checks that judge them, the gate that says what still blocks, and the receipts.
//! Binding and running checks need `write`; everything else `read`. Running checks is
//! synchronous and may take as long as the policy's deadlines (the client waits: it has no
//! request timeout).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::Items;
use crate::api::evidence::{
    self as wire, BindRequest, CandidateList, CandidateQuery, CandidateView, CheckProgress, Gate,
    ReceiptList, ReceiptView, Verification,
};
use crate::candidate::{self, CandidateError};
use crate::evidence::checks::{self, CheckError};
use crate::evidence::store::{self, StoreError};
use crate::evidence::{self as ev, Actor};
use crate::gate::{self, GateError};
use crate::receipts::{self, ReceiptError};

/// The role each evidence route needs (`route` is the full matched path).
pub fn evidence_role(method: &str, route: &str) -> Option<crate::auth::Role> {
    use crate::auth::Role::*;
    use wire::*;
    Some(match (method, route) {
        ("POST", CANDIDATES | CHECKS) => Write,
        ("GET", CANDIDATES | CANDIDATE | GATE | CHECKS | EVIDENCE | RECEIPTS | RECEIPT) => Read,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    use wire::*;
    Router::new()
        .route(CANDIDATES, get(list).post(bind))
        .route(CANDIDATE, get(show))
        .route(CHECKS, get(checks_progress).post(run_checks))
        .route(GATE, get(gate_of))
        .route(EVIDENCE, get(evidence_entry))
        .route(RECEIPTS, get(receipt_list))
        .route(RECEIPT, get(receipt_show))
}

type ApiResult = Result<Response, ApiError>;
type Answer<T> = Result<axum::Json<T>, ApiError>;

fn status_for(code: &str, refusal: bool) -> StatusCode {
    match code {
        "not_found" => StatusCode::NOT_FOUND,
        "bad_request" => StatusCode::BAD_REQUEST,
        "internal" => StatusCode::INTERNAL_SERVER_ERROR,
        _ if refusal => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<CandidateError> for ApiError {
    fn from(e: CandidateError) -> Self {
        let code = e.code();
        ApiError::new(status_for(code, e.is_refusal()), code, e.to_string())
    }
}

impl From<CheckError> for ApiError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Candidate(c) => c.into(),
            other => {
                let code = other.code();
                ApiError::new(
                    status_for(code, code != "internal"),
                    code,
                    other.to_string(),
                )
            }
        }
    }
}

impl From<GateError> for ApiError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Candidate(c) => c.into(),
            other => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                other.to_string(),
            ),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match e {
            StoreError::BadId(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let code = if status == StatusCode::BAD_REQUEST {
            "bad_request"
        } else {
            "internal"
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<ReceiptError> for ApiError {
    fn from(e: ReceiptError) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }
}

fn actor(c: &Caller) -> Actor {
    c.actor()
}

fn bad_id(id: &str, prefix: &str, example: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "bad_request",
        format!(
            "{} is not a {prefix} id: give {example}",
            crate::text::one_line(id, 60)
        ),
    )
}

async fn bind(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: BindRequest = crate::api::parse_body(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("this route needs a JSON body {{\"run\": \"run-0001\"}}: {e}"),
        )
    })?;
    if !ev::valid_id(&b.run, "run-") {
        return Err(bad_id(&b.run, "run", "run-0001"));
    }
    let info = s.sessions.worktree_info(&b.run)?;
    let (home, ledger, by) = (s.home.clone(), s.ledger.clone(), actor(&c));
    let cand =
        blocking(move || candidate::bind(&home, &ledger, &b.run, info.as_ref(), &by)).await?;
    Ok((StatusCode::CREATED, axum::Json(CandidateView::from(&cand))).into_response())
}

async fn list(
    State(s): State<Arc<Shared>>,
    Query(q): Query<CandidateQuery>,
) -> Answer<CandidateList> {
    let home = s.home.clone();
    let all = blocking(move || candidate::list(&home)).await?;
    Ok(axum::Json(Items::new(
        all.iter()
            .filter(|c| q.run.as_deref().is_none_or(|r| c.run_ref == r))
            .map(CandidateView::from)
            .collect(),
    )))
}

async fn show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Answer<CandidateView> {
    let home = s.home.clone();
    let cand = blocking(move || candidate::require(&home, &id)).await?;
    Ok(axum::Json(CandidateView::from(&cand)))
}

async fn run_checks(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let by = actor(&c);
    let entry = blocking(move || checks::run(&s.home, &s.ledger, &s.checks, &id, &by)).await?;
    Ok((StatusCode::CREATED, axum::Json(entry)).into_response())
}

/// Whether an attempt runs on the candidate now, and where it is (cheap: no hashing), for
/// a progress line while `POST …/checks` is outstanding.
async fn checks_progress(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Answer<CheckProgress> {
    if !ev::valid_id(&id, "cand-") {
        return Err(bad_id(&id, "candidate", "cand-0001"));
    }
    Ok(axum::Json(match s.checks.running(&id) {
        None => CheckProgress::idle(&id),
        Some(r) => CheckProgress::of(&id, &r),
    }))
}

async fn gate_of(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Answer<Gate> {
    let g = blocking(move || gate::evaluate(&s.home, &id, &s.checks)).await?;
    Ok(axum::Json(g))
}

async fn evidence_entry(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Answer<wire::EvidenceEntry> {
    let home = s.home.clone();
    let id2 = id.clone();
    let e = blocking(move || store::load(&home, &id2)).await?;
    match e {
        Some(e) => Ok(axum::Json(e)),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no evidence {id}; `proctor gate <candidate>` lists a candidate's attempts"),
        )),
    }
}

async fn receipt_list(State(s): State<Arc<Shared>>) -> Answer<ReceiptList> {
    let home = s.home.clone();
    let items = blocking(move || receipts::list(&home)).await?;
    Ok(axum::Json(Items::new(items)))
}

/// One receipt and what verifying it against the home's files says now.
async fn receipt_show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Answer<ReceiptView> {
    if !ev::valid_id(&id, "rcpt-") {
        return Err(bad_id(&id, "receipt", "rcpt-0001"));
    }
    let home = s.home.clone();
    let path = receipts::receipts_dir(&home).join(format!("{id}.json"));
    if !path.is_file() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no receipt {id}; `proctor receipt list` shows them"),
        ));
    }
    let v = blocking(move || -> Result<ReceiptView, ReceiptError> {
        let bytes =
            std::fs::read(&path).map_err(|e| crate::files::FilesError::io("read", &path, e))?;
        let receipt = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        let verify = match receipts::verify_file(&home, &path) {
            Ok(r) => Verification::Report(r),
            Err(e) => Verification::Failed {
                error: e.to_string(),
            },
        };
        Ok(ReceiptView { receipt, verify })
    })
    .await?;
    Ok(axum::Json(v))
}
