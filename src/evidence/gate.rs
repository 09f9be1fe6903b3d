//! The gate: what still blocks a candidate, and why.
//!
//! Evaluated afresh at every query (and before every transition: issue 6's intents call
//! [`evaluate`]): the candidate's identity is recomputed from its worktree and the
//! workspace's approved policy digest is read now. Evidence recorded for another identity
//! or another policy digest is stale: it stays in history and is never reused.
//!
//! The graph, in dependency order: prerequisites (the candidate is bound and still current,
//! the policy is approved) → the task (run the policy's checks) → the expected evidence (one
//! per check of the policy: not_started, passed, failed or stale, with its cause and its
//! evidence entry) → the human decision (satisfied only by a person's publication
//! authorisation spent for this exact identity, read from the ledger). Passing checks is
//! never approval: with every check green the state is `awaiting_human`.
//!
//! When the approved policy says `require = ["tribunal"]`, a `tribunal` node sits between the
//! expected evidence and the human decision: satisfied only by a ledger event
//! `tribunal.round.recorded` with `unanimous: true` whose `identity` is the current identity
//! digest. A unanimous round on other bytes is listed as stale; with the evidence passed and
//! no such round the state is `awaiting_tribunal`, and the decision stays blocked.

use std::io::{BufRead, BufReader};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::candidate::{self, Candidate, CandidateError, Currency, IDENTITY_RECIPE};
use crate::evidence::checks;
use crate::evidence::policy::{POLICY_DIGEST_RECIPE, Policy};
use crate::evidence::store::{self, Entry, StoreError};
use crate::files::{self, FilesError};
use crate::home::Home;

/// The ledger kind (issue 6) that records a person's publication authorisation being spent;
/// its field `identity` holds the identity digest it authorised.
pub const AUTHORISATION_SPENT_KIND: &str = "publish.authorisation.spent";

/// The ledger kind (issue 14) that records a tribunal round's outcome: `{round, candidate,
/// run, identity, identity_recipe, envelope, state, mode, unanimous, new_findings,
/// round_sha256, by}`; `unanimous` is `Round::counts_for_gate()`.
pub const TRIBUNAL_ROUND_KIND: &str = "tribunal.round.recorded";

/// The overall state of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GateState {
    /// Nothing judged these bytes under this policy yet (or no policy is approved).
    NotStarted,
    /// A check failed on these exact bytes under this policy.
    CheckFailed,
    /// What was recorded names other bytes or another policy (or the candidate's worktree
    /// moved): it is history, not evidence for now.
    EvidenceStale,
    /// Every expected evidence passed, fresh; a person has not decided. Never acceptance.
    AwaitingHuman,
    /// Every expected evidence passed, fresh, but the policy requires a unanimous tribunal
    /// round on these exact bytes and none is recorded.
    AwaitingTribunal,
    /// Evidence passed and a person's publication authorisation for this identity was spent.
    Passed,
}

impl GateState {
    pub fn as_str(self) -> &'static str {
        match self {
            GateState::NotStarted => "not_started",
            GateState::CheckFailed => "check_failed",
            GateState::EvidenceStale => "evidence_stale",
            GateState::AwaitingHuman => "awaiting_human",
            GateState::AwaitingTribunal => "awaiting_tribunal",
            GateState::Passed => "passed",
        }
    }

    /// The words shown for it. Awaiting a decision says so: it never reads as accepted.
    pub fn label(self) -> &'static str {
        match self {
            GateState::NotStarted => "not started",
            GateState::CheckFailed => "check failed",
            GateState::EvidenceStale => "evidence stale",
            GateState::AwaitingHuman => "awaiting human",
            GateState::AwaitingTribunal => "awaiting tribunal",
            GateState::Passed => "passed",
        }
    }

    /// At most 8 columns, for narrow lists.
    pub fn short(self) -> &'static str {
        match self {
            GateState::NotStarted => "not run",
            GateState::CheckFailed => "failed",
            GateState::EvidenceStale => "stale",
            GateState::AwaitingHuman => "awaiting",
            GateState::AwaitingTribunal => "tribunal",
            GateState::Passed => "passed",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Candidate(#[from] CandidateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("cannot read the workspace's policy: {0}")]
    Policy(String),
}

impl GateError {
    pub fn code(&self) -> &'static str {
        match self {
            GateError::Candidate(e) => e.code(),
            _ => "internal",
        }
    }
}

