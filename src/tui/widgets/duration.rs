//! The snooze picker: until when a session is hidden from the operator's list.
//!
//! Presets (30 minutes, 1 hour, 4 hours, tomorrow 09:00, next Monday 09:00), or a typed
//! duration (`45m`, `2h`, `3d`, `1w`, `1h30m`, `2 hours`), or an RFC 3339 time
//! (`2026-12-01T09:00:00Z`). The result is an RFC 3339 UTC instant in the future, as
//! `POST /runs/{ref}/snooze` takes it. Wall-clock presets use the time zone of the `now`
//! given (the operator's local zone in the cockpit); relative ones count from that `now`,
//! which the cockpit refreshes with [`SnoozePicker::set_now`].

use std::fmt::Display;

use chrono::{DateTime, Datelike, Duration, NaiveTime, SecondsFormat, TimeZone, Utc};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::input::{Edit, TextInput};
use super::{Dialog, Outcome, centered, frame_dialog, hint_line, is_press, row_style, typed_char};
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];

/// The longest snooze a typed duration gives.
pub const MAX_SNOOZE_DAYS: i64 = 366;

/// A ready-made snooze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Minutes30,
    Hour1,
    Hours4,
    /// Tomorrow at 09:00, local time.
    Tomorrow,
    /// Next Monday at 09:00, local time.
    NextWeek,
}

impl Preset {
    pub const ALL: [Preset; 5] = [
        Preset::Minutes30,
        Preset::Hour1,
        Preset::Hours4,
        Preset::Tomorrow,
        Preset::NextWeek,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Preset::Minutes30 => "30 minutes",
            Preset::Hour1 => "1 hour",
            Preset::Hours4 => "4 hours",
            Preset::Tomorrow => "tomorrow 09:00",
            Preset::NextWeek => "next week (Monday 09:00)",
        }
    }

    /// When the snooze ends, from `now`.
    pub fn until<Tz: TimeZone>(self, now: &DateTime<Tz>) -> DateTime<Utc> {
        let utc = now.with_timezone(&Utc);
        match self {
            Preset::Minutes30 => utc + Duration::minutes(30),
            Preset::Hour1 => utc + Duration::hours(1),
            Preset::Hours4 => utc + Duration::hours(4),
            Preset::Tomorrow => local_nine(now, 1),
            Preset::NextWeek => {
                let days = 7 - i64::from(now.weekday().num_days_from_monday());
                local_nine(now, days)
            }
        }
    }
}

/// 09:00 local time `days` days after `now`'s date. A 09:00 that a clock change skips
/// becomes 10:00; one that happens twice is the first.
fn local_nine<Tz: TimeZone>(now: &DateTime<Tz>, days: i64) -> DateTime<Utc> {
    let nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap_or_default();
    let date = now.date_naive() + Duration::days(days);
    let tz = now.timezone();
    let at = |t: NaiveTime| tz.from_local_datetime(&date.and_time(t)).earliest();
    at(nine)
        .or_else(|| at(nine + Duration::hours(1)))
        .map(|dt| dt.with_timezone(&Utc))
        // No zone skips two hours; still, never panic: fall back to 09:00 UTC.
        .unwrap_or_else(|| Utc.from_utc_datetime(&date.and_time(nine)))
}

/// Parses a duration: numbers with units m/min/minutes, h/hours, d/days, w/weeks, e.g.
/// `45m`, `2h`, `1h30m`, `3 days`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "not a duration: {:?}; write e.g. 45m, 2h, 1h30m, 3d, 1w",
            crate::text::one_line(text, 40)
        )
    };
    let mut total = Duration::zero();
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = rest[digits..].trim_start();
        let letters = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let unit = &rest[..letters];
        rest = rest[letters..].trim_start();
        let minutes_per = match unit.to_ascii_lowercase().as_str() {
            "m" | "min" | "mins" | "minute" | "minutes" => 1,
            "h" | "hr" | "hrs" | "hour" | "hours" => 60,
            "d" | "day" | "days" => 60 * 24,
            "w" | "wk" | "week" | "weeks" => 60 * 24 * 7,
            _ => return Err(bad()),
        };
        let minutes = n
            .checked_mul(minutes_per)
            .filter(|m| *m <= MAX_SNOOZE_DAYS * 24 * 60)
            .ok_or_else(|| format!("a snooze lasts at most {MAX_SNOOZE_DAYS} days"))?;
        total += Duration::minutes(minutes);
    }
    if total < Duration::minutes(1) {
        return Err("a snooze lasts at least a minute".to_owned());
    }
    if total > Duration::days(MAX_SNOOZE_DAYS) {
        return Err(format!("a snooze lasts at most {MAX_SNOOZE_DAYS} days"));
    }
    Ok(total)
}

