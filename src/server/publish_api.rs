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
//!
//! The state machine itself is [`crate::publish::machine`]: this file only maps HTTP (the
//! caller's principal, the body, the status codes) to its methods.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::Items;
pub use crate::api::publish::BASE;
use crate::api::publish::{EnvelopeRequest, ProposeRequest, ReceiptRequest, RefusalRequest, route};
use crate::auth::Role;
/// The publication machine's state, held by [`Shared`].
pub use crate::publish::machine::PublishState;
use crate::publish::machine::{Context, Kind, PublishError};

/// The role each publish route needs (`route` is the full matched route).
pub fn publish_role(method: &str, full: &str) -> Option<Role> {
    use route::*;
    Some(match (method, full.strip_prefix(BASE)?) {
        ("GET", INTENTS | INTENT) => Role::Read,
        ("POST", INTENTS | APPROVALS) => Role::Write,
        ("POST", CHECK | REFUSAL | AUTHORISATION | SPEND | RECEIPT) => Role::Write,
        _ => return None,
    })
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(route::INTENTS, get(list).post(propose))
        .route(route::INTENT, get(show))
        .route(route::APPROVALS, post(open))
        .route(route::CHECK, post(check))
        .route(route::REFUSAL, post(refusal))
        .route(route::AUTHORISATION, post(authorise))
        .route(route::SPEND, post(spend))
        .route(route::RECEIPT, post(sign_receipt))
}

type ApiResult = Result<Response, ApiError>;

impl From<PublishError> for ApiError {
    fn from(e: PublishError) -> Self {
        let status = match e.kind {
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            Kind::BadGateway => StatusCode::BAD_GATEWAY,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::Ok => StatusCode::OK,
        };
        ApiError::new(status, e.code, e.message)
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
    crate::api::parse_body(body).map_err(|e| ApiError::bad_request(format!("bad JSON body: {e}")))
}

fn cx(s: &Shared) -> Context<'_> {
    Context {
        home: &s.home,
        ledger: &s.ledger,
        checks: &s.checks,
    }
}

async fn list(State(s): State<Arc<Shared>>) -> ApiResult {
    let items = blocking(move || s.publish.list(cx(&s))).await?;
    Ok(axum::Json(Items::new(items)).into_response())
}

async fn show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult {
    let v = blocking(move || s.publish.show(cx(&s), &id)).await?;
    Ok(axum::Json(v).into_response())
}

async fn propose(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    let req: ProposeRequest = json_body(&body)?;
    let made = blocking(move || s.publish.propose(cx(&s), &caller.actor(), req)).await?;
    Ok((StatusCode::CREATED, axum::Json(made)).into_response())
}

async fn open(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let v = blocking(move || s.publish.open(cx(&s), &caller.actor(), &id)).await?;
    Ok((StatusCode::CREATED, axum::Json(v)).into_response())
}

async fn check(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let v = blocking(move || s.publish.check(cx(&s), &caller.actor(), &id)).await?;
    Ok(axum::Json(v).into_response())
}

async fn refusal(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "approve a publication")?;
    let req: RefusalRequest = json_body(&body)?;
    let v = blocking(move || s.publish.refusal(cx(&s), &caller.actor(), &id, req)).await?;
    Ok(axum::Json(v).into_response())
}

async fn authorise(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "authorise a publication")?;
    let req: EnvelopeRequest = json_body(&body)?;
    let v = blocking(move || {
        s.publish
            .authorise(cx(&s), &caller.actor(), &id, &req.envelope)
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
    let req: EnvelopeRequest = json_body(&body)?;
    let v = blocking(move || s.publish.spend(cx(&s), &caller.actor(), &id, &req.envelope)).await?;
    Ok(axum::Json(v).into_response())
}

async fn sign_receipt(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    person_only(&caller, "sign a publication receipt")?;
    let req: ReceiptRequest = json_body(&body)?;
    let v = blocking(move || s.publish.sign_receipt(cx(&s), &caller.actor(), &id, &req)).await?;
    Ok(axum::Json(v).into_response())
}

#[cfg(test)]
mod tests;
