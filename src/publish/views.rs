//! The values the publication routes take and answer (`/v1/m/publish`), as `publish`'s own
//! types: the server's [`super::machine`] returns them, the approval flow
//! ([`super::approve`]) reads them through its [`super::approve::Server`], and
//! [`crate::api::publish`] re-exports them as the wire contract. A field a type declares is
//! always present on the wire: an absent value is `null`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::adapter::Effects;
use super::authorisation::LedgerHead;
use super::intent::{Intent, IntentState};
use super::receipt::Outcome;
use crate::authority::dsse::Envelope;

/// `POST /intents`: publish `run`'s latest bound candidate as one commit on `branch` of
/// `remote`, with `title` (and `body`) as the commit's and the pull request's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeRequest {
    pub run: String,
    pub remote: String,
    pub branch: String,
    pub title: String,
    /// The body (may be omitted: empty).
    #[serde(default)]
    pub body: String,
}

/// An intent as it stands now (`GET /intents`, `GET /intents/{intent}`): the stored intent,
/// with `state` and `causes` as judged now for one recorded AWAITING_AUTHORITY.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IntentView {
    #[serde(flatten)]
    pub intent: Intent,
    /// The recorded state when the intent is judged BLOCKED now (its evidence no longer
    /// passes); `null` otherwise.
    #[serde(default)]
    pub recorded_state: Option<IntentState>,
    /// When the state was judged (an empty string when the gate could not be evaluated);
    /// `null` for the states that are facts (BLOCKED, PUBLISHED, FAILED as recorded).
    #[serde(default)]
    pub state_evaluated_at: Option<String>,
}

/// A receipt file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptRef {
    pub id: String,
    #[schema(value_type = String)]
    pub path: PathBuf,
    /// True once the person's key signed it (with `<path>.sig` beside it).
    #[serde(default)]
    pub signed: bool,
}

/// A refusal or failure, named: a stable code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

/// `POST /intents/{intent}/approvals` → 201: the approval opened and its receipt reserved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OpenedApproval {
    pub approval: String,
    pub intent: String,
    pub receipt: ReceiptRef,
}

/// `POST /approvals/{approval}/check` → 200: the intent and the state it was re-read in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckView {
    pub approval: String,
    pub intent: Intent,
    /// The remote branch's tip, re-read now (equal to the intent's lease).
    pub remote_tip: Option<String>,
    pub ledger_head: LedgerHead,
    /// The gate's state (`awaiting_human`).
    pub gate_state: String,
    /// The evidence the gate counted (the gate's fresh history items), shown by count.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub evidence: Vec<serde_json::Value>,
    /// The key ids the server trusts now.
    #[serde(default)]
    pub key_ids: Vec<String>,
    #[serde(default)]
    pub receipt: Option<ReceiptRef>,
}

/// `POST /approvals/{approval}/refusal`: a refusal at the terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefusalRequest {
    /// One of the terminal refusal codes (`no_terminal`, `aborted`, `wrong_revision`, …).
    pub code: String,
    #[serde(default)]
    pub message: String,
}

/// The answer to a refusal: the redacted receipt written, and its statement to sign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RefusalAnswer {
    pub refused: Failure,
    pub receipt: ReceiptRef,
    /// The receipt's statement (base64), which the person's key may sign.
    pub statement_b64: Option<String>,
}

/// `POST /approvals/{approval}/authorisation` and `…/spend`: the authorisation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeRequest {
    #[schema(value_type = Object)]
    pub envelope: Envelope,
}

/// `POST /approvals/{approval}/authorisation` → 201: appended to the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MintedAnswer {
    pub nonce_sha256: String,
    /// The ledger seq of `publish.authorisation.minted`.
    pub seq: u64,
    pub expires_at: String,
}

/// `POST /approvals/{approval}/spend` → 200: what the adapter did, and the receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpendAnswer {
    pub outcome: Outcome,
    pub effects: Effects,
    pub error: Option<Failure>,
    pub receipt: ReceiptRef,
    /// The receipt's statement (base64), which the person's key signs.
    pub statement_b64: Option<String>,
}

/// What happened when an authorisation was spent on an intent (its `outcome`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IntentOutcome {
    /// The approval whose authorisation was spent.
    #[serde(default)]
    pub approval: String,
    pub effects: Effects,
    pub error: Option<Failure>,
}

/// `POST /approvals/{approval}/receipt`: the signed receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptRequest {
    /// The DSSE envelope's canonical file bytes.
    pub envelope_json: String,
    /// The detached SSHSIG over those bytes.
    pub sshsig: String,
}

/// The answer to a signed receipt: the receipt and its `.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SignedReceipt {
    pub receipt: ReceiptRef,
    #[schema(value_type = String)]
    pub sig: PathBuf,
}
