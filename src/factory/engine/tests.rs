//! The engine's refusals against real git repositories and linked worktrees, with a stand-in
//! invoker that acts on the worktree the way a scripted provider would (the fakes' headless
//! forms are driven end to end in `tests/factory_run.rs`).

use super::*;
use crate::git::Git;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

type Act = Box<dyn Fn(&Path) -> Result<String, String> + Send + Sync>;

/// What each role does (`worker`, `repair`, `review-1`, `review-2`) and answers.
#[derive(Default)]
struct StandIn {
    acts: HashMap<String, Act>,
    calls: AtomicU32,
    log: Mutex<Vec<String>>,
}

impl StandIn {
    fn on(
        mut self,
        role: &str,
        act: impl Fn(&Path) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        self.acts.insert(role.into(), Box::new(act));
        self
    }
    fn roles(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Invoker for StandIn {
    fn invoke(
        &self,
        _agent: &Agent,
        role: Role,
        worktree: &Path,
        scratch: &Path,
        prompt: String,
        _deadline: Duration,
    ) -> Invoked {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let name = role_name(role);
        self.log.lock().unwrap().push(name.clone());
        let p = scratch.join("prompt.txt");
        files::write_atomic(&p, prompt.as_bytes()).unwrap();
        let answer = match self.acts.get(&name) {
            Some(act) => act(worktree),
            None => Ok("APPROVE\nfine".into()),
        };
        let a = scratch.join("stdout.txt");
        files::write_atomic(&a, format!("{answer:?}").as_bytes()).unwrap();
        Invoked {
            answer,
            exit: Some(0),
            timed_out: false,
            files: vec![p, a],
            ..Invoked::default()
        }
    }
}

struct NoWatch;
impl Watch for NoWatch {
    fn update(&self, _run: &FactoryRun) {}
}

fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir)
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .with_env("GIT_CONFIG_NOSYSTEM", "1")
        .text(args)
        .unwrap()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

struct Fx {
    dir: tempfile::TempDir,
    repo: PathBuf,
    wt: PathBuf,
    home: Home,
    ledger: Ledger,
}

fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo.join("src/lib.txt"), "one\n");
    write(&repo.join(".gitignore"), "node_modules/\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let wt = dir.path().join("wt");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "factory",
            wt.to_str().unwrap(),
        ],
    );
    let home = Home::resolve_with(Some(&dir.path().join("home")), None).unwrap();
    home.ensure().unwrap();
    let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
    Fx {
        dir,
        repo,
        wt,
        home,
        ledger,
    }
}

fn agent(tool: Tool) -> Agent {
    Agent {
        tool,
        profile: Profile::default_for(tool, Path::new("/nonexistent")),
        model: None,
    }
}

fn spec(ws: &Path) -> Spec {
    Spec {
        workspace: ws.to_path_buf(),
        task: "make lib say two".into(),
        worker: agent(Tool::Claude),
        reviewer: Reviewer::Agent(agent(Tool::Codex)),
        timeout: Duration::from_secs(60),
        out: None,
        demo: false,
        rig: None,
    }
}

fn edits(text: &'static str) -> impl Fn(&Path) -> Result<String, String> + Send + Sync {
    move |wt: &Path| {
        write(&wt.join("src/lib.txt"), text);
        Ok("edited".into())
    }
}

fn go(fx: &Fx, spec: &Spec, inv: &StandIn) -> (FactoryRun, Value) {
    let info = validate(&fx.home, spec).expect("valid input");
    let run = reserve(&fx.home, spec).unwrap();
    let ctx = Ctx {
        home: &fx.home,
        ledger: &fx.ledger,
        invoker: inv,
        panel: None,
        watch: &NoWatch,
    };
    execute(&ctx, spec, info, run)
}

#[test]
fn a_main_working_copy_a_dirty_copy_and_a_submodules_copy_are_refused() {
    let fx = fixture();
    let e = validate(&fx.home, &spec(&fx.repo)).unwrap_err();
    assert_eq!(e.code(), "main_working_copy", "{e}");

    write(&fx.wt.join("stray.txt"), "x");
    let e = validate(&fx.home, &spec(&fx.wt)).unwrap_err();
    assert_eq!(e.code(), "dirty_input", "{e}");
    std::fs::remove_file(fx.wt.join("stray.txt")).unwrap();
    // An ignored file makes it dirty too: the whole tree is the input.
    write(&fx.wt.join("node_modules/x.js"), "x");
    assert_eq!(
        validate(&fx.home, &spec(&fx.wt)).unwrap_err().code(),
        "dirty_input"
    );
    std::fs::remove_dir_all(fx.wt.join("node_modules")).unwrap();
    assert!(validate(&fx.home, &spec(&fx.wt)).is_ok());

    let sup = fx.dir.path().join("super");
    std::fs::create_dir(&sup).unwrap();
    git(&sup, &["init", "-q", "-b", "main"]);
    git(
        &sup,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            fx.repo.to_str().unwrap(),
            "sub",
        ],
    );
    let e = validate(&fx.home, &spec(&sup.join("sub"))).unwrap_err();
    assert_eq!(e.code(), "submodule_working_copy", "{e}");
}

