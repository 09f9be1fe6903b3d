//! The publish routes' contract (see [`crate::api`]): intents and the server's half of the
//! approval flow, under [`BASE`]. The bodies are `publish`'s own types
//! ([`crate::publish::views`]), re-exported here.

use utoipa::OpenApi;

pub use crate::publish::adapter::{Effects, LocalRef, Pushed};
pub use crate::publish::authorisation::LedgerHead;
pub use crate::publish::forge::PullRequest;
pub use crate::publish::intent::{
    CandidateRef, CommitRecipe, ForgeTarget, Intent, IntentState, Remote,
};
pub use crate::publish::receipt::Outcome;
pub use crate::publish::views::{
    CheckView, EnvelopeRequest, Failure, IntentOutcome, IntentView, MintedAnswer, OpenedApproval,
    ProposeRequest, ReceiptRef, ReceiptRequest, RefusalAnswer, RefusalRequest, SignedReceipt,
    SpendAnswer,
};

use super::{ErrorBody, Items};

/// Where the publish routes are nested.
pub const BASE: &str = "/v1/m/publish";

/// The route patterns under [`BASE`] (axum's syntax), as the server's router declares them.
pub mod route {
    pub const INTENTS: &str = "/intents";
    pub const INTENT: &str = "/intents/{intent}";
    pub const APPROVALS: &str = "/intents/{intent}/approvals";
    pub const CHECK: &str = "/approvals/{approval}/check";
    pub const REFUSAL: &str = "/approvals/{approval}/refusal";
    pub const AUTHORISATION: &str = "/approvals/{approval}/authorisation";
    pub const SPEND: &str = "/approvals/{approval}/spend";
    pub const RECEIPT: &str = "/approvals/{approval}/receipt";
}

/// `GET`/`POST` the intents.
pub fn intents() -> String {
    format!("{BASE}/intents")
}
/// One intent.
pub fn intent(id: &str) -> String {
    format!("{BASE}/intents/{id}")
}
/// Opens an approval of an intent.
pub fn approvals(intent: &str) -> String {
    format!("{BASE}/intents/{intent}/approvals")
}
/// One step of an open approval: `check`, `refusal`, `authorisation`, `spend`, `receipt`.
fn step(approval: &str, step: &str) -> String {
    format!("{BASE}/approvals/{approval}/{step}")
}
pub fn check(approval: &str) -> String {
    step(approval, "check")
}
pub fn refusal(approval: &str) -> String {
    step(approval, "refusal")
}
pub fn authorisation(approval: &str) -> String {
    step(approval, "authorisation")
}
pub fn spend(approval: &str) -> String {
    step(approval, "spend")
}
pub fn receipt(approval: &str) -> String {
    step(approval, "receipt")
}

// The operations, for the OpenAPI document (the handlers are in `server::publish_api`; the
// document is declared here so that the contract does not depend on the server).

/// The intents, oldest first, each as it stands now.
#[utoipa::path(get, path = "/v1/m/publish/intents", tag = "publish",
    responses((status = 200, body = Items<IntentView>), (status = 401, body = ErrorBody)))]
#[allow(dead_code)]
fn list_intents() {}

/// Makes an intent from a run's latest bound candidate (AWAITING_AUTHORITY only when its
/// evidence passes; otherwise BLOCKED with the causes).
#[utoipa::path(post, path = "/v1/m/publish/intents", tag = "publish", request_body = ProposeRequest,
    responses((status = 201, body = Intent), (status = 400, body = ErrorBody),
              (status = 422, body = ErrorBody), (status = 502, body = ErrorBody)))]
#[allow(dead_code)]
fn propose_intent() {}

/// One intent as it stands now (judged afresh).
#[utoipa::path(get, path = "/v1/m/publish/intents/{intent}", tag = "publish",
    params(("intent" = String, Path, description = "int-0001")),
    responses((status = 200, body = IntentView), (status = 404, body = ErrorBody)))]
#[allow(dead_code)]
fn show_intent() {}

