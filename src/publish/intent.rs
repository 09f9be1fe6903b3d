//! Intents: "publish this bound candidate as this commit on this remote branch".
//!
//! An intent names one revision: the full id of a commit object built with `git commit-tree`
//! from the candidate's `worktree_tree` on its base, without moving any ref. The object is
//! reproducible from what the intent stores ([`CommitRecipe`]: tree, parent, message, author
//! and time). It also records the remote URL and the remote branch's tip at proposal time
//! (the push's lease: `None` means the branch must not exist), and the forge target of the
//! pull request.
//!
//! Intents live in `data/intents/int-NNNN.json` (0600, replaced atomically); only the server
//! writes them, and every change is recorded in the ledger.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::files::{self, FilesError};
use crate::git::{Git, GitError};
use crate::home::Home;

/// The format name of an intent file.
pub const FORMAT: &str = "proctor-publish-intent/1";
/// The longest title accepted, in characters.
pub const MAX_TITLE_CHARS: usize = 256;
/// The longest body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Serialises id allocation and rewrites of one home's intents. The server owns one (in its
/// state); nothing process-wide, so two servers in one process never wait on each other.
#[derive(Debug, Default)]
pub struct Store {
    lock: Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("cannot read the intent {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("no intent {0}. Remedy: `proctor publish list`")]
    NotFound(String),
    #[error("{0:?} is not an intent id (int-0001, or 1)")]
    BadId(String),
    #[error("a lock inside the server was poisoned")]
    Poisoned,
}

/// Where an intent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntentState {
    /// The evidence passes for this exact candidate; a person's authorisation is awaited.
    AwaitingAuthority,
    /// Something blocks it (see `causes`); it cannot be approved.
    Blocked,
    /// An authorisation was spent and the three effects were done.
    Published,
    /// An authorisation was spent and the adapter stopped before the end (see `outcome`).
    Failed,
}

impl IntentState {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentState::AwaitingAuthority => "awaiting_authority",
            IntentState::Blocked => "blocked",
            IntentState::Published => "published",
            IntentState::Failed => "failed",
        }
    }

    /// The name shown to the operator.
    pub fn label(self) -> &'static str {
        match self {
            IntentState::AwaitingAuthority => "AWAITING_AUTHORITY",
            IntentState::Blocked => "BLOCKED",
            IntentState::Published => "PUBLISHED",
            IntentState::Failed => "FAILED",
        }
    }
}

/// Everything `git commit-tree` needs to rebuild the revision byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommitRecipe {
    pub tree: String,
    pub parent: String,
    /// The exact message bytes (UTF-8), ending with LF.
    pub message: String,
    pub author_name: String,
    pub author_email: String,
    /// Git's raw date: `<unix seconds> +0000`. Author and committer share it.
    pub date: String,
}

impl CommitRecipe {
    /// The message of a publication: the title, then a blank line and the body if any.
    pub fn message_for(title: &str, body: &str) -> String {
        let mut m = String::with_capacity(title.len() + body.len() + 3);
        m.push_str(title.trim());
        m.push('\n');
        let body = body.trim_end();
        if !body.is_empty() {
            m.push('\n');
            m.push_str(body);
            m.push('\n');
        }
        m
    }

    /// Writes the commit object into `git`'s repository and returns its full id. No ref
    /// moves; no hook, signing or encoding setting changes the bytes.
    pub fn build(&self, git: &Git) -> Result<String, GitError> {
        let git = git
            .clone()
            .with_env("GIT_AUTHOR_NAME", &self.author_name)
            .with_env("GIT_AUTHOR_EMAIL", &self.author_email)
            .with_env("GIT_AUTHOR_DATE", &self.date)
            .with_env("GIT_COMMITTER_NAME", &self.author_name)
            .with_env("GIT_COMMITTER_EMAIL", &self.author_email)
            .with_env("GIT_COMMITTER_DATE", &self.date);
        let argv = [
            "-c",
            "i18n.commitEncoding=UTF-8",
            "commit-tree",
            "--no-gpg-sign",
            &self.tree,
            "-p",
            &self.parent,
            "-F",
            "-",
        ];
        let args: Vec<&OsStr> = argv.iter().map(OsStr::new).collect();
        let out = git.run_with_input(&args, Some(self.message.as_bytes()))?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }
}

