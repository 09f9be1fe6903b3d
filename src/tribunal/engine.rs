//! The tribunal's own checks (seed 001, "La boucle" 1 and 5, and the hard rules): the engine
//! checks, it does not only read.
//!
//! Red-first: the failing test's commit is recorded ([`record_red`], ledger
//! `tribunal.red.recorded`) BEFORE the build. At a round, [`run`] finds the red record of the
//! candidate's base commit, requires its ledger seq to precede the start of the candidate's
//! run, and requires every test file (by the policy's patterns) to be byte-identical in the
//! candidate to the red commit. Then, with the workspace's approved `[tribunal]` table, each
//! in its own private copy (removed after), without a shell, in its own process group, under
//! its deadline, with the checks' allowlisted environment and a private TMPDIR (the run
//! discipline of `evidence::checks`):
//!
//! 1. `baseline`: `regression` on the red commit's parent tree; it must pass (a harness whose
//!    unmutated baseline is not clean green emits no verdict: `invalid`);
//! 2. `new_tests` on the candidate's exact bytes (a verified copy): must pass;
//! 3. `regression` on the candidate: must pass (not worse than the base, which was green);
//! 4. `anti_false_green`: the candidate with every non-test change reverted (the red commit's
//!    tree): `new_tests` must FAIL there; passing is a false green, a refuse.
//!
//! A timeout is never a pass nor a survivor: `invalid`, the step named. [`run`] never fails:
//! every failure is a report with state `invalid` and a cause.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Actor;
use crate::candidate::{self, Candidate, Currency};
use crate::evidence::checks::{self, ApprovedPolicy};
use crate::evidence::policy::{
    Check, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TEST_PATTERNS, Policy, TribunalPolicy,
};
use crate::files::{self, FilesError};
use crate::git::{Git, GitError};
use crate::home::Home;
use crate::ledger::{Ledger, LedgerError};
use crate::sessions::record::kinds as run_kinds;
use crate::tribunal::model::{EngineReport, EngineStep};

/// The ledger kind of a red-first record.
pub const RED_KIND: &str = "tribunal.red.recorded";
/// At most this many bytes of a step's output are kept in its report (`output_tail`).
pub const OUTPUT_TAIL_BYTES: usize = 2048;

