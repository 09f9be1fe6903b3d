//! Worktree runs: a run that works in its own linked git worktree, on its own new branch,
//! under the home's `data/worktrees/<run-ref>` (seed 002, "Option worktree").
//!
//! This module is the git side, and all of it goes through [`crate::git::Git`]:
//!
//! - [`validate_repo`]: the refusals (422) that come before anything is created: not a git
//!   work tree, not the repository's root, a linked worktree or a bare repository, no
//!   commit, read-only folders, git config that names a filter or an include;
//! - [`resolve_from`]: `worktree_from`, a full commit id that a ref retains or a local
//!   branch, resolved to the one full commit id that is then used;
//! - [`create`]: `git worktree add -b proctor/<run-ref>` (503 when the worktrees folder
//!   cannot be made), and the starting point a candidate is later bound against;
//! - [`diff`] and [`diff_file`]: plumbing on committed objects only;
//! - [`release`]: cleanup, which removes a worktree only when nothing would be lost (or when
//!   the operator explicitly discards it).
//!
//! Residuals (docs/worktrees.md): a worktree shares its repository's object store and
//! config; the agent runs as the host user and can write the main repository's `.git`. A
//! worktree is an isolation of checkouts, not a confinement.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::files;
use crate::git::{Git, GitError};
use crate::home::Home;
use crate::text;

/// A worktree run's isolated checkout, as observed when it was created (before the tool
/// started). A candidate is bound against this starting point.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// The linked worktree's absolute path (under the home's worktrees folder).
    pub path: String,
    /// The new branch the worktree is on, e.g. `proctor/run-0003`.
    pub branch: String,
    /// The repository (the registered workspace's root) the worktree belongs to.
    pub repo: String,
    /// The full commit id the worktree started at (HEAD at creation).
    pub base: String,
    /// The tree id of the worktree's index at creation.
    pub index_tree: String,
    /// True when `git status --porcelain --ignored` was empty at creation.
    pub clean_at_start: bool,
    /// The registered workspace's ref, when the run was started from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_ref: Option<String>,
}

/// At most this many paths in a diff listing.
pub const MAX_DIFF_PATHS: usize = 200;
/// Each side of a file diff is clipped to this many bytes.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// A blob larger than this is refused (413) rather than read.
pub const MAX_BLOB_BYTES: u64 = 16 * 1024 * 1024;
/// The prefix of every branch proctor makes.
pub const BRANCH_PREFIX: &str = "proctor/";

/// Why a worktree operation failed, with the HTTP status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// 422: the request cannot be honoured as asked (the repository or the value is unfit).
    #[error("{0}")]
    Unprocessable(String),
    /// 409: the state of the repository or the worktree forbids it now.
    #[error("{0}")]
    Conflict(String),
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 413.
    #[error("{0}")]
    TooLarge(String),
    /// 503: the home cannot hold worktrees.
    #[error("{0}")]
    Unavailable(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
}

