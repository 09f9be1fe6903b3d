//! The inventory digest: one number that names the exact bytes of a folder tree.
//!
//! Output contract `inventory-digest/1`, hashing recipe `ordinal-path-bytes-sha256/1`
//! (seed 000, "Lier une arborescence à un nombre"), exactly:
//!
//! 1. every regular file under the root, skipping `.git` and `node_modules` at any depth;
//! 2. one line per file, `relative/path|byte-count|file-sha256` (lowercase hex), `/` between
//!    path components;
//! 3. lines sorted by path in ordinal order of UTF-16 code units (never a locale collation,
//!    never case-folded);
//! 4. lines joined with LF, no final LF;
//! 5. the SHA-256 of the UTF-8 bytes of that document.
//!
//! Raw bytes are hashed, never decoded text: a CRLF tree and an LF tree differ. An entry that
//! is neither a regular file nor a folder (symbolic link, device, FIFO, socket) is refused by
//! name, never skipped, because skipping it would name a tree that is not the one on disk.
//! Names the recipe cannot represent (not UTF-8, or containing a line feed) are refused the
//! same way. A digest never travels without its recipe: [`Inventory::digest_with_recipe`] is
//! the only rendering offered.
//!
//! The walk is fd-relative (`openat`/`fstatat` with `O_NOFOLLOW`), so a folder swapped for a
//! symbolic link during the walk is refused rather than followed. Hashing runs in parallel
//! (rayon), streams each file in chunks and checks that each file is still the one that was
//! listed (same device, inode, size, mtime and ctime) once it has been read; otherwise the
//! command fails naming the file rather than emit the digest of a tree that never existed.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use rayon::prelude::*;
use sha2::{Digest, Sha256};

/// The output contract: the lines `format`, `root`, `count`, `bytes`, `digest`.
pub const FORMAT: &str = "inventory-digest/1";
/// The hashing recipe; it prefixes every rendering of the digest.
pub const RECIPE: &str = "ordinal-path-bytes-sha256/1";

/// Names skipped at any depth, whatever the entry is (folder, file or link): not descended,
/// not listed. Compared exactly (case-sensitive, byte for byte).
pub const SKIPPED_NAMES: [&str; 2] = [".git", "node_modules"];

/// What a walk skips and which entry types it records. [`Rules::INVENTORY`] is the seed's
/// recipe (this module's contract); other recipes built on the same walk (the candidate
/// inventory of `crate::candidate`) define their own rules and their own document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Names skipped at any depth, whatever the entry is: not descended, not listed.
    pub skip_any_depth: &'static [&'static str],
    /// Names skipped only directly under the root.
    pub skip_at_root: &'static [&'static str],
    /// Record a symbolic link as an entry (its target's bytes are hashed, the link is not
    /// followed) instead of refusing it.
    pub symlinks: bool,
    /// Record every folder as an entry, so that an empty folder is visible.
    pub folders: bool,
}

impl Rules {
    /// `inventory-digest/1`: regular files only, `.git` and `node_modules` skipped at any
    /// depth, symbolic links refused.
    pub const INVENTORY: Rules = Rules {
        skip_any_depth: &SKIPPED_NAMES,
        skip_at_root: &[],
        symlinks: false,
        folders: false,
    };

    fn skips(&self, prefix: &str, name: &[u8]) -> bool {
        self.skip_any_depth.iter().any(|s| s.as_bytes() == name)
            || (prefix.is_empty() && self.skip_at_root.iter().any(|s| s.as_bytes() == name))
    }
}

/// The type of a listed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file without the owner's execute bit.
    File,
    /// A regular file with the owner's execute bit.
    Executable,
    /// A symbolic link (only under rules that record links).
    Symlink,
    /// A folder (only under rules that record folders).
    Folder,
}

/// Bytes read per `read` call when streaming a file into SHA-256. 64 KiB keeps the buffer
/// in the core's L2 cache between the kernel's copy and the hash; 256 KiB and 1 MiB cost
/// about 40% more CPU time on the benchmark tree (docs/performance.md).
const CHUNK: usize = 64 * 1024;

/// Refusals shown in one error message; the rest are counted.
const SHOWN_REFUSALS: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("the root {root} does not exist. Remedy: pass an existing folder with --root")]
    RootMissing { root: String },
    #[error("the root {root} is not a folder. Remedy: pass a folder with --root")]
    RootNotAFolder { root: String },
    #[error("{}", refused_message(.root, .entries))]
    Refused { root: String, entries: Vec<Refusal> },
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: String,
        err: io::Error,
    },
    #[error(
        "{path} changed while the tree was being hashed ({detail}); no digest is printed, \
         because it would name a tree that never existed. Remedy: stop whatever writes to \
         the tree and run again"
    )]
    Changed { path: String, detail: String },
    #[error(
        "--manifest {manifest} would land inside --root {root}: its folder {folder} is at \
         or below {inside}, which is the root or a folder of its tree by device and inode; \
         writing it would change the tree it measures. Remedy: write the manifest outside \
         the root"
    )]
    ManifestInsideRoot {
        manifest: String,
        root: String,
        folder: String,
        inside: String,
    },
    #[error(
        "cannot use the folder {folder} of --manifest: {err}. Remedy: create that folder \
         first, or choose another --manifest path"
    )]
    ManifestFolder { folder: String, err: io::Error },
    #[error(
        "--manifest {manifest} does not name a file (it ends in a folder, or names an \
         existing folder). Remedy: name a file, e.g. DIR/inventory.txt"
    )]
    ManifestName { manifest: String },
    /// The manifest could not be written (the message names the file and the cause).
    #[error("cannot write the manifest: {0}")]
    ManifestWrite(crate::files::FilesError),
}

impl DigestError {
    /// True when the operator must fix the command line (exit code 2), false when the
    /// tree or the system made the operation fail (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DigestError::RootMissing { .. }
                | DigestError::RootNotAFolder { .. }
                | DigestError::ManifestInsideRoot { .. }
                | DigestError::ManifestFolder { .. }
                | DigestError::ManifestName { .. }
        )
    }
}