/// A red-first commit, as recorded in the ledger before the build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = TribunalRedRecord)]
pub struct RedRecord {
    /// The ledger seq of its `tribunal.red.recorded` event.
    pub seq: u64,
    pub at: String,
    /// The registered workspace (`ws-0001`).
    pub workspace: String,
    /// The workspace's repository (its canonical path).
    pub repo: String,
    /// The red commit: the failing test, committed before the fix.
    pub commit: String,
    /// Its first parent: the tree the baseline runs on.
    pub parent: String,
    /// The paths the red commit changed that match the test patterns.
    pub tests: Vec<String>,
    /// The test patterns it was recorded with (the approved policy's, or the defaults).
    pub patterns: Vec<String>,
    /// The token id of who recorded it.
    pub by: String,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no workspace {0}; `proctor workspace list` shows them")]
    UnknownWorkspace(String),
    #[error(
        "{commit:?} is not a commit of {repo}: {detail}. Remedy: commit the failing test, then \
         give its full id"
    )]
    UnknownCommit {
        commit: String,
        repo: String,
        detail: String,
    },
    #[error(
        "the red commit {commit} has no parent: the baseline runs the suite on the red commit's \
         parent. Remedy: commit the failing test on top of the code it tests"
    )]
    NoParent { commit: String },
    #[error(
        "the red commit {commit} changes no test file (patterns: {patterns}); it changed: \
         {changed}. A red-first commit holds the failing test. Remedy: commit the test alone, \
         or name its path in the policy's [tribunal] tests"
    )]
    NoTests {
        commit: String,
        patterns: String,
        changed: String,
    },
    #[error("the red commit {commit} of {workspace} is already recorded (ledger seq {seq})")]
    AlreadyRecorded {
        commit: String,
        workspace: String,
        seq: u64,
    },
    #[error("cannot read the workspace registry: {0}")]
    Workspace(String),
    #[error("the approved policy of {workspace} does not parse: {detail}")]
    Policy { workspace: String, detail: String },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl EngineError {
    /// A stable code for the API.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::UnknownWorkspace(_) => "unknown_workspace",
            EngineError::UnknownCommit { .. } => "unknown_commit",
            EngineError::NoParent { .. } => "no_parent",
            EngineError::NoTests { .. } => "no_test_changed",
            EngineError::AlreadyRecorded { .. } => "already_recorded",
            EngineError::Policy { .. } => "policy_invalid",
            _ => "internal",
        }
    }

    /// The HTTP status the API answers with.
    pub fn status(&self) -> u16 {
        match self {
            EngineError::UnknownWorkspace(_) => 404,
            EngineError::UnknownCommit { .. }
            | EngineError::NoParent { .. }
            | EngineError::NoTests { .. }
            | EngineError::Policy { .. } => 422,
            EngineError::AlreadyRecorded { .. } => 409,
            _ => 500,
        }
    }
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// Records `commit` of `workspace`'s repository as a red-first commit: the failing test,
/// committed before the fix. Its first parent and the test files it changed (by the approved
/// policy's `[tribunal]` patterns, or [`DEFAULT_TEST_PATTERNS`]) are recorded with it.
pub fn record_red(
    home: &Home,
    ledger: &Ledger,
    workspace: &str,
    commit: &str,
    by: &Actor,
) -> Result<RedRecord, EngineError> {
    let w = crate::workspaces::find(home, workspace)
        .map_err(|e| EngineError::Workspace(e.to_string()))?
        .ok_or_else(|| EngineError::UnknownWorkspace(crate::text::one_line(workspace, 200)))?;
    let repo = w.path.to_string_lossy().into_owned();
    let git = Git::new(&w.path);
    let unknown = |detail: String| EngineError::UnknownCommit {
        commit: crate::text::one_line(commit, 100),
        repo: repo.clone(),
        detail,
    };
    if commit.is_empty() || commit.starts_with('-') || commit.contains(['\0', '\n']) {
        return Err(unknown("not a commit name".into()));
    }
    let full = git
        .text(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{commit}^{{commit}}"),
        ])
        .map_err(|_| unknown("git does not know it".into()))?;
    let parent = git
        .text(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{full}^1^{{commit}}"),
        ])
        .map_err(|_| EngineError::NoParent {
            commit: full.clone(),
        })?;
    let patterns: Vec<String> = match crate::workspaces::approved_policy(home, &w.ws_ref)
        .map_err(|e| EngineError::Workspace(e.to_string()))?
    {
        Some((text, _)) => match Policy::parse(&text) {
            Ok(p) => p.tribunal.map(|t| t.tests),
            Err(e) => {
                return Err(EngineError::Policy {
                    workspace: w.ws_ref.clone(),
                    detail: e.to_string(),
                });
            }
        },
        None => None,
    }
    .unwrap_or_else(|| {
        DEFAULT_TEST_PATTERNS
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    let changed = changed_paths(&git, &parent, &full)?;
    let tests: Vec<String> = changed
        .iter()
        .filter(|p| crate::evidence::policy::is_test_path(&patterns, p))
        .cloned()
        .collect();
    if tests.is_empty() {
        return Err(EngineError::NoTests {
            commit: full,
            patterns: patterns.join(" "),
            changed: if changed.is_empty() {
                "nothing".into()
            } else {
                crate::text::one_line(&changed.join(", "), 400)
            },
        });
    }
    if let Some(r) = reds(home)?
        .into_iter()
        .find(|r| r.commit == full && r.workspace == w.ws_ref)
    {
        return Err(EngineError::AlreadyRecorded {
            commit: full,
            workspace: w.ws_ref,
            seq: r.seq,
        });
    }
    let seq = ledger.append(
        RED_KIND,
        &candidate::fields(json!({
            "workspace": w.ws_ref,
            "repo": repo,
            "commit": full,
            "parent": parent,
            "tests": tests,
            "patterns": patterns,
            "by": by.token_id,
        })),
    )?;
    // Read back from the ledger, so the record says what the ledger holds (its `at`).
    Ok(reds(home)?
        .into_iter()
        .find(|r| r.seq == seq)
        .unwrap_or(RedRecord {
            seq,
            at: crate::ledger::now_at(),
            workspace: w.ws_ref,
            repo,
            commit: full,
            parent,
            tests,
            patterns,
            by: by.token_id.clone(),
        }))
}

/// The paths `to` changed relative to `from` (no rename detection), in git's order.
fn changed_paths(git: &Git, from: &str, to: &str) -> Result<Vec<String>, EngineError> {
    let out = git.run(&[
        "diff-tree",
        "-r",
        "-z",
        "--no-commit-id",
        "--name-only",
        "--no-renames",
        from,
        to,
    ])?;
    Ok(out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// Reads every ledger event whose line mentions `needle`, parsed.
fn scan_ledger(home: &Home, needle: &str, mut f: impl FnMut(&Value)) -> Result<(), FilesError> {
    let path = home.ledger_path();
    let file = match files::open_private_read(&path) {
        Ok(file) => file,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| FilesError::io("read", &path, e))?;
        if !line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            continue;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
            f(&v);
        }
    }
    Ok(())
}

/// Every red-first record, oldest first (from the ledger: it is the source of truth).
pub fn reds(home: &Home) -> Result<Vec<RedRecord>, EngineError> {
    let mut out = Vec::new();
    scan_ledger(home, RED_KIND, |v| {
        if v.get("kind").and_then(Value::as_str) != Some(RED_KIND) {
            return;
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let list = |k: &str| -> Vec<String> {
            v.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        out.push(RedRecord {
            seq: v.get("seq").and_then(Value::as_u64).unwrap_or(0),
            at: s("at"),
            workspace: s("workspace"),
            repo: s("repo"),
            commit: s("commit"),
            parent: s("parent"),
            tests: list("tests"),
            patterns: list("patterns"),
            by: s("by"),
        });
    })?;
    Ok(out)
}

/// The ledger seq of the first lifecycle event of `run` (created or started): when the build
/// began.
fn run_start_seq(home: &Home, run: &str) -> Result<Option<u64>, FilesError> {
    let mut first: Option<u64> = None;
    scan_ledger(home, run, |v| {
        let kind = v.get("kind").and_then(Value::as_str);
        if (kind == Some(run_kinds::CREATED) || kind == Some(run_kinds::STARTED))
            && v.get("run").and_then(Value::as_str) == Some(run)
            && let Some(seq) = v.get("seq").and_then(Value::as_u64)
        {
            first = Some(first.map_or(seq, |f| f.min(seq)));
        }
    })?;
    Ok(first)
}

const STEPS: [(&str, &str, &str); 4] = [
    ("baseline", "red^", "pass"),
    ("new_tests", "candidate", "pass"),
    ("regression", "candidate", "pass"),
    ("anti_false_green", "red", "fail"),
];

fn report() -> EngineReport {
    EngineReport {
        state: "invalid".into(),
        red_commit: None,
        red_seq: None,
        tests: Vec::new(),
        tests_unchanged: false,
        steps: Vec::new(),
        cause: None,
    }
}

fn ended(mut rep: EngineReport, state: &str, cause: String) -> EngineReport {
    rep.state = state.to_string();
    rep.cause = Some(cause);
    rep
}

/// Runs the engine's checks for a round on `cand` under the workspace's approved `policy`.
/// Never an error: a failure is a report with state `invalid` (or `refuse`) and a cause.
pub fn run(
    home: &Home,
    _ledger: &Ledger,
    cand: &Candidate,
    policy: &ApprovedPolicy,
) -> EngineReport {
    let rep = report();
    let parsed = match Policy::parse(&policy.text) {
        Ok(p) => p,
        Err(e) => {
            return ended(
                rep,
                "invalid",
                format!(
                    "the approved policy of {} does not parse: {e}",
                    policy.workspace
                ),
            );
        }
    };
    let Some(t) = parsed.tribunal else {
        return ended(
            rep,
            "not_configured",
            format!(
                "the approved policy of {} has no [tribunal] table: the engine did not check \
                 (no new tests, regression or anti-false-green ran)",
                policy.workspace
            ),
        );
    };
    run_configured(home, cand, &t, rep)
}

fn run_configured(
    home: &Home,
    cand: &Candidate,
    t: &TribunalPolicy,
    mut rep: EngineReport,
) -> EngineReport {
    let base = cand.identity.base.clone();
    let reds = match reds(home) {
        Ok(r) => r,
        Err(e) => return ended(rep, "invalid", format!("cannot read the red records: {e}")),
    };
    let red = reds
        .into_iter()
        .filter(|r| {
            r.commit == base
                && (cand.workspace_ref.as_deref() == Some(r.workspace.as_str())
                    || r.repo == cand.repo)
        })
        .min_by_key(|r| r.seq);
    let Some(red) = red else {
        return ended(
            rep,
            "invalid",
            format!(
                "no red-first commit is recorded for {} (the base of {}): the failing test's \
                 commit must be recorded before the build. Remedy: `proctor tribunal red \
                 --workspace {} --commit <the failing test's commit>`, then start the build \
                 from it",
                short(&base),
                cand.id,
                cand.workspace_ref.as_deref().unwrap_or("<ws>")
            ),
        );
    };
    rep.red_commit = Some(red.commit.clone());
    rep.red_seq = Some(red.seq);
    rep.tests = red.tests.clone();
    match run_start_seq(home, &cand.run_ref) {
        Err(e) => return ended(rep, "invalid", format!("cannot read the ledger: {e}")),
        Ok(None) => {
            return ended(
                rep,
                "invalid",
                format!(
                    "the ledger holds no start of {}: red-first cannot be shown to precede \
                     the build",
                    cand.run_ref
                ),
            );
        }
        Ok(Some(start)) if red.seq >= start => {
            return ended(
                rep,
                "invalid",
                format!(
                    "the red commit {} was recorded at ledger seq {} after {} started (seq \
                     {start}): red-first means the failing test is recorded before the build",
                    short(&red.commit),
                    red.seq,
                    cand.run_ref
                ),
            );
        }
        Ok(Some(_)) => {}
    }
    match candidate::currency(cand) {
        Currency::Current => {}
        Currency::Changed { now } => {
            return ended(
                rep,
                "invalid",
                format!(
                    "stale: {}'s worktree no longer holds the bound bytes (its identity is now \
                     {}); bind again",
                    cand.id,
                    now.render()
                ),
            );
        }
        Currency::Unavailable { detail, .. } => {
            return ended(rep, "invalid", format!("stale: {detail}; bind again"));
        }
    }
    // The candidate's changes are relative to its base, the red commit: a change to a test
    // file is a change since red.
    let (touched_tests, reverted): (Vec<String>, Vec<String>) = cand
        .identity
        .files
        .iter()
        .map(|f| f.path.clone())
        .partition(|p| t.is_test(p));
    if !touched_tests.is_empty() {
        rep.tests_unchanged = false;
        return ended(
            rep,
            "refuse",
            format!(
                "the test files changed since the red commit {}: {}. The builder may not touch \
                 the red-first tests; a weakened test is never a pass",
                short(&red.commit),
                touched_tests.join(", ")
            ),
        );
    }
    rep.tests_unchanged = true;
    steps(home, cand, t, &red, reverted, rep)
}

/// A private working folder under `data/checkouts` (0700), removed when dropped.
struct Work {
    root: PathBuf,
    co_root: PathBuf,
}

impl Drop for Work {
    fn drop(&mut self) {
        let _ = checks::remove_tree(&self.root);
    }
}

fn steps(
    home: &Home,
    cand: &Candidate,
    t: &TribunalPolicy,
    red: &RedRecord,
    reverted: Vec<String>,
    mut rep: EngineReport,
) -> EngineReport {
    let co_root = checks::checkouts_dir(home);
    let work = match (|| -> Result<Work, FilesError> {
        files::ensure_private_dir(&co_root)?;
        let dir = tempfile::Builder::new()
            .prefix("tribunal-")
            .tempdir_in(&co_root)
            .map_err(|e| FilesError::io("create a folder in", &co_root, e))?
            .keep();
        let work = Work {
            root: dir,
            co_root: co_root.clone(),
        };
        files::ensure_private_dir(&work.root)?;
        for d in ["tmp", "out"] {
            files::ensure_private_dir(&work.root.join(d))?;
        }
        Ok(work)
    })() {
        Ok(w) => w,
        Err(e) => return ended(rep, "invalid", format!("cannot make a private folder: {e}")),
    };
    let env = checks::check_env(&work.co_root, &work.root.join("tmp"));
    let mut verdict: Option<(&'static str, String)> = None;
    for (name, tree, expect) in STEPS {
        let argv = if name == "baseline" || name == "regression" {
            t.regression.clone()
        } else {
            t.new_tests.clone()
        };
        let mut step = EngineStep {
            name: name.into(),
            tree: tree.into(),
            argv: argv.clone(),
            expect: expect.into(),
            outcome: "skipped".into(),
            exit_code: None,
            duration_ms: 0,
            holds: false,
            output_tail: String::new(),
            changed_paths: if name == "anti_false_green" {
                reverted.clone()
            } else {
                Vec::new()
            },
        };
        if verdict.is_some() {
            rep.steps.push(step);
            continue;
        }
        let dir = work.root.join(name);
        let made = match tree {
            "red^" => materialise(&cand.repo, &red.parent, &dir, &work.root),
            "red" => materialise(&cand.repo, &red.commit, &dir, &work.root),
            _ => exact_copy(cand, &dir),
        };
        if let Err(cause) = made {
            step.outcome = "not_started".into();
            rep.steps.push(step);
            verdict = Some((
                "invalid",
                format!("{name}: cannot make its tree ({tree}): {cause}"),
            ));
            continue;
        }
        let check = Check {
            name: name.to_string(),
            argv,
            deadline_secs: t.deadline_secs,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            artifacts: Vec::new(),
        };
        let out_dir = work.root.join("out");
        let rec = checks::run_check(&check, &dir, &env, &out_dir, &Default::default());
        let _ = checks::remove_tree(&dir);
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                step.outcome = "not_started".into();
                rep.steps.push(step);
                verdict = Some(("invalid", format!("{name}: could not be observed: {e}")));
                continue;
            }
        };
        step.exit_code = rec.exit_code;
        step.duration_ms = rec.duration_ms;
        step.output_tail = tail_of(&out_dir, name);
        let cause = rec.cause.clone().unwrap_or_default();
        if !rec.started {
            step.outcome = "not_started".into();
            verdict = Some(("invalid", format!("{name} could not start: {cause}")));
        } else if rec.timed_out {
            step.outcome = "timed_out".into();
            verdict = Some((
                "invalid",
                format!(
                    "{name} on {tree} timed out ({cause}): a timeout is neither a pass nor a \
                     survivor; the harness cannot judge"
                ),
            ));
        } else if rec.passed {
            step.outcome = "passed".into();
        } else if rec.exit_code == Some(0) {
            // Exited 0 but something escaped its group with the output: not observed cleanly.
            step.outcome = "failed".into();
            verdict = Some(("invalid", format!("{name} on {tree}: {cause}")));
        } else {
            step.outcome = "failed".into();
        }
        if verdict.is_none() {
            step.holds = (step.outcome == "passed") == (expect == "pass");
            if !step.holds {
                verdict = Some(match name {
                    "baseline" => (
                        "invalid",
                        format!(
                            "the baseline is not clean green: `regression` on the red commit's \
                             parent {} {cause}; a harness whose unmutated baseline is not green \
                             emits no verdict",
                            short(&red.parent)
                        ),
                    ),
                    "new_tests" => (
                        "refuse",
                        format!("the new tests fail on the candidate: {cause}"),
                    ),
                    "regression" => (
                        "refuse",
                        format!(
                            "the regression suite fails on the candidate ({cause}): worse than \
                             the base, which was green"
                        ),
                    ),
                    _ => (
                        "refuse",
                        format!(
                            "a false green: the new tests pass on the red commit {} with every \
                             non-test change reverted ({}); a test that passes without the fix \
                             does not test it",
                            short(&red.commit),
                            if reverted.is_empty() {
                                "the candidate changed no other file".to_string()
                            } else {
                                reverted.join(", ")
                            }
                        ),
                    ),
                });
            }
        }
        rep.steps.push(step);
    }
    drop(work);
    match verdict {
        Some((state, cause)) => ended(rep, state, cause),
        None => {
            rep.state = "ok".into();
            rep.cause = None;
            rep
        }
    }
}

/// An exact private copy of the candidate's bytes, verified against its inventory.
fn exact_copy(cand: &Candidate, dir: &Path) -> Result<(), String> {
    checks::copy_tree(&cand.worktree, dir).map_err(|e| e.to_string())?;
    let (inv, _) = candidate::inventory(dir).map_err(|e| e.to_string())?;
    if inv.digest != cand.identity.inventory.digest {
        return Err(format!(
            "the copy is not exact ({} {} of the copy, {} of the candidate): the worktree \
             changed while it was copied",
            inv.recipe, inv.digest, cand.identity.inventory.digest
        ));
    }
    Ok(())
}

/// Checks out `commit`'s tree into `dir` through a private temporary index (the repository's
/// own index and worktree are never touched), then makes it private (folders 0700, files
/// 0600 or 0700 when executable).
fn materialise(repo: &str, commit: &str, dir: &Path, work: &Path) -> Result<(), String> {
    let index = work.join(format!(
        "index-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("tree")
    ));
    files::ensure_private_dir(dir).map_err(|e| e.to_string())?;
    let git = Git::new(repo).with_env("GIT_INDEX_FILE", index.as_os_str());
    git.run(&["read-tree", &format!("{commit}^{{tree}}")])
        .map_err(|e| e.to_string())?;
    let mut prefix = dir.to_string_lossy().into_owned();
    prefix.push('/');
    git.run(&["checkout-index", "-a", "-f", &format!("--prefix={prefix}")])
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&index);
    make_private(dir).map_err(|e| e.to_string())
}

fn make_private(dir: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(files::DIR_MODE))?;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        let m = std::fs::symlink_metadata(&p)?;
        if m.is_dir() {
            make_private(&p)?;
        } else if m.is_file() {
            let mode = if m.permissions().mode() & 0o100 != 0 {
                0o700
            } else {
                0o600
            };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// The last bytes a step wrote (stdout, then stderr), bounded, lossily decoded. The faces
/// sanitise it before display.
fn tail_of(out_dir: &Path, name: &str) -> String {
    let half = OUTPUT_TAIL_BYTES / 2;
    let read = |suffix: &str| -> String {
        let p = out_dir.join(format!("{name}.{suffix}"));
        let Ok(mut f) = std::fs::File::open(&p) else {
            return String::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(half as u64)));
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    let (out, err) = (read("stdout"), read("stderr"));
    match (out.is_empty(), err.is_empty()) {
        (_, true) => out,
        (true, false) => err,
        (false, false) => format!("{out}\n--- stderr ---\n{err}"),
    }
}
