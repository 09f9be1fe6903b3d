//! Worktree runs against a real server (the provider fakes on PATH) and real git
//! repositories: every refusal of a worktree start (422/409/503) with nothing created, a run
//! that starts at a branch and resumes in the same worktree, the diff routes, cleanup with
//! and without `discard_worktree`, the CLI verbs, and the review and approval (`--from`) of
//! the agent configuration a branch carries.

mod common;

use std::path::{Path, PathBuf};

use common::{DemoServer, call_as};
use proctor::git::Git;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";
const WS: &str = "/v1/m/sessions/workspaces";

/// A git repository in a temporary folder, with one commit on `main`.
struct Repo {
    dir: tempfile::TempDir,
    git: Git,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("wtrepo")
            .tempdir_in("/tmp")
            .unwrap();
        let git = Git::new(dir.path());
        git.run(&["init", "-q", "-b", "main"]).unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.txt"), "bee\n").unwrap();
        commit_all(&git, "first");
        Repo { dir, git }
    }

    fn path(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn head(&self) -> String {
        self.git.text(&["rev-parse", "HEAD"]).unwrap()
    }

    /// The `proctor/…` branches of the repository.
    fn proctor_branches(&self) -> String {
        self.git
            .text(&["for-each-ref", "--format=%(refname)", "refs/heads/proctor"])
            .unwrap()
    }
}

fn commit_all(git: &Git, msg: &str) -> String {
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
}

/// Registers `path` as a workspace; returns its ref.
fn register(s: &DemoServer, path: &Path) -> String {
    let (code, v) = s.call("POST", WS, Some(json!({"path": path.to_str().unwrap()})));
    assert!(
        code == 200 || code == 201,
        "register {}: {code} {v}",
        path.display()
    );
    v["ref"].as_str().unwrap().to_string()
}

/// Sets the workspace's setup command and, when `approve`, approves its hash.
fn setup(s: &DemoServer, ws: &str, command: &str, approve: bool) {
    let v = s.expect(
        200,
        "PUT",
        &format!("{WS}/{ws}/setup-command"),
        Some(json!({"command": command})),
    );
    if approve {
        let h = v["setup_command_sha256"].as_str().unwrap().to_string();
        s.expect(
            200,
            "POST",
            &format!("{WS}/{ws}/setup-command/approve"),
            Some(json!({"sha256": h})),
        );
    }
}

/// A registered workspace for `repo` whose (empty) setup needs no approval.
fn workspace(s: &DemoServer, repo: &Repo) -> String {
    register(s, &repo.path())
}

fn start(s: &DemoServer, body: Value) -> (u16, Value) {
    s.call("POST", RUNS, Some(body))
}

fn message(v: &Value) -> String {
    v["error"]["message"].as_str().unwrap_or("").to_string()
}

fn worktrees_dir(s: &DemoServer) -> PathBuf {
    s.home.path().join("data/worktrees")
}

/// Entries of the home's worktrees folder (none when it does not exist).
fn worktree_folders(s: &DemoServer) -> Vec<String> {
    match std::fs::read_dir(worktrees_dir(s)) {
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn run_count(s: &DemoServer) -> u64 {
    s.expect(200, "GET", RUNS, None)["total"].as_u64().unwrap()
}

/// The ledger lines of one kind.
fn ledger_events(s: &DemoServer, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == kind)
        .collect()
}

/// Asserts that a start is refused with `status`, mentioning `says`, and that nothing was
/// created: no worktree folder, no branch, no run.
fn refused(s: &DemoServer, repo: &Repo, body: Value, status: u16, says: &str) {
    let runs = run_count(s);
    let (code, v) = start(s, body.clone());
    assert_eq!(code, status, "{body}: {v}");
    let m = message(&v);
    assert!(m.contains(says), "{body}: {m}");
    assert_eq!(worktree_folders(s), Vec::<String>::new(), "{body}");
    assert_eq!(repo.proctor_branches(), "", "{body}");
    assert_eq!(run_count(s), runs, "{body}: no run is recorded");
}

fn stop(s: &DemoServer, run: &str) {
    s.expect(200, "POST", &s.run_path(run, "/stop"), None);
}

/// The folder a live process works in.
fn cwd_of(pid: u64) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap()
}

