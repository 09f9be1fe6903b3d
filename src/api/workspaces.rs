//! The workspaces routes' contract (see [`crate::api`]): registered folders, their setup
//! command and check policy (approved by SHA-256), and the agent configuration they carry.
//! Reading needs `read`; every change needs `admin`; approvals refuse an agent identity.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, Items};
use crate::workspaces::{self, Approval, Workspace, policy, project_config};

/// `GET` (list) and `POST` (add) workspaces.
pub const LIST: &str = "/v1/m/sessions/workspaces";
/// `GET` one workspace.
pub const ONE: &str = "/v1/m/sessions/workspaces/{ws}";
/// `PUT` the setup command.
pub const SETUP: &str = "/v1/m/sessions/workspaces/{ws}/setup-command";
/// `POST` an approval of the setup command.
pub const SETUP_APPROVE: &str = "/v1/m/sessions/workspaces/{ws}/setup-command/approve";
/// `GET` the review of the agent configuration (`?from=REV`).
pub const PROJECT_CONFIG: &str = "/v1/m/sessions/workspaces/{ws}/project-config";
/// `POST` an approval of the agent configuration.
pub const PROJECT_CONFIG_APPROVE: &str = "/v1/m/sessions/workspaces/{ws}/project-config/approve";
/// `GET` and `PUT` the check policy.
pub const POLICY: &str = "/v1/m/sessions/workspaces/{ws}/policy";
/// `POST` an approval of the check policy.
pub const POLICY_APPROVE: &str = "/v1/m/sessions/workspaces/{ws}/policy/approve";

/// A route template with its `{ws}` filled in (a ref: `ws-0001`).
pub fn path(template: &str, ws: &str) -> String {
    template.replace("{ws}", ws)
}

/// The path of one workspace.
pub fn one(ws: &str) -> String {
    path(ONE, ws)
}

/// `POST /workspaces`: the folder to register (an absolute path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    pub path: String,
}

/// `PUT …/setup-command`: the exact text ("" clears it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetupRequest {
    pub command: String,
}

/// `POST …/setup-command/approve` and `…/policy/approve`: the SHA-256 the person reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    pub sha256: String,
}

/// `POST …/project-config/approve`: the SHA-256 reviewed and, as `?from=` of the review,
/// the commit whose files were reviewed (`null` or absent: the folder's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveProjectConfigRequest {
    pub sha256: String,
    #[serde(default)]
    pub from: Option<String>,
}

/// `PUT …/policy`: the policy text (TOML; "" clears it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequest {
    pub policy: String,
}

/// `GET …/project-config?from=REV`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProjectConfigQuery {
    /// A full commit id a ref retains, or a local branch (as `worktree_from`).
    #[serde(default)]
    pub from: Option<String>,
}

/// A workspace as the API shows it (seed 002's names for the setup command).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceView {
    /// `ws-0001`.
    #[serde(rename = "ref")]
    pub ws_ref: String,
    /// The canonical absolute path.
    pub path: String,
    pub created_at: String,
    /// The exact text, `null` when none is set.
    pub setup_command: Option<String>,
    pub setup_command_sha256: Option<String>,
    /// `setup-command-sha256/1`.
    pub setup_command_recipe: String,
    /// The last approval (kept as evidence after the text changes).
    pub setup_approval: Option<Approval>,
    /// True when there is nothing to approve, or the last approval covers the text.
    pub setup_approved: bool,
    pub policy_sha256: Option<String>,
    /// `policy-text-sha256/1`.
    pub policy_recipe: String,
    pub policy_approval: Option<Approval>,
    /// True when a policy is set and the last approval covers it.
    pub policy_approved: bool,
    pub project_config_approval: Option<Approval>,
}

impl From<&Workspace> for WorkspaceView {
    fn from(w: &Workspace) -> Self {
        let opt = |a: &workspaces::Approvable| (!a.text.is_empty()).then(|| a.text.clone());
        let opt_h = |a: &workspaces::Approvable| (!a.text.is_empty()).then(|| a.sha256());
        WorkspaceView {
            ws_ref: w.ws_ref.clone(),
            path: w.path.to_string_lossy().into_owned(),
            created_at: w.created_at.clone(),
            setup_command: opt(&w.setup),
            setup_command_sha256: opt_h(&w.setup),
            setup_command_recipe: workspaces::SETUP_DIGEST_RECIPE.to_string(),
            setup_approval: w.setup.approval.clone(),
            setup_approved: w.setup.approved(),
            policy_sha256: opt_h(&w.policy),
            policy_recipe: policy::POLICY_DIGEST_RECIPE.to_string(),
            policy_approval: w.policy.approval.clone(),
            policy_approved: !w.policy.text.is_empty() && w.policy.approved(),
            project_config_approval: w.project_config_approval.clone(),
        }
    }
}

