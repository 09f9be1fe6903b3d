//! Moving one Claude Code conversation from one account home to another (issue 18 §2,
//! `POST /runs/{ref}/move`): the transcript `projects/<dir>/<id>.jsonl` and the folder of its
//! sub-agent and tool-result files `projects/<dir>/<id>/` (Claude Code's layout: sub-agents
//! under `<id>/subagents/agent-*.jsonl`, large tool results under `<id>/tool-results/`),
//! never a login, a setting or another conversation.
//!
//! The source home is only read. The copy is staged in a folder of the target's project
//! folder, checked, then renamed into place; a refusal at any step removes what the move
//! created (the staging folder, and the project folders it made) and puts back what it
//! set aside, so a refused move leaves the target as it found it. Files are written 0600,
//! folders 0700; a link, a second name of a file (a hard link) or a special file in the
//! source conversation is refused before anything is written.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most files one conversation may carry (a bound, not a figure from the tool).
const MAX_FILES: usize = 10_000;
/// The deepest folder level under the conversation's folder walked.
const MAX_DEPTH: usize = 8;

/// Why a move refuses: each maps to the seed's status (409 or 422).
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// 422: a link, a hard link or a special file in the source conversation.
    #[error("{0}")]
    Unsafe(String),
    /// 409: the target already holds another version, a file appeared, a source file
    /// changed while it was copied, or the target refused a write.
    #[error("{0}")]
    Conflict(String),
    /// 409: the conversation is not in the source home.
    #[error("{0}")]
    Missing(String),
}

/// One file or folder of the conversation, relative to the project folder.
#[derive(Debug, Clone)]
struct Entry {
    rel: PathBuf,
    dir: bool,
    /// What the source file was when planned (size, mtime in ns, inode).
    stamp: (u64, i128, u64),
}

/// A conversation found in a source home, ready to copy.
#[derive(Debug)]
pub struct Plan {
    /// `projects/<dir>` of the source home.
    src_project: PathBuf,
    /// `<dir>`, the project folder's name.
    project: String,
    id: String,
    entries: Vec<Entry>,
}

impl Plan {
    /// How many files the move carries.
    pub fn files(&self) -> u64 {
        self.entries.iter().filter(|e| !e.dir).count() as u64
    }
}

