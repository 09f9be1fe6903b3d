//! `proctor factory run` end to end: the real binary, a real server on a temporary home,
//! real git repositories and linked worktrees, and the stand-in workers and reviewers (the
//! fakes' headless forms, in the real tools' output shapes, scripted by `!worker`,
//! `!repair` and `!review N` lines of the task). Each refutation criterion of seed 000 is a
//! test that tries to break it.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Output;

use common::ShimEnv;
use common::factory::{git, receipt, shim_env as env, stderr, worktree_repo};
use serde_json::{Value, json};

/// A repository with one commit and a fresh linked worktree of it.
struct Repo {
    dir: tempfile::TempDir,
    main: PathBuf,
    wt: PathBuf,
}

fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let (main, wt) = worktree_repo(
        dir.path(),
        ("main", "wt", "factory"),
        &[("src/lib.txt", "one\n"), (".gitignore", "node_modules/\n")],
    );
    Repo { dir, main, wt }
}

fn factory(e: &ShimEnv, ws: &Path, task: &str, out: &Path, extra: &[&str]) -> Output {
    let mut c = e.h.cmd();
    c.args(["factory", "run", "--workspace"])
        .arg(ws)
        .args(["--task", task, "--out"])
        .arg(out)
        .args(["--timeout", "60s"])
        .args(extra);
    c.output().unwrap()
}

/// Runs `task` on a fresh worktree with the stand-ins; asserts the exit code; the receipt.
fn run_task(task: &str, code: i32) -> (Value, Output) {
    let e = env();
    let r = repo();
    let out = factory(&e, &r.wt, task, &r.dir.path().join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    (receipt(&out), out)
}

#[test]
fn an_approval_completes_with_a_receipt_bound_to_the_ledger_and_no_authority() {
    let e = env();
    let r = repo();
    let out_path = r.dir.path().join("report.json");
    // The worker takes a moment, so the progress shows its phase.
    let task = "Say two\n!worker sleep 1500\n!worker write src/lib.txt two";
    let out = factory(&e, &r.wt, task, &out_path, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rec = receipt(&out);
    assert_eq!(rec["status"], "completed");
    assert_eq!(rec["ok"], true);
    assert!(
        rec["publicationAuthority"]
            .as_str()
            .unwrap()
            .starts_with("none")
    );
    assert_eq!(rec["repairs"], 0);
    assert_eq!(rec["demo"], true, "stand-ins label the run demo");
    assert!(rec["execution"].as_str().unwrap().contains("demo"));
    assert_eq!(rec["candidate"]["files"][0]["path"], "src/lib.txt");
    // stdout is exactly the receipt, the same bytes as --out and the server's copy.
    let written = std::fs::read(&out_path).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), rec);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&out_path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The progress: on stderr, labelled, without the task's text or a path.
    let err = stderr(&out);
    assert!(err.contains("(not an ETA)"), "{err}");
    assert!(err.contains("worker (claude) running"), "{err}");
    assert!(err.contains("completed"), "{err}");
    assert!(
        !err.contains("Say two") && !err.contains("src/lib.txt"),
        "{err}"
    );
    assert!(!err.contains(r.wt.to_str().unwrap()), "{err}");
    // The ledger binds the receipt's bytes, and it verifies.
    let show = e.h.json(&["factory", "show", "fac-0001", "--json"]);
    assert_eq!(show["status"], "completed");
    let path = show["receipt"]["path"].as_str().unwrap();
    let bytes = std::fs::read(path).unwrap();
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(&bytes));
    assert_eq!(show["receipt"]["sha256"], sha);
    let ledger = std::fs::read_to_string(e.h.ledger()).unwrap();
    assert!(
        ledger
            .lines()
            .any(|l| l.contains("factory.run.finished") && l.contains(&sha)),
        "the ledger binds the receipt"
    );
    e.h.ok(&["ledger", "verify"]);
    // Raw model output is bound, not embedded: the worker's stdout file hashes as bound.
    for ev in rec["evidence"].as_array().unwrap() {
        let p = Path::new(ev["path"].as_str().unwrap());
        assert!(!p.starts_with(&r.wt));
        let b = std::fs::read(p).unwrap();
        assert_eq!(ev["bytes"], b.len());
        assert_eq!(ev["sha256"], hex::encode(sha2::Sha256::digest(&b)));
    }
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains("wrote 1 file"),
        "the worker's answer is not embedded"
    );
    // HEAD and the index are the input's.
    assert_eq!(
        git(&r.wt, &["rev-parse", "HEAD"]),
        git(&r.main, &["rev-parse", "HEAD"])
    );
}

