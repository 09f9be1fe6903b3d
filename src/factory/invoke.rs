//! One headless provider invocation of the factory, with the provider hygiene of seed 000
//! ("Hygiène des fournisseurs"): closed profiles, no shell, the environment allowlist, a
//! deadline, bounded output, the whole process tree stopped with escalation, and the outcome
//! reported only once that tree is gone.
//!
//! The closed profiles (argv checked against the real tools' `--help`, claude 2.1.332 and
//! codex 0.171.0; `tests/factory_invoke.rs` runs them against the real tools when
//! `PROCTOR_REAL_TOOLS` names them):
//! - claude worker / repair: `-p --output-format json --no-session-persistence --tools
//!   Read,Grep,Glob,Edit,Write --allowed-tools Read,Grep,Glob,Edit,Write --disallowed-tools
//!   Bash,NotebookEdit,WebFetch,WebSearch --permission-mode acceptEdits --strict-mcp-config
//!   [--model M]`, the prompt on stdin, in the worktree;
//! - codex worker / repair: `exec --sandbox workspace-write --skip-git-repo-check --ephemeral
//!   --ignore-user-config --ignore-rules -C WT --output-last-message SCRATCH/last-message.txt
//!   --color never [--model M] -`;
//! - claude reviewer: the tribunal juror's read-only argv (`--tools Read,Grep,Glob`,
//!   `--permission-mode dontAsk`, the writing tools denied), in the worktree;
//! - codex reviewer: as the worker but `--sandbox read-only`;
//! - gemini reviewer: `--approval-mode plan --output-format json --skip-trust [--model M]
//!   --prompt INSTRUCTION`, the prompt on stdin, in the worktree.
//!
//! The child starts from an empty environment plus [`crate::providers::env::launch_env`]'s
//! allowlist and `PATH`, in its own process group, and, when this process can make one, in a
//! cgroup v2 of its own ([`crate::runs::cgroup`]), joined before exec, so that a descendant
//! that calls `setsid` is still held. At the deadline (or on cancel) every member gets
//! SIGTERM, then after [`GRACE`] SIGKILL (`cgroup.kill` for a cgroup); after a normal exit
//! the group or cgroup is swept the same way, so that a finished child leaves nothing
//! running. Without a cgroup, a descendant that left the process group (`setsid`) is not
//! found: [`Containment::ProcessGroup`] says so.
//!
//! Output: `stdout.txt`, `stderr.txt`, `prompt.txt` and (codex) `last-message.txt` in the
//! scratch folder (0600), each read at most [`MAX_OUTPUT`] bytes. The answer is claude's
//! `result`, codex's last message, gemini's `response`.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::prompt::Role;
use crate::providers::profile::Profile;
use crate::providers::{Tool, Transport};
use crate::runs::cgroup;
use crate::tribunal::jurors::cli::{CLAUDE_DENIED, CLAUDE_TOOLS, claude_answer, gemini_answer};

/// The tools a claude worker or repair may use.
pub const CLAUDE_WRITER_TOOLS: &str = "Read,Grep,Glob,Edit,Write";
/// The tools a claude worker or repair is denied outright.
pub const CLAUDE_WRITER_DENIED: &str = "Bash,NotebookEdit,WebFetch,WebSearch";
/// What a gemini reviewer's `--prompt` says after the prompt given on stdin.
pub const GEMINI_REVIEW_INSTRUCTION: &str = "Answer now as the rules above say: the first line exactly APPROVE or REQUEST_CHANGES, then your reasons.";
pub const PROMPT_FILE: &str = "prompt.txt";
pub const STDOUT_FILE: &str = "stdout.txt";
pub const STDERR_FILE: &str = "stderr.txt";
pub const LAST_MESSAGE_FILE: &str = "last-message.txt";
/// At most this much of each output is read.
pub use crate::tribunal::jurors::cli::MAX_OUTPUT;
/// Between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long the kernel is given to empty the tree after SIGKILL before the outcome says the
/// tree may not be gone.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// One invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub tool: Tool,
    /// The account profile of `tool` (its home; the default profile uses the tool's own).
    pub profile: Profile,
    pub model: Option<String>,
    pub role: Role,
    /// The candidate's worktree: the child's working folder.
    pub worktree: PathBuf,
    /// A private (0700) folder the caller made, outside the worktree.
    pub scratch: PathBuf,
    pub prompt: String,
    pub deadline: Duration,
    /// The PATH the program is resolved on (and the child's PATH).
    pub path: OsString,
    /// The invoking environment; only the allowlist of it reaches the child.
    pub base_env: Vec<(OsString, OsString)>,
    /// The child runs inside a rig (`factory run --rig`), in a copy of the worktree there.
    pub enclosure: Option<Enclosure>,
}