/// One flagged key of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FlaggedKey {
    /// The key's path for display (segments joined by `.`).
    pub key: String,
    /// The key's path, segment by segment.
    pub path: Vec<String>,
    /// The value with URL passwords masked (`https://user:***@host`): any JSON value.
    #[schema(value_type = Object)]
    pub value: serde_json::Value,
}

/// Why a whole file is flagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UnreadableFile {
    /// `invalid_json`, `invalid_toml`, `invalid_utf8`, `not_an_object`, `too_large`,
    /// `too_deep`, `symlink`, `not_regular`, `io_error`.
    pub code: String,
    pub reason: String,
    /// SHA-256 of the whole file (of a link's target text).
    pub sha256: String,
    pub bytes: Option<u64>,
}

/// One scanned file that exists in the folder (or the commit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ScannedFile {
    pub path: String,
    /// The tool that reads it.
    pub tool: String,
    /// True when it has flagged keys or cannot be read in its format.
    pub flagged: bool,
    pub keys: Vec<FlaggedKey>,
    pub unreadable: Option<UnreadableFile>,
}

impl From<&project_config::FileReport> for ScannedFile {
    fn from(f: &project_config::FileReport) -> Self {
        ScannedFile {
            path: f.path.to_string(),
            tool: f.tool.to_string(),
            flagged: f.flagged,
            keys: f
                .keys
                .iter()
                .map(|k| FlaggedKey {
                    key: k.key.clone(),
                    path: k.path.clone(),
                    value: k.value.clone(),
                })
                .collect(),
            unreadable: f.unreadable.as_ref().map(|u| UnreadableFile {
                code: u.code.to_string(),
                reason: u.reason.clone(),
                sha256: u.sha256.clone(),
                bytes: u.bytes,
            }),
        }
    }
}

/// `GET …/project-config` and the answer of its approval: the scan of the workspace folder
/// (or, with `from`, of the files committed at that commit) and the approval state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProjectConfigView {
    /// The workspace ref.
    pub workspace: String,
    /// The folder scanned (for a commit, the repository).
    pub folder: String,
    /// The full commit id whose files were scanned; `null` for the folder.
    pub from: Option<String>,
    pub files: Vec<ScannedFile>,
    /// Whether any file is flagged.
    pub flagged: bool,
    /// SHA-256 of the canonical document of the flagged part.
    pub sha256: String,
    pub recipe: String,
    /// True when nothing is flagged or the last approval covers `sha256`.
    pub approved: bool,
    pub approval: Option<Approval>,
}

impl ProjectConfigView {
    pub fn new(w: &Workspace, scan: &project_config::Scan) -> Self {
        let flagged = scan.any_flagged();
        let covered = w
            .project_config_approval
            .as_ref()
            .is_some_and(|a| a.sha256 == scan.sha256);
        ProjectConfigView {
            workspace: w.ws_ref.clone(),
            folder: scan.folder.to_string_lossy().into_owned(),
            from: scan.commit.clone(),
            files: scan.files.iter().map(ScannedFile::from).collect(),
            flagged,
            sha256: scan.sha256.clone(),
            recipe: scan.recipe.to_string(),
            approved: !flagged || covered,
            approval: w.project_config_approval.clone(),
        }
    }
}

/// `GET …/policy` and the answers of its changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PolicyView {
    pub workspace: String,
    /// The policy text, `null` when none is set.
    pub policy: Option<String>,
    pub sha256: Option<String>,
    /// `policy-text-sha256/1`.
    pub recipe: String,
    /// True when a policy is set and the last approval covers it.
    pub approved: bool,
    pub approval: Option<Approval>,
}

impl From<&Workspace> for PolicyView {
    fn from(w: &Workspace) -> Self {
        let set = !w.policy.text.is_empty();
        PolicyView {
            workspace: w.ws_ref.clone(),
            policy: set.then(|| w.policy.text.clone()),
            sha256: set.then(|| w.policy.sha256()),
            recipe: policy::POLICY_DIGEST_RECIPE.to_string(),
            approved: set && w.policy.approved(),
            approval: w.policy.approval.clone(),
        }
    }
}

/// The workspaces listing.
pub type WorkspaceList = Items<WorkspaceView>;

