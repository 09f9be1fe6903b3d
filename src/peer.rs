//! Who is calling, as the kernel reports it (principle 8 of the design).
//!
//! A bearer token names a role; it does not say who holds it: an agent running as the
//! operator's uid can read the owner token from the home. What the kernel says about the
//! process at the other end of a Unix socket cannot be forged that way:
//!
//! - `SO_PEERCRED` gives the peer's pid and uid at `connect(2)`;
//! - `/proc/<pid>/stat` gives its parent, process group, session, controlling terminal and
//!   that terminal's foreground group, and a start time that, with the pid, names one
//!   process (a recycled pid has a later start time);
//! - `/proc/<pid>/exe` is the executable it runs (compared by device and inode);
//! - the ppid chain says whether the peer descends from the server. The server is a child
//!   subreaper, so a run's descendants stay in its tree however they fork (setsid, double
//!   fork): an orphan is reparented to the server, never to init.
//!
//! The server reads a [`Peer`] at accept and hands it to every request of that connection;
//! authority routes re-read the process with [`authority_check`] when they are called.

use std::os::unix::fs::MetadataExt;

use serde::Serialize;

use crate::runs::process::{ProcStat, proc_stat};

/// How many parents the ancestry walk follows before it gives up (and says unknown).
const MAX_DEPTH: usize = 4096;

/// A file as the kernel names it: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// The executable a process runs (`/proc/<pid>/exe`, followed), by device and inode.
/// `pid` is a number or `self`.
pub fn exe_id(pid: &str) -> Option<FileId> {
    let m = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// What the server knows about itself, read once at start.
#[derive(Debug, Clone)]
pub struct ServerSelf {
    pub pid: u32,
    pub euid: u32,
    /// The server's own executable. `None` if `/proc/self/exe` cannot be read, and then no
    /// peer passes the binary check.
    pub exe: Option<FileId>,
}

impl ServerSelf {
    pub fn current() -> ServerSelf {
        ServerSelf {
            pid: std::process::id(),
            // SAFETY: geteuid(2) cannot fail.
            euid: unsafe { libc::geteuid() },
            exe: exe_id("self"),
        }
    }
}

/// Where a process stands relative to the server's process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ancestry {
    /// The server is one of its ancestors (or it is the server).
    Descendant,
    /// Its ppid chain reaches pid 1 (or 0) without meeting the server.
    Outside,
    /// The chain could not be read to its end (a process vanished, a pid was recycled while
    /// we read, the peer is in another pid namespace). Treated as a descendant.
    Unknown,
    /// Its ppid chain does not meet the server, but the kernel places it in one of this
    /// server's run cgroups: a run's process whatever its ancestry says. Treated as a
    /// descendant.
    InRunCgroup,
}

/// Walks the ppid chain from `pid` up, looking for `ancestor`. A parent never starts after
/// its child: a parent whose start time is later is a recycled pid (the real parent died
/// while we read), and that walk is retried, then given up as [`Ancestry::Unknown`].
pub fn ancestry(pid: u32, ancestor: u32) -> Ancestry {
    ancestry_with(pid, ancestor, &|p| proc_stat(p))
}

fn ancestry_with(pid: u32, ancestor: u32, stat: &dyn Fn(u32) -> Option<ProcStat>) -> Ancestry {
    for _attempt in 0..3 {
        match walk(pid, ancestor, stat) {
            Walk::Done(a) => return a,
            Walk::Raced => continue,
        }
    }
    Ancestry::Unknown
}

enum Walk {
    Done(Ancestry),
    Raced,
}

fn walk(pid: u32, ancestor: u32, stat: &dyn Fn(u32) -> Option<ProcStat>) -> Walk {
    if pid == 0 {
        // SO_PEERCRED reports 0 for a peer outside our pid namespace.
        return Walk::Done(Ancestry::Unknown);
    }
    let mut cur = pid;
    let mut child_start: Option<u64> = None;
    for _ in 0..MAX_DEPTH {
        if cur == ancestor {
            return Walk::Done(Ancestry::Descendant);
        }
        if cur <= 1 {
            return Walk::Done(Ancestry::Outside);
        }
        let Some(st) = stat(cur) else {
            // The peer itself gone: nothing to say. An ancestor gone: its child was
            // reparented meanwhile; read again.
            return if child_start.is_none() {
                Walk::Done(Ancestry::Unknown)
            } else {
                Walk::Raced
            };
        };
        if let Some(cs) = child_start
            && st.start_time > cs
        {
            return Walk::Raced;
        }
        child_start = Some(st.start_time);
        if st.ppid <= 0 {
            return Walk::Done(Ancestry::Outside);
        }
        cur = st.ppid as u32;
    }
    Walk::Done(Ancestry::Unknown)
}

/// The process at the other end of one connection, as read at accept.
#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    /// 0 when the kernel gave none (a peer in another pid namespace).
    pub pid: u32,
    pub uid: u32,
    /// The peer's start time (field 22 of its stat) at accept: with the pid, it names the
    /// process; a later check that finds another start time finds another process.
    pub start_time: Option<u64>,
    pub ancestry: Ancestry,
}

