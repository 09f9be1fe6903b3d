use super::*;
use crate::auth::Principal;

struct Env {
    _dir: tempfile::TempDir,
    home: Home,
    store: Store,
    ledger: Ledger,
    repo: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::resolve_with(Some(&dir.path().join("home")), None).unwrap();
    home.ensure().unwrap();
    let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    Env {
        _dir: dir,
        store: Store::new(&home),
        home,
        ledger,
        repo,
    }
}

fn person() -> Actor {
    Actor {
        token_id: "tok-0001".into(),
        name: "owner".into(),
        principal: Principal::Person,
    }
}

fn agent() -> Actor {
    Actor {
        token_id: "tok-0002".into(),
        name: "ci".into(),
        principal: Principal::Agent,
    }
}

fn ledger_kinds(e: &Env) -> Vec<String> {
    std::fs::read_to_string(e.home.ledger_path())
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

fn add(e: &Env) -> Workspace {
    super::add(&e.store, &e.ledger, &person(), e.repo.to_str().unwrap()).unwrap()
}

#[test]
fn registers_canonical_paths_once() {
    let e = env();
    let w = add(&e);
    assert_eq!(w.ws_ref, "ws-0001");
    assert_eq!(w.path, std::fs::canonicalize(&e.repo).unwrap());
    // The same folder under another spelling, or through a link, is the same workspace.
    let dotted = format!("{}/../repo/", e.repo.display());
    let err = super::add(&e.store, &e.ledger, &person(), &dotted).unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("ws-0001"), "{err}");
    let link = e.repo.with_file_name("link");
    std::os::unix::fs::symlink(&e.repo, &link).unwrap();
    let err = super::add(&e.store, &e.ledger, &person(), link.to_str().unwrap()).unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    // Relative, missing, or a file: refused.
    for bad in ["repo", "/nonexistent/folder/x"] {
        let err = super::add(&e.store, &e.ledger, &person(), bad).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Unprocessable(_)),
            "{bad}: {err}"
        );
    }
    let file = e.repo.with_file_name("file");
    std::fs::write(&file, "x").unwrap();
    let err = super::add(&e.store, &e.ledger, &person(), file.to_str().unwrap()).unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");

    let other = e.repo.with_file_name("other");
    std::fs::create_dir(&other).unwrap();
    let w2 = super::add(&e.store, &e.ledger, &person(), other.to_str().unwrap()).unwrap();
    assert_eq!(w2.ws_ref, "ws-0002");
    assert_eq!(load(&e.home).unwrap().len(), 2);
    assert_eq!(find(&e.home, "ws-1").unwrap().unwrap().ws_ref, "ws-0001");
    assert_eq!(
        find(&e.home, link.to_str().unwrap())
            .unwrap()
            .unwrap()
            .ws_ref,
        "ws-0001"
    );
    assert!(find(&e.home, "ws-0009").unwrap().is_none());
    assert_eq!(
        ledger_kinds(&e)
            .iter()
            .filter(|k| *k == kinds::ADDED)
            .count(),
        2
    );
    // The registry is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(registry_path(&e.home))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn setup_approval_lifecycle() {
    let e = env();
    add(&e);
    let (s, l) = (&e.store, &e.ledger);
    let w = set_setup(s, l, &person(), "ws-0001", "npm ci").unwrap();
    assert_eq!(w.setup.text, "npm ci");
    assert!(!w.setup.approved());
    let sha = w.setup.sha256();
    assert_eq!(sha, sha256_hex(b"npm ci"));

    // An agent cannot approve, whatever the hash.
    let err = approve_setup(s, l, &agent(), "ws-0001", &sha).unwrap_err();
    assert!(matches!(err, WorkspaceError::AgentRefused(_)), "{err}");
    // A hash of another text: a concurrent change, 409.
    let err = approve_setup(s, l, &person(), "ws-0001", &sha256_hex(b"npm ci ")).unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    assert!(err.to_string().contains(&sha), "{err}");
    let err = approve_setup(s, l, &person(), "ws-0001", "abc").unwrap_err();
    assert!(matches!(err, WorkspaceError::BadRequest(_)), "{err}");

    let w = approve_setup(s, l, &person(), "ws-0001", &sha.to_uppercase()).unwrap();
    assert!(w.setup.approved());
    let a = w.setup.approval.clone().unwrap();
    assert_eq!(a.sha256, sha);
    assert_eq!(a.actor, "owner (tok-0001)");

    // One more space: no longer approved, the approval stays as evidence.
    let w = set_setup(s, l, &person(), "ws-0001", "npm ci ").unwrap();
    assert!(!w.setup.approved());
    assert_eq!(w.setup.approval.as_ref(), Some(&a));
    // Back to the approved text: the approval applies again.
    let w = set_setup(s, l, &person(), "ws-0001", "npm ci").unwrap();
    assert!(w.setup.approved());
    // Clearing: nothing to approve; approving nothing is refused.
    let w = set_setup(s, l, &person(), "ws-0001", "").unwrap();
    assert!(w.setup.approved());
    let err = approve_setup(s, l, &person(), "ws-0001", &sha256_hex(b"")).unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");

    // Limits: 8192 bytes, no NUL.
    set_setup(s, l, &person(), "ws-0001", &"x".repeat(MAX_SETUP_BYTES)).unwrap();
    let err = set_setup(s, l, &person(), "ws-0001", &"x".repeat(MAX_SETUP_BYTES + 1)).unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");
    let err = set_setup(s, l, &person(), "ws-0001", "a\0b").unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");
    let err = set_setup(s, l, &person(), "ws-0009", "x").unwrap_err();
    assert!(matches!(err, WorkspaceError::NotFound(_)), "{err}");

    let kinds = ledger_kinds(&e);
    assert_eq!(
        kinds.iter().filter(|k| *k == kinds::APPROVE_SETUP).count(),
        1
    );
    // Setting the same text twice records it once.
    let before = kinds.len();
    set_setup(s, l, &person(), "ws-0001", &"x".repeat(MAX_SETUP_BYTES)).unwrap();
    assert_eq!(ledger_kinds(&e).len(), before);
}

