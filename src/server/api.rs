//! The HTTP API. Every route but `GET /v1/version` needs a bearer token; the authorizer
//! below is the one enforcement point: it maps (method, route) to the role it needs and
//! answers 401 for no or a bad token, 403 for a missing role, and 403 for any route it does
//! not know (deny by default).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, MatchedPath, Path, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{PROTOCOL, Shared, VERSION};
use crate::auth::{Principal, Role, TokenRecord};

/// Who is calling, as the authorizer established it.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: String,
    pub name: String,
    pub role: Role,
    pub principal: Principal,
}

/// An API error: a status and a JSON body `{"error": {"code", "message"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}

type ApiResult = Result<Response, ApiError>;

/// The role each route needs. A route missing from this table is refused.
pub fn required_role(method: &Method, route: &str) -> Option<Role> {
    use Role::*;
    let m = method.as_str();
    if let Some(role) = super::workspaces_api::workspaces_role(m, route) {
        return Some(role);
    }
    if let Some(role) = super::evidence_api::evidence_role(m, route) {
        return Some(role);
    }
    Some(match (m, route) {
        ("GET", "/v1/server") => Read,
        ("GET", "/v1/whoami") => Read,
        ("POST", "/v1/server/stop") => Admin,
        ("GET", "/v1/tokens") => Admin,
        ("POST", "/v1/tokens") => Admin,
        ("DELETE", "/v1/tokens/{id}") => Admin,
        _ if route.starts_with(super::authority_api::BASE) => {
            return super::authority_api::authority_role(m, route);
        }
        _ if route.starts_with(super::publish_api::BASE) => {
            return super::publish_api::publish_role(m, route);
        }
        _ => return runs_role(m, route.strip_prefix(super::runs_api::BASE)?),
    })
}

/// The roles of seed 002's permission table for the run routes. pin, snooze and done are
/// the caller's own marks, so a viewer may set them.
fn runs_role(method: &str, route: &str) -> Option<Role> {
    use Role::*;
    Some(match (method, route) {
        (
            "GET",
            "/runs" | "/runs/{run}" | "/runs/{run}/events" | "/runs/{run}/attach"
            | "/runs/{run}/screen",
        ) => Read,
        ("GET", "/runs/{run}/diff" | "/runs/{run}/diff/file") => Read,
        ("POST" | "DELETE", "/runs/{run}/pin" | "/runs/{run}/snooze" | "/runs/{run}/done") => Read,
        (
            "POST",
            "/runs"
            | "/runs/{run}/input"
            | "/runs/{run}/interrupt"
            | "/runs/{run}/stop"
            | "/runs/{run}/resume"
            | "/runs/{run}/resize",
        ) => Write,
        ("PUT", "/runs/{run}/name") => Write,
        ("POST" | "DELETE", "/runs/{run}/archive") => Write,
        ("POST", "/runs/{run}/cleanup") => Admin,
        ("DELETE", "/runs/{run}") => Admin,
        _ => return None,
    })
}

pub fn router(state: Arc<Shared>) -> Router {
    let authed = Router::new()
        .route("/v1/server", get(server_status))
        .route("/v1/whoami", get(whoami))
        .route("/v1/server/stop", post(server_stop))
        .route("/v1/tokens", get(list_tokens).post(create_token))
        .route("/v1/tokens/{id}", delete(revoke_token))
        .nest(super::runs_api::BASE, super::runs_api::routes())
        .nest(super::authority_api::BASE, super::authority_api::routes())
        .nest(super::publish_api::BASE, super::publish_api::routes())
        .merge(super::workspaces_api::routes())
        .merge(super::evidence_api::routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/v1/version", get(version))
        .merge(authed)
        .fallback(not_found)
        .with_state(state)
}

async fn authorize(
    State(state): State<Arc<Shared>>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let secret = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "this route needs `Authorization: Bearer <token>`",
            )
        })?;
    let record: TokenRecord = state
        .tokens
        .lock()
        .map_err(ApiError::internal)?
        .authenticate(secret)
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "the token is unknown or revoked",
            )
        })?;
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let need = required_role(req.method(), &route).ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("no role grants {} {route}", req.method()),
        )
    })?;
    if record.role < need {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} {route} needs the {} role; this token has {}",
                req.method(),
                need.as_str(),
                record.role.as_str()
            ),
        ));
    }
    req.extensions_mut().insert(Caller {
        token_id: record.id,
        name: record.name,
        role: record.role,
        principal: record.principal,
    });
    Ok(next.run(req).await)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn version(State(state): State<Arc<Shared>>) -> Response {
    // `recovering`: runs a previous server left that this one is still sweeping.
    axum::Json(json!({"name": "proctor", "version": VERSION, "protocol": PROTOCOL, "recovering": state.sessions.recovering()})).into_response()
}

