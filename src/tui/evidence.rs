//! What the cockpit shows about candidates, their gate, publication intents and receipts, as
//! the server reports them (`/v1/m/evidence`, `/v1/m/publish`). Only the fields the cockpit
//! draws are read; every string here is untrusted (agent, repository, remote, forge) and is
//! drawn only through [`crate::text`]. Nothing is invented: a gate the cockpit has not heard
//! about is unknown, a receipt not verified yet says so.

use std::collections::BTreeMap;

use hyper::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::client::{Client, ClientError};

/// The base of the evidence routes.
pub const EVIDENCE: &str = "/v1/m/evidence";

/// A bound candidate, as `GET /candidates` lists it (its identity document is not kept).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CandidateView {
    pub id: String,
    pub run_ref: String,
    #[serde(default)]
    pub branch: String,
    #[serde(default)]
    pub bound_at: String,
    /// `format=… digest=candidate-identity-sha256/1 <hex>`.
    #[serde(default)]
    pub identity_digest: String,
}

/// The gate's overall state (`crate::gate::GateState` on the wire, snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateState {
    NotStarted,
    CheckFailed,
    EvidenceStale,
    /// Every expected evidence passed; a person has not decided. Never acceptance.
    AwaitingHuman,
    Passed,
    /// A state this client does not know.
    Unknown,
}

impl GateState {
    pub fn parse(s: &str) -> GateState {
        match s {
            "not_started" => GateState::NotStarted,
            "check_failed" => GateState::CheckFailed,
            "evidence_stale" => GateState::EvidenceStale,
            "awaiting_human" => GateState::AwaitingHuman,
            "passed" => GateState::Passed,
            _ => GateState::Unknown,
        }
    }

    /// The words shown for it. Awaiting a decision says so: it never reads as accepted.
    pub fn label(self) -> &'static str {
        match self {
            GateState::NotStarted => "not started",
            GateState::CheckFailed => "check failed",
            GateState::EvidenceStale => "evidence stale",
            GateState::AwaitingHuman => "awaiting human",
            GateState::Passed => "passed",
            GateState::Unknown => "unknown",
        }
    }

    /// At most 8 columns, for narrow lists.
    pub fn short(self) -> &'static str {
        match self {
            GateState::NotStarted => "not run",
            GateState::CheckFailed => "failed",
            GateState::EvidenceStale => "stale",
            GateState::AwaitingHuman => "awaiting",
            GateState::Passed => "passed",
            GateState::Unknown => "?",
        }
    }
}

/// One node of the gate's graph.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GateNode {
    pub id: String,
    /// `prerequisites`, `prerequisite`, `task`, `expected_evidence`, `evidence`,
    /// `human_decision`.
    pub kind: String,
    pub label: String,
    pub state: String,
    #[serde(default)]
    pub cause: Option<String>,
    #[serde(default)]
    pub evidence: Option<String>,
    #[serde(default)]
    pub children: Vec<GateNode>,
}

/// The candidate's identity as the gate saw it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
pub struct IdentityView {
    #[serde(default)]
    pub bound: String,
    /// `current`, `changed` or `unavailable`.
    #[serde(default)]
    pub now: String,
    #[serde(default)]
    pub current: Option<String>,
}

/// The approved policy the gate judged under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PolicyView {
    pub workspace: String,
    pub digest: String,
}

/// `GET /candidates/{id}/gate`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GateView {
    pub candidate: String,
    pub run: String,
    pub state: String,
    #[serde(default)]
    pub evidence_ok: bool,
    #[serde(default)]
    pub identity: IdentityView,
    #[serde(default)]
    pub policy: Option<PolicyView>,
    #[serde(default)]
    pub nodes: Vec<GateNode>,
    #[serde(default)]
    pub causes: Vec<String>,
    #[serde(default)]
    pub evaluated_at: String,
}

impl GateView {
    pub fn gate_state(&self) -> GateState {
        GateState::parse(&self.state)
    }
}

/// The candidate an intent publishes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IntentCandidate {
    pub id: String,
    #[serde(default)]
    pub digest: String,
}

/// The remote of an intent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
pub struct IntentRemote {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub url: String,
}

/// One publication intent (`GET /v1/m/publish/intents`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct IntentView {
    pub id: String,
    pub run: String,
    pub branch: String,
    pub title: String,
    /// `awaiting_authority`, `blocked`, `published`, `failed`.
    pub state: String,
    #[serde(default)]
    pub causes: Vec<String>,
    pub candidate: IntentCandidate,
    #[serde(default)]
    pub revision: String,
    #[serde(default)]
    pub remote: IntentRemote,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub outcome: Option<crate::api::publish::IntentOutcome>,
}

impl IntentView {
    pub fn awaiting(&self) -> bool {
        self.state == "awaiting_authority"
    }

    /// The state as the operator reads it (`AWAITING_AUTHORITY`, `BLOCKED`, …).
    pub fn label(&self) -> String {
        self.state.to_uppercase()
    }
}

