//! Private files: every folder proctor creates is 0700 and every file 0600, whatever the
//! umask; whole-file state is replaced atomically; nothing follows a symlink it did not
//! expect.
//!
//! This module owns the low-level rules. The modes are set with `fchmod`/`chmod` after
//! creation, so a permissive or hostile umask changes nothing.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every folder proctor creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file proctor creates.
pub const FILE_MODE: u32 = 0o600;

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    #[error(
        "{path} is owned by uid {owner}, not by you (uid {me}); proctor keeps its state only \
         in folders you own. Remedy: choose another home with --home or PROCTOR_HOME, or \
         `chown` the folder to yourself"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{path} can be written by {who} (mode {mode:04o}); anyone who can write there can \
         plant or replace proctor's state. Remedy: `chmod 700 {path}`, or choose another home"
    )]
    TooOpen {
        path: PathBuf,
        mode: u32,
        who: &'static str,
    },
    #[error("{path} is not a folder. Remedy: move it aside or choose another home")]
    NotADirectory { path: PathBuf },
    #[error("{path} is a symbolic link; proctor does not follow links for its own files")]
    Symlink { path: PathBuf },
    #[error("{path} is not a regular file")]
    NotARegularFile { path: PathBuf },
}

impl FilesError {
    pub fn io(op: &'static str, path: &Path, err: io::Error) -> Self {
        FilesError::Io {
            op,
            path: path.to_path_buf(),
            err,
        }
    }
}

pub type Result<T> = std::result::Result<T, FilesError>;

/// The effective user id of this process.
pub fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuses a folder that another user owns or that group or others can write.
pub fn check_dir_is_private(path: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(path).map_err(|e| FilesError::io("inspect", path, e))?;
    if meta.file_type().is_symlink() {
        // A symlinked home is judged by what it points to; the target must pass the same rules.
        let target = fs::metadata(path).map_err(|e| FilesError::io("inspect", path, e))?;
        return check_meta(path, &target);
    }
    check_meta(path, &meta)
}

fn check_meta(path: &Path, meta: &fs::Metadata) -> Result<()> {
    if !meta.is_dir() {
        return Err(FilesError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let me = my_uid();
    if meta.uid() != me {
        return Err(FilesError::NotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group and others",
            (true, false) => "its group",
            _ => "others",
        };
        return Err(FilesError::TooOpen {
            path: path.to_path_buf(),
            mode,
            who,
        });
    }
    Ok(())
}

/// Creates `path` (and missing parents) as 0700 folders, or checks an existing one.
///
/// Folders that this call creates get exactly 0700. An existing folder must be owned by
/// this user and not writable by group or others; it is then tightened to 0700 (its
/// contents were already private files, so only the listing changes).
pub fn ensure_private_dir(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(_) => {
            check_dir_is_private(path)?;
            let meta = fs::metadata(path).map_err(|e| FilesError::io("inspect", path, e))?;
            if meta.mode() & 0o777 != DIR_MODE {
                fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
                    .map_err(|e| FilesError::io("set the mode of", path, e))?;
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent()
                && !parent.as_os_str().is_empty()
                && fs::symlink_metadata(parent).is_err()
            {
                ensure_private_dir(parent)?;
            }
            match fs::DirBuilder::new().mode(DIR_MODE).create(path) {
                Ok(()) => {}
                // Another process created it between our look and our create: judge theirs.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return ensure_private_dir(path);
                }
                Err(e) => return Err(FilesError::io("create the folder", path, e)),
            }
            // The umask may have removed bits from 0700; set the mode exactly.
            fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| FilesError::io("set the mode of", path, e))?;
            Ok(())
        }
        Err(e) => Err(FilesError::io("inspect", path, e)),
    }
}

/// Opens (creating if absent) a private file for reading and appending. Refuses a symlink
/// or anything that is not a regular file we own; tightens a wider mode to 0600.
pub fn open_private_append(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    make_file_private(path, &file)?;
    Ok(file)
}

/// Opens an existing private file read-only, refusing symlinks.
pub fn open_private_read(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| FilesError::io("inspect", path, e))?;
    if !meta.is_file() {
        return Err(FilesError::NotARegularFile {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Creates a new private file; fails if anything already exists at `path` (O_EXCL), so a
/// planted file or symlink is never written through.
pub fn create_private_new(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FilesError::io("create", path, e))?;
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| FilesError::io("set the mode of", path, e))?;
    Ok(file)
}

/// Creates a private file (0600) with no name in the folder `dir`, for reading and writing:
/// `O_TMPFILE`, so nothing else can open it by a path and it is gone when its last
/// descriptor closes. A file system without `O_TMPFILE` gets a new file made exclusively
/// and unlinked at once.
pub fn create_private_unnamed(dir: &Path) -> Result<File> {
    let tmp = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir);
    let file = match tmp {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
            let mut name = [0u8; 8];
            getrandom::fill(&mut name).map_err(|e| {
                FilesError::io("name a file in", dir, io::Error::other(e.to_string()))
            })?;
            let path = dir.join(format!(".spill-{}", hex::encode(name)));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(FILE_MODE)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| FilesError::io("create", &path, e))?;
            fs::remove_file(&path).map_err(|e| FilesError::io("unlink", &path, e))?;
            f
        }
        Err(e) => return Err(FilesError::io("create an unnamed file in", dir, e)),
    };
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| FilesError::io("set the mode of a file in", dir, e))?;
    Ok(file)
}

