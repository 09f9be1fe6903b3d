//! Candidate identity: the exact bytes of a worktree run's result, bound to one number.
//!
//! A candidate is bound only from a run's [`WorktreeInfo`] (its linked worktree and the
//! starting point observed when it was made), never from a path the caller names:
//!
//! - a run without a worktree, an input that was not clean when the run started, a main
//!   working copy (git-dir == common-dir) and a submodule's main copy are refused by name;
//! - a worker that committed (HEAD ≠ base) or touched the index (its tree ≠ the starting
//!   index tree) gets a typed refusal ([`CandidateError::WorkerCommitted`],
//!   [`CandidateError::IndexChanged`]), never a candidate or a receipt.
//!
//! The identity binds the base commit, the index tree, the exact `git status` bytes
//! ([`STATUS_ARGS`]), the binary patch of every change against the base (untracked,
//! non-ignored files included; built with a temporary index, the real index is never
//! touched), the tree that patch gives ([`Identity::worktree_tree`]), size and SHA-256 of
//! every added or modified path (deleted ones named), and the inventory of every byte
//! outside `.git`, ignored files and `node_modules` included ([`INVENTORY_RECIPE`]). Its
//! digest is the SHA-256 of the canonical JSON of that document ([`IDENTITY_RECIPE`]);
//! `docs/evidence.md` defines it exactly.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::digest::{self, DigestError, EntryKind, Rules};
use crate::evidence::{self, Actor, BYTES_RECIPE};
use crate::files::{self, FilesError};
use crate::git::{Git, GitError};
use crate::home::Home;
use crate::ledger::{Ledger, LedgerError};
use crate::worktrees::WorktreeInfo;

/// The format of the identity document.
pub const IDENTITY_FORMAT: &str = "candidate-identity/1";
/// The recipe of the identity digest: SHA-256 of the canonical JSON of the document.
pub const IDENTITY_RECIPE: &str = "candidate-identity-sha256/1";
/// The recipe of the candidate's tree inventory (see [`inventory`]).
pub const INVENTORY_RECIPE: &str = "candidate-inventory/1";
/// The format of a stored candidate file.
pub const CANDIDATE_FORMAT: &str = "proctor-candidate/1";
/// The ledger kind recorded when a candidate is bound.
pub const BOUND_KIND: &str = "evidence.candidate.bound";

/// The exact `git status` whose output bytes the identity binds: machine-readable v2,
/// NUL-terminated, every untracked file listed one by one, ignored paths listed as they
/// match the ignore rules, no rename detection (a configuration cannot change its shape),
/// submodules always compared.
pub const STATUS_ARGS: [&str; 7] = [
    "status",
    "--porcelain=v2",
    "-z",
    "--untracked-files=all",
    "--ignored=matching",
    "--no-renames",
    "--ignore-submodules=none",
];

/// The options of the bound patch (`git diff --cached <base>` against a temporary index
/// holding every non-ignored change): binary hunks, full object ids, and every option a
/// configuration could otherwise change pinned on the command line.
pub const PATCH_OPTIONS: [&str; 14] = [
    "--binary",
    "--full-index",
    "--no-renames",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--inter-hunk-context=0",
    "--unified=3",
    "--ignore-submodules=none",
];

/// Configuration pinned for the patch (`git -c k=v`), where no command-line option exists.
const PATCH_CONFIG: [&str; 4] = [
    "-c",
    "diff.suppressBlankEmpty=false",
    "-c",
    "core.quotePath=true",
];

/// The rules of `candidate-inventory/1`: only the root's `.git` is skipped (the linked
/// worktree's pointer file); `node_modules`, ignored files and nested `.git` entries count;
/// symbolic links are recorded by their target; folders are recorded, so an empty one
/// counts.
pub const INVENTORY_RULES: Rules = Rules {
    skip_any_depth: &[],
    skip_at_root: &[".git"],
    symlinks: true,
    folders: true,
};

