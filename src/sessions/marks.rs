//! Per-caller marks on runs: pins, snoozes and done. A mark belongs to the token identity
//! that made it and never changes anyone else's list. Persisted as `data/marks.json`
//! (0600, replaced atomically).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::files;

/// At most this many pins per caller; the oldest drops when one more is pinned.
pub const MAX_PINS: usize = 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Mark {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snoozed_until: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
}

impl Mark {
    fn is_empty(&self) -> bool {
        self.pinned_at.is_none() && self.snoozed_until.is_none() && !self.done
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MarksError {
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error("{path} is not a valid marks file: {err}")]
    Corrupt {
        path: PathBuf,
        err: serde_json::Error,
    },
}

/// caller (token id) → run ref → mark.
#[derive(Debug)]
pub struct Marks {
    path: PathBuf,
    by_caller: BTreeMap<String, BTreeMap<String, Mark>>,
}

impl Marks {
    pub fn load(path: &Path) -> Result<Marks, MarksError> {
        let by_caller = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| MarksError::Corrupt {
                path: path.to_path_buf(),
                err,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(files::FilesError::io("read", path, e).into()),
        };
        Ok(Marks {
            path: path.to_path_buf(),
            by_caller,
        })
    }

    fn save(&self) -> Result<(), MarksError> {
        let bytes =
            serde_json::to_vec_pretty(&self.by_caller).map_err(|err| MarksError::Corrupt {
                path: self.path.clone(),
                err,
            })?;
        files::write_atomic(&self.path, &bytes)?;
        Ok(())
    }

    /// The caller's mark on a run, with an expired snooze left out.
    pub fn get(&self, caller: &str, run: &str, now: &str) -> Mark {
        let mut m = self
            .by_caller
            .get(caller)
            .and_then(|runs| runs.get(run))
            .cloned()
            .unwrap_or_default();
        if m.snoozed_until
            .as_deref()
            .is_some_and(|u| !is_after(u, now))
        {
            m.snoozed_until = None;
        }
        m
    }

    /// Runs this caller has pinned, oldest first.
    pub fn pinned(&self, caller: &str) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .by_caller
            .get(caller)
            .into_iter()
            .flatten()
            .filter_map(|(r, m)| m.pinned_at.clone().map(|at| (r.clone(), at)))
            .collect();
        v.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        v
    }

    fn update(
        &mut self,
        caller: &str,
        run: &str,
        f: impl FnOnce(&mut Mark),
    ) -> Result<(), MarksError> {
        let before = self.by_caller.clone();
        let runs = self.by_caller.entry(caller.to_string()).or_default();
        let mark = runs.entry(run.to_string()).or_default();
        f(mark);
        if mark.is_empty() {
            runs.remove(run);
        }
        if runs.is_empty() {
            self.by_caller.remove(caller);
        }
        if self.by_caller == before {
            return Ok(());
        }
        if let Err(e) = self.save() {
            self.by_caller = before;
            return Err(e);
        }
        Ok(())
    }

    /// Pins a run for the caller (idempotent: an existing pin keeps its time). Returns the
    /// run whose pin dropped to keep at most [`MAX_PINS`].
    pub fn pin(
        &mut self,
        caller: &str,
        run: &str,
        now: &str,
    ) -> Result<Option<String>, MarksError> {
        if self.get(caller, run, now).pinned_at.is_some() {
            return Ok(None);
        }
        let pins = self.pinned(caller);
        let dropped = (pins.len() >= MAX_PINS).then(|| pins[0].0.clone());
        let before = self.by_caller.clone();
        if let Some(old) = &dropped
            && let Some(m) = self.by_caller.get_mut(caller).and_then(|r| r.get_mut(old))
        {
            m.pinned_at = None;
            if m.is_empty() {
                self.by_caller.get_mut(caller).map(|r| r.remove(old));
            }
        }
        let now = now.to_string();
        if let Err(e) = self.update(caller, run, |m| m.pinned_at = Some(now)) {
            self.by_caller = before;
            return Err(e);
        }
        Ok(dropped)
    }

