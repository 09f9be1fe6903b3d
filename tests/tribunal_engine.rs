//! The tribunal's own checks (issue 14, section 5) against real git repositories, real shell
//! scripts as tests, a real ledger and a registered workspace with an approved policy; and
//! the gate's tribunal node, satisfied only by a unanimous round on the current identity.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use proctor::auth::{Actor, Principal};
use proctor::candidate::{self, Candidate};
use proctor::evidence::checks::{self, ApprovedPolicy};
use proctor::gate::{self, GateState};
use proctor::git::Git;
use proctor::home::Home;
use proctor::ledger::Ledger;
use proctor::tribunal::engine;
use proctor::workspaces::{self, Store};
use proctor::worktrees::WorktreeInfo;

fn actor() -> Actor {
    Actor {
        token_id: "tok-test".into(),
        name: "tester".into(),
        principal: Principal::Person,
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir)
        .with_env("GIT_AUTHOR_NAME", "Ada Builder")
        .with_env("GIT_AUTHOR_EMAIL", "ada@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "Ada Builder")
        .with_env("GIT_COMMITTER_EMAIL", "ada@example.invalid")
        .text(args)
        .unwrap()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The code under test: `add` subtracts (the bug the red test catches).
const BUGGY: &str = "add() { echo $(( $1 - $2 )); }\n";
const FIXED: &str = "add() { echo $(( $1 + $2 )); }\n";
/// The suite: every tests/t_*.sh must pass.
const ALL: &str = "for t in tests/t_*.sh; do sh \"$t\" || exit 1; done\n";
/// An old test that holds with or without the bug.
const T_BASE: &str =
    ". ./src/lib.sh\n[ \"$(add 2 0)\" = 2 ] || { echo 'add 2 0 is not 2'; exit 1; }\n";
/// The red-first test: fails on the bug.
const T_ADD: &str =
    ". ./src/lib.sh\n[ \"$(add 2 3)\" = 5 ] || { echo \"add 2 3 gave $(add 2 3)\"; exit 1; }\n";
/// A weak "new test" that passes on the bug too (a false green).
const T_WEAK: &str = ". ./src/lib.sh\n[ \"$(add 7 0)\" = 7 ] || exit 1\n";

fn policy(extra: &str) -> String {
    format!(
        "require = [\"tribunal\"]\n\n[[check]]\nname = \"suite\"\nargv = [\"sh\", \"tests/all.sh\"]\n\n[tribunal]\ntests = [\"tests/\"]\nnew_tests = [\"sh\", \"tests/t_add.sh\"]\nregression = [\"sh\", \"tests/all.sh\"]\n{extra}"
    )
}

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    home: Home,
    ledger: Ledger,
    policy: String,
    red: String,
}

impl World {
    /// A repository whose base holds the buggy code and a green suite, then the red commit
    /// (the failing test); a workspace for it with `policy` approved.
    fn new(policy_text: &str, base_test: &str, new_test: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let repo = root.join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        write(&repo.join("src/lib.sh"), BUGGY);
        write(&repo.join("tests/all.sh"), ALL);
        write(&repo.join("tests/t_base.sh"), base_test);
        write(&repo.join(".gitignore"), "*.log\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        write(&repo.join("tests/t_add.sh"), new_test);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "red: add 2 3 is 5"]);
        let red = git(&repo, &["rev-parse", "HEAD"]);
        let home = Home::resolve_with(Some(&root.join("home")), None).unwrap();
        home.ensure().unwrap();
        let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
        let store = Store::new(&home);
        let w = workspaces::add(&store, &ledger, &actor(), repo.to_str().unwrap()).unwrap();
        workspaces::set_policy(&store, &ledger, &actor(), &w.ws_ref, policy_text).unwrap();
        workspaces::approve_policy(
            &store,
            &ledger,
            &actor(),
            &w.ws_ref,
            &proctor::evidence::policy::digest(policy_text),
        )
        .unwrap();
        World {
            _dir: dir,
            root,
            repo,
            home,
            ledger,
            policy: policy_text.to_string(),
            red,
        }
    }

    fn record_red(&self) -> engine::RedRecord {
        engine::record_red(&self.home, &self.ledger, "ws-0001", &self.red, &actor()).unwrap()
    }

    /// The run's start, as the sessions manager writes it.
    fn start_run(&self) -> u64 {
        self.ledger
            .append(
                "sessions.run.started",
                json!({"run": "run-0001", "generation": 1})
                    .as_object()
                    .unwrap(),
            )
            .unwrap()
    }

    /// The build: a linked worktree from the red commit, where `build` writes its change.
    fn build(&self, build: impl FnOnce(&Path)) -> Candidate {
        let wt = self.root.join("wt");
        git(
            &self.repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "proctor/run-0001",
                wt.to_str().unwrap(),
                &self.red,
            ],
        );
        let info = WorktreeInfo {
            path: wt.to_string_lossy().into_owned(),
            branch: "proctor/run-0001".into(),
            repo: std::fs::canonicalize(&self.repo)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            base: git(&wt, &["rev-parse", "HEAD"]),
            index_tree: git(&wt, &["write-tree"]),
            clean_at_start: true,
            workspace_ref: Some("ws-0001".into()),
        };
        build(&wt);
        candidate::bind(&self.home, &self.ledger, "run-0001", Some(&info), &actor()).unwrap()
    }

    fn approved(&self) -> ApprovedPolicy {
        ApprovedPolicy {
            workspace: "ws-0001".into(),
            text: self.policy.clone(),
            sha256: proctor::evidence::policy::digest(&self.policy),
        }
    }

    fn engine(&self, cand: &Candidate) -> proctor::tribunal::EngineReport {
        let rep = engine::run(&self.home, &self.ledger, cand, &self.approved());
        // Every private copy is removed afterwards.
        let co = self.home.data.join("checkouts");
        let left: Vec<String> = std::fs::read_dir(&co)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "private copies left behind: {left:?}");
        rep
    }
}