#[test]
fn every_refused_worktree_start_creates_nothing() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    let first = repo.head();
    std::fs::write(repo.dir.path().join("a.txt"), "two\n").unwrap();
    commit_all(&repo.git, "second");
    repo.git.run(&["branch", "feature", &first]).unwrap();
    let ws = workspace(&s, &repo);
    let wt = |extra: Value| {
        let mut b =
            json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };

    // worktree_from: only a full retained commit id or an existing local branch.
    for (from, says) in [
        ("HEAD~1", "revision expression"),
        ("main^", "revision expression"),
        ("@{-1}", "revision expression"),
        (":/second", "revision expression"),
        ("feature..main", "range"),
        ("-x", "option"),
        ("--foo", "option"),
        ("nope", "no local branch"),
        (&first[..10], "abbreviated"),
        (
            "0123456789abcdef0123456789abcdef01234567",
            "contains no such commit",
        ),
    ] {
        refused(&s, &repo, wt(json!({"worktree_from": from})), 422, says);
    }
    // A commit that exists but that no branch, tag or remote branch retains.
    let tree = repo.git.text(&["rev-parse", "HEAD^{tree}"]).unwrap();
    let loose = repo
        .git
        .run_with_input(
            &[
                "-c".as_ref(),
                "user.name=t".as_ref(),
                "-c".as_ref(),
                "user.email=t@example.invalid".as_ref(),
                "commit-tree".as_ref(),
                tree.as_ref(),
            ],
            Some(b"dangling\n"),
        )
        .unwrap();
    let loose = String::from_utf8(loose).unwrap().trim().to_string();
    refused(
        &s,
        &repo,
        wt(json!({"worktree_from": loose})),
        422,
        "no branch, tag or remote branch",
    );
    // worktree_from without worktree.
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree_from": "feature"}),
        422,
        "worktree_from",
    );
    // An unregistered folder cannot hold worktree runs.
    let other = Repo::new();
    refused(
        &s,
        &other,
        json!({"transport": "pipe", "tool": "gemini", "workspace": other.path().to_str().unwrap(), "worktree": true}),
        422,
        "proctor workspace add",
    );

    // Git config that names a filter or an include, in the repository's own config.
    for (key, value) in [
        ("filter.lfs.smudge", "git-lfs smudge -- %f"),
        ("include.path", "/tmp/elsewhere.cfg"),
        ("includeIf.gitdir:/x/.path", "/tmp/other.cfg"),
    ] {
        repo.git.run(&["config", key, value]).unwrap();
        refused(
            &s,
            &repo,
            wt(json!({})),
            422,
            "names a filter or an include",
        );
        repo.git.run(&["config", "--unset", key]).unwrap();
    }
    // Read-only folders (mode bits: the tests run as root, for whom access() always passes).
    for rel in ["", ".git/objects", ".git/refs", "sub"] {
        let p = repo.dir.path().join(rel);
        let set = |mode| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(0o555);
        refused(&s, &repo, wt(json!({})), 422, "read-only");
        set(0o755);
    }

    // Repositories unfit for worktrees, each registered as a workspace.
    let plain = tempfile::tempdir_in("/tmp").unwrap();
    let ws_plain = register(&s, plain.path());
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws_plain, "worktree": true}),
        422,
        "not a git work tree",
    );
    let ws_sub = register(&s, &repo.path().join("sub"));
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws_sub, "worktree": true}),
        422,
        "subfolder",
    );
    let linked_parent = tempfile::tempdir_in("/tmp").unwrap();
    let linked = linked_parent.path().join("linked");
    repo.git
        .run(&[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ])
        .unwrap();
    let ws_linked = register(&s, &linked);
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws_linked, "worktree": true}),
        422,
        "linked worktree",
    );
    let bare = tempfile::tempdir_in("/tmp").unwrap();
    Git::new(bare.path())
        .run(&["init", "-q", "--bare"])
        .unwrap();
    let ws_bare = register(&s, bare.path());
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws_bare, "worktree": true}),
        422,
        "bare repository",
    );
    let empty = tempfile::tempdir_in("/tmp").unwrap();
    Git::new(empty.path()).run(&["init", "-q"]).unwrap();
    let ws_empty = register(&s, empty.path());
    refused(
        &s,
        &repo,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws_empty, "worktree": true}),
        422,
        "no commit",
    );

    // An unapproved setup command: 409 naming the command and the approval step, before
    // anything is created.
    setup(&s, &ws, "npm ci", false);
    refused(&s, &repo, wt(json!({})), 409, "npm ci");
    refused(&s, &repo, wt(json!({})), 409, "approve-setup");

    // 503 when the home cannot hold worktrees (its worktrees folder cannot be made).
    std::fs::write(worktrees_dir(&s), "not a folder").unwrap();
    let runs = run_count(&s);
    let (code, v) = start(&s, wt(json!({"no_setup": true})));
    assert_eq!(code, 503, "{v}");
    assert!(message(&v).contains("worktrees folder"), "{v}");
    assert_eq!(repo.proctor_branches(), "");
    assert_eq!(run_count(&s), runs);
    std::fs::remove_file(worktrees_dir(&s)).unwrap();

    // Nothing moved in the workspace through all of this, and the refused starts left no
    // gap in the run refs.
    assert_eq!(repo.git.text(&["rev-parse", "feature"]).unwrap(), first);
    assert_eq!(
        repo.git.text(&["symbolic-ref", "HEAD"]).unwrap(),
        "refs/heads/main"
    );
    let (code, v) = start(&s, wt(json!({"no_setup": true})));
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["ref"], "run-0001");
    stop(&s, "run-0001");
}

