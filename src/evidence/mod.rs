//! Evidence: what was checked, about which exact candidate, under which policy.
//!
//! A check result names its object (the candidate identity digest) and the policy it was
//! judged under (the policy digest). When either changes, the evidence is stale: kept in
//! history, never reused. See `docs/evidence.md`.

pub mod checks;
pub mod policy;
pub mod store;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::files::{self, FilesError};

/// The recipe of a digest of raw bytes (a file, a captured stream): SHA-256 of the exact
/// bytes, lowercase hex.
pub const BYTES_RECIPE: &str = "bytes-sha256/1";

/// Who asked for a state change: the token that called (its id and name) and whether it
/// is a person or an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub token_id: String,
    pub name: String,
    pub principal: String,
}

/// The entries `<prefix>NNNN<suffix>` of `dir` as (number, id), in number order (an absent
/// folder has none). Every numbered store (candidates, evidence, receipts, intents) lists
/// itself through this.
pub(crate) fn numbered(
    dir: &Path,
    prefix: &str,
    suffix: &str,
) -> Result<Vec<(u64, String)>, FilesError> {
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
fn highest(dir: &Path, prefix: &str, suffix: &str) -> Result<u64, FilesError> {
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
) -> Result<(String, PathBuf), FilesError> {
    files::ensure_private_dir(dir)?;
    let mut n = highest(dir, prefix, suffix)? + 1;
    loop {
        let id = format!("{prefix}{n:04}");
        let path = dir.join(format!("{id}{suffix}"));
        let made = if suffix.is_empty() {
            std::fs::create_dir(&path)
                .map_err(|e| FilesError::io("create the folder", &path, e))
                .and_then(|()| files::ensure_private_dir(&path))
        } else {
            files::create_private_new(&path).map(drop)
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
pub(crate) fn hash_file(path: &Path) -> Result<Option<(u64, String)>, FilesError> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = match files::open_private_read(path) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
