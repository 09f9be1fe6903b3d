//! A cockpit that follows several hosts at once (`proctor --host A --host B`; issue 19 §2,
//! docs/remote.md): what it knows of each host, and the one list it shows of them all.
//!
//! Every run is named in the cockpit by `HOST/REF` (two hosts both have `run-0001`): each
//! host's data task writes its runs' refs so ([`join`]), and every action, stream and
//! keystroke is sent to the host the ref names, with the host's own ref ([`split`]; the
//! routing is `super::event_loop::Hosts`). Host names are plain words (no `/`:
//! [`crate::remote`] refuses anything else), and run refs have none either, so the split is
//! exact.
//!
//! A host that stops answering keeps its last rows, marked stale: never counted or shown as
//! live (its state is unknown while it does not answer), and its header line says since
//! when it is unreachable and why (the error sanitised). It comes back by itself at the
//! next answer.

use chrono::{DateTime, Utc};

use super::data::{Counts, RunsPage};
use crate::text;

/// `HOST/REF`: how the cockpit names a host's run.
pub fn join(host: &str, run: &str) -> String {
    format!("{host}/{run}")
}

/// `HOST/REF` → (host, ref); `None` for a ref of a one-host cockpit.
pub fn split(cockpit_ref: &str) -> Option<(&str, &str)> {
    cockpit_ref.split_once('/')
}

/// Whether a host answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Not answered yet.
    Connecting,
    Reachable,
    /// Its last request failed, at `since` (the first failure of the run of failures).
    Unreachable {
        since: DateTime<Utc>,
        error: String,
    },
}

/// What the cockpit knows of one host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostState {
    pub name: String,
    pub reach: Reach,
    /// The host's proctor version, from its probe.
    pub version: Option<String>,
    /// Its last answered list (refs already `HOST/REF`), kept while it does not answer.
    pub page: Option<RunsPage>,
}

/// The hosts of a cockpit of several; empty in a one-host cockpit (which then shows no
/// HOST column and no host lines: it is unchanged).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hosts {
    pub list: Vec<HostState>,
}

impl Hosts {
    pub fn new(names: &[String]) -> Hosts {
        Hosts {
            list: names
                .iter()
                .map(|n| HostState {
                    name: n.clone(),
                    reach: Reach::Connecting,
                    version: None,
                    page: None,
                })
                .collect(),
        }
    }

    /// Whether the cockpit follows several hosts.
    pub fn is_multi(&self) -> bool {
        !self.list.is_empty()
    }

    fn get_mut(&mut self, host: &str) -> Option<&mut HostState> {
        self.list.iter_mut().find(|h| h.name == host)
    }

    /// Whether taking this answer would change nothing.
    pub fn unchanged(&self, host: &str, result: &Result<RunsPage, String>) -> bool {
        let Some(h) = self.list.iter().find(|h| h.name == host) else {
            return true;
        };
        match result {
            Ok(p) => h.reach == Reach::Reachable && h.page.as_ref() == Some(p),
            Err(e) => matches!(&h.reach, Reach::Unreachable { error, .. }
                if *error == text::one_line(e, 300)),
        }
    }

    /// Takes one host's answer to its list poll at `now`.
    pub fn on_runs(&mut self, host: &str, result: Result<RunsPage, String>, now: DateTime<Utc>) {
        let Some(h) = self.get_mut(host) else {
            return;
        };
        match result {
            Ok(p) => {
                h.reach = Reach::Reachable;
                h.page = Some(p);
            }
            Err(e) => {
                let since = match &h.reach {
                    Reach::Unreachable { since, .. } => *since,
                    _ => now,
                };
                h.reach = Reach::Unreachable {
                    since,
                    error: text::one_line(&e, 300),
                };
            }
        }
    }

    pub fn on_version(&mut self, host: &str, version: String) {
        if let Some(h) = self.get_mut(host) {
            h.version = Some(text::one_line(&version, 40));
        }
    }

    /// Whether `run` (`HOST/REF`) belongs to a host that does not answer: its row is stale.
    pub fn stale(&self, run: &str) -> bool {
        let Some((host, _)) = split(run) else {
            return false;
        };
        self.list
            .iter()
            .any(|h| h.name == host && !matches!(h.reach, Reach::Reachable))
    }

    /// The one list of every host's runs (a host that does not answer keeps its last
    /// rows), in the hosts' order; its counts are the answering hosts' only (a stale run
    /// is never counted live), its total every row's.
    pub fn merged(&self) -> RunsPage {
        let mut items = Vec::new();
        let mut counts = Counts::default();
        let mut total = 0;
        for h in &self.list {
            let Some(p) = &h.page else { continue };
            items.extend(p.items.iter().cloned());
            if h.reach == Reach::Reachable {
                total += p.total;
                let c = p.counts;
                counts.live += c.live;
                counts.idle += c.idle;
                counts.stopped += c.stopped;
                counts.failed += c.failed;
                counts.lost += c.lost;
                counts.blocked += c.blocked;
                counts.waiting += c.waiting;
                counts.total += c.total;
            } else {
                total += p.items.len();
            }
        }
        RunsPage {
            items,
            total,
            counts,
        }
    }

