//! Running git: one place that decides how proctor calls it. No shell; argv only; a fixed,
//! minimal set of overrides so that nothing a repository's configuration names (hooks,
//! fsmonitor commands, pagers, editors, credential prompts) runs on proctor's behalf.
//!
//! Residual: clean/smudge filters and `include` directives are refused when a worktree is
//! made (see the worktrees module); a repository whose config changes afterwards is read
//! again by every git call, so a filter added later would run on `git add`.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The longest stderr kept in an error.
const MAX_STDERR: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        /// Exit code, when git exited (not killed by a signal).
        code: Option<i32>,
        stderr: String,
        stdout: Vec<u8>,
    },
    #[error("git {args} printed something that is not UTF-8")]
    NotUtf8 { args: String },
}

impl GitError {
    /// git's exit code when it ran and failed.
    pub fn code(&self) -> Option<i32> {
        match self {
            GitError::Failed { code, .. } => *code,
            _ => None,
        }
    }
}

/// git in one directory.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    env: Vec<(OsString, OsString)>,
}

/// Variables from the caller's environment that would redirect git; always removed.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_TRACE",
];

impl Git {
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            env: Vec::new(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adds an environment variable for every call of this `Git` (for example
    /// `GIT_INDEX_FILE` for a temporary index, or a fixed author date).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Git {
        self.env.push((key.into(), value.into()));
        self
    }

    fn command(&self, args: &[&OsStr]) -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(&self.dir);
        for k in SCRUBBED {
            cmd.env_remove(k);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C")
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", "false");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.pager=cat",
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "credential.interactive=false",
        ]);
        cmd.args(args);
        cmd
    }

    /// Runs git with `args`, optionally feeding `stdin`, and returns its stdout. A non-zero
    /// exit is an error carrying git's (bounded) stderr.
    pub fn run_with_input(
        &self,
        args: &[&OsStr],
        stdin: Option<&[u8]>,
    ) -> Result<Vec<u8>, GitError> {
        let mut cmd = self.command(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(GitError::Spawn)?;
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin is piped");
            let input = input.to_vec();
            // Written from a thread so a large input cannot deadlock against stdout.
            let writer = std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
            let out = child.wait_with_output().map_err(GitError::Spawn)?;
            let _ = writer.join();
            return finish(args, out);
        }
        let out = child.wait_with_output().map_err(GitError::Spawn)?;
        finish(args, out)
    }

    /// Runs git with string arguments and returns stdout.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        self.run_with_input(&args, None)
    }

    /// Runs git and returns stdout as UTF-8 with the final newline removed.
    pub fn text(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args)?;
        let mut s = String::from_utf8(out).map_err(|_| GitError::NotUtf8 {
            args: args.join(" "),
        })?;
        while s.ends_with('\n') {
            s.pop();
        }
        Ok(s)
    }
}

fn finish(args: &[&OsStr], out: std::process::Output) -> Result<Vec<u8>, GitError> {
    if out.status.success() {
        return Ok(out.stdout);
    }
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if stderr.len() > MAX_STDERR {
        let mut cut = MAX_STDERR;
        while !stderr.is_char_boundary(cut) {
            cut -= 1;
        }
        stderr.truncate(cut);
    }
    Err(GitError::Failed {
        args: args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        status: out.status.to_string(),
        code: out.status.code(),
        stderr: stderr.trim_end().to_string(),
        stdout: out.stdout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_git_and_reports_failures_with_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path());
        git.run(&["init", "-q", "-b", "main"]).unwrap();
        assert_eq!(
            git.text(&["rev-parse", "--is-inside-work-tree"]).unwrap(),
            "true"
        );
        let err = git.run(&["rev-parse", "--verify", "HEAD"]).unwrap_err();
        assert_eq!(err.code(), Some(128));
        assert!(err.to_string().contains("rev-parse --verify HEAD"), "{err}");
        let blob = git
            .run_with_input(
                &[OsStr::new("hash-object"), OsStr::new("--stdin")],
                Some(b"x"),
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(blob).unwrap().trim(),
            "c1b0730e0133447badcfd47fd144e254807b06e1"
        );
    }
}