#[test]
fn a_worktree_run_starts_where_asked_resumes_there_and_moves_nothing() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    let first = repo.head();
    std::fs::write(repo.dir.path().join("a.txt"), "two\n").unwrap();
    let second = commit_all(&repo.git, "second");
    repo.git.run(&["branch", "feature", &first]).unwrap();
    let ws = workspace(&s, &repo);
    setup(&s, &ws, "npm ci", true);

    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true, "worktree_from": "feature",
               "prompt": "remember me"}),
    );
    assert_eq!(code, 201, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    let path = worktrees_dir(&s).join(&run);
    let path_s = path.to_str().unwrap();
    assert_eq!(v["workspace"], path_s);
    assert_eq!(v["worktree_branch"], format!("proctor/{run}"));
    assert_eq!(
        v["worktree"],
        json!({"path": path_s, "branch": format!("proctor/{run}"), "base": first,
               "repo": repo.path().to_str().unwrap()})
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    assert_eq!(
        std::fs::read_to_string(path.join("a.txt")).unwrap(),
        "one\n"
    );
    // The named branch and the workspace's checkout did not move.
    assert_eq!(repo.git.text(&["rev-parse", "feature"]).unwrap(), first);
    assert_eq!(repo.head(), second);
    assert_eq!(
        repo.git.text(&["symbolic-ref", "HEAD"]).unwrap(),
        "refs/heads/main"
    );
    let created = ledger_events(&s, "sessions.run.created");
    let c = created.iter().find(|e| e["run"] == run.as_str()).unwrap();
    assert_eq!(c["worktree_branch"], format!("proctor/{run}"));
    assert_eq!(c["worktree_base"], first);
    assert_eq!(c["workspace_ref"], ws);

    // The tool works in the worktree; resume returns there, on the same conversation.
    let v = s.wait_run(&run, "idle", |v| v["state"] == "idle");
    assert_eq!(cwd_of(v["pid"].as_u64().unwrap()), path);
    let conversation = v["conversation_id"].clone();
    stop(&s, &run);
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    let v = s.wait_run(&run, "resumed", |v| {
        v["state"] == "idle" || v["state"] == "running"
    });
    assert_eq!(v["generation"], 2);
    assert_eq!(v["conversation_id"], conversation);
    assert_eq!(cwd_of(v["pid"].as_u64().unwrap()), path);
    assert_eq!(v["workspace"], path_s);
    stop(&s, &run);

    // A full commit id retained by a branch; the run starts there.
    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true, "worktree_from": first}),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["worktree"]["base"], first);
    let by_id = v["ref"].as_str().unwrap().to_string();
    stop(&s, &by_id);
    // Without worktree_from: the workspace's current commit.
    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true}),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["worktree"]["base"], second);
    let at_head = v["ref"].as_str().unwrap().to_string();
    stop(&s, &at_head);

    // no_setup skips an unapproved setup command once; the next start is refused again.
    setup(&s, &ws, "npm ci ", false);
    let body = json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true});
    let (code, v) = start(&s, body.clone());
    assert_eq!(code, 409, "{v}");
    let mut once = body.clone();
    once["no_setup"] = json!(true);
    let (code, v) = start(&s, once);
    assert_eq!(code, 201, "{v}");
    stop(&s, v["ref"].as_str().unwrap());
    let (code, v) = start(&s, body);
    assert_eq!(code, 409, "{v}");

    // A run whose worktree is gone cannot resume (it never runs anywhere else).
    std::fs::remove_dir_all(worktrees_dir(&s).join(&at_head)).unwrap();
    let (code, v) = s.call("POST", &s.run_path(&at_head, "/resume"), None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("is gone"), "{v}");
}