fn stamp(m: &fs::Metadata) -> (u64, i128, u64) {
    (
        m.len(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        m.ino(),
    )
}

/// Refuses anything but a plain folder or a plain file with one name.
fn check_kind(m: &fs::Metadata, shown: &str) -> Result<bool, MoveError> {
    let ft = m.file_type();
    if ft.is_symlink() {
        return Err(MoveError::Unsafe(format!(
            "the conversation holds a link ({shown}): a move copies only plain files"
        )));
    }
    if ft.is_dir() {
        return Ok(true);
    }
    if !ft.is_file() {
        return Err(MoveError::Unsafe(format!(
            "the conversation holds a special file ({shown}): a move copies only plain files"
        )));
    }
    if m.nlink() > 1 {
        return Err(MoveError::Unsafe(format!(
            "the conversation holds a second name of a file ({shown} has {} links): a move \
             copies only files with one name",
            m.nlink()
        )));
    }
    Ok(false)
}

/// Finds conversation `id` under `home/projects/`: in the folder Claude Code names for
/// `cwd` (see [`crate::providers::records::claude::project_folder`]), else the one project folder
/// that holds `<id>.jsonl`. `None` when the home holds no such transcript.
pub fn plan(home: &Path, cwd: &Path, id: &str) -> Result<Option<Plan>, MoveError> {
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        return Err(MoveError::Unsafe(format!(
            "the conversation id {id:?} is not a file name"
        )));
    }
    let projects = home.join("projects");
    let named = crate::providers::records::claude::project_folder(&cwd.to_string_lossy());
    let mut project = None;
    if fs::symlink_metadata(projects.join(&named).join(format!("{id}.jsonl"))).is_ok() {
        project = Some(named);
    } else if let Ok(dirs) = fs::read_dir(&projects) {
        let mut found = Vec::new();
        for d in dirs.flatten() {
            if d.file_type().is_ok_and(|t| t.is_dir())
                && fs::symlink_metadata(d.path().join(format!("{id}.jsonl"))).is_ok()
            {
                found.push(d.file_name().to_string_lossy().into_owned());
            }
        }
        if found.len() > 1 {
            return Err(MoveError::Conflict(format!(
                "conversation {id} is in {} project folders of the source home ({}): which one \
                 is the run's is not known",
                found.len(),
                found.join(", ")
            )));
        }
        project = found.pop();
    }
    let Some(project) = project else {
        return Ok(None);
    };
    let src_project = projects.join(&project);
    let mut entries = Vec::new();
    let transcript = PathBuf::from(format!("{id}.jsonl"));
    let m = fs::symlink_metadata(src_project.join(&transcript))
        .map_err(|e| MoveError::Missing(format!("the transcript of {id} cannot be read: {e}")))?;
    if check_kind(&m, &transcript.to_string_lossy())? {
        return Err(MoveError::Unsafe(format!(
            "the transcript {id}.jsonl is a folder"
        )));
    }
    entries.push(Entry {
        rel: transcript,
        dir: false,
        stamp: stamp(&m),
    });
    // The conversation's own folder (sub-agents, tool results), when it has one.
    let folder = PathBuf::from(id);
    if let Ok(m) = fs::symlink_metadata(src_project.join(&folder)) {
        if !check_kind(&m, id)? {
            return Err(MoveError::Unsafe(format!(
                "{id} beside the transcript is a file, not the conversation's folder"
            )));
        }
        let mut stack = vec![(folder, 0usize)];
        while let Some((rel, depth)) = stack.pop() {
            let m = fs::symlink_metadata(src_project.join(&rel)).map_err(|e| {
                MoveError::Missing(format!("{} cannot be read: {e}", rel.display()))
            })?;
            entries.push(Entry {
                rel: rel.clone(),
                dir: true,
                stamp: stamp(&m),
            });
            if depth >= MAX_DEPTH {
                return Err(MoveError::Unsafe(format!(
                    "the conversation's folder is deeper than {MAX_DEPTH} levels"
                )));
            }
            let mut children: Vec<_> = fs::read_dir(src_project.join(&rel))
                .map_err(|e| MoveError::Missing(format!("{} cannot be read: {e}", rel.display())))?
                .flatten()
                .collect();
            children.sort_by_key(|c| c.file_name());
            for c in children {
                let child = rel.join(c.file_name());
                let m = fs::symlink_metadata(c.path()).map_err(|e| {
                    MoveError::Missing(format!("{} cannot be read: {e}", child.display()))
                })?;
                if check_kind(&m, &child.to_string_lossy())? {
                    stack.push((child, depth + 1));
                } else {
                    entries.push(Entry {
                        rel: child,
                        dir: false,
                        stamp: stamp(&m),
                    });
                }
                if entries.len() > MAX_FILES {
                    return Err(MoveError::Unsafe(format!(
                        "the conversation holds more than {MAX_FILES} files"
                    )));
                }
            }
        }
    }
    // Folders before what they hold.
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Some(Plan {
        src_project,
        project,
        id: id.to_string(),
        entries,
    }))
}

/// What a finished copy left, to keep (commit) or undo (a later step failed).
#[derive(Debug)]
pub struct Placed {
    /// The target's project folder.
    dst_project: PathBuf,
    /// The staging folder, which holds what the copy set aside until it is committed.
    staging: PathBuf,
    /// Folders the move created (deepest last).
    created: Vec<PathBuf>,
    /// The target held these before (set aside under `staging/old`).
    set_aside: Vec<PathBuf>,
    /// What the move put in place in the project folder (the transcript, its folder).
    put: Vec<PathBuf>,
}

