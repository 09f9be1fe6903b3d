//! Profiles: a tool plus an account home (the tool's own config folder, where its login and
//! its transcripts live).
//!
//! One default profile per tool exists without being written: it is named after the tool
//! and its home is the tool's default folder under the user's `$HOME` (`~/.claude`,
//! `~/.codex`, `~/.gemini`, `~/.grok`, `~/.local/share/opencode`). Added profiles live in
//! the state home's config part, in `profiles.json` (0600, replaced atomically, under an
//! exclusive lock so two concurrent `add`s never lose one another).

use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{HomeVarTarget, Tool};
use crate::files::{self, FilesError};

/// The file name of the store, inside the config part of the state home.
pub const STORE_FILE: &str = "profiles.json";
const LOCK_FILE: &str = "profiles.lock";
/// The `format` member of `profiles.json`.
pub const FORMAT: &str = "proctor-profiles/1";
/// The longest profile name.
pub const MAX_NAME: usize = 63;

/// What a run of the profile does with the tool's permission requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionPolicy {
    /// Hold each request open until a person answers it (the default).
    #[default]
    Ask,
    /// Refuse every request without asking. Nothing ever allows a request on its own: there
    /// is no "allow" policy.
    Deny,
}

impl PermissionPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionPolicy::Ask => "ask",
            PermissionPolicy::Deny => "deny",
        }
    }

    fn is_ask(&self) -> bool {
        *self == PermissionPolicy::Ask
    }
}

/// A tool and the account home it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    pub name: String,
    pub tool: Tool,
    /// The tool's config folder for this account (absolute).
    pub home: PathBuf,
    /// A default profile is implied, never stored; its tool resolves its own default home.
    #[serde(rename = "default")]
    pub is_default: bool,
    /// What its runs do with permission requests (`ask` unless set).
    pub permissions: PermissionPolicy,
}

impl Profile {
    /// The implied default profile of `tool` for a user whose `$HOME` is `user_home`.
    pub fn default_for(tool: Tool, user_home: &Path) -> Profile {
        Profile {
            name: tool.name().to_string(),
            tool,
            home: user_home.join(tool.spec().default_home),
            is_default: true,
            permissions: PermissionPolicy::Ask,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "invalid profile name `{name}`: a name is 1 to 63 characters from a-z, 0-9, '_' and \
         '-', starting with a letter or digit (e.g. `work`, `claude-2`)"
    )]
    InvalidName { name: String },
    #[error("a profile named `{name}` already exists{}. Remedy: choose another name", if *.is_default { " (the default profile of that tool)" } else { "" })]
    Duplicate { name: String, is_default: bool },
    #[error("no profile named `{name}`. Remedy: `proctor profile list` shows the profiles")]
    NotFound { name: String },
    #[error(
        "the account home {path} does not exist. Remedy: give the tool's existing config \
         folder (log in with the tool once, with its home variable pointing there, to create it)"
    )]
    HomeMissing { path: PathBuf },
    #[error("the account home {path} is not a folder")]
    HomeNotAFolder { path: PathBuf },
    #[error(
        "the account home of a {tool} profile must be a folder named `{folder_name}` \
         ({var} names its parent, and {tool} appends `{folder_name}`); {path} is not"
    )]
    HomeWrongName {
        tool: Tool,
        path: PathBuf,
        folder_name: &'static str,
        var: &'static str,
    },
    #[error("the account home {path} is not valid UTF-8; proctor stores profiles as JSON text")]
    HomeNotUtf8 { path: PathBuf },
    #[error("cannot resolve the account home {path}: {err}")]
    HomeUnreadable { path: PathBuf, err: std::io::Error },
    #[error(
        "{path} is not a valid profile store ({why}); nothing was changed. Remedy: repair or \
         move the file aside"
    )]
    Corrupt { path: PathBuf, why: String },
    #[error(transparent)]
    Files(#[from] FilesError),
}