/// One receipt, as `GET /receipts` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReceiptItem {
    pub id: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub at: Option<String>,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub problem: Option<String>,
}

impl ReceiptItem {
    /// A signed receipt (a DSSE envelope the publish path writes).
    pub fn is_signed(&self) -> bool {
        self.kind.as_deref() == Some("signed")
    }
}

/// What verifying a receipt says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every digest it binds was recomputed and holds (for a signed one: the signature, the
    /// SSHSIG, the statement and every reachable subject).
    Holds,
    /// Something differs or a signature fails.
    Fails,
    /// Nothing differs, but some digest could not be recomputed (a file or worktree gone).
    Unreachable,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Fails => "fails",
            Verdict::Unreachable => "unreachable",
        }
    }
}

/// One check of a verification: its name, its outcome word, and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyCheck {
    pub name: String,
    pub outcome: String,
    pub detail: String,
}

/// A verification: who said it (the server, or this machine's verifier for a signed
/// receipt), the verdict, and its checks; or why it could not be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// `server` or `local`.
    pub by: &'static str,
    pub result: Result<(Verdict, Vec<VerifyCheck>), String>,
    /// What the verified content says it is (for a signed receipt, which the list cannot
    /// read: `publication.published` of `int-0003`), once its signature held.
    pub kind: Option<String>,
    pub subject: Option<String>,
}

impl Verification {
    pub fn verdict(&self) -> Option<Verdict> {
        self.result.as_ref().ok().map(|(v, _)| *v)
    }
}

fn bad(e: serde_json::Error) -> ClientError {
    ClientError::Http(format!("unexpected answer from the server: {e}"))
}

/// `GET /candidates`, one entry per candidate, oldest first.
pub async fn fetch_candidates(client: &Client) -> Result<Vec<CandidateView>, ClientError> {
    let mut v = client
        .call(Method::GET, &format!("{EVIDENCE}/candidates"), None)
        .await?;
    serde_json::from_value(v["items"].take()).map_err(bad)
}

/// The latest candidate of each run (the highest id: ids grow with time).
pub fn latest_by_run(cands: &[CandidateView]) -> BTreeMap<String, CandidateView> {
    let mut out: BTreeMap<String, CandidateView> = BTreeMap::new();
    for c in cands {
        let newer = out
            .get(&c.run_ref)
            .is_none_or(|old| id_number(&c.id) > id_number(&old.id));
        if newer {
            out.insert(c.run_ref.clone(), c.clone());
        }
    }
    out
}