impl WorktreeError {
    /// The HTTP status this error maps to.
    pub fn status(&self) -> u16 {
        match self {
            WorktreeError::Unprocessable(_) => 422,
            WorktreeError::Conflict(_) => 409,
            WorktreeError::NotFound(_) => 404,
            WorktreeError::TooLarge(_) => 413,
            WorktreeError::Unavailable(_) => 503,
            WorktreeError::Internal(_) => 500,
        }
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> WorktreeError {
    WorktreeError::Internal(format!("{what}: {e}"))
}

/// A path for a message (the client sanitises messages before printing; this keeps them
/// on one line and bounded).
fn shown(p: &Path) -> String {
    text::one_line(&p.to_string_lossy(), 300)
}

/// The home's worktrees folder.
pub fn worktrees_dir(home: &Home) -> PathBuf {
    home.data.join("worktrees")
}

/// The branch of a run's worktree.
pub fn branch_for(run_ref: &str) -> String {
    format!("{BRANCH_PREFIX}{run_ref}")
}

/// A repository that passed every check of [`validate_repo`].
#[derive(Debug, Clone)]
pub struct Repo {
    /// The work tree's root, canonical.
    pub root: PathBuf,
    /// The repository's git folder (common to its worktrees), canonical.
    pub common_dir: PathBuf,
    /// Hex digits of a full object id here (40 for SHA-1, 64 for SHA-256).
    pub id_len: usize,
    /// The full commit id of HEAD.
    pub head: String,
}

impl Repo {
    fn git(&self) -> Git {
        Git::new(&self.root)
    }
}

/// Checks that `dir` can hold worktree runs, before anything is created. Every refusal is
/// 422 and names the problem and the remedy.
pub fn validate_repo(dir: &Path) -> Result<Repo, WorktreeError> {
    let unfit = |what: String| WorktreeError::Unprocessable(what);
    let root = std::fs::canonicalize(dir).map_err(|e| {
        unfit(format!(
            "workspace {} cannot be read ({e}); give an existing folder",
            shown(dir)
        ))
    })?;
    let git = Git::new(&root);
    let not_a_work_tree = |why: String| {
        unfit(format!(
            "workspace {} is not a git work tree ({why}); a worktree run needs the root of a git \
             repository with at least one commit (`git init`, then commit), or start without \
             --worktree",
            shown(&root)
        ))
    };
    let bare = git
        .text(&["rev-parse", "--is-bare-repository"])
        .map_err(|e| not_a_work_tree(git_reason(&e)))?;
    if bare == "true" {
        return Err(unfit(format!(
            "workspace {} is a bare repository: it has no work tree to start from; register a \
             clone with a work tree (`git clone {} <dir>`) and start there",
            shown(&root),
            shown(&root)
        )));
    }
    if git
        .text(&["rev-parse", "--is-inside-git-dir"])
        .ok()
        .as_deref()
        == Some("true")
    {
        return Err(unfit(format!(
            "workspace {} is inside a repository's git folder, not its work tree; register the \
             repository's root",
            shown(&root)
        )));
    }
    let inside = git
        .text(&["rev-parse", "--is-inside-work-tree"])
        .map_err(|e| not_a_work_tree(git_reason(&e)))?;
    if inside != "true" {
        return Err(not_a_work_tree(
            "git says it is outside any work tree".into(),
        ));
    }
    let top = git
        .text(&["rev-parse", "--show-toplevel"])
        .map_err(|e| not_a_work_tree(git_reason(&e)))?;
    let top = std::fs::canonicalize(&top).map_err(|e| internal(&top, e))?;
    if top != root {
        return Err(unfit(format!(
            "workspace {} is a subfolder of the repository at {}, not its root; a worktree holds \
             the whole repository: register and start in {}",
            shown(&root),
            shown(&top),
            shown(&top)
        )));
    }
    let git_dir = canonical_git_path(&git, &["rev-parse", "--absolute-git-dir"])?;
    let common_dir = canonical_git_path(
        &git,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    if git_dir != common_dir {
        let main = common_dir.parent().unwrap_or(&common_dir).to_path_buf();
        return Err(unfit(format!(
            "workspace {} is a linked worktree of the repository whose git folder is {}; \
             worktree runs start from the main working copy: register {} instead",
            shown(&root),
            shown(&common_dir),
            shown(&main)
        )));
    }
    let head = git
        .text(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .map_err(|_| {
            unfit(format!(
                "repository {} has no commit yet (HEAD names no commit); a worktree starts at a \
                 commit: make a first commit, then start again",
                shown(&root)
            ))
        })?;
    let id_len = match git.text(&["rev-parse", "--show-object-format"]).as_deref() {
        Ok("sha256") => 64,
        _ => 40,
    };
    check_config(&git, &root)?;
    check_writable(&root, &common_dir)?;
    Ok(Repo {
        root,
        common_dir,
        id_len,
        head,
    })
}

/// git's stderr, or the error, for a message.
fn git_reason(e: &GitError) -> String {
    match e {
        GitError::Failed { stderr, .. } => text::one_line(stderr, 300),
        other => text::one_line(&other.to_string(), 300),
    }
}

fn canonical_git_path(git: &Git, args: &[&str]) -> Result<PathBuf, WorktreeError> {
    let p = git
        .text(args)
        .map_err(|e| internal("reading the repository's layout", e))?;
    std::fs::canonicalize(&p).map_err(|e| internal(&p, e))
}

/// Config keys that make git run a program on checkout or add (`filter.*`), or read a file
/// nobody checked (`include.path`, `includeIf.*`), in any scope git reads for the
/// repository. Proctor's own `-c` overrides (scope `command`) are not the repository's.
fn check_config(git: &Git, root: &Path) -> Result<(), WorktreeError> {
    let out = git
        .run(&["config", "--list", "--show-origin", "--show-scope", "-z"])
        .map_err(|e| {
            WorktreeError::Unprocessable(format!(
                "git cannot read the configuration of {} ({}); fix it, then start again",
                shown(root),
                git_reason(&e)
            ))
        })?;
    let flagged = flagged_config(&out);
    if flagged.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = flagged
        .iter()
        .take(5)
        .map(|f| format!("{} ({} scope, {})", f.key, f.scope, f.origin))
        .collect();
    let more = if flagged.len() > 5 {
        format!(" and {} more", flagged.len() - 5)
    } else {
        String::new()
    };
    Err(WorktreeError::Unprocessable(format!(
        "the git configuration of {} names a filter or an include: {}{more}. A filter runs a \
         program on every checkout and add, and an include reads a file proctor did not check. \
         Remove it (`git config --<scope> --unset <key>`, or edit the file named), or start \
         without --worktree",
        shown(root),
        text::one_line(&listed.join(", "), 1000)
    )))
}

/// One flagged config entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlaggedConfig {
    pub scope: String,
    pub origin: String,
    pub key: String,
}

/// Parses `git config --list --show-origin --show-scope -z` (records of
/// `scope NUL origin NUL key [LF value] NUL`) and keeps the filter and include keys.
pub fn flagged_config(out: &[u8]) -> Vec<FlaggedConfig> {
    let mut tokens = out.split(|b| *b == 0);
    let mut found = Vec::new();
    while let (Some(scope), Some(origin), Some(kv)) = (tokens.next(), tokens.next(), tokens.next())
    {
        let scope = String::from_utf8_lossy(scope).into_owned();
        if scope == "command" {
            continue;
        }
        let key_bytes = kv.split(|b| *b == b'\n').next().unwrap_or(kv);
        let key = String::from_utf8_lossy(key_bytes).into_owned();
        let lower = key.to_ascii_lowercase();
        if lower.starts_with("filter.")
            || lower == "include.path"
            || lower.starts_with("includeif.")
        {
            found.push(FlaggedConfig {
                scope,
                origin: String::from_utf8_lossy(origin).into_owned(),
                key,
            });
        }
    }
    found
}

/// Refuses a repository whose root, git folder, object store or refs folder, or any
/// folder of its working tree, lacks the owner's write bit. The mode bits are read rather
/// than `access(2)` asked: a root process is always granted access, but a folder someone
/// made read-only says they did not want it written.
fn check_writable(root: &Path, common_dir: &Path) -> Result<(), WorktreeError> {
    let read_only = |p: &Path, what: &str| {
        WorktreeError::Unprocessable(format!(
            "{what} {} is read-only (no owner write permission); a worktree run writes objects, \
             refs and files there. Make it writable (`chmod u+w`), or start without --worktree",
            shown(p)
        ))
    };
    for (p, what) in [
        (root.to_path_buf(), "the repository's root"),
        (common_dir.to_path_buf(), "the repository's git folder"),
        (common_dir.join("objects"), "the object store"),
        (common_dir.join("refs"), "the refs folder"),
    ] {
        let meta = std::fs::metadata(&p).map_err(|e| {
            WorktreeError::Unprocessable(format!(
                "{what} {} cannot be read ({e}); the repository is damaged or incomplete",
                shown(&p)
            ))
        })?;
        if meta.permissions().mode() & 0o200 == 0 {
            return Err(read_only(&p, what));
        }
    }
    // Every folder of the working tree outside `.git`, without following links.
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            WorktreeError::Unprocessable(format!(
                "folder {} of the working tree cannot be read ({e}); make it readable and \
                 writable, or start without --worktree",
                shown(&dir)
            ))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| internal(&dir.to_string_lossy(), e))?;
            let meta = match std::fs::symlink_metadata(entry.path()) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(internal(&entry.path().to_string_lossy(), e)),
            };
            if !meta.is_dir() || entry.file_name() == ".git" {
                continue;
            }
            if meta.permissions().mode() & 0o200 == 0 {
                return Err(read_only(&entry.path(), "folder"));
            }
            stack.push(entry.path());
        }
    }
    Ok(())
}

