//! Routes under `/v1/m/sessions/workspaces`: registered folders, their setup command and
//! check policy (approved by SHA-256), and the agent configuration they carry (seed 002,
//! "Approuver la commande de préparation d'un dossier" and "Configuration d'agent que porte
//! un dépôt"). Reading needs `read`; every change needs `admin`; approvals also refuse an
//! agent identity (403 `agent_refused`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::workspaces::{self, Actor, WorkspaceError, project_config};

/// The API base (shared with the run routes).
pub const BASE: &str = super::runs_api::BASE;

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
    Some(match (method, route.strip_prefix(BASE)?) {
        (
            "GET",
            "/workspaces"
            | "/workspaces/{ws}"
            | "/workspaces/{ws}/project-config"
            | "/workspaces/{ws}/policy",
        ) => Read,
        ("POST", "/workspaces") => Admin,
        ("PUT", "/workspaces/{ws}/setup-command" | "/workspaces/{ws}/policy") => Admin,
        (
            "POST",
            "/workspaces/{ws}/setup-command/approve"
            | "/workspaces/{ws}/project-config/approve"
            | "/workspaces/{ws}/policy/approve",
        ) => Admin,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    let p = |tail: &str| format!("{BASE}{tail}");
    Router::new()
        .route(&p("/workspaces"), get(list).post(add))
        .route(&p("/workspaces/{ws}"), get(show))
        .route(
            &p("/workspaces/{ws}/setup-command"),
            axum::routing::put(set_setup),
        )
        .route(
            &p("/workspaces/{ws}/setup-command/approve"),
            post(approve_setup),
        )
        .route(&p("/workspaces/{ws}/project-config"), get(project_config))
        .route(
            &p("/workspaces/{ws}/project-config/approve"),
            post(approve_project_config),
        )
        .route(&p("/workspaces/{ws}/policy"), get(policy).put(set_policy))
        .route(&p("/workspaces/{ws}/policy/approve"), post(approve_policy))
}

type ApiResult = Result<Response, ApiError>;

fn actor(c: &Caller) -> Actor {
    c.actor()
}

fn body<T: serde::de::DeserializeOwned>(bytes: &axum::body::Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("bad JSON body: {e}"),
        )
    })
}

fn ok(v: Value) -> ApiResult {
    Ok(axum::Json(v).into_response())
}

async fn list(State(s): State<Arc<Shared>>) -> ApiResult {
    let home = s.home.clone();
    let items = blocking(move || workspaces::load(&home)).await?;
    ok(json!({"items": items.iter().map(workspaces::view).collect::<Vec<_>>()}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    path: String,
}

async fn add(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let b: AddBody = body(&bytes)?;
    let w = blocking(move || workspaces::add(&s.home, &s.ledger, &actor(&c), &b.path)).await?;
    Ok((StatusCode::CREATED, axum::Json(workspaces::view(&w))).into_response())
}

fn get_ws(s: &Shared, ws: &str) -> Result<workspaces::Workspace, WorkspaceError> {
    workspaces::find(&s.home, ws)?.ok_or_else(|| {
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

async fn show(State(s): State<Arc<Shared>>, Path(ws): Path<String>) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let w = blocking(move || get_ws(&s, &ws)).await?;
    ok(workspaces::view(&w))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupBody {
    command: String,
}

async fn set_setup(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let b: SetupBody = body(&bytes)?;
    let w =
        blocking(move || workspaces::set_setup(&s.home, &s.ledger, &actor(&c), &ws, &b.command))
            .await?;
    ok(workspaces::view(&w))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    sha256: String,
}

async fn approve_setup(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let b: ApproveBody = body(&bytes)?;
    let w =
        blocking(move || workspaces::approve_setup(&s.home, &s.ledger, &actor(&c), &ws, &b.sha256))
            .await?;
    ok(workspaces::view(&w))
}

/// The project-config answer: the scan of the workspace folder (or, with `from`, of the files
/// committed at that commit) and the approval state.
pub fn project_config_view(w: &workspaces::Workspace, scan: &project_config::Scan) -> Value {
    let flagged = scan.any_flagged();
    let covered = w
        .project_config_approval
        .as_ref()
        .is_some_and(|a| a.sha256 == scan.sha256);
    json!({
        "workspace": w.ws_ref,
        "folder": scan.folder,
        "from": scan.commit,
        "files": scan.files,
        "flagged": flagged,
        "sha256": scan.sha256,
        "recipe": scan.recipe,
        "approved": !flagged || covered,
        "approval": w.project_config_approval,
    })
}

#[derive(Deserialize)]
struct ProjectConfigQuery {
    /// A full commit id a ref retains, or a local branch (as `worktree_from`).
    from: Option<String>,
}

/// `GET …/project-config[?from=REV]`.
async fn project_config(
    State(s): State<Arc<Shared>>,
    Path(ws): Path<String>,
    Query(q): Query<ProjectConfigQuery>,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let v = blocking(move || {
        let (w, scan) = workspaces::scan_project_config(&s.home, &ws, q.from.as_deref())?;
        Ok::<_, ApiError>(project_config_view(&w, &scan))
    })
    .await?;
    ok(v)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveProjectConfigBody {
    sha256: String,
    /// As `?from=` of the review.
    #[serde(default)]
    from: Option<String>,
}

/// `POST …/project-config/approve {"sha256", "from"?}`.
async fn approve_project_config(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let b: ApproveProjectConfigBody = body(&bytes)?;
    let v = blocking(move || {
        let (w, scan) = workspaces::approve_project_config_at(
            &s.home,
            &s.ledger,
            &actor(&c),
            &ws,
            &b.sha256,
            b.from.as_deref(),
        )?;
        Ok::<_, ApiError>(project_config_view(&w, &scan))
    })
    .await?;
    ok(v)
}

/// The policy answer.
pub fn policy_view(w: &workspaces::Workspace) -> Value {
    let set = !w.policy.text.is_empty();
    json!({
        "workspace": w.ws_ref,
        "policy": set.then(|| w.policy.text.clone()),
        "sha256": set.then(|| w.policy.sha256()),
        "recipe": crate::evidence::policy::POLICY_DIGEST_RECIPE,
        "approved": set && w.policy.approved(),
        "approval": w.policy.approval,
    })
}

async fn policy(State(s): State<Arc<Shared>>, Path(ws): Path<String>) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let w = blocking(move || get_ws(&s, &ws)).await?;
    ok(policy_view(&w))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyBody {
    policy: String,
}

async fn set_policy(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let b: PolicyBody = body(&bytes)?;
    let w =
        blocking(move || workspaces::set_policy(&s.home, &s.ledger, &actor(&c), &ws, &b.policy))
            .await?;
    ok(policy_view(&w))
}

async fn approve_policy(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(ws): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult {
    let ws = ws_ref(&ws)?;
    let b: ApproveBody = body(&bytes)?;
    let w = blocking(move || {
        workspaces::approve_policy(&s.home, &s.ledger, &actor(&c), &ws, &b.sha256)
    })
    .await?;
    ok(policy_view(&w))
}