/// The candidate an intent publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CandidateRef {
    pub id: String,
    /// The identity digest, with its recipe.
    pub digest: String,
    pub recipe: String,
    pub base: String,
    pub index_tree: String,
    pub worktree_tree: String,
}

/// The remote, as resolved at proposal time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Remote {
    pub name: String,
    pub url: String,
}

/// Where the pull request is opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ForgeTarget {
    pub api_base: String,
    pub owner: String,
    pub repo: String,
    /// The branch the pull request asks to merge into.
    pub base: String,
}

/// One intent (`data/intents/int-NNNN.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Intent {
    pub format: String,
    pub id: String,
    pub created_at: String,
    /// The token id of whoever proposed it.
    pub proposed_by: String,
    pub run: String,
    pub candidate: CandidateRef,
    /// The repository that holds the commit object.
    #[schema(value_type = String)]
    pub repo: PathBuf,
    /// The run's worktree.
    #[schema(value_type = String)]
    pub worktree: PathBuf,
    pub remote: Remote,
    pub branch: String,
    /// The remote branch's tip at proposal time: the lease. `None` = must not exist.
    pub expected_tip: Option<String>,
    pub title: String,
    pub body: String,
    pub commit: CommitRecipe,
    /// The full commit id `commit` builds.
    pub revision: String,
    pub forge: ForgeTarget,
    pub state: IntentState,
    /// Why it is blocked (empty otherwise).
    pub causes: Vec<String>,
    /// The gate as evaluated at proposal time: `{state, evidence_ok, policy, evaluated_at,
    /// evidence}` (the evidence part's own values).
    #[schema(value_type = Object)]
    pub gate: serde_json::Value,
    /// What happened when an authorisation was spent on it (`null` before).
    #[serde(default)]
    pub outcome: Option<super::views::IntentOutcome>,
}

/// The folder of intents.
pub fn intents_dir(home: &Home) -> PathBuf {
    home.data.join("intents")
}

/// `int-0007` from `int-0007`, `int-7` or `7`.
pub fn normalize_id(s: &str) -> Result<String, IntentError> {
    let digits = s.strip_prefix("int-").unwrap_or(s);
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IntentError::BadId(s.to_string()));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| IntentError::BadId(s.to_string()))?;
    if n == 0 {
        return Err(IntentError::BadId(s.to_string()));
    }
    Ok(format!("int-{n:04}"))
}

fn path_of(home: &Home, id: &str) -> PathBuf {
    intents_dir(home).join(format!("{id}.json"))
}

