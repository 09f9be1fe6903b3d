//! [`scan_commit`]: the project-config scan over the files as committed at a commit, which
//! is what a worktree started from that commit carries.
//!
//! Exactly the entries the scan looks at are listed with `git ls-tree -z` (the files of
//! [`FILES`] and the folders on their paths); the few blobs among them are read with
//! `git cat-file blob`, their size checked first, and written into a private temporary
//! folder (0700, files 0600) in the shape a checkout gives them: a folder for a tree or a
//! submodule (gitlink), a symbolic link for a link entry (mode 120000), a file for a blob.
//! [`scan`] then reads that folder, so a commit and a checkout of it give the same report
//! and the same hash: a link is flagged `symlink` and a gitlink `not_regular`, as in a
//! folder. Nothing is checked out, no filter or hook runs, nothing is executed.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{FILES, Scan, ScanError, scan};
use crate::files;
use crate::git::{Git, GitError};
use crate::text;

/// The largest blob read from a commit (a larger file is refused, not read).
pub const MAX_COMMIT_BLOB_BYTES: u64 = 16 * 1024 * 1024;
/// The longest symbolic link target a checkout can make (Linux `PATH_MAX` less the NUL).
const MAX_LINK_BYTES: u64 = 4095;

/// Why the files of a commit could not be scanned.
#[derive(Debug, thiserror::Error)]
pub enum CommitScanError {
    #[error("{0} is not a full commit id (40 or 64 lowercase hexadecimal digits)")]
    NotACommitId(String),
    #[error("cannot read the files of commit {commit}: {reason}")]
    Git { commit: String, reason: String },
    #[error(
        "{path} at commit {commit} is {bytes} bytes, over the {MAX_COMMIT_BLOB_BYTES} bytes \
         proctor reads from a commit; such a file cannot be reviewed from the commit"
    )]
    TooLarge {
        commit: String,
        path: String,
        bytes: u64,
    },
    #[error(
        "{path} at commit {commit} is a symbolic link that no checkout can make ({why}); a \
         worktree cannot start there"
    )]
    BadLink {
        commit: String,
        path: String,
        why: String,
    },
    #[error("cannot prepare the private folder of the scan: {0}")]
    Temp(String),
    #[error(transparent)]
    Scan(#[from] ScanError),
}

/// One `git ls-tree -l` record.
#[derive(Debug)]
struct Entry {
    mode: String,
    kind: String,
    id: String,
    size: Option<u64>,
    path: String,
}

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Records `mode SP type SP id SP+ size TAB path NUL`; only those whose path is in `wanted`.
fn parse_ls_tree(out: &[u8], wanted: &BTreeSet<&'static str>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for rec in out.split(|b| *b == 0) {
        let Some(tab) = rec.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let Ok(path) = std::str::from_utf8(&rec[tab + 1..]) else {
            continue;
        };
        if !wanted.contains(path) {
            continue;
        }
        let head = String::from_utf8_lossy(&rec[..tab]);
        let mut f = head.split_ascii_whitespace();
        let (Some(mode), Some(kind), Some(id), Some(size)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        entries.push(Entry {
            mode: mode.to_string(),
            kind: kind.to_string(),
            id: id.to_string(),
            size: size.parse().ok(),
            path: path.to_string(),
        });
    }
    entries
}