/// How an invocation enters a rig ([`super::rig::Cell::enclosure`]).
#[derive(Debug, Clone)]
pub struct Enclosure {
    /// The host argv that enters the guest at `worktree`; the provider's argv is appended.
    pub prefix: Vec<String>,
    /// The guest's root as the host sees it (the program must be the same file there).
    pub root: PathBuf,
    /// The guest's proctor (a demo shim runs as it).
    pub proctor: String,
    /// The guest's PATH.
    pub path: String,
    /// The copy of the worktree in the guest: the child's working folder.
    pub worktree: String,
    /// A guest folder outside the copy (codex's last message is written there).
    pub scratch: String,
}

/// What held the child's process tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// A cgroup v2 of its own (this folder, removed afterwards).
    Cgroup(PathBuf),
    /// Its process group only, and why no cgroup: a descendant that called `setsid` is not
    /// found by the sweep.
    ProcessGroup { reason: String },
}

/// What one invocation came to. Returned only once the child's tree is gone (or, if the
/// kernel did not empty it within the bound after SIGKILL, `tree_gone` is false).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The tool's final message (claude `result`, codex last message, gemini `response`), or
    /// why there is none.
    pub answer: Result<String, String>,
    /// The exit status, when the child exited.
    pub exit: Option<i32>,
    /// The signal that ended the child, when one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub elapsed: Duration,
    /// The raw outputs, by role name (`prompt`, `stdout`, `stderr`, `last-message`), which the
    /// caller binds by path, size and SHA-256.
    pub files: Vec<(String, PathBuf)>,
    /// Processes of the tree other than the child itself that were still running when it
    /// ended (or at the deadline) and were stopped.
    pub leftovers_stopped: u32,
    /// SIGKILL was needed (SIGTERM did not end the tree within the grace).
    pub escalated: bool,
    pub tree_gone: bool,
    pub containment: Containment,
}