/// Why a candidate cannot be bound, or cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    #[error(
        "{run} has no worktree of its own: a candidate is bound only from a run started with \
         `proctor session start --worktree`, never from a main working copy. Remedy: start \
         the work in a worktree run"
    )]
    NoWorktree { run: String },
    #[error(
        "{run}'s worktree was not clean when the run started (git status showed changes, \
         untracked or ignored files), so what the worker changed has no exact answer. \
         Remedy: start a new worktree run from a clean state"
    )]
    DirtyInput { run: String },
    #[error(
        "{path} is a main working copy (its git folder is the repository's own), not a \
         linked worktree; a candidate is never bound there. Remedy: start a worktree run"
    )]
    MainWorkingCopy { path: String },
    #[error(
        "{path} is a submodule's main working copy (of the superproject {superproject}), not \
         a linked worktree; a candidate is never bound there. Remedy: start a worktree run"
    )]
    SubmoduleMainCopy { path: String, superproject: String },
    #[error(
        "{path} is not the top of its worktree (git says {toplevel}). Remedy: bind the run \
         whose worktree this is"
    )]
    NotWorktreeRoot { path: String, toplevel: String },
    #[error(
        "the worktree {path} belongs to the repository {found}, not to {repo} as its run \
         recorded. Remedy: bind from the run that made this worktree"
    )]
    ForeignRepository {
        path: String,
        repo: String,
        found: String,
    },
    #[error(
        "the worktree {path} is gone or unreadable ({detail}). Remedy: check the run's \
         worktree (`proctor session show`); a removed worktree cannot be bound"
    )]
    WorktreeMissing { path: String, detail: String },
    #[error(
        "worker_committed: the worktree's HEAD is {head}, not the base {base} it started at; \
         the worker committed (or moved HEAD), so it does not get a candidate. Remedy: \
         start a new worktree run; a worker must leave HEAD alone"
    )]
    WorkerCommitted { head: String, base: String },
    #[error(
        "index_changed: the worktree's index holds the tree {found}, not the tree {expected} \
         it started with; the worker touched the index, so it does not get a candidate. \
         Remedy: start a new worktree run; a worker must leave the index alone"
    )]
    IndexChanged { found: String, expected: String },
    #[error(
        "the worktree changed while it was being bound ({detail}); no identity is given \
         for a tree that never existed. Remedy: stop whatever writes there and bind again"
    )]
    Changed { detail: String },
    #[error("the worktree cannot be inventoried: {0}")]
    Inventory(DigestError),
    #[error(
        "the path {name} (changed since the base) is not UTF-8; the identity cannot name it. \
         Remedy: rename it"
    )]
    BadName { name: String },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("no candidate {0}. Remedy: `proctor candidate list` shows them")]
    NotFound(String),
    #[error("{0:?} is not a candidate id: give cand-0001")]
    BadId(String),
    #[error("the candidate file {path} is unreadable: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{0}")]
    Internal(String),
}

impl CandidateError {
    /// A stable code for the API (`error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            CandidateError::NoWorktree { .. } => "no_worktree",
            CandidateError::DirtyInput { .. } => "dirty_input",
            CandidateError::MainWorkingCopy { .. } => "main_working_copy",
            CandidateError::SubmoduleMainCopy { .. } => "submodule_working_copy",
            CandidateError::NotWorktreeRoot { .. } => "not_worktree_root",
            CandidateError::ForeignRepository { .. } => "foreign_repository",
            CandidateError::WorktreeMissing { .. } => "worktree_missing",
            CandidateError::WorkerCommitted { .. } => "worker_committed",
            CandidateError::IndexChanged { .. } => "index_changed",
            CandidateError::Changed { .. } => "changed_while_binding",
            CandidateError::Inventory(_) | CandidateError::BadName { .. } => "inventory_refused",
            CandidateError::NotFound(_) => "not_found",
            CandidateError::BadId(_) => "bad_request",
            CandidateError::Git(_)
            | CandidateError::Files(_)
            | CandidateError::Ledger(_)
            | CandidateError::Corrupt { .. }
            | CandidateError::Internal(_) => "internal",
        }
    }

    /// True when the worktree or the run is refused (a conflict with their state), false
    /// for lookups and internal failures.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            CandidateError::Git(_)
                | CandidateError::Files(_)
                | CandidateError::Ledger(_)
                | CandidateError::Corrupt { .. }
                | CandidateError::Internal(_)
                | CandidateError::NotFound(_)
                | CandidateError::BadId(_)
        )
    }
}