/// One node of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = GateNode)]
pub struct Node {
    pub id: String,
    /// `prerequisites`, `prerequisite`, `task`, `expected_evidence`, `evidence`, `tribunal`,
    /// `tribunal_round`, `human_decision`.
    pub kind: String,
    pub label: String,
    /// prerequisite: satisfied | unmet; task: not_started | running | done | blocked;
    /// evidence: not_started | passed | failed | stale; tribunal: satisfied | awaiting |
    /// stale; tribunal_round: satisfied | stale | not_unanimous; human decision: blocked |
    /// awaiting | satisfied; the groups summarise their children.
    pub state: String,
    pub cause: Option<String>,
    /// The evidence entry the state comes from.
    pub evidence: Option<String>,
    /// For a check: its deadline (the upper bound a progress line may show); else `null`.
    pub deadline_secs: Option<u64>,
    /// The node's own causes, nodes of the same shape (a reference, not an inlined copy).
    #[schema(no_recursion)]
    pub children: Vec<Node>,
}

impl Node {
    fn new(id: impl Into<String>, kind: &'static str, label: impl Into<String>) -> Node {
        Node {
            id: id.into(),
            kind: kind.to_string(),
            label: label.into(),
            state: String::new(),
            cause: None,
            evidence: None,
            deadline_secs: None,
            children: Vec::new(),
        }
    }
    fn state(mut self, s: &str, cause: Option<String>) -> Node {
        self.state = s.to_string();
        self.cause = cause;
        self
    }
}

/// One recorded attempt, as the gate judges it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = GateHistoryItem)]
pub struct HistoryItem {
    pub evidence: String,
    pub candidate: String,
    pub attempt: u64,
    pub result: String,
    /// `candidate-identity-sha256/1 <hex>`.
    pub identity: String,
    /// `policy-text-sha256/1 <hex>`.
    pub policy: String,
    pub at: String,
    /// Judges the current identity under the current policy.
    pub fresh: bool,
    /// Why it is stale (`null` when fresh).
    pub stale_because: Option<String>,
}

/// The candidate's identity, bound and now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = GateIdentity)]
pub struct IdentityView {
    /// `format=candidate-identity/1 digest=candidate-identity-sha256/1 <hex>` as bound.
    pub bound: String,
    /// `current`, `changed` or `unavailable`.
    pub now: String,
    /// The identity recomputed now, when it differs (else `null`).
    pub current: Option<String>,
}

/// The approved policy now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = GatePolicy)]
pub struct PolicyView {
    pub workspace: String,
    /// `policy-text-sha256/1 <hex>`.
    pub digest: String,
}

/// The gate of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Gate {
    pub candidate: String,
    pub run: String,
    pub state: GateState,
    /// Every expected evidence passed, fresh for the current identity and policy digest.
    pub evidence_ok: bool,
    pub identity: IdentityView,
    pub policy: Option<PolicyView>,
    pub nodes: Vec<Node>,
    /// What blocks, one sentence each (empty once passed).
    pub causes: Vec<String>,
    /// Every attempt on this run's candidates (or on these exact bytes), oldest first.
    pub history: Vec<HistoryItem>,
    pub evaluated_at: String,
}

/// Reads a workspace's approved policy: `(text, sha256 hex)` while an approval covers the
/// current, non-empty text.
pub type PolicyLookup<'a> = &'a dyn Fn(&str) -> Result<Option<(String, String)>, String>;

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// True when the ledger records a spent publication authorisation for `identity`.
pub fn authorisation_spent(home: &Home, identity: &str) -> Result<Option<u64>, GateError> {
    let path = home.ledger_path();
    let f = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let mut found = None;
    for line in BufReader::new(f).split(b'\n') {
        let line = line.map_err(|e| FilesError::io("read", &path, e))?;
        if !line
            .windows(AUTHORISATION_SPENT_KIND.len())
            .any(|w| w == AUTHORISATION_SPENT_KIND.as_bytes())
        {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v.get("kind").and_then(Value::as_str) == Some(AUTHORISATION_SPENT_KIND)
            && v.get("identity").and_then(Value::as_str) == Some(identity)
        {
            found = v.get("seq").and_then(Value::as_u64).or(Some(0));
        }
    }
    Ok(found)
}

/// One `tribunal.round.recorded` event, as the gate reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundEvent {
    pub seq: u64,
    pub round: String,
    pub candidate: String,
    pub run: String,
    pub identity: String,
    pub state: String,
    pub unanimous: bool,
}