    pub fn unpin(&mut self, caller: &str, run: &str) -> Result<(), MarksError> {
        self.update(caller, run, |m| m.pinned_at = None)
    }

    pub fn snooze(&mut self, caller: &str, run: &str, until: &str) -> Result<(), MarksError> {
        let until = until.to_string();
        self.update(caller, run, |m| m.snoozed_until = Some(until))
    }

    pub fn unsnooze(&mut self, caller: &str, run: &str) -> Result<(), MarksError> {
        self.update(caller, run, |m| m.snoozed_until = None)
    }

    pub fn set_done(&mut self, caller: &str, run: &str, done: bool) -> Result<(), MarksError> {
        self.update(caller, run, |m| m.done = done)
    }

    /// Removes every caller's marks on a run (cleanup, delete).
    pub fn forget_run(&mut self, run: &str) -> Result<(), MarksError> {
        let before = self.by_caller.clone();
        for runs in self.by_caller.values_mut() {
            runs.remove(run);
        }
        self.by_caller.retain(|_, runs| !runs.is_empty());
        if self.by_caller == before {
            return Ok(());
        }
        if let Err(e) = self.save() {
            self.by_caller = before;
            return Err(e);
        }
        Ok(())
    }
}

/// Compares two RFC 3339 instants; unparsable values are never "after".
pub fn is_after(a: &str, b: &str) -> bool {
    match (
        chrono::DateTime::parse_from_rfc3339(a),
        chrono::DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(i: usize) -> String {
        format!("2026-11-30T00:00:{:02}.000Z", i)
    }

    #[test]
    fn at_most_twenty_pins_the_oldest_drops() {
        let t = tempfile::tempdir().unwrap();
        let mut m = Marks::load(&t.path().join("marks.json")).unwrap();
        for i in 0..MAX_PINS {
            assert_eq!(
                m.pin("alice", &format!("run-{i:04}"), &at(i)).unwrap(),
                None
            );
        }
        // Pinning again is a no-op that keeps the original time.
        assert_eq!(m.pin("alice", "run-0005", &at(50)).unwrap(), None);
        assert_eq!(m.get("alice", "run-0005", &at(50)).pinned_at, Some(at(5)));
        let dropped = m.pin("alice", "run-0099", &at(30)).unwrap();
        assert_eq!(dropped.as_deref(), Some("run-0000"));
        assert_eq!(m.pinned("alice").len(), MAX_PINS);
        assert!(m.get("alice", "run-0000", &at(31)).pinned_at.is_none());
        // Someone else's list is untouched.
        assert!(m.pinned("bob").is_empty());
        let reloaded = Marks::load(&t.path().join("marks.json")).unwrap();
        assert_eq!(reloaded.pinned("alice"), m.pinned("alice"));
    }

    #[test]
    fn a_snooze_shows_only_while_it_lasts() {
        let t = tempfile::tempdir().unwrap();
        let mut m = Marks::load(&t.path().join("marks.json")).unwrap();
        m.snooze("a", "run-0001", "2026-11-30T10:00:00Z").unwrap();
        assert!(
            m.get("a", "run-0001", "2026-11-30T09:00:00Z")
                .snoozed_until
                .is_some()
        );
        assert!(
            m.get("a", "run-0001", "2026-11-30T11:00:00Z")
                .snoozed_until
                .is_none()
        );
        assert!(
            m.get("b", "run-0001", "2026-11-30T09:00:00Z")
                .snoozed_until
                .is_none()
        );
    }

    #[test]
    fn forgetting_a_run_removes_everyones_marks() {
        let t = tempfile::tempdir().unwrap();
        let mut m = Marks::load(&t.path().join("marks.json")).unwrap();
        m.pin("a", "run-0001", &at(1)).unwrap();
        m.set_done("b", "run-0001", true).unwrap();
        m.forget_run("run-0001").unwrap();
        assert_eq!(m.get("a", "run-0001", &at(2)), Mark::default());
        assert_eq!(m.get("b", "run-0001", &at(2)), Mark::default());
    }
}
