//! What the cockpit shows about candidates, their gate, publication intents and receipts, as
//! the server reports them (`/v1/m/evidence`, `/v1/m/publish`). The evidence answers are read
//! into the wire contract's types ([`crate::api::evidence`]: the gate, its state and nodes,
//! the receipts and their verification are those types; a candidate keeps only its row).
//! Every string here is untrusted (agent, repository, remote, forge) and is drawn only
//! through [`crate::text`]. Nothing is invented: a gate the cockpit has not heard about is
//! unknown, a receipt not verified yet says so; an answer that does not match the contract is
//! an error shown as such (`ClientError::Contract`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::api::evidence::{self as wire, CandidateList, ReceiptList, ReceiptView, Report};
pub use crate::api::evidence::{
    Gate as GateView, GateState, IdentityView, Node as GateNode, PolicyView, ReceiptItem,
    Verification as ServerVerification,
};
use crate::client::{Client, ClientError};

/// What the cockpit keeps of a bound candidate (`GET /candidates`): its row, without the
/// identity document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CandidateView {
    pub id: String,
    pub run_ref: String,
    pub branch: String,
    pub bound_at: String,
    /// `format=… digest=candidate-identity-sha256/1 <hex>`.
    pub identity_digest: String,
}

impl From<wire::CandidateView> for CandidateView {
    fn from(v: wire::CandidateView) -> Self {
        CandidateView {
            id: v.candidate.id,
            run_ref: v.candidate.run_ref,
            branch: v.candidate.branch,
            bound_at: v.candidate.bound_at,
            identity_digest: v.identity_digest,
        }
    }
}

impl CandidateView {
    /// The same candidate named as a cockpit of several hosts names it: `HOST/ID`, of the
    /// run `HOST/REF`.
    pub fn on_host(mut self, host: &str) -> CandidateView {
        self.id = crate::tui::hosts::join(host, &self.id);
        self.run_ref = crate::tui::hosts::join(host, &self.run_ref);
        self
    }
}

/// What a cockpit of several hosts last heard of each host's candidates.
pub type HostCandidates = BTreeMap<String, Vec<CandidateView>>;

/// `GET /candidates` of every host of a cockpit of several, each named `HOST/ID`; a host
/// that does not answer keeps what it last gave (its gates then say they cannot be read).
/// `Err` only when no host answered and none was ever heard.
pub async fn fetch_candidates_of_hosts(
    hosts: &[(String, Client)],
    last: &mut HostCandidates,
) -> Result<Vec<CandidateView>, ClientError> {
    let mut answers = Vec::new();
    for (name, client) in hosts {
        answers.push((name.clone(), fetch_candidates(client).await));
    }
    of_hosts(answers, last, CandidateView::on_host, |c| c)
}

/// The lists of several hosts in one: each answer's items named for its host (`on_host`)
/// and kept in `last`; a host whose answer failed gives what it last gave, through `stale`.
/// `Err` (what each said) only when every host failed and none was ever heard.
fn of_hosts<T: Clone>(
    answers: Vec<(String, Result<Vec<T>, ClientError>)>,
    last: &mut BTreeMap<String, Vec<T>>,
    on_host: fn(T, &str) -> T,
    stale: fn(T) -> T,
) -> Result<Vec<T>, ClientError> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let hosts = answers.len();
    for (name, answer) in answers {
        match answer {
            Ok(list) => {
                let list: Vec<T> = list.into_iter().map(|x| on_host(x, &name)).collect();
                out.extend(list.iter().cloned());
                last.insert(name, list);
            }
            Err(e) => {
                if let Some(kept) = last.get(&name) {
                    out.extend(kept.iter().cloned().map(stale));
                }
                errors.push(format!("{name}: {e}"));
            }
        }
    }
    if out.is_empty() && !errors.is_empty() && errors.len() == hosts {
        return Err(ClientError::Http(errors.join("; ")));
    }
    Ok(out)
}

/// The candidate an intent publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct IntentCandidate {
    pub id: String,
    #[cfg_attr(test, serde(default))]
    pub digest: String,
}

/// The remote of an intent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(Deserialize))]
pub struct IntentRemote {
    #[cfg_attr(test, serde(default))]
    pub name: String,
    #[cfg_attr(test, serde(default))]
    pub url: String,
}

