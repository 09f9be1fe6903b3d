//! The worker behind a rig's boundary (`factory run --rig RIG`): the candidate's files are
//! copied into a namespace rig, the worker (and the repair) runs there, and what it changed
//! is brought back into the host worktree, checked entry by entry, before the host derives
//! the candidate identity as for any run.
//!
//! - **In**: a tar stream of the worktree's files (never `.git`, never a file matching the
//!   rigs' secret patterns, never a special file; symbolic links as links), written by the
//!   host into the stdin of the guest's own `tar`, run inside the rig's namespaces with its
//!   capabilities dropped ([`crate::rigs::manager::SessionEntry`]), under
//!   `/srv/proctor-factory/<run>-<random>/work`. The guest then makes a git repository of
//!   its copy (one commit of the staged files) so the worker sees its changes as a diff; a
//!   guest without git gets the plain folder.
//! - **Out**: the guest's `tar` writes the copy to its stdout; the host reads that stream
//!   (bounded) and never the guest's files themselves, so no link or race of the guest's
//!   reaches a host path. Each entry is judged: a path with `..`, a `.git` anywhere but the
//!   guest's own repository at the copy's root, a hard link, a device or a FIFO, and a
//!   symbolic link that is new or changed are refused (`rig_return_refused`); a regular file
//!   whose bytes or execute bit differ is written into the worktree (0600, or 0700 with the
//!   owner's execute bit), through real folders only (a symbolic link on the way is refused);
//!   a staged file that is gone is deleted. Nothing is written before the whole stream was
//!   judged.
//!
//! What the host's git, evidence and receipt code see afterwards is the host worktree, as
//! for a run on the host. The guest's `.git` never comes back, so HEAD and the index are the
//! host's, which the worker could not reach.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::rigs::manager::SessionEntry;
use crate::rigs::workspace::{STAGE_MAX_BYTES, STAGE_MAX_FILES, is_secret};

/// The guest folder under which each invocation's copy lives.
pub const GUEST_BASE: &str = "/srv/proctor-factory";
/// The most bytes read back from the guest's archive.
pub const RETURN_MAX_BYTES: u64 = 1 << 30;
/// The most bytes of changed files brought back.
pub const CHANGED_MAX_BYTES: u64 = 256 << 20;
/// The longest a copy in or out may take.
pub const COPY_DEADLINE: Duration = Duration::from_secs(600);

/// Why a copy into or out of the rig failed. Each is a typed failure of the run.
#[derive(Debug, thiserror::Error)]
pub enum RigCopyError {
    #[error("copying the candidate into the rig failed: {0}")]
    Stage(String),
    #[error(
        "what the worker left in the rig is not brought back: {path}: {why}. Nothing of it was \
         written into the worktree"
    )]
    Refused { path: String, why: String },
    #[error("what the worker left in the rig is too large to bring back: {0}")]
    TooLarge(String),
    #[error("reading the worker's copy out of the rig failed: {0}")]
    Return(String),
}

impl RigCopyError {
    pub fn code(&self) -> &'static str {
        match self {
            RigCopyError::Stage(_) => "rig_stage_failed",
            RigCopyError::Refused { .. } => "rig_return_refused",
            RigCopyError::TooLarge(_) => "rig_return_too_large",
            RigCopyError::Return(_) => "rig_return_failed",
        }
    }
}

/// A rig the factory's worker runs in: the entry (held for the run: the rig counts it as
/// use) and its boundary's words.
pub struct Cell {
    pub rig: String,
    /// The boundary's summary (`namespace boundary: weaker than a VM (…)`).
    pub boundary: String,
    entry: SessionEntry,
}

/// One staged copy in the guest.
#[derive(Debug, Clone)]
pub struct Copy {
    /// `/srv/proctor-factory/<run>-<random>`.
    pub dir: String,
    /// `<dir>/work`: the worker's working folder.
    pub work: String,
    /// The staged paths (files and links), relative.
    staged: BTreeSet<PathBuf>,
    /// What the summary says.
    pub summary: CopySummary,
}

/// What a copy moved, for the receipt.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopySummary {
    pub guest_folder: String,
    pub staged_files: u64,
    pub staged_bytes: u64,
    /// Relative paths not copied in (secret patterns; `.git` is never copied).
    pub excluded: Vec<String>,
    /// The guest made a git repository of its copy.
    pub guest_git: bool,
    pub written: u64,
    pub deleted: u64,
    pub written_bytes: u64,
}

