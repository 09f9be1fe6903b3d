//! The evidence routes' contract (see [`crate::api`]): candidates bound to a worktree run's
//! exact bytes, the checks that judge them, the gate that says what still blocks, and the
//! receipts. Binding and running checks need `write`; everything else `read`.
//!
//! The candidate, the evidence entry and the receipt are stored documents whose digests
//! receipts bind: the contract re-exports them with the shape they are stored in (a few
//! optional fields of theirs are omitted when absent, as stored; see `docs/api.md`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, Items};
pub use crate::evidence::candidate::{Candidate, Captured, ChangedFile, Identity, TreeInventory};
pub use crate::evidence::gate::{Gate, GateState, HistoryItem, IdentityView, Node, PolicyView};
pub use crate::evidence::receipts::{Check as ReceiptCheck, Holds, Listed as ReceiptItem, Report};
pub use crate::evidence::store::{
    Artifact, CheckRecord, Checkout, DigestRef, Entry as EvidenceEntry, Output, PolicyRef,
};

/// `GET` (list, `?run=`) and `POST` (bind) candidates.
pub const CANDIDATES: &str = "/v1/m/evidence/candidates";
/// `GET` one candidate.
pub const CANDIDATE: &str = "/v1/m/evidence/candidates/{id}";
/// `POST` runs the checks on a candidate; `GET` says whether an attempt runs now.
pub const CHECKS: &str = "/v1/m/evidence/candidates/{id}/checks";
/// `GET` the gate of a candidate, evaluated now.
pub const GATE: &str = "/v1/m/evidence/candidates/{id}/gate";
/// `GET` one evidence entry.
pub const EVIDENCE: &str = "/v1/m/evidence/evidence/{id}";
/// `GET` the receipts.
pub const RECEIPTS: &str = "/v1/m/evidence/receipts";
/// `GET` one receipt and what verifying it says now.
pub const RECEIPT: &str = "/v1/m/evidence/receipts/{id}";

/// A route template with its `{id}` filled in (`cand-0001`, `ev-0001`, `rcpt-0001`).
pub fn path(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

/// `GET /candidates?run=run-0001`: only that run's candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CandidateQuery {
    #[serde(default)]
    pub run: Option<String>,
}

/// `POST /candidates`: the worktree run whose bytes to bind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BindRequest {
    /// `run-0001`.
    pub run: String,
}

/// A candidate as the API shows it: the stored record, and its identity digest rendered
/// with its format and recipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CandidateView {
    #[serde(flatten)]
    pub candidate: Candidate,
    /// `format=candidate-identity/1 digest=candidate-identity-sha256/1 <hex>`.
    pub identity_digest: String,
}

impl From<&Candidate> for CandidateView {
    fn from(c: &Candidate) -> Self {
        CandidateView {
            candidate: c.clone(),
            identity_digest: c.identity.render(),
        }
    }
}

/// The candidates listing, oldest first.
pub type CandidateList = Items<CandidateView>;
/// The receipts listing, oldest first.
pub type ReceiptList = Items<ReceiptItem>;

/// `GET …/checks`: whether an attempt runs on the candidate now, and where it is (for a
/// progress line while `POST …/checks` is outstanding). Every field but `candidate` and
/// `running` is `null` when nothing runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckProgress {
    pub candidate: String,
    pub running: bool,
    /// The entry being made (`ev-0003`).
    pub evidence: Option<String>,
    pub started_at: Option<String>,
    /// 1-based index of the check running, 0 while the private copy is made.
    pub index: Option<u64>,
    pub total: Option<u64>,
    /// The check running (`null` while the copy is made).
    pub check: Option<String>,
    pub check_elapsed_secs: Option<u64>,
    /// An upper bound of what remains, in seconds (not an ETA).
    pub bound_secs: Option<u64>,
}

impl CheckProgress {
    /// Nothing runs on `candidate`.
    pub fn idle(candidate: &str) -> Self {
        CheckProgress {
            candidate: candidate.to_string(),
            running: false,
            evidence: None,
            started_at: None,
            index: None,
            total: None,
            check: None,
            check_elapsed_secs: None,
            bound_secs: None,
        }
    }

    /// An attempt in progress.
    pub fn of(candidate: &str, r: &crate::evidence::checks::Running) -> Self {
        let elapsed = r.check_started.map(|t| t.elapsed().as_secs()).unwrap_or(0);
        CheckProgress {
            candidate: candidate.to_string(),
            running: true,
            evidence: Some(r.evidence.clone()),
            started_at: Some(r.started_at.clone()),
            index: Some(r.index as u64),
            total: Some(r.total as u64),
            check: r.check.clone(),
            check_elapsed_secs: Some(elapsed),
            bound_secs: Some(r.bound_secs.saturating_sub(elapsed)),
        }
    }
}

/// What verifying a receipt says: the report, or why it could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Verification {
    Report(Report),
    Failed {
        /// Why the receipt could not be verified.
        error: String,
    },
}

/// `GET /receipts/{id}`: the receipt file as stored (a plain receipt, or a signed one's DSSE
/// envelope) and what verifying it against the home's files says now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptView {
    /// The file's JSON as stored (`null` when it is not JSON).
    #[schema(value_type = Object)]
    pub receipt: serde_json::Value,
    pub verify: Verification,
}

