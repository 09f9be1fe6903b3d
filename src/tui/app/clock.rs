//! The cockpit's clock: the texts that change with time alone (a session's age, "output 4s
//! ago", a running factory step's elapsed time, who has held a rig's lock for how long, a
//! receipt's time shown without its date while it is today's), and the snoozes that come due.
//!
//! Nothing polls the time: after each frame the event loop asks [`App::next_clock_change`]
//! for the next instant one of those texts takes another value, sleeps until then, and calls
//! [`App::on_clock`], which marks the frame dirty. A cockpit whose every age is counted in
//! hours is drawn again at the next hour, not every second.

use chrono::{DateTime, Duration, Local, TimeZone, Utc};

use super::App;
use crate::api::runs::State as RunState;
use crate::tui::data::instant;

/// The next instant after `now` at which [`crate::tui::data::ago`]`(now, then)` reads
/// differently: the next second while under a minute, the next minute under an hour, and so
/// on. A `then` in the future reads `0s` until a second after it.
pub fn next_ago_change(now: DateTime<Utc>, then: DateTime<Utc>) -> DateTime<Utc> {
    let secs = (now - then).num_seconds();
    if secs < 0 || now < then {
        return then + Duration::seconds(1);
    }
    let unit = match secs {
        0..=59 => 1,
        60..=3599 => 60,
        3600..=86_399 => 3600,
        _ => 86_400,
    };
    then + Duration::seconds((secs / unit + 1) * unit)
}

/// The next instant after `now` at which a running factory step's time since `then`
/// ([`crate::tui::ui::factory::running_clock`]: seconds in its first minute, then whole
/// minutes) reads differently.
pub fn next_step_change(now: DateTime<Utc>, then: DateTime<Utc>) -> DateTime<Utc> {
    let secs = (now - then).num_seconds().max(0);
    let unit = if secs < 60 { 1 } else { 60 };
    then + Duration::seconds((secs / unit + 1) * unit)
}

/// The next instant after `now` at which `ago(now, then)` changes unit (`59s` to `1m`, `59m`
/// to `1h`, …): the only instants a text that does not fit now (it only grows within a unit)
/// may fit again.
pub fn next_unit_change(now: DateTime<Utc>, then: DateTime<Utc>) -> DateTime<Utc> {
    let secs = (now - then).num_seconds();
    let edge = match secs {
        ..=59 => 60,
        60..=3599 => 3600,
        _ => 86_400 * ((secs / 86_400) + 1),
    };
    then + Duration::seconds(edge)
}

/// The next local midnight after `now` (a receipt of today shows its time alone).
fn next_midnight(now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = now.with_timezone(&Local);
    let tomorrow = local.date_naive().succ_opt()?.and_hms_opt(0, 0, 0)?;
    Local
        .from_local_datetime(&tomorrow)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
}

impl App {
    /// The next instant after [`App::now`] (the time of the last frame) at which something
    /// the cockpit shows changes with time alone; `None` when nothing shown does.
    pub fn next_clock_change(&self) -> Option<DateTime<Utc>> {
        let now = self.now;
        let mut next: Option<DateTime<Utc>> = None;
        let mut at = |t: DateTime<Utc>| {
            if t > now && next.is_none_or(|n| t < n) {
                next = Some(t);
            }
        };
        // An unreachable host's line says how long ago it stopped answering.
        if let Some(t) = self.hosts.next_clock_change(now) {
            at(t);
        }
        let s = &self.sessions;
        let sources = crate::tui::ui::sessions::sources_shown(self);
        for (k, &i) in s.view.iter().enumerate() {
            let Some(r) = s.runs.get(i) else { continue };
            // The AGE column.
            if let Some(t) = instant(&r.created_at) {
                at(next_ago_change(now, t));
            }
            // "running · output 4s ago": every second while the row shows it; a row too
            // narrow for it shows the state's word, which the clock does not change (until
            // the text changes unit and may fit again).
            if r.state == RunState::Running
                && let Some(t) = r.output.as_ref().and_then(|o| o.last_at.as_deref())
                && let Some(t) = instant(t)
            {
                if sources.get(k).copied().unwrap_or(true) {
                    at(next_ago_change(now, t));
                } else {
                    at(next_unit_change(now, t));
                }
            }
        }
        // A snooze that comes due shows its run again (or drops its mark).
        for r in &s.runs {
            if let Some(u) = r.snoozed_until.as_deref().and_then(instant) {
                at(u);
            }
        }
        if let Some(Ok(runs)) = &self.factory.runs {
            for step in runs.iter().flat_map(|r| &r.steps) {
                if step.elapsed_ms.is_none()
                    && step.state == "running"
                    && let Some(t) = instant(&step.started_at)
                {
                    at(next_step_change(now, t));
                }
            }
        }
        for rig in self.rigs.listing.items() {
            if let Some(t) = rig.lock.as_ref().and_then(|l| instant(&l.since)) {
                at(next_ago_change(now, t));
            }
        }
        if !self.receipts.listing.items().is_empty()
            && let Some(t) = next_midnight(now)
        {
            at(t);
        }
        next
    }