/// True for `len` lowercase hex digits.
fn is_hex_id(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Resolves `worktree_from` to the full commit id the worktree starts at; without a value,
/// the workspace's current commit. Only a full commit id (that the repository contains and
/// that a branch, tag or remote branch retains) or the name of an existing local branch is
/// accepted; anything git would interpret (expressions, ranges, options, abbreviations) is
/// refused with 422 before anything is created.
pub fn resolve_from(repo: &Repo, from: Option<&str>) -> Result<String, WorktreeError> {
    let Some(v) = from else {
        return Ok(repo.head.clone());
    };
    let unfit = |what: String| WorktreeError::Unprocessable(what);
    let shown_v = text::one_line(v, 120);
    let git = repo.git();
    if v.is_empty() {
        return Err(unfit(
            "worktree_from is empty; give a full commit id or a local branch name, or leave it out"
                .into(),
        ));
    }
    if is_hex_id(v, 40) || is_hex_id(v, 64) {
        if v.len() != repo.id_len {
            return Err(unfit(format!(
                "worktree_from {shown_v} has {} hex digits but this repository's commit ids have \
                 {}; give a full commit id of this repository",
                v.len(),
                repo.id_len
            )));
        }
        let kind = git.text(&["cat-file", "-t", v]).map_err(|_| {
            unfit(format!(
                "worktree_from {shown_v}: the repository contains no such commit; fetch it first, \
                 or give a commit it has"
            ))
        })?;
        if kind != "commit" {
            return Err(unfit(format!(
                "worktree_from {shown_v} is a {} object, not a commit; give a commit id",
                text::one_line(&kind, 20)
            )));
        }
        let retained = git
            .text(&[
                "for-each-ref",
                "--count=1",
                "--format=%(refname)",
                "--contains",
                v,
                "refs/heads",
                "refs/tags",
                "refs/remotes",
            ])
            .map_err(|e| internal("git for-each-ref --contains", e))?;
        if retained.is_empty() {
            return Err(unfit(format!(
                "worktree_from {shown_v}: no branch, tag or remote branch of the repository \
                 retains this commit (it may be garbage-collected at any time); put a branch or a \
                 tag on it first (`git branch <name> {shown_v}`)"
            )));
        }
        return Ok(v.to_string());
    }
    if v.starts_with('-') {
        return Err(unfit(format!(
            "worktree_from {shown_v} looks like an option; give a full commit id or a local \
             branch name"
        )));
    }
    if v.contains("..") {
        return Err(unfit(format!(
            "worktree_from {shown_v} is a range; a worktree starts at one commit: give a full \
             commit id or a local branch name"
        )));
    }
    let expression = v == "@"
        || v.contains("@{")
        || v.chars().any(|c| {
            matches!(c, '^' | '~' | ':' | '?' | '*' | '[' | '\\')
                || c.is_whitespace()
                || c.is_control()
        });
    if expression {
        return Err(unfit(format!(
            "worktree_from {shown_v} is a revision expression; git would interpret it, and \
             proctor takes only values that name one thing: a full commit id (40 or 64 lowercase \
             hex digits) or a local branch name"
        )));
    }
    let full = format!("refs/heads/{v}");
    if git.run(&["check-ref-format", &full]).is_err() {
        return Err(unfit(format!(
            "worktree_from {shown_v} is not a valid branch name; give a full commit id or a local \
             branch name"
        )));
    }
    if let Ok(id) = git.text(&["show-ref", "--verify", "--hash", &full]) {
        let kind = git
            .text(&["cat-file", "-t", &id])
            .map_err(|e| internal("git cat-file", e))?;
        if kind != "commit" {
            return Err(unfit(format!(
                "branch {shown_v} points at a {} object, not a commit",
                text::one_line(&kind, 20)
            )));
        }
        return Ok(id);
    }
    if v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unfit(format!(
            "worktree_from {shown_v} is not a local branch, and as a commit id it is abbreviated \
             or not lowercase; give all {} lowercase hex digits of the commit id",
            repo.id_len
        )));
    }
    Err(unfit(format!(
        "worktree_from {shown_v}: the repository has no local branch of that name (`git branch \
         --list` shows them; tags and remote branches are not accepted: give a full commit id \
         instead)"
    )))
}

/// Creates the run's worktree at `commit` on the new branch `proctor/<run_ref>`, under the
/// home's worktrees folder (0700), and records its starting point. Nothing else moves: the
/// workspace's checkout and every existing branch stay where they were.
pub fn create(
    home: &Home,
    repo: &Repo,
    run_ref: &str,
    commit: &str,
    workspace_ref: Option<&str>,
) -> Result<WorktreeInfo, WorktreeError> {
    let dir = worktrees_dir(home);
    files::ensure_private_dir(&dir).map_err(|e| {
        WorktreeError::Unavailable(format!(
            "this home has no worktrees folder: {e}. Remedy: make {} a folder you own with mode \
             0700 (or move aside what is there), then start again",
            shown(&dir)
        ))
    })?;
    let path = dir.join(run_ref);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(WorktreeError::Conflict(format!(
            "{} already exists; a run's worktree folder is never reused. Move it aside, then \
             start again",
            shown(&path)
        )));
    }
    let branch = branch_for(run_ref);
    let git = repo.git();
    let full = format!("refs/heads/{branch}");
    if git.run(&["show-ref", "--verify", "-q", &full]).is_ok() {
        return Err(WorktreeError::Conflict(format!(
            "the repository {} already has a branch {branch} (left by another proctor home?); \
             proctor never reuses a branch. Delete or rename it (`git -C {} branch -m {branch} \
             <other>`), then start again",
            shown(&repo.root),
            shown(&repo.root)
        )));
    }
    files::ensure_private_dir(&path).map_err(|e| internal("creating the worktree folder", e))?;
    let path_str = path.to_string_lossy().into_owned();
    if let Err(e) = git.run(&["worktree", "add", "-q", "-b", &branch, &path_str, commit]) {
        remove_quietly(&git, &path, &branch);
        return Err(internal("git worktree add", e));
    }
    let info = (|| {
        let wt = Git::new(&path);
        let base = wt
            .text(&["rev-parse", "--verify", "HEAD^{commit}"])
            .map_err(|e| internal("reading the new worktree's HEAD", e))?;
        if base != commit {
            return Err(WorktreeError::Internal(format!(
                "the new worktree is at {base}, not at {commit}"
            )));
        }
        let index_tree = wt
            .text(&["write-tree"])
            .map_err(|e| internal("git write-tree in the new worktree", e))?;
        let status = wt
            .run(&["status", "--porcelain", "--ignored", "-z"])
            .map_err(|e| internal("git status in the new worktree", e))?;
        Ok(WorktreeInfo {
            path: path_str.clone(),
            branch: branch.clone(),
            repo: repo.root.to_string_lossy().into_owned(),
            base,
            index_tree,
            clean_at_start: status.is_empty(),
            workspace_ref: workspace_ref.map(str::to_string),
        })
    })();
    if info.is_err() {
        remove_quietly(&git, &path, &branch);
    }
    info
}

/// Best effort: the worktree at `path` and `branch`, gone (after a failed creation).
fn remove_quietly(git: &Git, path: &Path, branch: &str) {
    let p = path.to_string_lossy();
    let _ = git.run(&["worktree", "remove", "--force", "--force", &p]);
    let _ = std::fs::remove_dir_all(path);
    let _ = git.run(&["worktree", "prune"]);
    let _ = git.run(&["branch", "-D", branch]);
}

/// Removes a worktree and its branch (after a refused start, or a discard).
pub fn remove(info: &WorktreeInfo) -> Result<(), WorktreeError> {
    let git = Git::new(&info.repo);
    git.run(&["worktree", "remove", "--force", "--force", &info.path])
        .map_err(|e| internal("git worktree remove", e))?;
    git.run(&["branch", "-D", &info.branch])
        .map_err(|e| internal("git branch -D", e))?;
    Ok(())
}

/// The tip of the run's branch, when the repository still has it.
fn branch_tip(git: &Git, branch: &str) -> Option<String> {
    git.text(&[
        "show-ref",
        "--verify",
        "--hash",
        &format!("refs/heads/{branch}"),
    ])
    .ok()
}

/// One changed path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct DiffEntry {
    pub path: String,
    /// git's status letter: A added, D deleted, M modified, T type changed.
    pub status: String,
}