/// The operations of this area, declared for the OpenAPI document (the server's handlers in
/// `server::evidence_api` serve them; the contract layer does not import the server).
#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(get, path = CANDIDATES, tag = "evidence",
        params(("run" = Option<String>, Query, description = "only this run's candidates")),
        responses((status = 200, description = "the candidates, oldest first", body = Items<CandidateView>)))]
    pub fn list() {}

    #[utoipa::path(post, path = CANDIDATES, tag = "evidence", request_body = BindRequest,
        responses((status = 201, description = "bound", body = CandidateView),
                  (status = 400, description = "not a run id", body = ErrorBody),
                  (status = 409, description = "refused (no worktree, not clean, committed, index changed)", body = ErrorBody)))]
    pub fn bind() {}

    #[utoipa::path(get, path = CANDIDATE, tag = "evidence", params(("id" = String, Path, description = "cand-0001")),
        responses((status = 200, description = "the candidate", body = CandidateView),
                  (status = 404, description = "no such candidate", body = ErrorBody)))]
    pub fn show() {}

    #[utoipa::path(post, path = CHECKS, tag = "evidence", params(("id" = String, Path, description = "cand-0001")),
        responses((status = 201, description = "the evidence entry recorded", body = EvidenceEntry),
                  (status = 409, description = "refused (stale candidate, no approved policy, already judged)", body = ErrorBody)))]
    pub fn run_checks() {}

    #[utoipa::path(get, path = CHECKS, tag = "evidence", params(("id" = String, Path, description = "cand-0001")),
        responses((status = 200, description = "the attempt in progress, if any", body = CheckProgress)))]
    pub fn checks_progress() {}

    #[utoipa::path(get, path = GATE, tag = "evidence", params(("id" = String, Path, description = "cand-0001")),
        responses((status = 200, description = "the gate, evaluated now", body = Gate),
                  (status = 404, description = "no such candidate", body = ErrorBody)))]
    pub fn gate() {}

    #[utoipa::path(get, path = EVIDENCE, tag = "evidence", params(("id" = String, Path, description = "ev-0001")),
        responses((status = 200, description = "the evidence entry", body = EvidenceEntry),
                  (status = 404, description = "no such entry", body = ErrorBody)))]
    pub fn evidence_entry() {}

    #[utoipa::path(get, path = RECEIPTS, tag = "evidence",
        responses((status = 200, description = "the receipts, oldest first", body = Items<ReceiptItem>)))]
    pub fn receipt_list() {}

    #[utoipa::path(get, path = RECEIPT, tag = "evidence", params(("id" = String, Path, description = "rcpt-0001")),
        responses((status = 200, description = "the receipt and its verification now", body = ReceiptView),
                  (status = 404, description = "no such receipt", body = ErrorBody)))]
    pub fn receipt_show() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::list,
        ops::bind,
        ops::show,
        ops::run_checks,
        ops::checks_progress,
        ops::gate,
        ops::evidence_entry,
        ops::receipt_list,
        ops::receipt_show,
    ),
    components(schemas(
        BindRequest,
        Items<CandidateView>,
        Items<ReceiptItem>,
        CandidateView,
        Candidate,
        Identity,
        Captured,
        ChangedFile,
        TreeInventory,
        CheckProgress,
        EvidenceEntry,
        DigestRef,
        PolicyRef,
        Output,
        Artifact,
        CheckRecord,
        Checkout,
        Gate,
        GateState,
        Node,
        HistoryItem,
        IdentityView,
        PolicyView,
        ReceiptItem,
        ReceiptView,
        Verification,
        Report,
        ReceiptCheck,
        Holds,
        ErrorBody,
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every `$ref` of the workspaces' and evidence operations names a schema the document
    /// holds, and every operation of theirs is in the document.
    #[test]
    fn the_documented_operations_and_their_schemas_resolve() {
        let doc: Value = serde_json::from_str(&crate::api::openapi_json()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r.clone());
                    }
                    m.values().for_each(|x| refs(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for (path, op) in doc["paths"].as_object().unwrap() {
            if path.starts_with("/v1/m/evidence/") || path.starts_with("/v1/m/sessions/workspaces")
            {
                refs(op, &mut found);
            }
        }
        for (name, s) in schemas {
            let mut inner = Vec::new();
            refs(s, &mut inner);
            if found.iter().any(|r| r.ends_with(&format!("/{name}"))) {
                found.extend(inner);
            }
        }
        assert!(!found.is_empty());
        for r in &found {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
            assert!(schemas.contains_key(name), "{r} names no schema");
        }
        let ops = |p: &str| doc["paths"][p].as_object().map(|m| m.len()).unwrap_or(0);
        // Each listing names its own item type (a generic `Items` would mix them up).
        let listed = |p: &str, method: &str| {
            doc["paths"][p][method]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"]
                .as_str()
                .unwrap_or("")
                .to_string()
        };
        assert!(listed(super::CANDIDATES, "get").ends_with("/Items_CandidateView"));
        assert!(listed(super::RECEIPTS, "get").ends_with("/Items_ReceiptItem"));
        assert!(listed(crate::api::workspaces::LIST, "get").ends_with("/Items_WorkspaceView"));
        use super::*;
        assert_eq!(ops(CANDIDATES), 2);
        assert_eq!(ops(CHECKS), 2);
        for p in [CANDIDATE, GATE, EVIDENCE, RECEIPTS, RECEIPT] {
            assert_eq!(ops(p), 1, "{p}");
        }
        use crate::api::workspaces as ws;
        assert_eq!(ops(ws::LIST), 2);
        assert_eq!(ops(ws::POLICY), 2);
        for p in [ws::ONE, ws::SETUP, ws::SETUP_APPROVE, ws::PROJECT_CONFIG]
            .into_iter()
            .chain([ws::PROJECT_CONFIG_APPROVE, ws::POLICY_APPROVE])
        {
            assert_eq!(ops(p), 1, "{p}");
        }
    }
}