#[test]
fn a_flagged_project_config_in_the_new_worktree_removes_it() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    // The workspace itself is clean; branch `mcp` carries a Claude Code MCP server.
    repo.git.run(&["checkout", "-q", "-b", "mcp"]).unwrap();
    std::fs::write(
        repo.dir.path().join(".mcp.json"),
        r#"{"mcpServers": {"x": {"command": "/bin/run-me"}}}"#,
    )
    .unwrap();
    commit_all(&repo.git, "mcp");
    repo.git.run(&["checkout", "-q", "main"]).unwrap();
    let ws = workspace(&s, &repo);
    let body = json!({"transport": "pipe", "tool": "claude", "workspace": ws, "worktree": true, "worktree_from": "mcp"});
    let (code, v) = start(&s, body);
    assert_eq!(code, 409, "{v}");
    let m = message(&v);
    assert!(m.contains(".mcp.json") && m.contains("removed"), "{m}");
    assert_eq!(worktree_folders(&s), Vec::<String>::new());
    assert_eq!(repo.proctor_branches(), "");
    assert_eq!(run_count(&s), 0);
    // The registration of the removed worktree is gone too.
    let list = repo.git.text(&["worktree", "list", "--porcelain"]).unwrap();
    assert!(!list.contains("worktrees/run-"), "{list}");
    // A tool that reads none of those files starts there; the refused start left no gap.
    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "codex", "workspace": ws, "worktree": true, "worktree_from": "mcp"}),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["ref"], "run-0001");
    stop(&s, "run-0001");
}

