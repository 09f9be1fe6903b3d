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
use serde_json::json;

use super::{PROTOCOL, Shared, VERSION};
use crate::api::server::{
    self as wire, CreateToken, CreatedToken, OwnerRotated, PeerView, ServerStatus, Stopping, Token,
    TokenList, VersionInfo, WhoAmI,
};
use crate::api::{ErrorBody, ErrorDetail};
use crate::auth::{Principal, Role, TokenRecord};

/// Who is calling, as the authorizer established it: the token's role, and a principal
/// that is `agent` whenever the kernel says the peer descends from this server, whatever
/// the token says.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: String,
    pub name: String,
    pub role: Role,
    pub principal: Principal,
    /// The principal the token names (`principal` may be stricter).
    pub token_principal: Principal,
    pub peer: crate::peer::Peer,
}

impl Caller {
    /// The caller as records name it (the one actor type, [`crate::auth::Actor`]).
    pub fn actor(&self) -> crate::auth::Actor {
        crate::auth::Actor {
            token_id: self.token_id.clone(),
            name: self.name.clone(),
            principal: self.principal,
        }
    }
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
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", m)
    }
}

/// Runs blocking work (fsync, git, hashing, child processes) off the async workers; the
/// module's own error becomes an API error through its `From`.
pub async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
        .map_err(Into::into)
}

/// Refuses an agent principal (403 `agent_refused`): `what` it cannot do, and who does it.
pub fn person_only(caller: &Caller, what: &str, who_does: &str) -> Result<(), ApiError> {
    if caller.principal == Principal::Agent {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent_refused",
            format!("an agent identity cannot {what}; {who_does}"),
        ));
    }
    Ok(())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
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
    if let Some(role) = super::tribunal_api::tribunal_role(m, route) {
        return Some(role);
    }
    if let Some(role) = super::rigs_api::rigs_role(m, route) {
        return Some(role);
    }
    if let Some(role) = super::factory_api::factory_role(m, route) {
        return Some(role);
    }
    Some(match (m, route) {
        ("GET", wire::SERVER) => Read,
        ("GET", wire::WHOAMI) => Read,
        ("GET", wire::OPENAPI) => Read,
        ("POST", wire::SERVER_STOP) => Admin,
        ("GET", wire::TOKENS) => Admin,
        ("POST", wire::TOKENS) => Admin,
        ("DELETE", wire::TOKEN) => Admin,
        ("POST", OWNER_ROTATE) => Admin,
        _ if route.starts_with(super::authority_api::BASE) => {
            return super::authority_api::authority_role(m, route);
        }
        _ if route.starts_with(super::publish_api::BASE) => {
            return super::publish_api::publish_role(m, route);
        }
        _ => return runs_role(m, route),
    })
}

/// The owner token's rotation: a new owner secret in `config/owner.token`, the old one
/// revoked, in one step (`proctor token rotate-owner`).
pub const OWNER_ROTATE: &str = wire::OWNER_ROTATION;

/// Whether a route exercises authority, and so needs a person at a terminal as the kernel
/// sees it ([`crate::peer::authority_check`]) on top of its role: every change under
/// `/v1/m/authority/` (keys), every approval step under `/v1/m/publish` (opening an
/// approval, check, refusal, authorisation, spend, receipt), and the owner token's rotation.
pub fn needs_terminal(method: &Method, route: &str) -> bool {
    let changes = method != Method::GET && method != Method::HEAD;
    let authority = route
        .strip_prefix(super::authority_api::BASE)
        .is_some_and(|r| r.starts_with('/'));
    let approval = route
        .strip_prefix(super::publish_api::BASE)
        .is_some_and(|r| r.starts_with("/approvals/") || r == "/intents/{intent}/approvals");
    changes && (authority || approval || route == OWNER_ROTATE)
}

/// The roles of seed 002's permission table for the run routes. pin, snooze and done are
/// the caller's own marks, so a viewer may set them.
fn runs_role(method: &str, route: &str) -> Option<Role> {
    use crate::api::runs::*;
    use Role::*;
    Some(match (method, route) {
        ("GET", RUNS | RUN | EVENTS | ATTACH | SCREEN | CHANGES) => Read,
        ("GET", DIFF | DIFF_FILE) => Read,
        ("GET", CAST) => Read,
        ("GET", PERMISSIONS | MESSAGES | ACTIVITY | ACTIVITY_AGENT | HANDOFF) => Read,
        // And a person principal: the handler refuses an agent (`person_only`).
        ("POST", PERMISSION) => Write,
        ("POST" | "DELETE", PIN | SNOOZE | DONE) => Read,
        ("POST", RUNS | INPUT | INTERRUPT | STOP | RESUME | RESIZE | MOVE | HANDOFF) => Write,
        ("PUT", NAME) => Write,
        ("POST" | "DELETE", ARCHIVE) => Write,
        ("POST", CLEANUP) => Admin,
        ("DELETE", RUN) => Admin,
        _ => return None,
    })
}