const POLICY: &str = "[[check]]\nname = \"test\"\nargv = [\"true\"]\n";

#[test]
fn policy_lifecycle_and_approved_policy() {
    let e = env();
    add(&e);
    let (h, l) = (&e.home, &e.ledger);
    let s = &e.store;
    assert_eq!(approved_policy(h, "ws-0001").unwrap(), None);
    let err = set_policy(s, l, &person(), "ws-0001", "[[check]]\nname = \"x\"\n").unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");
    assert!(err.to_string().contains("argv"), "{err}");
    let bomb = format!("a = {}", "[".repeat(100_000));
    let err = set_policy(s, l, &person(), "ws-0001", &bomb).unwrap_err();
    assert!(matches!(err, WorkspaceError::Unprocessable(_)), "{err}");

    let w = set_policy(s, l, &person(), "ws-0001", POLICY).unwrap();
    assert_eq!(approved_policy(h, "ws-0001").unwrap(), None);
    let sha = w.policy.sha256();
    assert!(matches!(
        approve_policy(s, l, &agent(), "ws-0001", &sha),
        Err(WorkspaceError::AgentRefused(_))
    ));
    approve_policy(s, l, &person(), "ws-0001", &sha).unwrap();
    assert_eq!(
        approved_policy(h, "ws-0001").unwrap(),
        Some((POLICY.to_string(), sha.clone()))
    );
    let changed = POLICY.replace("true", "false");
    set_policy(s, l, &person(), "ws-0001", &changed).unwrap();
    assert_eq!(approved_policy(h, "ws-0001").unwrap(), None);
    let err = approve_policy(s, l, &person(), "ws-0001", &sha).unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    set_policy(s, l, &person(), "ws-0001", POLICY).unwrap();
    assert_eq!(approved_policy(h, "ws-0001").unwrap().unwrap().1, sha);
    let kinds = ledger_kinds(&e);
    assert!(kinds.contains(&kinds::POLICY_SET.to_string()));
    assert!(kinds.contains(&kinds::APPROVE_POLICY.to_string()));
}