/// Seed 002: "un worktree démarré depuis un autre commit peut porter d'autres fichiers
/// suivis, et son refus nomme son propre hash" — and that hash can be reviewed and approved
/// with `--from`, from the commit, without checking anything out.
#[test]
fn a_worktree_from_another_commit_is_reviewed_and_approved_with_from() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    let mcp = |command: &str| {
        repo.git.run(&["checkout", "-q", "feature"]).unwrap();
        std::fs::write(
            repo.dir.path().join(".mcp.json"),
            format!(r#"{{"mcpServers": {{"x": {{"command": "{command}"}}}}}}"#),
        )
        .unwrap();
        let c = commit_all(&repo.git, "mcp");
        repo.git.run(&["checkout", "-q", "main"]).unwrap();
        c
    };
    repo.git.run(&["branch", "feature"]).unwrap();
    let feature = mcp("/bin/run-me");
    let ws = workspace(&s, &repo);
    let h = &s.home;
    let start = [
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "claude",
        "--workspace",
        &ws,
        "--worktree",
        "--from",
        "feature",
    ];

    // The workspace folder carries nothing; the branch does: the start is refused, the new
    // worktree removed, and the refusal names that tree's hash and the commands.
    let folder = h.json(&["workspace", "project-config", &ws, "--json"]);
    assert_eq!(folder["flagged"], false, "{folder}");
    assert_eq!(folder["from"], Value::Null);
    let out = h.run(&start);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("409"), "{err}");
    assert!(err.contains("removed"), "{err}");
    assert_eq!(worktree_folders(&s), Vec::<String>::new());
    let v = h.json(&[
        "workspace",
        "project-config",
        &ws,
        "--from",
        "feature",
        "--json",
    ]);
    assert_eq!(v["from"], json!(feature), "{v}");
    assert_eq!(v["folder"], json!(repo.path()), "{v}");
    assert_eq!(v["flagged"], true, "{v}");
    assert_eq!(v["approved"], false, "{v}");
    assert_eq!(v["files"][0]["path"], ".mcp.json", "{v}");
    assert_eq!(v["files"][0]["keys"][0]["key"], "mcpServers", "{v}");
    let sha = v["sha256"].as_str().unwrap().to_string();
    assert_ne!(sha, folder["sha256"].as_str().unwrap());
    assert!(
        err.contains(&format!("{} {sha}", "project-config-flagged-sha256/1")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "`proctor workspace project-config {ws} --from {feature}`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "`proctor workspace approve-project-config {ws} --from {feature} --sha256 {sha}`"
        )),
        "{err}"
    );
    // The human review names the commit and the approve command.
    let text = h.ok(&["workspace", "project-config", &ws, "--from", "feature"]);
    assert!(text.contains(&format!("committed at {feature}")), "{text}");
    assert!(text.contains("/bin/run-me"), "{text}");
    assert!(
        text.contains(&format!(
            "proctor workspace approve-project-config {ws} --from {feature} --sha256 {sha}"
        )),
        "{text}"
    );

    // `from` is resolved as worktree_from is (422), and nothing else is taken.
    let pc = format!("{WS}/{ws}/project-config");
    for bad in ["HEAD~1", "nope", &feature[..12]] {
        let (code, v) = s.call("GET", &format!("{pc}?from={bad}"), None);
        assert_eq!(code, 422, "{bad}: {v}");
        let (code, v) = s.call(
            "POST",
            &format!("{pc}/approve"),
            Some(json!({"sha256": sha, "from": bad})),
        );
        assert_eq!(code, 422, "{bad}: {v}");
    }
    let (code, v) = s.call(
        "POST",
        &format!("{pc}/approve"),
        Some(json!({"sha256": sha, "from": "feature", "extra": 1})),
    );
    assert_eq!(code, 400, "{v}");
    let out = h.run(&["workspace", "project-config", &ws, "--from", ""]);
    assert_eq!(out.status.code(), Some(2));
    // The tree's hash does not approve the folder, nor the folder's hash the tree.
    let out = h.run(&["workspace", "approve-project-config", &ws, "--sha256", &sha]);
    assert_eq!(out.status.code(), Some(1));
    let out = h.run(&[
        "workspace",
        "approve-project-config",
        &ws,
        "--from",
        "feature",
        "--sha256",
        folder["sha256"].as_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("409"));
    assert!(ledger_events(&s, "sessions.workspace.approve_project_config").is_empty());

    // Approved with --from: audited with the full commit id, and the start goes through.
    let text = h.ok(&[
        "workspace",
        "approve-project-config",
        &ws,
        "--from",
        "feature",
        "--sha256",
        &sha,
    ]);
    assert!(text.contains(&format!("committed at {feature}")), "{text}");
    assert!(text.contains("approved: yes"), "{text}");
    let audit = ledger_events(&s, "sessions.workspace.approve_project_config");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["from"], json!(feature));
    assert_eq!(audit[0]["sha256"], json!(sha));
    assert_eq!(audit[0]["files"], json!([".mcp.json"]));
    let shown = s.expect(200, "GET", &format!("{WS}/{ws}"), None);
    assert_eq!(shown["project_config_approval"]["from"], json!(feature));
    assert_eq!(shown["project_config_approval"]["sha256"], json!(sha));
    let text = h.ok(&start);
    assert!(text.contains("worktree: branch proctor/run-0001"), "{text}");
    let wt = worktrees_dir(&s).join("run-0001");
    assert!(wt.join(".mcp.json").is_file());
    h.ok(&["session", "stop", "1"]);

    // One character of the flagged value changes on the branch: refused again, with the
    // new commit and its hash.
    let moved = mcp("/bin/run-mf");
    let out = h.run(&start);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("409"), "{err}");
    let v = h.json(&[
        "workspace",
        "project-config",
        &ws,
        "--from",
        &moved,
        "--json",
    ]);
    let sha2 = v["sha256"].as_str().unwrap();
    assert_ne!(sha2, sha);
    assert_eq!(v["approved"], false);
    assert!(
        err.contains(&format!(
            "approve-project-config {ws} --from {moved} --sha256 {sha2}"
        )),
        "{err}"
    );
    assert!(
        err.contains("the last approval (") && err.contains(&sha),
        "{err}"
    );
    assert_eq!(worktree_folders(&s), vec!["run-0001".to_string()]);
}