    /// One line per host: `build  reachable · proctor 0.1.0 · 1 live · 0 idle · 3 runs`,
    /// `box  unreachable since 16:50:02Z (40s): <the error>`; and whether it is reachable.
    pub fn lines(&self, now: DateTime<Utc>) -> Vec<(String, bool)> {
        let w = self
            .list
            .iter()
            .map(|h| unicode_width::UnicodeWidthStr::width(h.name.as_str()))
            .max()
            .unwrap_or(0);
        self.list
            .iter()
            .map(|h| {
                let name = text::one_line(&h.name, 40);
                let pad = " "
                    .repeat(w.saturating_sub(unicode_width::UnicodeWidthStr::width(name.as_str())));
                let version = h
                    .version
                    .as_deref()
                    .map(|v| format!("proctor {v}"))
                    .unwrap_or_else(|| "version unknown".into());
                match &h.reach {
                    Reach::Connecting => (format!("{name}{pad}  connecting…"), false),
                    Reach::Reachable => {
                        let (live, idle, runs) = h
                            .page
                            .as_ref()
                            .map_or((0, 0, 0), |p| (p.counts.live, p.counts.idle, p.total));
                        (
                            format!(
                                "{name}{pad}  reachable · {version} · {live} live · {idle} idle \
                                 · {runs} runs"
                            ),
                            true,
                        )
                    }
                    Reach::Unreachable { since, error } => (
                        format!(
                            "{name}{pad}  unreachable since {} ({} ago): {}",
                            since.format("%H:%M:%SZ"),
                            super::data::ago(now, *since),
                            // The line names the host already: what ssh said comes first.
                            text::one_line(
                                error
                                    .strip_prefix(&format!(
                                        "the host {} cannot be reached: ",
                                        h.name
                                    ))
                                    .unwrap_or(error),
                                300
                            )
                        ),
                        false,
                    ),
                }
            })
            .collect()
    }

    /// When a line's text next changes with time alone (the "ago" of an unreachable host).
    pub fn next_clock_change(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.list
            .iter()
            .filter_map(|h| match &h.reach {
                Reach::Unreachable { .. } => Some(now + chrono::Duration::seconds(1)),
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::data::RunView;

    fn run(host: &str, n: u32, state: &str) -> RunView {
        serde_json::from_value(serde_json::json!({
            "ref": join(host, &format!("run-{n:04}")), "tool": "claude", "profile": "claude",
            "transport": "pipe", "workspace": "/w", "demo": true,
            "created_at": "2026-11-30T11:00:00.000Z", "state": state, "generation": 1,
        }))
        .unwrap()
    }

    fn page(items: Vec<RunView>) -> RunsPage {
        RunsPage {
            total: items.len(),
            counts: Counts::of(&items),
            items,
        }
    }

    /// Two hosts that both hold run-0001: both listed, each under its own host; a host
    /// that drops keeps its rows, stale and not counted live, says since when, and comes
    /// back at its next answer.
    #[test]
    fn two_hosts_one_list_and_a_host_that_drops() {
        let t0: DateTime<Utc> = "2026-12-03T16:50:00Z".parse().unwrap();
        let mut h = Hosts::new(&["build".into(), "local".into()]);
        assert!(h.is_multi());
        assert!(!Hosts::default().is_multi());
        assert!(
            h.lines(t0)
                .iter()
                .all(|(l, ok)| l.contains("connecting") && !ok)
        );
        h.on_runs("build", Ok(page(vec![run("build", 1, "running")])), t0);
        h.on_runs(
            "local",
            Ok(page(vec![
                run("local", 1, "idle"),
                run("local", 2, "stopped"),
            ])),
            t0,
        );
        h.on_version("build", "0.1.0".into());
        let m = h.merged();
        let refs: Vec<&str> = m.items.iter().map(|r| r.run_ref.as_str()).collect();
        assert_eq!(refs, ["build/run-0001", "local/run-0001", "local/run-0002"]);
        assert_eq!((m.counts.live, m.counts.idle, m.total), (1, 1, 3));
        assert_eq!(split("build/run-0001"), Some(("build", "run-0001")));
        assert_eq!(split("run-0001"), None);
        let lines = h.lines(t0);
        assert_eq!(
            lines[0],
            (
                "build  reachable · proctor 0.1.0 · 1 live · 0 idle · 1 runs".to_string(),
                true
            )
        );
        assert!(lines[1].0.starts_with("local  reachable · version unknown"));
        assert!(!h.stale("build/run-0001"));

        // build drops: its row stays, stale; nothing of it counts live.
        let t1 = t0 + chrono::Duration::seconds(5);
        h.on_runs(
            "build",
            Err("the host build cannot be reached: \x1b[31mrefused".into()),
            t1,
        );
        let (line, _) = h.lines(t1)[0].clone();
        assert!(!line.contains('\x1b'), "sanitised: {line:?}");
        assert!(line.ends_with("refused"), "{line}");
        assert!(!line.contains("cannot be reached"), "{line}");
        assert!(h.stale("build/run-0001"));
        assert!(!h.stale("local/run-0001"));
        let m = h.merged();
        assert_eq!(m.items.len(), 3, "its rows are kept");
        assert_eq!(m.counts.live, 0, "a stale run is never counted live");
        let t2 = t1 + chrono::Duration::seconds(40);
        h.on_runs("build", Err("again".into()), t2);
        let (line, ok) = h.lines(t2)[0].clone();
        assert!(!ok);
        assert!(
            line.starts_with("build  unreachable since 16:50:05Z (40s ago): again"),
            "{line}"
        );
        assert!(!line.contains('\x1b'));
        assert!(h.unchanged("build", &Err("again".into())));
        assert!(h.next_clock_change(t2).is_some());

        // It answers again: fresh, counted.
        h.on_runs("build", Ok(page(vec![run("build", 1, "running")])), t2);
        assert!(!h.stale("build/run-0001"));
        assert_eq!(h.merged().counts.live, 1);
        assert!(h.lines(t2)[0].1);
        assert!(h.next_clock_change(t2).is_none());
    }
}
