//! Routes under `/v1/m/tribunal`: the seats (the registry and what is alive now), the
//! rounds (convened on a candidate's current bytes, listed, shown, and the envelope each
//! judged), and the red-first commits. Convening and recording a red commit need `write`;
//! everything else `read`. Convening is synchronous (the client waits: it has no request
//! timeout) and runs off the async workers; the round's record is written as seats decide,
//! so `GET /rounds?candidate=` shows it in progress meanwhile.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::Items;
use crate::api::tribunal::{
    self as wire, ConveneRequest, EnvelopeView, RedList, RedQuery, RedRequest, Round, RoundList,
    RoundQuery, SeatsQuery, SeatsReport,
};
use crate::tribunal::jurors::{self, Holders};
use crate::tribunal::{config, engine, round, store};

/// The tribunal's part of the server's state: the rounds in progress, and the holds of the
/// server's own probes on local models.
#[derive(Debug, Default)]
pub struct TribunalState {
    pub live: round::Live,
    pub probes: Holders,
}

/// The role each tribunal route needs (`route` is the full matched path).
pub fn tribunal_role(method: &str, route: &str) -> Option<crate::auth::Role> {
    use crate::auth::Role::*;
    use wire::*;
    Some(match (method, route) {
        ("POST", ROUNDS | RED) => Write,
        ("GET", SEATS | ROUNDS | ROUND | ROUND_ENVELOPE | RED) => Read,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    use wire::*;
    Router::new()
        .route(SEATS, get(seats_report))
        .route(ROUNDS, get(list).post(convene))
        .route(ROUND, get(show))
        .route(ROUND_ENVELOPE, get(envelope))
        .route(RED, get(reds).post(record_red))
}

type ApiResult = Result<Response, ApiError>;
type Answer<T> = Result<axum::Json<T>, ApiError>;

/// What a juror gets from the server's surroundings: the server's PATH (the fakes first in
/// the demo), the provider allowlist's inherited names, and the provider profiles a CLI
/// rung may name. One `Holders` for the whole server: a local model shared by two lenses, or
/// two rounds, is unloaded only by its last holder.
pub(super) fn env(home: &crate::home::Home, holders: Holders) -> jurors::Env {
    let user_home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/"));
    let profiles = crate::providers::profile::Store::new(&home.config)
        .list(&user_home)
        .unwrap_or_default();
    let base_env = crate::providers::env::inherited_now();
    jurors::Env {
        path: std::env::var_os("PATH").unwrap_or_default(),
        base_env,
        holders,
        profiles,
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl From<round::RoundError> for ApiError {
    fn from(e: round::RoundError) -> Self {
        ApiError::new(status(e.status()), e.code(), e.to_string())
    }
}

impl From<config::ConfigError> for ApiError {
    fn from(e: config::ConfigError) -> Self {
        let code = e.code();
        let s = if code == "internal" {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::UNPROCESSABLE_ENTITY
        };
        ApiError::new(s, code, e.to_string())
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> Self {
        match e {
            store::StoreError::BadId(_) => ApiError::bad_request(e.to_string()),
            other => ApiError::internal(other),
        }
    }
}

impl From<engine::EngineError> for ApiError {
    fn from(e: engine::EngineError) -> Self {
        let code = e.code();
        let s = match code {
            "internal" => StatusCode::INTERNAL_SERVER_ERROR,
            "bad_request" => StatusCode::BAD_REQUEST,
            c if c.starts_with("unknown_") || c == "not_found" => StatusCode::NOT_FOUND,
            _ => StatusCode::CONFLICT,
        };
        ApiError::new(s, code, e.to_string())
    }
}

fn bad_id(id: &str, what: &str, example: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{} is not a {what} id: give {example}",
        crate::text::one_line(id, 60)
    ))
}

fn check_id(id: Option<&str>, prefix: &str, what: &str, example: &str) -> Result<(), ApiError> {
    match id {
        Some(i) if !crate::files::valid_id(i, prefix) => Err(bad_id(i, what, example)),
        _ => Ok(()),
    }
}

async fn seats_report(
    State(s): State<Arc<Shared>>,
    Query(q): Query<SeatsQuery>,
) -> Answer<SeatsReport> {
    let probe = q.probe.unwrap_or(true);
    let report =
        blocking(move || round::seats(&s.home, &env(&s.home, s.tribunal.probes.clone()), probe))
            .await?;
    Ok(axum::Json(report))
}

async fn convene(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: ConveneRequest = crate::api::parse_body(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "this route needs a JSON body {{\"candidate\": \"cand-0001\", \"builder\": \"MODEL-OR-FAMILY\", \
             \"intent\": \"one line\", \"criteria\": \"text\"}}: {e}"
        ))
    })?;
    check_id(Some(&b.candidate), "cand-", "candidate", "cand-0001")?;
    if b.builder.trim().is_empty() {
        return Err(ApiError::bad_request(
            "the builder is required: name the model or family that built the change \
             (--builder claude-opus-4, or --builder anthropic); its family is excluded",
        ));
    }
    if b.intent.trim().is_empty() || b.intent.contains(['\n', '\r']) {
        return Err(ApiError::bad_request(
            "the intent is one non-empty line: what the change is for",
        ));
    }
    if b.criteria.trim().is_empty() {
        return Err(ApiError::bad_request(
            "the success criteria are empty: give the file that states them (--criteria FILE)",
        ));
    }
    let req = round::Convene {
        candidate: b.candidate,
        builder: b.builder.trim().to_string(),
        intent: b.intent,
        criteria: b.criteria,
        out: b.out.map(std::path::PathBuf::from),
        solo: b.solo.unwrap_or(false),
    };
    let by = c.actor();
    let r = blocking(move || {
        let ctx = round::Ctx {
            home: &s.home,
            ledger: &s.ledger,
            env: env(&s.home, s.tribunal.probes.clone()),
            live: &s.tribunal.live,
        };
        round::convene(&ctx, &req, &by)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(r)).into_response())
}

