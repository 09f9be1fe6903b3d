//! Running a policy's checks against a candidate: one attempt, one evidence entry.
//!
//! Before anything runs: the workspace's policy must be approved (its text and digest come
//! from the caller, who read them from the workspace registry), the candidate's identity is
//! recomputed from its worktree (a candidate whose bytes moved is stale: bind again), and an
//! identity already judged under the same policy is not judged again (a retry must bring a
//! new candidate or a new policy, not the same action until it turns green).
//!
//! The checks never run in the candidate's worktree: a build writes `target/` or
//! `node_modules/`, and since ignored files are part of the identity, the checks would change
//! the candidate they judge. They run in an exact private copy of the candidate's bytes
//! (every entry outside `.git`) under `data/checkouts/<ev>`, whose `candidate-inventory/1`
//! digest is verified equal to the candidate's before the first check starts; the copy is
//! removed afterwards. Each check runs without a shell (argv), with a minimal environment,
//! stdin on /dev/null, in its own process group, with its deadline (SIGTERM to the group,
//! SIGKILL after [`KILL_GRACE`]) and its output bounded per stream.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::policy::{Check, POLICY_DIGEST_RECIPE, Policy, PolicyError};
use super::store::{
    self, Artifact, CheckRecord, Checkout, DigestRef, Entry, Output, PolicyRef, StoreError,
};
use super::{Actor, BYTES_RECIPE};
use crate::candidate::{self, Candidate, CandidateError, Currency, IDENTITY_RECIPE};
use crate::files::{self, FilesError};
use crate::home::Home;
use crate::ledger::{Ledger, LedgerError};
use crate::receipts::{self, ReceiptError};
use crate::runs::process;

/// Time between SIGTERM and SIGKILL for a check past its deadline.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long the output pipes are drained after a check's process exited (a process that
/// left its group may hold them open).
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// Poll period of the runner.
const TICK: Duration = Duration::from_millis(50);

/// The approved policy of a workspace, as read from the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedPolicy {
    pub workspace: String,
    pub text: String,
    /// Hex SHA-256 of `text` (`policy-text-sha256/1`).
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "{candidate} has no approved check policy{}: checks are configured in proctor and \
         run only once a person approved the exact text. Remedy: `proctor workspace policy \
         <ws> --file F`, then `proctor workspace approve-policy <ws> --sha256 <h>`",
        .workspace.as_ref().map(|w| format!(" (workspace {w})")).unwrap_or_else(|| " (its run was not started from a registered workspace)".into())
    )]
    PolicyNotApproved {
        candidate: String,
        workspace: Option<String>,
    },
    #[error("the approved policy of {workspace} does not parse: {err}")]
    BadPolicy { workspace: String, err: PolicyError },
    #[error(
        "stale: bind again. {candidate}'s worktree no longer holds the bound bytes ({detail}); \
         evidence about it would name bytes that are gone. Remedy: `proctor candidate bind \
         --run {run}`, then run the checks on the new candidate"
    )]
    Stale {
        candidate: String,
        run: String,
        detail: String,
    },
    #[error(
        "{candidate} was already judged under this policy by {evidence} (attempt {attempt}, \
         {result}); repeating the same checks on the same bytes is not new evidence. Remedy: \
         change the candidate (bind again) or the policy (approve a new one)"
    )]
    AlreadyJudged {
        candidate: String,
        evidence: String,
        attempt: u64,
        result: String,
    },
    #[error("checks are already running on {candidate}; wait for that attempt to end")]
    InProgress { candidate: String },
    #[error(
        "the private copy of {candidate} is not an exact copy ({detail}): the worktree \
         changed while it was copied. Remedy: stop whatever writes there, bind again"
    )]
    CopyDiffers { candidate: String, detail: String },
    #[error("cannot read the workspace registry: {0}")]
    Workspace(String),
    #[error(transparent)]
    Candidate(#[from] CandidateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
}

impl CheckError {
    /// A stable code for the API.
    pub fn code(&self) -> &'static str {
        match self {
            CheckError::PolicyNotApproved { .. } => "policy_not_approved",
            CheckError::BadPolicy { .. } => "policy_invalid",
            CheckError::Stale { .. } => "stale",
            CheckError::AlreadyJudged { .. } => "already_judged",
            CheckError::InProgress { .. } => "in_progress",
            CheckError::CopyDiffers { .. } => "changed_while_copying",
            CheckError::Candidate(e) => e.code(),
            CheckError::Store(StoreError::BadId(_)) => "bad_request",
            _ => "internal",
        }
    }
}

