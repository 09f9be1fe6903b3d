//! `factory::invoke::run` against the stand-ins (`proctor demo-agent`, installed on PATH as
//! `claude`, `codex` and `gemini`, the way `tests/tribunal_cli_jurors.rs` does it) in a real
//! git repository, and, when `PROCTOR_REAL_TOOLS` names them, against the real tools: the
//! factory's exact argv must be accepted (they end on the missing login, never on an option).
//!
//! What is tried: a worker writes a file; a reviewer answers each verdict (and a word that is
//! not one); the deadline stops a sleeping worker and `run` returns only once its tree is
//! gone; a finished worker's grandchild is dead after `run` returns (and a `setsid`
//! grandchild when a cgroup holds the invocation; the test says so when none can); hostile
//! variables of the invoking environment do not reach the child; what must not start does
//! not.

mod common;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proctor::factory::invoke::{self, Containment, Invocation, InvokeError, Outcome};
use proctor::factory::prompt::{self, Role, Verdict};
use proctor::providers::Tool;
use proctor::providers::profile::Profile;

struct Fx {
    _shims: tempfile::TempDir,
    shims: PathBuf,
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
    _scratch_parent: tempfile::TempDir,
    scratch: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Fx {
    fn new() -> Fx {
        let shims = tempfile::tempdir().unwrap();
        proctor::providers::fake::install_shims(
            shims.path(),
            Path::new(env!("CARGO_BIN_EXE_proctor")),
        )
        .unwrap();
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q"]);
        std::fs::write(repo.path().join("README"), "hello\n").unwrap();
        git(repo.path(), &["add", "README"]);
        git(repo.path(), &["commit", "-qm", "base"]);
        let scratch_parent = tempfile::tempdir().unwrap();
        let scratch = scratch_parent.path().join("call");
        std::fs::create_dir(&scratch).unwrap();
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o700)).unwrap();
        Fx {
            shims: shims.path().to_path_buf(),
            _shims: shims,
            home: tempfile::tempdir().unwrap(),
            repo,
            _scratch_parent: scratch_parent,
            scratch,
        }
    }

    fn path(&self) -> OsString {
        format!("{}:/usr/bin:/bin", self.shims.display()).into()
    }

    fn inv(&self, tool: Tool, role: Role, prompt: String, deadline: Duration) -> Invocation {
        Invocation {
            tool,
            profile: Profile::default_for(tool, self.home.path()),
            model: None,
            role,
            worktree: self.repo.path().to_path_buf(),
            scratch: self.scratch.clone(),
            prompt,
            deadline,
            path: self.path(),
            enclosure: None,
            base_env: vec![
                ("PATH".into(), self.path()),
                ("HOME".into(), self.home.path().into()),
            ],
        }
    }
}

fn ok(r: Result<Outcome, InvokeError>) -> Outcome {
    let o = r.unwrap_or_else(|e| panic!("did not start: {e}"));
    assert!(o.tree_gone, "{o:?}");
    o
}

fn answer(o: &Outcome) -> &str {
    o.answer
        .as_deref()
        .unwrap_or_else(|e| panic!("no answer: {e} ({o:?})"))
}

/// The pid after `grandchild pid ` in an answer.
fn grandchild(text: &str) -> i32 {
    let at = text.find("grandchild pid ").expect(text) + "grandchild pid ".len();
    text[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The live processes whose working folder is `dir`.
fn working_in(dir: &Path) -> Vec<i32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .ok()
                .as_deref()
                == Some(&dir)
                && common::alive(pid)
        })
        .collect()
}