/// `GET /runs/{ref}/diff`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Diff {
    pub branch: String,
    /// The merge base of the branch tip and the workspace's current commit.
    pub base: String,
    /// The branch tip.
    pub head: String,
    pub files: Vec<DiffEntry>,
    /// True when more than [`MAX_DIFF_PATHS`] paths changed (`total` says how many).
    pub truncated: bool,
    pub total: usize,
}

/// The base (merge base of the branch tip and the workspace's current commit) and head
/// (the branch tip) of a worktree run's branch. 409 when the branch is gone or shares no
/// history with the workspace.
fn endpoints(info: &WorktreeInfo) -> Result<(String, String), WorktreeError> {
    let git = Git::new(&info.repo);
    if !Path::new(&info.repo).is_dir() {
        return Err(WorktreeError::Conflict(format!(
            "the repository {} is no longer there",
            text::one_line(&info.repo, 300)
        )));
    }
    let head = branch_tip(&git, &info.branch).ok_or_else(|| {
        WorktreeError::Conflict(format!(
            "branch {} is gone from the repository {}; there is nothing to compare",
            text::one_line(&info.branch, 200),
            text::one_line(&info.repo, 300)
        ))
    })?;
    let current = git
        .text(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .map_err(|_| {
            WorktreeError::Conflict(format!(
                "the workspace {} has no current commit to compare with",
                text::one_line(&info.repo, 300)
            ))
        })?;
    match git.text(&["merge-base", &head, &current]) {
        Ok(base) => Ok((base, head)),
        Err(e) if e.code() == Some(1) => Err(WorktreeError::Conflict(format!(
            "branch {} has no common history with the workspace's current commit {current}",
            text::one_line(&info.branch, 200)
        ))),
        Err(e) => Err(internal("git merge-base", e)),
    }
}

/// Every path that differs between two commits, with its status.
fn changed(git: &Git, base: &str, head: &str) -> Result<Vec<DiffEntry>, WorktreeError> {
    let out = git
        .run(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            base,
            head,
        ])
        .map_err(|e| internal("git diff-tree", e))?;
    let mut tokens = out.split(|b| *b == 0).filter(|t| !t.is_empty());
    let mut entries = Vec::new();
    while let (Some(status), Some(path)) = (tokens.next(), tokens.next()) {
        entries.push(DiffEntry {
            path: String::from_utf8_lossy(path).into_owned(),
            status: String::from_utf8_lossy(status).into_owned(),
        });
    }
    Ok(entries)
}

/// The paths the run's branch changed since it left the workspace's current commit:
/// committed objects only, read with plumbing.
pub fn diff(info: &WorktreeInfo) -> Result<Diff, WorktreeError> {
    let (base, head) = endpoints(info)?;
    let mut files = changed(&Git::new(&info.repo), &base, &head)?;
    let total = files.len();
    files.truncate(MAX_DIFF_PATHS);
    Ok(Diff {
        branch: info.branch.clone(),
        base,
        head,
        files,
        truncated: total > MAX_DIFF_PATHS,
        total,
    })
}

/// One side of a file diff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Side {
    text: String,
    size: Option<u64>,
    clipped: bool,
    binary: bool,
}

/// `GET /runs/{ref}/diff/file?path=`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct DiffFile {
    pub branch: String,
    pub base: String,
    pub head: String,
    pub path: String,
    pub status: String,
    /// The text at base; empty when the path does not exist there (or is binary).
    pub original: String,
    /// The text at head; empty when the path does not exist there (or is binary).
    pub modified: String,
    /// The blob's size at base; null when the path does not exist there.
    pub original_size: Option<u64>,
    pub modified_size: Option<u64>,
    /// True when the text was cut at [`MAX_TEXT_BYTES`].
    pub original_clipped: bool,
    pub modified_clipped: bool,
    /// True when the blob holds a NUL byte in its first 8000 bytes (git's rule): no text.
    pub original_binary: bool,
    pub modified_binary: bool,
}

/// The text of one changed path at base and at head. 404 for a path the branch did not
/// change, 413 for a blob over 16 MiB.
pub fn diff_file(info: &WorktreeInfo, path: &str) -> Result<DiffFile, WorktreeError> {
    let (base, head) = endpoints(info)?;
    let git = Git::new(&info.repo);
    let entry = changed(&git, &base, &head)?
        .into_iter()
        .find(|e| e.path == path)
        .ok_or_else(|| {
            WorktreeError::NotFound(format!(
                "{} is not among the paths branch {} changed (GET …/diff lists them)",
                text::one_line(path, 300),
                text::one_line(&info.branch, 200)
            ))
        })?;
    let original = side(&git, &base, path)?;
    let modified = side(&git, &head, path)?;
    Ok(DiffFile {
        branch: info.branch.clone(),
        base,
        head,
        path: entry.path,
        status: entry.status,
        original: original.text,
        modified: modified.text,
        original_size: original.size,
        modified_size: modified.size,
        original_clipped: original.clipped,
        modified_clipped: modified.clipped,
        original_binary: original.binary,
        modified_binary: modified.binary,
    })
}

/// The content of `path` in `commit`: absent, a blob (clipped), or a submodule commit.
fn side(git: &Git, commit: &str, path: &str) -> Result<Side, WorktreeError> {
    let literal = git.clone().with_env("GIT_LITERAL_PATHSPECS", "1");
    let out = literal
        .run(&["ls-tree", "-z", "--full-tree", commit, "--", path])
        .map_err(|e| internal("git ls-tree", e))?;
    // `<mode> SP <type> SP <object> TAB <path> NUL`, for the exact path only.
    let found = out.split(|b| *b == 0).find_map(|rec| {
        let tab = rec.iter().position(|b| *b == b'\t')?;
        if &rec[tab + 1..] != path.as_bytes() {
            return None;
        }
        let meta = String::from_utf8_lossy(&rec[..tab]).into_owned();
        let mut parts = meta.split(' ');
        let (_mode, kind, id) = (parts.next()?, parts.next()?, parts.next()?);
        Some((kind.to_string(), id.to_string()))
    });
    let Some((kind, id)) = found else {
        return Ok(Side::default());
    };
    match kind.as_str() {
        "blob" => {
            let size: u64 = git
                .text(&["cat-file", "-s", &id])
                .map_err(|e| internal("git cat-file -s", e))?
                .parse()
                .map_err(|e| internal("the size git reported", e))?;
            if size > MAX_BLOB_BYTES {
                return Err(WorktreeError::TooLarge(format!(
                    "{} is {size} bytes at {commit}, over the 16 MiB limit of a file diff",
                    text::one_line(path, 300)
                )));
            }
            let bytes = git
                .run(&["cat-file", "blob", &id])
                .map_err(|e| internal("git cat-file blob", e))?;
            let binary = bytes[..bytes.len().min(8000)].contains(&0);
            if binary {
                return Ok(Side {
                    text: String::new(),
                    size: Some(size),
                    clipped: false,
                    binary: true,
                });
            }
            let (text, clipped) = clip_text(&bytes, MAX_TEXT_BYTES);
            Ok(Side {
                text,
                size: Some(size),
                clipped,
                binary: false,
            })
        }
        "commit" => Ok(Side {
            text: format!("Subproject commit {id}\n"),
            size: Some(0),
            clipped: false,
            binary: false,
        }),
        // A tree at this path on this side: the file does not exist here.
        _ => Ok(Side::default()),
    }
}

