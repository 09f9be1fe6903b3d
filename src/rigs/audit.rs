//! A rig's audit log: `data/rigs/<id>/audit.jsonl`, one [`super::AuditEvent`] per line,
//! appended and fsynced before the action's answer, seq monotonic from 1, kept after the rig
//! closes. At load, the last complete line gives the next seq; a torn last line (a crash in
//! the middle of a write) is cut off, so no seq is ever skipped or invented.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::RigError;
use super::model::{AuditEvent, AuditPage};
use crate::auth::Actor;
use crate::files;

/// The most events one page returns.
pub const PAGE_MAX: usize = 1000;

/// One rig's log, held open by the manager; one writer at a time.
pub struct AuditLog {
    path: PathBuf,
    next: Mutex<u64>,
}

fn read_events(path: &Path) -> Result<(Vec<AuditEvent>, u64), RigError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(RigError::Internal(format!("{}: {e}", path.display()))),
    };
    let mut events = Vec::new();
    let mut good_len = 0u64;
    let mut pos = 0usize;
    while pos < bytes.len() {
        let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n') else {
            break; // a torn tail: no newline
        };
        let line = &bytes[pos..pos + nl];
        match serde_json::from_slice::<AuditEvent>(line) {
            Ok(ev) => events.push(ev),
            Err(_) => break,
        }
        pos += nl + 1;
        good_len = pos as u64;
    }
    Ok((events, good_len))
}

impl AuditLog {
    /// Opens (or creates) the log in `dir`, cutting a torn tail.
    pub fn open(dir: &Path) -> Result<AuditLog, RigError> {
        let path = dir.join("audit.jsonl");
        let (events, good_len) = read_events(&path)?;
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.len() > good_len
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| RigError::Internal(format!("{}: {e}", path.display())))?;
            f.set_len(good_len)
                .and_then(|()| f.sync_all())
                .map_err(|e| RigError::Internal(format!("{}: {e}", path.display())))?;
        }
        let next = events.last().map_or(1, |e| e.seq + 1);
        Ok(AuditLog {
            path,
            next: Mutex::new(next),
        })
    }

    /// The seq the next event will have.
    pub fn next_seq(&self) -> u64 {
        *self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one event and fsyncs it; returns it.
    pub fn append(
        &self,
        by: &Actor,
        action: &str,
        outcome: &str,
        detail: serde_json::Value,
    ) -> Result<AuditEvent, RigError> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let ev = AuditEvent {
            seq: *next,
            at: crate::ledger::now_at(),
            by: by.clone(),
            action: action.to_string(),
            outcome: outcome.to_string(),
            detail,
        };
        let mut line = serde_json::to_vec(&ev).map_err(RigError::internal)?;
        line.push(b'\n');
        let mut f = files::open_private_append(&self.path).map_err(RigError::internal)?;
        f.write_all(&line)
            .and_then(|()| f.sync_all())
            .map_err(|e| RigError::Internal(format!("{}: {e}", self.path.display())))?;
        *next += 1;
        Ok(ev)
    }

    /// Events with seq > `after`, at most `limit` (≤ [`PAGE_MAX`]).
    pub fn page(&self, rig: &str, after: u64, limit: usize) -> Result<AuditPage, RigError> {
        let next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let (events, _) = read_events(&self.path)?;
        let limit = limit.clamp(1, PAGE_MAX);
        Ok(AuditPage {
            rig: rig.to_string(),
            events: events
                .into_iter()
                .filter(|e| e.seq > after)
                .take(limit)
                .collect(),
            next: *next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;

    fn who() -> Actor {
        Actor {
            token_id: "tok-2".into(),
            name: "bot".into(),
            principal: Principal::Agent,
        }
    }

    #[test]
    fn seq_is_monotonic_across_reopen_and_a_torn_tail_is_cut_not_skipped() {
        let t = tempfile::tempdir().unwrap();
        let log = AuditLog::open(t.path()).unwrap();
        assert_eq!(log.next_seq(), 1);
        for i in 0..3 {
            let ev = log
                .append(&who(), "type", "done", serde_json::json!({"bytes": i}))
                .unwrap();
            assert_eq!(ev.seq, i + 1);
        }
        drop(log);
        // A restart: the next seq follows the last line.
        let log = AuditLog::open(t.path()).unwrap();
        assert_eq!(log.next_seq(), 4);
        drop(log);
        // A crash mid-write leaves half a line.
        let path = t.path().join("audit.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"seq\":4,\"at\":\"2026").unwrap();
        drop(f);
        let log = AuditLog::open(t.path()).unwrap();
        assert_eq!(log.next_seq(), 4);
        let ev = log
            .append(&who(), "exec", "refused", serde_json::json!({}))
            .unwrap();
        assert_eq!(ev.seq, 4);
        let page = log.page("rig-0001", 0, 100).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
        assert_eq!(page.next, 5);
        let page = log.page("rig-0001", 2, 1).unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].seq, 3);
        // Every line on disk parses.
        let raw = std::fs::read_to_string(&path).unwrap();
        assert_eq!(raw.lines().count(), 4);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