fn open_error(path: &Path, e: io::Error) -> FilesError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        FilesError::Symlink {
            path: path.to_path_buf(),
        }
    } else {
        FilesError::io("open", path, e)
    }
}

fn make_file_private(path: &Path, file: &File) -> Result<()> {
    let meta = file
        .metadata()
        .map_err(|e| FilesError::io("inspect", path, e))?;
    if !meta.is_file() {
        return Err(FilesError::NotARegularFile {
            path: path.to_path_buf(),
        });
    }
    let me = my_uid();
    if meta.uid() != me {
        return Err(FilesError::NotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o777 != FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| FilesError::io("set the mode of", path, e))?;
    }
    Ok(())
}

/// fsyncs a folder, so that a rename or a new entry in it survives a crash.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| FilesError::io("open the folder", dir, e))?;
    d.sync_all()
        .map_err(|e| FilesError::io("fsync the folder", dir, e))
}

/// The folder that holds `path` ("." for a bare file name).
pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replaces the whole content of `path` atomically: a temp file beside it opened
/// O_EXCL|O_NOFOLLOW with 0600, written and fsync'd, renamed over `path`, then the folder
/// fsync'd. A crash leaves either the old content or the new, never a mix; a failure
/// removes the temp file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| FilesError::io("write", path, io::Error::other("no file name")))?;
    let tmp = temp_sibling(&dir, name);
    let result = (|| {
        let mut f = create_private_new(&tmp)?;
        f.write_all(bytes)
            .map_err(|e| FilesError::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| FilesError::io("fsync", &tmp, e))?;
        drop(f);
        fs::rename(&tmp, path).map_err(|e| FilesError::io("rename into place", path, e))?;
        fsync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A fresh name beside `name` in `dir` for a temp file (hidden, unique to this process and call).
pub(crate) fn temp_sibling(dir: &Path, name: &std::ffi::OsStr) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".tmp.{}.{n}.{nanos:x}", std::process::id()));
    dir.join(tmp)
}

/// The entries `<prefix>NNNN<suffix>` of `dir` as (number, id), in number order (an absent
/// folder has none). Every numbered store (candidates, evidence, receipts, intents) lists
/// itself through this.
pub(crate) fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<(u64, String)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FilesError::io("read the folder", dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| FilesError::io("read the folder", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(body) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(suffix))
            && let Some(n) = parse_number(body)
        {
            out.push((n, format!("{prefix}{body}")));
        }
    }
    out.sort();
    Ok(out)
}

/// Highest number used by entries `<prefix>NNNN<suffix>` in `dir` (0 when none).
fn highest(dir: &Path, prefix: &str, suffix: &str) -> Result<u64> {
    Ok(numbered(dir, prefix, suffix)?.last().map_or(0, |(n, _)| *n))
}

/// The number of an id body such as `0001` (at least four digits, no sign).
pub(crate) fn parse_number(s: &str) -> Option<u64> {
    if s.len() >= 4 && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// True for `<prefix>NNNN` (four or more digits): an id that is safe in a path.
pub(crate) fn valid_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).and_then(parse_number).is_some()
}

