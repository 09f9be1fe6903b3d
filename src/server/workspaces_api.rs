//! Routes under `/v1/m/sessions/workspaces`: registered folders, their setup command and
//! check policy (approved by SHA-256), and the agent configuration they carry (seed 002,
//! "Approuver la commande de préparation d'un dossier" and "Configuration d'agent que porte
//! un dépôt"). Reading needs `read`; every change needs `admin`; approvals also refuse an
//! agent identity (403 `agent_refused`).

use std::sync::Arc;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::Items;
use crate::api::workspaces::{
    self as wire, AddRequest, ApproveProjectConfigRequest, ApproveRequest, PolicyRequest,
    PolicyView, ProjectConfigQuery, ProjectConfigView, SetupRequest, WorkspaceList, WorkspaceView,
};
use crate::workspaces::{self, Actor, WorkspaceError};
use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

impl From<WorkspaceError> for ApiError {
    fn from(e: WorkspaceError) -> Self {
        let (status, code) = match &e {
            WorkspaceError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            WorkspaceError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            WorkspaceError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            WorkspaceError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            WorkspaceError::AgentRefused(_) => (StatusCode::FORBIDDEN, "agent_refused"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// The role each workspace route needs (`route` is the full matched path).
pub fn workspaces_role(method: &str, route: &str) -> Option<crate::auth::Role> {
    use crate::auth::Role::*;
    use wire::*;
    Some(match (method, route) {
        ("GET", LIST | ONE | PROJECT_CONFIG | POLICY) => Read,
        ("POST", LIST) => Admin,
        ("PUT", SETUP | POLICY) => Admin,
        ("POST", SETUP_APPROVE | PROJECT_CONFIG_APPROVE | POLICY_APPROVE) => Admin,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    use wire::*;
    Router::new()
        .route(LIST, get(list).post(add))
        .route(ONE, get(show))
        .route(SETUP, axum::routing::put(set_setup))
        .route(SETUP_APPROVE, post(approve_setup))
        .route(PROJECT_CONFIG, get(project_config))
        .route(PROJECT_CONFIG_APPROVE, post(approve_project_config))
        .route(POLICY, get(policy).put(set_policy))
        .route(POLICY_APPROVE, post(approve_policy))
}

type ApiResult = Result<Response, ApiError>;
type Answer<T> = Result<axum::Json<T>, ApiError>;

fn actor(c: &Caller) -> Actor {
    c.actor()
}

fn body<T: serde::de::DeserializeOwned>(bytes: &axum::body::Bytes) -> Result<T, ApiError> {
    crate::api::parse_body(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("bad JSON body: {e}"),
        )
    })
}

async fn list(State(s): State<Arc<Shared>>) -> Answer<WorkspaceList> {
    let items = blocking(move || s.workspaces.load()).await?;
    Ok(axum::Json(Items::new(
        items.iter().map(WorkspaceView::from).collect(),
    )))
}

async fn add(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let b: AddRequest = body(&bytes)?;
    let w =
        blocking(move || workspaces::add(&s.workspaces, &s.ledger, &actor(&c), &b.path)).await?;
    Ok((StatusCode::CREATED, axum::Json(WorkspaceView::from(&w))).into_response())
}

fn get_ws(s: &Shared, ws: &str) -> Result<workspaces::Workspace, WorkspaceError> {
    s.workspaces.find(ws)?.ok_or_else(|| {
        WorkspaceError::NotFound(format!(
            "no workspace {}; `proctor workspace list` shows them",
            crate::text::one_line(ws, 80)
        ))
    })
}

/// A ref in a URL: `ws-0001` (or `ws-1`); paths are not accepted here.
fn ws_ref(raw: &str) -> Result<String, ApiError> {
    workspaces::normalise_ref(raw).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "{} is not a workspace ref (ws-0001)",
                crate::text::one_line(raw, 80)
            ),
        )
    })
}

async fn show(State(s): State<Arc<Shared>>, Path(ws): Path<String>) -> Answer<WorkspaceView> {
    let ws = ws_ref(&ws)?;
    let w = blocking(move || get_ws(&s, &ws)).await?;
    Ok(axum::Json(WorkspaceView::from(&w)))
}

async fn set_setup(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> Answer<WorkspaceView> {
    let ws = ws_ref(&ws)?;
    let b: SetupRequest = body(&bytes)?;
    let w = blocking(move || {
        workspaces::set_setup(&s.workspaces, &s.ledger, &actor(&c), &ws, &b.command)
    })
    .await?;
    Ok(axum::Json(WorkspaceView::from(&w)))
}

async fn approve_setup(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> Answer<WorkspaceView> {
    let ws = ws_ref(&ws)?;
    let b: ApproveRequest = body(&bytes)?;
    let w = blocking(move || {
        workspaces::approve_setup(&s.workspaces, &s.ledger, &actor(&c), &ws, &b.sha256)
    })
    .await?;
    Ok(axum::Json(WorkspaceView::from(&w)))
}

/// `GET …/project-config[?from=REV]`.
async fn project_config(
    State(s): State<Arc<Shared>>,
    Path(ws): Path<String>,
    Query(q): Query<ProjectConfigQuery>,
) -> Answer<ProjectConfigView> {
    let ws = ws_ref(&ws)?;
    let v = blocking(move || {
        let (w, scan) = workspaces::scan_project_config(&s.workspaces, &ws, q.from.as_deref())?;
        Ok::<_, ApiError>(ProjectConfigView::new(&w, &scan))
    })
    .await?;
    Ok(axum::Json(v))
}

/// `POST …/project-config/approve {"sha256", "from"?}`.
async fn approve_project_config(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> Answer<ProjectConfigView> {
    let ws = ws_ref(&ws)?;
    let b: ApproveProjectConfigRequest = body(&bytes)?;
    let v = blocking(move || {
        let (w, scan) = workspaces::approve_project_config_at(
            &s.workspaces,
            &s.ledger,
            &actor(&c),
            &ws,
            &b.sha256,
            b.from.as_deref(),
        )?;
        Ok::<_, ApiError>(ProjectConfigView::new(&w, &scan))
    })
    .await?;
    Ok(axum::Json(v))
}

async fn policy(State(s): State<Arc<Shared>>, Path(ws): Path<String>) -> Answer<PolicyView> {
    let ws = ws_ref(&ws)?;
    let w = blocking(move || get_ws(&s, &ws)).await?;
    Ok(axum::Json(PolicyView::from(&w)))
}

async fn set_policy(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> Answer<PolicyView> {
    let ws = ws_ref(&ws)?;
    let b: PolicyRequest = body(&bytes)?;
    let w = blocking(move || {
        workspaces::set_policy(&s.workspaces, &s.ledger, &actor(&c), &ws, &b.policy)
    })
    .await?;
    Ok(axum::Json(PolicyView::from(&w)))
}

async fn approve_policy(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> Answer<PolicyView> {
    let ws = ws_ref(&ws)?;
    let b: ApproveRequest = body(&bytes)?;
    let w = blocking(move || {
        workspaces::approve_policy(&s.workspaces, &s.ledger, &actor(&c), &ws, &b.sha256)
    })
    .await?;
    Ok(axum::Json(PolicyView::from(&w)))
}