pub fn router(state: Arc<Shared>) -> Router {
    let authed = Router::new()
        .route(wire::SERVER, get(server_status))
        .route(wire::WHOAMI, get(whoami))
        .route(wire::OPENAPI, get(openapi))
        .route(wire::SERVER_STOP, post(server_stop))
        .route(wire::TOKENS, get(list_tokens).post(create_token))
        .route(wire::TOKEN, delete(revoke_token))
        .route(OWNER_ROTATE, post(rotate_owner))
        .nest(super::runs_api::BASE, super::runs_api::routes())
        .nest(super::authority_api::BASE, super::authority_api::routes())
        .nest(super::publish_api::BASE, super::publish_api::routes())
        .merge(super::workspaces_api::routes())
        .merge(super::evidence_api::routes())
        .merge(super::tribunal_api::routes())
        .merge(super::rigs_api::routes())
        .merge(super::factory_api::routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route(wire::VERSION, get(version))
        // Authorised by the kernel's attribution of the caller to a run, not by a token.
        .route(crate::api::runs::HOOK, post(super::hook_api::hook))
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
    // What the kernel said at accept; a request that did not come through the accept loop
    // has no peer and is treated as the least trusted one.
    let peer = req
        .extensions()
        .get::<crate::peer::Peer>()
        .cloned()
        .unwrap_or_else(crate::peer::Peer::unknown);
    let principal = if peer.in_server_tree() {
        Principal::Agent
    } else {
        record.principal
    };
    if needs_terminal(req.method(), &route) {
        let (me, p) = (state.me.clone(), peer.clone());
        let failed = tokio::task::spawn_blocking(move || crate::peer::authority_check(&p, &me))
            .await
            .map_err(ApiError::internal)?;
        if !failed.is_empty() {
            return Err(authority_refused(
                &state,
                req.method(),
                &route,
                &peer,
                &record,
                &failed,
            ));
        }
    }
    req.extensions_mut().insert(Caller {
        token_id: record.id,
        name: record.name,
        role: record.role,
        principal,
        token_principal: record.principal,
        peer,
    });
    Ok(next.run(req).await)
}

/// The refusal of an authority route to a peer that failed the kernel's checks: recorded in
/// the ledger (`authority.peer_refused`), and a 403 `authority_refused` naming each check
/// and the remedy.
fn authority_refused(
    state: &Shared,
    method: &Method,
    route: &str,
    peer: &crate::peer::Peer,
    record: &TokenRecord,
    failed: &[crate::peer::Failed],
) -> ApiError {
    let codes: Vec<&str> = failed.iter().map(|f| f.code()).collect();
    if let Err(e) = state.record(
        "authority.peer_refused",
        json!({
            "method": method.as_str(), "route": route, "pid": peer.pid,
            "ancestry": peer.ancestry, "failed": codes, "token_id": record.id,
        }),
    ) {
        super::log(&format!("cannot record authority.peer_refused: {e}"));
    }
    let what: Vec<&str> = failed.iter().map(|f| f.describe()).collect();
    ApiError::new(
        StatusCode::FORBIDDEN,
        "authority_refused",
        format!(
            "{method} {route} needs a person at a terminal, and the kernel says otherwise: {}. \
             Remedy: run the proctor command yourself at your terminal (`proctor publish \
             approve`, `proctor key generate|register`, `proctor token rotate-owner`, or the \
             cockpit's approval dialog), not from an agent's run or a script",
            what.join("; ")
        ),
    )
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn version(State(state): State<Arc<Shared>>) -> axum::Json<VersionInfo> {
    // `recovering`: runs a previous server left that this one is still sweeping.
    axum::Json(VersionInfo {
        name: "proctor".into(),
        version: VERSION.into(),
        protocol: PROTOCOL,
        recovering: state.sessions.recovering(),
    })
}

async fn server_status(State(state): State<Arc<Shared>>) -> axum::Json<ServerStatus> {
    axum::Json(ServerStatus {
        name: "proctor".into(),
        version: VERSION.into(),
        protocol: PROTOCOL,
        pid: state.pid,
        started_at: state.started_at.clone(),
        socket: state.home.socket_path(),
        home: state
            .home
            .root
            .clone()
            .unwrap_or_else(|| state.home.data.clone()),
        ledger: state.home.ledger_path(),
        runs_held_by: state.sessions.containment_view(),
    })
}

/// `GET /v1/openapi.json`: the document generated from the contract's types.
async fn openapi() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(crate::api::openapi())
}

/// Who the caller is: a client (the cockpit) learns its role here, to show the actions its
/// token cannot perform as unavailable instead of attempting them.
async fn whoami(Extension(caller): Extension<Caller>) -> axum::Json<WhoAmI> {
    axum::Json(WhoAmI {
        token_id: caller.token_id,
        name: caller.name,
        role: caller.role,
        principal: caller.principal,
        token_principal: caller.token_principal,
        peer: PeerView {
            pid: caller.peer.pid,
            ancestry: caller.peer.ancestry,
        },
    })
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
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(Stopping { stopping: true }),
    )
        .into_response())
}

