//! The gate over real candidates, checks and ledger.

use super::*;
use crate::candidate::tests::{Fixture, actor, write};
use crate::evidence::checks::{self, ApprovedPolicy};

const POLICY: &str = "[[check]]\nname = \"test\"\nargv = [\"sh\", \"-c\", \"grep -q ok src/lib.txt\"]\n\n[[check]]\nname = \"lint\"\nargv = [\"true\"]\n";

fn approved(text: &str) -> impl Fn(&str) -> Result<Option<(String, String)>, String> + '_ {
    move |_ws: &str| {
        Ok(Some((
            text.to_string(),
            crate::evidence::policy::digest(text),
        )))
    }
}

fn none(_ws: &str) -> Result<Option<(String, String)>, String> {
    Ok(None)
}

fn check(f: &Fixture, cand: &str, text: &str) -> crate::evidence::store::Entry {
    checks::run_with(
        &f.home,
        &f.ledger,
        &Default::default(),
        cand,
        Some(ApprovedPolicy {
            workspace: "ws-0001".into(),
            text: text.into(),
            sha256: crate::evidence::policy::digest(text),
        }),
        &actor(),
    )
    .unwrap()
}

fn states(g: &Gate) -> Vec<(String, String)> {
    fn walk(n: &Node, out: &mut Vec<(String, String)>) {
        out.push((n.id.clone(), n.state.clone()));
        for c in &n.children {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    for n in &g.nodes {
        walk(n, &mut out);
    }
    out
}

fn state_of(g: &Gate, id: &str) -> String {
    states(g).into_iter().find(|(i, _)| i == id).unwrap().1
}

#[test]
fn v1_green_then_one_byte_then_v2_judged_afresh() {
    let f = Fixture::new();
    write(&f.wt.join("src/lib.txt"), b"ok v1\n");
    let v1 = f.bind().unwrap();
    let lookup = approved(POLICY);

    let g = evaluate_with(&f.home, &v1.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::NotStarted);
    assert_eq!(state_of(&g, "task"), "not_started");
    assert_eq!(state_of(&g, "check:test"), "not_started");
    assert!(!g.evidence_ok);

    let ev1 = check(&f, &v1.id, POLICY);
    assert_eq!(ev1.result, "passed");
    let g = evaluate_with(&f.home, &v1.id, &lookup).unwrap();
    assert_eq!(
        g.state,
        GateState::AwaitingHuman,
        "green is not approval: {:?}",
        g.causes
    );
    assert!(g.evidence_ok);
    assert_eq!(state_of(&g, "decision"), "awaiting");
    assert_eq!(state_of(&g, "check:test"), "passed");

    // One byte changes (an ignored file): V1's evidence is stale and refused.
    write(&f.wt.join("debug.log"), b"x");
    let g = evaluate_with(&f.home, &v1.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::EvidenceStale);
    assert!(!g.evidence_ok);
    assert_eq!(g.identity.now, "changed");
    assert_eq!(state_of(&g, "candidate"), "unmet");
    assert_eq!(state_of(&g, "check:test"), "stale");
    assert_eq!(state_of(&g, "decision"), "blocked");
    let e = checks::run_with(
        &f.home,
        &f.ledger,
        &Default::default(),
        &v1.id,
        Some(ApprovedPolicy {
            workspace: "ws-0001".into(),
            text: POLICY.into(),
            sha256: crate::evidence::policy::digest(POLICY),
        }),
        &actor(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "stale");

    // V2 is bound and needs its own attempt: V1's green is history, not evidence for V2.
    let v2 = f.bind().unwrap();
    assert_ne!(v2.identity.digest, v1.identity.digest);
    let g = evaluate_with(&f.home, &v2.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::EvidenceStale);
    assert_eq!(state_of(&g, "check:test"), "stale");
    assert_eq!(g.history.len(), 1);
    assert!(!g.history[0].fresh);
    assert_eq!(g.history[0].evidence, ev1.id);
    let ev2 = check(&f, &v2.id, POLICY);
    assert_eq!(ev2.attempt, 1, "attempts count per candidate");
    let g = evaluate_with(&f.home, &v2.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::AwaitingHuman);
    let hist: Vec<(&str, bool)> = g
        .history
        .iter()
        .map(|h| (h.evidence.as_str(), h.fresh))
        .collect();
    assert_eq!(hist, [(ev1.id.as_str(), false), (ev2.id.as_str(), true)]);
    assert_eq!(
        crate::evidence::store::load(&f.home, &ev1.id)
            .unwrap()
            .unwrap()
            .result,
        "passed",
        "V1's green stays in history"
    );

    // Only a spent authorisation for this exact identity satisfies the decision.
    f.ledger
        .append(
            AUTHORISATION_SPENT_KIND,
            &crate::candidate::fields(serde_json::json!({"identity": v1.identity.digest})),
        )
        .unwrap();
    assert_eq!(
        evaluate_with(&f.home, &v2.id, &lookup).unwrap().state,
        GateState::AwaitingHuman
    );
    f.ledger
        .append(
            AUTHORISATION_SPENT_KIND,
            &crate::candidate::fields(serde_json::json!({"identity": v2.identity.digest})),
        )
        .unwrap();
    let g = evaluate_with(&f.home, &v2.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::Passed);
    assert_eq!(state_of(&g, "decision"), "satisfied");
    assert!(g.causes.is_empty(), "{:?}", g.causes);
}

#[test]
fn a_failed_check_a_missing_policy_and_a_changed_policy() {
    let f = Fixture::new();
    let c = f.bind().unwrap();
    let g = evaluate_with(&f.home, &c.id, &none).unwrap();
    assert_eq!(g.state, GateState::NotStarted);
    assert_eq!(state_of(&g, "policy"), "unmet");
    assert_eq!(state_of(&g, "task"), "blocked");
    assert!(
        g.causes.iter().any(|c| c.contains("approve-policy")),
        "{:?}",
        g.causes
    );

    // src/lib.txt holds no "ok": the test check fails.
    check(&f, &c.id, POLICY);
    let lookup = approved(POLICY);
    let g = evaluate_with(&f.home, &c.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::CheckFailed);
    assert_eq!(state_of(&g, "check:test"), "failed");
    assert_eq!(state_of(&g, "check:lint"), "passed");
    assert_eq!(state_of(&g, "decision"), "blocked");
    assert!(
        g.causes.iter().any(|c| c.contains("exited with code 1")),
        "{:?}",
        g.causes
    );

    // Another approved policy makes the attempt stale.
    let other = "[[check]]\nname = \"lint\"\nargv = [\"true\"]\n";
    let lookup2 = approved(other);
    let g = evaluate_with(&f.home, &c.id, &lookup2).unwrap();
    assert_eq!(g.state, GateState::EvidenceStale);
    assert!(
        g.history[0]
            .stale_because
            .as_deref()
            .unwrap()
            .contains("policy")
    );
    check(&f, &c.id, other);
    assert_eq!(
        evaluate_with(&f.home, &c.id, &lookup2).unwrap().state,
        GateState::AwaitingHuman
    );
}

#[test]
fn a_worker_commit_after_binding_makes_the_candidate_unavailable() {
    let f = Fixture::new();
    let c = f.bind().unwrap();
    write(&f.wt.join("README.md"), b"later\n");
    crate::candidate::tests::git(&f.wt, &["commit", "-q", "-am", "later"]);
    let g = evaluate_with(&f.home, &c.id, &approved(POLICY)).unwrap();
    assert_eq!(g.state, GateState::EvidenceStale);
    assert_eq!(g.identity.now, "unavailable");
    assert!(g.causes[0].contains("worker_committed"), "{:?}", g.causes);
    assert!(matches!(
        evaluate_with(&f.home, "cand-0009", &approved(POLICY)),
        Err(GateError::Candidate(CandidateError::NotFound(_)))
    ));
}
