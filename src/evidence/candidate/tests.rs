//! Candidate identity against real git repositories and linked worktrees in tempdirs.

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// A repository with one commit, a linked worktree on `proctor/run-0001` made from it, a
/// proctor home and its ledger: the shape a worktree run leaves.
pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub wt: PathBuf,
    pub info: WorktreeInfo,
    pub home: Home,
    pub ledger: Ledger,
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir)
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .text(args)
        .unwrap()
}

pub(crate) fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

pub(crate) fn actor() -> Actor {
    Actor {
        token_id: "tok-test".into(),
        name: "tester".into(),
        principal: crate::auth::Principal::Person,
    }
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        write(&repo.join("README.md"), b"hello\n");
        write(&repo.join("src/lib.txt"), b"one\ntwo\nthree\n");
        write(&repo.join("gone.txt"), b"to be deleted\n");
        write(&repo.join(".gitignore"), b"target/\nnode_modules/\n*.log\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        let wt = dir.path().join("wt");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "proctor/run-0001",
                wt.to_str().unwrap(),
            ],
        );
        let base = git(&wt, &["rev-parse", "HEAD"]);
        let index_tree = git(&wt, &["write-tree"]);
        let info = WorktreeInfo {
            path: wt.to_string_lossy().into_owned(),
            branch: "proctor/run-0001".into(),
            repo: repo.to_string_lossy().into_owned(),
            base,
            index_tree,
            clean_at_start: true,
            workspace_ref: Some("ws-0001".into()),
        };
        let home = Home::resolve_with(Some(&dir.path().join("home")), None).unwrap();
        home.ensure().unwrap();
        let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
        Fixture {
            dir,
            repo,
            wt,
            info,
            home,
            ledger,
        }
    }

    pub(crate) fn bind(&self) -> Result<Candidate, CandidateError> {
        bind(
            &self.home,
            &self.ledger,
            "run-0001",
            Some(&self.info),
            &actor(),
        )
    }

    pub(crate) fn ledger_kinds(&self) -> Vec<String> {
        std::fs::read_to_string(self.home.ledger_path())
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }
}

#[test]
fn a_clean_worktree_has_a_stable_identity_and_binds() {
    let f = Fixture::new();
    let a = derive(&f.info).unwrap();
    let b = derive(&f.info).unwrap();
    assert_eq!(a, b, "the identity of unchanged bytes is stable");
    assert_eq!(a.digest.len(), 64);
    assert_eq!(a.status.bytes, 0, "a clean worktree has an empty status");
    assert_eq!(a.patch.bytes, 0);
    assert!(a.files.is_empty());
    let base_tree = git(&f.wt, &["rev-parse", "HEAD^{tree}"]);
    assert_eq!(a.worktree_tree, base_tree);
    assert_eq!(a.recompute_digest().unwrap(), a.digest);
    assert!(
        a.render()
            .starts_with("format=candidate-identity/1 digest=candidate-identity-sha256/1 ")
    );

    let c = f.bind().unwrap();
    assert_eq!(c.id, "cand-0001");
    assert_eq!(c.identity.digest, a.digest);
    assert_eq!(load(&f.home, "cand-0001").unwrap().unwrap(), c);
    assert_eq!(
        latest_for_run(&f.home, "run-0001").unwrap().unwrap().id,
        "cand-0001"
    );
    let file = candidate_path(&f.home, "cand-0001").unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(c.dir(&f.home)).unwrap().mode() & 0o777,
        0o700
    );
    assert!(f.ledger_kinds().contains(&BOUND_KIND.to_string()));
    let receipt = c.receipt.clone().unwrap();
    assert!(
        crate::receipts::receipts_dir(&f.home)
            .join(format!("{receipt}.json"))
            .is_file()
    );
    assert_eq!(currency(&c), Currency::Current);
}

