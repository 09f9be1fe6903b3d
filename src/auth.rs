//! Identity: bearer tokens with a role (read, write, admin) and a principal (person or agent).
//!
//! Only the SHA-256 of a token is stored (`data/tokens.json`, 0600, replaced atomically); the
//! secret is shown once, when it is created. The owner's admin token is made at the server's
//! first start and kept in `config/owner.token` (0600), which the CLI reads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::files;

/// What a token may do. Each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Read,
    Write,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Self, AuthError> {
        match s {
            "read" => Ok(Role::Read),
            "write" => Ok(Role::Write),
            "admin" => Ok(Role::Admin),
            other => Err(AuthError::BadRole(other.to_string())),
        }
    }
}

/// Who holds a token: a person, or an agent acting on someone's behalf. Some actions refuse
/// agents whatever their role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Principal {
    Person,
    Agent,
}

impl std::str::FromStr for Principal {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Self, AuthError> {
        match s {
            "person" => Ok(Principal::Person),
            "agent" => Ok(Principal::Agent),
            other => Err(AuthError::BadPrincipal(other.to_string())),
        }
    }
}

/// Who did something, as every record names it (the ledger's events, workspace approvals,
/// candidate bindings and check runs, publication steps): the token that called (its id
/// and name) and the principal the authorizer established for the call (`agent` whenever
/// the kernel says the caller descends from the server, whatever the token says).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub token_id: String,
    pub name: String,
    pub principal: Principal,
}

impl Actor {
    /// How an approval names its actor: `name (tok-…)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.token_id)
    }

    pub fn is_agent(&self) -> bool {
        self.principal == Principal::Agent
    }
}

/// One stored token: never the secret, only its hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub principal: Principal,
    /// `sha256:<hex>` of the secret's UTF-8 bytes.
    pub hash: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error(
        "{path} is not a valid token store: {err}. Remedy: restore it from a backup, or move it aside to start with no tokens"
    )]
    Corrupt {
        path: PathBuf,
        err: serde_json::Error,
    },
    #[error("unknown role {0:?}: use read, write or admin")]
    BadRole(String),
    #[error("unknown principal {0:?}: use person or agent")]
    BadPrincipal(String),
    #[error(
        "token name {0:?} is not valid: use 1 to 64 characters among a-z, 0-9, '-', '_' and '.'"
    )]
    BadName(String),
    #[error("a live token named {0:?} exists already: revoke it first or pick another name")]
    Duplicate(String),
    #[error("no token with id or name {0:?}")]
    Unknown(String),
    #[error("cannot read random bytes for a token: {0}")]
    Random(String),
}

/// The token store, loaded in memory by the server.
#[derive(Debug)]
pub struct Tokens {
    path: PathBuf,
    records: Vec<TokenRecord>,
}

const SECRET_PREFIX: &str = "proctor_";

fn hash_secret(secret: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(secret.as_bytes())))
}