/// The number of `cand-0012`, `rcpt-0003`, `int-0001` (0 when there is none).
pub fn id_number(id: &str) -> u64 {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `GET /candidates/{id}/gate`.
pub async fn fetch_gate(client: &Client, candidate: &str) -> Result<GateView, ClientError> {
    let v = client
        .call(
            Method::GET,
            &format!("{EVIDENCE}/candidates/{candidate}/gate"),
            None,
        )
        .await?;
    serde_json::from_value(v).map_err(bad)
}

/// `GET /v1/m/publish/intents`.
pub async fn fetch_intents(client: &Client) -> Result<Vec<IntentView>, ClientError> {
    let v: crate::api::Items<IntentView> = client.get(&crate::api::publish::intents()).await?;
    Ok(v.items)
}

/// `GET /receipts`, oldest first.
pub async fn fetch_receipts(client: &Client) -> Result<Vec<ReceiptItem>, ClientError> {
    let mut v = client
        .call(Method::GET, &format!("{EVIDENCE}/receipts"), None)
        .await?;
    serde_json::from_value(v["items"].take()).map_err(bad)
}

/// The verdict of the server's plain-receipt report (`receipts::Report`): any `differs` fails
/// it; otherwise any `unreachable` makes it unreachable.
pub fn plain_verdict(report: &Value) -> Result<(Verdict, Vec<VerifyCheck>), String> {
    if let Some(e) = report["error"].as_str() {
        return Err(e.to_string());
    }
    let Some(checks) = report["checks"].as_array() else {
        return Err("the server's verification holds no checks".into());
    };
    let checks: Vec<VerifyCheck> = checks
        .iter()
        .map(|c| VerifyCheck {
            name: c["name"].as_str().unwrap_or("?").to_string(),
            outcome: c["state"].as_str().unwrap_or("?").to_string(),
            detail: c["detail"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    let verdict =
        if report["ok"] != Value::Bool(true) || checks.iter().any(|c| c.outcome == "differs") {
            Verdict::Fails
        } else if checks.iter().any(|c| c.outcome != "holds") {
            Verdict::Unreachable
        } else {
            Verdict::Holds
        };
    Ok((verdict, checks))
}

/// Verifies one receipt: the server's report (`GET /receipts/{id}`, plain and signed
/// receipts alike). Only when the server says it cannot verify a signed receipt (an older
/// server), this machine's verifier ([`crate::authority::statement::verify_receipt_file`])
/// checks the listed file with the keys the server trusts (`GET /v1/m/authority/keys`). A
/// file this machine cannot read is unreachable, never "holds".
pub async fn verify_receipt(client: &Client, item: &ReceiptItem) -> Verification {
    let (result, kind, subject) = match client
        .call(
            Method::GET,
            &format!("{EVIDENCE}/receipts/{}", item.id),
            None,
        )
        .await
    {
        Ok(v) => {
            let r = &v["verify"];
            let text = |k: &str| r[k].as_str().filter(|s| !s.is_empty()).map(str::to_string);
            (plain_verdict(r), text("kind"), text("subject"))
        }
        Err(ClientError::Api { message, .. }) => (Err(message), None, None),
        Err(e) => (Err(e.to_string()), None, None),
    };
    let envelope = matches!(&result, Err(m) if m.contains("signed receipt"));
    if !envelope {
        return Verification {
            by: "server",
            result,
            kind,
            subject,
        };
    }
    local_verify(client, item).await
}

/// This machine's verifier for a signed receipt.
async fn local_verify(client: &Client, item: &ReceiptItem) -> Verification {
    let keys = match client
        .get::<crate::api::authority::Registry>(&crate::api::authority::keys())
        .await
    {
        Ok(v) => v,
        Err(ClientError::Api { message, .. }) => {
            return Verification {
                by: "local",
                result: Err(format!("the trusted keys: {message}")),
                kind: None,
                subject: None,
            };
        }
        Err(e) => {
            return Verification {
                by: "local",
                result: Err(format!("the trusted keys: {e}")),
                kind: None,
                subject: None,
            };
        }
    };
    let trusted: Vec<ed25519_dalek::VerifyingKey> = keys
        .items
        .iter()
        .filter_map(|k| k.verifying_key().ok())
        .collect();
    let path = std::path::PathBuf::from(&item.file);
    let result = tokio::task::spawn_blocking(move || {
        crate::authority::statement::verify_receipt_file(&path, &trusted)
    })
    .await;
    let mut subject = None;
    let result = match result {
        Ok(Ok(report)) => {
            if report.ok() {
                subject = report
                    .statement
                    .as_ref()
                    .and_then(|st| st["predicate"]["intent"]["id"].as_str())
                    .map(str::to_string);
            }
            use crate::authority::statement::Outcome;
            let checks: Vec<VerifyCheck> = report
                .checks
                .iter()
                .map(|c| VerifyCheck {
                    name: c.check.clone(),
                    outcome: match c.outcome {
                        Outcome::Holds => "holds",
                        Outcome::Fails => "fails",
                        Outcome::Unreachable => "unreachable",
                    }
                    .to_string(),
                    detail: c.detail.clone(),
                })
                .collect();
            let verdict = if !report.ok() {
                Verdict::Fails
            } else if checks.iter().any(|c| c.outcome != "holds") {
                Verdict::Unreachable
            } else {
                Verdict::Holds
            };
            Ok((verdict, checks))
        }
        Ok(Err(e)) => Err(format!("unreachable from this machine: {e}")),
        Err(e) => Err(e.to_string()),
    };
    Verification {
        by: "local",
        result,
        kind: None,
        subject,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn latest_candidate_per_run_is_the_highest_id() {
        let c = |id: &str, run: &str| CandidateView {
            id: id.into(),
            run_ref: run.into(),
            branch: String::new(),
            bound_at: String::new(),
            identity_digest: String::new(),
        };
        let all = [
            c("cand-0002", "run-0001"),
            c("cand-0010", "run-0001"),
            c("cand-0003", "run-0002"),
            c("cand-0009", "run-0001"),
        ];
        let m = latest_by_run(&all);
        assert_eq!(m["run-0001"].id, "cand-0010");
        assert_eq!(m["run-0002"].id, "cand-0003");
    }

    #[test]
    fn plain_verdicts_never_call_unreachable_holds() {
        let r = |states: &[&str], ok: bool| {
            let checks: Vec<Value> = states
                .iter()
                .map(|s| json!({"name": "x", "state": s, "detail": ""}))
                .collect();
            plain_verdict(&json!({"ok": ok, "checks": checks}))
                .unwrap()
                .0
        };
        assert_eq!(r(&["holds", "holds"], true), Verdict::Holds);
        assert_eq!(r(&["holds", "unreachable"], true), Verdict::Unreachable);
        assert_eq!(r(&["holds", "differs"], false), Verdict::Fails);
        assert_eq!(r(&["holds"], false), Verdict::Fails, "ok=false fails");
        assert!(plain_verdict(&json!({"error": "a signed receipt"})).is_err());
    }

    #[test]
    fn gate_states_parse_and_awaiting_never_reads_as_passed() {
        for s in [
            "not_started",
            "check_failed",
            "evidence_stale",
            "awaiting_human",
            "passed",
        ] {
            assert_ne!(GateState::parse(s), GateState::Unknown, "{s}");
        }
        let a = GateState::AwaitingHuman;
        assert!(!a.label().contains("pass") && !a.short().contains("pass"));
        assert!(!a.label().contains("accept"));
    }
}
