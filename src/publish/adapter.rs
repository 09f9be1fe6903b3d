//! The publish adapter: three effects and nothing else.
//!
//! 1. Move the local branch ref to the revision (`git update-ref refs/heads/B <rev> <old>`,
//!    compare-and-swap on the value read just before).
//! 2. Push exactly that revision with a lease:
//!    `git push --force-with-lease=refs/heads/B:<expected tip> -- <url> <rev>:refs/heads/B`
//!    (an empty expected tip means the branch must not exist). A lease that does not hold is a
//!    refusal naming the tip found on the remote.
//! 3. Open a pull request through [`super::forge`].
//!
//! There is no merge capability: no code here (or anywhere in proctor) merges, closes, or
//! approves a pull request, or pushes to any ref other than the one branch of the intent.
//! Every git call goes through [`crate::git`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::forge::{self, ForgeError, PullRequest, PullRequestAsk, TokenSource};
use crate::git::{Git, GitError};

#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("the credential source for the forge failed, so nothing was done: {0}")]
    Token(#[source] ForgeError),
    #[error("{0:?} is not a branch name git accepts (git check-ref-format --branch)")]
    BadBranch(String),
    #[error("the remote URL {0:?} starts with '-'; proctor refuses it")]
    BadRemoteUrl(String),
    #[error(
        "the remote URL carries a credential (user information before '@'); proctor records \
         the URL in the intent, the ledger and the receipt. Remedy: remove it from the URL \
         and use a git credential helper or an SSH key"
    )]
    CredentialInUrl,
    #[error(
        "the branch {branch} is checked out in the worktree {worktree}; moving its ref would \
         change that worktree's files underneath it. Remedy: choose another branch"
    )]
    BranchCheckedOut { branch: String, worktree: PathBuf },
    #[error("the revision {revision} is not a commit in {repo}")]
    RevisionMissing { revision: String, repo: PathBuf },
    #[error(
        "the lease does not hold: the remote branch {branch} was expected {}, and is now {}. \
         Nothing was pushed. Remedy: propose again from the current state of the remote",
        tip_name(.expected), tip_name(.found)
    )]
    LeaseMoved {
        branch: String,
        expected: Option<String>,
        found: Option<String>,
    },
    #[error(
        "the local branch {branch} moved while it was being updated (it is now {}); \
         nothing was pushed",
        tip_name(.found)
    )]
    LocalRefMoved {
        branch: String,
        found: Option<String>,
    },
    #[error("the push failed: {0}")]
    Push(String),
    #[error("the remote branch {branch} is {} after the push, not {revision}", tip_name(.found))]
    PushNotObserved {
        branch: String,
        revision: String,
        found: Option<String>,
    },
    #[error("the pull request was not opened: {0}")]
    Forge(#[source] ForgeError),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl AdapterError {
    /// A short, stable name for the refusal (ledger, receipts, exit messages).
    pub fn code(&self) -> &'static str {
        match self {
            AdapterError::Token(_) => "token_unavailable",
            AdapterError::BadBranch(_) => "bad_branch",
            AdapterError::BadRemoteUrl(_) => "bad_remote",
            AdapterError::CredentialInUrl => "credential_in_url",
            AdapterError::BranchCheckedOut { .. } => "branch_checked_out",
            AdapterError::RevisionMissing { .. } => "revision_missing",
            AdapterError::LeaseMoved { .. } => "lease_moved",
            AdapterError::LocalRefMoved { .. } => "local_ref_moved",
            AdapterError::Push(_) => "push_failed",
            AdapterError::PushNotObserved { .. } => "push_not_observed",
            AdapterError::Forge(_) => "pull_request_failed",
            AdapterError::Git(_) => "git_failed",
        }
    }
}

/// How a tip is named in messages: the commit id, or "absent".
pub fn tip_name(tip: &Option<String>) -> String {
    match tip {
        Some(t) => t.clone(),
        None => "absent (no such branch)".to_string(),
    }
}