/// When a typed snooze ends: a duration from `now`, or an RFC 3339 time after `now`.
pub fn parse_until<Tz: TimeZone>(text: &str, now: &DateTime<Tz>) -> Result<DateTime<Utc>, String> {
    let now = now.with_timezone(&Utc);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(
            "type a duration (45m, 2h, 3d) or a time (2026-12-01T09:00:00Z), or choose a preset"
                .to_owned(),
        );
    }
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) && trimmed.contains('-') {
        let at = DateTime::parse_from_rfc3339(trimmed)
            .map_err(|e| {
                format!(
                    "not an RFC 3339 time ({e}); write e.g. 2026-12-01T09:00:00Z or \
                     2026-12-01T09:00:00+01:00"
                )
            })?
            .with_timezone(&Utc);
        if at <= now {
            return Err("that time is in the past".to_owned());
        }
        return Ok(at);
    }
    parse_duration(trimmed).map(|d| now + d)
}

/// An instant as the snooze API takes it: RFC 3339, UTC, whole seconds.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The snooze picker.
#[derive(Debug, Clone)]
pub struct SnoozePicker<Tz: TimeZone> {
    title: String,
    now: DateTime<Tz>,
    /// 0..5 a preset, 5 the typed field.
    selected: usize,
    input: TextInput,
    error: Option<String>,
}

const CUSTOM: usize = Preset::ALL.len();

impl<Tz: TimeZone> SnoozePicker<Tz>
where
    Tz::Offset: Display,
{
    /// `title` names the session ("Snooze run-0003"); `now` is the current time in the
    /// operator's zone (`chrono::Local::now()`).
    pub fn new(title: impl Into<String>, now: DateTime<Tz>) -> SnoozePicker<Tz> {
        SnoozePicker {
            title: title.into(),
            now,
            selected: 0,
            input: TextInput::default(),
            error: None,
        }
    }

    /// Moves the clock the presets and durations count from.
    pub fn set_now(&mut self, now: DateTime<Tz>) {
        self.now = now;
    }

    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn choice(&self) -> Result<DateTime<Utc>, String> {
        match Preset::ALL.get(self.selected) {
            Some(p) => Ok(p.until(&self.now)),
            None => parse_until(self.input.value(), &self.now),
        }
    }

    fn local(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.now.timezone())
            .format("%a %d %b %H:%M")
            .to_string()
    }
}