fn random_hex() -> String {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    hex::encode(b)
}

/// A changed file as the guest returned it: its bytes and the owner's execute bit.
type Changed = BTreeMap<PathBuf, (Vec<u8>, bool)>;

/// Kills a process group if it is still there at the deadline; disarmed when dropped.
struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    fn arm(pgid: u32, deadline: Duration) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(deadline) {
                // SAFETY: kill has no memory preconditions; the group is the child's own.
                unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.take();
    }
}

impl Cell {
    pub fn new(rig: String, entry: SessionEntry) -> Cell {
        Cell {
            rig,
            boundary: entry.boundary.summary.clone(),
            entry,
        }
    }

    /// Whether the guest sees `program` (a host path) as the same file, or it is a demo
    /// shim (which runs as the guest's own proctor).
    pub fn runs(&self, program: &Path) -> bool {
        crate::providers::fake::is_demo_shim(program)
            || crate::files::same_file_under(&self.entry.root, program)
    }

    /// How a provider is started in `copy`: the entering argv (at the copy's work folder),
    /// the guest's proctor, PATH and home.
    pub fn enclosure(&self, copy: &Copy) -> super::invoke::Enclosure {
        super::invoke::Enclosure {
            prefix: self.entry.prefix_at(&copy.work),
            root: self.entry.root.clone(),
            proctor: self.entry.proctor.clone(),
            path: self.entry.path.clone(),
            worktree: copy.work.clone(),
            scratch: copy.dir.clone(),
        }
    }

    /// A command of the guest, entered at `cwd`.
    fn guest(&self, cwd: &str, argv: &[&str]) -> Command {
        guest_command(&self.entry.prefix_at(cwd), &self.entry.path, argv)
    }