/// The cockpit's row of a publication intent: what its panes show, built from the
/// contract's [`crate::api::publish::IntentView`] (it never reads the wire itself; tests
/// build rows from JSON fixtures).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct IntentView {
    pub id: String,
    pub run: String,
    pub branch: String,
    pub title: String,
    /// `awaiting_authority`, `blocked`, `published`, `failed`.
    pub state: String,
    #[cfg_attr(test, serde(default))]
    pub causes: Vec<String>,
    pub candidate: IntentCandidate,
    #[cfg_attr(test, serde(default))]
    pub revision: String,
    #[cfg_attr(test, serde(default))]
    pub remote: IntentRemote,
    #[cfg_attr(test, serde(default))]
    pub created_at: String,
    #[cfg_attr(test, serde(default))]
    pub outcome: Option<crate::api::publish::IntentOutcome>,
    /// The host whose intent it is, in a cockpit of several (its `id` and `run` are then
    /// `HOST/…`: [`IntentView::on_host`]); `None` in a one-host cockpit.
    #[cfg_attr(test, serde(default))]
    pub host: Option<String>,
    /// An intent of a host that stopped answering, as it was last heard: kept, never
    /// shown as awaiting (its state now is unknown) and never approvable.
    #[cfg_attr(test, serde(default))]
    pub stale: bool,
}

impl IntentView {
    /// Whether it awaits a person's authority (a stale one's state is unknown: no).
    pub fn awaiting(&self) -> bool {
        self.state == "awaiting_authority" && !self.stale
    }

    /// The state as the operator reads it (`AWAITING_AUTHORITY`, `BLOCKED`, …); a stale
    /// intent's is unknown.
    pub fn label(&self) -> String {
        if self.stale {
            "STALE · HOST UNREACHABLE".to_string()
        } else {
            self.state.to_uppercase()
        }
    }

    /// The same intent named as the cockpit of several hosts names it: `HOST/ID`, of the
    /// run `HOST/REF` ([`crate::tui::hosts::join`]).
    pub fn on_host(mut self, host: &str) -> IntentView {
        self.id = crate::tui::hosts::join(host, &self.id);
        self.run = crate::tui::hosts::join(host, &self.run);
        self.candidate.id = crate::tui::hosts::join(host, &self.candidate.id);
        self.host = Some(host.to_string());
        self
    }

    /// Its id as its own host knows it (`int-0001` of `box/int-0001`).
    pub fn own_id(&self) -> &str {
        match &self.host {
            Some(_) => crate::tui::hosts::split(&self.id).map_or(self.id.as_str(), |(_, i)| i),
            None => &self.id,
        }
    }

