//! What the cockpit knows about the server, as the API reports it: the runs (with the
//! caller's marks), the focused run's lifecycle events, and the caller's own role. Nothing
//! here is invented: a field the server did not send stays absent, and what is shown as a
//! state's source is read from the fields that establish it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::api::runs as wire;
use crate::auth::{Principal, Role};
use crate::client::{Client, ClientError};

/// One lifecycle event of a run (its `seq` is the ledger's).
pub use crate::api::runs::RunEvent as EventItem;
/// The lifecycle states (see `docs/api.md`): the domain's own, as the contract carries it.
pub use crate::api::runs::State as RunState;
/// The output ring of a live run, and one run as `GET /runs` shows it to the caller: the
/// contract's types, rendered as they are.
pub use crate::api::runs::{OutputView as Output, RunView};

/// How many runs the cockpit lists: the newest ones, plus the caller's pinned runs outside
/// that page (the server appends those).
pub const LIST_LIMIT: usize = 200;

/// Parses an RFC 3339 instant.
pub fn instant(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A duration for people: `4s`, `3m`, `2h`, `5d`.
pub fn ago(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

impl RunView {
    pub fn state(&self) -> RunState {
        self.state
    }

    pub fn is_pty(&self) -> bool {
        self.transport == "pty"
    }

    pub fn is_archived(&self) -> bool {
        self.archived_at.is_some()
    }

    /// True while the caller's snooze has not come due.
    pub fn is_snoozed(&self, now: DateTime<Utc>) -> bool {
        self.snoozed_until
            .as_deref()
            .and_then(instant)
            .is_some_and(|u| u > now)
    }

    /// The last observed activity: output, else the end, the start, the creation.
    pub fn activity(&self) -> Option<DateTime<Utc>> {
        let out = self
            .output
            .as_ref()
            .and_then(|o| o.last_at.as_deref())
            .and_then(instant);
        let others = [&self.ended_at, &self.started_at]
            .into_iter()
            .filter_map(|t| t.as_deref().and_then(instant));
        out.into_iter()
            .chain(others)
            .chain(instant(&self.created_at))
            .max()
    }

    /// The state and what establishes it, e.g. `("running", "output 2s ago")`,
    /// `("failed", "exit 3")`, `("lost", "server restart")`. The source is only ever read
    /// from fields the server reported.
    pub fn state_source(&self, now: DateTime<Utc>) -> (String, String) {
        let st = self.state();
        let exit = || match (&self.exit_code, &self.signal) {
            (Some(c), _) => Some(format!("exit {c}")),
            (None, Some(sig)) => Some(sig.clone()),
            (None, None) => None,
        };
        let source = match st {
            RunState::Starting => "launching".to_string(),
            RunState::Recovering => "sweep after restart".to_string(),
            // The frame that said the tool cannot work; its words and the remedy are in
            // the run's `blocked` (and `reason`).
            RunState::Blocked => match &self.blocked {
                Some(b) => crate::text::one_line(&b.source, 40),
                None => "the tool said it cannot work".to_string(),
            },
            RunState::Running => {
                match self
                    .output
                    .as_ref()
                    .and_then(|o| o.last_at.as_deref())
                    .and_then(instant)
                {
                    Some(t) => format!("output {} ago", ago(now, t)),
                    None => "no output yet".to_string(),
                }
            }
            RunState::Idle => "protocol".to_string(),
            RunState::Stopped => exit().unwrap_or_else(|| "exit not observed".into()),
            RunState::Failed => match exit() {
                Some(e) => e,
                None if self.reason.is_some() => "launch".to_string(),
                None => "exit not observed".to_string(),
            },
            RunState::Lost => "server restart".to_string(),
            RunState::Cleaned => "released".to_string(),
        };
        (self.state.as_str().to_string(), source)
    }
}

/// How many listed runs are in each state group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Starting or running.
    pub live: usize,
    pub idle: usize,
    pub stopped: usize,
    pub failed: usize,
    pub lost: usize,
    /// Live, but the tool said it cannot work.
    pub blocked: usize,
    /// Listed runs that wait for the person (an open permission, a turn ended, a hook).
    pub waiting: usize,
    pub total: usize,
}

impl Counts {
    pub fn of(runs: &[RunView]) -> Counts {
        let mut c = Counts {
            total: runs.len(),
            ..Counts::default()
        };
        for r in runs {
            if r.waiting.is_some() {
                c.waiting += 1;
            }
            match r.state() {
                RunState::Starting | RunState::Running | RunState::Recovering => c.live += 1,
                RunState::Idle => c.idle += 1,
                RunState::Stopped => c.stopped += 1,
                RunState::Failed => c.failed += 1,
                RunState::Lost => c.lost += 1,
                RunState::Blocked => c.blocked += 1,
                RunState::Cleaned => {}
            }
        }
        c
    }
}

/// What one poll of the list brought back.
#[derive(Debug, Clone, PartialEq)]
pub struct RunsPage {
    pub items: Vec<RunView>,
    /// How many runs the server holds (the list shows at most [`LIST_LIMIT`] plus pins).
    pub total: usize,
    /// Counts over every run on the server (from per-state totals when the list is not all
    /// of them, else from the list).
    pub counts: Counts,
}

/// What the cockpit keeps of the caller's token (`GET /v1/whoami`, [`wire`]'s
/// `server::WhoAmI`): its role and principal decide which actions it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhoAmI {
    pub token_id: String,
    pub name: String,
    pub role: Role,
    pub principal: Principal,
}

impl From<crate::api::server::WhoAmI> for WhoAmI {
    fn from(w: crate::api::server::WhoAmI) -> Self {
        WhoAmI {
            token_id: w.token_id,
            name: w.name,
            role: w.role,
            principal: w.principal,
        }
    }
}