#[test]
fn a_worker_writes_its_file_and_the_outputs_are_private_files() {
    for tool in [Tool::Claude, Tool::Codex] {
        let fx = Fx::new();
        let p = prompt::worker_prompt("Add the file.\n!worker write src/new.txt hello world");
        let o = ok(invoke::run(
            &fx.inv(tool, Role::Worker, p.clone(), Duration::from_secs(60)),
            None,
        ));
        assert!(answer(&o).contains("wrote 1 file"), "{tool}: {o:?}");
        assert_eq!(o.exit, Some(0));
        assert!(!o.timed_out && !o.cancelled);
        assert_eq!(
            std::fs::read_to_string(fx.repo.path().join("src/new.txt")).unwrap(),
            "hello world\n",
            "{tool}"
        );
        // The worker committed nothing: the change is an untracked file.
        assert_eq!(
            git(fx.repo.path(), &["status", "--porcelain"]),
            "?? src/\n",
            "{tool}"
        );
        let mut names: Vec<&str> = o.files.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        let want: &[&str] = if tool == Tool::Codex {
            &["last-message", "prompt", "stderr", "stdout"]
        } else {
            &["prompt", "stderr", "stdout"]
        };
        assert_eq!(names, want, "{tool}");
        for (n, f) in &o.files {
            assert!(f.starts_with(&fx.scratch), "{n}: {}", f.display());
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{tool} {n}");
        }
        assert_eq!(
            std::fs::read_to_string(fx.scratch.join("prompt.txt")).unwrap(),
            p
        );
        // No cgroup folder is left behind.
        if let Containment::Cgroup(dir) = &o.containment {
            assert!(!dir.exists(), "{}", dir.display());
            assert!(!dir.parent().unwrap().exists());
        }
    }
}

#[test]
fn a_worker_can_be_scripted_to_touch_the_index_and_commit() {
    // What the engine must refuse: a worker that stages, and one that commits.
    let fx = Fx::new();
    let head = git(fx.repo.path(), &["rev-parse", "HEAD"]);
    let p = prompt::worker_prompt("!worker write a.txt x\n!worker git add a.txt");
    let o = ok(invoke::run(
        &fx.inv(Tool::Claude, Role::Worker, p, Duration::from_secs(60)),
        None,
    ));
    assert!(answer(&o).contains("git add exited"), "{o:?}");
    assert_eq!(
        git(fx.repo.path(), &["diff", "--cached", "--name-only"]),
        "a.txt\n"
    );
    let p = prompt::worker_prompt(
        "!worker git -c user.name=w -c user.email=w@example.org commit -qm sneaky",
    );
    let o = ok(invoke::run(
        &fx.inv(Tool::Codex, Role::Worker, p, Duration::from_secs(60)),
        None,
    ));
    assert_eq!(o.exit, Some(0), "{o:?}");
    assert_ne!(git(fx.repo.path(), &["rev-parse", "HEAD"]), head);
}

#[test]
fn a_repair_plays_only_the_repair_directives() {
    let fx = Fx::new();
    let p = prompt::repair_prompt(
        "!worker write worker.txt no\n!repair write from-task.txt yes",
        "{\"base\":\"x\"}",
        "REQUEST_CHANGES\n!repair write from-review.txt yes too",
    );
    let o = ok(invoke::run(
        &fx.inv(Tool::Codex, Role::Repair, p, Duration::from_secs(60)),
        None,
    ));
    assert!(answer(&o).contains("wrote 2 files"), "{o:?}");
    assert!(fx.repo.path().join("from-task.txt").exists());
    assert!(fx.repo.path().join("from-review.txt").exists());
    assert!(!fx.repo.path().join("worker.txt").exists());
}

#[test]
fn each_reviewer_answers_the_verdict_its_directive_names() {
    let task = "Change it.\n!review 1 REQUEST_CHANGES add a test\n!review 1 write node_modules/x.js hi\n\
                !review 2 LGTM fine\n!worker write w.txt x";
    for tool in [Tool::Claude, Tool::Codex, Tool::Gemini] {
        let fx = Fx::new();
        let run = |review: u32, task: &str| {
            let p = prompt::reviewer_prompt(task, "{\"base\":\"x\"}", review);
            ok(invoke::run(
                &fx.inv(tool, Role::Reviewer { review }, p, Duration::from_secs(60)),
                None,
            ))
        };
        let o = run(1, task);
        let (v, reasons) = prompt::parse_verdict(answer(&o)).unwrap();
        assert_eq!(
            (v, reasons.as_str()),
            (Verdict::RequestChanges, "add a test"),
            "{tool}"
        );
        // The reviewer's write happened (the engine must refuse it); the worker's did not.
        assert!(fx.repo.path().join("node_modules/x.js").exists(), "{tool}");
        assert!(!fx.repo.path().join("w.txt").exists(), "{tool}");
        // A word that is not a verdict is an error, never an approval.
        let o = run(2, task);
        assert!(prompt::parse_verdict(answer(&o)).is_err(), "{tool}: {o:?}");
        // No directive for the review: APPROVE.
        let o = run(3, task);
        assert_eq!(
            prompt::parse_verdict(answer(&o)).unwrap().0,
            Verdict::Approve,
            "{tool}"
        );
    }
}