/// Every `tribunal.round.recorded` event of the ledger, oldest first.
pub fn tribunal_rounds(home: &Home) -> Result<Vec<RoundEvent>, GateError> {
    let path = home.ledger_path();
    let f = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for line in BufReader::new(f).split(b'\n') {
        let line = line.map_err(|e| FilesError::io("read", &path, e))?;
        if !line
            .windows(TRIBUNAL_ROUND_KIND.len())
            .any(|w| w == TRIBUNAL_ROUND_KIND.as_bytes())
        {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v.get("kind").and_then(Value::as_str) != Some(TRIBUNAL_ROUND_KIND) {
            continue;
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.push(RoundEvent {
            seq: v.get("seq").and_then(Value::as_u64).unwrap_or(0),
            round: s("round"),
            candidate: s("candidate"),
            run: s("run"),
            identity: s("identity"),
            state: s("state"),
            // Only a literal `true` counts: a missing or malformed field is not unanimity.
            unanimous: v.get("unanimous") == Some(&Value::Bool(true)),
        });
    }
    Ok(out)
}

/// The gate's tribunal node: satisfied only by a unanimous round on the current identity.
fn tribunal_node(
    home: &Home,
    cand: &Candidate,
    current: bool,
    causes: &mut Vec<String>,
) -> Result<(Node, bool), GateError> {
    let digest = cand.identity.digest.as_str();
    let mut children = Vec::new();
    let mut satisfied_by: Option<String> = None;
    let mut stale: Option<String> = None;
    for r in tribunal_rounds(home)? {
        if r.run != cand.run_ref && r.identity != digest {
            continue;
        }
        let node = Node::new(
            format!("round:{}", r.round),
            "tribunal_round",
            format!("{} on {}", r.round, r.candidate),
        );
        let node = Node {
            evidence: Some(r.round.clone()),
            ..if r.identity != digest {
                if !r.unanimous {
                    continue;
                }
                let c = format!(
                    "stale: {} was unanimous on identity {}, not these bytes ({}); it stays in \
                     history and is never reused",
                    r.round,
                    short(&r.identity),
                    short(digest)
                );
                stale.get_or_insert(c.clone());
                node.state("stale", Some(c))
            } else if !current {
                let c = format!(
                    "stale: {} judged the bytes bound as {}, which the worktree no longer holds",
                    r.round, cand.id
                );
                stale.get_or_insert(c.clone());
                node.state("stale", Some(c))
            } else if r.unanimous {
                satisfied_by = Some(format!("{} (ledger seq {})", r.round, r.seq));
                node.state(
                    "satisfied",
                    Some(format!(
                        "unanimous on these exact bytes (ledger seq {})",
                        r.seq
                    )),
                )
            } else {
                node.state(
                    "not_unanimous",
                    Some(format!(
                        "{} on these bytes ended {}: not a unanimous cross-family pass",
                        r.round,
                        if r.state.is_empty() {
                            "without a state"
                        } else {
                            &r.state
                        }
                    )),
                )
            }
        };
        children.push(node);
    }
    let node = Node::new(
        "tribunal",
        "tribunal",
        "a unanimous cross-family tribunal round on these exact bytes (the policy requires it)",
    );
    let ok = satisfied_by.is_some();
    let node = match (satisfied_by, stale) {
        (Some(by), _) => node.state("satisfied", Some(format!("satisfied by {by}"))),
        (None, Some(c)) => {
            causes.push(format!(
                "the tribunal is not satisfied: {c}. Remedy: `proctor tribunal convene \
                 --candidate {}` on the current bytes",
                cand.id
            ));
            node.state("stale", Some(c))
        }
        (None, None) => {
            let c = format!(
                "no unanimous tribunal round on these bytes. Remedy: `proctor tribunal convene \
                 --candidate {} --builder B --intent T --criteria F`",
                cand.id
            );
            causes.push(c.clone());
            node.state("awaiting", Some(c))
        }
    };
    Ok((Node { children, ..node }, ok))
}

/// Evaluates the gate of `candidate_id` now: recomputes the candidate's identity and reads
/// its workspace's approved policy (`workspaces::approved_policy`). Call it before any
/// transition that relies on the candidate's evidence.
/// `checks` is the server's record of the attempts in progress (the task node shows one).
pub fn evaluate(
    home: &Home,
    candidate_id: &str,
    checks: &checks::InProgress,
) -> Result<Gate, GateError> {
    let lookup = |ws: &str| crate::workspaces::approved_policy(home, ws).map_err(|e| e.to_string());
    evaluate_in(home, candidate_id, &lookup, Some(checks))
}

/// Evaluates the gate of `candidate_id` now, reading the approved policy through `lookup`,
/// with no attempt in progress.
pub fn evaluate_with(
    home: &Home,
    candidate_id: &str,
    lookup: PolicyLookup<'_>,
) -> Result<Gate, GateError> {
    evaluate_in(home, candidate_id, lookup, None)
}

fn evaluate_in(
    home: &Home,
    candidate_id: &str,
    lookup: PolicyLookup<'_>,
    checks: Option<&checks::InProgress>,
) -> Result<Gate, GateError> {
    let cand = candidate::require(home, candidate_id)?;
    let currency = candidate::currency(&cand);
    let policy = match &cand.workspace_ref {
        Some(ws) => lookup(ws)
            .map_err(GateError::Policy)?
            .map(|(text, sha)| (ws.clone(), text, sha)),
        None => None,
    };
    let all = store::list(home)?;
    let running = checks.and_then(|c| c.running(&cand.id));
    judge(home, &cand, &currency, policy, &all, running)
}

fn judge(
    home: &Home,
    cand: &Candidate,
    currency: &Currency,
    policy: Option<(String, String, String)>,
    all: &[Entry],
    running: Option<checks::Running>,
) -> Result<Gate, GateError> {
    let digest = cand.identity.digest.as_str();
    let current = matches!(currency, Currency::Current);
    let mut causes = Vec::new();

    // Prerequisites.
    let cand_node = Node::new(
        "candidate",
        "prerequisite",
        format!("{} bound and still current", cand.id),
    );
    let cand_node = match currency {
        Currency::Current => cand_node.state(
            "satisfied",
            Some(format!(
                "the worktree still holds the bound bytes ({IDENTITY_RECIPE} {})",
                short(digest)
            )),
        ),
        Currency::Changed { now } => {
            let c = format!(
                "the worktree changed since {} was bound: its identity is now {IDENTITY_RECIPE} {}; \
                 what was proven about the bound bytes is stale. Remedy: `proctor candidate bind --run {}`",
                cand.id,
                short(&now.digest),
                cand.run_ref
            );
            causes.push(c.clone());
            cand_node.state("unmet", Some(c))
        }
        Currency::Unavailable { code, detail } => {
            let c = format!("the worktree no longer gives an identity ({code}): {detail}");
            causes.push(c.clone());
            cand_node.state("unmet", Some(c))
        }
    };
    let parsed = match &policy {
        Some((ws, text, _)) => {
            Some(Policy::parse(text).map_err(|e| GateError::Policy(format!("{ws}: {e}")))?)
        }
        None => None,
    };
    let policy_node = Node::new(
        "policy",
        "prerequisite",
        match &cand.workspace_ref {
            Some(ws) => format!("the check policy of {ws} approved"),
            None => "a workspace check policy approved".to_string(),
        },
    );
    let policy_node = match (&policy, &cand.workspace_ref) {
        (Some((_, _, sha)), _) => policy_node.state(
            "satisfied",
            Some(format!("{POLICY_DIGEST_RECIPE} {}", short(sha))),
        ),
        (None, Some(ws)) => {
            let c = format!(
                "{ws} has no approved check policy. Remedy: `proctor workspace policy {ws} --file F`, \
                 then `proctor workspace approve-policy {ws} --sha256 <h>`"
            );
            causes.push(c.clone());
            policy_node.state("unmet", Some(c))
        }
        (None, None) => {
            let c = format!(
                "{} was not started from a registered workspace, so no check policy applies",
                cand.run_ref
            );
            causes.push(c.clone());
            policy_node.state("unmet", Some(c))
        }
    };
    let prereqs_ok = current && policy.is_some();
    let prereqs = Node {
        children: vec![cand_node, policy_node],
        ..Node::new("prerequisites", "prerequisites", "prerequisites")
            .state(if prereqs_ok { "satisfied" } else { "unmet" }, None)
    };

    // History: attempts on this run's candidates, or on these exact bytes.
    let policy_sha = policy.as_ref().map(|p| p.2.as_str());
    let mut history = Vec::new();
    for e in all {
        if e.run_ref != cand.run_ref && e.identity.digest != digest {
            continue;
        }
        let same_bytes = current && e.identity.digest == digest;
        let same_policy = policy_sha == Some(e.policy.digest.as_str());
        let stale_because = match (same_bytes, same_policy) {
            (true, true) => None,
            (false, _) if !current && e.identity.digest == digest => Some(format!(
                "it judged the bytes bound as {}, which the worktree no longer holds",
                cand.id
            )),
            (false, true) => Some(format!(
                "it judged identity {} ({}), not these bytes ({})",
                short(&e.identity.digest),
                e.candidate,
                short(digest)
            )),
            (true, false) => Some(format!(
                "it ran under policy {}, not the approved {}",
                short(&e.policy.digest),
                policy_sha.map_or("(none)", short)
            )),
            (false, false) => Some(format!(
                "it judged identity {} ({}) under policy {}, not these bytes ({}) under policy {}",
                short(&e.identity.digest),
                e.candidate,
                short(&e.policy.digest),
                short(digest),
                policy_sha.map_or("(none)", short)
            )),
        };
        history.push(HistoryItem {
            evidence: e.id.clone(),
            candidate: e.candidate.clone(),
            attempt: e.attempt,
            result: e.result.clone(),
            identity: format!("{} {}", e.identity.recipe, e.identity.digest),
            policy: format!("{} {}", e.policy.recipe, e.policy.digest),
            at: e.ended_at.clone(),
            fresh: stale_because.is_none(),
            stale_because,
        });
    }
    let fresh: Option<&Entry> = history
        .iter()
        .rev()
        .find(|h| h.fresh)
        .and_then(|h| all.iter().find(|e| e.id == h.evidence));
    let latest_stale = history.iter().rev().find(|h| !h.fresh);

    // Task.
    let task = Node::new("task", "task", "run the policy's checks on these bytes");
    let task = if let Some(r) = &running {
        let elapsed = r.check_started.map(|t| t.elapsed().as_secs()).unwrap_or(0);
        task.state(
            "running",
            Some(match &r.check {
                Some(name) => format!(
                    "{}: check {}/{} ({name}) running for {elapsed} s; at most {} s left for the \
                     remaining checks (not an ETA)",
                    r.evidence,
                    r.index,
                    r.total,
                    r.bound_secs.saturating_sub(elapsed)
                ),
                None => format!("{}: making the private copy", r.evidence),
            }),
        )
    } else if !prereqs_ok {
        task.state("blocked", Some("a prerequisite is unmet".into()))
    } else if let Some(e) = fresh {
        Node {
            evidence: Some(e.id.clone()),
            ..task.state(
                "done",
                Some(format!(
                    "attempt {} of {} ({}): {}",
                    e.attempt, e.candidate, e.id, e.result
                )),
            )
        }
    } else {
        task.state(
            "not_started",
            Some(format!(
                "no attempt judged these bytes under this policy. Remedy: `proctor check run --candidate {}`",
                cand.id
            )),
        )
    };

    // Expected evidence: one per check of the current policy.
    let mut ev_children = Vec::new();
    let (mut any_failed, mut any_stale, mut any_missing) = (false, false, false);
    if let Some(p) = &parsed {
        for c in &p.checks {
            let mut node = Node::new(format!("check:{}", c.name), "evidence", c.name.clone());
            node.deadline_secs = Some(c.deadline_secs);
            let rec =
                fresh.and_then(|e| e.checks.iter().find(|r| r.name == c.name).map(|r| (e, r)));
            node = match rec {
                Some((e, r)) if r.passed => Node {
                    evidence: Some(e.id.clone()),
                    ..node.state(
                        "passed",
                        Some(format!(
                            "{} attempt {}: exit {} in {} ms{}",
                            e.id,
                            e.attempt,
                            r.exit_code.map_or("?".into(), |x| x.to_string()),
                            r.duration_ms,
                            if r.artifacts.is_empty() {
                                String::new()
                            } else {
                                format!(", {} artifact(s) present", r.artifacts.len())
                            }
                        )),
                    )
                },
                Some((e, r)) => {
                    any_failed = true;
                    let c = format!(
                        "{} attempt {}: {}",
                        e.id,
                        e.attempt,
                        r.cause.as_deref().unwrap_or("failed")
                    );
                    causes.push(format!("check {} failed: {c}", r.name));
                    Node {
                        evidence: Some(e.id.clone()),
                        ..node.state("failed", Some(c))
                    }
                }
                None if !current || latest_stale.is_some() => {
                    any_stale = true;
                    match latest_stale {
                        Some(h) => Node {
                            evidence: Some(h.evidence.clone()),
                            ..node.state(
                                "stale",
                                Some(format!(
                                    "{} is stale: {}",
                                    h.evidence,
                                    h.stale_because.as_deref().unwrap_or("")
                                )),
                            )
                        },
                        None => node.state(
                            "stale",
                            Some("the candidate's bytes are gone from its worktree".into()),
                        ),
                    }
                }
                None => {
                    any_missing = true;
                    node.state(
                        "not_started",
                        Some("no attempt judged these bytes under this policy".into()),
                    )
                }
            };
            ev_children.push(node);
        }
    } else if !current || latest_stale.is_some() {
        any_stale = true;
    } else {
        any_missing = true;
    }
    if any_stale && !any_failed {
        let c = match latest_stale {
            Some(h) => format!(
                "the recorded evidence is stale ({}: {}); it stays in history and is never \
                 reused. Remedy: run the checks on the current candidate",
                h.evidence,
                h.stale_because.as_deref().unwrap_or("")
            ),
            None => "what was recorded names bytes the worktree no longer holds".into(),
        };
        causes.push(c);
    } else if any_missing && !any_failed && prereqs_ok && running.is_none() {
        causes.push(format!(
            "no check ran on these bytes under this policy. Remedy: `proctor check run --candidate {}`",
            cand.id
        ));
    }
    let evidence_ok = prereqs_ok
        && parsed.is_some()
        && !ev_children.is_empty()
        && ev_children.iter().all(|n| n.state == "passed");
    let ev_group = Node {
        children: ev_children,
        ..Node::new(
            "evidence",
            "expected_evidence",
            "expected evidence, one per check",
        )
        .state(
            if evidence_ok {
                "passed"
            } else if any_failed {
                "failed"
            } else if any_stale {
                "stale"
            } else {
                "not_started"
            },
            None,
        )
    };

    // The tribunal, when the policy requires it.
    let requires_tribunal = parsed.as_ref().is_some_and(Policy::requires_tribunal);
    let tribunal = if requires_tribunal {
        Some(tribunal_node(home, cand, current, &mut causes)?)
    } else {
        None
    };
    let tribunal_ok = tribunal.as_ref().is_none_or(|(_, ok)| *ok);

    // Human decision.
    let spent = if evidence_ok {
        authorisation_spent(home, digest)?
    } else {
        None
    };
    let decision = Node::new(
        "decision",
        "human_decision",
        "a person authorises publication of these exact bytes",
    );
    let decision = match (evidence_ok, spent) {
        (true, _) if !tribunal_ok => decision.state(
            "blocked",
            Some("waits for a unanimous tribunal round on the current bytes".into()),
        ),
        (true, Some(seq)) => decision.state(
            "satisfied",
            Some(format!(
                "a publication authorisation for this identity was spent (ledger seq {seq})"
            )),
        ),
        (true, None) => {
            let c = "awaiting a person: passing checks is not approval; publication needs a \
                     person's authorisation for this exact identity"
                .to_string();
            causes.push(c.clone());
            decision.state("awaiting", Some(c))
        }
        (false, _) => decision.state(
            "blocked",
            Some("waits for every expected evidence to pass on the current bytes".into()),
        ),
    };

    let state = if !current {
        GateState::EvidenceStale
    } else if any_failed {
        GateState::CheckFailed
    } else if any_stale {
        GateState::EvidenceStale
    } else if !evidence_ok {
        GateState::NotStarted
    } else if !tribunal_ok {
        GateState::AwaitingTribunal
    } else if spent.is_some() {
        GateState::Passed
    } else {
        GateState::AwaitingHuman
    };
    let identity = IdentityView {
        bound: cand.identity.render(),
        now: match currency {
            Currency::Current => "current",
            Currency::Changed { .. } => "changed",
            Currency::Unavailable { .. } => "unavailable",
        }
        .to_string(),
        current: match currency {
            Currency::Changed { now } => Some(now.render()),
            _ => None,
        },
    };
    Ok(Gate {
        candidate: cand.id.clone(),
        run: cand.run_ref.clone(),
        state,
        evidence_ok,
        identity,
        policy: policy.map(|(ws, _, sha)| PolicyView {
            workspace: ws,
            digest: format!("{POLICY_DIGEST_RECIPE} {sha}"),
        }),
        nodes: {
            let mut nodes = vec![prereqs, task, ev_group];
            nodes.extend(tribunal.map(|(n, _)| n));
            nodes.push(decision);
            nodes
        },
        causes,
        history,
        evaluated_at: crate::ledger::now_at(),
    })
}

#[cfg(test)]
mod tests;