/// Size and SHA-256 of bytes that the identity binds (the status output, the patch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Captured {
    /// The git command that produced the bytes, as one string (for the reader).
    pub command: String,
    pub bytes: u64,
    /// Always [`BYTES_RECIPE`].
    pub recipe: String,
    pub sha256: String,
}

/// One path that differs from the base (from `git diff --cached --name-status` against the
/// temporary index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ChangedFile {
    pub path: String,
    /// `added`, `modified`, `deleted` or `type_changed`.
    pub change: String,
    /// `file`, `executable`, `symlink` or `folder` (a submodule); absent when deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The inventory of the whole tree outside `.git` ([`INVENTORY_RECIPE`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TreeInventory {
    pub recipe: String,
    /// Entries (files, links, folders).
    pub count: u64,
    /// Sum of the entries' sizes.
    pub bytes: u64,
    pub digest: String,
}

/// A candidate's identity. Every field but `digest` is the identity document; `digest` is
/// the SHA-256 of its canonical JSON ([`IDENTITY_RECIPE`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Identity {
    /// Always [`IDENTITY_FORMAT`].
    pub format: String,
    /// The repository's object format (`sha1` or `sha256`): the recipe of the git ids.
    pub object_format: String,
    /// The commit the worktree started at; HEAD still.
    pub base: String,
    /// The tree of the worktree's index (unchanged since the start).
    pub index_tree: String,
    /// Tree id of base + every non-ignored change (built with a temporary index; the real
    /// index is never touched): what a publication commits.
    pub worktree_tree: String,
    /// `git status` ([`STATUS_ARGS`]) output bytes.
    pub status: Captured,
    /// The binary patch of every non-ignored change against the base.
    pub patch: Captured,
    /// Every path that differs from the base, in ordinal order.
    pub files: Vec<ChangedFile>,
    /// Every byte outside `.git`, ignored files included.
    pub inventory: TreeInventory,
    /// Hex SHA-256 of the canonical JSON of the document (every field above).
    pub digest: String,
}

impl Identity {
    /// The canonical bytes of the identity document (every field but `digest`).
    pub fn document(&self) -> Result<Vec<u8>, CandidateError> {
        let mut v =
            serde_json::to_value(self).map_err(|e| CandidateError::Internal(e.to_string()))?;
        if let Value::Object(m) = &mut v {
            m.remove("digest");
        }
        crate::ledger::canonical::to_vec(&v).map_err(|e| CandidateError::Internal(e.to_string()))
    }

    /// The digest the document gives now (equal to `digest` unless the record was altered).
    pub fn recompute_digest(&self) -> Result<String, CandidateError> {
        Ok(hex::encode(Sha256::digest(self.document()?)))
    }

    /// `format=candidate-identity/1 digest=candidate-identity-sha256/1 <hex>`: the only
    /// rendering of the digest.
    pub fn render(&self) -> String {
        render_digest(&self.digest)
    }
}

/// `format=candidate-identity/1 digest=candidate-identity-sha256/1 <hex>`.
pub fn render_digest(hex: &str) -> String {
    format!("format={IDENTITY_FORMAT} digest={IDENTITY_RECIPE} {hex}")
}

/// A bound candidate, stored as `data/candidates/<id>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Candidate {
    /// Always [`CANDIDATE_FORMAT`].
    pub format: String,
    /// `cand-0001`.
    pub id: String,
    pub run_ref: String,
    /// The linked worktree's path.
    pub worktree: String,
    /// The repository the worktree belongs to.
    pub repo: String,
    pub branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_ref: Option<String>,
    pub identity: Identity,
    pub bound_at: String,
    #[schema(value_type = Object)]
    pub bound_by: Actor,
    /// The receipt written for the binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// The ledger seq of the `evidence.candidate.bound` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_seq: Option<u64>,
}