fn step<'a>(
    rep: &'a proctor::tribunal::EngineReport,
    name: &str,
) -> &'a proctor::tribunal::EngineStep {
    rep.steps.iter().find(|s| s.name == name).unwrap()
}

fn outcomes(rep: &proctor::tribunal::EngineReport) -> Vec<(String, String, bool)> {
    rep.steps
        .iter()
        .map(|s| (s.name.clone(), s.outcome.clone(), s.holds))
        .collect()
}

fn o(v: &[(&str, &str, bool)]) -> Vec<(String, String, bool)> {
    v.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), *c))
        .collect()
}

#[test]
fn a_real_fix_holds_every_step() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    let red = w.record_red();
    assert_eq!(red.commit, w.red);
    assert_eq!(red.tests, vec!["tests/t_add.sh".to_string()]);
    assert_eq!(red.parent, git(&w.repo, &["rev-parse", "HEAD^"]));
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "ok", "{rep:#?}");
    assert_eq!(rep.cause, None);
    assert_eq!(rep.red_commit.as_deref(), Some(w.red.as_str()));
    assert_eq!(rep.red_seq, Some(red.seq));
    assert!(rep.tests_unchanged);
    assert_eq!(
        outcomes(&rep),
        o(&[
            ("baseline", "passed", true),
            ("new_tests", "passed", true),
            ("regression", "passed", true),
            ("anti_false_green", "failed", true),
        ])
    );
    let afg = step(&rep, "anti_false_green");
    assert_eq!(afg.tree, "red");
    assert_eq!(afg.changed_paths, vec!["src/lib.sh".to_string()]);
    assert_eq!(afg.exit_code, Some(1));
    assert!(
        afg.output_tail.contains("add 2 3 gave -1"),
        "the reverted tree runs the bug: {:?}",
        afg.output_tail
    );
    assert_eq!(step(&rep, "baseline").tree, "red^");
    // The worktree was never written: the candidate is still current.
    assert!(matches!(
        candidate::currency(&cand),
        candidate::Currency::Current
    ));
    // The red record is in the ledger, with its fields.
    let reds = engine::reds(&w.home).unwrap();
    assert_eq!(reds, vec![red]);
}

