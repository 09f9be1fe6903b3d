//! An unsafe home (others can write it, or another user owns it) is refused by every verb
//! that uses the home, with exit 2 and one message, before anything is created or started.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Verbs across the command tree that read or write the home.
const VERBS: &[&[&str]] = &[
    &["home"],
    &["session", "list"],
    &["session", "show", "run-0001"],
    &["server", "status"],
    &["server", "stop"],
    &["ledger", "verify"],
    &["key", "show"],
    &["profile", "list"],
    &["workspace", "list"],
    &["token", "list"],
    &["receipt", "list"],
];

fn run(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proctor"))
        .env_remove("PROCTOR_HOME")
        .env_remove("PROCTOR_TOKEN")
        .arg("--home")
        .arg(home)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Every verb exits 2 with the same message naming the folder, prints nothing on stdout and
/// leaves the home as it found it (no folder created, no server started).
fn every_verb_refuses(home: &Path, expect_in_message: &[&str]) {
    let before = entries(home);
    let mut first: Option<String> = None;
    for args in VERBS {
        let out = run(home, args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed: {out:?}");
        for s in expect_in_message {
            assert!(err.contains(s), "{args:?}: {s:?} missing from {err}");
        }
        match &first {
            None => first = Some(err),
            Some(f) => assert_eq!(&err, f, "{args:?} says something else"),
        }
        assert_eq!(entries(home), before, "{args:?} changed the home");
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(dir);
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        v.push(p.display().to_string());
        if p.is_dir() {
            v.extend(walk(&p));
        }
    }
    v
}

#[test]
fn a_home_others_can_write_exits_2_from_every_verb() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("open");
    std::fs::create_dir(&h).unwrap();
    std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o777)).unwrap();
    every_verb_refuses(&h, &[h.to_str().unwrap(), "unsafe state home", "chmod 700"]);
}

#[test]
fn a_part_another_user_owns_exits_2_from_every_verb() {
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: giving a folder to another user (chown) needs root");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("h");
    std::fs::create_dir_all(h.join("config")).unwrap();
    std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(h.join("config"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(h.join("config"), Some(65534), Some(65534)).unwrap();
    every_verb_refuses(
        &h,
        &[h.join("config").to_str().unwrap(), "unsafe state home"],
    );
}