/// Checks a profile name: `[a-z0-9][a-z0-9_-]{0,62}`.
///
/// This is a strict ASCII rule until the shared name validation in `crate::text` lands.
pub fn validate_name(name: &str) -> Result<(), ProfileError> {
    let b = name.as_bytes();
    let head_ok = b
        .first()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-');
    if head_ok && rest_ok && b.len() <= MAX_NAME {
        Ok(())
    } else {
        Err(ProfileError::InvalidName {
            name: crate::text::one_line(name, 80),
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    format: String,
    profiles: Vec<StoredProfile>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredProfile {
    name: String,
    tool: Tool,
    home: PathBuf,
    #[serde(default, skip_serializing_if = "PermissionPolicy::is_ask")]
    permissions: PermissionPolicy,
}

/// The profile store of one state home.
#[derive(Debug, Clone)]
pub struct Store {
    config_dir: PathBuf,
}

impl Store {
    /// The store kept in `config_dir` (the config part of the state home).
    pub fn new(config_dir: &Path) -> Store {
        Store {
            config_dir: config_dir.to_path_buf(),
        }
    }

    /// The path of `profiles.json`.
    pub fn path(&self) -> PathBuf {
        self.config_dir.join(STORE_FILE)
    }

    /// The added profiles, in the order they were added. An absent store is empty; a store
    /// that does not parse is an error (never treated as empty).
    pub fn load(&self) -> Result<Vec<Profile>, ProfileError> {
        let path = self.path();
        let mut file = match files::open_private_read(&path) {
            Ok(f) => f,
            Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| FilesError::io("read", &path, e))?;
        let parsed: StoreFile =
            serde_json::from_slice(&bytes).map_err(|e| ProfileError::Corrupt {
                path: path.clone(),
                why: e.to_string(),
            })?;
        if parsed.format != FORMAT {
            return Err(ProfileError::Corrupt {
                path,
                why: format!("format `{}`, expected `{FORMAT}`", parsed.format),
            });
        }
        let mut out: Vec<Profile> = Vec::new();
        for p in parsed.profiles {
            let bad = |why: String| ProfileError::Corrupt {
                path: path.clone(),
                why,
            };
            validate_name(&p.name).map_err(|e| bad(e.to_string()))?;
            if Tool::parse(&p.name).is_ok() || out.iter().any(|q| q.name == p.name) {
                return Err(bad(format!("profile `{}` appears twice", p.name)));
            }
            if !p.home.is_absolute() {
                return Err(bad(format!("profile `{}` has a relative home", p.name)));
            }
            out.push(Profile {
                name: p.name,
                tool: p.tool,
                home: p.home,
                is_default: false,
                permissions: p.permissions,
            });
        }
        Ok(out)
    }

    /// The default profiles (one per tool, for `user_home`) then the added ones.
    pub fn list(&self, user_home: &Path) -> Result<Vec<Profile>, ProfileError> {
        let mut all: Vec<Profile> = Tool::ALL
            .into_iter()
            .map(|t| Profile::default_for(t, user_home))
            .collect();
        all.extend(self.load()?);
        Ok(all)
    }

    /// The profile named `name`.
    pub fn find(&self, name: &str, user_home: &Path) -> Result<Profile, ProfileError> {
        self.list(user_home)?
            .into_iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ProfileError::NotFound {
                name: crate::text::one_line(name, 80),
            })
    }

    /// Adds a profile. The name must be valid and new (default names included); the home
    /// must be an existing folder, stored as its canonical absolute path.
    pub fn add(&self, name: &str, tool: Tool, home: &Path) -> Result<Profile, ProfileError> {
        self.add_with(name, tool, home, PermissionPolicy::Ask)
    }

    /// [`Store::add`] with the profile's permission policy.
    pub fn add_with(
        &self,
        name: &str,
        tool: Tool,
        home: &Path,
        permissions: PermissionPolicy,
    ) -> Result<Profile, ProfileError> {
        validate_name(name)?;
        if Tool::parse(name).is_ok() {
            return Err(ProfileError::Duplicate {
                name: name.to_string(),
                is_default: true,
            });
        }
        let home = check_home(tool, home)?;
        files::ensure_private_dir(&self.config_dir)?;
        let _lock = self.lock()?;
        let mut existing = self.load()?;
        if existing.iter().any(|p| p.name == name) {
            return Err(ProfileError::Duplicate {
                name: name.to_string(),
                is_default: false,
            });
        }
        let profile = Profile {
            name: name.to_string(),
            tool,
            home,
            is_default: false,
            permissions,
        };
        existing.push(profile.clone());
        let file = StoreFile {
            format: FORMAT.to_string(),
            profiles: existing
                .into_iter()
                .map(|p| StoredProfile {
                    name: p.name,
                    tool: p.tool,
                    home: p.home,
                    permissions: p.permissions,
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| ProfileError::Corrupt {
            path: self.path(),
            why: e.to_string(),
        })?;
        bytes.push(b'\n');
        files::write_atomic(&self.path(), &bytes)?;
        Ok(profile)
    }

    /// An exclusive lock held while the store is read, changed and replaced.
    fn lock(&self) -> Result<fs::File, ProfileError> {
        let path = self.config_dir.join(LOCK_FILE);
        let f = files::open_private_append(&path)?;
        // SAFETY: flock on a descriptor we own; it has no memory-safety preconditions.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(FilesError::io("lock", &path, std::io::Error::last_os_error()).into());
        }
        Ok(f)
    }
}

/// Resolves and checks an account home for `tool`.
pub fn check_home(tool: Tool, home: &Path) -> Result<PathBuf, ProfileError> {
    let meta = match fs::metadata(home) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::HomeMissing {
                path: home.to_path_buf(),
            });
        }
        Err(err) => {
            return Err(ProfileError::HomeUnreadable {
                path: home.to_path_buf(),
                err,
            });
        }
    };
    if !meta.is_dir() {
        return Err(ProfileError::HomeNotAFolder {
            path: home.to_path_buf(),
        });
    }
    let canonical = fs::canonicalize(home).map_err(|err| ProfileError::HomeUnreadable {
        path: home.to_path_buf(),
        err,
    })?;
    if canonical.to_str().is_none() {
        return Err(ProfileError::HomeNotUtf8 { path: canonical });
    }
    let spec = tool.spec();
    if let HomeVarTarget::Parent { folder_name } = spec.home_var_target
        && canonical.file_name().and_then(|n| n.to_str()) != Some(folder_name)
    {
        return Err(ProfileError::HomeWrongName {
            tool,
            path: canonical,
            folder_name,
            var: spec.home_var,
        });
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names() {
        for ok in ["a", "work", "claude-2", "x_y", "0", &"a".repeat(63)] {
            validate_name(ok).unwrap();
        }
        for bad in [
            "",
            "-a",
            "_a",
            "Work",
            "a b",
            "a/b",
            "é",
            "a\u{202e}",
            &"a".repeat(64),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn add_list_and_refusals() {
        let t = tempfile::tempdir().unwrap();
        let store = Store::new(&t.path().join("config"));
        let user = t.path().join("user");
        let acct = t.path().join("acct");
        fs::create_dir_all(&acct).unwrap();
        assert_eq!(store.list(&user).unwrap().len(), 5);

        let p = store.add("work", Tool::Claude, &acct).unwrap();
        assert_eq!(p.home, fs::canonicalize(&acct).unwrap());
        let mode = fs::metadata(store.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let all = store.list(&user).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[0].name, "claude");
        assert_eq!(all[0].home, user.join(".claude"));
        assert!(all[0].is_default);
        assert_eq!(store.find("work", &user).unwrap(), p);

        assert!(matches!(
            store.add("work", Tool::Codex, &acct),
            Err(ProfileError::Duplicate {
                is_default: false,
                ..
            })
        ));
        assert!(matches!(
            store.add("codex", Tool::Codex, &acct),
            Err(ProfileError::Duplicate {
                is_default: true,
                ..
            })
        ));
        assert!(matches!(
            store.add("x", Tool::Codex, &t.path().join("nope")),
            Err(ProfileError::HomeMissing { .. })
        ));
        // Gemini's variable names the parent of `.gemini`, so the home must be named so.
        let e = store.add("g", Tool::Gemini, &acct).unwrap_err();
        assert!(matches!(e, ProfileError::HomeWrongName { .. }), "{e}");
        let gem = t.path().join("g/.gemini");
        fs::create_dir_all(&gem).unwrap();
        store.add("g", Tool::Gemini, &gem).unwrap();
        assert_eq!(store.load().unwrap().len(), 2);
    }

    #[test]
    fn a_corrupt_store_is_an_error_and_is_left_untouched() {
        let t = tempfile::tempdir().unwrap();
        let store = Store::new(t.path());
        fs::write(store.path(), b"{not json").unwrap();
        let acct = t.path().join("acct");
        fs::create_dir(&acct).unwrap();
        assert!(matches!(store.load(), Err(ProfileError::Corrupt { .. })));
        assert!(store.add("w", Tool::Grok, &acct).is_err());
        assert_eq!(fs::read(store.path()).unwrap(), b"{not json");
        fs::write(
            store.path(),
            br#"{"format":"proctor-profiles/1","profiles":[{"name":"claude","tool":"claude","home":"/x"}]}"#,
        )
        .unwrap();
        assert!(matches!(store.load(), Err(ProfileError::Corrupt { .. })));
        fs::write(
            store.path(),
            br#"{"format":"proctor-profiles/1","profiles":[{"name":"w","tool":"bash","home":"/x"}]}"#,
        )
        .unwrap();
        assert!(matches!(store.load(), Err(ProfileError::Corrupt { .. })));
    }
}