#[test]
fn diff_and_diff_file_read_committed_objects_only() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    let ws = workspace(&s, &repo);
    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true}),
    );
    assert_eq!(code, 201, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    let base = v["worktree"]["base"].as_str().unwrap().to_string();
    let wp = PathBuf::from(v["workspace"].as_str().unwrap());
    let wt = Git::new(&wp);
    std::fs::write(wp.join("a.txt"), "changed\n").unwrap();
    std::fs::remove_file(wp.join("sub/b.txt")).unwrap();
    std::fs::write(wp.join("big.txt"), "x".repeat(70_000)).unwrap();
    // A 17 MiB blob from a sparse file (zeros compress to almost nothing).
    std::fs::File::create(wp.join("huge.bin"))
        .unwrap()
        .set_len(17 * 1024 * 1024)
        .unwrap();
    let tip = commit_all(&wt, "work");
    std::fs::write(wp.join("uncommitted.txt"), "not committed").unwrap();

    let d = s.expect(200, "GET", &s.run_path(&run, "/diff"), None);
    assert_eq!(d["base"], base);
    assert_eq!(d["head"], tip);
    assert_eq!(d["branch"], format!("proctor/{run}"));
    assert_eq!(d["truncated"], false);
    assert_eq!(
        d["files"],
        json!([
            {"path": "a.txt", "status": "M"},
            {"path": "big.txt", "status": "A"},
            {"path": "huge.bin", "status": "A"},
            {"path": "sub/b.txt", "status": "D"},
        ])
    );
    let file = |p: &str| {
        s.call(
            "GET",
            &s.run_path(&run, &format!("/diff/file?path={p}")),
            None,
        )
    };
    let (code, f) = file("a.txt");
    assert_eq!(code, 200, "{f}");
    assert_eq!(
        (f["original"].as_str(), f["modified"].as_str()),
        (Some("one\n"), Some("changed\n"))
    );
    let (_, f) = file("sub%2Fb.txt");
    assert_eq!(
        (f["modified"].as_str(), f["modified_size"].clone()),
        (Some(""), Value::Null)
    );
    let (_, f) = file("big.txt");
    assert_eq!(f["modified_clipped"], true);
    assert_eq!(f["modified"].as_str().unwrap().len(), 64 * 1024);
    assert_eq!(f["modified_size"], 70_000);
    assert_eq!(
        (f["original"].as_str(), f["original_size"].clone()),
        (Some(""), Value::Null)
    );
    let (code, f) = file("huge.bin");
    assert_eq!(code, 413, "{f}");
    for p in ["uncommitted.txt", "nope", "sub"] {
        let (code, f) = file(p);
        assert_eq!(code, 404, "{p}: {f}");
    }
    let (code, _) = s.call("GET", &s.run_path(&run, "/diff/file"), None);
    assert_eq!(code, 400);

    // Roles: read suffices; no token is 401.
    let reader = s.json_token("read", "reader");
    for p in ["/diff", "/diff/file?path=a.txt"] {
        let path = s.run_path(&run, p);
        assert_eq!(call_as(&s.home.socket(), None, "GET", &path, None).0, 401);
        let (code, v) = call_as(&s.home.socket(), Some(&reader), "GET", &path, None);
        assert_eq!(code, 200, "{p}: {v}");
    }

    // A run without a worktree, and an unknown run: 404.
    let plain = tempfile::tempdir_in("/tmp").unwrap();
    let (code, v) = start(
        &s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": plain.path().to_str().unwrap()}),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["worktree_branch"], Value::Null);
    assert_eq!(v["worktree"], Value::Null);
    let other = v["ref"].as_str().unwrap().to_string();
    assert_eq!(s.call("GET", &s.run_path(&other, "/diff"), None).0, 404);
    assert_eq!(s.call("GET", &s.run_path("run-0099", "/diff"), None).0, 404);
    stop(&s, &other);

    // No common history (the workspace moved to an orphan branch) and a branch gone: 409.
    repo.git
        .run(&["checkout", "-q", "--orphan", "alone"])
        .unwrap();
    commit_all(&repo.git, "alone");
    let (code, v) = s.call("GET", &s.run_path(&run, "/diff"), None);
    assert_eq!(code, 409, "{v}");
    repo.git.run(&["checkout", "-q", "main"]).unwrap();
    stop(&s, &run);
    repo.git
        .run(&["worktree", "remove", "--force", wp.to_str().unwrap()])
        .unwrap();
    repo.git
        .run(&["branch", "-D", &format!("proctor/{run}")])
        .unwrap();
    let (code, v) = s.call("GET", &s.run_path(&run, "/diff"), None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("gone"), "{v}");
}

/// Starts a stopped worktree run; returns its ref and worktree path.
fn stopped_run(s: &DemoServer, ws: &str) -> (String, PathBuf) {
    let (code, v) = start(
        s,
        json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true}),
    );
    assert_eq!(code, 201, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    stop(s, &run);
    (run, PathBuf::from(v["workspace"].as_str().unwrap()))
}