/// What an attempt in progress is doing (shown by the gate while checks run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub evidence: String,
    pub started_at: String,
    /// 1-based index of the check running, 0 while the copy is made.
    pub index: usize,
    pub total: usize,
    pub check: Option<String>,
    pub check_started: Option<Instant>,
    /// Sum of the deadlines (plus the kill grace) of the checks not yet finished.
    pub bound_secs: u64,
}

/// The attempts in progress on one home's candidates, by candidate id. The server owns one
/// (in its state) and hands it to [`run`]; nothing process-wide, so two servers in one
/// process never see or block each other's attempts.
#[derive(Debug, Default)]
pub struct InProgress {
    map: Mutex<HashMap<String, Running>>,
}

impl InProgress {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The attempt running on `candidate`, if any.
    pub fn running(&self, candidate: &str) -> Option<Running> {
        self.map().get(candidate).cloned()
    }

    /// Holds `candidate`'s slot as an attempt does, until the guard is dropped (for tests
    /// of the server's state).
    #[cfg(test)]
    pub(crate) fn hold(&self, candidate: &str) -> Result<impl Drop + '_, CheckError> {
        Slot::take(self, candidate)
    }
}

fn set_running(slot: &Slot, f: impl FnOnce(&mut Running)) {
    if let Some(r) = slot.0.map().get_mut(&slot.1) {
        f(r);
    }
}

/// Holds a candidate's slot while its checks run.
struct Slot<'a>(&'a InProgress, String);