impl Peer {
    /// Reads what the kernel says about `pid` (from `SO_PEERCRED`).
    pub fn observe(pid: Option<i32>, uid: u32, server: &ServerSelf) -> Peer {
        let pid = pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0);
        let start_time = if pid == 0 {
            None
        } else {
            proc_stat(pid).map(|s| s.start_time)
        };
        let ancestry = if start_time.is_none() {
            Ancestry::Unknown
        } else {
            ancestry(pid, server.pid)
        };
        Peer {
            pid,
            uid,
            start_time,
            ancestry,
        }
    }

    /// A peer that is unknown in every respect: what a request that did not come through
    /// the server's accept loop carries. It is an agent, and passes no authority check.
    pub fn unknown() -> Peer {
        Peer {
            pid: 0,
            uid: u32::MAX,
            start_time: None,
            ancestry: Ancestry::Unknown,
        }
    }

    /// Whether the peer must be treated as an agent whatever its token says: it descends
    /// from the server (a run, or anything a run started), or that cannot be ruled out.
    pub fn in_server_tree(&self) -> bool {
        self.ancestry != Ancestry::Outside
    }
}

/// One check of [`authority_check`] that a peer failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failed {
    /// The process that connected is gone, or its pid now names another process.
    Gone,
    /// Its executable is not the server's own (device and inode of `/proc/self/exe`).
    NotProctorBinary,
    /// It has no controlling terminal.
    NoControllingTerminal,
    /// It has one, but is not its foreground process group.
    NotForeground,
    /// It descends from the server: it is a run, or was started by one.
    InServerTree,
}

impl Failed {
    pub fn code(self) -> &'static str {
        match self {
            Failed::Gone => "gone",
            Failed::NotProctorBinary => "not_proctor_binary",
            Failed::NoControllingTerminal => "no_controlling_terminal",
            Failed::NotForeground => "not_foreground",
            Failed::InServerTree => "in_server_tree",
        }
    }

    /// What failed, in words for the refusal's message.
    pub fn describe(self) -> &'static str {
        match self {
            Failed::Gone => "the calling process is gone or its pid now names another process",
            Failed::NotProctorBinary => {
                "the calling process is not this server's proctor binary (its executable's \
                 device and inode differ from the server's /proc/self/exe; if proctor was \
                 rebuilt or upgraded since the server started, restart the server with \
                 `proctor server stop`)"
            }
            Failed::NoControllingTerminal => "the calling process has no controlling terminal",
            Failed::NotForeground => {
                "the calling process is not the foreground job of its terminal"
            }
            Failed::InServerTree => {
                "the calling process descends from the server (it is an agent run or was \
                 started by one)"
            }
        }
    }
}

/// The checks an authority route makes on top of the token: the peer runs this proctor
/// binary, at a controlling terminal whose foreground group it is, and does not descend
/// from the server. Re-reads the process now (its terminal and executable may have changed
/// since accept). Returns every check that failed; empty means it passed.
pub fn authority_check(peer: &Peer, server: &ServerSelf) -> Vec<Failed> {
    let mut failed = Vec::new();
    let same = |st: &Option<ProcStat>| match (st, peer.start_time) {
        (Some(st), Some(t)) => st.start_time == t,
        _ => false,
    };
    let st = if peer.pid == 0 {
        None
    } else {
        proc_stat(peer.pid)
    };
    if !same(&st) {
        failed.push(Failed::Gone);
        if peer.in_server_tree() {
            failed.push(Failed::InServerTree);
        }
        return failed;
    }
    let st = st.expect("checked above");
    let exe = exe_id(&peer.pid.to_string());
    // The pid must still name the same process after the executable was read.
    if !same(&proc_stat(peer.pid)) {
        return vec![Failed::Gone];
    }
    if exe.is_none() || exe != server.exe {
        failed.push(Failed::NotProctorBinary);
    }
    if st.tty_nr == 0 {
        failed.push(Failed::NoControllingTerminal);
    } else if st.tpgid != st.pgrp {
        failed.push(Failed::NotForeground);
    }
    if peer.in_server_tree() || ancestry(peer.pid, server.pid) != Ancestry::Outside {
        failed.push(Failed::InServerTree);
    }
    failed
}