#[test]
fn cleanup_releases_only_what_loses_nothing_unless_discarded() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    let ws = workspace(&s, &repo);
    let cleanup =
        |run: &str, body: Option<Value>| s.call("POST", &s.run_path(run, "/cleanup"), body);
    let state = |run: &str| s.expect(200, "GET", &s.run_path(run, ""), None)["state"].clone();

    // Unmerged, dirty, detached: each refused with its reason; the run stays.
    let (run, wp) = stopped_run(&s, &ws);
    let wt = Git::new(&wp);
    std::fs::write(wp.join("a.txt"), "work\n").unwrap();
    let tip = commit_all(&wt, "work");
    let (code, v) = cleanup(&run, None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("unmerged work"), "{v}");
    assert_eq!(state(&run), "stopped");
    // Anything but an explicit true confirms nothing.
    for body in [
        json!({"discard_worktree": "true"}),
        json!({"discard_worktree": 1}),
        json!([true]),
    ] {
        let (code, v) = cleanup(&run, Some(body.clone()));
        assert_eq!(code, 409, "{body}: {v}");
    }
    repo.git
        .run(&["merge", "-q", "--ff-only", &format!("proctor/{run}")])
        .unwrap();
    std::fs::write(wp.join("a.txt"), "dirty\n").unwrap();
    let (code, v) = cleanup(&run, None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("uncommitted"), "{v}");
    wt.run(&["checkout", "-q", "--", "a.txt"]).unwrap();
    wt.run(&["checkout", "-q", "--detach"]).unwrap();
    let (code, v) = cleanup(&run, None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("detached HEAD"), "{v}");
    assert_eq!(state(&run), "stopped");
    wt.run(&["checkout", "-q", &format!("proctor/{run}")])
        .unwrap();
    // Merged, on its branch, clean: released; the worktree and the merged branch go.
    let (code, v) = cleanup(&run, None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["state"], "cleaned");
    assert_eq!(v["cleaned"]["worktree"], "removed");
    assert_eq!(v["cleaned"]["branch_tip"], tip);
    assert!(!wp.exists());
    assert_eq!(repo.proctor_branches(), "");
    assert_eq!(repo.head(), tip, "the merged work stays in the workspace");

    // Unmerged work, discarded: the worktree and its branch are removed, the tip recorded.
    let (run2, wp2) = stopped_run(&s, &ws);
    std::fs::write(wp2.join("lost.txt"), "lost\n").unwrap();
    let tip2 = commit_all(&Git::new(&wp2), "to be discarded");
    std::fs::write(wp2.join("dirty"), "d").unwrap();
    let (code, v) = cleanup(&run2, Some(json!({"discard_worktree": true})));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["cleaned"]["worktree"], "removed");
    assert_eq!(v["cleaned"]["branch_deleted"], true);
    assert!(!wp2.exists());
    assert_eq!(repo.proctor_branches(), "");

    // An inaccessible worktree (its folder removed): 409, then discard releases the run
    // and leaves what remains in place.
    let (run3, wp3) = stopped_run(&s, &ws);
    std::fs::remove_dir_all(&wp3).unwrap();
    let (code, v) = cleanup(&run3, None);
    assert_eq!(code, 409, "{v}");
    assert!(message(&v).contains("inaccessible"), "{v}");
    assert_eq!(state(&run3), "stopped");
    let (code, v) = cleanup(&run3, Some(json!({"discard_worktree": true})));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["cleaned"]["worktree"], "left_inaccessible");
    assert_eq!(
        repo.proctor_branches(),
        format!("refs/heads/proctor/{run3}")
    );

    // The ledger says what happened to each worktree and its branch tip.
    let cleaned = ledger_events(&s, "sessions.run.cleaned");
    let of = |r: &str| cleaned.iter().find(|e| e["run"] == r).unwrap().clone();
    assert_eq!(of(&run)["worktree"], "removed");
    assert_eq!(of(&run)["branch_tip"], tip);
    assert_eq!(of(&run)["discarded"], false);
    assert_eq!(of(&run2)["worktree"], "removed");
    assert_eq!(of(&run2)["branch_tip"], tip2);
    assert_eq!(of(&run2)["discarded"], true);
    assert_eq!(of(&run3)["worktree"], "left_inaccessible");
    assert_eq!(of(&run3)["branch"], format!("proctor/{run3}"));
    // Delete works on every one of them now.
    for r in [&run, &run2, &run3] {
        s.expect(200, "DELETE", &s.run_path(r, ""), None);
    }
}

