//! Checks against real candidates: real processes, real files, a real ledger.

use super::*;
use crate::candidate::tests::{Fixture, actor, write};

fn policy(text: &str) -> Option<ApprovedPolicy> {
    Some(ApprovedPolicy {
        workspace: "ws-0001".into(),
        text: text.into(),
        sha256: super::super::policy::digest(text),
    })
}

fn run_policy(f: &Fixture, cand: &str, text: &str) -> Result<Entry, CheckError> {
    run_policy_in(f, &InProgress::default(), cand, text)
}

fn run_policy_in(
    f: &Fixture,
    checks: &InProgress,
    cand: &str,
    text: &str,
) -> Result<Entry, CheckError> {
    run_with(&f.home, &f.ledger, checks, cand, policy(text), &actor())
}

fn read(f: &Fixture, e: &Entry, out: &Output) -> Vec<u8> {
    std::fs::read(store::entry_dir(&f.home, &e.id).join(&out.file)).unwrap()
}

#[test]
fn a_passing_attempt_records_commands_outputs_and_artifacts_in_a_private_copy() {
    let f = Fixture::new();
    write(
        &f.wt.join("build.sh"),
        b"#!/bin/sh\nmkdir -p target\necho built > target/report.txt\necho done\necho warn >&2\n",
    );
    std::fs::set_permissions(
        f.wt.join("build.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let c = f.bind().unwrap();
    let text = "[[check]]\nname = \"build\"\nargv = [\"./build.sh\"]\ndeadline_secs = 30\nartifacts = [\"target/report.txt\"]\n\n[[check]]\nname = \"env\"\nargv = [\"sh\", \"-c\", \"env; pwd; git rev-parse --show-toplevel; exit 0\"]\n";
    let e = run_policy(&f, &c.id, text).unwrap();
    assert_eq!(
        (e.id.as_str(), e.attempt, e.result.as_str()),
        ("ev-0001", 1, "passed")
    );
    assert_eq!(e.identity.digest, c.identity.digest);
    assert_eq!(e.identity.recipe, IDENTITY_RECIPE);
    assert_eq!(e.policy.digest, super::super::policy::digest(text));
    assert_eq!(e.checker.token_id, "tok-test");
    let build = &e.checks[0];
    assert_eq!(build.argv, ["./build.sh"]);
    assert_eq!(
        (build.exit_code, build.signal.as_deref(), build.timed_out),
        (Some(0), None, false)
    );
    assert!(build.passed, "{build:?}");
    let so = build.stdout.as_ref().unwrap();
    assert_eq!(read(&f, &e, so), b"done\n");
    assert_eq!(so.sha256, hex::encode(Sha256::digest(b"done\n")));
    assert_eq!(read(&f, &e, build.stderr.as_ref().unwrap()), b"warn\n");
    let art = &build.artifacts[0];
    assert!(art.present && !art.present_before);
    assert_eq!(
        art.sha256.as_deref(),
        Some(hex::encode(Sha256::digest(b"built\n")).as_str())
    );
    let kept = store::entry_dir(&f.home, &e.id).join(art.kept.as_ref().unwrap());
    assert_eq!(std::fs::read(&kept).unwrap(), b"built\n");

    // It ran in the private copy, with a minimal environment, and git found no repository.
    let env_out = String::from_utf8(read(&f, &e, e.checks[1].stdout.as_ref().unwrap())).unwrap();
    assert!(env_out.contains(&format!(
        "TMPDIR={}",
        checkouts_dir(&f.home).join("ev-0001.tmp").display()
    )));
    assert!(env_out.contains(&checkouts_dir(&f.home).join("ev-0001").display().to_string()));
    assert!(!env_out.contains("PROCTOR"), "{env_out}");
    assert_eq!(e.checks[1].exit_code, Some(0));
    assert!(
        !f.wt.join("target").exists(),
        "the candidate's worktree was not written"
    );
    assert!(
        !checkouts_dir(&f.home).join("ev-0001").exists(),
        "the copy is removed"
    );
    assert!(e.checkout.removed && e.checkout.verified);
    assert_eq!(e.checkout.inventory.digest, c.identity.inventory.digest);
    // The build output stayed out of the candidate: it is still current.
    assert_eq!(candidate::currency(&c), Currency::Current);
    assert!(f.ledger_kinds().contains(&store::RECORDED_KIND.to_string()));
    assert_eq!(store::load(&f.home, "ev-0001").unwrap().unwrap(), e);
    assert_eq!(
        std::fs::read(store::entry_dir(&f.home, &e.id).join("policy.toml")).unwrap(),
        text.as_bytes()
    );
}

#[test]
fn failures_deadlines_missing_artifacts_and_truncation_are_observed_not_smoothed() {
    let f = Fixture::new();
    write(
        &f.wt.join("target/report.txt"),
        b"stale report from the candidate",
    );
    let c = f.bind().unwrap();
    let text = r#"
[[check]]
name = "fails"
argv = ["sh", "-c", "echo no; exit 3"]

[[check]]
name = "slow"
argv = ["sh", "-c", "trap '' TERM; sleep 30"]
deadline_secs = 1

[[check]]
name = "noartifact"
argv = ["true"]
artifacts = ["out/missing.xml", "target/report.txt"]

[[check]]
name = "loud"
argv = ["sh", "-c", "head -c 5000 /dev/zero; head -c 3000 /dev/zero >&2"]
max_output_bytes = 1024

[[check]]
name = "absent"
argv = ["no-such-program-here"]

[[check]]
name = "stray"
argv = ["sh", "-c", "sleep 300 & echo started"]
"#;
    let e = run_policy(&f, &c.id, text).unwrap();
    assert_eq!(e.result, "failed");
    let by = |n: &str| e.checks.iter().find(|r| r.name == n).unwrap();

    let fails = by("fails");
    assert_eq!((fails.exit_code, fails.passed), (Some(3), false));
    assert_eq!(fails.cause.as_deref(), Some("exited with code 3"));

    let slow = by("slow");
    assert!(slow.timed_out && !slow.passed);
    assert_eq!(slow.exit_code, None);
    assert_eq!(
        slow.signal.as_deref(),
        Some("SIGKILL"),
        "TERM was ignored, so KILL ended it"
    );
    assert!(slow.duration_ms >= 1000);

    let na = by("noartifact");
    assert_eq!(na.exit_code, Some(0));
    assert!(!na.passed, "a missing artifact fails the check");
    assert!(!na.artifacts[0].present);
    assert_eq!(na.artifacts[0].problem.as_deref(), Some("missing"));
    assert!(na.artifacts[1].present && na.artifacts[1].present_before);

    let loud = by("loud");
    let (so, se) = (loud.stdout.as_ref().unwrap(), loud.stderr.as_ref().unwrap());
    assert_eq!(
        (so.bytes, so.observed_bytes, so.truncated),
        (1024, 5000, true)
    );
    assert_eq!(
        (se.bytes, se.observed_bytes, se.truncated),
        (1024, 3000, true)
    );
    assert_eq!(read(&f, &e, so), vec![0u8; 1024]);
    assert!(loud.passed, "truncation is recorded, the exit code decides");

    let absent = by("absent");
    assert!(!absent.started && !absent.passed);
    assert!(
        absent
            .spawn_error
            .as_deref()
            .unwrap()
            .contains("no-such-program-here")
    );
    assert_eq!(absent.exit_code, None);

    let stray = by("stray");
    assert!(stray.stray_processes_killed, "{stray:?}");
    assert_eq!(stray.exit_code, Some(0));
}

#[test]
fn refusals_policy_staleness_already_judged_and_concurrency() {
    let f = Fixture::new();
    let c = f.bind().unwrap();
    let e = run_with(
        &f.home,
        &f.ledger,
        &Default::default(),
        &c.id,
        None,
        &actor(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "policy_not_approved");
    assert!(
        e.to_string().contains("proctor workspace approve-policy"),
        "{e}"
    );

    let text = "[[check]]\nname = \"ok\"\nargv = [\"true\"]\n";
    run_policy(&f, &c.id, text).unwrap();
    let e = run_policy(&f, &c.id, text).unwrap_err();
    assert_eq!(e.code(), "already_judged", "{e}");
    // A new policy is a new condition: attempt 2.
    let e2 = run_policy(&f, &c.id, "[[check]]\nname = \"ok2\"\nargv = [\"true\"]\n").unwrap();
    assert_eq!(e2.attempt, 2);

    write(&f.wt.join("target/x"), b"one ignored byte");
    let e = run_policy(&f, &c.id, "[[check]]\nname = \"ok3\"\nargv = [\"true\"]\n").unwrap_err();
    assert_eq!(e.code(), "stale");
    assert!(e.to_string().starts_with("stale: bind again"), "{e}");

    let checks = InProgress::default();
    let _slot = Slot::take(&checks, &c.id).unwrap();
    assert_eq!(
        run_policy_in(&f, &checks, &c.id, text).unwrap_err().code(),
        "in_progress"
    );
    assert_eq!(store::for_candidate(&f.home, &c.id).unwrap().len(), 2);
}