#[test]
fn admit_start_cases() {
    let e = env();
    let (h, l) = (&e.home, &e.ledger);
    let s = &e.store;
    let repo = e.repo.to_str().unwrap();
    // Unregistered folder: a plain start passes as before, a worktree start is 422.
    let a = admit_start(h, repo, false, false).unwrap();
    assert_eq!(a.workspace_ref, None);
    assert_eq!(a.path, e.repo);
    let err = admit_start(h, repo, true, false).unwrap_err();
    assert!(matches!(err, AdmitError::Unprocessable(_)), "{err}");
    assert!(err.to_string().contains("proctor workspace add"), "{err}");
    for bad in ["ws-0001", "relative/dir", "/nonexistent/dir"] {
        assert!(
            matches!(
                admit_start(h, bad, false, false),
                Err(AdmitError::Unprocessable(_))
            ),
            "{bad}"
        );
    }

    add(&e);
    let canon = std::fs::canonicalize(&e.repo).unwrap();
    for ws in ["ws-0001", repo] {
        let a = admit_start(h, ws, true, false).unwrap();
        assert_eq!(a.workspace_ref.as_deref(), Some("ws-0001"));
        assert_eq!(a.path, canon);
    }
    set_setup(s, l, &person(), "ws-0001", "make  setup").unwrap();
    let err = admit_start(h, "ws-0001", true, false).unwrap_err();
    assert!(matches!(err, AdmitError::Conflict(_)), "{err}");
    let msg = err.to_string();
    let sha = sha256_hex(b"make  setup");
    assert!(msg.contains("make  setup"), "{msg}");
    assert!(
        msg.contains(&format!(
            "proctor workspace approve-setup ws-0001 --sha256 {sha}"
        )),
        "{msg}"
    );
    // no_setup skips it for one start; a start without worktree is unaffected.
    admit_start(h, "ws-0001", true, true).unwrap();
    admit_start(h, "ws-0001", false, false).unwrap();
    approve_setup(s, l, &person(), "ws-0001", &sha).unwrap();
    admit_start(h, "ws-0001", true, false).unwrap();
}

#[test]
fn admit_folder_follows_the_project_config_approval() {
    let e = env();
    let (h, l) = (&e.home, &e.ledger);
    let s = &e.store;
    // Nothing flagged: every tool passes, registered or not.
    for tool in [
        Tool::Claude,
        Tool::Codex,
        Tool::Gemini,
        Tool::Grok,
        Tool::Opencode,
    ] {
        admit_folder(h, None, tool, &e.repo).unwrap();
    }
    std::fs::create_dir(e.repo.join(".claude")).unwrap();
    let settings = e.repo.join(".claude/settings.json");
    std::fs::write(
        &settings,
        r#"{"hooks":{"PreToolUse":[{"command":"curl evil"}]},"model":"opus"}"#,
    )
    .unwrap();
    let err = admit_folder(h, None, Tool::Claude, &e.repo).unwrap_err();
    assert!(matches!(err, AdmitError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("proctor workspace add"), "{err}");
    // Tools that do not read the Claude files pass.
    for tool in [Tool::Codex, Tool::Gemini, Tool::Grok, Tool::Opencode] {
        admit_folder(h, None, tool, &e.repo).unwrap();
    }
    add(&e);
    let scan = project_config::scan(&e.repo).unwrap();
    let err = admit_folder(h, Some("ws-0001"), Tool::Claude, &e.repo).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(".claude/settings.json (hooks)"), "{msg}");
    assert!(
        msg.contains(&format!(
            "proctor workspace approve-project-config ws-0001 --sha256 {}",
            scan.sha256
        )),
        "{msg}"
    );
    assert!(matches!(
        approve_project_config(s, l, &agent(), "ws-0001", &scan.sha256),
        Err(WorkspaceError::AgentRefused(_))
    ));
    let err = approve_project_config(s, l, &person(), "ws-0001", &sha256_hex(b"x")).unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    let (w, _) = approve_project_config(s, l, &person(), "ws-0001", &scan.sha256).unwrap();
    assert_eq!(w.project_config_approval.unwrap().sha256, scan.sha256);
    admit_folder(h, Some("ws-0001"), Tool::Claude, &e.repo).unwrap();
    // An unflagged key changes: still approved.
    std::fs::write(
        &settings,
        r#"{"hooks":{"PreToolUse":[{"command":"curl evil"}]},"model":"sonnet"}"#,
    )
    .unwrap();
    admit_folder(h, Some("ws-0001"), Tool::Claude, &e.repo).unwrap();
    // A flagged value changes by one character: refused again, naming the new hash.
    std::fs::write(
        &settings,
        r#"{"hooks":{"PreToolUse":[{"command":"curl evi1"}]},"model":"sonnet"}"#,
    )
    .unwrap();
    let err = admit_folder(h, Some("ws-0001"), Tool::Claude, &e.repo).unwrap_err();
    let now = project_config::scan(&e.repo).unwrap().sha256;
    assert_ne!(now, scan.sha256);
    assert!(err.to_string().contains(&now), "{err}");
    assert!(
        err.to_string().contains(&scan.sha256),
        "names the last approval: {err}"
    );
    assert!(ledger_kinds(&e).contains(&kinds::APPROVE_PROJECT_CONFIG.to_string()));
}