#[test]
fn the_deadline_stops_the_whole_tree_before_run_returns() {
    for tool in [Tool::Claude, Tool::Codex] {
        let fx = Fx::new();
        let p = prompt::worker_prompt("!worker grandchild\n!worker sleep 60000");
        let inv = fx.inv(tool, Role::Worker, p, Duration::from_millis(1500));
        // Watch who works in the worktree while the invocation runs.
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let done = done.clone();
            let dir = fx.repo.path().to_path_buf();
            std::thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !done.load(Ordering::SeqCst) {
                    seen.extend(working_in(&dir));
                    std::thread::sleep(Duration::from_millis(50));
                }
                seen
            })
        };
        let started = Instant::now();
        let o = ok(invoke::run(&inv, None));
        let after: Vec<i32> = working_in(fx.repo.path());
        done.store(true, Ordering::SeqCst);
        let seen = watcher.join().unwrap();
        assert!(o.timed_out, "{tool}: {o:?}");
        assert!(
            o.answer.as_ref().unwrap_err().starts_with("timeout"),
            "{o:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert!(started.elapsed() < Duration::from_secs(30), "{o:?}");
        assert!(o.exit.is_none() && o.signal.is_some(), "{tool}: {o:?}");
        // The fake and its grandchild were seen working, and none is alive when run returns.
        assert!(seen.len() >= 2, "{tool}: saw {seen:?}");
        assert!(after.is_empty(), "{tool}: still running: {after:?}");
        for pid in &seen {
            assert!(!common::alive(*pid), "{tool}: {pid} survived");
        }
        assert!(o.leftovers_stopped >= 1, "{tool}: {o:?}");
    }
}

/// A worker (and its grandchild) that ignore SIGTERM: the deadline's SIGTERM does nothing,
/// SIGKILL follows after the grace, and `run` returns only once both are gone, saying it
/// escalated.
#[test]
fn a_tree_that_ignores_sigterm_is_killed_and_run_says_so() {
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker ignore-term\n!worker grandchild\n!worker sleep 60000");
    let inv = fx.inv(Tool::Claude, Role::Worker, p, Duration::from_millis(1500));
    let started = Instant::now();
    let o = ok(invoke::run(&inv, None));
    assert!(o.timed_out && o.escalated, "{o:?}");
    assert_eq!(o.signal, Some(libc::SIGKILL), "{o:?}");
    assert!(started.elapsed() < Duration::from_secs(30), "{o:?}");
    assert!(o.tree_gone, "{o:?}");
    assert!(working_in(fx.repo.path()).is_empty(), "{o:?}");

    // The same worker within its deadline: no escalation is claimed.
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker ignore-term\n!worker write a.txt done");
    let o = ok(invoke::run(
        &fx.inv(Tool::Claude, Role::Worker, p, Duration::from_secs(60)),
        None,
    ));
    assert!(!o.escalated && !o.timed_out && o.exit == Some(0), "{o:?}");
}

#[test]
fn cancel_stops_the_invocation_like_a_deadline() {
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker sleep 60000");
    let inv = fx.inv(Tool::Claude, Role::Worker, p, Duration::from_secs(60));
    let cancel = Arc::new(AtomicBool::new(false));
    let c = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        c.store(true, Ordering::SeqCst);
    });
    let started = Instant::now();
    let o = ok(invoke::run(&inv, Some(&cancel)));
    t.join().unwrap();
    assert!(o.cancelled && !o.timed_out, "{o:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(working_in(fx.repo.path()).is_empty());
}

