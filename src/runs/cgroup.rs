//! A cgroup v2 per run: the kernel holds every process of a run as one group, whatever it
//! does to its process group, session or environment (`setsid`, double forks, `env -i`).
//!
//! The server finds the cgroup2 mount (`/proc/self/mountinfo`) and its own cgroup
//! (`/proc/self/cgroup`, the `0::` line), and keeps one folder per home under it,
//! `proctor-<16 hex of the home's data path>`; each run generation gets a child folder
//! `<ref>.g<generation>` there, created before the spawn. The child moves itself into it
//! before it execs (a `cgroup.procs` descriptor opened beforehand, written with `0` in
//! `pre_exec`), so no fork of the child can precede the move. Stopping sends SIGTERM to every
//! member, then writes `cgroup.kill` after the grace, waits for `cgroup.events` to say
//! `populated 0` and removes the folder.
//!
//! Where no cgroup2 is mounted or its folder is not writable, [`Base::detect`] says why and
//! the server falls back to attributing descendants itself (see `docs/runs.md`).
//!
//! Residual: a process running as root can move itself out of its cgroup (into any other
//! one); the kernel does not stop root from leaving.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The home's cgroup folder: the parent of every run cgroup of one server's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub dir: PathBuf,
    /// The same folder as `/proc/<pid>/cgroup` names it (`/…/proctor-<key>`).
    pub rel: String,
}

/// Reads the mount point of the cgroup2 hierarchy and its root from a mountinfo text.
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    for line in mountinfo.lines() {
        let (pre, post) = line.split_once(" - ")?;
        if post.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = pre.split_whitespace().collect();
        if f.len() < 5 {
            continue;
        }
        return Some((PathBuf::from(unescape(f[4])), unescape(f[3])));
    }
    None
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first folder below `rel` of the cgroup v2 path in a `/proc/<pid>/cgroup` text.
fn run_folder_in(rel: &str, cgroup_text: &str) -> Option<String> {
    let path = own_cgroup(cgroup_text)?;
    let rest = path.strip_prefix(rel)?.strip_prefix('/')?;
    let folder = rest.split('/').next()?;
    (!folder.is_empty()).then(|| folder.to_string())
}

/// This process's cgroup v2 path (the `0::` line of /proc/self/cgroup).
fn own_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
}

impl Base {
    /// Finds (and creates) the home's cgroup folder under this process's own cgroup, and
    /// checks that a run folder can be made in it. `Err` says why no cgroup can be used.
    pub fn detect(home_key: &str) -> Result<Base, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let (mount, root) =
            cgroup2_mount(&mountinfo).ok_or("no cgroup2 hierarchy is mounted".to_string())?;
        let cgroup_text = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = own_cgroup(&cgroup_text)
            .ok_or("this process has no cgroup v2 path (no 0:: line)".to_string())?;
        let rel = own
            .strip_prefix(root.trim_end_matches('/'))
            .unwrap_or(&own)
            .trim_start_matches('/')
            .to_string();
        if rel.contains("..") || rel.ends_with(" (deleted)") {
            return Err(format!("the server's cgroup {own} cannot be used"));
        }
        let parent = mount.join(rel);
        let dir = parent.join(format!("proctor-{home_key}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
        if !dir.join("cgroup.procs").exists() {
            return Err(format!("{} is not a cgroup v2 folder", dir.display()));
        }
        // A probe folder: a run folder must be creatable, and it must offer cgroup.kill.
        let probe = dir.join(format!("probe-{}", std::process::id()));
        std::fs::create_dir(&probe)
            .or_else(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| format!("cannot create a run cgroup in {}: {e}", dir.display()))?;
        let has_kill = probe.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&probe);
        if !has_kill {
            return Err("this kernel's cgroups have no cgroup.kill (Linux 5.14 or later)".into());
        }
        let rel = format!("{}/proctor-{home_key}", own.trim_end_matches('/'));
        Ok(Base { dir, rel })
    }

    /// The folder name of a run generation.
    pub fn name(run_ref: &str, generation: u64) -> String {
        format!("{run_ref}.g{generation}")
    }

    /// Creates the folder of a run generation (an existing one is reused: it is what a
    /// crashed server left and will be emptied by the sweep before any new start).
    pub fn create(&self, run_ref: &str, generation: u64) -> io::Result<PathBuf> {
        let p = self.dir.join(Self::name(run_ref, generation));
        match std::fs::create_dir(&p) {
            Ok(()) => Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(p),
            Err(e) => Err(e),
        }
    }

    /// Every run folder under the base (what a crashed server may have left).
    pub fn folders(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    }

    /// True when `/proc/<pid>/cgroup` places the process (a zombie too) in one of the run
    /// folders under this base.
    pub fn holds(&self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        own_cgroup(&text).is_some_and(|p| {
            p.strip_prefix(&self.rel)
                .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
        })
    }

    /// The run folder under this base that `/proc/<pid>/cgroup` places the process in (at
    /// any depth below it), by name: one read, whatever the number of runs.
    pub fn run_folder_of(&self, pid: u32) -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        run_folder_in(&self.rel, &text)
    }

    /// Removes the base folder if it is empty (the server is stopping).
    pub fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Opens a cgroup's `cgroup.procs` for writing, close-on-exec: the descriptor a child
/// writes `0` to before it execs.
pub fn open_procs(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(dir.join("cgroup.procs"))
}