async fn list(State(s): State<Arc<Shared>>, Query(q): Query<RoundQuery>) -> Answer<RoundList> {
    check_id(q.candidate.as_deref(), "cand-", "candidate", "cand-0001")?;
    // A candidate's run is a session's run or a factory run (`--reviewer tribunal`).
    if let Some(r) = q.run.as_deref()
        && !crate::files::valid_id(r, "run-")
        && !crate::files::valid_id(r, "fac-")
    {
        return Err(bad_id(
            r,
            "run",
            "run-0001 (a session's) or fac-0001 (a factory run's)",
        ));
    }
    let home = s.home.clone();
    let items =
        blocking(move || store::list(&home, q.candidate.as_deref(), q.run.as_deref())).await?;
    Ok(axum::Json(Items::new(items)))
}

async fn load(s: &Arc<Shared>, id: String) -> Result<Round, ApiError> {
    check_id(Some(&id), "rnd-", "round", "rnd-0001")?;
    let home = s.home.clone();
    let id2 = id.clone();
    match blocking(move || store::load(&home, &id2)).await? {
        Some(r) => Ok(r),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no round {id}; `proctor tribunal rounds <candidate>` lists a candidate's rounds"
            ),
        )),
    }
}

async fn show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Answer<Round> {
    Ok(axum::Json(load(&s, id).await?))
}

async fn envelope(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Answer<EnvelopeView> {
    let r = load(&s, id).await?;
    let home = s.home.clone();
    let view = blocking(move || {
        store::envelope_text(&home, &r).map(|text| EnvelopeView {
            round: r.id.clone(),
            envelope: r.envelope.clone(),
            text,
        })
    })
    .await?;
    Ok(axum::Json(view))
}

async fn record_red(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: RedRequest = crate::api::parse_body(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "this route needs a JSON body {{\"workspace\": \"ws-0001\", \"commit\": \"<full commit id>\"}}: {e}"
        ))
    })?;
    check_id(Some(&b.workspace), "ws-", "workspace", "ws-0001")?;
    let hex = b
        .commit
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    if !hex || !(b.commit.len() == 40 || b.commit.len() == 64) {
        return Err(ApiError::bad_request(format!(
            "{} is not a full commit id: give the 40 (or 64) hex digits `git rev-parse HEAD` prints",
            crate::text::one_line(&b.commit, 70)
        )));
    }
    let by = c.actor();
    let rec =
        blocking(move || engine::record_red(&s.home, &s.ledger, &b.workspace, &b.commit, &by))
            .await?;
    Ok((StatusCode::CREATED, axum::Json(rec)).into_response())
}

async fn reds(State(s): State<Arc<Shared>>, Query(q): Query<RedQuery>) -> Answer<RedList> {
    check_id(q.workspace.as_deref(), "ws-", "workspace", "ws-0001")?;
    let home = s.home.clone();
    let all = blocking(move || engine::reds(&home)).await?;
    Ok(axum::Json(Items::new(
        all.into_iter()
            .filter(|r| q.workspace.as_deref().is_none_or(|w| r.workspace == w))
            .collect(),
    )))
}