/// Reserves the next `<prefix>NNNN` in `dir` by creating it exclusively: a 0700 folder
/// (`suffix` empty) or an empty 0600 file (`suffix` such as `.json`, O_EXCL|O_NOFOLLOW).
/// Two reservations never get the same id, across threads and processes.
pub(crate) fn reserve_numbered(
    dir: &Path,
    prefix: &str,
    suffix: &str,
) -> Result<(String, PathBuf)> {
    ensure_private_dir(dir)?;
    let mut n = highest(dir, prefix, suffix)? + 1;
    loop {
        let id = format!("{prefix}{n:04}");
        let path = dir.join(format!("{id}{suffix}"));
        let made = if suffix.is_empty() {
            // Created 0700 whatever the umask (a permissive umask would otherwise leave it
            // wider, and then refused as too open), then set exactly.
            fs::DirBuilder::new()
                .mode(DIR_MODE)
                .create(&path)
                .map_err(|e| FilesError::io("create the folder", &path, e))
                .and_then(|()| {
                    fs::set_permissions(&path, fs::Permissions::from_mode(DIR_MODE))
                        .map_err(|e| FilesError::io("set the mode of", &path, e))
                })
                .and_then(|()| ensure_private_dir(&path))
        } else {
            create_private_new(&path).map(drop)
        };
        match made {
            Ok(()) => return Ok((id, path)),
            Err(FilesError::Io { err, .. }) if err.kind() == io::ErrorKind::AlreadyExists => {
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// SHA-256 of a file's bytes (streamed), with its size. `Ok(None)` when it does not exist.
pub(crate) fn hash_file(path: &Path) -> Result<Option<(u64, String)>> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = match open_private_read(path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FilesError::io("read", path, e)),
        };
        h.update(&buf[..n]);
        total += n as u64;
    }
    Ok(Some((total, hex::encode(h.finalize()))))
}

/// Whether `path` (absolute, as this process sees it) is the same file at the same path
/// under `root` (another root as this process sees it, e.g. a rig's `/proc/PID/root`):
/// same device and inode, as a read-only bind of the host's `/usr` is.
pub fn same_file_under(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix("/") else {
        return false;
    };
    match (std::fs::metadata(path), std::fs::metadata(root.join(rel))) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    /// The umask is process-wide; tests that change it run under this lock.
    static UMASK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn with_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
        let _g = UMASK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: umask has no preconditions.
        let old = unsafe { libc::umask(mask) };
        let out = f();
        unsafe { libc::umask(old) };
        out
    }

    #[test]
    fn an_unnamed_file_is_0600_and_leaves_no_name() {
        use std::io::{Read, Seek, Write};
        for mask in [0o000, 0o022] {
            let t = tempfile::tempdir().unwrap();
            let mut f = with_umask(mask, || create_private_unnamed(t.path()).unwrap());
            assert_eq!(f.metadata().unwrap().mode() & 0o7777, 0o600);
            assert_eq!(fs::read_dir(t.path()).unwrap().count(), 0, "no name");
            f.write_all(b"spill").unwrap();
            f.rewind().unwrap();
            let mut back = String::new();
            f.read_to_string(&mut back).unwrap();
            assert_eq!(back, "spill");
        }
    }

    #[test]
    fn modes_are_exact_whatever_the_umask() {
        for mask in [0o000, 0o022, 0o077, 0o277] {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("a/b/c");
            let file = dir.join("state.json");
            let appended = dir.join("log");
            with_umask(mask, || {
                ensure_private_dir(&dir).unwrap();
                write_atomic(&file, b"{}").unwrap();
                open_private_append(&appended).unwrap();
            });
            for d in ["a", "a/b", "a/b/c"] {
                assert_eq!(mode(&t.path().join(d)), 0o700, "{d} under umask {mask:o}");
            }
            assert_eq!(mode(&file), 0o600, "umask {mask:o}");
            assert_eq!(mode(&appended), 0o600, "umask {mask:o}");
        }
    }

    #[test]
    fn group_or_world_writable_folder_is_refused_by_name() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("home");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o775)).unwrap();
        let e = ensure_private_dir(&d).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, FilesError::TooOpen { .. }), "{msg}");
        assert!(msg.contains(&d.display().to_string()), "{msg}");
        assert!(msg.contains("chmod 700"), "{msg}");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o757)).unwrap();
        assert!(matches!(
            ensure_private_dir(&d).unwrap_err(),
            FilesError::TooOpen { who: "others", .. }
        ));
        // Readable but not writable by others: accepted and tightened to 0700.
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
    }

    #[test]
    fn folder_owned_by_another_user_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = if my_uid() == 0 {
            // As root, make a folder that belongs to "nobody".
            let d = t.path().join("theirs");
            fs::create_dir(&d).unwrap();
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
            d
        } else {
            PathBuf::from("/")
        };
        let e = ensure_private_dir(&d).unwrap_err();
        assert!(matches!(e, FilesError::NotOwned { .. }), "{e}");
        assert!(e.to_string().contains(&d.display().to_string()));
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(t.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temp file was left behind");
    }

    #[test]
    fn atomic_write_replaces_a_symlink_instead_of_writing_through_it() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let p = t.path().join("state");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert!(!fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
    }

    #[test]
    fn append_refuses_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let p = t.path().join("ledger");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        assert!(matches!(
            open_private_append(&p).unwrap_err(),
            FilesError::Symlink { .. }
        ));
    }

    #[test]
    fn a_reservation_is_private_under_a_permissive_umask() {
        // CI saw `reserve_numbered` refuse its own new folder as too open (0777) while
        // another test had the umask at 0.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("x");
        let (_, p) = with_umask(0, || reserve_numbered(&dir, "ev-", "").unwrap());
        assert_eq!(mode(&p), 0o700);
    }

    #[test]
    fn reservations_are_exclusive_and_numbered() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("x");
        let (a, pa) = reserve_numbered(&dir, "ev-", "").unwrap();
        let (b, _) = reserve_numbered(&dir, "ev-", "").unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("ev-0001", "ev-0002"));
        assert!(pa.is_dir());
        let (c, pc) = reserve_numbered(&dir, "rcpt-", ".json").unwrap();
        assert_eq!(c, "rcpt-0001");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&pc).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&pa).unwrap().mode() & 0o777, 0o700);
        assert!(valid_id("ev-0001", "ev-"));
        assert!(!valid_id("ev-1", "ev-"));
        assert!(!valid_id("ev-../x", "ev-"));
    }
}