/// What prevents an invocation from starting.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error(
        "{tool} is not a factory {role}: the closed profiles are claude and codex for the worker and the repair, claude, codex and gemini for a reviewer. Remedy: choose one of those"
    )]
    NotAllowed { tool: Tool, role: &'static str },
    #[error(
        "the provider profile `{profile}` is a {profile_tool} profile, not {tool}. Remedy: name a {tool} profile (proctor profile list)"
    )]
    ProfileTool {
        profile: String,
        profile_tool: Tool,
        tool: Tool,
    },
    #[error(
        "the worktree {} is not a folder: {err}. Remedy: give the candidate's linked worktree", .path.display()
    )]
    Worktree { path: PathBuf, err: std::io::Error },
    #[error(
        "the scratch folder {} is inside the worktree {}: the raw outputs would become part of the candidate. Remedy: make the scratch folder outside the worktree", .scratch.display(), .worktree.display()
    )]
    ScratchInWorktree { scratch: PathBuf, worktree: PathBuf },
    #[error("the scratch folder is not usable: {0}. Remedy: make it a 0700 folder of this user")]
    Scratch(#[from] crate::files::FilesError),
    #[error(transparent)]
    NotInstalled(#[from] crate::providers::ProviderError),
    #[error("cannot {what}: {err}")]
    Io {
        what: &'static str,
        err: std::io::Error,
    },
    #[error(
        "{} is not visible in the rig as the same file (a namespace rig sees the host's /usr read-only, or its image's root): install the tool under /usr on the host, or run the worker on the host without --rig", .program.display()
    )]
    NotInRig { program: PathBuf },
    #[error("cannot start {}: {err}. Remedy: check that it is an executable program", .program.display())]
    Spawn {
        program: PathBuf,
        err: std::io::Error,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> InvokeError {
    move |err| InvokeError::Io { what, err }
}

/// Whether `tool` may play `role` (the closed profiles).
pub fn allowed(tool: Tool, role: Role) -> bool {
    match role {
        Role::Worker | Role::Repair => matches!(tool, Tool::Claude | Tool::Codex),
        Role::Reviewer { .. } => matches!(tool, Tool::Claude | Tool::Codex | Tool::Gemini),
    }
}

/// The argv (after the program) of `tool` playing `role`.
pub fn argv(
    tool: Tool,
    role: Role,
    model: Option<&str>,
    worktree: &Path,
    scratch: &Path,
) -> Result<Vec<String>, InvokeError> {
    if !allowed(tool, role) {
        return Err(InvokeError::NotAllowed {
            tool,
            role: role.name(),
        });
    }
    let s = |x: &str| x.to_string();
    let mut v: Vec<String> = match tool {
        Tool::Claude => {
            let (tools, denied, mode) = if role.writes() {
                (CLAUDE_WRITER_TOOLS, CLAUDE_WRITER_DENIED, "acceptEdits")
            } else {
                (CLAUDE_TOOLS, CLAUDE_DENIED, "dontAsk")
            };
            vec![
                s("-p"),
                s("--output-format"),
                s("json"),
                s("--no-session-persistence"),
                s("--tools"),
                s(tools),
                s("--allowed-tools"),
                s(tools),
                s("--disallowed-tools"),
                s(denied),
                s("--permission-mode"),
                s(mode),
                s("--strict-mcp-config"),
            ]
        }
        Tool::Codex => vec![
            s("exec"),
            s("--sandbox"),
            s(if role.writes() {
                "workspace-write"
            } else {
                "read-only"
            }),
            s("--skip-git-repo-check"),
            s("--ephemeral"),
            s("--ignore-user-config"),
            s("--ignore-rules"),
            s("-C"),
            worktree.display().to_string(),
            s("--output-last-message"),
            scratch.join(LAST_MESSAGE_FILE).display().to_string(),
            s("--color"),
            s("never"),
        ],
        Tool::Gemini => vec![
            s("--approval-mode"),
            s("plan"),
            s("--output-format"),
            s("json"),
            s("--skip-trust"),
        ],
        Tool::Grok | Tool::Opencode => unreachable!("refused by `allowed`"),
    };
    if let Some(m) = model {
        v.push(s("--model"));
        v.push(s(m));
    }
    match tool {
        Tool::Codex => v.push(s("-")),
        Tool::Gemini => {
            v.push(s("--prompt"));
            v.push(s(GEMINI_REVIEW_INSTRUCTION));
        }
        _ => {}
    }
    Ok(v)
}

/// The child's environment: the allowlist of `base_env` for `profile`, and `PATH`.
pub fn child_env(inv: &Invocation) -> Vec<(OsString, OsString)> {
    let mut env = crate::providers::env::launch_env(
        &inv.profile,
        inv.base_env.iter().map(|(k, v)| (k, v)),
        Transport::Pipe,
    );
    env.insert(OsString::from("PATH"), inv.path.clone());
    env.into_iter().collect()
}

/// A cgroup of the invocation's own, or why there is none.
struct Held {
    dir: PathBuf,
    base: cgroup::Base,
}

/// The cgroup base of an invocation: named after its scratch folder (resolved), so a server
/// that starts after one was killed finds what its invocations left ([`sweep_left`]).
fn cgroup_base(scratch: &Path) -> Result<cgroup::Base, String> {
    let key = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        scratch.as_os_str().as_encoded_bytes(),
    ));
    cgroup::Base::detect(&format!("factory-{}", &key[..16]))
}