/// What the adapter is asked to do: one revision, one branch, one remote, one pull request.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The repository that holds the revision's commit object.
    pub repo: PathBuf,
    pub remote_url: String,
    pub branch: String,
    pub revision: String,
    /// The lease: the remote branch's expected tip; `None` = it must not exist.
    pub expected_tip: Option<String>,
    pub pull_request: PullRequestAsk,
    pub token: TokenSource,
}

/// The local branch ref, as moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LocalRef {
    pub name: String,
    pub old: Option<String>,
    pub new: String,
}

/// The push, as observed on the remote afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Pushed {
    pub remote_url: String,
    pub name: String,
    /// The lease's expected value (the tip before).
    pub old: Option<String>,
    /// The tip `git ls-remote` reports after the push.
    pub observed: String,
}

/// Every effect that happened, in order; each is absent when it did not happen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Effects {
    pub local_ref: Option<LocalRef>,
    pub push: Option<Pushed>,
    pub pull_request: Option<PullRequest>,
}

/// The adapter's outcome: what was done, and the refusal or failure that stopped it.
#[derive(Debug)]
pub struct Outcome {
    pub effects: Effects,
    pub error: Option<AdapterError>,
}

/// Checks a branch name the way git does (`git check-ref-format --branch`), and refuses a
/// leading '-' (it would read as an option).
pub fn check_branch(git: &Git, branch: &str) -> Result<(), AdapterError> {
    if branch.is_empty() || branch.starts_with('-') || branch.starts_with("refs/") {
        return Err(AdapterError::BadBranch(branch.to_string()));
    }
    match git.text(&["check-ref-format", "--branch", branch]) {
        Ok(out) if out == branch => Ok(()),
        _ => Err(AdapterError::BadBranch(branch.to_string())),
    }
}

/// Refuses a remote URL that git could read as an option, or that carries a credential
/// (`https://user:token@host/…`, `https://token@host/…`): the URL is recorded in the intent,
/// the ledger and the receipt, and shown to the operator.
pub fn check_remote_url(url: &str) -> Result<(), AdapterError> {
    if url.starts_with('-') || url.is_empty() {
        return Err(AdapterError::BadRemoteUrl(url.to_string()));
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority = rest.split('/').next().unwrap_or("");
        if let Some((userinfo, _host)) = authority.rsplit_once('@') {
            // Over HTTP any user information is a credential (a token as the user name);
            // elsewhere (ssh://git@host) a user name is not, a password is.
            let http = matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https");
            if http || userinfo.contains(':') {
                return Err(AdapterError::CredentialInUrl);
            }
        }
    }
    Ok(())
}

/// The URL a remote name points at (`git remote get-url`).
pub fn remote_url(git: &Git, remote: &str) -> Result<String, GitError> {
    git.text(&["remote", "get-url", "--", remote])
}

/// The remote branch's current tip (`git ls-remote`), `None` when it does not exist.
pub fn remote_tip(git: &Git, url: &str, branch: &str) -> Result<Option<String>, AdapterError> {
    check_remote_url(url)?;
    let full = format!("refs/heads/{branch}");
    let out = git.text(&["ls-remote", "--refs", "--", url, &full])?;
    Ok(out.lines().find_map(|line| {
        let (id, name) = line.split_once('\t')?;
        (name == full).then(|| id.to_string())
    }))
}

/// The local branch's current value, `None` when it does not exist.
pub fn local_tip(git: &Git, branch: &str) -> Result<Option<String>, GitError> {
    let full = format!("refs/heads/{branch}");
    match git.text(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{full}^{{commit}}"),
    ]) {
        Ok(id) => Ok(Some(id)),
        Err(e) if e.code() == Some(1) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The worktree (if any) where `branch` is checked out.
pub fn checked_out_in(git: &Git, branch: &str) -> Result<Option<PathBuf>, GitError> {
    let full = format!("refs/heads/{branch}");
    let out = git.text(&["worktree", "list", "--porcelain"])?;
    let mut current: Option<PathBuf> = None;
    for line in out.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            current = Some(PathBuf::from(p));
        } else if line.strip_prefix("branch ") == Some(full.as_str()) {
            return Ok(current);
        }
    }
    Ok(None)
}