#[test]
fn the_identity_binds_status_patch_files_and_the_patch_rebuilds_the_tree() {
    let f = Fixture::new();
    write(&f.wt.join("src/lib.txt"), b"one\nTWO\nthree\n");
    write(&f.wt.join("new/added.bin"), &[0u8, 159, 146, 150, 255]);
    std::fs::remove_file(f.wt.join("gone.txt")).unwrap();
    write(&f.wt.join("target/debug/out"), b"ignored build output");
    let c = f.bind().unwrap();
    let id = &c.identity;
    let changes: Vec<(&str, &str)> = id
        .files
        .iter()
        .map(|x| (x.path.as_str(), x.change.as_str()))
        .collect();
    assert_eq!(
        changes,
        [
            ("gone.txt", "deleted"),
            ("new/added.bin", "added"),
            ("src/lib.txt", "modified")
        ]
    );
    let added = &id.files[1];
    assert_eq!(added.bytes, Some(5));
    assert_eq!(
        added.sha256.as_deref(),
        Some(hex::encode(Sha256::digest([0u8, 159, 146, 150, 255])).as_str())
    );
    assert_eq!(
        id.files[0].sha256, None,
        "a deleted file is named, not hashed"
    );

    // The stored bytes are the ones bound.
    let status = std::fs::read(c.dir(&f.home).join("status.bin")).unwrap();
    assert_eq!(status.len() as u64, id.status.bytes);
    assert_eq!(hex::encode(Sha256::digest(&status)), id.status.sha256);
    assert!(
        status
            .windows(b"! target/".len())
            .any(|w| w == b"! target/"),
        "ignored paths are in the bound status"
    );
    let patch = c.dir(&f.home).join("patch.bin");
    assert_eq!(
        evidence::hash_file(&patch).unwrap().unwrap(),
        (id.patch.bytes, id.patch.sha256.clone())
    );
    assert_eq!(std::fs::metadata(&patch).unwrap().mode() & 0o777, 0o600);

    // The binary patch applied to the base reproduces exactly the bound tree.
    let check = f.dir.path().join("check");
    git(
        &f.repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            check.to_str().unwrap(),
            &id.base,
        ],
    );
    git(
        &check,
        &["apply", "--index", "--binary", patch.to_str().unwrap()],
    );
    assert_eq!(git(&check, &["write-tree"]), id.worktree_tree);
    assert_ne!(id.worktree_tree, git(&f.wt, &["rev-parse", "HEAD^{tree}"]));
}

#[test]
fn one_byte_anywhere_outside_git_changes_the_identity() {
    let f = Fixture::new();
    write(&f.wt.join("target/out.bin"), b"build");
    write(
        &f.wt.join("node_modules/pkg/index.js"),
        b"module.exports = 1;\n",
    );
    write(&f.wt.join("debug.log"), b"log");
    write(&f.wt.join("untracked.txt"), b"u");
    let mut seen = HashSet::new();
    let first = derive(&f.info).unwrap();
    seen.insert(first.digest.clone());
    type Step<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let steps: Vec<Step> = vec![
        (
            "tracked file",
            Box::new(|| write(&f.wt.join("README.md"), b"hellO\n")),
        ),
        (
            "untracked file",
            Box::new(|| write(&f.wt.join("untracked.txt"), b"v")),
        ),
        (
            "ignored file",
            Box::new(|| write(&f.wt.join("debug.log"), b"loG")),
        ),
        (
            "ignored folder",
            Box::new(|| write(&f.wt.join("target/out.bin"), b"builD")),
        ),
        (
            "node_modules",
            Box::new(|| {
                write(
                    &f.wt.join("node_modules/pkg/index.js"),
                    b"module.exports = 2;\n",
                )
            }),
        ),
        (
            "execute bit",
            Box::new(|| {
                std::fs::set_permissions(
                    f.wt.join("target/out.bin"),
                    std::fs::Permissions::from_mode(0o755),
                )
                .unwrap()
            }),
        ),
        (
            "symbolic link",
            Box::new(|| std::os::unix::fs::symlink("README.md", f.wt.join("link")).unwrap()),
        ),
        (
            "link target",
            Box::new(|| {
                std::fs::remove_file(f.wt.join("link")).unwrap();
                std::os::unix::fs::symlink("src/lib.txt", f.wt.join("link")).unwrap();
            }),
        ),
        (
            "empty folder",
            Box::new(|| std::fs::create_dir(f.wt.join("node_modules/empty")).unwrap()),
        ),
        (
            "nested .git inside node_modules",
            Box::new(|| write(&f.wt.join("node_modules/pkg/.git/HEAD"), b"ref: x\n")),
        ),
    ];
    for (what, step) in steps {
        step();
        let id = derive(&f.info).unwrap();
        assert!(
            seen.insert(id.digest.clone()),
            "a change to {what} must change the identity"
        );
    }
}

