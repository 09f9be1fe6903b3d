//! Where proctor's state lives, and who may read it.
//!
//! Resolution order: `--home DIR`, else `PROCTOR_HOME`, else the XDG folders (data, config,
//! state, runtime) given by `directories`. A single home holds the four parts as
//! sub-folders; XDG spreads them over the user's standard folders. Every folder is created
//! 0700; a folder that another user owns, or that group or others can write, is refused.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::files::{self, FilesError};

/// Environment variable that selects a single-folder home.
pub const HOME_ENV: &str = "PROCTOR_HOME";

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
    /// Sockets and locks that die with the machine.
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
        let runtime = dirs
            .runtime_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| state.join("run"));
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
            runtime: root.join("run"),
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
        self.runtime.join("server.sock")
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn flag_wins_over_env_and_env_over_xdg() {
        let h = Home::resolve_with(Some(Path::new("/a")), Some(Path::new("/b"))).unwrap();
        assert_eq!(h.source, Source::Flag);
        assert_eq!(h.data, PathBuf::from("/a/data"));
        let h = Home::resolve_with(None, Some(Path::new("/b"))).unwrap();
        assert_eq!(h.source, Source::Env);
        assert_eq!(h.runtime, PathBuf::from("/b/run"));
        assert_eq!(h.ledger_path(), PathBuf::from("/b/data/ledger.jsonl"));
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