/// Runs the three effects, in order, stopping at the first refusal or failure. The token is
/// read first: when the credential source fails, nothing at all is done.
pub fn run(plan: &Plan) -> Outcome {
    let mut effects = Effects::default();
    let error = steps(plan, &mut effects).err();
    Outcome { effects, error }
}

fn steps(plan: &Plan, effects: &mut Effects) -> Result<(), AdapterError> {
    let git = Git::new(&plan.repo);
    check_branch(&git, &plan.branch)?;
    check_remote_url(&plan.remote_url)?;
    let token = forge::read_token(&plan.token).map_err(AdapterError::Token)?;
    let commit = git
        .text(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{}^{{commit}}", plan.revision),
        ])
        .ok();
    if commit.as_deref() != Some(plan.revision.as_str()) {
        return Err(AdapterError::RevisionMissing {
            revision: plan.revision.clone(),
            repo: plan.repo.clone(),
        });
    }
    if let Some(worktree) = checked_out_in(&git, &plan.branch)? {
        return Err(AdapterError::BranchCheckedOut {
            branch: plan.branch.clone(),
            worktree,
        });
    }
    // The lease, read before any effect: a branch that moved costs nothing.
    let found = remote_tip(&git, &plan.remote_url, &plan.branch)?;
    if found != plan.expected_tip {
        return Err(AdapterError::LeaseMoved {
            branch: plan.branch.clone(),
            expected: plan.expected_tip.clone(),
            found,
        });
    }

    // 1. The local branch ref (compare-and-swap on the value just read).
    let name = format!("refs/heads/{}", plan.branch);
    let old = local_tip(&git, &plan.branch)?;
    let reason = format!("proctor publish: {}", plan.revision);
    if let Err(e) = git.run(&[
        "update-ref",
        "-m",
        &reason,
        &name,
        &plan.revision,
        old.as_deref().unwrap_or(""),
    ]) {
        let now = local_tip(&git, &plan.branch).ok().flatten();
        if now != old {
            return Err(AdapterError::LocalRefMoved {
                branch: plan.branch.clone(),
                found: now,
            });
        }
        return Err(e.into());
    }
    effects.local_ref = Some(LocalRef {
        name: name.clone(),
        old,
        new: plan.revision.clone(),
    });

    // 2. The push of exactly that revision, with the lease.
    let lease = format!(
        "--force-with-lease={name}:{}",
        plan.expected_tip.as_deref().unwrap_or("")
    );
    let refspec = format!("{}:{name}", plan.revision);
    if let Err(e) = git.run(&[
        "push",
        "--porcelain",
        &lease,
        "--",
        &plan.remote_url,
        &refspec,
    ]) {
        let found = remote_tip(&git, &plan.remote_url, &plan.branch)
            .ok()
            .flatten();
        if found != plan.expected_tip && found.as_deref() != Some(plan.revision.as_str()) {
            return Err(AdapterError::LeaseMoved {
                branch: plan.branch.clone(),
                expected: plan.expected_tip.clone(),
                found,
            });
        }
        return Err(AdapterError::Push(match e {
            GitError::Failed { stderr, .. } => stderr,
            other => other.to_string(),
        }));
    }
    let observed = remote_tip(&git, &plan.remote_url, &plan.branch)?;
    if observed.as_deref() != Some(plan.revision.as_str()) {
        return Err(AdapterError::PushNotObserved {
            branch: plan.branch.clone(),
            revision: plan.revision.clone(),
            found: observed,
        });
    }
    effects.push = Some(Pushed {
        remote_url: plan.remote_url.clone(),
        name,
        old: plan.expected_tip.clone(),
        observed: plan.revision.clone(),
    });

    // 3. The pull request.
    let pr = forge::open_pull_request(&plan.pull_request, &token).map_err(AdapterError::Forge)?;
    effects.pull_request = Some(pr);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::intent::CommitRecipe;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::fs::PermissionsExt;

    struct World {
        _dir: tempfile::TempDir,
        repo: PathBuf,
        remote: PathBuf,
        token: PathBuf,
        revision: String,
        base: String,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let remote = dir.path().join("remote.git");
        std::fs::create_dir(&repo).unwrap();
        Git::new(dir.path())
            .run(&["init", "-q", "--bare", "remote.git"])
            .unwrap();
        let git = Git::new(&repo);
        git.run(&["init", "-q", "-b", "main"]).unwrap();
        git.run(&["config", "user.name", "T"]).unwrap();
        git.run(&["config", "user.email", "t@example.org"]).unwrap();
        std::fs::write(repo.join("a"), "a\n").unwrap();
        git.run(&["add", "a"]).unwrap();
        git.run(&["commit", "-q", "-m", "base"]).unwrap();
        let base = git.text(&["rev-parse", "HEAD"]).unwrap();
        git.run(&["push", "-q", "--", remote.to_str().unwrap(), "main"])
            .unwrap();
        std::fs::write(repo.join("a"), "b\n").unwrap();
        git.run(&["add", "a"]).unwrap();
        let tree = git.text(&["write-tree"]).unwrap();
        git.run(&["reset", "-q", "--hard"]).unwrap();
        let revision = CommitRecipe {
            tree,
            parent: base.clone(),
            message: "Change a\n".into(),
            author_name: "Ada".into(),
            author_email: "ada@example.org".into(),
            date: "1700000000 +0000".into(),
        }
        .build(&git)
        .unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "ghp_adapter\n").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        World {
            _dir: dir,
            repo,
            remote,
            token,
            revision,
            base,
        }
    }

    /// A one-shot fake forge; returns its base URL and the recorded request.
    fn fake_forge() -> (String, std::thread::JoinHandle<String>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let (mut head, mut len) = (String::new(), 0usize);
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let answer = r#"{"number":7,"html_url":"http://forge.test/acme/widget/pull/7"}"#;
            let mut s = s;
            write!(
                s,
                "HTTP/1.1 201 Created\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            head
        });
        (format!("http://127.0.0.1:{port}"), h)
    }

    fn plan(w: &World, api_base: &str, expected: Option<String>) -> Plan {
        Plan {
            repo: w.repo.clone(),
            remote_url: w.remote.to_string_lossy().into_owned(),
            branch: "feature".into(),
            revision: w.revision.clone(),
            expected_tip: expected,
            pull_request: PullRequestAsk {
                api_base: api_base.into(),
                owner: "acme".into(),
                repo: "widget".into(),
                head: "feature".into(),
                base: "main".into(),
                title: "Change a".into(),
                body: String::new(),
            },
            token: TokenSource::File(w.token.clone()),
        }
    }

    #[test]
    fn three_effects_in_order_and_observed() {
        let w = world();
        let (api, forge) = fake_forge();
        let out = run(&plan(&w, &api, None));
        assert!(out.error.is_none(), "{:?}", out.error);
        let head = forge.join().unwrap();
        assert!(head.contains("Bearer ghp_adapter"), "{head}");
        let git = Git::new(&w.repo);
        assert_eq!(
            local_tip(&git, "feature").unwrap(),
            Some(w.revision.clone())
        );
        let url = w.remote.to_string_lossy();
        assert_eq!(
            remote_tip(&git, &url, "feature").unwrap(),
            Some(w.revision.clone())
        );
        assert_eq!(out.effects.push.unwrap().observed, w.revision);
        assert_eq!(out.effects.pull_request.unwrap().number, 7);
        // The remote's main is untouched: nothing is merged.
        assert_eq!(
            remote_tip(&git, &url, "main").unwrap(),
            Some(w.base.clone())
        );
    }

    #[test]
    fn a_moved_lease_is_refused_naming_the_tip_and_nothing_happens() {
        let w = world();
        let git = Git::new(&w.repo);
        let url = w.remote.to_string_lossy().into_owned();
        // Someone else pushed the branch after the intent read it as absent.
        git.run(&[
            "push",
            "-q",
            "--",
            &url,
            &format!("{}:refs/heads/feature", w.base),
        ])
        .unwrap();
        let out = run(&plan(&w, "http://127.0.0.1:9", None));
        let e = out.error.unwrap();
        assert_eq!(e.code(), "lease_moved");
        assert!(e.to_string().contains(&w.base), "{e}");
        assert_eq!(out.effects, Effects::default());
        assert_eq!(local_tip(&git, "feature").unwrap(), None);
        assert_eq!(
            remote_tip(&git, &url, "feature").unwrap(),
            Some(w.base.clone())
        );
    }

    #[test]
    fn refusals_before_any_effect() {
        let w = world();
        let git = Git::new(&w.repo);
        // The branch checked out in a worktree.
        let mut p = plan(&w, "http://127.0.0.1:9", None);
        p.branch = "main".into();
        p.expected_tip = Some(w.base.clone());
        let out = run(&p);
        assert_eq!(out.error.unwrap().code(), "branch_checked_out");
        // An unusable credential source: nothing at all is done.
        let mut p = plan(&w, "http://127.0.0.1:9", None);
        std::fs::set_permissions(&w.token, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = run(&p);
        assert_eq!(out.error.unwrap().code(), "token_unavailable");
        assert_eq!(out.effects, Effects::default());
        std::fs::set_permissions(&w.token, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Branch names git would read as options or refuse.
        for b in ["-f", "a..b", "refs/heads/x", "x.lock", ""] {
            p.branch = b.into();
            assert_eq!(run(&p).error.unwrap().code(), "bad_branch", "{b:?}");
        }
        assert_eq!(local_tip(&git, "feature").unwrap(), None);
        // URLs that carry a credential are refused (they would be recorded and shown).
        for url in [
            "https://x-access-token:ghp_x@github.com/acme/widget.git",
            "https://ghp_x@github.com/acme/widget.git",
            "ssh://git:secret@host/acme/widget.git",
        ] {
            assert!(
                matches!(check_remote_url(url), Err(AdapterError::CredentialInUrl)),
                "{url}"
            );
        }
        for url in [
            "ssh://git@host/acme/widget.git",
            "git@github.com:acme/widget.git",
            "/srv/r.git",
        ] {
            assert!(check_remote_url(url).is_ok(), "{url}");
        }
        // A revision that is not a commit here.
        let mut p = plan(&w, "http://127.0.0.1:9", None);
        p.revision = w.base.replace(|c: char| c.is_ascii_digit(), "0");
        assert_eq!(run(&p).error.unwrap().code(), "revision_missing");
    }
}

#[cfg(test)]
mod absence {
    /// The publish path's sources hold no way to merge: no git merge, no forge merge call.
    /// (Absence over checks: this test fails if one is ever added.)
    #[test]
    fn no_merge_capability_in_the_publish_path() {
        let sources = [
            ("adapter.rs", include_str!("adapter.rs")),
            ("forge.rs", include_str!("forge.rs")),
            ("approve.rs", include_str!("approve.rs")),
            ("intent.rs", include_str!("intent.rs")),
            ("publish_api.rs", include_str!("../server/publish_api.rs")),
        ];
        for (name, text) in sources {
            let code = text.split("mod absence").next().unwrap_or(text);
            for needle in [
                "\"merge\"",
                "/merge",
                "merge-base",
                "\"rebase\"",
                "\"reviews\"",
            ] {
                assert!(!code.contains(needle), "{name} contains {needle}");
            }
        }
    }
}