impl<'a> Slot<'a> {
    fn take(checks: &'a InProgress, candidate: &str) -> Result<Slot<'a>, CheckError> {
        let mut m = checks.map();
        if m.contains_key(candidate) {
            return Err(CheckError::InProgress {
                candidate: candidate.to_string(),
            });
        }
        m.insert(
            candidate.to_string(),
            Running {
                evidence: String::new(),
                started_at: crate::ledger::now_at(),
                index: 0,
                total: 0,
                check: None,
                check_started: None,
                bound_secs: 0,
            },
        );
        Ok(Slot(checks, candidate.to_string()))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.map().remove(&self.1);
    }
}

/// `data/checkouts`: the private copies checks run in.
pub fn checkouts_dir(home: &Home) -> PathBuf {
    home.data.join("checkouts")
}

/// The approved policy of the candidate's workspace now (`workspaces::approved_policy`);
/// `None` when the run has no workspace or the policy is not approved.
pub fn approved_policy(
    home: &Home,
    cand: &Candidate,
) -> Result<Option<ApprovedPolicy>, CheckError> {
    let Some(ws) = &cand.workspace_ref else {
        return Ok(None);
    };
    Ok(crate::workspaces::approved_policy(home, ws)
        .map_err(|e| CheckError::Workspace(e.to_string()))?
        .map(|(text, sha256)| ApprovedPolicy {
            workspace: ws.clone(),
            text,
            sha256,
        }))
}

/// Runs the approved policy of the candidate's workspace (read now) on the candidate: see
/// [`run_with`].
pub fn run(
    home: &Home,
    ledger: &Ledger,
    checks: &InProgress,
    candidate_id: &str,
    checker: &Actor,
) -> Result<Entry, CheckError> {
    let cand = candidate::require(home, candidate_id)?;
    let policy = approved_policy(home, &cand)?;
    run_with(home, ledger, checks, candidate_id, policy, checker)
}

/// Runs the policy's checks on a candidate and records one evidence entry (with its
/// receipt and the ledger event `evidence.recorded`). `policy` is the workspace's approved
/// policy now (`None` when there is none).
pub fn run_with(
    home: &Home,
    ledger: &Ledger,
    checks: &InProgress,
    candidate_id: &str,
    policy: Option<ApprovedPolicy>,
    checker: &Actor,
) -> Result<Entry, CheckError> {
    let cand = candidate::require(home, candidate_id)?;
    let slot = Slot::take(checks, &cand.id)?;
    let policy = policy.ok_or_else(|| CheckError::PolicyNotApproved {
        candidate: cand.id.clone(),
        workspace: cand.workspace_ref.clone(),
    })?;
    let parsed = Policy::parse(&policy.text).map_err(|err| CheckError::BadPolicy {
        workspace: policy.workspace.clone(),
        err,
    })?;
    match candidate::currency(&cand) {
        Currency::Current => {}
        Currency::Changed { now } => {
            return Err(CheckError::Stale {
                candidate: cand.id.clone(),
                run: cand.run_ref.clone(),
                detail: format!("its identity is now {}", now.render()),
            });
        }
        Currency::Unavailable { detail, .. } => {
            return Err(CheckError::Stale {
                candidate: cand.id.clone(),
                run: cand.run_ref.clone(),
                detail,
            });
        }
    }
    if let Some(prev) = store::list(home)?
        .into_iter()
        .rev()
        .find(|e| e.identity.digest == cand.identity.digest && e.policy.digest == policy.sha256)
    {
        return Err(CheckError::AlreadyJudged {
            candidate: cand.id.clone(),
            evidence: prev.id,
            attempt: prev.attempt,
            result: prev.result,
        });
    }
    let attempt = store::for_candidate(home, &cand.id)?.len() as u64 + 1;
    let (ev_id, ev_dir) = super::reserve_numbered(&store::evidence_dir(home), "ev-", "")?;
    let result = attempt_in(
        home, ledger, &slot, &cand, &policy, &parsed, checker, attempt, &ev_id, &ev_dir,
    );
    if result.is_err() && !store::entry_path(home, &ev_id).exists() {
        let _ = std::fs::remove_dir_all(&ev_dir);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn attempt_in(
    home: &Home,
    ledger: &Ledger,
    slot: &Slot,
    cand: &Candidate,
    policy: &ApprovedPolicy,
    parsed: &Policy,
    checker: &Actor,
    attempt: u64,
    ev_id: &str,
    ev_dir: &Path,
) -> Result<Entry, CheckError> {
    let started_at = crate::ledger::now_at();
    set_running(slot, |r| {
        r.evidence = ev_id.to_string();
        r.total = parsed.checks.len();
        r.bound_secs = bound_secs(&parsed.checks);
    });
    files::write_atomic(&ev_dir.join("policy.toml"), policy.text.as_bytes())?;

    // The private copy, verified before any check starts.
    let co_root = checkouts_dir(home);
    files::ensure_private_dir(&co_root)?;
    let copy = co_root.join(ev_id);
    let tmpdir = co_root.join(format!("{ev_id}.tmp"));
    let outcome = (|| {
        files::ensure_private_dir(&tmpdir)?;
        copy_tree(&cand.worktree, &copy)?;
        let (inv, entries) = candidate::inventory(&copy).map_err(|e| CheckError::CopyDiffers {
            candidate: cand.id.clone(),
            detail: e.to_string(),
        })?;
        if inv.digest != cand.identity.inventory.digest {
            return Err(CheckError::CopyDiffers {
                candidate: cand.id.clone(),
                detail: format!(
                    "{} {} of the copy, {} of the candidate",
                    inv.recipe, inv.digest, cand.identity.inventory.digest
                ),
            });
        }
        let before: HashSet<String> = entries.into_iter().map(|e| e.path).collect();
        let env = check_env(&co_root, &tmpdir);
        let mut records = Vec::with_capacity(parsed.checks.len());
        for (i, check) in parsed.checks.iter().enumerate() {
            set_running(slot, |r| {
                r.index = i + 1;
                r.check = Some(check.name.clone());
                r.check_started = Some(Instant::now());
                r.bound_secs = bound_secs(&parsed.checks[i..]);
            });
            records.push(run_check(check, &copy, &env, ev_dir, &before)?);
        }
        Ok((inv, env, records))
    })();
    let removed = remove_tree(&copy).is_ok() & remove_tree(&tmpdir).is_ok();
    let (inv, env, records) = outcome?;

    let passed = records.iter().all(|r| r.passed);
    let (receipt_id, receipt_path) = receipts::reserve(home, receipts::KIND_EVIDENCE)?;
    let entry = Entry {
        format: store::ENTRY_FORMAT.to_string(),
        id: ev_id.to_string(),
        attempt,
        candidate: cand.id.clone(),
        run_ref: cand.run_ref.clone(),
        identity: DigestRef {
            recipe: IDENTITY_RECIPE.to_string(),
            digest: cand.identity.digest.clone(),
        },
        policy: PolicyRef {
            recipe: POLICY_DIGEST_RECIPE.to_string(),
            digest: policy.sha256.clone(),
            workspace: policy.workspace.clone(),
            file: "policy.toml".to_string(),
        },
        checker: checker.clone(),
        started_at,
        ended_at: crate::ledger::now_at(),
        checkout: Checkout {
            path: copy.to_string_lossy().into_owned(),
            inventory: DigestRef {
                recipe: inv.recipe,
                digest: inv.digest,
            },
            verified: true,
            removed,
        },
        env: env
            .keys()
            .map(|k| k.to_string_lossy().into_owned())
            .collect(),
        checks: records,
        result: if passed { "passed" } else { "failed" }.to_string(),
        receipt: receipt_id.clone(),
    };
    let entry_sha = store::write(home, &entry)?;
    let seq = ledger.append(
        store::RECORDED_KIND,
        &candidate::fields(json!({
            "evidence": entry.id,
            "candidate": cand.id,
            "run": cand.run_ref,
            "attempt": attempt,
            "identity": cand.identity.digest,
            "identity_recipe": IDENTITY_RECIPE,
            "policy": policy.sha256,
            "policy_recipe": POLICY_DIGEST_RECIPE,
            "workspace": policy.workspace,
            "result": entry.result,
            "entry_sha256": entry_sha,
            "receipt": receipt_id,
            "by": checker.token_id,
        })),
    )?;
    receipts::write_evidence_receipt(
        home,
        ledger,
        &receipt_id,
        &receipt_path,
        cand,
        &entry,
        &entry_sha,
        seq,
    )?;
    Ok(entry)
}

/// Upper bound of the time `checks` can take: their deadlines plus the kill grace.
fn bound_secs(checks: &[Check]) -> u64 {
    checks
        .iter()
        .map(|c| c.deadline_secs + KILL_GRACE.as_secs() + DRAIN_AFTER_EXIT.as_secs())
        .sum()
}

/// The environment of a check: the allowlist of the provider launches (PATH, HOME, USER,
/// LOGNAME, LANG, TZ and the locale categories, from the server's own environment), a
/// private TMPDIR, and GIT_CEILING_DIRECTORIES so that git run inside the copy does not
/// find a repository around it.
pub(crate) fn check_env(
    co_root: &Path,
    tmpdir: &Path,
) -> std::collections::BTreeMap<OsString, OsString> {
    use crate::providers::env::{INHERITED, LOCALE_CATEGORIES};
    let mut env = std::collections::BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        if let Some(name) = k.to_str()
            && (INHERITED.contains(&name) || LOCALE_CATEGORIES.contains(&name))
        {
            env.insert(k.clone(), v);
        }
    }
    env.insert("TMPDIR".into(), tmpdir.as_os_str().to_owned());
    env.insert(
        "GIT_CEILING_DIRECTORIES".into(),
        co_root.as_os_str().to_owned(),
    );
    env
}

/// Copies every entry of `src` except its root `.git` into `dst` (which must not exist):
/// folders 0700, files 0600 (0700 when the owner could execute the original), symbolic
/// links as links with the same target. Never follows a link.
pub(crate) fn copy_tree(src: &str, dst: &Path) -> Result<(), FilesError> {
    let src = Path::new(src);
    std::fs::create_dir(dst).map_err(|e| FilesError::io("create the folder", dst, e))?;
    files::ensure_private_dir(dst)?;
    copy_dir(src, dst, true)
}

fn copy_dir(src: &Path, dst: &Path, root: bool) -> Result<(), FilesError> {
    let rd = std::fs::read_dir(src).map_err(|e| FilesError::io("read the folder", src, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| FilesError::io("read the folder", src, e))?;
        let name = entry.file_name();
        if root && name == ".git" {
            continue;
        }
        let from = src.join(&name);
        let to = dst.join(&name);
        let meta =
            std::fs::symlink_metadata(&from).map_err(|e| FilesError::io("inspect", &from, e))?;
        let ft = meta.file_type();
        if ft.is_dir() {
            std::fs::create_dir(&to).map_err(|e| FilesError::io("create the folder", &to, e))?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(files::DIR_MODE))
                .map_err(|e| FilesError::io("set the mode of", &to, e))?;
            copy_dir(&from, &to, false)?;
        } else if ft.is_symlink() {
            let target =
                std::fs::read_link(&from).map_err(|e| FilesError::io("read the link", &from, e))?;
            std::os::unix::fs::symlink(&target, &to)
                .map_err(|e| FilesError::io("create the link", &to, e))?;
        } else if ft.is_file() {
            let mut input = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&from)
                .map_err(|e| FilesError::io("open", &from, e))?;
            let mut out = files::create_private_new(&to)?;
            io::copy(&mut input, &mut out).map_err(|e| FilesError::io("copy into", &to, e))?;
            if meta.mode() & 0o100 != 0 {
                out.set_permissions(std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| FilesError::io("set the mode of", &to, e))?;
            }
        } else {
            return Err(FilesError::NotARegularFile { path: from });
        }
    }
    Ok(())
}