/// The run's `cgroup.procs`, opened before the fork when the run has a cgroup, so that
/// the child joins it first thing: before it can fork, nothing it starts is ever outside.
pub(crate) fn procs_for_spawn(dir: Option<&Path>) -> Result<Option<File>, super::RunError> {
    dir.map(|d| open_procs(d).map_err(|e| super::RunError::io("open the run's cgroup.procs", e)))
        .transpose()
}

/// In the forked child before exec: moves the calling process into the cgroup whose
/// `cgroup.procs` is open as `fd`.
///
/// # Safety
/// Only `write(2)`; meant for `pre_exec`.
pub(crate) unsafe fn join_in_child(fd: libc::c_int) -> io::Result<()> {
    // SAFETY: a 1-byte write from a static buffer.
    let r = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if r == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The pids in a cgroup and all its descendants (live processes: zombies are not listed).
pub fn members(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    collect_members(dir, &mut out, 0);
    out
}

fn collect_members(dir: &Path, out: &mut Vec<u32>, depth: usize) {
    let mut s = String::new();
    if let Ok(mut f) = File::open(dir.join("cgroup.procs")) {
        let _ = f.read_to_string(&mut s);
    }
    out.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    if depth > 16 {
        return;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                collect_members(&e.path(), out, depth + 1);
            }
        }
    }
}

/// True while the cgroup (or a descendant) holds a live process. A folder that cannot be
/// read is gone (false); a folder without `cgroup.events` is judged by its members.
pub fn populated(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.events")) {
        Ok(s) => s.lines().any(|l| l.trim() == "populated 1"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(_) => !members(dir).is_empty(),
    }
}

/// Sends `sig` to every member (SIGCONT after SIGTERM, so a stopped member acts on it).
/// Returns how many were signalled.
pub fn signal_members(dir: &Path, sig: libc::c_int) -> usize {
    let pids = members(dir);
    let mut n = 0;
    for &p in &pids {
        if super::process::signal_process(p, sig).is_ok() {
            n += 1;
        }
    }
    if sig == libc::SIGTERM {
        for &p in &pids {
            let _ = super::process::signal_process(p, libc::SIGCONT);
        }
    }
    n
}

/// Kills every member at once (`cgroup.kill`, which covers the descendants).
pub fn kill(dir: &Path) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(dir.join("cgroup.kill"))?;
    f.write_all(b"1")
}

/// Waits until the cgroup is empty, or `deadline`. True when empty.
pub fn wait_empty(dir: &Path, deadline: Instant) -> bool {
    loop {
        if !populated(dir) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes a cgroup folder and its descendant folders (deepest first). The kernel refuses
/// while a process is still in one.
pub fn remove(dir: &Path) -> io::Result<()> {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let _ = remove(&e.path());
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What [`end_all`] did and saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ended {
    /// Members were found.
    pub found: bool,
    pub sent_term: bool,
    pub sent_kill: bool,
    /// The cgroup was empty afterwards.
    pub empty: bool,
    /// Its folder was removed.
    pub removed: bool,
}

/// Ends everything in a cgroup: SIGTERM to each member, `cgroup.kill` after `grace`, a wait
/// for the kernel (at most `kill_wait`), then the folder is removed.
pub fn end_all(dir: &Path, grace: Duration, kill_wait: Duration) -> Ended {
    let mut r = Ended {
        found: populated(dir),
        ..Default::default()
    };
    if r.found {
        r.sent_term = signal_members(dir, libc::SIGTERM) > 0;
        if !wait_empty(dir, Instant::now() + grace) {
            r.sent_kill = kill(dir).is_ok();
            wait_empty(dir, Instant::now() + kill_wait);
        }
    }
    r.empty = !populated(dir);
    r.removed = r.empty && remove(dir).is_ok();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_run_folder_is_read_from_its_own_cgroup_line() {
        let rel = "/user.slice/proctor-k1";
        let at = |path: &str| run_folder_in(rel, &format!("1:name=x:/\n0::{path}\n"));
        assert_eq!(
            at("/user.slice/proctor-k1/run-0001.g1"),
            Some("run-0001.g1".into())
        );
        // Any depth below the run's folder is the run's.
        assert_eq!(
            at("/user.slice/proctor-k1/run-0001.g1/a/b"),
            Some("run-0001.g1".into())
        );
        // The base itself, another home's base with the same prefix, elsewhere: no run.
        assert_eq!(at("/user.slice/proctor-k1"), None);
        assert_eq!(at("/user.slice/proctor-k1/"), None);
        assert_eq!(at("/user.slice/proctor-k12/run-0001.g1"), None);
        assert_eq!(at("/system.slice/run-0001.g1"), None);
        assert_eq!(
            run_folder_in(rel, "1:name=x:/user.slice/proctor-k1/r\n"),
            None
        );
    }

    #[test]
    fn the_cgroup2_mount_and_own_cgroup_are_read() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(mi),
            Some((PathBuf::from("/sys/fs/cgroup/unified"), "/".to_string()))
        );
        assert_eq!(cgroup2_mount("1 2 0:1 / /x rw - ext4 /dev/sda rw\n"), None);
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(
            own_cgroup("1:cpu:/\n0::/user.slice/x.scope\n").as_deref(),
            Some("/user.slice/x.scope")
        );
        assert_eq!(own_cgroup("1:cpu:/\n"), None);
    }
}