/// One entry the recipe cannot represent, named by its escaped path relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Relative path with `/`, escaped by [`escape_bytes`].
    pub path: String,
    /// Raw path bytes, for a stable order between refusals.
    raw: Vec<u8>,
    pub kind: RefusalKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    SymbolicLink,
    Fifo,
    Socket,
    BlockDevice,
    CharDevice,
    UnknownType,
    NotUtf8,
    LineFeed,
}

impl RefusalKind {
    pub fn describe(self) -> &'static str {
        match self {
            RefusalKind::SymbolicLink => "symbolic link",
            RefusalKind::Fifo => "named pipe (FIFO)",
            RefusalKind::Socket => "socket",
            RefusalKind::BlockDevice => "block device",
            RefusalKind::CharDevice => "character device",
            RefusalKind::UnknownType => "entry of unknown type",
            RefusalKind::NotUtf8 => "name that is not UTF-8",
            RefusalKind::LineFeed => "name containing a line feed",
        }
    }
}

fn refused_message(root: &str, entries: &[Refusal]) -> String {
    let mut s = format!(
        "{} {} under {root} cannot be part of an {FORMAT} digest (only regular files and \
         folders with UTF-8 names free of line feeds can; nothing is skipped silently):",
        entries.len(),
        if entries.len() == 1 {
            "entry"
        } else {
            "entries"
        },
    );
    for r in entries.iter().take(SHOWN_REFUSALS) {
        s.push_str(&format!("\n  {}: {}", r.path, r.kind.describe()));
    }
    if entries.len() > SHOWN_REFUSALS {
        s.push_str(&format!(
            "\n  … and {} more",
            entries.len() - SHOWN_REFUSALS
        ));
    }
    s.push_str(
        "\nRemedy: remove or replace these entries, or measure a copy of the tree without them",
    );
    s
}

/// Renders bytes unambiguously on one line: valid UTF-8 is kept except `\` (as `\\`),
/// C0 controls and DEL (`\n`, `\r`, `\t`, else `\xNN`), and C1 controls, format characters
/// (bidi controls, zero-width characters) and line/paragraph separators (`\u{NNNN}`); each
/// byte that is not part of valid UTF-8 becomes `\xNN`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    out.push_str(&format!("\\x{:02X}", c as u32))
                }
                c if c.is_control() || invisible(c) => {
                    out.push_str(&format!("\\u{{{:X}}}", c as u32))
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Format characters (bidi controls, zero-width characters, …) and line/paragraph
/// separators: invisible or reordering, so a name holding them is shown escaped.
fn invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// A path rendered by [`escape_bytes`].
pub fn escape_path(p: &Path) -> String {
    escape_bytes(p.as_os_str().as_bytes())
}

/// Ordinal order of UTF-16 code units, as JavaScript's `<` on strings and .NET's
/// `StringComparer.Ordinal`. It differs from Rust's `str` order (code points): a character
/// above U+FFFF (a surrogate pair, 0xD800–0xDBFF first) sorts before U+E000–U+FFFF.
pub fn ordinal_cmp(a: &str, b: &str) -> Ordering {
    // Byte order of UTF-8 is code-point order, which agrees with UTF-16 order except where
    // one side has U+10000.. and the other U+E000..U+FFFF at the first difference. So compare
    // bytes, and only re-judge the first differing characters when both are non-ASCII.
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let common = ab.iter().zip(bb).take_while(|(x, y)| x == y).count();
    if common == ab.len() || common == bb.len() {
        return ab.len().cmp(&bb.len());
    }
    if ab[common] < 0x80 || bb[common] < 0x80 {
        return ab[common].cmp(&bb[common]);
    }
    // Back up to the start of the character that differs (same prefix in both).
    let mut start = common;
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    a[start..].encode_utf16().cmp(b[start..].encode_utf16())
}

/// Identity of a folder or file in the filesystem: (device, inode).
pub type FileId = (u64, u64);

/// (device, inode) of a `stat`; the field types differ between platforms.
#[allow(clippy::unnecessary_cast)]
fn stat_id(st: &libc::stat) -> FileId {
    (st.st_dev as u64, st.st_ino as u64)
}

#[allow(clippy::unnecessary_cast)]
fn stat_time(secs: libc::time_t, nsecs: libc::c_long) -> (i64, i64) {
    (secs as i64, nsecs as i64)
}

/// An entry as listed by the walk.
#[derive(Debug, Clone)]
struct Listed {
    path: String,
    kind: EntryKind,
    size: u64,
    id: FileId,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The result of walking a tree: the files to hash (already in recipe order) and the
/// identity of every folder seen, for the manifest rule.
#[derive(Debug)]
pub struct Listing {
    root: PathBuf,
    root_id: FileId,
    folders: HashSet<FileId>,
    files: Vec<Listed>,
    rules: Rules,
}

impl Listing {
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The rules the tree was walked with.
    pub fn rules(&self) -> Rules {
        self.rules
    }
    /// Number of entries listed (regular files, and links and folders when the rules
    /// record them).
    pub fn count(&self) -> u64 {
        self.files.len() as u64
    }
    /// Sum of the listed sizes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
    /// The listed paths, in recipe order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|f| f.path.as_str())
    }
}

/// Opens the root (a symbolic link given as the root is followed; links inside the tree are
/// not) and returns its identity.
pub fn root_id(root: &Path) -> Result<FileId, DigestError> {
    let meta = fs::metadata(root).map_err(|e| root_error(root, e))?;
    if !meta.is_dir() {
        return Err(DigestError::RootNotAFolder {
            root: escape_path(root),
        });
    }
    Ok((meta.dev(), meta.ino()))
}

fn root_error(root: &Path, e: io::Error) -> DigestError {
    if e.kind() == io::ErrorKind::NotFound {
        DigestError::RootMissing {
            root: escape_path(root),
        }
    } else if e.raw_os_error() == Some(libc::ENOTDIR) {
        DigestError::RootNotAFolder {
            root: escape_path(root),
        }
    } else {
        DigestError::Io {
            op: "open the root",
            path: escape_path(root),
            err: e,
        }
    }
}

/// Walks the tree under `root` and lists its regular files in recipe order. Fails with
/// every entry the recipe cannot represent, named.
pub fn list(root: &Path) -> Result<Listing, DigestError> {
    list_with(root, Rules::INVENTORY)
}

/// Walks the tree under `root` under `rules` and lists its entries in ordinal path order.
/// Fails with every entry the rules cannot represent, named.
pub fn list_with(root: &Path, rules: Rules) -> Result<Listing, DigestError> {
    let mut dir = Dir::open_root(root).map_err(|e| root_error(root, e))?;
    let st = dir.stat_self().map_err(|e| DigestError::Io {
        op: "inspect",
        path: escape_path(root),
        err: e,
    })?;
    let root_id = stat_id(&st);
    let mut walk = Walk {
        root,
        rules,
        folders: HashSet::from([root_id]),
        files: Vec::new(),
        refusals: Vec::new(),
    };
    walk.visit(&mut dir, "")?;
    if !walk.refusals.is_empty() {
        let mut entries = walk.refusals;
        entries.sort_by(|a, b| a.raw.cmp(&b.raw));
        return Err(DigestError::Refused {
            root: escape_path(root),
            entries,
        });
    }
    let mut files = walk.files;
    files.sort_unstable_by(|a, b| ordinal_cmp(&a.path, &b.path));
    Ok(Listing {
        root: root.to_path_buf(),
        root_id,
        folders: walk.folders,
        files,
        rules,
    })
}

struct Walk<'a> {
    root: &'a Path,
    rules: Rules,
    folders: HashSet<FileId>,
    files: Vec<Listed>,
    refusals: Vec<Refusal>,
}

