//! Rounds on disk: `data/tribunal/rnd-NNNN.json`, the record of each round (canonical JSON,
//! 0600, replaced atomically as its seats decide, so a reader sees a round in progress), and
//! the round's folder (by default `data/tribunal/rnd-NNNN/`, or the `--out` folder it claimed)
//! with the envelope, the prompts and the verdicts.

use std::path::{Path, PathBuf};

use crate::files::{self, FilesError};
use crate::home::Home;
use crate::tribunal::model::{ROUND_FORMAT, Round};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("{path}: not a round record of format {ROUND_FORMAT}: {problem}")]
    Corrupt { path: String, problem: String },
    #[error("not a round id: {0:?} (round ids look like rnd-0001)")]
    BadId(String),
    #[error(
        "the envelope of {round} at {path} is not the one the round judged (its SHA-256 is {found}, the round's {expected}): it changed after the round"
    )]
    EnvelopeChanged {
        round: String,
        path: String,
        expected: String,
        found: String,
    },
    #[error("the envelope of {round} is gone: {path}")]
    EnvelopeMissing { round: String, path: String },
}

pub const PREFIX: &str = "rnd-";

pub fn dir(home: &Home) -> PathBuf {
    home.data.join("tribunal")
}

pub fn record_path(home: &Home, id: &str) -> Result<PathBuf, StoreError> {
    if !files::valid_id(id, PREFIX) {
        return Err(StoreError::BadId(id.to_string()));
    }
    Ok(dir(home).join(format!("{id}.json")))
}

/// Reserves the next round id (an empty 0600 record file, exclusively).
pub fn reserve(home: &Home) -> Result<String, StoreError> {
    let (id, _) = files::reserve_numbered(&dir(home), PREFIX, ".json")?;
    Ok(id)
}

/// Writes the record (whole-file atomic replacement, 0600).
pub fn write(home: &Home, round: &Round) -> Result<(), StoreError> {
    let path = record_path(home, &round.id)?;
    files::write_atomic(&path, &bytes(round))?;
    Ok(())
}

/// The record's bytes as stored: canonical JSON and LF.
pub fn bytes(round: &Round) -> Vec<u8> {
    let value = serde_json::to_value(round).unwrap_or(serde_json::Value::Null);
    let mut out = crate::ledger::canonical::to_vec(&value).unwrap_or_default();
    out.push(b'\n');
    out
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Round, StoreError> {
    let round: Round = serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        path: path.display().to_string(),
        problem: e.to_string(),
    })?;
    if round.format != ROUND_FORMAT {
        return Err(StoreError::Corrupt {
            path: path.display().to_string(),
            problem: format!("format {:?}", round.format),
        });
    }
    Ok(round)
}

/// One round; `None` when there is no such round (or it is only reserved, not yet written).
pub fn load(home: &Home, id: &str) -> Result<Option<Round>, StoreError> {
    let path = record_path(home, id)?;
    let bytes = match read_private(&path)? {
        Some(b) => b,
        None => return Ok(None),
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    parse(&path, &bytes).map(Some)
}

/// Every round, oldest first, optionally of one candidate or one run.
pub fn list(
    home: &Home,
    candidate: Option<&str>,
    run: Option<&str>,
) -> Result<Vec<Round>, StoreError> {
    let mut out = Vec::new();
    for (_, id) in files::numbered(&dir(home), PREFIX, ".json")? {
        let Some(r) = load(home, &id)? else { continue };
        if candidate.is_some_and(|c| c != r.candidate) || run.is_some_and(|x| x != r.run_ref) {
            continue;
        }
        out.push(r);
    }
    Ok(out)
}

/// The envelope text the round judged, checked against the round's digest.
pub fn envelope_text(_home: &Home, round: &Round) -> Result<String, StoreError> {
    use sha2::Digest as _;
    let path = Path::new(&round.out_dir).join(&round.envelope.file);
    let Some(bytes) = read_private(&path)? else {
        return Err(StoreError::EnvelopeMissing {
            round: round.id.clone(),
            path: path.display().to_string(),
        });
    };
    let found = hex::encode(sha2::Sha256::digest(&bytes));
    if found != round.envelope.digest {
        return Err(StoreError::EnvelopeChanged {
            round: round.id.clone(),
            path: path.display().to_string(),
            expected: round.envelope.digest.clone(),
            found,
        });
    }
    String::from_utf8(bytes).map_err(|_| StoreError::Corrupt {
        path: path.display().to_string(),
        problem: "the envelope is not UTF-8".into(),
    })
}

/// The bytes of a private file; `None` when it does not exist.
pub(crate) fn read_private(path: &Path) -> Result<Option<Vec<u8>>, FilesError> {
    use std::io::Read as _;
    let mut f = match files::open_private_read(path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    f.read_to_end(&mut out)
        .map_err(|e| FilesError::io("read the file", path, e))?;
    Ok(Some(out))
}
