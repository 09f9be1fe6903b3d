//! Where proctor's state lives, and who may read it.
//!
//! Resolution order: `--home DIR`, else `PROCTOR_HOME`, else the XDG folders (data, config,
//! state) given by `directories`. A single home holds the four parts as sub-folders; XDG
//! spreads them over the user's standard folders. Every folder is created 0700; a folder
//! that another user owns, or that group or others can write, is refused.
//!
//! **The runtime folder (socket and locks) derives from the home alone**, never from a
//! per-login variable such as `XDG_RUNTIME_DIR` or `TMPDIR`: every login of the same user
//! naming the same home finds the same server (an `ssh` login without `XDG_RUNTIME_DIR`, as
//! sshd with `UsePAM no` leaves it, included). It is `run/` next to the other parts
//! (`DIR/run`, or `$XDG_STATE_HOME/proctor/run` for an XDG home), named through the
//! canonical path of its nearest existing folder (so a home reached through a symlink is the
//! same home). When the socket's path there would not fit a Unix socket address
//! ([`MAX_SOCKET_PATH`] bytes), the runtime folder is
//! `/tmp/proctor-<uid>/<first 16 hex digits of the SHA-256 of that canonical run path>`:
//! `/tmp/proctor-<uid>` is made 0700 and must be a real folder (not a symlink) that this
//! user owns, or it is refused.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::files::{self, FilesError};

/// Environment variable that selects a single-folder home.
pub const HOME_ENV: &str = "PROCTOR_HOME";
/// `sun_path` holds 108 bytes on Linux, the final NUL included.
pub const MAX_SOCKET_PATH: usize = 107;
/// The server's socket, in the runtime folder.
const SOCKET_NAME: &str = "server.sock";
/// The fixed folder (not `TMPDIR`: a per-login variable) that holds the short per-user
/// folder for homes whose own socket path is too long.
const SHORT_BASE: &str = "/tmp";

/// Where the home came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `--home DIR` on the command line.
    Flag,
    /// The `PROCTOR_HOME` environment variable.
    Env,
    /// The XDG base folders.
    Xdg,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Flag => "--home",
            Source::Env => "PROCTOR_HOME",
            Source::Xdg => "XDG base folders",
        }
    }
}

/// The resolved state home: four folders.
#[derive(Debug, Clone, Serialize)]
pub struct Home {
    pub source: Source,
    /// The single folder given by `--home`/`PROCTOR_HOME`; absent for XDG.
    pub root: Option<PathBuf>,
    /// Durable records: the ledger, transcripts, receipts.
    pub data: PathBuf,
    /// Operator settings: keymap, themes, tokens.
    pub config: PathBuf,
    /// Recoverable state: logs, caches, pid records.
    pub state: PathBuf,
    /// The server's socket and locks: derived from the home alone (see the module docs).
    pub runtime: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error(
        "no state home: neither --home nor PROCTOR_HOME is set, and the XDG folders cannot be \
         found (HOME is unset?). Remedy: pass --home DIR or set PROCTOR_HOME"
    )]
    NoXdg,
    #[error("cannot resolve the current folder for the relative home {path}: {err}")]
    Cwd { path: PathBuf, err: std::io::Error },
    #[error(
        "the short runtime folder {path} {problem}. proctor keeps there the socket of a home \
         whose own socket path is too long. Remedy: remove it (it holds only sockets and \
         locks) or use a shorter --home"
    )]
    ShortRuntime { path: PathBuf, problem: String },
    #[error("unsafe state home (from {})", .source_kind.describe())]
    Unsafe {
        source_kind: Source,
        #[source]
        source: FilesError,
    },
}

