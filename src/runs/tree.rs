//! How a run's processes are held, and the process tree read from `/proc`.
//!
//! A run is held either by a cgroup of its own ([`super::cgroup`]) or, where none is
//! writable, by attribution: the server is a child subreaper, so a process that a run's
//! descendant orphans reparents to the server instead of init; a periodic scan of each run's
//! descendants records every process it sees (pid and start time), so a process that is
//! later reparented (or that left its process group and session) is still known as the
//! run's and is stopped with it. A process that forks and exits between two scans leaves
//! its child unattributed: that is the fallback's residual.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use super::process::{ProcStat, parse_proc_stat};

/// A process named by its pid and start time (a recycled pid has another start time).
pub type Ident = (u32, u64);

/// How a run's processes are held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mechanism", rename_all = "lowercase")]
pub enum Hold {
    /// A cgroup v2 folder of its own.
    Cgroup { path: PathBuf },
    /// The server is a child subreaper and attributes descendants by scanning.
    Subreaper,
}

impl Hold {
    pub fn name(&self) -> &'static str {
        match self {
            Hold::Cgroup { .. } => "cgroup",
            Hold::Subreaper => "subreaper",
        }
    }

    pub fn cgroup(&self) -> Option<&std::path::Path> {
        match self {
            Hold::Cgroup { path } => Some(path),
            Hold::Subreaper => None,
        }
    }
}

/// The processes attributed to a run so far (leader excluded), shared between the run and
/// the server's scanner.
#[derive(Debug, Default)]
pub struct Tracked {
    set: Mutex<BTreeSet<Ident>>,
    /// The set changed since it was last kept on disk, and when that was.
    persist: Mutex<(bool, Option<std::time::Instant>)>,
}

impl Tracked {
    pub fn new() -> Arc<Tracked> {
        Arc::new(Tracked::default())
    }

    pub fn lock(&self) -> MutexGuard<'_, BTreeSet<Ident>> {
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds processes; true when something new was added.
    pub fn add(&self, ids: impl IntoIterator<Item = Ident>) -> bool {
        let mut s = self.lock();
        let before = s.len();
        s.extend(ids);
        s.len() != before
    }

    /// Notes a change; true when the set is due to be written (it changed, and the last
    /// write is at least `every` old).
    pub fn due(&self, changed: bool, every: std::time::Duration) -> bool {
        let mut p = self.persist.lock().unwrap_or_else(|e| e.into_inner());
        p.0 |= changed;
        let now = std::time::Instant::now();
        if p.0 && p.1.is_none_or(|t| now.duration_since(t) >= every) {
            *p = (false, Some(now));
            true
        } else {
            false
        }
    }

    pub fn snapshot(&self) -> Vec<Ident> {
        self.lock().iter().copied().collect()
    }

    /// Forgets processes that are gone (their /proc entry is absent or names another).
    pub fn prune(&self, snap: &Snapshot) -> bool {
        let mut s = self.lock();
        let before = s.len();
        s.retain(|(pid, st)| snap.get(*pid).is_some_and(|p| p.start_time == *st));
        s.len() != before
    }
}

/// Every process in `/proc` at one moment.
pub struct Snapshot {
    procs: HashMap<u32, ProcStat>,
    children: HashMap<i32, Vec<u32>>,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        let mut procs = HashMap::new();
        let mut children: HashMap<i32, Vec<u32>> = HashMap::new();
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let Ok(raw) = std::fs::read(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                if let Some(s) = parse_proc_stat(&raw) {
                    children.entry(s.ppid).or_default().push(pid);
                    procs.insert(pid, s);
                }
            }
        }
        Snapshot { procs, children }
    }

    pub fn get(&self, pid: u32) -> Option<&ProcStat> {
        self.procs.get(&pid)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&u32, &ProcStat)> {
        self.procs.iter()
    }

    /// Every descendant of the roots (roots excluded), with its start time.
    pub fn descendants(&self, roots: &[u32]) -> Vec<Ident> {
        let mut out = Vec::new();
        let mut seen: BTreeSet<u32> = roots.iter().copied().collect();
        let mut stack: Vec<u32> = roots.to_vec();
        while let Some(p) = stack.pop() {
            let Ok(pi) = i32::try_from(p) else { continue };
            for &c in self.children.get(&pi).map(Vec::as_slice).unwrap_or(&[]) {
                if seen.insert(c) {
                    if let Some(s) = self.procs.get(&c) {
                        out.push((c, s.start_time));
                    }
                    stack.push(c);
                }
            }
        }
        out
    }

    /// True when `id` names a process that is there and not a zombie.
    pub fn living(&self, id: Ident) -> bool {
        self.procs
            .get(&id.0)
            .is_some_and(|s| s.start_time == id.1 && s.state != 'Z' && s.state != 'X')
    }
}

/// Reaps a zombie child of this process named by `id`, if it is one (pid, start time and
/// parent checked first, so a pid that now names another process, or a child that some
/// other code waits for, is never touched: a zombie's pid cannot be reused until reaped).
pub fn reap_adopted(id: Ident) -> bool {
    let Some(s) = super::process::proc_stat(id.0) else {
        return false;
    };
    let me = std::process::id() as i32;
    if s.start_time != id.1 || s.ppid != me || s.state != 'Z' {
        return false;
    }
    let Ok(pid) = libc::pid_t::try_from(id.0) else {
        return false;
    };
    let mut status = 0;
    // SAFETY: waits for one specific zombie child of ours, without blocking.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}