/// Scans the files of [`FILES`] as committed at `commit` (a full commit id) in the
/// repository at `repo`, with the result [`scan`] gives for a checkout of that commit. The
/// scan's `folder` is `repo` and its `commit` is `commit`.
pub fn scan_commit(repo: &Path, commit: &str) -> Result<Scan, CommitScanError> {
    if !is_hex_id(commit) {
        return Err(CommitScanError::NotACommitId(text::one_line(commit, 80)));
    }
    let git = Git::new(repo).with_env("GIT_LITERAL_PATHSPECS", "1");
    let failed = |e: GitError| CommitScanError::Git {
        commit: commit.to_string(),
        reason: match e {
            GitError::Failed { stderr, .. } => text::one_line(&stderr, 300),
            other => text::one_line(&other.to_string(), 300),
        },
    };
    let tree_ish = format!("{commit}^{{commit}}");
    let known: BTreeSet<&'static str> = FILES.iter().map(|k| k.path).collect();
    let folders: BTreeSet<&'static str> = FILES
        .iter()
        .filter_map(|k| k.path.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    let wanted: BTreeSet<&'static str> = known.union(&folders).copied().collect();

    // The files, and (-t) the trees on their paths.
    let mut args = vec!["ls-tree", "-z", "-l", "-t", "--full-tree", &tree_ish, "--"];
    args.extend(known.iter().copied());
    let mut entries = parse_ls_tree(&git.run(&args).map_err(failed)?, &wanted);
    // A folder on a path that is not a tree (a link, a file, a submodule) hides the files
    // under it: list it by itself.
    let hidden: Vec<&str> = folders
        .iter()
        .copied()
        .filter(|d| !entries.iter().any(|e| e.path == *d))
        .collect();
    if !hidden.is_empty() {
        let mut args = vec!["ls-tree", "-z", "-l", "--full-tree", &tree_ish, "--"];
        args.extend(hidden.iter().copied());
        let more = parse_ls_tree(&git.run(&args).map_err(failed)?, &wanted);
        entries.extend(
            more.into_iter()
                .filter(|e| hidden.contains(&e.path.as_str())),
        );
    }
    // Folders before what they hold.
    entries.sort_by(|a, b| {
        (a.path.matches('/').count(), &a.path).cmp(&(b.path.matches('/').count(), &b.path))
    });
    entries.dedup_by(|a, b| a.path == b.path);

    let tmp = tempfile::Builder::new()
        .prefix("proctor-commit-scan-")
        .tempdir()
        .map_err(|e| CommitScanError::Temp(e.to_string()))?;
    let temp = |e: files::FilesError| CommitScanError::Temp(e.to_string());
    files::ensure_private_dir(tmp.path()).map_err(temp)?;
    for e in &entries {
        let dst = tmp.path().join(&e.path);
        let blob = |limit: u64| -> Result<Vec<u8>, CommitScanError> {
            let bytes = e.size.unwrap_or(u64::MAX);
            if bytes > limit {
                return Err(CommitScanError::TooLarge {
                    commit: commit.to_string(),
                    path: e.path.clone(),
                    bytes,
                });
            }
            if !is_hex_id(&e.id) {
                return Err(CommitScanError::Git {
                    commit: commit.to_string(),
                    reason: format!("{} has no object id", e.path),
                });
            }
            let content = git.run(&["cat-file", "blob", &e.id]).map_err(failed)?;
            if content.len() as u64 != bytes {
                return Err(CommitScanError::Git {
                    commit: commit.to_string(),
                    reason: format!(
                        "{} read {} bytes, not the {bytes} listed",
                        e.path,
                        content.len()
                    ),
                });
            }
            Ok(content)
        };
        match (e.mode.as_str(), e.kind.as_str()) {
            // A folder, or a submodule (a checkout makes it an empty folder).
            ("040000", "tree") | ("160000", "commit") => {
                files::ensure_private_dir(&dst).map_err(temp)?
            }
            ("120000", "blob") => {
                let target = blob(MAX_LINK_BYTES).map_err(|err| match err {
                    CommitScanError::TooLarge { bytes, .. } => CommitScanError::BadLink {
                        commit: commit.to_string(),
                        path: e.path.clone(),
                        why: format!("its target is {bytes} bytes, over {MAX_LINK_BYTES}"),
                    },
                    other => other,
                })?;
                if target.contains(&0) {
                    return Err(CommitScanError::BadLink {
                        commit: commit.to_string(),
                        path: e.path.clone(),
                        why: "its target contains a NUL byte".into(),
                    });
                }
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), &dst).map_err(|err| {
                    CommitScanError::BadLink {
                        commit: commit.to_string(),
                        path: e.path.clone(),
                        why: err.to_string(),
                    }
                })?;
            }
            (_, "blob") => {
                // A file where a folder is expected: the scan finds nothing inside, and its
                // content is never looked at.
                let content = if known.contains(e.path.as_str()) {
                    blob(MAX_COMMIT_BLOB_BYTES)?
                } else {
                    Vec::new()
                };
                let mut f = files::create_private_new(&dst).map_err(temp)?;
                f.write_all(&content)
                    .map_err(|err| CommitScanError::Temp(format!("{}: {err}", dst.display())))?;
            }
            (mode, kind) => {
                return Err(CommitScanError::Git {
                    commit: commit.to_string(),
                    reason: format!(
                        "{} is a {} entry of mode {}, which proctor does not know",
                        e.path,
                        text::one_line(kind, 20),
                        text::one_line(mode, 20)
                    ),
                });
            }
        }
    }
    let mut s = scan(tmp.path())?;
    s.folder = repo.to_path_buf();
    s.commit = Some(commit.to_string());
    Ok(s)
}
