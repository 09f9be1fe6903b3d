//! The factory runs the Sessions list shows as session groups (issue 16): what the last poll
//! of `GET /v1/m/factory/runs` brought back. It is polled with the sessions list, at its
//! cadence (the data task), and replaced whole by each answer: a failed poll leaves the
//! state unknown (the error shows), never the runs heard before.

use crate::api::factory::{FactoryRun, RunStatus};

/// The factory runs' state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FactoryGroups {
    /// Every run, oldest first, or what the server said (`None` before the first answer).
    pub runs: Option<Result<Vec<FactoryRun>, String>>,
}

impl FactoryGroups {
    /// A new answer: it replaces what was known (an error drops the runs heard before).
    pub fn on_runs(&mut self, answer: Result<Vec<FactoryRun>, String>) {
        self.runs = Some(answer.map(|mut v| {
            v.sort_by(|a, b| a.id.cmp(&b.id));
            v
        }));
    }

    /// The runs in the order the list shows them: the running ones first, then the
    /// finished ones, newest first in each.
    pub fn shown(&self) -> Vec<&FactoryRun> {
        let Some(Ok(v)) = &self.runs else {
            return Vec::new();
        };
        let mut out: Vec<&FactoryRun> = v.iter().collect();
        out.sort_by(|a, b| {
            let finished = |r: &FactoryRun| r.status != RunStatus::Running;
            (finished(a), std::cmp::Reverse(&a.id)).cmp(&(finished(b), std::cmp::Reverse(&b.id)))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, status: RunStatus) -> FactoryRun {
        serde_json::from_value(serde_json::json!({
            "format": "proctor-factory-run/1", "id": id, "status": status, "phase": "done",
            "started_at": "2026-01-01T00:00:00.000Z", "workspace": "/w",
            "task_sha256": "00", "worker": {"tool": "claude", "profile": "claude"},
            "reviewer": {"tool": "codex", "profile": "codex"}, "timeout_ms": 1000,
            "steps": [], "reachable_after": 0
        }))
        .unwrap()
    }

    #[test]
    fn running_first_then_newest_and_an_error_forgets_the_runs() {
        let mut g = FactoryGroups::default();
        assert!(g.shown().is_empty());
        g.on_runs(Ok(vec![
            run("fac-0001", RunStatus::Completed),
            run("fac-0002", RunStatus::Running),
            run("fac-0003", RunStatus::Failed),
        ]));
        let ids: Vec<&str> = g.shown().iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["fac-0002", "fac-0003", "fac-0001"]);
        g.on_runs(Err("connection refused".into()));
        assert!(g.shown().is_empty(), "a failed poll shows no stale run");
        assert_eq!(g.runs, Some(Err("connection refused".into())));
    }
}