    /// The clock reached `now` (the instant [`App::next_clock_change`] named, or later): the
    /// next frame shows the texts that changed; a snooze that came due since the last frame
    /// shows its run again.
    pub fn on_clock(&mut self, now: DateTime<Utc>) {
        let before = self.now;
        let due = self.sessions.runs.iter().any(|r| {
            r.snoozed_until
                .as_deref()
                .and_then(instant)
                .is_some_and(|u| u > before && u <= now)
        });
        self.now = now;
        if due {
            self.refilter();
        }
        self.dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::data::ago;

    fn at(s: &str) -> DateTime<Utc> {
        instant(s).unwrap()
    }

    /// The instant named is the first at which `ago` reads differently, in each unit.
    #[test]
    fn the_next_change_is_when_the_text_changes() {
        let then = at("2026-11-30T12:00:00.300Z");
        for (now, next) in [
            ("2026-11-30T12:00:00.500Z", "2026-11-30T12:00:01.300Z"),
            ("2026-11-30T12:00:59.400Z", "2026-11-30T12:01:00.300Z"),
            ("2026-11-30T12:01:00.400Z", "2026-11-30T12:02:00.300Z"),
            ("2026-11-30T13:30:00.000Z", "2026-11-30T14:00:00.300Z"),
            ("2026-12-02T13:30:00.000Z", "2026-12-03T12:00:00.300Z"),
            ("2026-11-30T12:00:00.100Z", "2026-11-30T12:00:01.300Z"),
        ] {
            let (now, next) = (at(now), at(next));
            assert_eq!(next_ago_change(now, then), next, "now {now}");
            let just_before = next - Duration::milliseconds(1);
            assert_eq!(ago(just_before, then), ago(now, then), "now {now}");
            assert_ne!(ago(next, then), ago(now, then), "now {now}");
        }
        // A running step: every second in its first minute, then every minute.
        let now = at("2026-11-30T12:00:42.000Z");
        assert_eq!(next_step_change(now, then), at("2026-11-30T12:00:42.300Z"));
        let now = at("2026-11-30T12:01:05.000Z");
        assert_eq!(next_step_change(now, then), at("2026-11-30T12:02:00.300Z"));
        // A source that does not fit: when its unit changes.
        assert_eq!(next_unit_change(now, then), at("2026-11-30T13:00:00.300Z"));
        let now = at("2026-11-30T12:00:05.000Z");
        assert_eq!(next_unit_change(now, then), at("2026-11-30T12:01:00.300Z"));
    }

    /// A cockpit whose sessions are hours old wakes at the next hour, not every second; a
    /// running session's "output 4s ago" wakes it at the next second.
    #[test]
    fn the_clock_wakes_for_what_is_shown() {
        let mut app = super::super::tests::app_with(Vec::new());
        app.now = at("2026-11-30T15:00:00.000Z");
        assert_eq!(
            app.next_clock_change(),
            None,
            "nothing shown changes with time"
        );
        let run = |state: &str, out: Option<&str>| -> crate::tui::data::RunView {
            let mut v = serde_json::json!({
                "ref": "run-0001", "tool": "claude", "profile": "claude", "transport": "pty",
                "workspace": "/w", "demo": true, "created_at": "2026-11-30T11:00:00.500Z",
                "state": state, "generation": 1,
            });
            if let Some(t) = out {
                v["output"] = serde_json::json!({"first_seq": 1, "next_seq": 2, "bytes": 1,
                    "last_at": t});
            }
            serde_json::from_value(v).unwrap()
        };
        app.sessions.runs = vec![run("stopped", None)];
        app.refilter();
        assert_eq!(
            app.next_clock_change(),
            Some(at("2026-11-30T15:00:00.500Z"))
        );
        app.now = at("2026-11-30T15:00:00.600Z");
        assert_eq!(
            app.next_clock_change(),
            Some(at("2026-11-30T16:00:00.500Z"))
        );
        app.sessions.runs = vec![run("running", Some("2026-11-30T15:00:00.250Z"))];
        app.refilter();
        // A list wide enough for "running · output 0s ago": the next second.
        app.areas.sessions = ratatui::layout::Rect::new(0, 0, 120, 10);
        assert_eq!(crate::tui::ui::sessions::sources_shown(&app), vec![true]);
        assert_eq!(
            app.next_clock_change(),
            Some(at("2026-11-30T15:00:01.250Z"))
        );
        // A list that shows the state's word alone: not every second, but when "59s" becomes
        // "1m" (a shorter text that may fit).
        app.areas.sessions = ratatui::layout::Rect::new(0, 0, 30, 10);
        assert_eq!(crate::tui::ui::sessions::sources_shown(&app), vec![false]);
        assert_eq!(
            app.next_clock_change(),
            Some(at("2026-11-30T15:01:00.250Z"))
        );
        app.areas.sessions = ratatui::layout::Rect::new(0, 0, 120, 10);
        app.dirty = false;
        app.on_clock(at("2026-11-30T15:00:01.300Z"));
        assert!(app.dirty, "the clock's change is drawn");
    }
}