/// The operations of this area, declared for the OpenAPI document (the server's handlers in
/// `server::workspaces_api` serve them; the contract layer does not import the server).
#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(get, path = LIST, tag = "workspaces",
        responses((status = 200, description = "every workspace, in registration order", body = Items<WorkspaceView>)))]
    pub fn list() {}

    #[utoipa::path(post, path = LIST, tag = "workspaces", request_body = AddRequest,
        responses((status = 201, description = "registered", body = WorkspaceView),
                  (status = 409, description = "already registered", body = ErrorBody),
                  (status = 422, description = "not an absolute path to a folder", body = ErrorBody)))]
    pub fn add() {}

    #[utoipa::path(get, path = ONE, tag = "workspaces", params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "the workspace", body = WorkspaceView),
                  (status = 404, description = "no such workspace", body = ErrorBody)))]
    pub fn show() {}

    #[utoipa::path(put, path = SETUP, tag = "workspaces", request_body = SetupRequest,
        params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "set", body = WorkspaceView),
                  (status = 422, description = "too long or holds a NUL byte", body = ErrorBody)))]
    pub fn set_setup() {}

    #[utoipa::path(post, path = SETUP_APPROVE, tag = "workspaces", request_body = ApproveRequest,
        params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "approved", body = WorkspaceView),
                  (status = 403, description = "an agent identity", body = ErrorBody),
                  (status = 409, description = "the text changed since it was reviewed", body = ErrorBody)))]
    pub fn approve_setup() {}

    #[utoipa::path(get, path = PROJECT_CONFIG, tag = "workspaces",
        params(("ws" = String, Path, description = "ws-0001"),
               ("from" = Option<String>, Query, description = "a local branch or a full commit id a ref retains")),
        responses((status = 200, description = "the review", body = ProjectConfigView),
                  (status = 422, description = "from names no commit", body = ErrorBody)))]
    pub fn project_config() {}

    #[utoipa::path(post, path = PROJECT_CONFIG_APPROVE, tag = "workspaces",
        request_body = ApproveProjectConfigRequest,
        params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "approved", body = ProjectConfigView),
                  (status = 403, description = "an agent identity", body = ErrorBody),
                  (status = 409, description = "the files changed since they were reviewed", body = ErrorBody)))]
    pub fn approve_project_config() {}

    #[utoipa::path(get, path = POLICY, tag = "workspaces", params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "the policy", body = PolicyView)))]
    pub fn policy() {}

    #[utoipa::path(put, path = POLICY, tag = "workspaces", request_body = PolicyRequest,
        params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "set", body = PolicyView),
                  (status = 422, description = "not a valid policy", body = ErrorBody)))]
    pub fn set_policy() {}

    #[utoipa::path(post, path = POLICY_APPROVE, tag = "workspaces", request_body = ApproveRequest,
        params(("ws" = String, Path, description = "ws-0001")),
        responses((status = 200, description = "approved", body = PolicyView),
                  (status = 403, description = "an agent identity", body = ErrorBody),
                  (status = 409, description = "the policy changed since it was reviewed", body = ErrorBody)))]
    pub fn approve_policy() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::list,
        ops::add,
        ops::show,
        ops::set_setup,
        ops::approve_setup,
        ops::project_config,
        ops::approve_project_config,
        ops::policy,
        ops::set_policy,
        ops::approve_policy,
    ),
    components(schemas(
        AddRequest,
        SetupRequest,
        ApproveRequest,
        ApproveProjectConfigRequest,
        PolicyRequest,
        Items<WorkspaceView>,
        WorkspaceView,
        Approval,
        FlaggedKey,
        UnreadableFile,
        ScannedFile,
        ProjectConfigView,
        PolicyView,
        ErrorBody,
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspaces::{Approvable, sha256_hex};
    use serde_json::Value;

    #[test]
    fn view_uses_the_seed_names() {
        let w = Workspace {
            ws_ref: "ws-0001".into(),
            path: "/src/app".into(),
            created_at: crate::ledger::now_at(),
            setup: Approvable {
                text: "npm ci".into(),
                approval: None,
            },
            policy: Approvable::default(),
            project_config_approval: None,
        };
        let v = serde_json::to_value(WorkspaceView::from(&w)).unwrap();
        assert_eq!(v["setup_command"], "npm ci");
        assert_eq!(v["setup_command_sha256"], sha256_hex(b"npm ci"));
        assert_eq!(v["setup_approved"], false);
        assert_eq!(v["setup_approval"], Value::Null);
        assert_eq!(v["ref"], "ws-0001");
    }
}