/// Removes a tree a check may have made read-only: folders are made 0700 first (links are
/// never followed), then everything is removed. Absent is fine.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    fn open_up(p: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        if meta.is_dir() {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    open_up(&e.path());
                }
            }
        }
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        _ => {}
    }
    open_up(path);
    std::fs::remove_dir_all(path)
}

/// A bounded capture: the first `max` bytes go to the file, the rest is counted.
struct Sink {
    file: File,
    path: PathBuf,
    name: String,
    max: u64,
    kept: u64,
    observed: u64,
    hasher: Sha256,
}

impl Sink {
    fn create(dir: &Path, name: String, max: u64) -> Result<Sink, FilesError> {
        let path = dir.join(&name);
        let file = files::create_private_new(&path)?;
        Ok(Sink {
            file,
            path,
            name,
            max,
            kept: 0,
            observed: 0,
            hasher: Sha256::new(),
        })
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), FilesError> {
        self.observed += bytes.len() as u64;
        let room = usize::try_from(self.max - self.kept).unwrap_or(usize::MAX);
        let take = &bytes[..bytes.len().min(room)];
        if !take.is_empty() {
            self.file
                .write_all(take)
                .map_err(|e| FilesError::io("write", &self.path, e))?;
            self.hasher.update(take);
            self.kept += take.len() as u64;
        }
        Ok(())
    }