#[test]
fn the_cli_starts_diffs_and_cleans_up_worktree_runs() {
    let s = DemoServer::start(&[]);
    let repo = Repo::new();
    repo.git.run(&["branch", "feature"]).unwrap();
    let ws = workspace(&s, &repo);
    setup(&s, &ws, "make deps", false);
    let h = &s.home;

    // Refused without --no-setup: exit 1 and the server's reason.
    let out = h.run(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--workspace",
        &ws,
        "--worktree",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("approve-setup"));
    // --from without --worktree is a usage error.
    let out = h.run(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--from",
        "feature",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = h.run(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--workspace",
        &ws,
        "--worktree",
        "--from",
        "HEAD~1",
        "--no-setup",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("revision expression"));

    let text = h.ok(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--workspace",
        &ws,
        "--worktree",
        "--from",
        "feature",
        "--no-setup",
    ]);
    assert!(text.contains("worktree: branch proctor/run-0001"), "{text}");
    let wp = worktrees_dir(&s).join("run-0001");
    std::fs::write(wp.join("a.txt"), "changed \u{1b}[31mred\n").unwrap();
    commit_all(&Git::new(&wp), "work");

    let text = h.ok(&["session", "diff", "run-0001"]);
    assert!(text.contains("branch proctor/run-0001"), "{text}");
    assert!(text.contains("M  a.txt"), "{text}");
    let v = h.json(&["session", "diff", "1", "--json"]);
    assert_eq!(v["files"], json!([{"path": "a.txt", "status": "M"}]));
    let text = h.ok(&["session", "diff", "1", "--path", "a.txt"]);
    assert!(text.contains("one"), "{text}");
    assert!(text.contains("changed"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "repository text goes through the sanitiser: {text:?}"
    );
    let out = h.run(&["session", "diff", "1", "--path", "missing"]);
    assert_eq!(out.status.code(), Some(1));

    h.ok(&["session", "stop", "1"]);
    let out = h.run(&["session", "cleanup", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unmerged work"));
    let text = h.ok(&["session", "cleanup", "1", "--discard-worktree"]);
    assert!(text.contains("cleaned up"), "{text}");
    assert!(text.contains("removed; branch proctor/run-0001"), "{text}");
    assert!(!wp.exists());
    assert_eq!(repo.proctor_branches(), "");
}
