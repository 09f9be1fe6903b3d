//! The factory's routes' contract (see [`crate::api`]): start an agent-factory run, follow
//! it, read its receipt. Starting needs `write`; the rest `read`.
//!
//! A run is started and answered at once (`202`, the run's record); the server runs it to
//! its end on its own threads, so it outlives the client. Its record never holds the task's
//! text, a provider's output or a secret, only their identities; the receipt is the
//! document `proctor factory run` prints. The types are `factory::engine`'s, re-exported.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, Items};
pub use crate::factory::engine::{
    AgentRef, Bound, FactoryRun, Phase, RunError, RunStatus, StepView,
};

/// The area's base.
pub const BASE: &str = "/v1/m/factory";
/// `GET` (list) and `POST` (start) runs.
pub const RUNS: &str = "/v1/m/factory/runs";
/// `GET` one run.
pub const RUN: &str = "/v1/m/factory/runs/{id}";
/// `GET` a finished run's receipt.
pub const RUN_RECEIPT: &str = "/v1/m/factory/runs/{id}/receipt";

/// A route template with its `{id}` filled in (`fac-0001`).
pub fn path(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

/// `POST /runs`: one worker in a clean linked worktree, one reviewer of another vendor, at
/// most one repair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StartRequest {
    /// The linked worktree's absolute path (`git worktree add`): never a main working copy,
    /// a submodule's or a dirty one.
    pub workspace: String,
    /// What the worker should do.
    pub task: String,
    /// The worker's provider profile (`proctor profile list`); `null`: `claude`.
    #[serde(default)]
    pub worker: Option<String>,
    /// The reviewer's provider profile, of another vendor; `null`: `codex`.
    #[serde(default)]
    pub reviewer: Option<String>,
    /// The worker's model (`--model`); `null`: the tool's default.
    #[serde(default)]
    pub worker_model: Option<String>,
    /// The reviewer's model; `null`: the tool's default.
    #[serde(default)]
    pub reviewer_model: Option<String>,
    /// Each provider invocation's deadline, in seconds; `null`: 600.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Where the client will write the report: refused if it is inside the candidate.
    #[serde(default)]
    pub out: Option<String>,
    /// An OpenTelemetry collector (OTLP/HTTP) on a loopback IP literal,
    /// `http://127.0.0.1:4318`; the finished run's trace goes there. Its failures never change
    /// the outcome. `null`: no export.
    #[serde(default)]
    pub otel: Option<String>,
    /// A namespace rig (`rig-0001`) the worker and the repair run in, on a copy of the
    /// worktree; what they change comes back judged. `null`: they run as the host user.
    #[serde(default)]
    pub rig: Option<String>,
}

/// The runs listing, oldest first.
pub type RunList = Items<FactoryRun>;

/// A finished run's receipt, as written (`data/factory/fac-NNNN/receipt.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptView {
    pub run: String,
    /// Where it is, its size and SHA-256.
    pub bound: Bound,
    /// The receipt document (`proctor-factory-receipt/1`, docs/factory.md).
    #[schema(value_type = Object)]
    pub receipt: serde_json::Value,
}

#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(post, path = RUNS, tag = "factory", request_body = StartRequest,
        responses((status = 202, description = "started: the run's first record", body = FactoryRun),
                  (status = 400, description = "an empty or oversized task, a bad timeout (bad_request)", body = ErrorBody),
                  (status = 404, description = "no such provider profile (unknown_profile)", body = ErrorBody),
                  (status = 422, description = "refused: main_working_copy, submodule_working_copy, dirty_input, not_worktree_root, same_vendor, evidence_inside_candidate, unsupported_tool, tool_not_installed, tool_not_in_rig", body = ErrorBody)))]
    pub fn start() {}

    #[utoipa::path(get, path = RUNS, tag = "factory",
        responses((status = 200, description = "the runs, oldest first", body = Items<FactoryRun>)))]
    pub fn list() {}

    #[utoipa::path(get, path = RUN, tag = "factory", params(("id" = String, Path, description = "fac-0001")),
        responses((status = 200, description = "the run", body = FactoryRun),
                  (status = 404, description = "no such run", body = ErrorBody)))]
    pub fn show() {}

    #[utoipa::path(get, path = RUN_RECEIPT, tag = "factory", params(("id" = String, Path, description = "fac-0001")),
        responses((status = 200, description = "the receipt", body = ReceiptView),
                  (status = 404, description = "no such run, or not finished", body = ErrorBody)))]
    pub fn receipt() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(ops::start, ops::list, ops::show, ops::receipt),
    components(schemas(
        StartRequest,
        FactoryRun,
        Items<FactoryRun>,
        RunStatus,
        Phase,
        StepView,
        AgentRef,
        RunError,
        Bound,
        ReceiptView,
        ErrorBody,
    ))
)]
pub struct Doc;