impl Home {
    /// Resolves the home from the flag, then the environment, then XDG. Nothing is created.
    pub fn resolve(flag: Option<&Path>) -> Result<Home, HomeError> {
        let env = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty());
        Self::resolve_with(flag, env.as_deref().map(Path::new))
    }

    /// As [`Home::resolve`], with the environment value given explicitly (for tests).
    pub fn resolve_with(flag: Option<&Path>, env: Option<&Path>) -> Result<Home, HomeError> {
        if let Some(dir) = flag {
            return Self::single(dir, Source::Flag);
        }
        if let Some(dir) = env {
            return Self::single(dir, Source::Env);
        }
        let dirs = directories::ProjectDirs::from("", "", "proctor").ok_or(HomeError::NoXdg)?;
        let data = dirs.data_dir().to_path_buf();
        let state = dirs
            .state_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| data.join("state"));
        let runtime = runtime_for(&state.join("run"));
        Ok(Home {
            source: Source::Xdg,
            root: None,
            data,
            config: dirs.config_dir().to_path_buf(),
            state,
            runtime,
        })
    }

    fn single(dir: &Path, source: Source) -> Result<Home, HomeError> {
        let root = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| HomeError::Cwd {
                    path: dir.to_path_buf(),
                    err: e,
                })?
                .join(dir)
        };
        Ok(Home {
            source,
            data: root.join("data"),
            config: root.join("config"),
            state: root.join("state"),
            runtime: runtime_for(&root.join("run")),
            root: Some(root),
        })
    }

    /// The folders in the order they are created and checked.
    pub fn folders(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = Vec::new();
        if let Some(r) = &self.root {
            v.push(r);
        }
        v.extend([
            self.data.as_path(),
            self.config.as_path(),
            self.state.as_path(),
            self.runtime.as_path(),
        ]);
        v
    }

    /// Creates every folder 0700 (or checks an existing one) and refuses an unsafe one.
    pub fn ensure(&self) -> Result<(), HomeError> {
        if let Some(base) = self.short_runtime_base() {
            ensure_short_base(&base)?;
        }
        for dir in self.folders() {
            files::ensure_private_dir(dir).map_err(|source| HomeError::Unsafe {
                source_kind: self.source,
                source,
            })?;
        }
        Ok(())
    }

    /// The home's ledger: the append-only source of truth.
    pub fn ledger_path(&self) -> PathBuf {
        self.data.join("ledger.jsonl")
    }

    /// The server's Unix socket (one server per home: the path derives from the home).
    pub fn socket_path(&self) -> PathBuf {
        self.runtime.join(SOCKET_NAME)
    }

    /// `/tmp/proctor-<uid>` when the runtime folder is the short one under it.
    fn short_runtime_base(&self) -> Option<PathBuf> {
        let base = short_base();
        (self.runtime.parent() == Some(base.as_path())).then_some(base)
    }

    /// Held (flock) by the running server for its whole life; holds its pid.
    pub fn server_lock_path(&self) -> PathBuf {
        self.runtime.join("server.lock")
    }

    /// Serialises clients that start a server, so two never race.
    pub fn start_lock_path(&self) -> PathBuf {
        self.runtime.join("start.lock")
    }

    /// The server's log file (the server never writes to a terminal).
    pub fn server_log_path(&self) -> PathBuf {
        self.state.join("server.log")
    }

    /// The hashed token store.
    pub fn tokens_path(&self) -> PathBuf {
        self.data.join("tokens.json")
    }

    /// The owner's admin token, made at the server's first start; read by the CLI.
    pub fn owner_token_path(&self) -> PathBuf {
        self.config.join("owner.token")
    }
}

/// The short per-user folder: `/tmp/proctor-<uid>`.
fn short_base() -> PathBuf {
    Path::new(SHORT_BASE).join(format!("proctor-{}", files::my_uid()))
}