/// At most `max` bytes of `bytes` as text (invalid UTF-8 replaced), never cutting a
/// character in two; true when something was cut.
pub fn clip_text(bytes: &[u8], max: usize) -> (String, bool) {
    if bytes.len() <= max {
        return (String::from_utf8_lossy(bytes).into_owned(), false);
    }
    // Cut before a continuation byte's character: back to the byte that starts it (a
    // UTF-8 character is at most 4 bytes, so at most 3 steps).
    let mut end = max;
    while end > 0 && max - end < 3 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    let cut = &bytes[..end];
    (String::from_utf8_lossy(cut).into_owned(), true)
}

/// What cleanup did with a worktree run's worktree and branch (recorded in
/// `sessions.run.cleaned`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Released {
    /// `removed`, or `left_inaccessible` for a worktree the node cannot reach.
    pub worktree: &'static str,
    pub path: String,
    pub branch: String,
    /// The branch's tip at cleanup (null when the branch or the repository was gone).
    pub branch_tip: Option<String>,
    /// True when the branch was deleted.
    pub branch_deleted: bool,
    /// True when the operator confirmed `discard_worktree`.
    pub discarded: bool,
}

/// Why the worktree cannot be reached, if it cannot.
fn inaccessible(info: &WorktreeInfo) -> Option<String> {
    let path = Path::new(&info.path);
    match std::fs::symlink_metadata(path) {
        Err(e) => return Some(format!("its folder cannot be reached: {e}")),
        Ok(m) if !m.is_dir() => return Some("its path is not a folder".into()),
        Ok(_) => {}
    }
    let wt = Git::new(path);
    let top = match wt.text(&["rev-parse", "--show-toplevel"]) {
        Ok(t) => t,
        Err(e) => return Some(format!("git cannot read it: {}", git_reason(&e))),
    };
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), path) {
        return Some("it is no longer a worktree root".into());
    }
    let common = match wt.text(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        Ok(c) => c,
        Err(e) => return Some(format!("git cannot read it: {}", git_reason(&e))),
    };
    let repo_common = Git::new(&info.repo)
        .text(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .ok();
    match repo_common {
        Some(rc) if same(Path::new(&common), Path::new(&rc)) => None,
        Some(_) => Some("it belongs to another repository now".into()),
        None => Some(format!(
            "its repository {} cannot be read",
            text::one_line(&info.repo, 300)
        )),
    }
}