/// Makes this process a child subreaper: orphaned descendants are reparented to it, not to
/// init, so everything a run starts stays in the server's process tree.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl(2) with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::process::CommandExt;

    fn st(pid: i32, ppid: i32, start_time: u64) -> ProcStat {
        ProcStat {
            pid,
            state: 'S',
            ppid,
            pgrp: pid,
            session: pid,
            tty_nr: 0,
            tpgid: -1,
            start_time,
        }
    }

    fn table(rows: &[(i32, i32, u64)]) -> HashMap<u32, ProcStat> {
        rows.iter()
            .map(|&(p, pp, t)| (p as u32, st(p, pp, t)))
            .collect()
    }

    #[test]
    fn the_walk_finds_the_server_among_the_ancestors() {
        let t = table(&[(50, 1, 10), (60, 50, 20), (70, 60, 30), (80, 1, 5)]);
        let f = |p: u32| t.get(&p).cloned();
        assert_eq!(ancestry_with(70, 50, &f), Ancestry::Descendant);
        assert_eq!(ancestry_with(50, 50, &f), Ancestry::Descendant);
        assert_eq!(ancestry_with(80, 50, &f), Ancestry::Outside);
        assert_eq!(ancestry_with(0, 50, &f), Ancestry::Unknown);
        assert_eq!(ancestry_with(99, 50, &f), Ancestry::Unknown, "a peer gone");
    }

    #[test]
    fn a_recycled_parent_pid_is_not_trusted() {
        // 60's parent 40 died; its pid was taken by a process started after 60.
        let t = table(&[(60, 40, 20), (40, 1, 25)]);
        let f = |p: u32| t.get(&p).cloned();
        assert_eq!(ancestry_with(60, 50, &f), Ancestry::Unknown);
    }

    #[test]
    fn a_cycle_or_an_endless_chain_is_unknown() {
        let t = table(&[(60, 61, 20), (61, 60, 20)]);
        let f = |p: u32| t.get(&p).cloned();
        assert_eq!(ancestry_with(60, 50, &f), Ancestry::Unknown);
    }

    #[test]
    fn real_processes_this_one_and_a_child() {
        let me = std::process::id();
        assert_eq!(ancestry(me, me), Ancestry::Descendant);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert_eq!(ancestry(child.id(), me), Ancestry::Descendant);
        // Our parent is not our descendant.
        let parent = std::os::unix::process::parent_id();
        assert_eq!(ancestry(parent, me), Ancestry::Outside);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_child_without_a_terminal_running_another_binary_fails_the_checks() {
        let server = ServerSelf::current();
        // A child of ours in its own session: no controlling terminal, not our binary, and
        // a descendant of "the server" (this process).
        let mut child = std::process::Command::new("sleep");
        child.arg("30");
        // SAFETY: setsid(2) is async-signal-safe.
        unsafe {
            child.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = child.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        // Wait for the exec (the executable changes from ours to sleep).
        while exe_id(&child.id().to_string()) == server.exe {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let peer = Peer::observe(Some(child.id() as i32), server.euid, &server);
        assert_eq!(peer.ancestry, Ancestry::Descendant);
        assert!(peer.in_server_tree());
        let failed = authority_check(&peer, &server);
        assert_eq!(
            failed,
            vec![
                Failed::NotProctorBinary,
                Failed::NoControllingTerminal,
                Failed::InServerTree
            ]
        );
        let _ = child.kill();
        let _ = child.wait();
        // The process is gone: a check now says so.
        assert_eq!(authority_check(&peer, &server)[0], Failed::Gone);
    }

    #[test]
    fn a_foreground_process_at_its_terminal_outside_the_tree_passes() {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new("sleep");
        cmd.arg("30");
        let mut child = pair.slave.spawn_command(cmd).unwrap();
        let pid = child.process_id().unwrap();
        let ours = exe_id("self");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while exe_id(&pid.to_string()).is_none() || exe_id(&pid.to_string()) == ours {
            assert!(std::time::Instant::now() < deadline, "sleep never ran");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // A "server" that is not among its ancestors, whose binary is the one it runs: the
        // child (session leader of the PTY, its foreground group) passes every check.
        // SAFETY: geteuid(2) cannot fail.
        let euid = unsafe { libc::geteuid() };
        let server = ServerSelf {
            pid: u32::MAX - 7,
            euid,
            exe: exe_id(&pid.to_string()),
        };
        let peer = Peer::observe(Some(pid as i32), euid, &server);
        assert_eq!(peer.ancestry, Ancestry::Outside);
        assert!(!peer.in_server_tree());
        assert_eq!(authority_check(&peer, &server), vec![]);
        // The same process, judged by a server of another binary: (a) alone fails.
        let other = ServerSelf {
            exe: ours,
            ..server.clone()
        };
        assert_eq!(
            authority_check(&peer, &other),
            vec![Failed::NotProctorBinary]
        );
        // And by a server it descends from (this process): (c) fails too.
        let me = ServerSelf {
            pid: std::process::id(),
            ..server.clone()
        };
        let inside = Peer::observe(Some(pid as i32), euid, &me);
        assert_eq!(authority_check(&inside, &me), vec![Failed::InServerTree]);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn the_unknown_peer_passes_nothing() {
        let server = ServerSelf::current();
        let p = Peer::unknown();
        assert!(p.in_server_tree());
        assert_eq!(
            authority_check(&p, &server),
            vec![Failed::Gone, Failed::InServerTree]
        );
    }
}