async fn server_status(State(state): State<Arc<Shared>>) -> ApiResult {
    Ok(axum::Json(json!({
        "name": "proctor",
        "version": VERSION,
        "protocol": PROTOCOL,
        "pid": state.pid,
        "started_at": state.started_at,
        "socket": state.home.socket_path(),
        "home": state.home.root.clone().unwrap_or_else(|| state.home.data.clone()),
        "ledger": state.home.ledger_path(),
        "runs_held_by": state.sessions.containment_view(),
    }))
    .into_response())
}

/// Who the caller is: a client (the cockpit) learns its role here, to show the actions its
/// token cannot perform as unavailable instead of attempting them.
async fn whoami(Extension(caller): Extension<Caller>) -> ApiResult {
    Ok(axum::Json(json!({
        "token_id": caller.token_id,
        "name": caller.name,
        "role": caller.role,
        "principal": caller.principal,
    }))
    .into_response())
}

async fn server_stop(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    state
        .record(
            "server.stop_requested",
            json!({"by": caller.token_id, "pid": state.pid}),
        )
        .map_err(ApiError::internal)?;
    state.request_shutdown();
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"stopping": true}))).into_response())
}

fn public(r: &TokenRecord) -> Value {
    json!({
        "id": r.id, "name": r.name, "role": r.role, "principal": r.principal,
        "created_at": r.created_at, "revoked_at": r.revoked_at,
    })
}

async fn list_tokens(State(state): State<Arc<Shared>>) -> ApiResult {
    let tokens = state.tokens.lock().map_err(ApiError::internal)?;
    let items: Vec<Value> = tokens.records().iter().map(public).collect();
    Ok(axum::Json(json!({"items": items})).into_response())
}

#[derive(Deserialize)]
struct CreateToken {
    name: String,
    role: String,
    #[serde(default)]
    principal: Option<String>,
}

async fn create_token(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: Result<axum::Json<CreateToken>, axum::extract::rejection::JsonRejection>,
) -> ApiResult {
    if caller.principal == Principal::Agent {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent_refused",
            "an agent identity cannot create tokens",
        ));
    }
    let axum::Json(body) =
        body.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    let bad = |e: crate::auth::AuthError| {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.to_string())
    };
    let role: Role = body.role.parse().map_err(bad)?;
    let principal: Principal = body
        .principal
        .as_deref()
        .unwrap_or("person")
        .parse()
        .map_err(bad)?;
    let (record, secret) = {
        let mut tokens = state.tokens.lock().map_err(ApiError::internal)?;
        tokens
            .create(&body.name, role, principal)
            .map_err(|e| match e {
                crate::auth::AuthError::Duplicate(_) => {
                    ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
                }
                crate::auth::AuthError::BadName(_) => bad(e),
                other => ApiError::internal(other),
            })?
    };
    state
        .record(
            "auth.token.created",
            json!({"token_id": record.id, "role": record.role, "principal": record.principal, "by": caller.token_id}),
        )
        .map_err(ApiError::internal)?;
    let mut out = public(&record);
    out["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, axum::Json(out)).into_response())
}

async fn revoke_token(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let record = {
        let mut tokens = state.tokens.lock().map_err(ApiError::internal)?;
        tokens.revoke(&id).map_err(|e| match e {
            crate::auth::AuthError::Unknown(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            other => ApiError::internal(other),
        })?
    };
    state
        .record(
            "auth.token.revoked",
            json!({"token_id": record.id, "by": caller.token_id}),
        )
        .map_err(ApiError::internal)?;
    Ok(axum::Json(public(&record)).into_response())
}