/// An agent principal sees only the agent tokens (`"only": "agent"` says the list was
/// filtered); a person sees them all.
async fn list_tokens(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let tokens = state.tokens.lock().map_err(ApiError::internal)?;
    let agent = caller.principal == Principal::Agent;
    let items: Vec<Token> = tokens
        .records()
        .iter()
        .filter(|r| !agent || (r.principal == Principal::Agent && r.role != Role::Admin))
        .map(Token::from)
        .collect();
    let only = agent.then(|| "agent".to_string());
    Ok(axum::Json(TokenList { items, only }).into_response())
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
            "an agent identity cannot create tokens (a process in the server's tree is an \
             agent whatever its token); a person creates them with `proctor token create` at \
             their terminal",
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
    let out = CreatedToken {
        token: Token::from(&record),
        secret,
    };
    Ok((StatusCode::CREATED, axum::Json(out)).into_response())
}

async fn revoke_token(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let record = {
        let mut tokens = state.tokens.lock().map_err(ApiError::internal)?;
        if let Some(target) = tokens.find_live(&id) {
            if target.name == "owner" {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "owner_token",
                    "the owner token cannot be revoked: every CLI verb on this machine \
                     uses it (config/owner.token). Remedy: replace it with `proctor token \
                     rotate-owner` at your terminal, which writes the new secret to the home \
                     and revokes the old one in one step",
                ));
            }
            if caller.principal == Principal::Agent
                && (target.role == Role::Admin || target.principal == Principal::Person)
            {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "agent_refused",
                    "an agent identity can revoke only agent tokens below admin; a person \
                     revokes this one with `proctor token revoke` at their terminal",
                ));
            }
        }
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
    Ok(axum::Json(Token::from(&record)).into_response())
}

/// `POST /v1/tokens/owner/rotation` (admin, a person at a terminal): a new owner secret in
/// `config/owner.token`, every earlier owner token revoked, `auth.owner.rotated` recorded.
/// The answer never carries the secret: it is in the file.
async fn rotate_owner(
    State(state): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    if caller.principal == Principal::Agent {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent_refused",
            "an agent identity cannot rotate the owner token",
        ));
    }
    let (revoked, record) = {
        let mut tokens = state.tokens.lock().map_err(ApiError::internal)?;
        tokens
            .rotate_owner(&state.home.owner_token_path())
            .map_err(ApiError::internal)?
    };
    let revoked: Vec<String> = revoked.iter().map(|r| r.id.clone()).collect();
    state
        .record(
            "auth.owner.rotated",
            json!({"token_id": record.id, "revoked": revoked, "by": caller.token_id,
                   "pid": caller.peer.pid}),
        )
        .map_err(ApiError::internal)?;
    Ok(axum::Json(OwnerRotated {
        owner: Token::from(&record),
        revoked,
        file: state.home.owner_token_path(),
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authority_routes_are_gated_by_prefix() {
        let post = Method::POST;
        for route in [
            "/v1/m/authority/keys",
            "/v1/m/authority/keys/{key}/revocation",
            "/v1/m/publish/intents/{intent}/approvals",
            "/v1/m/publish/approvals/{approval}/check",
            "/v1/m/publish/approvals/{approval}/spend",
            OWNER_ROTATE,
        ] {
            assert!(needs_terminal(&post, route), "{route}");
        }
        assert!(needs_terminal(
            &Method::DELETE,
            "/v1/m/authority/keys/{key}"
        ));
        for (m, route) in [
            (Method::GET, "/v1/m/authority/keys"),
            (Method::GET, "/v1/m/publish/intents/{intent}"),
            (Method::POST, "/v1/m/publish/intents"),
            (Method::POST, "/v1/tokens"),
            (Method::DELETE, "/v1/tokens/{id}"),
            (Method::POST, "/v1/m/authorityx/keys"),
        ] {
            assert!(!needs_terminal(&m, route), "{m} {route}");
        }
    }
}
