//! `proctor factory run --rig RIG`: the worker and the repair run inside a real namespace
//! rig (bubblewrap, entered with nsenter), on a copy of the worktree's files, and what they
//! change comes back judged entry by entry. The real binary, a real server, real git, the
//! stand-in workers (scripted by `!worker` lines). Each test tries to break one guarantee:
//! the worker really ran behind the rig's boundary (it read a file only the rig has), it
//! never saw a secret file, it could not reach the host's `.git`, a link or a nested
//! repository it made is refused with nothing written, and a rig that cannot take the
//! worker is refused before a run is numbered.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::ShimEnv;
use common::factory::{git, receipt, shim_env as env, stderr, worktree_repo};

/// A repository (a source file, a file to delete, a tracked secret) and a linked worktree.
fn repo(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    worktree_repo(
        dir,
        (&format!("{name}-main"), &format!("{name}-wt"), name),
        &[
            ("src/lib.txt", "one\n"),
            ("old.txt", "to delete\n"),
            (".env", "SECRET=host-only\n"),
        ],
    )
}

fn open_rig(e: &ShimEnv) -> String {
    let v =
        e.h.json(&["rig", "open", "--backend", "namespace", "--json"]);
    assert_eq!(v["state"], "running", "{v}");
    v["id"].as_str().unwrap().to_string()
}

fn factory(e: &ShimEnv, ws: &Path, task: &str, out: &Path, rig: &str) -> Output {
    let mut c = e.h.cmd();
    c.args(["factory", "run", "--workspace"])
        .arg(ws)
        .args(["--task", task, "--out"])
        .arg(out)
        .args(["--timeout", "60s", "--rig", rig]);
    c.output().unwrap()
}