#[test]
fn evidence_or_a_report_inside_the_candidate_is_refused_whatever_the_alias() {
    let fx = fixture();
    // A home inside the worktree.
    let inner = Home::resolve_with(Some(&fx.wt.join(".state")), None).unwrap();
    let e = validate(&inner, &spec(&fx.wt)).unwrap_err();
    assert_eq!(e.code(), "evidence_inside_candidate", "{e}");
    // A report through a symbolic link that points into the worktree.
    let link = fx.dir.path().join("alias");
    std::os::unix::fs::symlink(&fx.wt, &link).unwrap();
    let mut s = spec(&fx.wt);
    s.out = Some(link.join("sub/report.json"));
    let e = validate(&fx.home, &s).unwrap_err();
    assert_eq!(e.code(), "evidence_inside_candidate", "{e}");
    // Through `..` from elsewhere.
    s.out = Some(fx.dir.path().join("home/../wt/report.json"));
    assert_eq!(
        validate(&fx.home, &s).unwrap_err().code(),
        "evidence_inside_candidate"
    );
    s.out = Some(fx.dir.path().join("report.json"));
    assert!(validate(&fx.home, &s).is_ok());
}

#[test]
fn the_same_vendor_never_reviews_and_an_empty_task_is_refused() {
    let fx = fixture();
    let mut s = spec(&fx.wt);
    s.reviewer = Reviewer::Agent(agent(Tool::Claude));
    assert_eq!(validate(&fx.home, &s).unwrap_err().code(), "same_vendor");
    let mut s = spec(&fx.wt);
    s.task = "  ".into();
    assert_eq!(validate(&fx.home, &s).unwrap_err().code(), "bad_request");
}

#[test]
fn an_approval_completes_binds_the_candidate_and_grants_no_authority() {
    let fx = fixture();
    let inv = StandIn::default().on("worker", edits("two\n"));
    let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Completed, "{receipt:#}");
    assert_eq!(run.exit_code, Some(0));
    assert_eq!(inv.roles(), ["worker", "review-1"]);
    assert_eq!(receipt["publicationAuthority"], NO_AUTHORITY);
    assert_eq!(receipt["repairs"], 0);
    let files = receipt["candidate"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["path"], "src/lib.txt");
    assert_eq!(
        files[0]["sha256"],
        sha256_hex(b"two\n"),
        "the changed file's bytes are bound"
    );
    // Evidence: every file bound, outside the worktree, and its hash is the file's.
    for e in receipt["evidence"].as_array().unwrap() {
        let p = Path::new(e["path"].as_str().unwrap());
        assert!(!inside(p, &fx.wt).unwrap());
        let (bytes, sha) = files::hash_file(p).unwrap().unwrap();
        assert_eq!(e["bytes"], bytes);
        assert_eq!(e["sha256"], sha);
    }
    // The receipt on disk is the one bound in the run and the ledger.
    let b = run.receipt.unwrap();
    let (bytes, sha) = files::hash_file(Path::new(&b.path)).unwrap().unwrap();
    assert_eq!((bytes, sha.clone()), (b.bytes, b.sha256.clone()));
    let ledger = std::fs::read_to_string(fx.home.ledger_path()).unwrap();
    assert!(
        ledger.contains(&sha),
        "the ledger binds the receipt's SHA-256"
    );
    // HEAD and the index are the input's: nothing was committed.
    assert_eq!(
        git(&fx.wt, &["rev-parse", "HEAD"]),
        git(&fx.repo, &["rev-parse", "HEAD"])
    );
}

#[test]
fn a_worker_that_commits_or_stages_gets_no_candidate() {
    let fx = fixture();
    let inv = StandIn::default().on("worker", |wt: &Path| {
        write(&wt.join("src/lib.txt"), "two\n");
        git(wt, &["commit", "-q", "-am", "sneaky"]);
        Ok("done".into())
    });
    let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.unwrap().code, "worker_committed");
    assert!(receipt["candidate"].is_null());
    assert_eq!(inv.roles(), ["worker"], "no review of a committed worker");

    let fx = fixture();
    let inv = StandIn::default().on("worker", |wt: &Path| {
        write(&wt.join("src/lib.txt"), "two\n");
        git(wt, &["add", "src/lib.txt"]);
        Ok("done".into())
    });
    let (run, _) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.error.unwrap().code, "index_changed");
}