fn read(path: &Path) -> Result<Intent, IntentError> {
    use std::io::Read;
    let mut f = files::open_private_read(path)?;
    let mut s = String::new();
    f.read_to_string(&mut s).map_err(|e| IntentError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    serde_json::from_str(&s).map_err(|e| IntentError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// One intent, by id.
pub fn load(home: &Home, id: &str) -> Result<Intent, IntentError> {
    let id = normalize_id(id)?;
    let path = path_of(home, &id);
    if !path.exists() {
        return Err(IntentError::NotFound(id));
    }
    read(&path)
}

/// Every intent, oldest first.
pub fn list(home: &Home) -> Result<Vec<Intent>, IntentError> {
    let dir = intents_dir(home);
    let ids = crate::evidence::numbered(&dir, "int-", ".json")?;
    ids.iter()
        .map(|(_, id)| read(&dir.join(format!("{id}.json"))))
        .collect()
}

/// Stores a new intent under the next free id (its `id` field is set here).
pub fn create(store: &Store, home: &Home, mut intent: Intent) -> Result<Intent, IntentError> {
    let _guard = store.lock.lock().map_err(|_| IntentError::Poisoned)?;
    let dir = intents_dir(home);
    files::ensure_private_dir(&dir)?;
    let next = list(home)?
        .iter()
        .filter_map(|i| i.id.strip_prefix("int-")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    intent.id = format!("int-{next:04}");
    write(home, &intent)?;
    Ok(intent)
}

/// Replaces a stored intent with `update(intent)`, under the store's lock.
pub fn update(
    store: &Store,
    home: &Home,
    id: &str,
    update: impl FnOnce(&mut Intent),
) -> Result<Intent, IntentError> {
    let _guard = store.lock.lock().map_err(|_| IntentError::Poisoned)?;
    let mut intent = load(home, id)?;
    update(&mut intent);
    write(home, &intent)?;
    Ok(intent)
}

fn write(home: &Home, intent: &Intent) -> Result<(), IntentError> {
    let mut bytes = serde_json::to_vec_pretty(intent).map_err(|e| IntentError::Corrupt {
        path: path_of(home, &intent.id),
        reason: e.to_string(),
    })?;
    bytes.push(b'\n');
    files::write_atomic(&path_of(home, &intent.id), &bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Git, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path());
        git.run(&["init", "-q", "-b", "main"]).unwrap();
        git.run(&["config", "user.name", "T"]).unwrap();
        git.run(&["config", "user.email", "t@example.org"]).unwrap();
        std::fs::write(dir.path().join("a"), "a\n").unwrap();
        git.run(&["add", "a"]).unwrap();
        git.run(&["commit", "-q", "-m", "base"]).unwrap();
        let base = git.text(&["rev-parse", "HEAD"]).unwrap();
        std::fs::write(dir.path().join("a"), "b\n").unwrap();
        git.run(&["add", "a"]).unwrap();
        let tree = git.text(&["write-tree"]).unwrap();
        (dir, git, base, tree)
    }

    #[test]
    fn the_revision_is_reproducible_and_moves_no_ref() {
        let (dir, git, base, tree) = repo();
        let before = git.text(&["for-each-ref"]).unwrap();
        let recipe = CommitRecipe {
            tree: tree.clone(),
            parent: base.clone(),
            message: CommitRecipe::message_for("Title", "Body line\n\n"),
            author_name: "Ada".into(),
            author_email: "ada@example.org".into(),
            date: "1700000000 +0000".into(),
        };
        assert_eq!(recipe.message, "Title\n\nBody line\n");
        let a = recipe.build(&git).unwrap();
        assert_eq!(a.len(), 40);
        assert_eq!(git.text(&["for-each-ref"]).unwrap(), before, "no ref moved");
        // Signing configured in the repository changes nothing.
        git.run(&["config", "commit.gpgSign", "true"]).unwrap();
        git.run(&["config", "i18n.commitEncoding", "ISO-8859-1"])
            .unwrap();
        // The same recipe elsewhere (a fresh clone) gives the same id.
        let other = tempfile::tempdir().unwrap();
        let g2 = Git::new(other.path());
        let src = dir.path().to_string_lossy().into_owned();
        g2.run(&["clone", "-q", &src, "."]).unwrap();
        g2.run(&["read-tree", &base]).unwrap();
        std::fs::write(other.path().join("a"), "b\n").unwrap();
        g2.run(&["add", "a"]).unwrap();
        assert_eq!(g2.text(&["write-tree"]).unwrap(), tree);
        assert_eq!(recipe.build(&g2).unwrap(), a);
        assert_eq!(recipe.build(&git).unwrap(), a);
        let text = git.text(&["cat-file", "commit", &a]).unwrap();
        assert!(
            text.contains("author Ada <ada@example.org> 1700000000 +0000"),
            "{text}"
        );
        assert!(
            !text.contains("gpgsig") && !text.contains("encoding"),
            "{text}"
        );
    }

    #[test]
    fn ids_and_the_store() {
        assert_eq!(normalize_id("7").unwrap(), "int-0007");
        assert_eq!(normalize_id("int-12").unwrap(), "int-0012");
        assert!(normalize_id("int-0").is_err());
        assert!(normalize_id("../x").is_err());
        let t = tempfile::tempdir().unwrap();
        let home = Home::resolve_with(Some(t.path()), None).unwrap();
        home.ensure().unwrap();
        assert!(list(&home).unwrap().is_empty());
        assert!(matches!(load(&home, "1"), Err(IntentError::NotFound(_))));
    }
}