impl<Tz: TimeZone> Dialog for SnoozePicker<Tz>
where
    Tz::Offset: Display,
{
    type Output = String;

    fn handle_paste(&mut self, text: &str) {
        self.selected = CUSTOM;
        if self.input.insert_str(text) {
            self.error = None;
        }
    }

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<String> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        if typed_char(key).is_some() {
            self.selected = CUSTOM;
        }
        if self.selected == CUSTOM {
            match self.input.handle_key(key) {
                Edit::Changed => {
                    self.error = None;
                    return Outcome::Continue;
                }
                Edit::Moved => return Outcome::Continue,
                Edit::Ignored => {}
            }
        }
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Confirm) => match self.choice() {
                Ok(at) => Outcome::Submit(rfc3339(at)),
                Err(e) => {
                    self.error = Some(e);
                    Outcome::Continue
                }
            },
            Some(Action::Escape) => Outcome::Cancel,
            Some(Action::Up | Action::FocusPrev) => {
                self.selected = self.selected.saturating_sub(1);
                Outcome::Continue
            }
            Some(Action::Down | Action::FocusNext) => {
                self.selected = (self.selected + 1).min(CUSTOM);
                Outcome::Continue
            }
            Some(Action::Top) => {
                self.selected = 0;
                Outcome::Continue
            }
            Some(Action::Bottom) => {
                self.selected = CUSTOM;
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let width = screen.width.saturating_sub(4).clamp(30, 64);
        let rect = centered(screen, width, 13);
        let inner = frame_dialog(frame, rect, &self.title, theme).inner(Margin::new(1, 0));
        if inner.height < 10 {
            return;
        }
        let w = usize::from(inner.width);
        frame.render_widget(
            Paragraph::new(Span::styled(
                "Hide this session from your list until:",
                theme.style(Role::Text),
            )),
            Rect::new(inner.x, inner.y, inner.width, 1),
        );
        for (i, p) in Preset::ALL.iter().enumerate() {
            let selected = self.selected == i;
            let style = row_style(theme, Role::Text, selected);
            let label = format!("{} {:<26}", if selected { "▸" } else { " " }, p.label());
            let when = self.local(p.until(&self.now));
            let line = Line::from(vec![
                Span::styled(label, style),
                Span::styled(when, row_style(theme, Role::Dim, selected)),
            ])
            .style(style);
            frame.render_widget(
                Paragraph::new(line),
                Rect::new(inner.x, inner.y + 2 + i as u16, inner.width, 1),
            );
        }
        let y = inner.y + 2 + CUSTOM as u16;
        let on_custom = self.selected == CUSTOM;
        let prompt = format!("{} or type: ", if on_custom { "▸" } else { " " });
        frame.render_widget(
            Paragraph::new(Span::styled(
                prompt.clone(),
                row_style(theme, Role::Text, on_custom),
            )),
            Rect::new(inner.x, y, 12, 1),
        );
        self.input.render(
            frame,
            Rect::new(inner.x + 12, y, inner.width.saturating_sub(12), 1),
            theme.style(Role::Input),
            on_custom,
        );
        // Under the field: the error, or what the typed value means.
        let below = match (&self.error, on_custom && !self.input.is_empty()) {
            (Some(e), _) => Some(Span::styled(
                crate::text::one_line(e, w.saturating_sub(2)),
                theme.style(Role::Error),
            )),
            (None, true) => Some(match parse_until(self.input.value(), &self.now) {
                Ok(at) => Span::styled(format!("until {}", self.local(at)), theme.style(Role::Dim)),
                Err(e) => Span::styled(
                    crate::text::one_line(&e, w.saturating_sub(2)),
                    theme.style(Role::Dim),
                ),
            }),
            (None, false) => None,
        };
        if let Some(span) = below {
            frame.render_widget(
                Paragraph::new(Line::from(vec![Span::raw("  "), span])),
                Rect::new(inner.x, y + 1, inner.width, 1),
            );
        }
        let hints = hint_line(
            &[
                (
                    keymap
                        .key_for(CONTEXTS, Action::Confirm)
                        .unwrap_or_default(),
                    "snooze",
                ),
                ("up/down".to_owned(), "choose"),
                (
                    keymap.key_for(CONTEXTS, Action::Escape).unwrap_or_default(),
                    "cancel",
                ),
            ],
            theme,
        );
        frame.render_widget(
            Paragraph::new(hints),
            Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use chrono::FixedOffset;
    use ratatui::crossterm::event::KeyCode;
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key};
    use super::*;

    /// Tuesday 10 March 2026, 14:05 at UTC+01:00.
    fn now() -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339("2026-03-10T14:05:00+01:00").unwrap()
    }

    #[test]
    fn presets() {
        let n = now();
        let got: Vec<String> = Preset::ALL.iter().map(|p| rfc3339(p.until(&n))).collect();
        assert_eq!(
            got,
            [
                "2026-03-10T13:35:00Z",
                "2026-03-10T14:05:00Z",
                "2026-03-10T17:05:00Z",
                "2026-03-11T08:00:00Z",
                "2026-03-16T08:00:00Z",
            ]
        );
        // On a Monday, next week is the Monday after; on a Sunday, the next day.
        let monday = DateTime::parse_from_rfc3339("2026-03-09T08:00:00-05:00").unwrap();
        assert_eq!(
            rfc3339(Preset::NextWeek.until(&monday)),
            "2026-03-16T14:00:00Z"
        );
        let sunday = DateTime::parse_from_rfc3339("2026-03-15T23:30:00+00:00").unwrap();
        assert_eq!(
            rfc3339(Preset::NextWeek.until(&sunday)),
            "2026-03-16T09:00:00Z"
        );
        // Tomorrow 09:00 late at night is the next calendar day, not nine hours later.
        let late = DateTime::parse_from_rfc3339("2026-12-31T23:59:00+09:00").unwrap();
        assert_eq!(
            rfc3339(Preset::Tomorrow.until(&late)),
            "2027-01-01T00:00:00Z"
        );
    }

    #[test]
    fn typed_durations_and_times() {
        let n = now();
        let ok: &[(&str, &str)] = &[
            ("45m", "2026-03-10T13:50:00Z"),
            ("2h", "2026-03-10T15:05:00Z"),
            ("3d", "2026-03-13T13:05:00Z"),
            ("1w", "2026-03-17T13:05:00Z"),
            ("1h30m", "2026-03-10T14:35:00Z"),
            (" 2 hours 15 min ", "2026-03-10T15:20:00Z"),
            ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
            ("2026-03-10T15:00:00+01:00", "2026-03-10T14:00:00Z"),
            ("366d", "2027-03-11T13:05:00Z"),
        ];
        for (text, want) in ok {
            let got = parse_until(text, &n).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(rfc3339(got), *want, "{text}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "type a duration"),
            ("soon", "not a duration"),
            ("45", "not a duration"),
            ("45x", "not a duration"),
            ("m", "not a duration"),
            ("-5m", "not a duration"),
            ("0m", "at least a minute"),
            ("367d", "at most 366 days"),
            ("99999999999999999999w", "not a duration"),
            ("99999999999999999w", "at most 366 days"),
            ("9999999999999w", "at most 366 days"),
            ("2020-01-01T00:00:00Z", "in the past"),
            ("2026-03-10T14:05:00+01:00", "in the past"),
            ("2026-13-01T00:00:00Z", "not an RFC 3339 time"),
            ("2026-12-01 09:00", "not an RFC 3339 time"),
        ];
        for (text, needle) in bad {
            let e = parse_until(text, &n).expect_err(text);
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn choosing() {
        let km = Keymap::defaults();
        let mut p = SnoozePicker::new("Snooze run-0003", now());
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("2026-03-10T13:35:00Z".to_owned())
        );
        p.handle_key(&key(KeyCode::Down), &km);
        p.handle_key(&ch('j'), &km);
        p.handle_key(&ch('k'), &km);
        // j and k typed: they went to the field (a typed character selects it).
        assert_eq!(p.selected, CUSTOM);
        assert_eq!(p.input.value(), "jk");
        assert_eq!(p.handle_key(&key(KeyCode::Enter), &km), Outcome::Continue);
        assert!(p.error().unwrap().contains("not a duration"));
        p.handle_key(&key(KeyCode::Up), &km);
        p.handle_key(&key(KeyCode::Up), &km);
        assert_eq!(p.selected, 3);
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("2026-03-11T08:00:00Z".to_owned())
        );
        let mut p = SnoozePicker::new("Snooze", now());
        for c in "90m".chars() {
            p.handle_key(&ch(c), &km);
        }
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("2026-03-10T14:35:00Z".to_owned())
        );
        // The clock moves: relative choices follow.
        p.set_now(now() + Duration::hours(1));
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit("2026-03-10T15:35:00Z".to_owned())
        );
        assert_eq!(p.handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
    }

    #[test]
    fn snapshots_and_colours() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let p = SnoozePicker::new("Snooze run-0003 “fix flaky test”", now());
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            insta::assert_snapshot!(format!("snooze_{w}x{h}"), t.backend());
            let buf = t.backend().buffer();
            let (x, y) = find(buf, "▸ 30 minutes").unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
            let (x, y) = find(buf, "Wed 11 Mar 09:00").unwrap();
            assert_eq!(buf[(x, y)].fg, Color::DarkGray);
        }
        let mut p = SnoozePicker::new("Snooze run-0003", now());
        for c in "2h".chars() {
            p.handle_key(&ch(c), &km);
        }
        let t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
        assert!(find(t.backend().buffer(), "until Tue 10 Mar 16:05").is_some());
        insta::assert_snapshot!("snooze_typed_80x24", t.backend());
        p.handle_key(&ch('x'), &km);
        p.handle_key(&key(KeyCode::Enter), &km);
        let t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "not a duration").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::Red);
        insta::assert_snapshot!("snooze_error_80x24", t.backend());
    }

    #[test]
    fn hostile_paste_renders_harmlessly() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let mut p = SnoozePicker::new("Snooze \u{202e}evil", now());
        p.handle_paste("\x1b[31m2h\u{202e}");
        p.handle_key(&key(KeyCode::Enter), &km);
        let t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
        assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!("snooze_hostile_80x24", t.backend());
    }
}