    /// Copies the worktree's files into a fresh guest folder for `run`.
    pub fn stage(&self, worktree: &Path, run: &str) -> Result<Copy, RigCopyError> {
        let name = format!("{run}-{}", random_hex());
        let dir = format!("{GUEST_BASE}/{name}");
        let work = format!("{dir}/work");
        let mut summary = CopySummary {
            guest_folder: work.clone(),
            ..CopySummary::default()
        };
        let mut staged = BTreeSet::new();
        let mut list = Vec::new();
        walk(worktree, Path::new(""), &mut list, &mut summary.excluded)
            .map_err(|e| RigCopyError::Stage(format!("read the worktree: {e}")))?;
        let mut cmd = self.guest("/srv", &["tar", "--no-same-owner", "-x", "-f", "-"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = spawn(cmd).map_err(|e| RigCopyError::Stage(format!("start tar: {e}")))?;
        let _watch = Watchdog::arm(child.id(), COPY_DEADLINE);
        let stdin = child.stdin.take().expect("piped");
        let written = (|| -> std::io::Result<(u64, u64)> {
            let mut b = tar::Builder::new(stdin);
            b.follow_symlinks(false);
            for d in [
                "proctor-factory".to_string(),
                format!("proctor-factory/{name}"),
            ] {
                dir_entry(&mut b, &d)?;
            }
            let root = format!("proctor-factory/{name}/work");
            dir_entry(&mut b, &root)?;
            let (mut files, mut bytes) = (0u64, 0u64);
            for (rel, kind) in &list {
                let host = worktree.join(rel);
                let inside = format!("{root}/{}", rel.display());
                match kind {
                    Kind::Dir => dir_entry(&mut b, &inside)?,
                    Kind::Link => {
                        let target = std::fs::read_link(&host)?;
                        let mut h = tar::Header::new_gnu();
                        h.set_entry_type(tar::EntryType::Symlink);
                        h.set_size(0);
                        h.set_mode(0o777);
                        h.set_mtime(0);
                        b.append_link(&mut h, &inside, &target)?;
                        staged.insert(rel.clone());
                        files += 1;
                    }
                    Kind::File => {
                        let mut f = std::fs::File::open(&host)?;
                        let m = f.metadata()?;
                        files += 1;
                        bytes += m.len();
                        if files > STAGE_MAX_FILES || bytes > STAGE_MAX_BYTES {
                            return Err(std::io::Error::other(format!(
                                "the worktree holds more than {STAGE_MAX_FILES} files or \
                                 {STAGE_MAX_BYTES} bytes, the most a rig copy takes"
                            )));
                        }
                        let mut h = tar::Header::new_gnu();
                        h.set_entry_type(tar::EntryType::Regular);
                        h.set_size(m.len());
                        h.set_mode(if m.mode() & 0o100 != 0 { 0o700 } else { 0o600 });
                        h.set_mtime(0);
                        b.append_data(&mut h, &inside, (&mut f).take(m.len()))?;
                        staged.insert(rel.clone());
                    }
                }
            }
            b.into_inner()?.flush()?;
            Ok((files, bytes))
        })();
        let (status, stderr) = finish(child, COPY_DEADLINE);
        let (files, bytes) = written.map_err(|e| {
            RigCopyError::Stage(format!(
                "{e}{}",
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(" (the guest's tar: {stderr})")
                }
            ))
        })?;
        if !status {
            return Err(RigCopyError::Stage(format!(
                "the guest's tar failed: {stderr}"
            )));
        }
        summary.staged_files = files;
        summary.staged_bytes = bytes;
        // The guest's own repository of its copy, so the worker sees its changes as a diff.
        let steps: [&[&str]; 3] = [
            &["git", "init", "-q"],
            &["git", "add", "-A"],
            &[
                "git",
                "-c",
                "user.name=proctor",
                "-c",
                "user.email=proctor@rig.invalid",
                "commit",
                "-q",
                "--no-verify",
                "--allow-empty",
                "-m",
                "the candidate as staged by proctor",
            ],
        ];
        summary.guest_git = steps.iter().all(|argv| {
            let mut c = self.guest(&work, argv);
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            spawn(c)
                .map(|child| finish(child, COPY_DEADLINE).0)
                .unwrap_or(false)
        });
        Ok(Copy {
            dir,
            work,
            staged,
            summary,
        })
    }

    /// Brings what the worker changed in `copy` back into `worktree`: judged whole first,
    /// then written.
    pub fn bring_back(&self, copy: &mut Copy, worktree: &Path) -> Result<(), RigCopyError> {
        let mut cmd = self.guest(&copy.dir, &["tar", "-c", "-f", "-", "--", "work"]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn(cmd).map_err(|e| RigCopyError::Return(format!("start tar: {e}")))?;
        let _watch = Watchdog::arm(child.id(), COPY_DEADLINE);
        let stdout = child.stdout.take().expect("piped");
        let mut out = stdout.take(RETURN_MAX_BYTES);
        let judged = judge(&mut out, worktree);
        // The archive ends before tar's last record does (tar pads it with zeros): what
        // follows is read to the end, or the pipe closed early and the guest's tar died of
        // SIGPIPE now and then, a failure with no message (seen in CI: rig_return_failed).
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        drop(out);
        let (ok, stderr) = finish(child, COPY_DEADLINE);
        let (entries, seen) = judged?;
        if !ok {
            return Err(RigCopyError::Return(format!(
                "the guest's tar failed: {stderr}"
            )));
        }
        let gone: Vec<PathBuf> = copy
            .staged
            .iter()
            .filter(|p| !seen.contains(*p))
            .cloned()
            .collect();
        for (rel, (bytes, exec)) in entries {
            let host = real_parent(worktree, &rel)?;
            write_file(&host, &bytes, exec).map_err(|e| RigCopyError::Refused {
                path: crate::digest::escape_path(&rel),
                why: format!("writing it failed: {e}"),
            })?;
            copy.summary.written += 1;
            copy.summary.written_bytes += bytes.len() as u64;
        }
        for rel in gone {
            let host = real_parent(worktree, &rel)?;
            match std::fs::remove_file(&host) {
                Ok(()) => copy.summary.deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(RigCopyError::Refused {
                        path: crate::digest::escape_path(&rel),
                        why: format!("deleting it failed: {e}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Removes the copy from the guest (best effort: the rig's own end removes it too).
    pub fn discard(&self, copy: &Copy) {
        let mut c = self.guest("/", &["rm", "-rf", "--", &copy.dir]);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Ok(child) = spawn(c) {
            let _ = finish(child, Duration::from_secs(60));
        }
    }
}

enum Kind {
    Dir,
    File,
    Link,
}

/// The worktree's entries to stage, sorted, relative: `.git` (a linked worktree's link to
/// its repository, or a submodule's) never, secrets and special files never.
fn walk(
    root: &Path,
    rel: &Path,
    out: &mut Vec<(PathBuf, Kind)>,
    excluded: &mut Vec<String>,
) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(root.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let r = rel.join(&name);
        let ft = std::fs::symlink_metadata(root.join(&r))?.file_type();
        let name_s = name.to_string_lossy();
        if name_s == ".git" {
            continue;
        }
        if is_secret(&name_s, ft.is_dir()) {
            excluded.push(r.to_string_lossy().into_owned());
            continue;
        }
        if ft.is_symlink() {
            out.push((r, Kind::Link));
        } else if ft.is_dir() {
            out.push((r.clone(), Kind::Dir));
            walk(root, &r, out, excluded)?;
        } else if ft.is_file() {
            out.push((r, Kind::File));
        }
    }
    Ok(())
}

fn dir_entry<W: Write>(b: &mut tar::Builder<W>, path: &str) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    h.set_mode(0o700);
    h.set_mtime(0);
    b.append_data(&mut h, format!("{path}/"), std::io::empty())
}

/// `argv` run in the guest through the entering `prefix`, with the guest's PATH and nothing
/// else of this environment, in a process group of its own that dies with this process.
fn guest_command(prefix: &[String], path: &str, argv: &[&str]) -> Command {
    let mut cmd = Command::new(&prefix[0]);
    cmd.args(&prefix[1..])
        .args(argv)
        .env_clear()
        .env("PATH", path)
        .env("HOME", "/root")
        .env("LC_ALL", "C")
        .current_dir("/")
        .process_group(0);
    // SAFETY: runs in the forked child before exec; prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
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
            Ok(())
        });
    }
    cmd
}

/// Reads a guest file (at most `max` bytes) as the guest's `cat` gives it, through the
/// entering `prefix` (the guest's PATH `path`).
pub fn read_guest(
    prefix: &[String],
    path: &str,
    file: &str,
    max: u64,
) -> Result<Vec<u8>, RigCopyError> {
    let mut cmd = guest_command(prefix, path, &["cat", "--", file]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn(cmd).map_err(|e| RigCopyError::Return(format!("start cat: {e}")))?;
    let _watch = Watchdog::arm(child.id(), COPY_DEADLINE);
    let mut out = Vec::new();
    let r = child
        .stdout
        .take()
        .expect("piped")
        .take(max)
        .read_to_end(&mut out);
    let (ok, stderr) = finish(child, COPY_DEADLINE);
    r.map_err(|e| RigCopyError::Return(e.to_string()))?;
    if !ok {
        return Err(RigCopyError::Return(format!("cat {file}: {stderr}")));
    }
    Ok(out)
}

fn spawn(mut cmd: Command) -> std::io::Result<std::process::Child> {
    let _guard = crate::runs::fork_guard();
    cmd.spawn()
}

/// Waits for `child` (its group killed at the deadline); answers success and a line of its
/// stderr.
fn finish(mut child: std::process::Child, deadline: Duration) -> (bool, String) {
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(mut s) = stderr {
            let _ = (&mut s).take(64 * 1024).read_to_end(&mut b);
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        }
        b
    });
    let end = Instant::now() + deadline;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // SAFETY: kill has no memory preconditions; the group is the child's own.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
        }
    };
    let err = reader.join().unwrap_or_default();
    let line = crate::text::one_line_bytes(&err, 300);
    match status {
        Some(s) => (s.success(), line),
        None => (
            false,
            format!("stopped after {} s; {line}", deadline.as_secs()),
        ),
    }
}