    fn finish(self) -> Result<Output, FilesError> {
        self.file
            .sync_all()
            .map_err(|e| FilesError::io("fsync", &self.path, e))?;
        Ok(Output {
            file: self.name,
            bytes: self.kept,
            observed_bytes: self.observed,
            sha256: hex::encode(self.hasher.finalize()),
            recipe: BYTES_RECIPE.to_string(),
            truncated: self.observed > self.kept,
        })
    }
}

/// The program a check's first word names: a bare name is looked up on the check's PATH;
/// a relative path (`./scripts/test.sh`) is taken inside the copy; an absolute one as is.
fn resolve(
    argv0: &str,
    cwd: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
) -> Option<PathBuf> {
    if argv0.contains('/') {
        let p = if Path::new(argv0).is_absolute() {
            PathBuf::from(argv0)
        } else {
            cwd.join(argv0)
        };
        return std::fs::metadata(&p)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then_some(p);
    }
    process::which(std::ffi::OsStr::new(argv0), env.iter())
}

fn set_nonblocking(fd: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads what is available; `Ok(true)` at end of stream.
fn drain(src: &mut impl Read, sink: &mut Sink, buf: &mut [u8]) -> Result<bool, FilesError> {
    loop {
        match src.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => sink.push(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Ok(true),
        }
    }
}

/// Runs one check in `cwd` and observes it.
pub(crate) fn run_check(
    check: &Check,
    cwd: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
    ev_dir: &Path,
    before: &HashSet<String>,
) -> Result<CheckRecord, CheckError> {
    let mut rec = CheckRecord {
        name: check.name.clone(),
        argv: check.argv.clone(),
        program: None,
        deadline_secs: check.deadline_secs,
        max_output_bytes: check.max_output_bytes,
        started: false,
        spawn_error: None,
        exit_code: None,
        signal: None,
        duration_ms: 0,
        timed_out: false,
        stray_processes_killed: false,
        stdout: None,
        stderr: None,
        artifacts: Vec::new(),
        passed: false,
        cause: None,
    };
    let Some(program) = resolve(&check.argv[0], cwd, env) else {
        rec.spawn_error = Some(format!(
            "{} is not an executable file{}",
            check.argv[0],
            if check.argv[0].contains('/') {
                " (relative paths are taken inside the candidate)"
            } else {
                " on the check's PATH"
            }
        ));
        rec.cause = Some(format!(
            "could not start: {}",
            rec.spawn_error.as_deref().unwrap_or("")
        ));
        rec.artifacts = artifacts(check, cwd, ev_dir, before)?;
        return Ok(rec);
    };
    rec.program = Some(program.to_string_lossy().into_owned());
    let mut out_sink = Sink::create(
        ev_dir,
        format!("{}.stdout", check.name),
        check.max_output_bytes,
    )?;
    let mut err_sink = Sink::create(
        ev_dir,
        format!("{}.stderr", check.name),
        check.max_output_bytes,
    )?;

    let mut cmd = Command::new(&program);
    cmd.arg0(&check.argv[0])
        .args(&check.argv[1..])
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: runs in the forked child before exec; only async-signal-safe calls
    // (signal, sigprocmask, close_range, fcntl).
    unsafe {
        cmd.pre_exec(|| {
            crate::runs::reset_signals_in_child();
            crate::runs::cloexec_inherited_fds();
            Ok(())
        });
    }
    let start = Instant::now();
    let spawned = {
        let _guard = crate::runs::fork_guard();
        cmd.spawn()
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            rec.spawn_error = Some(e.to_string());
            rec.cause = Some(format!("could not start: {e}"));
            rec.stdout = Some(out_sink.finish()?);
            rec.stderr = Some(err_sink.finish()?);
            rec.artifacts = artifacts(check, cwd, ev_dir, before)?;
            return Ok(rec);
        }
    };
    rec.started = true;
    let pgid = child.id();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    for fd in [
        out.as_ref().map(|o| o.as_raw_fd()),
        err.as_ref().map(|e| e.as_raw_fd()),
    ]
    .into_iter()
    .flatten()
    {
        let _ = set_nonblocking(fd);
    }
    let deadline = start + Duration::from_secs(check.deadline_secs);
    let mut buf = vec![0u8; 64 * 1024];
    let mut status = None;
    let mut ended = start;
    let mut term_at: Option<Instant> = None;
    let mut killed = false;
    loop {
        let now = Instant::now();
        if status.is_none() {
            match child.try_wait() {
                Ok(Some(st)) => {
                    status = Some(st);
                    ended = now;
                    if process::group_has_live_members(pgid) {
                        let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
                        rec.stray_processes_killed = true;
                    }
                }
                Ok(None) => {
                    if term_at.is_none() && now >= deadline {
                        rec.timed_out = true;
                        let _ = crate::process_group::signal_group(pgid, libc::SIGTERM);
                        term_at = Some(now);
                    } else if let Some(t) = term_at
                        && !killed
                        && now >= t + KILL_GRACE
                    {
                        let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
                        killed = true;
                    }
                }
                Err(_) => {
                    let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
                }
            }
        }
        if status.is_some() && (out.is_none() && err.is_none() || now >= ended + DRAIN_AFTER_EXIT) {
            break;
        }
        let mut fds: Vec<libc::pollfd> = [
            out.as_ref().map(|o| o.as_raw_fd()),
            err.as_ref().map(|e| e.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
        if fds.is_empty() {
            std::thread::sleep(TICK);
        } else {
            // SAFETY: a valid array of pollfd of the given length.
            unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    TICK.as_millis() as libc::c_int,
                )
            };
        }
        if let Some(o) = out.as_mut()
            && drain(o, &mut out_sink, &mut buf)?
        {
            out = None;
        }
        if let Some(e) = err.as_mut()
            && drain(e, &mut err_sink, &mut buf)?
        {
            err = None;
        }
    }
    let escaped = out.is_some() || err.is_some();
    drop(out);
    drop(err);
    let status = status.ok_or_else(|| {
        CheckError::Files(FilesError::io(
            "wait for",
            &program,
            io::Error::other("no exit status"),
        ))
    })?;
    rec.duration_ms = u64::try_from(ended.duration_since(start).as_millis()).unwrap_or(u64::MAX);
    rec.exit_code = status.code();
    rec.signal = status.signal().map(crate::runs::signal_name);
    rec.stdout = Some(out_sink.finish()?);
    rec.stderr = Some(err_sink.finish()?);
    rec.artifacts = artifacts(check, cwd, ev_dir, before)?;

    let missing: Vec<&str> = rec
        .artifacts
        .iter()
        .filter(|a| !a.present)
        .map(|a| a.path.as_str())
        .collect();
    rec.cause = if rec.timed_out {
        Some(format!(
            "the deadline of {} s passed: its process group got SIGTERM{}",
            check.deadline_secs,
            if killed { ", then SIGKILL" } else { "" }
        ))
    } else if let Some(sig) = &rec.signal {
        Some(format!("killed by {sig}"))
    } else if rec.exit_code != Some(0) {
        Some(format!(
            "exited with code {}",
            rec.exit_code.map_or("?".into(), |c| c.to_string())
        ))
    } else if !missing.is_empty() {
        Some(format!(
            "required artifact missing or not a file: {}",
            missing.join(", ")
        ))
    } else if escaped {
        Some(
            "a process that left the check's process group still held its output open when \
             the check ended; it was not killed (checks are not confined)"
                .into(),
        )
    } else {
        None
    };
    rec.passed = rec.cause.is_none();
    Ok(rec)
}