/// What an invocation whose scratch folder is `scratch` left running when its server was
/// killed outright (the provider died with it; what it had started stays in the cgroup):
/// every member ended (SIGTERM, then `cgroup.kill`), the folders removed. Answers how many
/// cgroups held processes. Without a cgroup (a process group only) nothing is found: the
/// residual docs/factory.md names.
pub fn sweep_left(scratch: &Path) -> usize {
    let Ok(scratch) = std::fs::canonicalize(scratch) else {
        return 0;
    };
    let Ok(base) = cgroup_base(&scratch) else {
        return 0;
    };
    let mut found = 0;
    for dir in base.folders() {
        if cgroup::end_all(&dir, GRACE, KILL_WAIT).found {
            found += 1;
        }
    }
    base.remove_if_empty();
    found
}

fn make_cgroup(scratch: &Path) -> Result<Held, String> {
    let base = cgroup_base(scratch)?;
    match base.create("invoke", 0) {
        Ok(dir) => Ok(Held { dir, base }),
        Err(e) => {
            base.remove_if_empty();
            Err(format!("cannot create the invocation's cgroup: {e}"))
        }
    }
}

/// The live (not zombie) processes whose process group is `pgid`, from `/proc`.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command's closing parenthesis: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.len() > 2 && !matches!(f[0], "Z" | "X") && f[2].parse::<u32>().ok() == Some(pgid)
        })
        .collect()
}