#[test]
fn a_false_green_is_a_refuse() {
    // The "new test" passes with the bug: the fix is not what makes it pass.
    let w = World::new(&policy(""), T_BASE, T_WEAK);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "refuse", "{rep:#?}");
    let cause = rep.cause.as_deref().unwrap();
    assert!(cause.contains("a false green"), "{cause}");
    assert!(cause.contains("src/lib.sh"), "{cause}");
    let afg = step(&rep, "anti_false_green");
    assert_eq!((afg.outcome.as_str(), afg.holds), ("passed", false));
    assert_eq!(afg.changed_paths, vec!["src/lib.sh".to_string()]);
}

#[test]
fn a_test_file_changed_after_red_refuses_naming_it() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    w.record_red();
    w.start_run();
    // The builder "fixes" the test instead of the code.
    let cand = w.build(|wt| write(&wt.join("tests/t_add.sh"), "exit 0\n"));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "refuse", "{rep:#?}");
    assert!(!rep.tests_unchanged);
    let cause = rep.cause.as_deref().unwrap();
    assert!(cause.contains("tests/t_add.sh"), "{cause}");
    assert!(rep.steps.is_empty(), "nothing ran on a weakened test");

    // A new file under the test patterns is a change to the tests too.
    let w = World::new(&policy(""), T_BASE, T_ADD);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| {
        write(&wt.join("src/lib.sh"), FIXED);
        write(&wt.join("tests/t_extra.sh"), "exit 0\n");
    });
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "refuse", "{rep:#?}");
    assert!(rep.cause.as_deref().unwrap().contains("tests/t_extra.sh"));
}

#[test]
fn a_red_commit_recorded_after_the_run_started_is_invalid() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    let started = w.start_run();
    let red = w.record_red();
    assert!(red.seq > started);
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "invalid", "{rep:#?}");
    let cause = rep.cause.as_deref().unwrap();
    assert!(cause.contains("after run-0001 started"), "{cause}");
    assert!(rep.steps.is_empty());
}

#[test]
fn no_red_record_is_invalid_naming_the_verb() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "invalid", "{rep:#?}");
    assert!(
        rep.cause
            .as_deref()
            .unwrap()
            .contains("proctor tribunal red")
    );
}

#[test]
fn a_red_baseline_is_invalid() {
    // The suite is already red on the red commit's parent: no verdict can be emitted.
    let w = World::new(&policy(""), "echo flaky; exit 3\n", T_ADD);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "invalid", "{rep:#?}");
    assert!(
        rep.cause
            .as_deref()
            .unwrap()
            .contains("baseline is not clean green")
    );
    let b = step(&rep, "baseline");
    assert_eq!(
        (b.outcome.as_str(), b.exit_code, b.holds),
        ("failed", Some(1), false)
    );
    assert!(b.output_tail.contains("flaky"), "{:?}", b.output_tail);
    for s in &rep.steps[1..] {
        assert_eq!(s.outcome, "skipped", "{s:?}");
    }
}

#[test]
fn a_timeout_is_invalid_not_a_pass_nor_a_survivor() {
    let text = policy("deadline_secs = 1\n").replace(
        "new_tests = [\"sh\", \"tests/t_add.sh\"]",
        "new_tests = [\"sleep\", \"60\"]",
    );
    let w = World::new(&text, T_BASE, T_ADD);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "invalid", "{rep:#?}");
    let cause = rep.cause.as_deref().unwrap();
    assert!(
        cause.contains("new_tests") && cause.contains("timed out"),
        "{cause}"
    );
    let s = step(&rep, "new_tests");
    assert_eq!((s.outcome.as_str(), s.holds), ("timed_out", false));
    assert_eq!(step(&rep, "anti_false_green").outcome, "skipped");
}