/// Cleanup of a worktree run. Without `discard`, the worktree and its branch are removed
/// only when nothing would be lost: the branch is merged into the workspace's current
/// branch, the worktree is on its branch, and it has no uncommitted file; otherwise 409
/// names every reason and nothing changes. With `discard`, the worktree and its branch are
/// removed anyway, and a worktree the node cannot reach is left where it is.
pub fn release(info: &WorktreeInfo, discard: bool) -> Result<Released, WorktreeError> {
    let git = Git::new(&info.repo);
    let tip = branch_tip(&git, &info.branch);
    let mut out = Released {
        worktree: "removed",
        path: info.path.clone(),
        branch: info.branch.clone(),
        branch_tip: tip.clone(),
        branch_deleted: false,
        discarded: discard,
    };
    if let Some(why) = inaccessible(info) {
        if discard {
            out.worktree = "left_inaccessible";
            return Ok(out);
        }
        return Err(WorktreeError::Conflict(format!(
            "the worktree {} is inaccessible ({why}); the run stays. To release the run and leave \
             the worktree where it is, repeat with discard_worktree (`proctor session cleanup \
             REF --discard-worktree`)",
            text::one_line(&info.path, 300)
        )));
    }
    if discard {
        git.run(&["worktree", "remove", "--force", "--force", &info.path])
            .map_err(|e| internal("git worktree remove", e))?;
        if tip.is_some() {
            git.run(&["branch", "-D", &info.branch])
                .map_err(|e| internal("git branch -D", e))?;
            out.branch_deleted = true;
        }
        return Ok(out);
    }
    let wt = Git::new(&info.path);
    let mut reasons = Vec::new();
    let own = format!("refs/heads/{}", info.branch);
    match wt.text(&["symbolic-ref", "-q", "HEAD"]) {
        Ok(r) if r == own => {}
        Ok(r) => reasons.push(format!(
            "the worktree is on {} instead of its branch {}",
            text::one_line(&r, 200),
            info.branch
        )),
        Err(_) => reasons.push(format!(
            "detached HEAD: the worktree is not on its branch {} (commits made there belong to \
             no branch)",
            info.branch
        )),
    }
    let status = wt
        .run(&["status", "--porcelain", "-z", "--untracked-files=all"])
        .map_err(|e| internal("git status in the worktree", e))?;
    // Records are `XY path`; a rename adds its old path as a record of its own.
    let dirty: Vec<&[u8]> = status
        .split(|b| *b == 0)
        .filter(|r| r.len() > 3 && r[2] == b' ')
        .collect();
    if !status.is_empty() {
        let first = dirty
            .first()
            .map(|r| String::from_utf8_lossy(&r[3..]).into_owned())
            .unwrap_or_default();
        reasons.push(format!(
            "uncommitted files in the worktree ({} path{}, first: {})",
            dirty.len().max(1),
            if dirty.len() == 1 { "" } else { "s" },
            text::one_line(&first, 200)
        ));
    }
    match &tip {
        None => reasons.push(format!(
            "branch {} is gone from the repository",
            info.branch
        )),
        Some(tip) => match git.text(&["symbolic-ref", "-q", "--short", "HEAD"]) {
            Err(_) => reasons.push(
                "unmerged work: the workspace is on no branch (detached HEAD), so nothing is \
                 merged into its current branch"
                    .into(),
            ),
            Ok(current) => match git.run(&["merge-base", "--is-ancestor", tip, "HEAD"]) {
                Ok(_) => {}
                Err(e) if e.code() == Some(1) => reasons.push(format!(
                    "unmerged work: branch {} (tip {tip}) is not merged into the workspace's \
                     current branch {}",
                    info.branch,
                    text::one_line(&current, 200)
                )),
                Err(e) => return Err(internal("git merge-base --is-ancestor", e)),
            },
        },
    }
    if !reasons.is_empty() {
        return Err(WorktreeError::Conflict(format!(
            "the run keeps its worktree {}: {}. Merge and commit, or repeat with discard_worktree \
             (`proctor session cleanup REF --discard-worktree`) to remove the worktree and the \
             branch anyway",
            text::one_line(&info.path, 300),
            reasons.join("; ")
        )));
    }
    git.run(&["worktree", "remove", &info.path]).map_err(|e| {
        WorktreeError::Conflict(format!(
            "git refused to remove the worktree {} ({}); the run stays. A locked worktree is \
             unlocked with `git worktree unlock`; or repeat with discard_worktree",
            text::one_line(&info.path, 300),
            git_reason(&e)
        ))
    })?;
    git.run(&["branch", "-D", &info.branch])
        .map_err(|e| internal("git branch -D", e))?;
    out.branch_deleted = true;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A repository with one commit on `main` (a.txt, sub/b.txt).
    fn repo() -> (tempfile::TempDir, Git) {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path());
        git.run(&["init", "-q", "-b", "main"]).unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.txt"), "bee\n").unwrap();
        commit_all(&git, "first");
        (dir, git)
    }

    fn commit_all(git: &Git, msg: &str) -> String {
        git.run(&["add", "-A"]).unwrap();
        git.run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            msg,
        ])
        .unwrap();
        git.text(&["rev-parse", "HEAD"]).unwrap()
    }

    fn home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        home.ensure().unwrap();
        (dir, home)
    }

    fn refused(r: Result<Repo, WorktreeError>) -> String {
        match r {
            Err(WorktreeError::Unprocessable(m)) => m,
            other => panic!("expected 422, got {other:?}"),
        }
    }

    #[test]
    fn repositories_unfit_for_worktrees_are_refused_by_name() {
        let plain = tempfile::tempdir().unwrap();
        let m = refused(validate_repo(plain.path()));
        assert!(m.contains("not a git work tree"), "{m}");

        let (dir, git) = repo();
        let m = refused(validate_repo(&dir.path().join("sub")));
        assert!(m.contains("subfolder") && m.contains("register"), "{m}");

        let m = refused(validate_repo(&dir.path().join(".git")));
        assert!(m.contains("bare") || m.contains("git folder"), "{m}");

        let linked = tempfile::tempdir().unwrap();
        let lp = linked.path().join("l");
        git.run(&["worktree", "add", "-q", "-b", "other", lp.to_str().unwrap()])
            .unwrap();
        let m = refused(validate_repo(&lp));
        assert!(m.contains("linked worktree"), "{m}");

        let bare = tempfile::tempdir().unwrap();
        Git::new(bare.path())
            .run(&["init", "-q", "--bare"])
            .unwrap();
        let m = refused(validate_repo(bare.path()));
        assert!(m.contains("bare repository"), "{m}");

        let empty = tempfile::tempdir().unwrap();
        Git::new(empty.path()).run(&["init", "-q"]).unwrap();
        let m = refused(validate_repo(empty.path()));
        assert!(m.contains("no commit"), "{m}");

        let ok = validate_repo(dir.path()).unwrap();
        assert_eq!(ok.root, std::fs::canonicalize(dir.path()).unwrap());
        assert_eq!(ok.head, git.text(&["rev-parse", "HEAD"]).unwrap());
        assert_eq!(ok.id_len, 40);
    }

    #[test]
    fn read_only_folders_are_refused_by_their_mode_bits() {
        let (dir, _git) = repo();
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        for (rel, what) in [
            ("", "root"),
            (".git", "git folder"),
            (".git/objects", "object store"),
            (".git/refs", "refs folder"),
            ("sub", "folder"),
        ] {
            let p = dir.path().join(rel);
            set(&p, 0o555);
            let m = refused(validate_repo(dir.path()));
            set(&p, 0o755);
            assert!(m.contains("read-only") && m.contains(what), "{rel}: {m}");
            let canonical = std::fs::canonicalize(&p).unwrap();
            assert!(m.contains(&*canonical.to_string_lossy()), "{rel}: {m}");
        }
        // A read-only folder deep in an ignored part of the tree counts too; `.git`'s own
        // inner folders do not (git keeps some read-only objects folders on purpose).
        std::fs::create_dir_all(dir.path().join("deep/er")).unwrap();
        set(&dir.path().join("deep/er"), 0o500);
        let m = refused(validate_repo(dir.path()));
        set(&dir.path().join("deep/er"), 0o700);
        assert!(m.contains("deep/er"), "{m}");
        std::fs::create_dir_all(dir.path().join(".git/objects/ab")).unwrap();
        set(&dir.path().join(".git/objects/ab"), 0o555);
        validate_repo(dir.path()).unwrap();
    }

    #[test]
    fn config_naming_a_filter_or_an_include_is_refused() {
        for (key, value) in [
            ("filter.lfs.clean", "git-lfs clean -- %f"),
            ("filter.x.process", "run-me"),
            ("include.path", "/tmp/elsewhere.cfg"),
            ("includeIf.gitdir:/w/.path", "/tmp/other.cfg"),
        ] {
            let (dir, git) = repo();
            git.run(&["config", key, value]).unwrap();
            let m = refused(validate_repo(dir.path()));
            assert!(
                m.contains(&key.to_ascii_lowercase()) || m.contains(key),
                "{key}: {m}"
            );
            assert!(m.contains("local scope"), "{m}");
            git.run(&["config", "--unset", key]).unwrap();
            validate_repo(dir.path()).unwrap();
        }
    }

    #[test]
    fn the_config_listing_is_parsed_and_proctors_own_overrides_are_skipped() {
        let raw = b"command\0command line:\0core.hookspath\n/dev/null\0\
                    global\0file:/root/.gitconfig\0user.name\nA\0\
                    local\0file:.git/config\0filter.lfs.required\0\
                    worktree\0file:.git/config.worktree\0includeIf.onbranch:x.path\ny\0";
        let f = flagged_config(raw);
        assert_eq!(
            f.iter().map(|x| x.key.as_str()).collect::<Vec<_>>(),
            ["filter.lfs.required", "includeIf.onbranch:x.path"]
        );
        assert_eq!(f[1].scope, "worktree");
        assert!(flagged_config(b"command\0command line:\0filter.a.clean\nx\0").is_empty());
    }

    fn unfit_from(repo: &Repo, v: &str) -> String {
        match resolve_from(repo, Some(v)) {
            Err(WorktreeError::Unprocessable(m)) => m,
            other => panic!("{v}: expected 422, got {other:?}"),
        }
    }

    #[test]
    fn worktree_from_takes_only_full_retained_ids_and_local_branches() {
        let (dir, git) = repo();
        let first = git.text(&["rev-parse", "HEAD"]).unwrap();
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        let second = commit_all(&git, "second");
        git.run(&["branch", "feature", &first]).unwrap();
        git.run(&["tag", "v1", &first]).unwrap();
        let r = validate_repo(dir.path()).unwrap();

        assert_eq!(resolve_from(&r, None).unwrap(), second);
        assert_eq!(resolve_from(&r, Some("feature")).unwrap(), first);
        assert_eq!(resolve_from(&r, Some("main")).unwrap(), second);
        assert_eq!(resolve_from(&r, Some(&first)).unwrap(), first);

        for (v, says) in [
            ("HEAD~1", "revision expression"),
            ("main^", "revision expression"),
            ("@{-1}", "revision expression"),
            ("@", "revision expression"),
            (":/second", "revision expression"),
            ("main~", "revision expression"),
            ("feature..main", "range"),
            ("main...feature", "range"),
            ("-x", "option"),
            ("--orphan", "option"),
            ("nope", "no local branch"),
            ("v1", "no local branch"),
            ("origin/main", "no local branch"),
            ("", "empty"),
            ("a b", "revision expression"),
            ("x.lock", "not a valid branch name"),
            (&first[..12], "abbreviated"),
            (&first.to_ascii_uppercase(), "abbreviated or not lowercase"),
            (
                "0123456789012345678901234567890123456789",
                "contains no such commit",
            ),
            (&"a".repeat(64), "hex digits"),
        ] {
            let m = unfit_from(&r, v);
            assert!(m.contains(says), "{v}: {m}");
        }

        // A commit that exists but that no ref retains.
        let tree = git.text(&["rev-parse", "HEAD^{tree}"]).unwrap();
        let loose = git
            .run_with_input(
                &[
                    std::ffi::OsStr::new("-c"),
                    std::ffi::OsStr::new("user.name=t"),
                    std::ffi::OsStr::new("-c"),
                    std::ffi::OsStr::new("user.email=t@example.invalid"),
                    std::ffi::OsStr::new("commit-tree"),
                    std::ffi::OsStr::new(&tree),
                ],
                Some(b"dangling\n"),
            )
            .unwrap();
        let loose = String::from_utf8(loose).unwrap().trim().to_string();
        let m = unfit_from(&r, &loose);
        assert!(m.contains("no branch, tag or remote branch"), "{m}");
        // A tree is not a commit.
        let m = unfit_from(&r, &tree);
        assert!(m.contains("not a commit"), "{m}");
    }

    #[test]
    fn create_makes_a_private_worktree_on_a_new_branch_and_moves_nothing() {
        let (dir, git) = repo();
        let first = git.text(&["rev-parse", "HEAD"]).unwrap();
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        let second = commit_all(&git, "second");
        git.run(&["branch", "feature", &first]).unwrap();
        let (_h, home) = home();
        let r = validate_repo(dir.path()).unwrap();
        let from = resolve_from(&r, Some("feature")).unwrap();
        let info = create(&home, &r, "run-0007", &from, Some("ws-0001")).unwrap();

        let path = worktrees_dir(&home).join("run-0007");
        assert_eq!(info.path, path.to_string_lossy());
        assert_eq!(info.branch, "proctor/run-0007");
        assert_eq!(info.repo, r.root.to_string_lossy());
        assert_eq!(info.base, first);
        assert_eq!(info.workspace_ref.as_deref(), Some("ws-0001"));
        assert!(info.clean_at_start);
        assert_eq!(
            info.index_tree,
            git.text(&["rev-parse", &format!("{first}^{{tree}}")])
                .unwrap()
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(
            std::fs::read_to_string(path.join("a.txt")).unwrap(),
            "one\n"
        );
        let wt = Git::new(&path);
        assert_eq!(
            wt.text(&["symbolic-ref", "HEAD"]).unwrap(),
            "refs/heads/proctor/run-0007"
        );
        // Nothing else moved.
        assert_eq!(git.text(&["rev-parse", "feature"]).unwrap(), first);
        assert_eq!(git.text(&["rev-parse", "HEAD"]).unwrap(), second);
        assert_eq!(
            git.text(&["symbolic-ref", "HEAD"]).unwrap(),
            "refs/heads/main"
        );
        assert!(git.run(&["status", "--porcelain"]).unwrap().is_empty());

        // The same ref again: the folder exists (409); a leftover branch: 409 as well.
        assert!(matches!(
            create(&home, &r, "run-0007", &second, None),
            Err(WorktreeError::Conflict(_))
        ));
        git.run(&["branch", "proctor/run-0008"]).unwrap();
        let e = create(&home, &r, "run-0008", &second, None).unwrap_err();
        assert!(
            matches!(&e, WorktreeError::Conflict(m) if m.contains("already has a branch")),
            "{e}"
        );
        assert!(!worktrees_dir(&home).join("run-0008").exists());

        remove(&info).unwrap();
        assert!(!path.exists());
        assert!(
            git.run(&["rev-parse", "--verify", "-q", "proctor/run-0007"])
                .is_err()
        );
    }

    #[test]
    fn a_home_that_cannot_hold_worktrees_is_503_and_nothing_is_made() {
        let (dir, git) = repo();
        let (_h, home) = home();
        std::fs::write(worktrees_dir(&home), "not a folder").unwrap();
        let r = validate_repo(dir.path()).unwrap();
        let e = create(&home, &r, "run-0001", &r.head, None).unwrap_err();
        assert_eq!(e.status(), 503, "{e}");
        assert!(e.to_string().contains("worktrees folder"), "{e}");
        assert!(
            git.run(&["rev-parse", "--verify", "-q", "proctor/run-0001"])
                .is_err()
        );
    }

    /// A repository and a worktree run made from it.
    fn with_worktree() -> (tempfile::TempDir, Git, tempfile::TempDir, WorktreeInfo) {
        let (dir, git) = repo();
        let (h, home) = home();
        let r = validate_repo(dir.path()).unwrap();
        let info = create(&home, &r, "run-0001", &r.head, None).unwrap();
        // Keep the home alive with the repo: its tempdir is returned.
        let _ = home;
        (dir, git, h, info)
    }

    #[test]
    fn diff_lists_committed_changes_only_against_the_merge_base() {
        let (dir, git, _h, info) = with_worktree();
        let wt = Git::new(&info.path);
        let wp = Path::new(&info.path);
        std::fs::write(wp.join("a.txt"), "changed\n").unwrap();
        std::fs::write(wp.join("new.txt"), "new\n").unwrap();
        std::fs::remove_file(wp.join("sub/b.txt")).unwrap();
        let tip = commit_all(&wt, "work");
        std::fs::write(wp.join("uncommitted.txt"), "x").unwrap();
        // The workspace moves on meanwhile: base stays the merge base.
        std::fs::write(dir.path().join("other.txt"), "o").unwrap();
        commit_all(&git, "workspace moves");

        let d = diff(&info).unwrap();
        assert_eq!(d.head, tip);
        assert_eq!(d.base, info.base);
        assert!(!d.truncated);
        assert_eq!(
            d.files,
            vec![
                DiffEntry {
                    path: "a.txt".into(),
                    status: "M".into()
                },
                DiffEntry {
                    path: "new.txt".into(),
                    status: "A".into()
                },
                DiffEntry {
                    path: "sub/b.txt".into(),
                    status: "D".into()
                },
            ]
        );

        let f = diff_file(&info, "a.txt").unwrap();
        assert_eq!(
            (f.original.as_str(), f.modified.as_str()),
            ("one\n", "changed\n")
        );
        assert_eq!((f.original_size, f.modified_size), (Some(4), Some(8)));
        let f = diff_file(&info, "new.txt").unwrap();
        assert_eq!((f.original.as_str(), f.original_size), ("", None));
        let f = diff_file(&info, "sub/b.txt").unwrap();
        assert_eq!((f.modified.as_str(), f.modified_size), ("", None));
        for p in [
            "uncommitted.txt",
            "other.txt",
            "sub",
            ":(glob)*",
            "../a.txt",
        ] {
            assert_eq!(diff_file(&info, p).unwrap_err().status(), 404, "{p}");
        }
    }

    #[test]
    fn a_diff_holds_200_paths_and_says_it_was_truncated() {
        let (_dir, _git, _h, info) = with_worktree();
        let wp = Path::new(&info.path);
        std::fs::create_dir(wp.join("many")).unwrap();
        for i in 0..205 {
            std::fs::write(wp.join(format!("many/{i:03}")), format!("{i}")).unwrap();
        }
        commit_all(&Git::new(wp), "many");
        let d = diff(&info).unwrap();
        assert_eq!((d.files.len(), d.total, d.truncated), (200, 205, true));
        // A path past the listed 200 is still one the branch changed.
        assert_eq!(diff_file(&info, "many/204").unwrap().modified, "204");
    }

    #[test]
    fn file_texts_are_clipped_at_64_kib_and_blobs_over_16_mib_refused() {
        let (_dir, _git, _h, info) = with_worktree();
        let wp = Path::new(&info.path);
        let wt = Git::new(wp);
        // 'é' is two bytes: 40000 of them straddle the 64 KiB cut.
        std::fs::write(wp.join("big.txt"), "é".repeat(40_000)).unwrap();
        std::fs::write(wp.join("bin.dat"), b"\x00\x01\x02").unwrap();
        // A 17 MiB blob from a sparse file (zeros compress to almost nothing).
        let sparse = wp.join("huge.bin");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(17 * 1024 * 1024)
            .unwrap();
        commit_all(&wt, "sizes");
        let f = diff_file(&info, "big.txt").unwrap();
        assert!(f.modified_clipped && !f.original_clipped);
        assert_eq!(f.modified.len(), MAX_TEXT_BYTES);
        assert!(f.modified.chars().all(|c| c == 'é'));
        assert_eq!(f.modified_size, Some(80_000));
        let f = diff_file(&info, "bin.dat").unwrap();
        assert!(f.modified_binary && f.modified.is_empty());
        let e = diff_file(&info, "huge.bin").unwrap_err();
        assert_eq!(e.status(), 413, "{e}");
    }

    #[test]
    fn clip_text_never_splits_a_character() {
        assert_eq!(clip_text(b"abc", 3), ("abc".into(), false));
        assert_eq!(clip_text("aé".as_bytes(), 2), ("a".into(), true));
        assert_eq!(clip_text("a😀".as_bytes(), 4), ("a".into(), true));
        assert_eq!(clip_text("a😀b".as_bytes(), 5), ("a😀".into(), true));
        assert_eq!(clip_text(b"\xff\xfe", 1), ("\u{fffd}".into(), true));
    }

    #[test]
    fn diff_of_a_gone_branch_or_unrelated_history_is_409() {
        let (dir, git, _h, info) = with_worktree();
        // Unrelated: the workspace's current branch is an orphan.
        git.run(&["checkout", "-q", "--orphan", "alone"]).unwrap();
        std::fs::write(dir.path().join("z"), "z").unwrap();
        commit_all(&git, "alone");
        let e = diff(&info).unwrap_err();
        assert!(
            matches!(&e, WorktreeError::Conflict(m) if m.contains("no common history")),
            "{e}"
        );
        git.run(&["checkout", "-q", "main"]).unwrap();
        diff(&info).unwrap();
        git.run(&["worktree", "remove", "--force", &info.path])
            .unwrap();
        git.run(&["branch", "-D", &info.branch]).unwrap();
        let e = diff(&info).unwrap_err();
        assert!(
            matches!(&e, WorktreeError::Conflict(m) if m.contains("is gone")),
            "{e}"
        );
    }

    fn conflict(r: Result<Released, WorktreeError>) -> String {
        match r {
            Err(WorktreeError::Conflict(m)) => m,
            other => panic!("expected 409, got {other:?}"),
        }
    }

    #[test]
    fn release_needs_merged_clean_and_on_branch() {
        let (_dir, git, _h, info) = with_worktree();
        let wp = Path::new(&info.path);
        let wt = Git::new(wp);
        std::fs::write(wp.join("a.txt"), "work\n").unwrap();
        let tip = commit_all(&wt, "work");

        let m = conflict(release(&info, false));
        assert!(m.contains("unmerged work"), "{m}");
        git.run(&["merge", "-q", "--ff-only", &info.branch])
            .unwrap();

        std::fs::write(wp.join("a.txt"), "dirty\n").unwrap();
        let m = conflict(release(&info, false));
        assert!(
            m.contains("uncommitted files") && !m.contains("unmerged"),
            "{m}"
        );
        wt.run(&["checkout", "-q", "--", "a.txt"]).unwrap();
        std::fs::write(wp.join("untracked"), "u").unwrap();
        assert!(conflict(release(&info, false)).contains("uncommitted files"));
        std::fs::remove_file(wp.join("untracked")).unwrap();

        wt.run(&["checkout", "-q", "--detach"]).unwrap();
        let m = conflict(release(&info, false));
        assert!(m.contains("detached HEAD"), "{m}");
        wt.run(&["checkout", "-q", &info.branch]).unwrap();

        git.run(&["worktree", "lock", &info.path]).unwrap();
        let m = conflict(release(&info, false));
        assert!(m.contains("git worktree unlock"), "{m}");
        assert!(wp.exists());
        git.run(&["worktree", "unlock", &info.path]).unwrap();

        let r = release(&info, false).unwrap();
        assert_eq!(r.worktree, "removed");
        assert_eq!(r.branch_tip.as_deref(), Some(tip.as_str()));
        assert!(r.branch_deleted && !r.discarded);
        assert!(!wp.exists());
        assert!(
            git.run(&["rev-parse", "--verify", "-q", &info.branch])
                .is_err()
        );
        // The merged work is in the workspace's branch.
        assert_eq!(git.text(&["rev-parse", "HEAD"]).unwrap(), tip);
    }

    #[test]
    fn discard_removes_unmerged_work_or_leaves_an_inaccessible_worktree() {
        let (_dir, git, _h, info) = with_worktree();
        let wp = Path::new(&info.path);
        std::fs::write(wp.join("a.txt"), "lost\n").unwrap();
        let tip = commit_all(&Git::new(wp), "work");
        std::fs::write(wp.join("dirty"), "d").unwrap();
        let r = release(&info, true).unwrap();
        assert_eq!(r.worktree, "removed");
        assert_eq!(r.branch_tip.as_deref(), Some(tip.as_str()));
        assert!(r.branch_deleted && r.discarded);
        assert!(!wp.exists());
        assert!(
            git.run(&["rev-parse", "--verify", "-q", &info.branch])
                .is_err()
        );

        let (_dir, git, _h, info) = with_worktree();
        std::fs::remove_dir_all(&info.path).unwrap();
        let m = conflict(release(&info, false));
        assert!(
            m.contains("inaccessible") && m.contains("--discard-worktree"),
            "{m}"
        );
        let r = release(&info, true).unwrap();
        assert_eq!(r.worktree, "left_inaccessible");
        assert!(!r.branch_deleted);
        assert_eq!(r.branch_tip.as_deref(), Some(info.base.as_str()));
        // Left in place: the branch is still there.
        git.run(&["rev-parse", "--verify", "-q", &info.branch])
            .unwrap();
    }
}
