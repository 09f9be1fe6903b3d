//! The factory tests' shared setup: git in a fixed identity, a repository with a linked
//! worktree, the stand-ins' environment, and reading what `factory run` printed.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::ShimEnv;

/// `git ARGS` in `dir` (a fixed identity, no system config); its trimmed stdout. Panics with
/// git's words on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository `dir/MAIN` with `files` (relative path, contents) in one commit, and a fresh
/// linked worktree of it, `dir/WT` on branch `branch`. Returns (main, worktree).
pub fn worktree_repo(
    dir: &Path,
    (main, wt, branch): (&str, &str, &str),
    files: &[(&str, &str)],
) -> (PathBuf, PathBuf) {
    let main = dir.join(main);
    std::fs::create_dir_all(&main).unwrap();
    git(&main, &["init", "-q", "-b", "main"]);
    for (path, text) in files {
        let p = main.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&main, &["add", "-A"]);
    git(&main, &["commit", "-q", "-m", "base"]);
    let wt = dir.join(wt);
    git(
        &main,
        &["worktree", "add", "-q", "-b", branch, wt.to_str().unwrap()],
    );
    (main, wt)
}

/// The stand-ins first on the PATH of the CLI and of the server it starts.
pub fn shim_env() -> ShimEnv {
    let mut e = ShimEnv::new();
    e.h.path = Some(e.path_var.clone().into());
    e
}

/// What `factory run` printed on stdout: exactly the receipt.
pub fn receipt(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not the receipt ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