#[test]
fn a_program_that_cannot_start_is_invalid_not_a_refuse() {
    // The new tests' program does not exist: nothing was observed, so nothing is judged.
    let text = policy("").replace(
        "new_tests = [\"sh\", \"tests/t_add.sh\"]",
        "new_tests = [\"./tests/missing.sh\"]",
    );
    let w = World::new(&text, T_BASE, T_ADD);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "invalid", "{rep:#?}");
    assert!(rep.cause.as_deref().unwrap().contains("could not start"));
    assert_eq!(step(&rep, "new_tests").outcome, "not_started");
}

#[test]
fn no_tribunal_table_is_not_configured() {
    let text = "[[check]]\nname = \"suite\"\nargv = [\"sh\", \"tests/all.sh\"]\n";
    let w = World::new(text, T_BASE, T_ADD);
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let rep = w.engine(&cand);
    assert_eq!(rep.state, "not_configured", "{rep:#?}");
    assert!(rep.cause.as_deref().unwrap().contains("did not check"));
}

#[test]
fn record_red_refuses_by_name() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    w.record_red();
    let again = engine::record_red(&w.home, &w.ledger, "ws-0001", &w.red, &actor()).unwrap_err();
    assert_eq!(again.code(), "already_recorded");
    // A commit that changes no test file is not a red-first commit.
    write(&w.repo.join("src/lib.sh"), FIXED);
    git(&w.repo, &["commit", "-q", "-am", "fix"]);
    let fix = git(&w.repo, &["rev-parse", "HEAD"]);
    let e = engine::record_red(&w.home, &w.ledger, "ws-0001", &fix, &actor()).unwrap_err();
    assert_eq!(e.code(), "no_test_changed");
    assert!(e.to_string().contains("src/lib.sh"), "{e}");
    let root = git(&w.repo, &["rev-list", "--max-parents=0", "HEAD"]);
    let e = engine::record_red(&w.home, &w.ledger, "ws-0001", &root, &actor()).unwrap_err();
    assert_eq!(e.code(), "no_parent");
    for bad in ["--output=/tmp/x", "no-such-ref"] {
        let e = engine::record_red(&w.home, &w.ledger, "ws-0001", bad, &actor()).unwrap_err();
        assert_eq!(e.code(), "unknown_commit", "{bad}");
    }
    let e = engine::record_red(&w.home, &w.ledger, "ws-0009", &w.red, &actor()).unwrap_err();
    assert_eq!(e.code(), "unknown_workspace");
    assert_eq!(
        engine::reds(&w.home).unwrap().len(),
        1,
        "no refusal is recorded"
    );
}

// ---------------------------------------------------------------------------------------------
// The gate
// ---------------------------------------------------------------------------------------------

fn node<'a>(g: &'a gate::Gate, id: &str) -> &'a gate::Node {
    fn find<'a>(n: &'a gate::Node, id: &str) -> Option<&'a gate::Node> {
        if n.id == id {
            return Some(n);
        }
        n.children.iter().find_map(|c| find(c, id))
    }
    g.nodes
        .iter()
        .find_map(|n| find(n, id))
        .unwrap_or_else(|| panic!("no node {id}: {g:#?}"))
}

/// A round's outcome, written through the ledger as the round does.
fn round(w: &World, id: &str, identity: &str, unanimous: Value, state: &str) {
    w.ledger
        .append(
            "tribunal.round.recorded",
            json!({"round": id, "candidate": "cand-0001", "run": "run-0001",
                   "identity": identity, "identity_recipe": "candidate-identity-sha256/1",
                   "envelope": "e", "state": state, "mode": "cross_family",
                   "unanimous": unanimous, "new_findings": 0, "round_sha256": "r",
                   "by": "tok-test"})
            .as_object()
            .unwrap(),
        )
        .unwrap();
}

