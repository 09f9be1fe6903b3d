//! The pipe transport: stdin, stdout and stderr as three separate pipes, the child in a new
//! process group of its own (it stays in the server's session and has no controlling
//! terminal).

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::pump::set_nonblocking;
use super::{RunError, RunSpec, cloexec_inherited_fds, fork_guard, reset_signals_in_child};

pub(crate) struct PipeChild {
    pub pid: u32,
    /// The child's stdin (non-blocking).
    pub stdin: File,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

pub(crate) fn spawn(spec: &RunSpec) -> Result<PipeChild, RunError> {
    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..])
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let cgroup_procs = super::cgroup::procs_for_spawn(spec.cgroup.as_deref())?;
    let cgroup_fd = cgroup_procs.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: runs in the forked child before exec; only async-signal-safe calls
    // (write, signal, sigprocmask, close_range, fcntl).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = cgroup_fd {
                super::cgroup::join_in_child(fd)?;
            }
            reset_signals_in_child();
            cloexec_inherited_fds();
            Ok(())
        });
    }
    let mut child = {
        // std creates its pipes close-on-exec atomically; the guard keeps this fork out of
        // a PTY's unprotected window in another thread.
        let _guard = fork_guard();
        cmd.spawn().map_err(|e| RunError::Spawn {
            program: spec.argv[0].clone().into(),
            err: e,
        })?
    };
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Unreachable with Stdio::piped(); do not leave the child behind if it happens.
        super::abort_child(pid);
        return Err(RunError::io(
            "take the child's pipes",
            std::io::Error::other("std did not create them"),
        ));
    };
    let stdin = File::from(OwnedFd::from(stdin));
    if let Err(e) = set_nonblocking(stdin.as_raw_fd()) {
        super::abort_child(pid);
        return Err(RunError::io("make stdin non-blocking", e));
    }
    // Dropping a std Child neither kills nor reaps it; the run's waiter reaps by pid.
    drop(child);
    drop(cgroup_procs);
    Ok(PipeChild {
        pid,
        stdin,
        stdout: OwnedFd::from(stdout),
        stderr: OwnedFd::from(stderr),
    })
}