impl Candidate {
    /// The run's starting point, as recorded in the candidate: what [`derive`] needs to
    /// recompute the identity now.
    pub fn worktree_info(&self) -> WorktreeInfo {
        WorktreeInfo {
            path: self.worktree.clone(),
            branch: self.branch.clone(),
            repo: self.repo.clone(),
            base: self.identity.base.clone(),
            index_tree: self.identity.index_tree.clone(),
            clean_at_start: true,
            workspace_ref: self.workspace_ref.clone(),
        }
    }

    /// Where the status bytes and the patch of this candidate are kept.
    pub fn dir(&self, home: &Home) -> PathBuf {
        candidates_dir(home).join(&self.id)
    }
}

/// `data/candidates`.
pub fn candidates_dir(home: &Home) -> PathBuf {
    home.data.join("candidates")
}

/// The file of candidate `id` (validated).
pub fn candidate_path(home: &Home, id: &str) -> Result<PathBuf, CandidateError> {
    if !evidence::valid_id(id, "cand-") {
        return Err(CandidateError::BadId(id.to_string()));
    }
    Ok(candidates_dir(home).join(format!("{id}.json")))
}

fn show(p: &Path) -> String {
    digest::escape_path(p)
}

/// The git folders of a checkout.
struct GitDirs {
    git_dir: PathBuf,
    common_dir: PathBuf,
    toplevel: PathBuf,
    superproject: String,
}

fn git_dirs(git: &Git) -> Result<GitDirs, GitError> {
    let out = git.text(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-dir",
        "--git-common-dir",
        "--show-toplevel",
        "--show-superproject-working-tree",
    ])?;
    let mut lines = out.lines();
    let mut next = || PathBuf::from(lines.next().unwrap_or_default());
    let git_dir = next();
    let common_dir = next();
    let toplevel = next();
    let superproject = next().to_string_lossy().into_owned();
    Ok(GitDirs {
        git_dir,
        common_dir,
        toplevel,
        superproject,
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The refusals that need only git's plumbing (cheap): run before anything is hashed.
fn precheck(info: &WorktreeInfo, tmp: &Path) -> Result<Git, CandidateError> {
    if !info.clean_at_start {
        return Err(CandidateError::DirtyInput {
            run: info
                .branch
                .rsplit('/')
                .next()
                .unwrap_or(&info.branch)
                .to_string(),
        });
    }
    let path = Path::new(&info.path);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(CandidateError::WorktreeMissing {
                path: show(path),
                detail: "not a folder".into(),
            });
        }
        Err(e) => {
            return Err(CandidateError::WorktreeMissing {
                path: show(path),
                detail: e.to_string(),
            });
        }
    }
    let git = Git::new(path);
    let dirs = git_dirs(&git).map_err(|e| CandidateError::WorktreeMissing {
        path: show(path),
        detail: format!("not a git checkout: {e}"),
    })?;
    if canonical(&dirs.git_dir) == canonical(&dirs.common_dir) {
        return Err(if dirs.superproject.is_empty() {
            CandidateError::MainWorkingCopy { path: show(path) }
        } else {
            CandidateError::SubmoduleMainCopy {
                path: show(path),
                superproject: crate::text::one_line(&dirs.superproject, 4096),
            }
        });
    }
    if canonical(&dirs.toplevel) != canonical(path) {
        return Err(CandidateError::NotWorktreeRoot {
            path: show(path),
            toplevel: show(&dirs.toplevel),
        });
    }
    let repo_common = Git::new(&info.repo)
        .text(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .map(PathBuf::from)
        .map_err(|e| CandidateError::ForeignRepository {
            path: show(path),
            repo: show(Path::new(&info.repo)),
            found: format!("(the recorded repository cannot be read: {e})"),
        })?;
    if canonical(&repo_common) != canonical(&dirs.common_dir) {
        return Err(CandidateError::ForeignRepository {
            path: show(path),
            repo: show(Path::new(&info.repo)),
            found: show(&dirs.common_dir),
        });
    }
    let head = git
        .text(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .unwrap_or_else(|_| "(no commit)".into());
    if head != info.base {
        return Err(CandidateError::WorkerCommitted {
            head,
            base: info.base.clone(),
        });
    }
    // The index tree, read from a copy of the index so that nothing (not even the
    // cache-tree extension `write-tree` may add) is written to the real one.
    let index =
        PathBuf::from(git.text(&["rev-parse", "--path-format=absolute", "--git-path", "index"])?);
    let copy = tmp.join("index-copy");
    match std::fs::copy(&index, &copy) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CandidateError::IndexChanged {
                found: "(no index file)".into(),
                expected: info.index_tree.clone(),
            });
        }
        Err(e) => return Err(FilesError::io("copy the index", &index, e).into()),
    }
    let found = match git
        .clone()
        .with_env("GIT_INDEX_FILE", &copy)
        .text(&["write-tree"])
    {
        Ok(t) => t,
        Err(e) => format!("(no tree: {e})"),
    };
    if found != info.index_tree {
        return Err(CandidateError::IndexChanged {
            found,
            expected: info.index_tree.clone(),
        });
    }
    Ok(git)
}