    /// Its run as its own host knows it.
    pub fn own_run(&self) -> &str {
        match &self.host {
            Some(_) => crate::tui::hosts::split(&self.run).map_or(self.run.as_str(), |(_, r)| r),
            None => &self.run,
        }
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

/// `GET /candidates`, one entry per candidate, oldest first.
pub async fn fetch_candidates(client: &Client) -> Result<Vec<CandidateView>, ClientError> {
    let v: CandidateList = client.get(wire::CANDIDATES).await?;
    Ok(v.items.into_iter().map(CandidateView::from).collect())
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
    client.get(&wire::path(wire::GATE, candidate)).await
}

/// `GET /v1/m/publish/intents`.
pub async fn fetch_intents(client: &Client) -> Result<Vec<IntentView>, ClientError> {
    let v: crate::api::Items<crate::api::publish::IntentView> =
        client.get(&crate::api::publish::intents()).await?;
    Ok(v.items.into_iter().map(IntentView::from).collect())
}

impl From<crate::api::publish::IntentView> for IntentView {
    fn from(v: crate::api::publish::IntentView) -> Self {
        let i = v.intent;
        IntentView {
            id: i.id,
            run: i.run,
            branch: i.branch,
            title: i.title,
            state: i.state.as_str().to_string(),
            causes: i.causes,
            candidate: IntentCandidate {
                id: i.candidate.id,
                digest: i.candidate.digest,
            },
            revision: i.revision,
            remote: IntentRemote {
                name: i.remote.name,
                url: i.remote.url,
            },
            created_at: i.created_at,
            outcome: i.outcome,
            host: None,
            stale: false,
        }
    }
}

/// What a cockpit of several hosts last heard of each host's intents (kept by the task
/// that fetches them, so that a host that stops answering keeps its rows, stale).
pub type HostIntents = BTreeMap<String, Vec<IntentView>>;

/// `GET /v1/m/publish/intents` of every host of a cockpit of several, each intent named
/// `HOST/ID` ([`IntentView::on_host`]), in one list. A host that does not answer keeps the
/// intents it last gave, marked stale; one never heard gives none. `Err` only when no host
/// answered and none was ever heard (what each said).
pub async fn fetch_intents_of_hosts(
    hosts: &[(String, Client)],
    last: &mut HostIntents,
) -> Result<Vec<IntentView>, ClientError> {
    let mut answers = Vec::new();
    for (name, client) in hosts {
        answers.push((name.clone(), fetch_intents(client).await));
    }
    of_hosts(answers, last, IntentView::on_host, |mut i| {
        i.stale = true;
        i
    })
}

/// `GET /receipts`, oldest first.
pub async fn fetch_receipts(client: &Client) -> Result<Vec<ReceiptItem>, ClientError> {
    let v: ReceiptList = client.get(wire::RECEIPTS).await?;
    Ok(v.items)
}

/// The verdict of the server's plain-receipt report (`receipts::Report`): any `differs` fails
/// it; otherwise any `unreachable` makes it unreachable.
pub fn plain_verdict(report: &Report) -> (Verdict, Vec<VerifyCheck>) {
    let checks: Vec<VerifyCheck> = report
        .checks
        .iter()
        .map(|c| VerifyCheck {
            name: c.name.clone(),
            outcome: c.state.as_str().to_string(),
            detail: c.detail.clone(),
        })
        .collect();
    let verdict = if !report.ok || checks.iter().any(|c| c.outcome == "differs") {
        Verdict::Fails
    } else if checks.iter().any(|c| c.outcome != "holds") {
        Verdict::Unreachable
    } else {
        Verdict::Holds
    };
    (verdict, checks)
}

/// The verdict of what the server answered: its report's, or why it could not verify.
pub fn server_verdict(v: &ServerVerification) -> Result<(Verdict, Vec<VerifyCheck>), String> {
    match v {
        ServerVerification::Report(r) => Ok(plain_verdict(r)),
        ServerVerification::Failed { error } => Err(error.clone()),
    }
}

/// Verifies one receipt: the server's report (`GET /receipts/{id}`, plain and signed
/// receipts alike). Only when the server says it cannot verify a signed receipt (an older
/// server), this machine's verifier ([`crate::authority::statement::verify_receipt_file`])
/// checks the listed file with the keys the server trusts (`GET /v1/m/authority/keys`). A
/// file this machine cannot read is unreachable, never "holds".
pub async fn verify_receipt(client: &Client, item: &ReceiptItem) -> Verification {
    let answer = client
        .get::<ReceiptView>(&wire::path(wire::RECEIPT, &item.id))
        .await;
    let (result, kind, subject) = match answer {
        Ok(v) => {
            let (kind, subject) = match &v.verify {
                ServerVerification::Report(r) => {
                    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
                    (text(&r.kind), text(&r.subject))
                }
                ServerVerification::Failed { .. } => (None, None),
            };
            (server_verdict(&v.verify), kind, subject)
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
    use serde_json::{Value, json};

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
                .map(|s| {
                    json!({"name": "x", "recipe": "r", "expected": "e", "found": null,
                           "state": s, "detail": ""})
                })
                .collect();
            let report: Report = serde_json::from_value(json!({"file": "f", "id": "rcpt-0001",
                "kind": "k", "subject": "s", "at": "t", "ok": ok, "checks": checks}))
            .unwrap();
            plain_verdict(&report).0
        };
        assert_eq!(r(&["holds", "holds"], true), Verdict::Holds);
        assert_eq!(r(&["holds", "unreachable"], true), Verdict::Unreachable);
        assert_eq!(r(&["holds", "differs"], false), Verdict::Fails);
        assert_eq!(r(&["holds"], false), Verdict::Fails, "ok=false fails");
        let failed: ServerVerification =
            serde_json::from_value(json!({"error": "a signed receipt"})).unwrap();
        assert!(server_verdict(&failed).is_err());
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
            assert!(serde_json::from_value::<GateState>(json!(s)).is_ok(), "{s}");
        }
        let a = GateState::AwaitingHuman;
        assert!(!a.label().contains("pass") && !a.short().contains("pass"));
        assert!(!a.label().contains("accept"));
    }

    /// Several hosts' lists in one: each named for its host; a host that fails gives what it
    /// last gave (through `stale`), one never heard gives nothing; only when every host
    /// failed with nothing heard is it an error, naming each.
    #[test]
    fn the_lists_of_several_hosts_are_one_and_a_failed_host_keeps_its_last_as_stale() {
        let tag = |x: String, h: &str| format!("{h}/{x}");
        let stale = |x: String| format!("{x} (stale)");
        let err = |m: &str| Err(ClientError::Http(m.into()));
        let mut last = BTreeMap::new();
        let both = of_hosts(
            vec![
                ("a".into(), Ok(vec!["int-0001".to_string()])),
                (
                    "b".into(),
                    Ok(vec!["int-0001".to_string(), "int-0002".into()]),
                ),
            ],
            &mut last,
            tag,
            stale,
        )
        .unwrap();
        assert_eq!(both, ["a/int-0001", "b/int-0001", "b/int-0002"]);
        let b_down = of_hosts(
            vec![
                ("a".into(), Ok(vec![])),
                ("b".into(), err("ssh ended")),
                ("c".into(), err("never heard")),
            ],
            &mut last,
            tag,
            stale,
        )
        .unwrap();
        assert_eq!(b_down, ["b/int-0001 (stale)", "b/int-0002 (stale)"]);
        let mut none = BTreeMap::new();
        let e = of_hosts(
            vec![("a".into(), err("down")), ("b".into(), err("refused"))],
            &mut none,
            tag,
            stale,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("a: ") && e.contains("down") && e.contains("b: "),
            "{e}"
        );
    }
}