#[test]
fn a_reviewer_that_writes_into_node_modules_is_refused() {
    let fx = fixture();
    let inv = StandIn::default()
        .on("worker", edits("two\n"))
        .on("review-1", |wt: &Path| {
            write(&wt.join("node_modules/left-pad/index.js"), "evil");
            Ok("APPROVE\nlooks fine".into())
        });
    let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Failed, "{receipt:#}");
    let e = run.error.unwrap();
    assert_eq!(e.code, "reviewer_modified");
    assert!(e.message.contains("node_modules"), "{}", e.message);
    assert_ne!(receipt["ok"], true);
}

#[test]
fn one_request_for_changes_gets_exactly_one_repair_then_a_fresh_review() {
    let fx = fixture();
    let inv = StandIn::default()
        .on("worker", edits("two\n"))
        .on("review-1", |_: &Path| {
            Ok("REQUEST_CHANGES\nsay three".into())
        })
        .on("repair", edits("three\n"));
    let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Completed, "{receipt:#}");
    assert_eq!(inv.roles(), ["worker", "review-1", "repair", "review-2"]);
    assert_eq!(receipt["repairs"], 1);
    let reviews = receipt["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0]["verdict"], "REQUEST_CHANGES");
    assert_eq!(reviews[1]["verdict"], "APPROVE");
    assert_ne!(reviews[0]["identity"], reviews[1]["identity"]);
    assert_eq!(
        reviews[1]["identity"],
        receipt["repairedCandidate"]["digest"]
    );
    // The repair was given the reviewer's exact output and the exact identity.
    let prompt =
        std::fs::read_to_string(run_dir(&fx.home, &run.id).join("repair/prompt.txt")).unwrap();
    assert!(prompt.contains("REQUEST_CHANGES\nsay three"));
    assert!(prompt.contains(receipt["candidate"]["digest"].as_str().unwrap()));
}

#[test]
fn a_repair_that_changes_nothing_is_a_typed_error_not_a_second_review() {
    let fx = fixture();
    let inv = StandIn::default()
        .on("worker", edits("two\n"))
        .on("review-1", |_: &Path| {
            Ok("REQUEST_CHANGES\nsay three".into())
        })
        .on("repair", edits("two\n"));
    let (run, _) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.unwrap().code, "repair_unchanged");
    assert_eq!(inv.roles(), ["worker", "review-1", "repair"]);
}

#[test]
fn a_second_reject_exits_3_and_never_repairs_again() {
    let fx = fixture();
    let inv = StandIn::default()
        .on("worker", edits("two\n"))
        .on("review-1", |_: &Path| Ok("REQUEST_CHANGES\nno".into()))
        .on("repair", edits("three\n"))
        .on(
            "review-2",
            |_: &Path| Ok("REQUEST_CHANGES\nstill no".into()),
        );
    let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.status, RunStatus::Rejected);
    assert_eq!(run.exit_code, Some(3));
    assert_eq!(receipt["ok"], false);
    assert_eq!(receipt["exitCode"], 3);
    assert_eq!(inv.calls.load(Ordering::SeqCst), MAX_INVOCATIONS);
    assert_eq!(inv.roles(), ["worker", "review-1", "repair", "review-2"]);
}

#[test]
fn an_unreadable_verdict_is_never_a_success() {
    for answer in [
        "I APPROVE",
        "approve",
        "",
        "**APPROVE**",
        "Looks good!\nAPPROVE",
    ] {
        let fx = fixture();
        let inv = StandIn::default()
            .on("worker", edits("two\n"))
            .on("review-1", move |_: &Path| Ok(answer.to_string()));
        let (run, receipt) = go(&fx, &spec(&fx.wt), &inv);
        assert_eq!(run.status, RunStatus::Failed, "{answer:?}");
        assert_eq!(run.error.unwrap().code, "verdict_unreadable", "{answer:?}");
        assert_eq!(receipt["ok"], false);
    }
}

#[test]
fn a_worker_that_changes_nothing_leaves_no_candidate_to_review() {
    let fx = fixture();
    let inv = StandIn::default().on("worker", |_: &Path| Ok("nothing to do".into()));
    let (run, _) = go(&fx, &spec(&fx.wt), &inv);
    assert_eq!(run.error.unwrap().code, "empty_candidate");
    assert_eq!(inv.roles(), ["worker"]);
}

#[test]
fn a_run_left_running_by_a_stopped_server_is_marked_failed() {
    let fx = fixture();
    let s = spec(&fx.wt);
    let run = reserve(&fx.home, &s).unwrap();
    files::write_atomic(
        &run_dir(&fx.home, &run.id).join("run.json"),
        &serde_json::to_vec(&run).unwrap(),
    )
    .unwrap();
    assert_eq!(recover(&fx.home), vec![run.id.clone()]);
    let after = load(&fx.home, &run.id).unwrap();
    assert_eq!(after.status, RunStatus::Failed);
    assert_eq!(after.error.unwrap().code, "server_stopped");
}