/// The runtime folder for a home whose `run/` folder is `run`: that folder through the
/// canonical path of its nearest existing ancestor, or the short per-user folder when the
/// socket's path there would not fit.
fn runtime_for(run: &Path) -> PathBuf {
    let run = canonical_prefix(run);
    if run.join(SOCKET_NAME).as_os_str().len() <= MAX_SOCKET_PATH {
        return run;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(run.as_os_str().as_encoded_bytes());
    short_base().join(&hex::encode(digest)[..16])
}

/// `path` with its longest existing ancestor replaced by that ancestor's canonical path
/// (symlinks resolved); the rest, not made yet, kept as written. The same before and after
/// the missing folders are created.
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cur = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(cur) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                cur = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Makes `/tmp/proctor-<uid>` 0700, or checks it: a real folder (not a symlink) owned by
/// this user. `/tmp` is shared, so anything else there is refused, never used.
fn ensure_short_base(base: &Path) -> Result<(), HomeError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let refuse = |problem: String| HomeError::ShortRuntime {
        path: base.to_path_buf(),
        problem,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refuse(format!("cannot be created: {e}"))),
    }
    let meta =
        std::fs::symlink_metadata(base).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(refuse("is a symlink".into()));
    }
    if !meta.is_dir() {
        return Err(refuse("is not a folder".into()));
    }
    let me = files::my_uid();
    if meta.uid() != me {
        return Err(refuse(format!(
            "belongs to uid {}, not to uid {me}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| refuse(format!("cannot be made 0700: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn flag_wins_over_env_and_env_over_xdg() {
        let h = Home::resolve_with(Some(Path::new("/a")), Some(Path::new("/b"))).unwrap();
        assert_eq!(h.source, Source::Flag);
        assert_eq!(h.data, PathBuf::from("/a/data"));
        let h = Home::resolve_with(None, Some(Path::new("/nonexistent-b"))).unwrap();
        assert_eq!(h.source, Source::Env);
        assert_eq!(h.runtime, PathBuf::from("/nonexistent-b/run"));
        let h = Home::resolve_with(None, Some(Path::new("/b"))).unwrap();
        assert_eq!(h.ledger_path(), PathBuf::from("/b/data/ledger.jsonl"));
    }

    #[test]
    fn the_runtime_folder_is_the_homes_whatever_the_login() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let canon = std::fs::canonicalize(&real).unwrap();
        // Through a symlink, before and after the home exists: the same folder.
        let a = Home::resolve_with(Some(&link.join("h")), None).unwrap();
        let b = Home::resolve_with(Some(&real.join("h")), None).unwrap();
        assert_eq!(a.runtime, canon.join("h/run"));
        assert_eq!(b.runtime, a.runtime);
        b.ensure().unwrap();
        let c = Home::resolve_with(Some(&link.join("h")), None).unwrap();
        assert_eq!(c.runtime, a.runtime);
    }

    #[test]
    fn a_long_home_gets_a_short_private_runtime_folder() {
        let t = tempfile::tempdir().unwrap();
        let long = t.path().join("x".repeat(120));
        let h = Home::resolve_with(Some(&long), None).unwrap();
        let base = short_base();
        assert_eq!(h.runtime.parent(), Some(base.as_path()), "{:?}", h.runtime);
        assert!(h.socket_path().as_os_str().len() <= MAX_SOCKET_PATH);
        // The same home gives the same folder; another home another.
        let again = Home::resolve_with(Some(&long), None).unwrap();
        assert_eq!(again.runtime, h.runtime);
        let other = Home::resolve_with(Some(&t.path().join("y".repeat(120))), None).unwrap();
        assert_ne!(other.runtime, h.runtime);
        h.ensure().unwrap();
        let meta = std::fs::symlink_metadata(&base).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&h.runtime).unwrap().mode() & 0o777, 0o700);
        let _ = std::fs::remove_dir(&h.runtime);
    }

    #[test]
    fn relative_home_is_made_absolute() {
        let h = Home::resolve_with(Some(Path::new("rel")), None).unwrap();
        assert!(h.root.unwrap().is_absolute());
    }

    #[test]
    fn ensure_creates_every_folder_0700() {
        let t = tempfile::tempdir().unwrap();
        let h = Home::resolve_with(Some(&t.path().join("h")), None).unwrap();
        h.ensure().unwrap();
        for d in h.folders() {
            assert_eq!(std::fs::metadata(d).unwrap().mode() & 0o777, 0o700, "{d:?}");
        }
        // Idempotent.
        h.ensure().unwrap();
    }

    #[test]
    fn writable_home_is_refused_naming_its_source() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("h");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let h = Home::resolve_with(None, Some(&root)).unwrap();
        let e = h.ensure().unwrap_err();
        let e = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(e.contains("PROCTOR_HOME"), "{e}");
        assert!(e.contains(&root.display().to_string()), "{e}");
        assert!(
            !root.join("data").exists(),
            "nothing is created in a refused home"
        );
    }
}