/// The candidate inventory of `root` (see [`INVENTORY_RECIPE`]): its digest and a map from
/// path to entry, for the per-file sizes and hashes.
pub fn inventory(root: &Path) -> Result<(TreeInventory, Vec<digest::Entry>), DigestError> {
    let listing = digest::list_with(root, INVENTORY_RULES)?;
    let entries = digest::hash_entries(&listing, None)?;
    Ok((inventory_of(&entries), entries))
}

/// One letter per entry type in the inventory document.
pub fn kind_letter(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "f",
        EntryKind::Executable => "x",
        EntryKind::Symlink => "l",
        EntryKind::Folder => "d",
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Executable => "executable",
        EntryKind::Symlink => "symlink",
        EntryKind::Folder => "folder",
    }
}

/// The `candidate-inventory/1` document of entries already in ordinal path order:
/// `path|type|bytes|sha256` lines joined with LF, no final LF.
pub fn inventory_document(entries: &[digest::Entry]) -> String {
    let mut doc = String::with_capacity(entries.iter().map(|e| e.path.len() + 90).sum());
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            doc.push('\n');
        }
        doc.push_str(&e.path);
        doc.push('|');
        doc.push_str(kind_letter(e.kind));
        doc.push('|');
        doc.push_str(&e.bytes.to_string());
        doc.push('|');
        doc.push_str(&hex::encode(e.sha256));
    }
    doc
}