#[test]
fn a_finished_workers_grandchildren_do_not_outlive_run() {
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker grandchild\n!worker write a.txt done");
    let o = ok(invoke::run(
        &fx.inv(Tool::Claude, Role::Worker, p, Duration::from_secs(60)),
        None,
    ));
    let pid = grandchild(answer(&o));
    assert!(!common::alive(pid), "grandchild {pid} survived: {o:?}");
    assert_eq!(o.leftovers_stopped, 1, "{o:?}");
    assert_eq!(o.exit, Some(0));

    // A grandchild that left the process group: only a cgroup finds it.
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker setsid-grandchild");
    let o = ok(invoke::run(
        &fx.inv(Tool::Codex, Role::Worker, p, Duration::from_secs(60)),
        None,
    ));
    let pid = grandchild(answer(&o));
    match &o.containment {
        Containment::Cgroup(_) => {
            assert!(
                !common::alive(pid),
                "setsid grandchild {pid} survived: {o:?}"
            );
            assert_eq!(o.leftovers_stopped, 1, "{o:?}");
        }
        Containment::ProcessGroup { reason } => {
            eprintln!(
                "NOT PROVEN here: no cgroup can hold the invocation ({reason}); a setsid \
                 grandchild escapes the process-group sweep (a declared residual)"
            );
            // The residual is real: it is still running. End it (this test started it).
            assert!(common::alive(pid));
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn hostile_variables_of_the_invoking_environment_do_not_reach_the_child() {
    let hostile = [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CONFIG_DIR",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CODEX_API_KEY",
        "CODEX_HOME",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "AWS_ACCESS_KEY_ID",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "NODE_OPTIONS",
        "LD_PRELOAD",
    ];
    for tool in [Tool::Claude, Tool::Codex] {
        let fx = Fx::new();
        let env_file = fx.scratch.parent().unwrap().join(format!("env-{tool}.txt"));
        let p = prompt::worker_prompt(&format!("!worker env {}", env_file.display()));
        let mut inv = fx.inv(tool, Role::Worker, p, Duration::from_secs(60));
        for k in hostile {
            inv.base_env
                .push((k.into(), "https://hostile.example/sk-secret".into()));
        }
        inv.base_env.push(("LANG".into(), "C.UTF-8".into()));
        let o = ok(invoke::run(&inv, None));
        assert_eq!(o.exit, Some(0), "{o:?}");
        let names = std::fs::read_to_string(&env_file).unwrap();
        let names: Vec<&str> = names.lines().collect();
        for k in hostile {
            assert!(
                !names.contains(&k),
                "{tool}: {k} reached the child: {names:?}"
            );
        }
        // What arrives is the allowlist (plus what the shim's /bin/sh itself sets).
        for n in &names {
            assert!(
                ["HOME", "PATH", "LANG", "PWD", "OLDPWD", "SHLVL", "_"].contains(n),
                "{tool}: unexpected {n} in {names:?}"
            );
        }
        assert!(names.contains(&"HOME") && names.contains(&"PATH") && names.contains(&"LANG"));
    }
}

#[test]
fn what_must_not_start_does_not() {
    let fx = Fx::new();
    let p = prompt::worker_prompt("!worker write a.txt x");
    // The scratch folder inside the worktree.
    let mut inv = fx.inv(
        Tool::Claude,
        Role::Worker,
        p.clone(),
        Duration::from_secs(5),
    );
    let inside = fx.repo.path().join("scratch");
    std::fs::create_dir(&inside).unwrap();
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o700)).unwrap();
    inv.scratch = inside;
    let e = invoke::run(&inv, None).unwrap_err();
    assert!(matches!(e, InvokeError::ScratchInWorktree { .. }), "{e}");
    assert!(e.to_string().contains("Remedy"));
    // A scratch folder others may write.
    let mut inv = fx.inv(
        Tool::Claude,
        Role::Worker,
        p.clone(),
        Duration::from_secs(5),
    );
    std::fs::set_permissions(&fx.scratch, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = invoke::run(&inv, None).unwrap_err();
    assert!(matches!(e, InvokeError::Scratch(_)), "{e}");
    std::fs::set_permissions(&fx.scratch, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A profile of another tool.
    inv.profile = Profile::default_for(Tool::Codex, fx.home.path());
    let e = invoke::run(&inv, None).unwrap_err();
    assert!(matches!(e, InvokeError::ProfileTool { .. }), "{e}");
    // gemini is not a worker.
    let mut inv = fx.inv(
        Tool::Gemini,
        Role::Worker,
        p.clone(),
        Duration::from_secs(5),
    );
    let e = invoke::run(&inv, None).unwrap_err();
    assert!(matches!(e, InvokeError::NotAllowed { .. }), "{e}");
    // Not on PATH.
    inv.tool = Tool::Claude;
    inv.profile = Profile::default_for(Tool::Claude, fx.home.path());
    inv.path = "/usr/bin:/bin".into();
    let e = invoke::run(&inv, None).unwrap_err();
    assert!(matches!(e, InvokeError::NotInstalled(_)), "{e}");
    // Nothing ran.
    assert!(!fx.repo.path().join("a.txt").exists());
}

/// The factory's argv against the real tools, for each tool `PROCTOR_REAL_TOOLS` names
/// (then it must be on PATH). Without a login they never fail on an option: claude answers
/// `Not logged in` within the deadline; codex starts its session with the sandbox asked for
/// and retries the network until the deadline stops it; gemini (a reviewer only) answers its
/// JSON error object, asking for an auth method, which the invocation reports.
#[test]
fn the_real_tools_accept_the_factory_argv() {
    let required = std::env::var("PROCTOR_REAL_TOOLS").unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in [Tool::Claude, Tool::Codex, Tool::Gemini] {
        if !required.split(',').any(|t| t.trim() == tool.name()) {
            eprintln!("skip: {tool} (not named by PROCTOR_REAL_TOOLS)");
            continue;
        }
        assert!(
            proctor::providers::resolve(tool, Some(&path)).is_ok(),
            "{tool} is required (PROCTOR_REAL_TOOLS={required}) but not on PATH"
        );
        let roles: &[Role] = if tool == Tool::Gemini {
            &[Role::Reviewer { review: 1 }]
        } else {
            &[Role::Worker, Role::Reviewer { review: 1 }]
        };
        for &role in roles {
            let fx = Fx::new();
            let p = match role {
                Role::Worker => prompt::worker_prompt("Say hello. Change nothing."),
                _ => prompt::reviewer_prompt("Say hello.", "{}", 1),
            };
            let deadline = if tool == Tool::Codex { 25 } else { 90 };
            let mut inv = fx.inv(tool, role, p, Duration::from_secs(deadline));
            inv.path = path.clone();
            inv.base_env[0].1 = path.clone();
            let o = ok(invoke::run(&inv, None));
            let stderr = std::fs::read_to_string(fx.scratch.join("stderr.txt")).unwrap_or_default();
            let stdout = std::fs::read_to_string(fx.scratch.join("stdout.txt")).unwrap_or_default();
            eprintln!("{tool} {}: {o:?}", role.name());
            for bad in [
                "unknown option",
                "unexpected argument",
                "Unknown argument",
                "Invalid values",
                "invalid value",
            ] {
                assert!(
                    !stderr.contains(bad) && !stdout.contains(bad),
                    "{tool}: {stderr}{stdout}"
                );
            }
            assert!(o.answer.is_err(), "{tool}: no login here, yet: {o:?}");
            match tool {
                // claude answers `Not logged in` at once.
                Tool::Claude => assert!(!o.timed_out, "{tool} {}: {o:?}", role.name()),
                // gemini 0.61.0 answers its error object on stderr at once (exit 41): the
                // argv was accepted, and the invocation names gemini's own words.
                Tool::Gemini => {
                    assert!(!o.timed_out && o.exit.is_some(), "{tool}: {o:?}");
                    let why = o.answer.as_ref().unwrap_err();
                    assert!(
                        why.contains("gemini answered with an error") && why.contains("Auth"),
                        "{tool}: {why}"
                    );
                }
                // codex 0.171.0 starts the session (its header names the sandbox the argv
                // asked for), then retries the network until the deadline: the argv was
                // accepted, and the deadline stopped the whole tree.
                _ => {
                    let sandbox = if role.writes() {
                        "sandbox: workspace-write"
                    } else {
                        "sandbox: read-only"
                    };
                    assert!(
                        stderr.contains("OpenAI Codex v") && stderr.contains(sandbox),
                        "{tool} {}: {stderr}",
                        role.name()
                    );
                    assert!(o.tree_gone, "{o:?}");
                }
            }
        }
    }
}