/// The live members of the tree: the cgroup's when there is one, else the process group's.
fn tree(held: Option<&Held>, pgid: u32) -> Vec<u32> {
    let mut v = group_members(pgid);
    if let Some(h) = held {
        v.extend(cgroup::members(&h.dir));
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Reaps the leader if it exited (without blocking).
fn reap(child: &mut Child, status: &mut Option<std::process::ExitStatus>) {
    if status.is_none()
        && let Ok(Some(s)) = child.try_wait()
    {
        *status = Some(s);
    }
}

/// Waits until the tree is empty and the leader reaped, or `until`. True when both.
fn wait_gone(
    child: &mut Child,
    status: &mut Option<std::process::ExitStatus>,
    held: Option<&Held>,
    pgid: u32,
    until: Instant,
) -> bool {
    loop {
        reap(child, status);
        if status.is_some() && tree(held, pgid).is_empty() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What stopping a tree did.
struct Stopped {
    escalated: bool,
    gone: bool,
}

/// SIGTERM to every member (SIGCONT after it), [`GRACE`], then SIGKILL (`cgroup.kill` too),
/// then a wait for the tree to be gone.
fn stop_tree(
    child: &mut Child,
    status: &mut Option<std::process::ExitStatus>,
    held: Option<&Held>,
    pgid: u32,
) -> Stopped {
    let term = |sig: libc::c_int| {
        let _ = crate::process_group::signal_group(pgid, sig);
        if let Some(h) = held {
            cgroup::signal_members(&h.dir, sig);
        }
    };
    term(libc::SIGTERM);
    term(libc::SIGCONT);
    if wait_gone(child, status, held, pgid, Instant::now() + GRACE) {
        return Stopped {
            escalated: false,
            gone: true,
        };
    }
    if let Some(h) = held {
        let _ = cgroup::kill(&h.dir);
    }
    let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
    if status.is_none() {
        let _ = child.kill();
    }
    let gone = wait_gone(child, status, held, pgid, Instant::now() + KILL_WAIT);
    Stopped {
        escalated: true,
        gone,
    }
}

pub use crate::tribunal::jurors::cli::{read_bounded, stderr_tail};

/// The tool's final message from the files of `scratch`.
fn answer_of(tool: Tool, scratch: &Path) -> Result<String, String> {
    match tool {
        Tool::Claude => claude_answer(&read_bounded(&scratch.join(STDOUT_FILE))),
        Tool::Gemini => gemini_answer(&read_bounded(&scratch.join(STDOUT_FILE))).map_err(|why| {
            gemini_answer(&read_bounded(&scratch.join(STDERR_FILE)))
                .err()
                .filter(|e| e.starts_with("gemini answered with an error"))
                .unwrap_or(why)
        }),
        _ => {
            let text = read_bounded(&scratch.join(LAST_MESSAGE_FILE));
            if text.trim().is_empty() {
                Err("codex wrote no last message".to_string())
            } else {
                Ok(text)
            }
        }
    }
}

/// Runs one invocation to its end. `cancel`, when set, stops it like a deadline.
pub fn run(inv: &Invocation, cancel: Option<&AtomicBool>) -> Result<Outcome, InvokeError> {
    if !allowed(inv.tool, inv.role) {
        return Err(InvokeError::NotAllowed {
            tool: inv.tool,
            role: inv.role.name(),
        });
    }
    if inv.profile.tool != inv.tool {
        return Err(InvokeError::ProfileTool {
            profile: inv.profile.name.clone(),
            profile_tool: inv.profile.tool,
            tool: inv.tool,
        });
    }
    let worktree = std::fs::canonicalize(&inv.worktree)
        .and_then(|p| {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(std::io::Error::other("not a directory"))
            }
        })
        .map_err(|err| InvokeError::Worktree {
            path: inv.worktree.clone(),
            err,
        })?;
    crate::files::check_dir_is_private(&inv.scratch)?;
    let scratch = std::fs::canonicalize(&inv.scratch).map_err(io("resolve the scratch folder"))?;
    if scratch.starts_with(&worktree) {
        return Err(InvokeError::ScratchInWorktree { scratch, worktree });
    }
    let program = crate::providers::resolve(inv.tool, Some(&inv.path))?;
    let (program, args, env, cwd) = match &inv.enclosure {
        None => (
            program,
            argv(
                inv.tool,
                inv.role,
                inv.model.as_deref(),
                &worktree,
                &scratch,
            )?,
            child_env(inv),
            worktree.clone(),
        ),
        Some(enc) => {
            let mut full: Vec<String> = enc.prefix[1..].to_vec();
            if crate::providers::fake::is_demo_shim(&program) {
                // The shim execs `proctor demo-agent TOOL`: the guest's own proctor.
                full.extend([
                    enc.proctor.clone(),
                    "demo-agent".into(),
                    inv.tool.name().into(),
                ]);
            } else if crate::files::same_file_under(&enc.root, &program) {
                full.push(program.to_string_lossy().into_owned());
            } else {
                return Err(InvokeError::NotInRig { program });
            }
            full.extend(argv(
                inv.tool,
                inv.role,
                inv.model.as_deref(),
                Path::new(&enc.worktree),
                Path::new(&enc.scratch),
            )?);
            // The guest's PATH and home, not the host's (the account's home is not brought
            // in: no credential broker).
            let mut env: Vec<(OsString, OsString)> = child_env(inv)
                .into_iter()
                .filter(|(k, _)| k != "PATH" && k != "HOME")
                .collect();
            env.push(("PATH".into(), OsString::from(&enc.path)));
            env.push(("HOME".into(), "/root".into()));
            (PathBuf::from(&enc.prefix[0]), full, env, PathBuf::from("/"))
        }
    };

    for stale in [STDOUT_FILE, STDERR_FILE, LAST_MESSAGE_FILE, PROMPT_FILE] {
        match std::fs::remove_file(scratch.join(stale)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(InvokeError::Io {
                    what: "clear the scratch folder",
                    err,
                });
            }
        }
    }
    let prompt_path = scratch.join(PROMPT_FILE);
    crate::files::write_atomic(&prompt_path, inv.prompt.as_bytes())?;
    let stdin = crate::files::open_private_read(&prompt_path)?;
    let out = crate::files::create_private_new(&scratch.join(STDOUT_FILE))?;
    let err = crate::files::create_private_new(&scratch.join(STDERR_FILE))?;
    let mut files = vec![
        ("prompt".to_string(), prompt_path.clone()),
        ("stdout".to_string(), scratch.join(STDOUT_FILE)),
        ("stderr".to_string(), scratch.join(STDERR_FILE)),
    ];
    if inv.tool == Tool::Codex {
        // Made private before the tool writes it (it truncates the file it is given).
        drop(crate::files::create_private_new(
            &scratch.join(LAST_MESSAGE_FILE),
        )?);
        files.push(("last-message".to_string(), scratch.join(LAST_MESSAGE_FILE)));
    }

    let (held, containment) = match make_cgroup(&scratch) {
        Ok(h) => {
            let c = Containment::Cgroup(h.dir.clone());
            (Some(h), c)
        }
        Err(reason) => (None, Containment::ProcessGroup { reason }),
    };
    let release = |held: Option<Held>| {
        if let Some(h) = held {
            let _ = cgroup::remove(&h.dir);
            h.base.remove_if_empty();
        }
    };
    let procs = match held
        .as_ref()
        .map(|h| cgroup::open_procs(&h.dir))
        .transpose()
    {
        Ok(p) => p,
        Err(err) => {
            release(held);
            return Err(InvokeError::Io {
                what: "open the invocation's cgroup.procs",
                err,
            });
        }
    };
    let procs_fd = procs.as_ref().map(|f| f.as_raw_fd());

    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .current_dir(&cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    // SAFETY: runs in the forked child before exec; only async-signal-safe calls (write,
    // signal, sigprocmask, close_range, fcntl, prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = procs_fd {
                crate::runs::cgroup::join_in_child(fd)?;
            }
            crate::runs::reset_signals_in_child();
            crate::runs::cloexec_inherited_fds();
            // The server that owns the invocation dies (even by SIGKILL): the provider dies
            // with it, never left running with nobody to stop it. (Its own children are
            // held by the cgroup or group, which a killed server cannot sweep: residual.)
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() == 1 {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let spawned = {
        let _guard = crate::runs::fork_guard();
        cmd.spawn()
    };
    drop(procs);
    let mut child = match spawned {
        Ok(c) => c,
        Err(err) => {
            release(held);
            return Err(InvokeError::Spawn { program, err });
        }
    };
    let pgid = child.id();
    let end = started + inv.deadline;
    let mut status: Option<std::process::ExitStatus> = None;
    let (mut timed_out, mut cancelled) = (false, false);
    let mut pause = Duration::from_millis(5);
    while status.is_none() {
        reap(&mut child, &mut status);
        if status.is_some() {
            break;
        }
        let now = Instant::now();
        if now >= end {
            timed_out = true;
            break;
        }
        if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
            cancelled = true;
            break;
        }
        std::thread::sleep(pause.min(end - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    // What else of the tree is still running (the leader aside).
    let leftovers = tree(held.as_ref(), pgid)
        .into_iter()
        .filter(|&p| p != pgid)
        .count() as u32;
    let stopped = if status.is_none() || leftovers > 0 {
        stop_tree(&mut child, &mut status, held.as_ref(), pgid)
    } else {
        Stopped {
            escalated: false,
            gone: true,
        }
    };
    if status.is_none() {
        // SIGKILL was sent to the leader; this returns once the kernel ended it.
        status = child.wait().ok();
    }
    let elapsed = started.elapsed();
    let tree_gone = stopped.gone;
    release(held);
    // A tool that replaced a file (rename) made it with its own mode: private again.
    for (_, f) in &files {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::symlink_metadata(f)
            && m.is_file()
            && m.permissions().mode() & 0o777 != 0o600
        {
            let _ = std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600));
        }
    }

    let exit = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal());
    let answer = if timed_out {
        Err(format!(
            "timeout: {} did not finish within {:.1} s (its process tree was stopped)",
            inv.tool.name(),
            inv.deadline.as_secs_f64()
        ))
    } else if cancelled {
        Err(format!(
            "cancelled: {} was stopped before it finished",
            inv.tool.name()
        ))
    } else {
        if let (Some(enc), Tool::Codex) = (&inv.enclosure, inv.tool) {
            // codex wrote its last message in the guest: the guest's `cat` brings it here.
            let guest = format!("{}/{LAST_MESSAGE_FILE}", enc.scratch);
            if let Ok(bytes) = super::rig::read_guest(&enc.prefix, &enc.path, &guest, MAX_OUTPUT) {
                let _ = crate::files::write_atomic(&scratch.join(LAST_MESSAGE_FILE), &bytes);
            }
        }
        match (answer_of(inv.tool, &scratch), exit) {
            (Ok(text), Some(0)) => Ok(text),
            (Ok(_), _) => Err(format!(
                "{} exited with {} (stderr: {})",
                inv.tool.name(),
                status.map(|s| s.to_string()).unwrap_or_default(),
                stderr_tail(&scratch)
            )),
            (Err(why), _) => Err(format!(
                "{why} (exit: {}; stderr: {})",
                status.map(|s| s.to_string()).unwrap_or_default(),
                stderr_tail(&scratch)
            )),
        }
    };
    Ok(Outcome {
        answer,
        exit,
        signal,
        timed_out,
        cancelled,
        elapsed,
        files,
        leftovers_stopped: leftovers,
        escalated: stopped.escalated,
        tree_gone,
        containment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiles_are_closed_and_their_argv_is_exact() {
        let wt = Path::new("/w/t");
        let sc = Path::new("/s/c");
        let w = argv(Tool::Claude, Role::Worker, Some("m1"), wt, sc).unwrap();
        assert_eq!(
            w.join(" "),
            "-p --output-format json --no-session-persistence --tools Read,Grep,Glob,Edit,Write \
             --allowed-tools Read,Grep,Glob,Edit,Write --disallowed-tools \
             Bash,NotebookEdit,WebFetch,WebSearch --permission-mode acceptEdits \
             --strict-mcp-config --model m1"
        );
        let r = argv(Tool::Claude, Role::Reviewer { review: 1 }, None, wt, sc).unwrap();
        assert!(
            r.join(" ")
                .contains("--tools Read,Grep,Glob --allowed-tools Read,Grep,Glob")
        );
        assert!(r.join(" ").contains("--permission-mode dontAsk"));
        assert!(r.join(" ").contains("Edit,Write"), "denied: {r:?}");
        assert!(!r.contains(&"--model".to_string()));
        let c = argv(Tool::Codex, Role::Repair, None, wt, sc).unwrap();
        assert_eq!(
            c.join(" "),
            "exec --sandbox workspace-write --skip-git-repo-check --ephemeral \
             --ignore-user-config --ignore-rules -C /w/t --output-last-message \
             /s/c/last-message.txt --color never -"
        );
        let c = argv(Tool::Codex, Role::Reviewer { review: 2 }, Some("g"), wt, sc).unwrap();
        assert_eq!(c[2], "read-only");
        assert_eq!(&c[c.len() - 3..], ["--model", "g", "-"]);
        let g = argv(Tool::Gemini, Role::Reviewer { review: 1 }, None, wt, sc).unwrap();
        assert_eq!(g[..2], ["--approval-mode", "plan"]);
        for (tool, role) in [
            (Tool::Gemini, Role::Worker),
            (Tool::Gemini, Role::Repair),
            (Tool::Grok, Role::Worker),
            (Tool::Opencode, Role::Reviewer { review: 1 }),
        ] {
            let e = argv(tool, role, None, wt, sc).unwrap_err();
            assert!(matches!(e, InvokeError::NotAllowed { .. }), "{e}");
            assert!(e.to_string().contains("Remedy"), "{e}");
        }
    }

    #[test]
    fn routing_overrides_never_reach_the_child() {
        let hostile = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/op"),
            ("ANTHROPIC_API_KEY", "sk"),
            ("ANTHROPIC_AUTH_TOKEN", "t"),
            ("ANTHROPIC_BASE_URL", "https://evil"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("CLAUDE_CODE_USE_VERTEX", "1"),
            ("OPENAI_API_KEY", "sk"),
            ("OPENAI_BASE_URL", "https://evil"),
            ("CODEX_API_KEY", "sk"),
            ("CODEX_HOME", "/else"),
            ("CODEX_SANDBOX", "seatbelt"),
            ("HTTPS_PROXY", "http://p"),
            ("HTTP_PROXY", "http://p"),
        ];
        for tool in [Tool::Claude, Tool::Codex, Tool::Gemini] {
            let inv = Invocation {
                tool,
                profile: Profile::default_for(tool, Path::new("/home/op")),
                model: None,
                role: Role::Reviewer { review: 1 },
                worktree: "/w".into(),
                scratch: "/s".into(),
                prompt: String::new(),
                deadline: Duration::from_secs(1),
                path: "/shims:/usr/bin".into(),
                enclosure: None,
                base_env: hostile
                    .iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                    .collect(),
            };
            let env = child_env(&inv);
            let names: Vec<String> = env
                .iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, ["HOME", "PATH"], "{tool}");
            assert_eq!(env[1].1, OsString::from("/shims:/usr/bin"));
        }
    }
}