impl Walk<'_> {
    fn io(&self, op: &'static str, rel: &[u8], err: io::Error) -> DigestError {
        let mut p = self.root.as_os_str().as_bytes().to_vec();
        if !rel.is_empty() {
            p.push(b'/');
            p.extend_from_slice(rel);
        }
        DigestError::Io {
            op,
            path: escape_bytes(&p),
            err,
        }
    }

    fn refuse(&mut self, prefix: &str, name: &[u8], kind: RefusalKind) {
        let mut raw = prefix.as_bytes().to_vec();
        raw.extend_from_slice(name);
        self.refusals.push(Refusal {
            path: escape_bytes(&raw),
            raw,
            kind,
        });
    }

    /// Lists `dir`, whose relative path is `prefix` ("" for the root, else "a/b/").
    fn visit(&mut self, dir: &mut Dir, prefix: &str) -> Result<(), DigestError> {
        let names = dir
            .names()
            .map_err(|e| self.io("read the folder", prefix.as_bytes(), e))?;
        for name in names {
            let bytes = name.to_bytes();
            if self.rules.skips(prefix, bytes) {
                // Not descended, not listed. A skipped folder's identity still counts as
                // inside the root for the manifest rule.
                if let Ok(st) = dir.stat_at(&name)
                    && st.st_mode & libc::S_IFMT == libc::S_IFDIR
                {
                    self.folders.insert(stat_id(&st));
                }
                continue;
            }
            let Ok(name_str) = std::str::from_utf8(bytes) else {
                self.refuse(prefix, bytes, RefusalKind::NotUtf8);
                continue;
            };
            if name_str.contains('\n') {
                self.refuse(prefix, bytes, RefusalKind::LineFeed);
                continue;
            }
            let rel = format!("{prefix}{name_str}");
            let st = dir
                .stat_at(&name)
                .map_err(|e| self.io("inspect", rel.as_bytes(), e))?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFREG => self.files.push(Listed {
                    path: rel,
                    kind: if st.st_mode & libc::S_IXUSR != 0 {
                        EntryKind::Executable
                    } else {
                        EntryKind::File
                    },
                    size: u64::try_from(st.st_size).unwrap_or(0),
                    id: stat_id(&st),
                    mtime: stat_time(st.st_mtime, st.st_mtime_nsec),
                    ctime: stat_time(st.st_ctime, st.st_ctime_nsec),
                }),
                libc::S_IFLNK if self.rules.symlinks => self.files.push(Listed {
                    path: rel,
                    kind: EntryKind::Symlink,
                    size: u64::try_from(st.st_size).unwrap_or(0),
                    id: stat_id(&st),
                    mtime: stat_time(st.st_mtime, st.st_mtime_nsec),
                    ctime: stat_time(st.st_ctime, st.st_ctime_nsec),
                }),
                libc::S_IFDIR => {
                    let mut child = match dir.open_child(&name) {
                        Ok(child) => child,
                        // Swapped for a link (or a non-folder) since we looked at it.
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                            return Err(DigestError::Changed {
                                path: escape_bytes(rel.as_bytes()),
                                detail: "a folder when listed, no longer a folder when opened"
                                    .into(),
                            });
                        }
                        Err(e) => return Err(self.io("open the folder", rel.as_bytes(), e)),
                    };
                    let cst = child
                        .stat_self()
                        .map_err(|e| self.io("inspect", rel.as_bytes(), e))?;
                    let id = stat_id(&cst);
                    if id != stat_id(&st) {
                        return Err(DigestError::Changed {
                            path: escape_bytes(rel.as_bytes()),
                            detail: "the folder was replaced while it was being listed".into(),
                        });
                    }
                    self.folders.insert(id);
                    if self.rules.folders {
                        self.files.push(Listed {
                            path: rel.clone(),
                            kind: EntryKind::Folder,
                            size: 0,
                            id,
                            mtime: stat_time(cst.st_mtime, cst.st_mtime_nsec),
                            ctime: stat_time(cst.st_ctime, cst.st_ctime_nsec),
                        });
                    }
                    self.visit(&mut child, &format!("{rel}/"))?;
                }
                libc::S_IFLNK => self.refuse(prefix, bytes, RefusalKind::SymbolicLink),
                libc::S_IFIFO => self.refuse(prefix, bytes, RefusalKind::Fifo),
                libc::S_IFSOCK => self.refuse(prefix, bytes, RefusalKind::Socket),
                libc::S_IFBLK => self.refuse(prefix, bytes, RefusalKind::BlockDevice),
                libc::S_IFCHR => self.refuse(prefix, bytes, RefusalKind::CharDevice),
                _ => self.refuse(prefix, bytes, RefusalKind::UnknownType),
            }
        }
        Ok(())
    }
}