/// Looks for each required artifact in the copy, hashes it and keeps a copy beside the
/// entry (`artifacts/<check>/<path>`). Only a regular file counts.
fn artifacts(
    check: &Check,
    cwd: &Path,
    ev_dir: &Path,
    before: &HashSet<String>,
) -> Result<Vec<Artifact>, CheckError> {
    let mut out = Vec::with_capacity(check.artifacts.len());
    for rel in &check.artifacts {
        let mut a = Artifact {
            path: rel.clone(),
            present: false,
            bytes: None,
            sha256: None,
            recipe: None,
            kept: None,
            present_before: before.contains(rel),
            problem: None,
        };
        let src = cwd.join(rel);
        // Every folder on the way must be a real folder of the copy: a check that replaced
        // one with a link to elsewhere does not get a file from outside counted.
        let mut parent = cwd.to_path_buf();
        let segments: Vec<&str> = rel.split('/').collect();
        let mut linked = None;
        for seg in &segments[..segments.len().saturating_sub(1)] {
            parent.push(seg);
            if std::fs::symlink_metadata(&parent).is_ok_and(|m| !m.is_dir()) {
                linked = Some(
                    parent
                        .strip_prefix(cwd)
                        .unwrap_or(&parent)
                        .to_string_lossy()
                        .into_owned(),
                );
                break;
            }
        }
        if let Some(l) = linked {
            a.problem = Some(format!(
                "{l} is not a folder of the copy (a link or a file)"
            ));
            out.push(a);
            continue;
        }
        match std::fs::symlink_metadata(&src) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => a.problem = Some("missing".into()),
            Err(e) => a.problem = Some(format!("unreadable: {e}")),
            Ok(m) if m.file_type().is_symlink() => {
                a.problem = Some("a symbolic link, not a regular file".into())
            }
            Ok(m) if !m.is_file() => a.problem = Some("not a regular file".into()),
            Ok(_) => {
                let kept_rel = format!("artifacts/{}/{rel}", check.name);
                let dst = ev_dir.join(&kept_rel);
                files::ensure_private_dir(&files::parent_of(&dst))?;
                let copied = (|| -> Result<(u64, String), FilesError> {
                    let mut input = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                        .open(&src)
                        .map_err(|e| FilesError::io("open", &src, e))?;
                    let mut output = files::create_private_new(&dst)?;
                    let mut h = Sha256::new();
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut n_total = 0u64;
                    loop {
                        let n = match input.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(FilesError::io("read", &src, e)),
                        };
                        h.update(&buf[..n]);
                        output
                            .write_all(&buf[..n])
                            .map_err(|e| FilesError::io("write", &dst, e))?;
                        n_total += n as u64;
                    }
                    output
                        .sync_all()
                        .map_err(|e| FilesError::io("fsync", &dst, e))?;
                    Ok((n_total, hex::encode(h.finalize())))
                })();
                match copied {
                    Ok((n, sha)) => {
                        a.present = true;
                        a.bytes = Some(n);
                        a.sha256 = Some(sha);
                        a.recipe = Some(BYTES_RECIPE.to_string());
                        a.kept = Some(kept_rel);
                    }
                    Err(e) => a.problem = Some(format!("unreadable: {e}")),
                }
            }
        }
        out.push(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