#[test]
fn the_gate_requires_a_unanimous_round_on_the_current_identity() {
    let w = World::new(&policy(""), T_BASE, T_ADD);
    w.record_red();
    w.start_run();
    let cand = w.build(|wt| write(&wt.join("src/lib.sh"), FIXED));
    let lookup = |_ws: &str| -> Result<Option<(String, String)>, String> {
        Ok(Some((
            w.policy.clone(),
            proctor::evidence::policy::digest(&w.policy),
        )))
    };
    let ev = checks::run_with(
        &w.home,
        &w.ledger,
        &Default::default(),
        &cand.id,
        Some(w.approved()),
        &actor(),
    )
    .unwrap();
    assert_eq!(ev.result, "passed");

    // Evidence passed, no round: awaiting the tribunal, the decision blocked.
    let g = gate::evaluate_with(&w.home, &cand.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::AwaitingTribunal, "{:?}", g.causes);
    assert!(g.evidence_ok);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        ["prerequisites", "task", "evidence", "tribunal", "decision"]
    );
    assert_eq!(node(&g, "tribunal").kind, "tribunal");
    assert_eq!(node(&g, "tribunal").state, "awaiting");
    assert_eq!(node(&g, "decision").state, "blocked");
    assert_eq!(GateState::AwaitingTribunal.label(), "awaiting tribunal");

    // A unanimous round on other bytes is listed as stale; a non-unanimous round on these
    // bytes and a round whose `unanimous` is not literally true do not count.
    round(
        &w,
        "rnd-0001",
        &"0".repeat(64),
        json!(true),
        "unanimous_pass",
    );
    round(&w, "rnd-0002", &cand.identity.digest, json!(false), "held");
    round(
        &w,
        "rnd-0003",
        &cand.identity.digest,
        json!("true"),
        "unanimous_pass",
    );
    let g = gate::evaluate_with(&w.home, &cand.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::AwaitingTribunal, "{:#?}", g.nodes);
    assert_eq!(node(&g, "tribunal").state, "stale");
    assert_eq!(node(&g, "round:rnd-0001").state, "stale");
    assert!(
        node(&g, "round:rnd-0001")
            .cause
            .as_deref()
            .unwrap()
            .contains("not these bytes")
    );
    assert_eq!(node(&g, "round:rnd-0002").state, "not_unanimous");
    assert_eq!(node(&g, "round:rnd-0003").state, "not_unanimous");

    // A unanimous round on the current identity satisfies it: now a person decides.
    round(
        &w,
        "rnd-0004",
        &cand.identity.digest,
        json!(true),
        "unanimous_pass",
    );
    let g = gate::evaluate_with(&w.home, &cand.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::AwaitingHuman, "{:?}", g.causes);
    assert_eq!(node(&g, "tribunal").state, "satisfied");
    assert_eq!(node(&g, "round:rnd-0004").state, "satisfied");
    assert_eq!(node(&g, "decision").state, "awaiting");

    // One byte changes: the round is stale with the rest of the evidence.
    write(&Path::new(&cand.worktree).join("debug.log"), "x");
    let g = gate::evaluate_with(&w.home, &cand.id, &lookup).unwrap();
    assert_eq!(g.state, GateState::EvidenceStale);
    assert_eq!(node(&g, "tribunal").state, "stale");
    assert_eq!(node(&g, "round:rnd-0004").state, "stale");

    // A policy without `require` has no tribunal node.
    let plain = "[[check]]\nname = \"suite\"\nargv = [\"sh\", \"tests/all.sh\"]\n";
    std::fs::remove_file(Path::new(&cand.worktree).join("debug.log")).unwrap();
    let lookup = |_ws: &str| -> Result<Option<(String, String)>, String> {
        Ok(Some((
            plain.to_string(),
            proctor::evidence::policy::digest(plain),
        )))
    };
    let g = gate::evaluate_with(&w.home, &cand.id, &lookup).unwrap();
    assert!(g.nodes.iter().all(|n| n.id != "tribunal"));
}