fn random_hex(bytes: usize) -> Result<String, AuthError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(hex::encode(buf))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A new token record and its secret.
fn new_record(
    name: &str,
    role: Role,
    principal: Principal,
) -> Result<(TokenRecord, String), AuthError> {
    let secret = format!("{SECRET_PREFIX}{}", random_hex(32)?);
    let record = TokenRecord {
        id: format!("tok-{}", random_hex(6)?),
        name: name.to_string(),
        role,
        principal,
        hash: hash_secret(&secret),
        created_at: now(),
        revoked_at: None,
    };
    Ok((record, secret))
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// Loads the store; an absent file is an empty store.
    pub fn load(path: &Path) -> Result<Tokens, AuthError> {
        let records = match files::open_private_read(path) {
            Ok(f) => serde_json::from_reader(std::io::BufReader::new(f)).map_err(|err| {
                AuthError::Corrupt {
                    path: path.to_path_buf(),
                    err,
                }
            })?,
            Err(files::FilesError::Io { err, .. })
                if err.kind() == std::io::ErrorKind::NotFound =>
            {
                Vec::new()
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Tokens {
            path: path.to_path_buf(),
            records,
        })
    }

    fn save(&self) -> Result<(), AuthError> {
        let mut bytes =
            serde_json::to_vec_pretty(&self.records).map_err(|err| AuthError::Corrupt {
                path: self.path.clone(),
                err,
            })?;
        bytes.push(b'\n');
        files::write_atomic(&self.path, &bytes)?;
        Ok(())
    }

    pub fn records(&self) -> &[TokenRecord] {
        &self.records
    }

    /// Creates a token and returns its record and its secret, which is never stored.
    pub fn create(
        &mut self,
        name: &str,
        role: Role,
        principal: Principal,
    ) -> Result<(TokenRecord, String), AuthError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if !valid {
            return Err(AuthError::BadName(name.to_string()));
        }
        if self
            .records
            .iter()
            .any(|r| r.name == name && r.revoked_at.is_none())
        {
            return Err(AuthError::Duplicate(name.to_string()));
        }
        let (record, secret) = new_record(name, role, principal)?;
        self.records.push(record.clone());
        if let Err(e) = self.save() {
            self.records.pop();
            return Err(e);
        }
        Ok((record, secret))
    }

    /// Revokes a live token by id or name. Revoking twice is refused as unknown.
    pub fn revoke(&mut self, id_or_name: &str) -> Result<TokenRecord, AuthError> {
        let at = now();
        let idx = self
            .records
            .iter()
            .position(|r| r.revoked_at.is_none() && (r.id == id_or_name || r.name == id_or_name))
            .ok_or_else(|| AuthError::Unknown(id_or_name.to_string()))?;
        self.records[idx].revoked_at = Some(at);
        if let Err(e) = self.save() {
            self.records[idx].revoked_at = None;
            return Err(e);
        }
        Ok(self.records[idx].clone())
    }

    /// The live token with this id or name, if any.
    pub fn find_live(&self, id_or_name: &str) -> Option<&TokenRecord> {
        self.records
            .iter()
            .find(|r| r.revoked_at.is_none() && (r.id == id_or_name || r.name == id_or_name))
    }

    /// Replaces the owner token in one step: a new owner secret is made and written to
    /// `owner_file` (0600, atomic), and only then is every earlier owner token revoked. At
    /// no point does the home lack a working owner secret: a crash before the file is
    /// written leaves the old secret live (and a new record nobody holds the secret of); a
    /// failed write is rolled back. Returns the revoked records and the new one.
    pub fn rotate_owner(
        &mut self,
        owner_file: &Path,
    ) -> Result<(Vec<TokenRecord>, TokenRecord), AuthError> {
        let before = self.records.clone();
        let (record, secret) = new_record("owner", Role::Admin, Principal::Person)?;
        self.records.push(record.clone());
        if let Err(e) = self.save() {
            self.records = before;
            return Err(e);
        }
        if let Err(e) = files::write_atomic(owner_file, format!("{secret}\n").as_bytes()) {
            self.records = before;
            let _ = self.save();
            return Err(e.into());
        }
        let at = now();
        let mut revoked = Vec::new();
        for r in self.records.iter_mut() {
            if r.name == "owner" && r.revoked_at.is_none() && r.id != record.id {
                r.revoked_at = Some(at.clone());
                revoked.push(r.clone());
            }
        }
        // Should this save fail, the file holds the new secret, which is live: the old ones
        // are revoked in memory now and at the next successful save.
        self.save()?;
        Ok((revoked, record))
    }

    /// The live token whose hash matches `secret`, if any.
    pub fn authenticate(&self, secret: &str) -> Option<&TokenRecord> {
        if !secret.starts_with(SECRET_PREFIX) {
            return None;
        }
        let h = hash_secret(secret);
        self.records
            .iter()
            .filter(|r| r.revoked_at.is_none())
            .find(|r| constant_time_eq(r.hash.as_bytes(), h.as_bytes()))
    }

    /// Makes sure the owner's admin token exists and that `owner_file` holds its secret.
    /// Returns true when a new owner token was made.
    pub fn ensure_owner(&mut self, owner_file: &Path) -> Result<bool, AuthError> {
        if let Ok(f) = files::open_private_read(owner_file) {
            let mut s = String::new();
            use std::io::Read;
            let _ = std::io::BufReader::new(f).read_to_string(&mut s);
            if let Some(r) = self.authenticate(s.trim())
                && r.role == Role::Admin
            {
                return Ok(false);
            }
        }
        // The file is missing or stale: revoke any earlier owner token and make a new one.
        while self.revoke("owner").is_ok() {}
        let (_, secret) = self.create("owner", Role::Admin, Principal::Person)?;
        files::write_atomic(owner_file, format!("{secret}\n").as_bytes())?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn secrets_are_shown_once_and_stored_hashed() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("tokens.json");
        let mut tokens = Tokens::load(&p).unwrap();
        let (rec, secret) = tokens.create("ci", Role::Write, Principal::Agent).unwrap();
        let stored = std::fs::read_to_string(&p).unwrap();
        assert!(!stored.contains(&secret), "the secret must never be stored");
        assert!(stored.contains(&rec.hash));
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let again = Tokens::load(&p).unwrap();
        assert_eq!(again.authenticate(&secret).unwrap().id, rec.id);
        assert!(again.authenticate("proctor_00").is_none());
        assert!(again.authenticate(&secret[1..]).is_none());
    }

    #[test]
    fn revoked_tokens_stop_working() {
        let t = tempfile::tempdir().unwrap();
        let mut tokens = Tokens::load(&t.path().join("t.json")).unwrap();
        let (rec, secret) = tokens.create("a", Role::Read, Principal::Person).unwrap();
        tokens.revoke(&rec.id).unwrap();
        assert!(tokens.authenticate(&secret).is_none());
        assert!(matches!(tokens.revoke(&rec.id), Err(AuthError::Unknown(_))));
        // The name is free again.
        tokens.create("a", Role::Read, Principal::Person).unwrap();
    }

    #[test]
    fn names_and_duplicates_are_checked() {
        let t = tempfile::tempdir().unwrap();
        let mut tokens = Tokens::load(&t.path().join("t.json")).unwrap();
        assert!(matches!(
            tokens.create("Bad Name", Role::Read, Principal::Person),
            Err(AuthError::BadName(_))
        ));
        tokens.create("x", Role::Read, Principal::Person).unwrap();
        assert!(matches!(
            tokens.create("x", Role::Admin, Principal::Person),
            Err(AuthError::Duplicate(_))
        ));
    }

    #[test]
    fn rotating_the_owner_token_replaces_the_file_and_revokes_the_old_secret() {
        let t = tempfile::tempdir().unwrap();
        let owner = t.path().join("owner.token");
        let mut tokens = Tokens::load(&t.path().join("t.json")).unwrap();
        tokens.ensure_owner(&owner).unwrap();
        let old = std::fs::read_to_string(&owner).unwrap();
        let old_id = tokens.authenticate(old.trim()).unwrap().id.clone();
        let (revoked, new) = tokens.rotate_owner(&owner).unwrap();
        assert_eq!(revoked.len(), 1);
        assert_eq!(revoked[0].id, old_id);
        let fresh = std::fs::read_to_string(&owner).unwrap();
        assert_ne!(old, fresh);
        assert_eq!(std::fs::metadata(&owner).unwrap().mode() & 0o777, 0o600);
        assert!(tokens.authenticate(old.trim()).is_none());
        assert_eq!(tokens.authenticate(fresh.trim()).unwrap().id, new.id);
        assert_eq!(tokens.find_live("owner").unwrap().id, new.id);
        // As stored: a reload agrees, and the owner file is current (nothing to remake).
        let mut again = Tokens::load(&t.path().join("t.json")).unwrap();
        assert!(again.authenticate(old.trim()).is_none());
        assert!(!again.ensure_owner(&owner).unwrap());
    }

    #[test]
    fn owner_token_is_made_once_and_remade_when_its_file_is_lost() {
        let t = tempfile::tempdir().unwrap();
        let owner = t.path().join("owner.token");
        let mut tokens = Tokens::load(&t.path().join("t.json")).unwrap();
        assert!(tokens.ensure_owner(&owner).unwrap());
        assert!(!tokens.ensure_owner(&owner).unwrap());
        let first = std::fs::read_to_string(&owner).unwrap();
        assert_eq!(std::fs::metadata(&owner).unwrap().mode() & 0o777, 0o600);
        std::fs::remove_file(&owner).unwrap();
        assert!(tokens.ensure_owner(&owner).unwrap());
        let second = std::fs::read_to_string(&owner).unwrap();
        assert_ne!(first, second);
        assert!(
            tokens.authenticate(first.trim()).is_none(),
            "the lost owner token is revoked"
        );
        assert_eq!(
            tokens.authenticate(second.trim()).unwrap().role,
            Role::Admin
        );
    }
}
