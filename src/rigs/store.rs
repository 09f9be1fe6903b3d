//! Rig records on disk: `data/rigs/<id>/rig.json` (0600, replaced atomically), ids
//! reserved as `rig-NNNN`.

use std::path::{Path, PathBuf};

use super::RigError;
use super::model::RigRecord;
use crate::files;
use crate::home::Home;

pub const PREFIX: &str = "rig-";

/// `data/rigs`.
pub fn rigs_dir(home: &Home) -> PathBuf {
    home.data.join("rigs")
}

/// `data/rigs/<id>`.
pub fn rig_dir(home: &Home, id: &str) -> PathBuf {
    rigs_dir(home).join(id)
}

fn record_path(dir: &Path) -> PathBuf {
    dir.join("rig.json")
}

/// Reserves the next `rig-NNNN` (a 0700 folder made exclusively).
pub fn reserve(home: &Home) -> Result<(String, PathBuf), RigError> {
    files::ensure_private_dir(&home.data).map_err(RigError::internal)?;
    files::reserve_numbered(&rigs_dir(home), PREFIX, "").map_err(RigError::internal)
}

/// Writes a record (atomic replace, 0600).
pub fn save(home: &Home, rec: &RigRecord) -> Result<(), RigError> {
    if !files::valid_id(&rec.id, PREFIX) {
        return Err(RigError::Internal(format!("{:?} is not a rig id", rec.id)));
    }
    let dir = rig_dir(home, &rec.id);
    files::ensure_private_dir(&dir).map_err(RigError::internal)?;
    let bytes = serde_json::to_vec_pretty(rec).map_err(RigError::internal)?;
    files::write_atomic(&record_path(&dir), &bytes).map_err(RigError::internal)
}

/// Reads one record (`None` when the folder has none yet: a reservation a crash left).
pub fn load(home: &Home, id: &str) -> Result<Option<RigRecord>, RigError> {
    let path = record_path(&rig_dir(home, id));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RigError::Internal(format!("{}: {e}", path.display()))),
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RigError::Internal(format!("{} is not a rig record: {e}", path.display())))
}

/// Every record, in id order; unreadable ones are returned as errors beside the good ones.
pub fn load_all(home: &Home) -> (Vec<RigRecord>, Vec<RigError>) {
    let mut out = Vec::new();
    let mut errs = Vec::new();
    match files::numbered(&rigs_dir(home), PREFIX, "") {
        Ok(ids) => {
            for (_, id) in ids {
                match load(home, &id) {
                    Ok(Some(r)) => out.push(r),
                    Ok(None) => {}
                    Err(e) => errs.push(e),
                }
            }
        }
        Err(e) => errs.push(RigError::internal(e)),
    }
    (out, errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Actor, Principal};
    use crate::rigs::model::*;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn test_home(root: &Path) -> Home {
        let home = Home::resolve_with(Some(root), None).unwrap();
        home.ensure().unwrap();
        home
    }

    pub(crate) fn record(id: &str) -> RigRecord {
        RigRecord {
            id: id.into(),
            kind: Kind::Terminal,
            backend: BackendKind::Namespace,
            boundary: None,
            state: RigState::Booting,
            opened_by: Actor {
                token_id: "tok-1".into(),
                name: "owner".into(),
                principal: Principal::Person,
            },
            opened_at: "2026-01-01T00:00:00.000Z".into(),
            ttl_secs: 60,
            expires_at: "2026-01-01T00:01:00.000Z".into(),
            idle_secs: 30,
            last_used_at: "2026-01-01T00:00:00.000Z".into(),
            allow: vec![],
            workspace: None,
            image: None,
            reserved_mb: 32,
            pid: None,
            pid_start: None,
            closed_at: None,
            close_reason: None,
            error: None,
        }
    }

    #[test]
    fn records_round_trip_private_and_ids_never_repeat() {
        let t = tempfile::tempdir().unwrap();
        let home = test_home(t.path());
        let (a, da) = reserve(&home).unwrap();
        let (b, _) = reserve(&home).unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("rig-0001", "rig-0002"));
        assert_eq!(
            std::fs::metadata(&da).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let mut r = record(&a);
        save(&home, &r).unwrap();
        r.state = RigState::Running;
        save(&home, &r).unwrap();
        let p = da.join("rig.json");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load(&home, &a).unwrap(), Some(r.clone()));
        let (all, errs) = load_all(&home);
        assert!(errs.is_empty());
        assert_eq!(all, vec![r]);
        let (c, _) = reserve(&home).unwrap();
        assert_eq!(c, "rig-0003");
    }
}