#[test]
fn the_inventory_skips_only_the_roots_git_and_records_types() {
    let t = tempfile::tempdir().unwrap();
    write(&t.path().join(".git"), b"gitdir: elsewhere\n");
    write(&t.path().join("a/b"), b"x");
    std::os::unix::fs::symlink("a/b", t.path().join("l")).unwrap();
    let (inv, entries) = inventory(t.path()).unwrap();
    let doc = inventory_document(&entries);
    let empty = hex::encode(Sha256::digest(b""));
    let want = format!(
        "a|d|0|{empty}\na/b|f|1|{}\nl|l|3|{}",
        hex::encode(Sha256::digest(b"x")),
        hex::encode(Sha256::digest(b"a/b"))
    );
    assert_eq!(doc, want);
    assert_eq!(inv.digest, hex::encode(Sha256::digest(want.as_bytes())));
    assert_eq!((inv.count, inv.bytes), (3, 4));
    // A FIFO is refused by name, never skipped.
    let fifo = std::ffi::CString::new(t.path().join("p").to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let e = inventory(t.path()).unwrap_err();
    assert!(e.to_string().contains("p: named pipe"), "{e}");
}

#[test]
fn a_worker_that_committed_gets_a_typed_refusal_and_nothing_is_written() {
    let f = Fixture::new();
    write(&f.wt.join("README.md"), b"changed\n");
    git(&f.wt, &["commit", "-q", "-am", "worker commit"]);
    let e = f.bind().unwrap_err();
    assert!(matches!(e, CandidateError::WorkerCommitted { .. }), "{e}");
    assert_eq!(e.code(), "worker_committed");
    assert!(list(&f.home).unwrap().is_empty());
    assert!(!candidates_dir(&f.home).join("cand-0001").exists());
    assert!(
        crate::receipts::list(&f.home).unwrap().is_empty(),
        "never a receipt"
    );
    assert!(!f.ledger_kinds().contains(&BOUND_KIND.to_string()));
}

#[test]
fn a_worker_that_touched_the_index_gets_a_typed_refusal() {
    let f = Fixture::new();
    write(&f.wt.join("README.md"), b"staged\n");
    git(&f.wt, &["add", "README.md"]);
    let e = f.bind().unwrap_err();
    assert!(matches!(e, CandidateError::IndexChanged { .. }), "{e}");
    assert_eq!(e.code(), "index_changed");
    assert!(crate::receipts::list(&f.home).unwrap().is_empty());
}

#[test]
fn binding_never_touches_the_real_index() {
    let f = Fixture::new();
    write(&f.wt.join("README.md"), b"edited\n");
    write(&f.wt.join("fresh.txt"), b"new\n");
    let index = PathBuf::from(git(
        &f.wt,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    ));
    let before = (
        std::fs::read(&index).unwrap(),
        std::fs::metadata(&index).unwrap().mtime_nsec(),
    );
    f.bind().unwrap();
    let after = (
        std::fs::read(&index).unwrap(),
        std::fs::metadata(&index).unwrap().mtime_nsec(),
    );
    assert_eq!(before, after);
    assert_eq!(git(&f.wt, &["write-tree"]), f.info.index_tree);
}

#[test]
fn main_and_submodule_working_copies_runs_without_worktree_and_dirty_inputs_are_refused() {
    let f = Fixture::new();
    let mut main = f.info.clone();
    main.path = f.repo.to_string_lossy().into_owned();
    let e = derive(&main).unwrap_err();
    assert!(matches!(e, CandidateError::MainWorkingCopy { .. }), "{e}");

    // A submodule's own checkout: its git folder is its common folder.
    let sub_src = f.dir.path().join("sub-src");
    std::fs::create_dir(&sub_src).unwrap();
    git(&sub_src, &["init", "-q", "-b", "main"]);
    write(&sub_src.join("s.txt"), b"s\n");
    git(&sub_src, &["add", "-A"]);
    git(&sub_src, &["commit", "-q", "-m", "s"]);
    git(
        &f.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub_src.to_str().unwrap(),
            "sub",
        ],
    );
    let sub = f.repo.join("sub");
    let mut info = f.info.clone();
    info.path = sub.to_string_lossy().into_owned();
    info.base = git(&sub, &["rev-parse", "HEAD"]);
    info.index_tree = git(&sub, &["write-tree"]);
    let e = derive(&info).unwrap_err();
    assert!(matches!(e, CandidateError::SubmoduleMainCopy { .. }), "{e}");
    assert_eq!(e.code(), "submodule_working_copy");

    let e = bind(&f.home, &f.ledger, "run-0002", None, &actor()).unwrap_err();
    assert_eq!(e.code(), "no_worktree");
    let mut dirty = f.info.clone();
    dirty.clean_at_start = false;
    let e = bind(&f.home, &f.ledger, "run-0001", Some(&dirty), &actor()).unwrap_err();
    assert_eq!(e.code(), "dirty_input");
    assert!(list(&f.home).unwrap().is_empty());
}

#[test]
fn a_worktree_of_another_repository_is_refused() {
    let f = Fixture::new();
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    let mut info = f.info.clone();
    info.repo = other.to_string_lossy().into_owned();
    let e = derive(&info).unwrap_err();
    assert_eq!(e.code(), "foreign_repository", "{e}");
}

#[test]
fn an_altered_candidate_file_no_longer_matches_its_digest() {
    let f = Fixture::new();
    let c = f.bind().unwrap();
    let mut altered = c.identity.clone();
    altered.patch.bytes += 1;
    assert_ne!(altered.recompute_digest().unwrap(), c.identity.digest);
    assert!(matches!(
        load(&f.home, "../x"),
        Err(CandidateError::BadId(_))
    ));
}

use std::collections::HashSet;