/// `GET /runs` (newest [`LIST_LIMIT`], plus the caller's pins), and per-state totals when
/// the server holds more than that.
pub async fn fetch_runs(client: &Client) -> Result<RunsPage, ClientError> {
    let v: wire::RunPage = client.get(&wire::list(LIST_LIMIT, None)).await?;
    let items = v.items;
    let total = v.total;
    let listed = items.len().saturating_sub(v.pinned_outside_page);
    let counts = if total > listed {
        // Waiting is no state the list can be asked for: counted over the listed runs (the
        // newest, where a run that waits is).
        let mut c = Counts {
            total,
            waiting: Counts::of(&items).waiting,
            ..Counts::default()
        };
        for (state, slot) in [
            (RunState::Starting, 0),
            (RunState::Running, 0),
            (RunState::Recovering, 0),
            (RunState::Idle, 1),
            (RunState::Stopped, 2),
            (RunState::Failed, 3),
            (RunState::Lost, 4),
        ] {
            let v: wire::RunPage = client.get(&wire::list(1, Some(state))).await?;
            let n = v.total;
            match slot {
                0 => c.live += n,
                1 => c.idle += n,
                2 => c.stopped += n,
                3 => c.failed += n,
                _ => c.lost += n,
            }
        }
        c
    } else {
        Counts::of(&items)
    };
    Ok(RunsPage {
        items,
        total,
        counts,
    })
}

/// `GET /runs/{ref}/events`.
pub async fn fetch_events(client: &Client, run: &str) -> Result<Vec<EventItem>, ClientError> {
    let v: wire::RunEvents = client.get(&wire::at(wire::EVENTS, run)).await?;
    Ok(v.items)
}

/// `GET /v1/whoami`.
pub async fn whoami(client: &Client) -> Result<WhoAmI, ClientError> {
    let v: crate::api::server::WhoAmI = client.get(crate::api::server::WHOAMI).await?;
    Ok(v.into())
}

/// One event as a line of the events pane: local time, the kind without its
/// `sessions.run.` prefix, then its fields as `key=value`. Not yet sanitised: the caller
/// passes it through [`crate::text`].
pub fn event_line(e: &EventItem) -> String {
    let time = instant(&e.at)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| e.at.clone());
    let kind = e.kind.strip_prefix("sessions.run.").unwrap_or(&e.kind);
    let mut line = format!("{time} {kind}");
    for (k, v) in &e.fields {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(&v);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value) -> RunView {
        let mut base = json!({"ref": "run-0001", "tool": "claude", "profile": "claude",
            "transport": "pty", "workspace": "/w", "demo": true,
            "created_at": "2026-01-01T00:00:00.000Z", "state": "running"});
        for (k, x) in v.as_object().unwrap() {
            base[k] = x.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn now() -> DateTime<Utc> {
        instant("2026-01-01T00:10:00.000Z").unwrap()
    }

    #[test]
    fn state_sources_come_from_reported_fields() {
        let src = |v: Value| run(v).state_source(now()).1;
        assert_eq!(
            src(json!({"output": {"next_seq": 3, "last_at": "2026-01-01T00:09:58.000Z"}})),
            "output 2s ago"
        );
        assert_eq!(
            src(json!({"started_at": "2026-01-01T00:05:00.000Z"})),
            "no output yet"
        );
        assert_eq!(src(json!({"state": "idle"})), "protocol");
        assert_eq!(src(json!({"state": "stopped", "exit_code": 0})), "exit 0");
        assert_eq!(src(json!({"state": "failed", "exit_code": 3})), "exit 3");
        assert_eq!(
            src(json!({"state": "failed", "signal": "SIGKILL"})),
            "SIGKILL"
        );
        assert_eq!(
            src(json!({"state": "failed", "reason": "no such tool"})),
            "launch"
        );
        assert_eq!(src(json!({"state": "lost"})), "server restart");
        // A blocked run names the frame that said it cannot work.
        assert_eq!(
            src(
                json!({"state": "blocked", "blocked": {"words": "Not logged in",
                "source": "result api_error", "remedy": "log in"}})
            ),
            "result api_error"
        );
        assert_eq!(
            src(json!({"state": "stopped"})),
            "exit not observed",
            "never an invented exit code"
        );
    }

    #[test]
    fn snooze_and_activity() {
        let r = run(json!({"snoozed_until": "2026-01-01T01:00:00.000Z"}));
        assert!(r.is_snoozed(now()));
        let r = run(json!({"snoozed_until": "2026-01-01T00:01:00.000Z"}));
        assert!(!r.is_snoozed(now()), "a snooze that came due shows the run");
        let r = run(json!({"started_at": "2026-01-01T00:02:00.000Z",
            "output": {"last_at": "2026-01-01T00:03:00.000Z"}}));
        assert_eq!(r.activity(), instant("2026-01-01T00:03:00.000Z"));
    }

    #[test]
    fn a_recovering_run_is_live_and_says_what_establishes_it() {
        let r = run(json!({"state": "recovering"}));
        assert_eq!(r.state(), RunState::Recovering);
        assert!(r.state().is_live());
        assert_eq!(r.state_source(now()).1, "sweep after restart");
        assert_eq!(Counts::of(&[r]).live, 1);
    }

    #[test]
    fn counts_group_states() {
        let runs: Vec<RunView> = ["running", "starting", "idle", "failed", "lost", "stopped"]
            .iter()
            .map(|s| run(json!({"state": s})))
            .collect();
        let c = Counts::of(&runs);
        assert_eq!(
            (c.live, c.idle, c.stopped, c.failed, c.lost, c.total),
            (2, 1, 1, 1, 1, 6)
        );
    }
}