/// An open folder, read through its file descriptor (`openat`, `fstatat`, `readdir`).
struct Dir {
    dir: std::ptr::NonNull<libc::DIR>,
}

impl Dir {
    fn from_fd(fd: libc::c_int) -> io::Result<Dir> {
        // SAFETY: fd is an open folder descriptor that we own; on success fdopendir takes
        // ownership of it (closedir closes it), on failure we close it.
        let dir = unsafe { libc::fdopendir(fd) };
        match std::ptr::NonNull::new(dir) {
            Some(dir) => Ok(Dir { dir }),
            None => {
                let e = io::Error::last_os_error();
                // SAFETY: fd is still ours since fdopendir failed.
                unsafe { libc::close(fd) };
                Err(e)
            }
        }
    }

    /// Opens the root; a symbolic link given as the root is followed.
    fn open_root(path: &Path) -> io::Result<Dir> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in path"))?;
        // SAFETY: c is a valid NUL-terminated string.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Dir::from_fd(fd)
    }

    /// Opens a child folder without following a symbolic link.
    fn open_child(&self, name: &CStr) -> io::Result<Dir> {
        // SAFETY: dirfd returns the descriptor of our open DIR; name is NUL-terminated.
        let fd = unsafe {
            libc::openat(
                libc::dirfd(self.dir.as_ptr()),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Dir::from_fd(fd)
    }

    fn stat_self(&self) -> io::Result<libc::stat> {
        // SAFETY: an all-zero stat is a valid value; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and pointer.
        let r = unsafe { libc::fstat(libc::dirfd(self.dir.as_ptr()), &mut st) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// The entry's own metadata (a symbolic link is not followed).
    fn stat_at(&self, name: &CStr) -> io::Result<libc::stat> {
        // SAFETY: an all-zero stat is a valid value; fstatat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, NUL-terminated name and pointer.
        let r = unsafe {
            libc::fstatat(
                libc::dirfd(self.dir.as_ptr()),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// Every name in the folder except `.` and `..`.
    fn names(&mut self) -> io::Result<Vec<CString>> {
        let mut out = Vec::new();
        loop {
            set_errno(0);
            // SAFETY: our DIR is open and used by this thread only (Dir is not Send).
            let ent = unsafe { libc::readdir(self.dir.as_ptr()) };
            if ent.is_null() {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(0) | None => Ok(out),
                    Some(_) => Err(e),
                };
            }
            // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated; we copy
            // it before the next call.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
            let b = name.to_bytes();
            if b != b"." && b != b".." {
                out.push(name.to_owned());
            }
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: the DIR is open and owned by us; closedir also closes its descriptor.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

fn set_errno(v: libc::c_int) {
    // SAFETY: the errno location is valid for the calling thread.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    unsafe {
        *libc::__errno_location() = v
    };
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    unsafe {
        *libc::__error() = v
    };
}

/// Counters a caller may watch while [`hash`] runs (e.g. for a progress line).
#[derive(Debug, Default)]
pub struct Progress {
    pub files_total: AtomicU64,
    pub bytes_total: AtomicU64,
    pub files_done: AtomicU64,
    pub bytes_done: AtomicU64,
}

/// A consistent-enough view of [`Progress`] (each counter read once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressSnapshot {
    pub files_total: u64,
    pub bytes_total: u64,
    pub files_done: u64,
    pub bytes_done: u64,
}

impl Progress {
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            files_total: self.files_total.load(AtomicOrdering::Relaxed),
            bytes_total: self.bytes_total.load(AtomicOrdering::Relaxed),
            files_done: self.files_done.load(AtomicOrdering::Relaxed),
            bytes_done: self.bytes_done.load(AtomicOrdering::Relaxed),
        }
    }
}

/// One line of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// Relative path with `/`.
    pub path: String,
    pub bytes: u64,
    pub sha256: [u8; 32],
}

/// A measured tree.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub root: PathBuf,
    /// In recipe order.
    pub files: Vec<FileDigest>,
    /// The SHA-256 of [`Inventory::document`].
    pub digest: [u8; 32],
}

impl Inventory {
    /// Builds the inventory of already-hashed files (sorted here into recipe order). The
    /// caller vouches that the paths are unique, relative, `/`-separated and free of line
    /// feeds, as [`list`] guarantees; otherwise the document is ambiguous.
    pub fn from_files(root: PathBuf, mut files: Vec<FileDigest>) -> Inventory {
        files.sort_unstable_by(|a, b| ordinal_cmp(&a.path, &b.path));
        let digest = Sha256::digest(document_of(&files).as_bytes()).into();
        Inventory {
            root,
            files,
            digest,
        }
    }

    pub fn count(&self) -> u64 {
        self.files.len() as u64
    }

    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The hashed document: `path|bytes|sha256` lines joined with LF, no final LF.
    pub fn document(&self) -> String {
        document_of(&self.files)
    }

    /// `ordinal-path-bytes-sha256/1 <hex>`: the only way this module renders the digest.
    pub fn digest_with_recipe(&self) -> String {
        format!("{RECIPE} {}", hex::encode(self.digest))
    }
}

fn document_of(files: &[FileDigest]) -> String {
    let mut doc = String::with_capacity(files.iter().map(|f| f.path.len() + 88).sum());
    for (i, f) in files.iter().enumerate() {
        if i > 0 {
            doc.push('\n');
        }
        doc.push_str(&f.path);
        doc.push('|');
        doc.push_str(&f.bytes.to_string());
        doc.push('|');
        doc.push_str(&hex::encode(f.sha256));
    }
    doc
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Hashes every listed file in parallel (rayon's pool, one worker per core) and builds the
/// inventory. Fails naming a file that changed, vanished or cannot be read.
///
/// For a listing made by [`list`] (regular files only). A listing made under other rules is
/// hashed with [`hash_entries`], whose caller defines its own document.
pub fn hash(listing: &Listing, progress: Option<&Progress>) -> Result<Inventory, DigestError> {
    let files = hash_entries(listing, progress)?
        .into_iter()
        .map(|e| FileDigest {
            path: e.path,
            bytes: e.bytes,
            sha256: e.sha256,
        })
        .collect();
    // The listing is already in recipe order; from_files re-sorts an ordered vector cheaply.
    Ok(Inventory::from_files(listing.root.clone(), files))
}

/// One hashed entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path with `/`.
    pub path: String,
    pub kind: EntryKind,
    /// A file's size; a link's target length; 0 for a folder.
    pub bytes: u64,
    /// SHA-256 of a file's bytes, of a link's target bytes, of the empty string for a
    /// folder.
    pub sha256: [u8; 32],
}

/// Hashes every listed entry in parallel and returns them in the listing's (ordinal path)
/// order. A file is streamed and must still be the one listed afterwards; a symbolic link's
/// target is read without following it and the link must still be the one listed; a folder
/// is not read. Fails naming an entry that changed, vanished or cannot be read.
pub fn hash_entries(
    listing: &Listing,
    progress: Option<&Progress>,
) -> Result<Vec<Entry>, DigestError> {
    if let Some(p) = progress {
        p.files_total
            .store(listing.count(), AtomicOrdering::Relaxed);
        p.bytes_total
            .store(listing.bytes(), AtomicOrdering::Relaxed);
    }
    listing
        .files
        .par_iter()
        .map(|f| match f.kind {
            EntryKind::File | EntryKind::Executable => BUFFER.with_borrow_mut(|buf| {
                if buf.len() < CHUNK {
                    buf.resize(CHUNK, 0);
                }
                hash_one(&listing.root, f, buf, progress).map(|d| Entry {
                    path: d.path,
                    kind: f.kind,
                    bytes: d.bytes,
                    sha256: d.sha256,
                })
            }),
            EntryKind::Symlink => hash_link(&listing.root, f, progress),
            EntryKind::Folder => {
                if let Some(p) = progress {
                    p.files_done.fetch_add(1, AtomicOrdering::Relaxed);
                }
                Ok(Entry {
                    path: f.path.clone(),
                    kind: EntryKind::Folder,
                    bytes: 0,
                    sha256: Sha256::digest(b"").into(),
                })
            }
        })
        .collect()
}

/// Reads a symbolic link's target (never following it) and checks that the link is still
/// the one listed.
fn hash_link(root: &Path, f: &Listed, progress: Option<&Progress>) -> Result<Entry, DigestError> {
    let path = root.join(&f.path);
    let shown = || escape_bytes(f.path.as_bytes());
    let target = match fs::read_link(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DigestError::Changed {
                path: shown(),
                detail: "listed, then gone".into(),
            });
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(DigestError::Changed {
                path: shown(),
                detail: "a symbolic link when listed, something else when read".into(),
            });
        }
        Err(e) => {
            return Err(DigestError::Io {
                op: "read the link",
                path: escape_path(&path),
                err: e,
            });
        }
    };
    let after = fs::symlink_metadata(&path).map_err(|e| DigestError::Io {
        op: "inspect",
        path: escape_path(&path),
        err: e,
    })?;
    let bytes = target.as_os_str().as_bytes();
    let same = after.file_type().is_symlink()
        && (after.dev(), after.ino()) == f.id
        && after.size() == f.size
        && bytes.len() as u64 == f.size
        && (after.mtime(), after.mtime_nsec()) == f.mtime
        && (after.ctime(), after.ctime_nsec()) == f.ctime;
    if !same {
        return Err(DigestError::Changed {
            path: shown(),
            detail: "the symbolic link was replaced or changed after it was listed".into(),
        });
    }
    if let Some(p) = progress {
        p.files_done.fetch_add(1, AtomicOrdering::Relaxed);
        p.bytes_done.fetch_add(f.size, AtomicOrdering::Relaxed);
    }
    Ok(Entry {
        path: f.path.clone(),
        kind: EntryKind::Symlink,
        bytes: f.size,
        sha256: Sha256::digest(bytes).into(),
    })
}

fn hash_one(
    root: &Path,
    f: &Listed,
    buf: &mut [u8],
    progress: Option<&Progress>,
) -> Result<FileDigest, DigestError> {
    let path = root.join(&f.path);
    let shown = || escape_bytes(f.path.as_bytes());
    let io = |op, err| DigestError::Io {
        op,
        path: escape_path(&path),
        err,
    };
    let mut file = match OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO swapped in after the listing cannot block the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DigestError::Changed {
                path: shown(),
                detail: "listed, then gone".into(),
            });
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(DigestError::Changed {
                path: shown(),
                detail: "a regular file when listed, a symbolic link when opened".into(),
            });
        }
        Err(e) => return Err(io("open", e)),
    };
    let mut hasher = Sha256::new();
    let mut read: u64 = 0;
    // Read exactly the listed size (bounded even if a device replaced the file); growth
    // shows in the size that fstat reports after reading, checked below.
    while read < f.size {
        let want = usize::try_from(f.size - read).map_or(buf.len(), |n| n.min(buf.len()));
        let n = match file.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("read", e)),
        };
        hasher.update(&buf[..n]);
        read += n as u64;
        if let Some(p) = progress {
            p.bytes_done.fetch_add(n as u64, AtomicOrdering::Relaxed);
        }
    }
    if read != f.size {
        return Err(DigestError::Changed {
            path: shown(),
            detail: format!("listed with {} bytes, only {read} could be read", f.size),
        });
    }
    let after = file.metadata().map_err(|e| io("inspect", e))?;
    check_same(f, &after).map_err(|detail| DigestError::Changed {
        path: shown(),
        detail,
    })?;
    drop(file);
    if let Some(p) = progress {
        p.files_done.fetch_add(1, AtomicOrdering::Relaxed);
    }
    Ok(FileDigest {
        path: f.path.clone(),
        bytes: read,
        sha256: hasher.finalize().into(),
    })
}