/// Opens an approval (person only): the receipt file is reserved.
#[utoipa::path(post, path = "/v1/m/publish/intents/{intent}/approvals", tag = "publish",
    params(("intent" = String, Path, description = "int-0001")),
    responses((status = 201, body = OpenedApproval), (status = 403, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
#[allow(dead_code)]
fn open_approval() {}

/// Re-reads the remote, the candidate, the gate and the commit; binds the ledger head.
#[utoipa::path(post, path = "/v1/m/publish/approvals/{approval}/check", tag = "publish",
    params(("approval" = String, Path, description = "apr-…")),
    responses((status = 200, body = CheckView), (status = 409, body = ErrorBody)))]
#[allow(dead_code)]
fn check_approval() {}

/// A refusal at the terminal: the redacted receipt.
#[utoipa::path(post, path = "/v1/m/publish/approvals/{approval}/refusal", tag = "publish",
    params(("approval" = String, Path, description = "apr-…")), request_body = RefusalRequest,
    responses((status = 200, body = RefusalAnswer), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
#[allow(dead_code)]
fn refuse_approval() {}

/// Verifies and appends the authorisation (fsync'd).
#[utoipa::path(post, path = "/v1/m/publish/approvals/{approval}/authorisation", tag = "publish",
    params(("approval" = String, Path, description = "apr-…")), request_body = EnvelopeRequest,
    responses((status = 201, body = MintedAnswer), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)))]
#[allow(dead_code)]
fn authorise_approval() {}

/// Spends the authorisation once and runs the adapter.
#[utoipa::path(post, path = "/v1/m/publish/approvals/{approval}/spend", tag = "publish",
    params(("approval" = String, Path, description = "apr-…")), request_body = EnvelopeRequest,
    responses((status = 200, body = SpendAnswer), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
#[allow(dead_code)]
fn spend_approval() {}

/// Replaces the unsigned receipt with the signed one (+ `.sig`).
#[utoipa::path(post, path = "/v1/m/publish/approvals/{approval}/receipt", tag = "publish",
    params(("approval" = String, Path, description = "apr-…")), request_body = ReceiptRequest,
    responses((status = 200, body = SignedReceipt), (status = 400, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
#[allow(dead_code)]
fn sign_receipt() {}

/// The OpenAPI operations of this area.
#[derive(OpenApi)]
#[openapi(
    paths(
        list_intents,
        propose_intent,
        show_intent,
        open_approval,
        check_approval,
        refuse_approval,
        authorise_approval,
        spend_approval,
        sign_receipt
    ),
    components(schemas(
        Intent,
        IntentView,
        IntentState,
        CandidateRef,
        CommitRecipe,
        ForgeTarget,
        Remote,
        IntentOutcome,
        Effects,
        LocalRef,
        Pushed,
        PullRequest,
        Outcome,
        LedgerHead,
        ProposeRequest,
        OpenedApproval,
        CheckView,
        RefusalRequest,
        RefusalAnswer,
        EnvelopeRequest,
        MintedAnswer,
        SpendAnswer,
        ReceiptRequest,
        SignedReceipt,
        ReceiptRef,
        Failure
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the server's router declares for this area has its operation in the
    /// OpenAPI document, and the document names no other path of this area.
    #[test]
    fn every_route_is_in_the_openapi_document() {
        let doc = Doc::openapi();
        let documented: std::collections::BTreeSet<String> =
            doc.paths.paths.keys().cloned().collect();
        let declared: std::collections::BTreeSet<String> = [
            route::INTENTS,
            route::INTENT,
            route::APPROVALS,
            route::CHECK,
            route::REFUSAL,
            route::AUTHORISATION,
            route::SPEND,
            route::RECEIPT,
        ]
        .iter()
        .map(|r| format!("{BASE}{r}"))
        .collect();
        assert_eq!(documented, declared);
        // The path functions name the same routes.
        assert_eq!(intent("int-0001"), format!("{BASE}/intents/int-0001"));
        assert_eq!(
            approvals("int-0001"),
            format!("{BASE}/intents/int-0001/approvals")
        );
        for (f, step) in [
            (check as fn(&str) -> String, "check"),
            (refusal, "refusal"),
            (authorisation, "authorisation"),
            (spend, "spend"),
            (receipt, "receipt"),
        ] {
            assert_eq!(f("apr-1"), format!("{BASE}/approvals/apr-1/{step}"));
        }
    }
}