impl Placed {
    /// Keeps the copy: what it replaced goes.
    pub fn commit(self) {
        let _ = fs::remove_dir_all(&self.staging);
        let _ = crate::files::fsync_dir(&self.dst_project);
    }

    /// Undoes the copy: removes what it placed and puts back what it replaced.
    pub fn undo(self) {
        for name in &self.put {
            let p = self.dst_project.join(name);
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => drop(fs::remove_dir_all(&p)),
                Ok(_) => drop(fs::remove_file(&p)),
                Err(_) => {}
            }
        }
        for name in &self.set_aside {
            let _ = fs::rename(
                self.staging.join("old").join(name),
                self.dst_project.join(name),
            );
        }
        let _ = fs::remove_dir_all(&self.staging);
        remove_created(&self.created);
    }
}

fn remove_created(created: &[PathBuf]) {
    for d in created.iter().rev() {
        // Only if empty: a folder someone else filled meanwhile stays.
        let _ = fs::remove_dir(d);
    }
}

fn conflict(what: &str, e: impl std::fmt::Display) -> MoveError {
    MoveError::Conflict(format!("the target home refused the copy ({what}): {e}"))
}

/// Whether two files hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> bool {
    match (fs::read(a), fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Copies the planned conversation into `dst_home`. `replace` says the target's copy of the
/// same conversation, if any, was left there by an earlier move and is replaced; otherwise
/// a target that holds a different version refuses. `after_file` runs after each file is
/// copied (the tests use it to make a file appear or change at that moment; it does
/// nothing otherwise). On `Ok`, call [`Placed::commit`] once the move is recorded, or
/// [`Placed::undo`] if recording it failed.
pub fn copy(
    plan: &Plan,
    dst_home: &Path,
    replace: bool,
    after_file: &mut dyn FnMut(&Path),
) -> Result<Placed, MoveError> {
    let dst_projects = dst_home.join("projects");
    let dst_project = dst_projects.join(&plan.project);
    let transcript = format!("{}.jsonl", plan.id);
    let existing: Vec<PathBuf> = [PathBuf::from(&transcript), PathBuf::from(&plan.id)]
        .into_iter()
        .filter(|n| fs::symlink_metadata(dst_project.join(n)).is_ok())
        .collect();
    if !existing.is_empty() && !replace {
        let same = existing.len() == 1
            && existing[0] == Path::new(&transcript)
            && plan.files() == 1
            && same_bytes(
                &plan.src_project.join(&transcript),
                &dst_project.join(&transcript),
            );
        if !same {
            return Err(MoveError::Conflict(format!(
                "the target home already holds a version of conversation {} ({}) that this \
                 move did not leave there: remove it from the target or move to another profile",
                plan.id,
                existing
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let mut created = Vec::new();
    for d in [&dst_projects, &dst_project] {
        match fs::symlink_metadata(d) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                remove_created(&created);
                return Err(MoveError::Conflict(format!(
                    "{} in the target home is not a folder",
                    d.display()
                )));
            }
            Err(_) => match fs::DirBuilder::new().mode(0o700).create(d) {
                Ok(()) => created.push(d.clone()),
                Err(e) => {
                    remove_created(&created);
                    return Err(conflict("a folder", e));
                }
            },
        }
    }
    let staging = dst_project.join(format!(".proctor-move-{}", plan.id));
    if let Err(e) = fs::DirBuilder::new().mode(0o700).create(&staging) {
        remove_created(&created);
        return Err(conflict("its staging folder", e));
    }
    let mut placed = Placed {
        dst_project: dst_project.clone(),
        staging: staging.clone(),
        created,
        set_aside: Vec::new(),
        put: Vec::new(),
    };
    let staged = stage(plan, &staging.join("new"), after_file);
    if let Err(e) = staged {
        placed.undo();
        return Err(e);
    }
    // Into place: what the target held is set aside first (kept until the commit).
    if !existing.is_empty() {
        if let Err(e) = fs::DirBuilder::new()
            .mode(0o700)
            .create(staging.join("old"))
        {
            placed.undo();
            return Err(conflict("setting the earlier copy aside", e));
        }
        for name in &existing {
            if let Err(e) = fs::rename(dst_project.join(name), staging.join("old").join(name)) {
                placed.undo();
                return Err(conflict("setting the earlier copy aside", e));
            }
            placed.set_aside.push(name.clone());
        }
    }
    for name in [PathBuf::from(&transcript), PathBuf::from(&plan.id)] {
        let from = staging.join("new").join(&name);
        if fs::symlink_metadata(&from).is_err() {
            continue;
        }
        let to = dst_project.join(&name);
        match rename_noreplace(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                placed.undo();
                return Err(MoveError::Conflict(format!(
                    "{} appeared in the target home during the move: retry",
                    to.display()
                )));
            }
            Err(e) => {
                placed.undo();
                return Err(conflict("putting the copy in place", e));
            }
        }
        placed.put.push(name);
    }
    let _ = crate::files::fsync_dir(&dst_project);
    Ok(placed)
}

/// Renames `from` to `to` unless `to` exists (`renameat2` with `RENAME_NOREPLACE`): a file
/// that appears at the last moment is never overwritten.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::other("a path with a NUL byte"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths, relative to the working folder's descriptor.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Copies every planned entry under `root` (a new folder), checking each source file did
/// not change while it was read.
fn stage(plan: &Plan, root: &Path, after_file: &mut dyn FnMut(&Path)) -> Result<(), MoveError> {
    fs::DirBuilder::new()
        .mode(0o700)
        .create(root)
        .map_err(|e| conflict("its staging folder", e))?;
    for e in &plan.entries {
        let src = plan.src_project.join(&e.rel);
        let dst = root.join(&e.rel);
        let shown = e.rel.display();
        if e.dir {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&dst)
                .map_err(|err| conflict(&format!("folder {shown}"), err))?;
            continue;
        }
        let changed = || {
            MoveError::Conflict(format!(
                "{shown} changed in the source home while it was copied: retry the move"
            ))
        };
        // O_NOFOLLOW: a file swapped for a link since the plan is refused, never followed.
        let mut from = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&src)
            .map_err(|_| changed())?;
        let before = from.metadata().map_err(|_| changed())?;
        if !before.is_file() || stamp(&before) != e.stamp || before.nlink() > 1 {
            return Err(changed());
        }
        let mut to: File = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&dst)
            .map_err(|err| conflict(&format!("file {shown}"), err))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut copied = 0u64;
        loop {
            let n = from.read(&mut buf).map_err(|_| changed())?;
            if n == 0 {
                break;
            }
            to.write_all(&buf[..n])
                .map_err(|err| conflict(&format!("file {shown}"), err))?;
            copied += n as u64;
        }
        to.sync_all()
            .map_err(|err| conflict(&format!("file {shown}"), err))?;
        after_file(&e.rel);
        let after = fs::symlink_metadata(&src).map_err(|_| changed())?;
        if copied != e.stamp.0 || stamp(&after) != e.stamp {
            return Err(changed());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    /// Every path under `root`, relative, sorted: what a home holds.
    fn tree(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                out.push(p.strip_prefix(root).unwrap().display().to_string());
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                }
            }
        }
        out.sort();
        out
    }

    const ID: &str = "6f1c2d3e-0000-4000-8000-000000000001";

    /// A source home with one conversation (a sub-agent and a tool result), another
    /// conversation, a login and a setting.
    fn source(dir: &Path) -> (PathBuf, PathBuf) {
        let home = dir.join("src-home");
        let cwd = PathBuf::from("/w/app");
        let p = home.join("projects").join("-w-app");
        write(&p.join(format!("{ID}.jsonl")), "{\"type\":\"user\"}\n");
        write(
            &p.join(ID).join("subagents/agent-a1.jsonl"),
            "{\"agent\":1}\n",
        );
        write(&p.join(ID).join("tool-results/toolu_1.txt"), "big output\n");
        write(&p.join("other-conversation.jsonl"), "{}\n");
        write(&home.join(".credentials.json"), "{\"secret\":1}\n");
        write(&home.join("settings.json"), "{}\n");
        (home, cwd)
    }

    #[test]
    fn copies_that_one_conversation_private_and_never_a_login_or_another_one() {
        let t = tempfile::tempdir().unwrap();
        let (src, cwd) = source(t.path());
        let before = tree(&src);
        let dst = t.path().join("dst-home");
        fs::create_dir(&dst).unwrap();
        let plan = plan(&src, &cwd, ID).unwrap().unwrap();
        assert_eq!(plan.files(), 3);
        copy(&plan, &dst, false, &mut |_| {}).unwrap().commit();
        assert_eq!(
            tree(&dst),
            [
                "projects".to_string(),
                "projects/-w-app".into(),
                format!("projects/-w-app/{ID}"),
                format!("projects/-w-app/{ID}.jsonl"),
                format!("projects/-w-app/{ID}/subagents"),
                format!("projects/-w-app/{ID}/subagents/agent-a1.jsonl"),
                format!("projects/-w-app/{ID}/tool-results"),
                format!("projects/-w-app/{ID}/tool-results/toolu_1.txt"),
            ]
        );
        let p = dst.join("projects/-w-app");
        assert_eq!(
            fs::read_to_string(p.join(ID).join("tool-results/toolu_1.txt")).unwrap(),
            "big output\n"
        );
        let mode = |q: &Path| fs::metadata(q).unwrap().mode() & 0o777;
        assert_eq!(mode(&p.join(format!("{ID}.jsonl"))), 0o600);
        assert_eq!(mode(&p.join(ID).join("subagents/agent-a1.jsonl")), 0o600);
        assert_eq!(mode(&p.join(ID)), 0o700);
        assert_eq!(mode(&p.join(ID).join("subagents")), 0o700);
        // The source is only read.
        assert_eq!(tree(&src), before);
    }

    #[test]
    fn links_hard_links_and_special_files_in_the_source_are_refused_before_any_write() {
        let t = tempfile::tempdir().unwrap();
        let (src, cwd) = source(t.path());
        let p = src.join("projects/-w-app");
        let dst = t.path().join("dst-home");
        fs::create_dir(&dst).unwrap();
        let elsewhere = t.path().join("secret.txt");
        write(&elsewhere, "not the conversation's\n");
        // A symlinked transcript.
        let tr = p.join(format!("{ID}.jsonl"));
        fs::rename(&tr, t.path().join("moved.jsonl")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &tr).unwrap();
        let e = plan(&src, &cwd, ID).unwrap_err();
        assert!(matches!(e, MoveError::Unsafe(_)), "{e}");
        assert!(e.to_string().contains("link"), "{e}");
        fs::remove_file(&tr).unwrap();
        fs::rename(t.path().join("moved.jsonl"), &tr).unwrap();
        // A hard link in the sub-agents.
        let hl = p.join(ID).join("subagents/agent-b2.jsonl");
        fs::hard_link(&elsewhere, &hl).unwrap();
        let e = plan(&src, &cwd, ID).unwrap_err();
        assert!(e.to_string().contains("second name"), "{e}");
        fs::remove_file(&hl).unwrap();
        // A FIFO among the tool results.
        let fifo = p.join(ID).join("tool-results/pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = plan(&src, &cwd, ID).unwrap_err();
        assert!(e.to_string().contains("special file"), "{e}");
        assert!(tree(&dst).is_empty(), "nothing written");
    }

    #[test]
    fn a_target_with_another_version_refuses_and_an_earlier_moves_copy_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let (src, cwd) = source(t.path());
        let dst = t.path().join("dst-home");
        let theirs = dst.join(format!("projects/-w-app/{ID}.jsonl"));
        write(&theirs, "{\"another\":\"version\"}\n");
        let before = tree(&dst);
        let plan = plan(&src, &cwd, ID).unwrap().unwrap();
        let e = copy(&plan, &dst, false, &mut |_| {}).unwrap_err();
        assert!(matches!(e, MoveError::Conflict(_)), "{e}");
        assert!(e.to_string().contains("already holds a version"), "{e}");
        assert_eq!(tree(&dst), before, "a refusal writes nothing");
        assert_eq!(
            fs::read_to_string(&theirs).unwrap(),
            "{\"another\":\"version\"}\n"
        );
        // Left by an earlier move of this run: replaced by the newer copy.
        copy(&plan, &dst, true, &mut |_| {}).unwrap().commit();
        assert_eq!(
            fs::read_to_string(&theirs).unwrap(),
            "{\"type\":\"user\"}\n"
        );
        assert!(dst.join(format!("projects/-w-app/{ID}/subagents")).is_dir());
        assert!(
            !dst.join(format!("projects/-w-app/.proctor-move-{ID}"))
                .exists(),
            "no staging left"
        );
    }

    #[test]
    fn a_copy_that_fails_half_way_removes_what_it_created() {
        let t = tempfile::tempdir().unwrap();
        let (src, cwd) = source(t.path());
        let dst = t.path().join("dst-home");
        fs::create_dir(&dst).unwrap();
        let plan = plan(&src, &cwd, ID).unwrap().unwrap();
        // A file appears in the target where the transcript goes, after the first file.
        let appeared = dst.join(format!("projects/-w-app/{ID}.jsonl"));
        let mut n = 0;
        let e = copy(&plan, &dst, false, &mut |_| {
            n += 1;
            if n == 2 {
                fs::write(&appeared, "someone else's\n").unwrap();
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("appeared"), "{e}");
        // Only the file that appeared is left: no folder, staging or copy of the move's.
        assert_eq!(
            tree(&dst),
            [
                "projects".to_string(),
                "projects/-w-app".into(),
                format!("projects/-w-app/{ID}.jsonl")
            ]
        );
        assert_eq!(fs::read_to_string(&appeared).unwrap(), "someone else's\n");
        fs::remove_file(&appeared).unwrap();
        fs::remove_dir_all(dst.join("projects")).unwrap();
        // A source file that changes while it is copied: refused, and nothing left.
        let sub = src.join(format!("projects/-w-app/{ID}/subagents/agent-a1.jsonl"));
        let e = copy(&plan, &dst, false, &mut |rel| {
            if rel.ends_with("agent-a1.jsonl") {
                fs::write(&sub, "{\"agent\":1,\"more\":true}\n").unwrap();
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("changed in the source home"), "{e}");
        assert!(tree(&dst).is_empty(), "{:?}", tree(&dst));
        // A target folder in the way of the project folder (a file): refused, nothing made.
        write(&sub, "{\"agent\":1}\n");
        let plan = super::plan(&src, &cwd, ID).unwrap().unwrap();
        write(&dst.join("projects"), "not a folder\n");
        let e = copy(&plan, &dst, false, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
        assert_eq!(tree(&dst), ["projects".to_string()]);
    }

    #[test]
    fn undo_after_a_replacing_copy_puts_the_earlier_copy_back() {
        let t = tempfile::tempdir().unwrap();
        let (src, cwd) = source(t.path());
        let dst = t.path().join("dst-home");
        let earlier = dst.join(format!("projects/-w-app/{ID}.jsonl"));
        write(&earlier, "earlier\n");
        let plan = plan(&src, &cwd, ID).unwrap().unwrap();
        let placed = copy(&plan, &dst, true, &mut |_| {}).unwrap();
        assert_eq!(
            fs::read_to_string(&earlier).unwrap(),
            "{\"type\":\"user\"}\n"
        );
        placed.undo();
        assert_eq!(fs::read_to_string(&earlier).unwrap(), "earlier\n");
        assert_eq!(
            tree(&dst),
            [
                "projects".to_string(),
                "projects/-w-app".into(),
                format!("projects/-w-app/{ID}.jsonl")
            ]
        );
    }
}