/// The file we read must be the one we listed, unchanged.
fn check_same(f: &Listed, m: &fs::Metadata) -> Result<(), String> {
    if !m.is_file() {
        return Err("a regular file when listed, something else when opened".into());
    }
    if (m.dev(), m.ino()) != f.id {
        return Err("replaced by another file after it was listed".into());
    }
    if m.size() != f.size {
        return Err(format!(
            "listed with {} bytes, {} bytes after reading",
            f.size,
            m.size()
        ));
    }
    if (m.mtime(), m.mtime_nsec()) != f.mtime || (m.ctime(), m.ctime_nsec()) != f.ctime {
        return Err("modified after it was listed (mtime or ctime moved)".into());
    }
    Ok(())
}

/// Lists and hashes the tree under `root`.
pub fn inventory(root: &Path, progress: Option<&Progress>) -> Result<Inventory, DigestError> {
    hash(&list(root)?, progress)
}

/// Where a manifest will be written: its folder, canonicalised, joined with its file name.
/// Writing to this exact path is what the inside-root checks judged.
#[derive(Debug, Clone)]
pub struct ManifestTarget {
    pub path: PathBuf,
    folder: PathBuf,
    given: PathBuf,
}

/// Resolves `--manifest` and refuses it when its folder, or any ancestor of that folder, is
/// the root by filesystem identity (device and inode). The folder is canonicalised first,
/// so `..`, a symbolic link in the path, or a bind mount of the root cannot get around the
/// rule. Call [`check_manifest_outside`] after listing to also catch an alias of a folder
/// below the root.
pub fn resolve_manifest(root: &Path, manifest: &Path) -> Result<ManifestTarget, DigestError> {
    let name = match manifest.file_name() {
        Some(n)
            if !manifest.as_os_str().as_bytes().ends_with(b"/")
                && !manifest.as_os_str().as_bytes().ends_with(b"/.") =>
        {
            n.to_os_string()
        }
        _ => {
            return Err(DigestError::ManifestName {
                manifest: escape_path(manifest),
            });
        }
    };
    let given_folder = crate::files::parent_of(manifest);
    let folder = fs::canonicalize(&given_folder).map_err(|err| DigestError::ManifestFolder {
        folder: escape_path(&given_folder),
        err,
    })?;
    let meta = fs::metadata(&folder).map_err(|err| DigestError::ManifestFolder {
        folder: escape_path(&given_folder),
        err,
    })?;
    if !meta.is_dir() {
        return Err(DigestError::ManifestFolder {
            folder: escape_path(&given_folder),
            err: io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    if fs::symlink_metadata(folder.join(&name)).is_ok_and(|m| m.is_dir()) {
        return Err(DigestError::ManifestName {
            manifest: escape_path(manifest),
        });
    }
    let target = ManifestTarget {
        path: folder.join(&name),
        folder,
        given: manifest.to_path_buf(),
    };
    let root_id = root_id(root)?;
    target.refuse_if_any_ancestor_in(root, &HashSet::from([root_id]))?;
    Ok(target)
}

impl ManifestTarget {
    fn refuse_if_any_ancestor_in(
        &self,
        root: &Path,
        ids: &HashSet<FileId>,
    ) -> Result<(), DigestError> {
        for ancestor in self.folder.ancestors() {
            let m = fs::metadata(ancestor).map_err(|err| DigestError::ManifestFolder {
                folder: escape_path(ancestor),
                err,
            })?;
            if ids.contains(&(m.dev(), m.ino())) {
                return Err(DigestError::ManifestInsideRoot {
                    manifest: escape_path(&self.given),
                    root: escape_path(root),
                    folder: escape_path(&self.folder),
                    inside: escape_path(ancestor),
                });
            }
        }
        Ok(())
    }

    /// Writes the document: atomically, 0600, fsync'd ([`crate::files::write_atomic`]).
    pub fn write(&self, inventory: &Inventory) -> Result<(), DigestError> {
        crate::files::write_atomic(&self.path, inventory.document().as_bytes())
            .map_err(DigestError::ManifestWrite)
    }
}

/// Refuses the manifest when its folder or an ancestor of it is any folder of the listed
/// tree (root, every folder walked, and the skipped `.git`/`node_modules` folders
/// themselves), by device and inode: this catches an alias (bind mount) of a folder below
/// the root, which the ancestor walk of [`resolve_manifest`] alone cannot see.
pub fn check_manifest_outside(
    listing: &Listing,
    target: &ManifestTarget,
) -> Result<(), DigestError> {
    let mut ids = listing.folders.clone();
    ids.insert(listing.root_id);
    target.refuse_if_any_ancestor_in(&listing.root, &ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::symlink;

    fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (p, bytes) in files {
            let path = t.path().join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
        t
    }

    #[test]
    fn ordinal_order_is_utf16_not_code_points() {
        // U+10000 is encoded D800 DC00 in UTF-16, which sorts before U+FF01 (FF01);
        // in code points (Rust's str order) it is the other way round.
        let astral = "\u{10000}";
        let fullwidth = "\u{FF01}";
        assert_eq!(ordinal_cmp(astral, fullwidth), Ordering::Less);
        assert_eq!(astral.cmp(fullwidth), Ordering::Greater);
        assert_eq!(ordinal_cmp("a\u{1F600}", "a\u{E000}"), Ordering::Less);
        assert_eq!(ordinal_cmp("a\u{E000}", "a\u{1F600}"), Ordering::Greater);
        // Below U+E000 the two orders agree.
        assert_eq!(ordinal_cmp("\u{D7FF}", "\u{10000}"), Ordering::Less);
        // Case-sensitive, never folded: 'B' (0x42) < 'a' (0x61).
        assert_eq!(ordinal_cmp("B", "a"), Ordering::Less);
        assert_eq!(ordinal_cmp("a", "a"), Ordering::Equal);
        assert_eq!(ordinal_cmp("a", "ab"), Ordering::Less);
    }

    #[test]
    fn ordinal_order_compares_whole_paths_not_components() {
        // '-' (0x2D) < '/' (0x2F): "a-b/x" sorts before "a/b" although component-wise
        // "a" < "a-b".
        assert_eq!(ordinal_cmp("a-b/x", "a/b"), Ordering::Less);
        let t = tree(&[("a/b", b"1"), ("a-b/x", b"2"), ("a.b", b"3"), ("a0", b"4")]);
        let l = list(t.path()).unwrap();
        assert_eq!(l.paths().collect::<Vec<_>>(), ["a-b/x", "a.b", "a/b", "a0"]);
    }

    #[test]
    fn ordinal_cmp_agrees_with_utf16_sequences() {
        let samples = [
            "",
            "a",
            "A",
            "é",
            "e\u{301}",
            "\u{FFFF}",
            "\u{E000}",
            "\u{10000}",
            "\u{10FFFF}",
            "a/b",
            "a-b",
            "\u{7FF}",
            "\u{800}",
            "z\u{1F600}y",
            "z\u{FF01}y",
            "zé",
        ];
        for a in samples {
            for b in samples {
                let want = a.encode_utf16().cmp(b.encode_utf16());
                assert_eq!(ordinal_cmp(a, b), want, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn escape_is_unambiguous() {
        assert_eq!(escape_bytes(b"caf\xc3\xa9"), "café");
        assert_eq!(escape_bytes(b"a\xffb"), "a\\xFFb");
        assert_eq!(escape_bytes(b"a\\xFFb"), "a\\\\xFFb");
        assert_eq!(escape_bytes(b"x\ny\x1b[2J"), "x\\ny\\x1B[2J");
        assert_eq!(escape_bytes("\u{85}".as_bytes()), "\\u{85}");
        assert_eq!(
            escape_bytes("a\u{202E}b\u{200B}".as_bytes()),
            "a\\u{202E}b\\u{200B}"
        );
    }

    #[test]
    fn document_and_digest_of_a_small_tree() {
        let t = tree(&[("b.txt", b"hello\n"), ("a/c.bin", b""), ("a/d", b"x\r\n")]);
        let inv = inventory(t.path(), None).unwrap();
        let sha = |b: &[u8]| hex::encode(Sha256::digest(b));
        let doc = format!(
            "a/c.bin|0|{}\na/d|3|{}\nb.txt|6|{}",
            sha(b""),
            sha(b"x\r\n"),
            sha(b"hello\n")
        );
        assert_eq!(inv.document(), doc);
        assert_eq!(inv.digest, <[u8; 32]>::from(Sha256::digest(doc.as_bytes())));
        assert_eq!(inv.count(), 3);
        assert_eq!(inv.bytes(), 9);
        assert!(
            inv.digest_with_recipe()
                .starts_with("ordinal-path-bytes-sha256/1 ")
        );
    }

    #[test]
    fn empty_tree_hashes_the_empty_document() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("empty-folder")).unwrap();
        let inv = inventory(t.path(), None).unwrap();
        assert_eq!(inv.count(), 0);
        assert_eq!(inv.document(), "");
        assert_eq!(
            hex::encode(inv.digest),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn large_file_is_streamed_in_chunks() {
        let big: Vec<u8> = (0..(3 * CHUNK + 17)).map(|i| (i * 7 % 251) as u8).collect();
        let t = tree(&[("big", &big)]);
        let inv = inventory(t.path(), None).unwrap();
        assert_eq!(inv.files[0].bytes, big.len() as u64);
        assert_eq!(inv.files[0].sha256, <[u8; 32]>::from(Sha256::digest(&big)));
    }

    #[test]
    fn crlf_and_lf_trees_differ() {
        let lf = tree(&[("f.txt", b"one\ntwo\n")]);
        let crlf = tree(&[("f.txt", b"one\r\ntwo\r\n")]);
        let a = inventory(lf.path(), None).unwrap();
        let b = inventory(crlf.path(), None).unwrap();
        assert_ne!(a.digest, b.digest);
    }

    #[test]
    fn git_and_node_modules_are_skipped_at_any_depth_folders_and_files() {
        let t = tree(&[
            ("keep", b"k"),
            (".git/HEAD", b"ref"),
            ("sub/.git", b"gitdir: /elsewhere\n"),
            ("sub/node_modules/pkg/index.js", b"js"),
            ("deep/er/node_modules", b"a file named node_modules"),
            ("deep/er/.GIT/x", b"case differs: kept"),
            ("deep/er/.gitignore", b"kept"),
            ("Node_Modules/y", b"case differs: kept"),
        ]);
        // A skipped name is skipped whatever it is, even a symbolic link.
        symlink("/nonexistent", t.path().join("deep/node_modules")).unwrap();
        let l = list(t.path()).unwrap();
        assert_eq!(
            l.paths().collect::<Vec<_>>(),
            [
                "Node_Modules/y",
                "deep/er/.GIT/x",
                "deep/er/.gitignore",
                "keep"
            ]
        );
    }

    #[test]
    fn symlinks_fifos_and_sockets_are_refused_by_name() {
        let t = tree(&[("a", b"1"), ("sub/target", b"2")]);
        symlink("target", t.path().join("sub/inner-link")).unwrap();
        let fifo = CString::new(t.path().join("pipe").as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let _sock = std::os::unix::net::UnixListener::bind(t.path().join("sock")).unwrap();
        let e = list(t.path()).unwrap_err();
        let DigestError::Refused { entries, .. } = &e else {
            panic!("{e}")
        };
        let got: Vec<_> = entries.iter().map(|r| (r.path.as_str(), r.kind)).collect();
        assert_eq!(
            got,
            [
                ("pipe", RefusalKind::Fifo),
                ("sock", RefusalKind::Socket),
                ("sub/inner-link", RefusalKind::SymbolicLink),
            ]
        );
        let msg = e.to_string();
        assert!(msg.contains("sub/inner-link: symbolic link"), "{msg}");
        assert!(!e.is_usage());
    }

    #[test]
    fn device_nodes_are_refused_when_they_can_be_made() {
        let t = tree(&[("a", b"1")]);
        let p = CString::new(t.path().join("null").as_os_str().as_bytes()).unwrap();
        // SAFETY: valid path; makedev(1, 3) is /dev/null's number.
        let r = unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
        if r != 0 {
            eprintln!(
                "skipped: mknod needs privileges ({})",
                io::Error::last_os_error()
            );
            return;
        }
        let e = list(t.path()).unwrap_err();
        assert!(e.to_string().contains("null: character device"), "{e}");
    }

    #[test]
    fn names_that_are_not_utf8_or_hold_a_line_feed_are_refused() {
        let t = tree(&[("ok", b"1")]);
        let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
        fs::write(t.path().join(bad), b"latin-1 name").unwrap();
        fs::create_dir(t.path().join(std::ffi::OsStr::from_bytes(b"dir\xff"))).unwrap();
        fs::write(t.path().join("two\nlines"), b"x").unwrap();
        let e = list(t.path()).unwrap_err();
        let DigestError::Refused { entries, .. } = &e else {
            panic!("{e}")
        };
        let got: Vec<_> = entries.iter().map(|r| (r.path.as_str(), r.kind)).collect();
        assert_eq!(
            got,
            [
                ("caf\\xE9", RefusalKind::NotUtf8),
                ("dir\\xFF", RefusalKind::NotUtf8),
                ("two\\nlines", RefusalKind::LineFeed),
            ]
        );
    }

    #[test]
    fn a_symlinked_root_is_followed() {
        let t = tree(&[("real/f", b"1")]);
        symlink("real", t.path().join("alias")).unwrap();
        let a = inventory(&t.path().join("real"), None).unwrap();
        let b = inventory(&t.path().join("alias"), None).unwrap();
        assert_eq!(a.digest, b.digest);
        assert_eq!(b.count(), 1);
    }

    #[test]
    fn a_missing_root_or_a_file_root_is_a_usage_error() {
        let t = tree(&[("f", b"1")]);
        let e = list(&t.path().join("nope")).unwrap_err();
        assert!(
            matches!(e, DigestError::RootMissing { .. }) && e.is_usage(),
            "{e}"
        );
        let e = list(&t.path().join("f")).unwrap_err();
        assert!(
            matches!(e, DigestError::RootNotAFolder { .. }) && e.is_usage(),
            "{e}"
        );
    }

    #[test]
    fn hard_links_count_twice() {
        let t = tree(&[("a", b"same inode")]);
        fs::hard_link(t.path().join("a"), t.path().join("b")).unwrap();
        let inv = inventory(t.path(), None).unwrap();
        assert_eq!(inv.count(), 2);
        assert_eq!(inv.bytes(), 20);
    }

    #[test]
    fn a_file_that_changes_after_listing_fails_by_name() {
        let t = tree(&[("stable", b"s"), ("grows", b"12345")]);
        let l = list(t.path()).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(t.path().join("grows"))
            .unwrap()
            .write_all(b"678")
            .unwrap();
        let e = hash(&l, None).unwrap_err();
        assert!(
            matches!(&e, DigestError::Changed { path, .. } if path == "grows"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("listed with 5 bytes, 8 bytes after reading"),
            "{e}"
        );

        let t = tree(&[("shrinks", b"12345")]);
        let l = list(t.path()).unwrap();
        fs::write(t.path().join("shrinks"), b"12").unwrap();
        let e = hash(&l, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("listed with 5 bytes, only 2 could be read"),
            "{e}"
        );
    }

    #[test]
    fn a_same_size_rewrite_replacement_or_removal_after_listing_fails() {
        // Same length, new content, and a distinct mtime: caught by the mtime check.
        let t = tree(&[("f", b"aaaa")]);
        let l = list(t.path()).unwrap();
        let f = fs::OpenOptions::new()
            .write(true)
            .open(t.path().join("f"))
            .unwrap();
        (&f).write_all(b"bbbb").unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
            .unwrap();
        drop(f);
        let e = hash(&l, None).unwrap_err();
        assert!(e.to_string().contains("mtime or ctime"), "{e}");

        // Replaced by another file of the same size (rename over it): a new inode.
        let t = tree(&[("f", b"aaaa")]);
        let l = list(t.path()).unwrap();
        fs::write(t.path().join("g"), b"bbbb").unwrap();
        fs::rename(t.path().join("g"), t.path().join("f")).unwrap();
        let e = hash(&l, None).unwrap_err();
        assert!(e.to_string().contains("f changed"), "{e}");

        // Replaced by a symbolic link: never followed.
        let t = tree(&[("f", b"aaaa"), ("g", b"aaaa")]);
        let l = list(t.path()).unwrap();
        fs::remove_file(t.path().join("f")).unwrap();
        symlink("g", t.path().join("f")).unwrap();
        let e = hash(&l, None).unwrap_err();
        assert!(e.to_string().contains("symbolic link when opened"), "{e}");

        // Removed.
        let t = tree(&[("f", b"aaaa")]);
        let l = list(t.path()).unwrap();
        fs::remove_file(t.path().join("f")).unwrap();
        let e = hash(&l, None).unwrap_err();
        assert!(e.to_string().contains("listed, then gone"), "{e}");
    }

    #[test]
    fn progress_counts_every_file_and_byte() {
        let t = tree(&[("a", b"12"), ("b/c", b"345")]);
        let p = Progress::default();
        inventory(t.path(), Some(&p)).unwrap();
        let s = p.snapshot();
        assert_eq!((s.files_total, s.bytes_total), (2, 5));
        assert_eq!((s.files_done, s.bytes_done), (2, 5));
    }

    #[test]
    fn manifest_inside_root_is_refused_by_identity() {
        let t = tree(&[("root/sub/f", b"1")]);
        let root = t.path().join("root");
        fs::create_dir(t.path().join("out")).unwrap();
        // Outside: accepted, and its folder is canonical.
        let ok = resolve_manifest(&root, &t.path().join("out/m.txt")).unwrap();
        assert_eq!(
            ok.path,
            fs::canonicalize(t.path()).unwrap().join("out/m.txt")
        );
        // Directly inside, in a subfolder, through `..`, through a symlinked parent.
        symlink(root.join("sub"), t.path().join("via-link")).unwrap();
        for m in [
            root.join("m"),
            root.join("sub/m"),
            t.path().join("out/../root/m"),
            t.path().join("via-link/m"),
        ] {
            let e = resolve_manifest(&root, &m).unwrap_err();
            assert!(
                matches!(e, DigestError::ManifestInsideRoot { .. }) && e.is_usage(),
                "{}: {e}",
                m.display()
            );
        }
        // A missing folder is a clear usage error, not a silent creation.
        let e = resolve_manifest(&root, &t.path().join("nope/m")).unwrap_err();
        assert!(matches!(e, DigestError::ManifestFolder { .. }), "{e}");
        for m in [
            t.path().join("out/"),
            t.path().join("out"),
            t.path().join("out/."),
        ] {
            let e = resolve_manifest(&root, &m).unwrap_err();
            assert!(matches!(e, DigestError::ManifestName { .. }), "{e}");
        }
    }
}