fn inventory_of(entries: &[digest::Entry]) -> TreeInventory {
    TreeInventory {
        recipe: INVENTORY_RECIPE.to_string(),
        count: entries.len() as u64,
        bytes: entries.iter().map(|e| e.bytes).sum(),
        digest: hex::encode(Sha256::digest(inventory_document(entries).as_bytes())),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A private scratch folder (0700, removed on drop) for temporary indexes.
fn scratch() -> Result<tempfile::TempDir, CandidateError> {
    let t = tempfile::Builder::new()
        .prefix("proctor-cand")
        .tempdir()
        .map_err(|e| FilesError::io("create a scratch folder in", &std::env::temp_dir(), e))?;
    files::ensure_private_dir(t.path())?;
    Ok(t)
}

/// Observes a linked worktree that a person made (`git worktree add`), as a worktree run's
/// starting point: its HEAD, the tree of its index (read from a copy: the real index is not
/// written) and whether `git status --porcelain --ignored` is empty. A main working copy,
/// a submodule's main copy and a folder that is not a worktree's top are refused by the same
/// checks as a bind. The factory starts from this.
pub fn observe(path: &Path) -> Result<WorktreeInfo, CandidateError> {
    let root = std::fs::canonicalize(path).map_err(|e| CandidateError::WorktreeMissing {
        path: show(path),
        detail: e.to_string(),
    })?;
    let git = Git::new(&root);
    let base = git
        .text(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .map_err(|e| CandidateError::WorktreeMissing {
            path: show(&root),
            detail: format!("not a git checkout with a commit: {e}"),
        })?;
    let tmp = scratch()?;
    let index =
        PathBuf::from(git.text(&["rev-parse", "--path-format=absolute", "--git-path", "index"])?);
    let copy = tmp.path().join("index-copy");
    std::fs::copy(&index, &copy).map_err(|e| FilesError::io("copy the index", &index, e))?;
    let index_tree = git
        .clone()
        .with_env("GIT_INDEX_FILE", &copy)
        .text(&["write-tree"])?;
    let status = git.run(&["status", "--porcelain", "--ignored", "-z"])?;
    let branch = git
        .text(&["symbolic-ref", "--quiet", "--short", "HEAD"])
        .unwrap_or_else(|_| "(detached)".into());
    let info = WorktreeInfo {
        path: root.to_string_lossy().into_owned(),
        branch,
        repo: root.to_string_lossy().into_owned(),
        base,
        index_tree,
        clean_at_start: true,
        workspace_ref: None,
    };
    // The refusals of a bind (main copy, submodule's copy, not the top), judged now.
    precheck(&info, tmp.path())?;
    Ok(WorktreeInfo {
        clean_at_start: status.is_empty(),
        ..info
    })
}

/// Recomputes the identity of the run's worktree now (nothing is kept).
pub fn derive(info: &WorktreeInfo) -> Result<Identity, CandidateError> {
    compute(info, None)
}

/// Computes the identity; with `keep`, the status bytes and the patch are written there
/// (`status.bin`, `patch.bin`, 0600).
fn compute(info: &WorktreeInfo, keep: Option<&Path>) -> Result<Identity, CandidateError> {
    let tmp = scratch()?;
    let git = precheck(info, tmp.path())?;
    let root = Path::new(&info.path);
    let object_format = git
        .text(&["rev-parse", "--show-object-format"])
        .unwrap_or_else(|_| "sha1".into());

    let (before, entries) = inventory(root).map_err(inventory_error)?;

    let status = git.run(&STATUS_ARGS)?;

    // Every non-ignored change, staged in a temporary index that starts from the base.
    let tmp_index = tmp.path().join("index");
    let tgit = git.clone().with_env("GIT_INDEX_FILE", &tmp_index);
    tgit.run(&["read-tree", &info.base])?;
    tgit.run(&["add", "-A", "--", "."])?;
    let worktree_tree = tgit.text(&["write-tree"])?;
    let patch_path = match keep {
        Some(dir) => dir.join("patch.bin"),
        None => tmp.path().join("patch.bin"),
    };
    drop(files::create_private_new(&patch_path)?);
    let output = format!("--output={}", patch_path.display());
    let mut args: Vec<&OsStr> = PATCH_CONFIG.iter().map(OsStr::new).collect();
    args.extend(["diff", "--cached"].map(OsStr::new));
    args.extend(PATCH_OPTIONS.iter().map(OsStr::new));
    args.push(OsStr::new(&output));
    args.extend([info.base.as_str(), "--"].map(OsStr::new));
    tgit.run_with_input(&args, None)?;
    let (patch_bytes, patch_sha) = evidence::hash_file(&patch_path)?
        .ok_or_else(|| CandidateError::Internal("git diff wrote no patch file".into()))?;
    let names = tgit.run(&[
        "diff",
        "--cached",
        "--name-status",
        "-z",
        "--no-renames",
        "--ignore-submodules=none",
        &info.base,
        "--",
    ])?;

    let (after, _) = inventory(root).map_err(inventory_error)?;
    if after.digest != before.digest {
        return Err(CandidateError::Changed {
            detail: "its inventory differs before and after git read it".into(),
        });
    }
    // The worker may have moved HEAD or the index while we read: judge them again.
    precheck(info, tmp.path())?;

    let by_path: HashMap<&str, &digest::Entry> =
        entries.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut files = parse_name_status(&names)?
        .into_iter()
        .map(|(letter, path)| {
            let change = match letter {
                'A' => "added",
                'D' => "deleted",
                'T' => "type_changed",
                _ => "modified",
            };
            let entry = (letter != 'D')
                .then(|| by_path.get(path.as_str()))
                .flatten();
            ChangedFile {
                change: change.to_string(),
                kind: entry.map(|e| kind_name(e.kind).to_string()),
                bytes: entry.map(|e| e.bytes),
                sha256: entry.map(|e| hex::encode(e.sha256)),
                path,
            }
        })
        .collect::<Vec<_>>();
    files.sort_by(|a, b| digest::ordinal_cmp(&a.path, &b.path));

    if let Some(dir) = keep {
        files::write_atomic(&dir.join("status.bin"), &status)?;
    }
    let mut identity = Identity {
        format: IDENTITY_FORMAT.to_string(),
        object_format,
        base: info.base.clone(),
        index_tree: info.index_tree.clone(),
        worktree_tree,
        status: Captured {
            command: format!("git {}", STATUS_ARGS.join(" ")),
            bytes: status.len() as u64,
            recipe: BYTES_RECIPE.to_string(),
            sha256: sha256_hex(&status),
        },
        patch: Captured {
            command: format!("git diff --cached {} <base> --", PATCH_OPTIONS.join(" ")),
            bytes: patch_bytes,
            recipe: BYTES_RECIPE.to_string(),
            sha256: patch_sha,
        },
        files,
        inventory: before,
        digest: String::new(),
    };
    identity.digest = identity.recompute_digest()?;
    Ok(identity)
}

fn inventory_error(e: DigestError) -> CandidateError {
    match e {
        DigestError::Changed { path, detail } => CandidateError::Changed {
            detail: format!("{path}: {detail}"),
        },
        other => CandidateError::Inventory(other),
    }
}

/// `X\0path\0` records of `git diff --name-status -z`.
fn parse_name_status(raw: &[u8]) -> Result<Vec<(char, String)>, CandidateError> {
    let mut out = Vec::new();
    let mut fields = raw.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(status) = fields.next() {
        let letter = status.first().copied().unwrap_or(b'M') as char;
        let path = fields
            .next()
            .ok_or_else(|| CandidateError::Internal("git diff --name-status ended early".into()))?;
        let path = String::from_utf8(path.to_vec()).map_err(|_| CandidateError::BadName {
            name: digest::escape_bytes(path),
        })?;
        out.push((letter, path));
    }
    Ok(out)
}

/// Binds the run's worktree as a new candidate: computes its identity, stores it
/// (`data/candidates/<id>.json` with `<id>/status.bin` and `<id>/patch.bin`), records
/// `evidence.candidate.bound` in the ledger and writes a receipt.
pub fn bind(
    home: &Home,
    ledger: &Ledger,
    run_ref: &str,
    info: Option<&WorktreeInfo>,
    by: &Actor,
) -> Result<Candidate, CandidateError> {
    let info = info.ok_or_else(|| CandidateError::NoWorktree {
        run: run_ref.to_string(),
    })?;
    if !info.clean_at_start {
        return Err(CandidateError::DirtyInput {
            run: run_ref.to_string(),
        });
    }
    // Refusals first, before a number is taken.
    {
        let tmp = scratch()?;
        precheck(info, tmp.path())?;
    }
    let dir = candidates_dir(home);
    let (id, folder) = evidence::reserve_numbered(&dir, "cand-", "")?;
    let result = (|| {
        let identity = compute(info, Some(&folder))?;
        let mut cand = Candidate {
            format: CANDIDATE_FORMAT.to_string(),
            id: id.clone(),
            run_ref: run_ref.to_string(),
            worktree: info.path.clone(),
            repo: info.repo.clone(),
            branch: info.branch.clone(),
            workspace_ref: info.workspace_ref.clone(),
            identity,
            bound_at: crate::ledger::now_at(),
            bound_by: by.clone(),
            receipt: None,
            ledger_seq: None,
        };
        let (receipt_id, receipt_path) = crate::receipts::reserve(home, "candidate.bound")
            .map_err(|e| CandidateError::Internal(e.to_string()))?;
        let seq = ledger.append(
            BOUND_KIND,
            &fields(json!({
                "candidate": cand.id,
                "run": cand.run_ref,
                "identity": cand.identity.digest,
                "identity_recipe": IDENTITY_RECIPE,
                "base": cand.identity.base,
                "worktree_tree": cand.identity.worktree_tree,
                "receipt": receipt_id,
                "by": by.token_id,
            })),
        )?;
        cand.receipt = Some(receipt_id.clone());
        cand.ledger_seq = Some(seq);
        store(home, &cand)?;
        crate::receipts::write_candidate_receipt(
            home,
            ledger,
            &receipt_id,
            &receipt_path,
            &cand,
            seq,
        )
        .map_err(|e| CandidateError::Internal(e.to_string()))?;
        Ok(cand)
    })();
    if result.is_err() && !candidates_dir(home).join(format!("{id}.json")).exists() {
        let _ = std::fs::remove_dir_all(&folder);
    }
    result
}

/// The object of a `json!({..})`, for a ledger append.
pub(crate) fn fields(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

fn store(home: &Home, cand: &Candidate) -> Result<(), CandidateError> {
    let v = serde_json::to_value(cand).map_err(|e| CandidateError::Internal(e.to_string()))?;
    let mut bytes = crate::ledger::canonical::to_vec(&v)
        .map_err(|e| CandidateError::Internal(e.to_string()))?;
    bytes.push(b'\n');
    files::write_atomic(&candidate_path(home, &cand.id)?, &bytes)?;
    Ok(())
}

/// Reads candidate `id`; `Ok(None)` when there is none.
pub fn load(home: &Home, id: &str) -> Result<Option<Candidate>, CandidateError> {
    let path = candidate_path(home, id)?;
    let bytes = match files::open_private_read(&path) {
        Ok(f) => {
            let mut s = Vec::new();
            std::io::Read::read_to_end(&mut std::io::BufReader::new(f), &mut s)
                .map_err(|e| FilesError::io("read", &path, e))?;
            s
        }
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| CandidateError::Corrupt {
            path,
            detail: e.to_string(),
        })
}

/// Every candidate, oldest first.
pub fn list(home: &Home) -> Result<Vec<Candidate>, CandidateError> {
    let dir = candidates_dir(home);
    let ids = evidence::numbered(&dir, "cand-", ".json")?;
    let mut out = Vec::with_capacity(ids.len());
    for (_, id) in ids {
        if let Some(c) = load(home, &id)? {
            out.push(c);
        }
    }
    Ok(out)
}

/// The most recently bound candidate of a run.
pub fn latest_for_run(home: &Home, run_ref: &str) -> Result<Option<Candidate>, CandidateError> {
    Ok(list(home)?.into_iter().rev().find(|c| c.run_ref == run_ref))
}

/// Loads a candidate or says it does not exist.
pub fn require(home: &Home, id: &str) -> Result<Candidate, CandidateError> {
    load(home, id)?.ok_or_else(|| CandidateError::NotFound(id.to_string()))
}

/// What recomputing a candidate's identity now says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Currency {
    /// The worktree still holds exactly the bound bytes.
    Current,
    /// The worktree's identity is now another one.
    Changed { now: Box<Identity> },
    /// The identity cannot be computed now (worker committed, index changed, worktree
    /// gone, …): the message says why.
    Unavailable { code: &'static str, detail: String },
}

/// Recomputes the candidate's identity from its worktree and compares.
pub fn currency(cand: &Candidate) -> Currency {
    match derive(&cand.worktree_info()) {
        Ok(now) if now.digest == cand.identity.digest => Currency::Current,
        Ok(now) => Currency::Changed { now: Box::new(now) },
        Err(e) => Currency::Unavailable {
            code: e.code(),
            detail: e.to_string(),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests;