/// The run completed (exit 0); else its progress and its whole report, which names why.
fn assert_completed(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stderr(out),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_worker_in_a_rig_works_on_a_copy_behind_its_boundary_and_its_changes_come_back() {
    let e = env();
    let dir = tempfile::tempdir().unwrap();
    let (main, wt) = repo(dir.path(), "inrig");
    let rig = open_rig(&e);
    // A file only the rig has: the worker can read it only if it runs inside.
    let marker = format!("/srv/proctor-marker-{}", std::process::id());
    let made = e.h.run(&[
        "rig",
        "exec",
        &rig,
        "--",
        "sh",
        "-c",
        &format!("echo written-inside-the-rig > {marker}"),
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    assert!(!Path::new(&marker).exists(), "the host has no {marker}");
    let git_link = std::fs::read(wt.join(".git")).unwrap();

    let task = format!(
        "Change the library\n!worker write src/lib.txt two\n!worker read {marker} found.txt\n\
         !worker read .env env-seen.txt\n!worker remove old.txt\n\
         !worker write .git/hooks/pre-commit planted"
    );
    let out = factory(&e, &wt, &task, &dir.path().join("r.json"), &rig);
    assert_completed(&out);
    let rec = receipt(&out);

    // Its changes came back into the host worktree, as regular private files.
    assert_eq!(
        std::fs::read_to_string(wt.join("src/lib.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("found.txt")).unwrap(),
        "written-inside-the-rig\n",
        "the worker read the rig's file: it ran inside the rig"
    );
    assert!(!wt.join("old.txt").exists(), "a deletion comes back");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(wt.join("found.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // The secret was never copied in, and stays on the host as it was.
    assert_eq!(
        std::fs::read_to_string(wt.join("env-seen.txt")).unwrap(),
        "missing\n",
        "the worker saw no .env"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join(".env")).unwrap(),
        "SECRET=host-only\n"
    );
    // The guest's own .git never comes back: the host's link and hooks are untouched.
    assert_eq!(std::fs::read(wt.join(".git")).unwrap(), git_link);
    assert!(!main.join(".git/hooks/pre-commit").exists());
    assert!(!wt.join(".git/hooks").exists());

    // The candidate is the host's, bound as for any run.
    let files: Vec<&str> = rec["candidate"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for f in ["src/lib.txt", "found.txt", "env-seen.txt", "old.txt"] {
        assert!(files.contains(&f), "{f} in {files:?}");
    }
    // The receipt names the rig's boundary, and what the copy moved.
    let b = &rec["boundary"];
    assert_eq!(b["requested"], "rig", "{b}");
    assert_eq!(b["rig"], rig.as_str());
    assert!(
        b["worker"]
            .as_str()
            .unwrap()
            .contains("namespace boundary: weaker than a VM"),
        "{b}"
    );
    assert!(b["reviewer"].as_str().unwrap().contains("not confined"));
    let copy = &b["copies"][0]["copy"];
    assert_eq!(b["copies"][0]["role"], "worker");
    assert_eq!(copy["excluded"], serde_json::json!([".env"]), "{copy}");
    assert_eq!(copy["guestGit"], true, "{copy}");
    assert_eq!(copy["deleted"], 1, "{copy}");
    assert_eq!(copy["written"], 3, "{copy}");
    assert!(
        rec["notProven"][0]
            .as_str()
            .unwrap()
            .contains(&format!("behind {rig}'s boundary")),
        "{}",
        rec["notProven"]
    );
    let run = rec["run"].as_str().unwrap();
    let shown = e.h.json(&["factory", "show", run, "--json"]);
    assert_eq!(shown["rig"], rig.as_str(), "{shown}");
    let human = e.h.run(&["factory", "show", run]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains(&format!("in {rig} (a copy of the worktree)")),
        "{human}"
    );
    // The rig's audit has the factory's entry and its end.
    let audit = e.h.run(&["rig", "audit", &rig, "--json"]);
    let audit = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.contains("\"factory\""), "{audit}");
    assert!(audit.contains("\"ended\""), "{audit}");
    // The copy is gone from the rig.
    let left = e.h.run(&[
        "rig",
        "exec",
        &rig,
        "--",
        "ls",
        "-A",
        "/srv/proctor-factory",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "",
        "{}",
        stderr(&left)
    );
}

#[test]
fn what_cannot_come_back_from_a_rig_is_refused_and_nothing_of_it_is_written() {
    let e = env();
    let dir = tempfile::tempdir().unwrap();
    let rig = open_rig(&e);
    for (name, task, names) in [
        (
            "link",
            "Try a link\n!worker write a.txt new\n!worker link /etc/passwd leak",
            "leak",
        ),
        (
            "nested",
            "Try a repository\n!worker write a.txt new\n!worker write sub/.git/config x",
            "sub/.git",
        ),
    ] {
        let (_main, wt) = repo(dir.path(), name);
        let out = factory(
            &e,
            &wt,
            task,
            &dir.path().join(format!("{name}.json")),
            &rig,
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let rec = receipt(&out);
        assert_eq!(rec["error"]["code"], "rig_return_refused", "{name}: {rec}");
        assert!(
            rec["error"]["message"].as_str().unwrap().contains(names),
            "{name}: {rec}"
        );
        // Judged whole before anything is written: not even the good file came back.
        assert!(!wt.join("a.txt").exists(), "{name}");
        assert!(
            !wt.join("leak").exists() && !wt.join("sub").exists(),
            "{name}"
        );
        assert_eq!(
            git(&wt, &["status", "--porcelain", "--ignored"]),
            "",
            "{name}"
        );
    }
}

#[test]
fn a_rig_that_cannot_take_the_worker_is_refused_before_a_run_is_numbered() {
    let e = env();
    let dir = tempfile::tempdir().unwrap();
    let (_main, wt) = repo(dir.path(), "refused");
    let out_path = dir.path().join("r.json");
    let task = "Do it\n!worker write a.txt x";

    // Not a rig id; no such rig.
    let out = factory(&e, &wt, task, &out_path, "../rig");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is not a rig id"), "{}", stderr(&out));
    let out = factory(&e, &wt, task, &out_path, "rig-0099");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("rig-0099"), "{}", stderr(&out));

    // A person's lock refuses an agent's worker (the refusal is audited).
    let rig = open_rig(&e);
    let lock = e.h.run(&["rig", "lock", &rig]);
    assert!(lock.status.success(), "{}", stderr(&lock));
    let agent = common::rigs::agent_token_in(&e.h, "bot");
    let mut c = e.h.cmd();
    c.env("PROCTOR_TOKEN", &agent)
        .args(["factory", "run", "--workspace"])
        .arg(&wt)
        .args(["--task", task, "--out"])
        .arg(&out_path)
        .args(["--rig", &rig]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("locked"), "{}", stderr(&out));
    let audit =
        String::from_utf8_lossy(&e.h.run(&["rig", "audit", &rig, "--json"]).stdout).into_owned();
    assert!(
        audit.contains("\"factory\"") && audit.contains("\"refused\""),
        "{audit}"
    );
    assert!(e.h.run(&["rig", "unlock", &rig]).status.success());

    // A worker program the rig does not see (outside /usr, not a demo shim).
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("claude");
    std::fs::write(&fake, "#!/bin/sh\necho not-a-shim\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e2 = env();
    let mut e2 = e2;
    e2.h.path = Some(format!("{}:{}", tools.path().display(), e2.path_var).into());
    let rig2 = open_rig(&e2);
    let out = factory(&e2, &wt, task, &out_path, &rig2);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("does not see that file"),
        "{}",
        stderr(&out)
    );

    // A closed rig.
    assert!(e.h.run(&["rig", "close", &rig]).status.success());
    let out = factory(&e, &wt, task, &out_path, &rig);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("closed"), "{}", stderr(&out));

    // Nothing was numbered, and the worktree is as it was.
    for h in [&e.h, &e2.h] {
        let listed = h.json(&["factory", "list", "--json"]);
        assert_eq!(listed["items"], serde_json::json!([]), "{listed}");
    }
    assert_eq!(git(&wt, &["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn a_codex_worker_and_its_repair_run_in_the_rig_and_the_reviewer_judges_each_candidate() {
    let e = env();
    let dir = tempfile::tempdir().unwrap();
    let (_main, wt) = repo(dir.path(), "codex");
    let rig = open_rig(&e);
    // codex writes its last message in the guest; it comes back through the guest's `cat`.
    let task = "Fix it\n!worker write src/lib.txt two\n!review 1 REQUEST_CHANGES say three\n\
                !repair write src/lib.txt three";
    let mut c = e.h.cmd();
    c.args(["factory", "run", "--workspace"])
        .arg(&wt)
        .args(["--task", task, "--out"])
        .arg(dir.path().join("r.json"))
        .args([
            "--timeout",
            "60s",
            "--rig",
            &rig,
            "--worker",
            "codex",
            "--reviewer",
            "claude",
        ]);
    let out = c.output().unwrap();
    assert_completed(&out);
    let rec = receipt(&out);
    assert_eq!(rec["repairs"], 1, "{rec}");
    assert_eq!(
        std::fs::read_to_string(wt.join("src/lib.txt")).unwrap(),
        "three\n"
    );
    let roles: Vec<&str> = rec["boundary"]["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["worker", "repair"], "the reviewer ran on the host");
    let worker_last = rec["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["role"] == "worker" && f["file"] == "last-message.txt")
        .unwrap_or_else(|| panic!("the worker's last message is evidence: {rec}"));
    assert!(worker_last["bytes"].as_u64().unwrap() > 0, "{worker_last}");
    assert_ne!(
        rec["candidate"]["digest"], rec["repairedCandidate"]["digest"],
        "{rec}"
    );
}