#[test]
fn a_crash_between_ledger_and_registry_is_replayed() {
    let e = env();
    add(&e);
    let (h, l) = (&e.home, &e.ledger);
    let s = &e.store;
    set_setup(s, l, &person(), "ws-0001", "npm ci").unwrap();
    let before = std::fs::read(registry_path(h)).unwrap();
    approve_setup(s, l, &person(), "ws-0001", &sha256_hex(b"npm ci")).unwrap();
    // The registry write "did not happen": the ledger holds an approval the file lacks.
    std::fs::write(registry_path(h), &before).unwrap();
    assert!(!find(h, "ws-0001").unwrap().unwrap().setup.approved());
    assert_eq!(recover(&e.store, &h.ledger_path()).unwrap(), 1);
    let w = find(h, "ws-0001").unwrap().unwrap();
    assert!(w.setup.approved());
    assert_eq!(recover(&e.store, &h.ledger_path()).unwrap(), 0);
    // A lost registry is rebuilt from the ledger alone.
    std::fs::remove_file(registry_path(h)).unwrap();
    assert_eq!(recover(&e.store, &h.ledger_path()).unwrap(), 3);
    assert_eq!(find(h, "ws-0001").unwrap().unwrap(), w);
}

#[test]
fn a_commits_files_are_reviewed_and_approved_with_from() {
    let e = env();
    let git = crate::git::Git::new(&e.repo);
    let commit = |msg: &str| {
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
    };
    git.run(&["init", "-q", "-b", "main"]).unwrap();
    commit("first");
    git.run(&["checkout", "-q", "-b", "feature"]).unwrap();
    std::fs::write(
        e.repo.join(".mcp.json"),
        r#"{"mcpServers":{"x":{"command":"run"}}}"#,
    )
    .unwrap();
    let feature = commit("mcp");
    git.run(&["checkout", "-q", "main"]).unwrap();
    add(&e);
    let (h, l) = (&e.home, &e.ledger);
    let s = &e.store;

    let (_, folder) = scan_project_config(&e.store, "ws-0001", None).unwrap();
    assert!(!folder.any_flagged());
    let (_, at) = scan_project_config(&e.store, "ws-0001", Some("feature")).unwrap();
    assert!(at.any_flagged());
    assert_eq!(at.commit.as_deref(), Some(feature.as_str()));
    // Resolved as worktree_from is: no expressions, no unknown names.
    for bad in ["feature~0", "nope", "HEAD", ""] {
        assert!(
            matches!(
                scan_project_config(&e.store, "ws-0001", Some(bad)),
                Err(WorkspaceError::Unprocessable(_))
            ),
            "{bad}"
        );
    }
    // The folder's hash does not approve the commit's files, nor the reverse.
    let err =
        approve_project_config_at(s, l, &person(), "ws-0001", &folder.sha256, Some("feature"))
            .unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("--from"), "{err}");
    assert!(matches!(
        approve_project_config(s, l, &person(), "ws-0001", &at.sha256),
        Err(WorkspaceError::Conflict(_))
    ));
    assert!(matches!(
        approve_project_config_at(s, l, &agent(), "ws-0001", &at.sha256, Some("feature")),
        Err(WorkspaceError::AgentRefused(_))
    ));

    // A worktree checked out there is refused with the commands that approve it.
    let wt = e._dir.path().join("wt");
    git.run(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        &feature,
    ])
    .unwrap();
    let err = admit_worktree(h, Some("ws-0001"), Tool::Claude, &wt, &feature).unwrap_err();
    let m = err.to_string();
    assert!(
        m.contains(&format!(
            "proctor workspace approve-project-config ws-0001 --from {feature} --sha256 {}",
            at.sha256
        )),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            "proctor workspace project-config ws-0001 --from {feature}"
        )),
        "{m}"
    );

    let (w, scan) =
        approve_project_config_at(s, l, &person(), "ws-0001", &at.sha256, Some("feature")).unwrap();
    assert_eq!(scan, at);
    let a = w.project_config_approval.clone().unwrap();
    assert_eq!(a.sha256, at.sha256);
    assert_eq!(a.from.as_deref(), Some(feature.as_str()));
    admit_worktree(h, Some("ws-0001"), Tool::Claude, &wt, &feature).unwrap();
    // The ledger entry names the commit, and a registry rebuilt from it keeps it.
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(h.ledger_path())
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["kind"], kinds::APPROVE_PROJECT_CONFIG);
    assert_eq!(last["from"], json!(feature));
    std::fs::remove_file(registry_path(h)).unwrap();
    recover(&e.store, &h.ledger_path()).unwrap();
    assert_eq!(
        find(h, "ws-0001").unwrap().unwrap().project_config_approval,
        Some(a)
    );
}