#[test]
fn one_request_for_changes_gets_one_repair_then_a_fresh_review_approves() {
    let e = env();
    let r = repo();
    let task = "!worker write src/lib.txt two\n!review 1 REQUEST_CHANGES it should say three\n\
                !repair write src/lib.txt three";
    let out = factory(&e, &r.wt, task, &r.dir.path().join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rec = receipt(&out);
    assert_eq!(rec["repairs"], 1);
    let reviews = rec["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0]["verdict"], "REQUEST_CHANGES");
    assert_eq!(reviews[1]["verdict"], "APPROVE");
    assert_eq!(reviews[1]["identity"], rec["repairedCandidate"]["digest"]);
    assert_eq!(
        std::fs::read_to_string(r.wt.join("src/lib.txt")).unwrap(),
        "three\n"
    );
    let roles: Vec<&str> = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["worker", "review-1", "repair", "review-2"]);
}

#[test]
fn a_repair_that_changes_nothing_fails_typed_and_is_not_reviewed_again() {
    let task = "!worker write src/lib.txt two\n!review 1 REQUEST_CHANGES no\n!repair write src/lib.txt two";
    let (rec, _) = run_task(task, 1);
    assert_eq!(rec["status"], "failed");
    assert_eq!(rec["error"]["code"], "repair_unchanged");
    assert_eq!(rec["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn a_second_reject_exits_3_and_never_repairs_twice() {
    let task = "!worker write src/lib.txt two\n!review 1 REQUEST_CHANGES no\n\
                !repair write src/lib.txt three\n!review 2 REQUEST_CHANGES still no";
    let (rec, out) = run_task(task, 3);
    assert_eq!(rec["status"], "rejected");
    assert_eq!(rec["ok"], false);
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        4,
        "worker, review, one repair, review: never more"
    );
    assert_eq!(steps.iter().filter(|s| s["role"] == "repair").count(), 1);
    assert!(stderr(&out).contains("rejected"));
}

#[test]
fn a_reviewer_that_writes_into_node_modules_is_refused() {
    let task = "!worker write src/lib.txt two\n!review 1 write node_modules/left-pad/index.js evil";
    let (rec, _) = run_task(task, 1);
    assert_eq!(rec["error"]["code"], "reviewer_modified");
    assert_ne!(rec["ok"], true);
}

#[test]
fn a_worker_that_commits_gets_no_candidate() {
    let task = "!worker write src/lib.txt two\n\
                !worker git -c user.name=w -c user.email=w@example.invalid commit -qam sneaky";
    let (rec, _) = run_task(task, 1);
    assert_eq!(rec["error"]["code"], "worker_committed");
    assert!(rec["candidate"].is_null());
}

#[test]
fn a_main_working_copy_a_dirty_one_and_a_report_inside_the_candidate_are_refused() {
    let e = env();
    let r = repo();
    let task = "!worker write src/lib.txt two";
    let out = factory(&e, &r.main, task, &r.dir.path().join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "a refused start prints no receipt");
    assert!(
        stderr(&out).contains("main working copy"),
        "{}",
        stderr(&out)
    );

    let link = r.dir.path().join("alias");
    std::os::unix::fs::symlink(&r.wt, &link).unwrap();
    let out = factory(&e, &r.wt, task, &link.join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("inside the candidate"),
        "{}",
        stderr(&out)
    );

    std::fs::write(r.wt.join("stray"), "x").unwrap();
    let out = factory(&e, &r.wt, task, &r.dir.path().join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not clean"), "{}", stderr(&out));
    // Nothing ran: no run was numbered.
    let list = e.h.json(&["factory", "list", "--json"]);
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
}

#[test]
fn no_api_key_or_cloud_routing_reaches_a_provider() {
    let e = env();
    let r = repo();
    let hostile = [
        ("ANTHROPIC_API_KEY", "sk-ant-hostile"),
        ("ANTHROPIC_AUTH_TOKEN", "hostile"),
        ("ANTHROPIC_BASE_URL", "http://evil.example"),
        ("CLAUDE_CODE_USE_BEDROCK", "1"),
        ("CLAUDE_CODE_USE_VERTEX", "1"),
        ("OPENAI_API_KEY", "sk-hostile"),
        ("OPENAI_BASE_URL", "http://evil.example"),
        ("HTTPS_PROXY", "http://evil.example:3128"),
    ];
    let mut c = e.h.cmd();
    for (k, v) in hostile {
        c.env(k, v);
    }
    let out = c
        .args(["factory", "run", "--workspace"])
        .arg(&r.wt)
        .args([
            "--task",
            "!worker env env.txt\n!worker write src/lib.txt two",
            "--out",
        ])
        .arg(r.dir.path().join("r.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let names = std::fs::read_to_string(r.wt.join("env.txt")).unwrap();
    assert!(
        names.lines().any(|l| l == "PATH"),
        "the dump is real: {names}"
    );
    for (k, _) in hostile {
        assert!(
            !names.lines().any(|l| l == k),
            "{k} reached the worker:\n{names}"
        );
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for this purpose.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn a_finished_workers_children_do_not_keep_running() {
    let e = env();
    let r = repo();
    let task = "!worker grandchild\n!worker write src/lib.txt two";
    let out = factory(&e, &r.wt, task, &r.dir.path().join("r.json"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rec = receipt(&out);
    let stdout_file = rec["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "worker" && e["file"] == "stdout.txt")
        .expect("the worker's stdout is evidence");
    let text = std::fs::read_to_string(stdout_file["path"].as_str().unwrap()).unwrap();
    let pid: i32 = text
        .split("grandchild pid ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in {text}"));
    assert!(
        !alive(pid),
        "the worker's grandchild {pid} outlived the invocation"
    );
}

#[test]
fn the_opentelemetry_export_is_loopback_only_and_never_changes_the_outcome() {
    let e = env();
    // A collector that records one request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf);
                    if let Some(h) = text.find("\r\n\r\n") {
                        let len = text[..h]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= h + 4 + len {
                            break;
                        }
                    }
                }
            }
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        String::from_utf8_lossy(&buf).into_owned()
    });
    let r = repo();
    let task = "Secret plan\n!worker write src/lib.txt two";
    let url = format!("http://127.0.0.1:{port}");
    let out = factory(
        &e,
        &r.wt,
        task,
        &r.dir.path().join("r.json"),
        &["--otel", &url],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let request = got.join().unwrap();
    assert!(request.starts_with("POST /v1/traces"), "{request}");
    assert!(
        request.contains("factory.worker") && request.contains("factory.review-1"),
        "{request}"
    );
    assert!(
        !request.contains("Secret plan") && !request.contains(r.wt.to_str().unwrap()),
        "{request}"
    );

    // A collector that is not there: the outcome is the same.
    let r = repo();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", dead.local_addr().unwrap().port());
    drop(dead);
    let out = factory(
        &e,
        &r.wt,
        task,
        &r.dir.path().join("r.json"),
        &["--otel", &url],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A hosted collector is refused before anything runs.
    let r = repo();
    let out = factory(
        &e,
        &r.wt,
        task,
        &r.dir.path().join("r.json"),
        &["--otel", "http://otel.example.com:4318"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("loopback"), "{}", stderr(&out));
}

/// The processes whose working folder is `dir`.
fn working_in(dir: &Path) -> Vec<i32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == dir) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_server_killed_mid_run_leaves_no_worker_running() {
    let e = env();
    let r = repo();
    let mut c = e.h.cmd();
    // The worker starts a child of its own (which the provider's death does not take).
    let mut child = c
        .args(["factory", "run", "--workspace"])
        .arg(&r.wt)
        .args([
            "--task",
            "!worker grandchild\n!worker sleep 600000",
            "--out",
        ])
        .arg(r.dir.path().join("r.json"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The run on record, then two processes in the worktree: before the run is taken, the
    // server's own checks of the worktree (git) work there too, and a kill then leaves no run.
    let recorded = || {
        let mut c = e.h.cmd();
        c.args(["factory", "show", "fac-0001", "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c.status().is_ok_and(|s| s.success())
    };
    let started = loop {
        let w = working_in(&r.wt);
        if w.len() >= 2 && recorded() && working_in(&r.wt).len() >= 2 {
            break working_in(&r.wt);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker and its child never started: {w:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let server = e.h.server_pid().unwrap();
    let cgroups_held = std::fs::read_to_string(format!("/proc/{}/cgroup", started[0]))
        .unwrap_or_default()
        .contains("proctor-factory-");
    // SAFETY: kill(2) on the server's pid.
    unsafe { libc::kill(server, libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
    // The provider dies with its server (PR_SET_PDEATHSIG); its own child may not.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while working_in(&r.wt).len() >= started.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker outlived its killed server: {:?}",
            working_in(&r.wt)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The next start ends what is left (the invocation's cgroup) and says so.
    let shown = e.h.json(&["factory", "show", "fac-0001", "--json"]);
    assert_eq!(shown["error"]["code"], "server_stopped", "{shown}");
    if cgroups_held {
        assert!(
            working_in(&r.wt).is_empty(),
            "the worker's child outlived the next start: {:?}",
            working_in(&r.wt)
        );
        assert!(
            shown["error"]["message"]
                .as_str()
                .unwrap()
                .contains("left running was ended at this start"),
            "{shown}"
        );
    }
    for p in working_in(&r.wt) {
        // SAFETY: kill(2) on a leftover of this test (no cgroup here: the named residual).
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

#[test]
fn a_hostile_caller_on_the_socket_gets_clear_refusals_and_nothing_runs() {
    let e = env();
    let r = repo();
    // A token read from the home, as an agent running as the same user would.
    e.h.ok(&["factory", "list"]);
    let token = e.h.owner_token();
    let socket = e.h.socket();
    let path = "/v1/m/factory/runs";
    let ws = r.wt.to_str().unwrap();
    let cases = [
        (
            json!({"workspace": ws, "task": "x".repeat(1 << 20)}),
            "at most",
        ),
        (json!({"workspace": "relative/wt", "task": "t"}), "absolute"),
        (
            json!({"workspace": ws, "task": "t", "timeout_secs": u64::MAX}),
            "timeout",
        ),
        (
            json!({"workspace": ws, "task": "t", "worker": "../../etc"}),
            "profile",
        ),
        (
            json!({"workspace": ws, "task": "t", "otel": "http://169.254.169.254"}),
            "loopback",
        ),
        (json!([ws, "t"]), "JSON object"),
    ];
    for (body, word) in cases {
        let (status, v) = common::call_as(&socket, Some(&token), "POST", path, Some(body));
        assert!((400..500).contains(&status), "{status} {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(word), "{word}: {v}");
    }
    let (status, _) = common::call_as(&socket, None, "POST", path, Some(json!({})));
    assert_eq!(status, 401);
    let list = e.h.json(&["factory", "list", "--json"]);
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        0,
        "nothing was numbered"
    );
}
