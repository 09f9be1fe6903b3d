//! Process facts read from the OS: exit statuses as `waitpid` reported them, `/proc/<pid>/stat`
//! (process group, session, controlling terminal, start time), signals to a process or a
//! process group, and program lookup on an explicit `PATH`.
//!
//! Nothing here invents a value: a status that was not observed is `None`, a process whose
//! `/proc` entry cannot be read has no identity.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How a process ended, exactly as `waitpid` reported it.
///
/// Exactly one of `exit_code` and `signal` is set. The only constructor is private and reads
/// a raw wait status, so a value of this type is always an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ExitStatus {
    exit_code: Option<i32>,
    signal: Option<i32>,
    core_dumped: bool,
}

impl ExitStatus {
    /// Decodes a raw `waitpid` status. `None` for a status that is neither an exit nor a
    /// termination by signal (stopped/continued), which this module never asks for.
    pub(crate) fn from_wait_status(status: libc::c_int) -> Option<Self> {
        if libc::WIFEXITED(status) {
            Some(ExitStatus {
                exit_code: Some(libc::WEXITSTATUS(status)),
                signal: None,
                core_dumped: false,
            })
        } else if libc::WIFSIGNALED(status) {
            Some(ExitStatus {
                exit_code: None,
                signal: Some(libc::WTERMSIG(status)),
                core_dumped: libc::WCOREDUMP(status),
            })
        } else {
            None
        }
    }

    /// The code passed to `exit`, when the process exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// The signal that terminated the process, when one did.
    pub fn signal(&self) -> Option<i32> {
        self.signal
    }

    /// Whether the kernel reported a core dump with the terminating signal.
    pub fn core_dumped(&self) -> bool {
        self.core_dumped
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.exit_code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(sig)) => write!(f, "killed by signal {sig} ({})", signal_name(sig)),
            (None, None) => write!(f, "unknown"),
        }
    }
}

/// The conventional name of a signal number (`SIGKILL`), or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// The fields of `/proc/<pid>/stat` that proctor uses (see proc(5); numbers are the
/// 1-based field numbers there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcStat {
    /// Field 1.
    pub pid: i32,
    /// Field 3 (`R`, `S`, `D`, `Z`, …).
    pub state: char,
    /// Field 4.
    pub ppid: i32,
    /// Field 5: the process group.
    pub pgrp: i32,
    /// Field 6: the session.
    pub session: i32,
    /// Field 7: the controlling terminal's device number, 0 for none.
    pub tty_nr: i32,
    /// Field 8: the foreground process group of the controlling terminal, -1 for none.
    pub tpgid: i32,
    /// Field 22: start time after boot, in clock ticks. With the pid, it names one process:
    /// a recycled pid has a later start time.
    pub start_time: u64,
}

/// Reads `/proc/<pid>/stat`. `None` when the process does not exist (or `/proc` is not
/// mounted or readable).
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let raw = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&raw)
}

/// Parses the content of a `/proc/<pid>/stat` file. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so the fields after it are
/// found from the *last* `)`.
pub fn parse_proc_stat(raw: &[u8]) -> Option<ProcStat> {
    let open = raw.iter().position(|&b| b == b'(')?;
    let close = raw.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let pid: i32 = std::str::from_utf8(&raw[..open])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let rest = std::str::from_utf8(raw.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 of proc(5), so field N is fields[N - 3].
    let field = |n: usize| fields.get(n - 3).copied();
    let mut state_chars = field(3)?.chars();
    let state = state_chars.next()?;
    if state_chars.next().is_some() {
        return None;
    }
    Some(ProcStat {
        pid,
        state,
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        tty_nr: field(7)?.parse().ok()?,
        tpgid: field(8)?.parse().ok()?,
        start_time: field(22)?.parse().ok()?,
    })
}

/// The start time (field 22 of `/proc/<pid>/stat`) of the process that now has `pid`, or
/// `None` if there is none. Record it with the pid at launch; a later server compares.
pub fn process_identity(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start_time)
}

/// Whether `pid` still names the process that was recorded with `start_time`: it exists and
/// its start time is the recorded one. A recycled pid has a different start time.
pub fn is_same_process(pid: u32, start_time: u64) -> bool {
    process_identity(pid) == Some(start_time)
}

/// Whether a process with this pid exists (a zombie counts): `kill(pid, 0)` succeeds or fails
/// only for lack of permission.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    probe(pid)
}

/// Whether the process group `pgid` has at least one member (zombies count).
pub fn group_exists(pgid: u32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    if pgid <= 1 {
        return false;
    }
    probe(-pgid)
}