fn refused(rel: &Path, why: impl Into<String>) -> RigCopyError {
    RigCopyError::Refused {
        path: crate::digest::escape_path(rel),
        why: why.into(),
    }
}

/// Reads the guest's archive of `work` and judges each entry against the worktree: the
/// changed files and the paths seen (files and links).
fn judge(stream: impl Read, worktree: &Path) -> Result<(Changed, BTreeSet<PathBuf>), RigCopyError> {
    let mut archive = tar::Archive::new(stream);
    let mut changed = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut changed_bytes = 0u64;
    let entries = archive
        .entries()
        .map_err(|e| RigCopyError::Return(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| RigCopyError::Return(e.to_string()))?;
        let raw = entry
            .path()
            .map_err(|e| RigCopyError::Return(e.to_string()))?
            .into_owned();
        let mut comps = raw.components();
        match comps.next() {
            Some(Component::Normal(w)) if w == "work" => {}
            _ => return Err(refused(&raw, "outside the copy")),
        }
        let rel: PathBuf = comps.as_path().to_path_buf();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(refused(&rel, "a path with `..` or a root"));
        }
        if rel.components().next() == Some(Component::Normal(".git".as_ref())) {
            // The guest's own repository of its copy: never brought back.
            continue;
        }
        if rel.components().any(|c| c.as_os_str() == ".git") {
            return Err(refused(
                &rel,
                "a .git inside the candidate (a repository or a submodule made in the rig)",
            ));
        }
        if seen.len() as u64 >= STAGE_MAX_FILES {
            return Err(RigCopyError::TooLarge(format!(
                "more than {STAGE_MAX_FILES} files"
            )));
        }
        let host = worktree.join(&rel);
        let on_host = std::fs::symlink_metadata(&host).ok();
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if on_host.as_ref().is_some_and(|m| m.file_type().is_dir()) {
                    return Err(refused(&rel, "a folder of the worktree replaced by a file"));
                }
                let exec = entry.header().mode().unwrap_or(0) & 0o100 != 0;
                let size = entry.size();
                if changed_bytes + size > CHANGED_MAX_BYTES {
                    return Err(RigCopyError::TooLarge(format!(
                        "more than {CHANGED_MAX_BYTES} bytes of changed files"
                    )));
                }
                let mut bytes = Vec::with_capacity(size.min(1 << 20) as usize);
                entry
                    .read_to_end(&mut bytes)
                    .map_err(|e| RigCopyError::Return(e.to_string()))?;
                let same = match &on_host {
                    Some(m) if m.file_type().is_file() => {
                        (m.mode() & 0o100 != 0) == exec
                            && m.len() == bytes.len() as u64
                            && crate::files::hash_file(&host)
                                .ok()
                                .flatten()
                                .is_some_and(|(_, sha)| sha == hex::encode(Sha256::digest(&bytes)))
                    }
                    _ => false,
                };
                seen.insert(rel.clone());
                if !same {
                    changed_bytes += bytes.len() as u64;
                    changed.insert(rel, (bytes, exec));
                }
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| RigCopyError::Return(e.to_string()))?
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                let same = on_host.as_ref().is_some_and(|m| m.file_type().is_symlink())
                    && std::fs::read_link(&host).ok().as_deref() == Some(target.as_path());
                if !same {
                    return Err(refused(
                        &rel,
                        "a symbolic link made or changed in the rig (links are not brought \
                         back: ask the worker for a regular file)",
                    ));
                }
                seen.insert(rel);
            }
            other => {
                return Err(refused(
                    &rel,
                    format!(
                        "a {} (only regular files and folders come back)",
                        match other {
                            tar::EntryType::Link => "hard link",
                            tar::EntryType::Fifo => "FIFO",
                            tar::EntryType::Char | tar::EntryType::Block => "device",
                            _ => "special entry",
                        }
                    ),
                ));
            }
        }
    }
    Ok((changed, seen))
}

/// `worktree/rel`, its folders made (0700) where missing, refused if any folder on the way
/// is a symbolic link or not a folder: nothing is written through a link.
fn real_parent(worktree: &Path, rel: &Path) -> Result<PathBuf, RigCopyError> {
    let mut at = worktree.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in &parts[..parts.len().saturating_sub(1)] {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(refused(
                    rel,
                    "a folder on its way in the worktree is a symbolic link or a file",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::files::ensure_private_dir(&at)
                    .map_err(|e| refused(rel, format!("making its folder failed: {e}")))?;
            }
            Err(e) => return Err(refused(rel, format!("inspecting its folder failed: {e}"))),
        }
    }
    Ok(worktree.join(rel))
}

/// Writes `bytes` at `path` (a temporary sibling renamed over it: a link there is replaced,
/// never followed), 0600, or 0700 with the owner's execute bit.
fn write_file(path: &Path, bytes: &[u8], exec: bool) -> std::io::Result<()> {
    crate::files::write_atomic(path, bytes).map_err(std::io::Error::other)?;
    std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(if exec { 0o700 } else { 0o600 }),
    )
}