/// Whether the process group `pgid` has a member that is not a zombie. A zombie has already
/// died; it only waits for its parent (for a reparented grandchild: init, which may take a
/// while) to collect it. Cheap when the group is empty (`kill(-pgid, 0)`); otherwise scans
/// `/proc`. When `/proc` cannot be read, answers `true` (the cautious answer).
///
/// A member forked while the scan runs can be missed; callers use this after signalling the
/// whole group, when its members are dying.
pub fn group_has_live_members(pgid: u32) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    let Ok(pgid) = i32::try_from(pgid) else {
        return true;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .any(|s| s.pgrp == pgid && s.state != 'Z' && s.state != 'X')
}

fn probe(target: libc::pid_t) -> bool {
    // SAFETY: signal 0 performs only the existence and permission checks.
    let r = unsafe { libc::kill(target, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The one guarded signal function (refuses pids 0, 1 and negative ones), shared by every
/// stop path.
pub(crate) use crate::process_group::{signal_group, signal_process};

/// Finds `program` on the `PATH` given in `env` (the child's environment, not this
/// process's), the way `execvp` would, and returns an absolute path. A name that contains a
/// `/` is returned as is when it is absolute and executable. Relative `PATH` entries (`.`,
/// empty entries) are skipped: they would make the result depend on the working folder.
pub fn which<'a>(
    program: &OsStr,
    env: impl IntoIterator<Item = (&'a OsString, &'a OsString)>,
) -> Option<PathBuf> {
    let candidate = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        return (candidate.is_absolute() && is_executable_file(candidate))
            .then(|| candidate.to_path_buf());
    }
    if program.is_empty() {
        return None;
    }
    let path = env
        .into_iter()
        .find(|(k, _)| k.as_bytes() == b"PATH")
        .map(|(_, v)| v.clone())?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| is_executable_file(p))
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_names_with_spaces_and_parentheses() {
        let mut raw = b"4242 (a) (b c)) S 1 4242 4242 34816 4242 4194560".to_vec();
        // fields 10..21, then start time (22) and a few more.
        raw.extend_from_slice(b" 1 2 3 4 5 6 7 8 9 10 11 12 987654 13 14\n");
        let s = parse_proc_stat(&raw).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!((s.pgrp, s.session), (4242, 4242));
        assert_eq!(s.tty_nr, 34816);
        assert_eq!(s.tpgid, 4242);
        assert_eq!(s.start_time, 987654);
        assert!(parse_proc_stat(b"12 (x) S 1 2").is_none());
    }

    #[test]
    fn own_identity_is_stable_and_a_different_start_time_is_not_us() {
        let me = std::process::id();
        let start = process_identity(me).unwrap();
        assert_eq!(process_identity(me), Some(start));
        assert!(is_same_process(me, start));
        assert!(!is_same_process(me, start + 1));
        let s = proc_stat(me).unwrap();
        assert_eq!(s.pid as u32, me);
    }

    #[test]
    fn wait_status_decoding_matches_the_kernel_encoding() {
        // exit(7): code in bits 8..15.
        let e = ExitStatus::from_wait_status(7 << 8).unwrap();
        assert_eq!((e.exit_code(), e.signal()), (Some(7), None));
        // killed by SIGKILL without core.
        let k = ExitStatus::from_wait_status(libc::SIGKILL).unwrap();
        assert_eq!((k.exit_code(), k.signal()), (None, Some(libc::SIGKILL)));
        assert_eq!(k.to_string(), "killed by signal 9 (SIGKILL)");
        // stopped (0x7f in the low byte) is not an end.
        assert!(ExitStatus::from_wait_status((libc::SIGSTOP << 8) | 0x7f).is_none());
    }

    #[test]
    fn which_uses_the_given_path_and_skips_relative_entries() {
        let env = [(OsString::from("PATH"), OsString::from(".:relative:/bin"))];
        let found = which(OsStr::new("sh"), env.iter().map(|(k, v)| (k, v))).unwrap();
        assert_eq!(found, PathBuf::from("/bin/sh"));
        let none: [(OsString, OsString); 0] = [];
        assert!(which(OsStr::new("sh"), none.iter().map(|(k, v)| (k, v))).is_none());
        assert!(
            which(
                OsStr::new("no-such-tool-xyz"),
                env.iter().map(|(k, v)| (k, v))
            )
            .is_none()
        );
        assert_eq!(
            which(OsStr::new("/bin/sh"), none.iter().map(|(k, v)| (k, v))),
            Some(PathBuf::from("/bin/sh"))
        );
        assert!(which(OsStr::new("bin/sh"), env.iter().map(|(k, v)| (k, v))).is_none());
    }

    #[test]
    fn group_one_and_zero_are_refused() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
        assert!(!group_exists(0));
        assert!(!group_exists(1));
    }
}
