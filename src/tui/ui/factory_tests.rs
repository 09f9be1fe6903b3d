//! The factory runs as session groups in the Sessions view (issue 16) at 80×24 and 160×48:
//! a header row per run with its phase or outcome in its role (completed like passed,
//! rejected and failed like failed, running like running), a tree of its steps; a failed
//! poll says the state is unknown and shows no run heard before; the sessions' rows, their
//! selection and keys stay as they were; server strings drawn as markers.

use super::tests::{HOSTILE_NAME, SIZES, ch, draw, find_in, fixture_app, text};
use crate::api::factory::FactoryRun;
use crate::auth::Role as TokenRole;
use crate::tui::app::{App, Msg};
use crate::tui::role::Role;
use crate::tui::theme::Theme;
use serde_json::{Value, json};

fn step(role: &str, tool: &str, state: &str, ms: Option<u64>, verdict: Option<&str>) -> Value {
    json!({"role": role, "tool": tool, "state": state,
        "started_at": "2026-11-30T11:58:00.000Z", "elapsed_ms": ms, "verdict": verdict})
}

fn run(id: &str, status: &str, phase: &str, steps: Vec<Value>, extra: Value) -> FactoryRun {
    let mut v = json!({
        "format": "proctor-factory-run/1", "id": id, "status": status, "phase": phase,
        "started_at": "2026-11-30T11:50:00.000Z", "workspace": "/home/op/wt/feature",
        "task_sha256": "ab".repeat(32),
        "worker": {"tool": "claude", "profile": "claude"},
        "reviewer": {"tool": "codex", "profile": "codex"},
        "timeout_ms": 600_000, "steps": steps, "reachable_after": 0,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

/// A run in its first review (the reviewer still running: its time from its start).
fn in_review() -> FactoryRun {
    run(
        "fac-0003",
        "running",
        "review",
        vec![
            step("worker", "claude", "done", Some(42_000), None),
            json!({"role": "review-1", "tool": "codex", "state": "running",
                "started_at": "2026-11-30T11:59:30.000Z"}),
        ],
        json!({"reachable_after": 2, "provider_bound_ms": 1_770_000,
            "candidate": "3f2a9c0d1e4b5a69"}),
    )
}

/// Two REQUEST_CHANGES: rejected, exit 3.
fn rejected() -> FactoryRun {
    run(
        "fac-0002",
        "rejected",
        "done",
        vec![
            step("worker", "claude", "done", Some(42_000), None),
            step(
                "review-1",
                "codex",
                "done",
                Some(65_000),
                Some("REQUEST_CHANGES"),
            ),
            step("repair", "claude", "done", Some(125_000), None),
            step(
                "review-2",
                "codex",
                "done",
                Some(51_000),
                Some("REQUEST_CHANGES"),
            ),
        ],
        json!({"exit_code": 3, "candidate": "9d4c2b1a0f9e8d7c"}),
    )
}

/// The worker timed out: failed with its code and message (hostile, from the server).
fn failed() -> FactoryRun {
    run(
        "fac-0001",
        "failed",
        "done",
        vec![step("worker", "claude", "timed_out", Some(600_000), None)],
        json!({"exit_code": 1, "error": {"code": "worker_timed_out",
            "message": format!("the worker did not end within 10:00 {HOSTILE_NAME}")}}),
    )
}

fn completed() -> FactoryRun {
    run(
        "fac-0004",
        "completed",
        "done",
        vec![
            step("worker", "claude", "done", Some(30_000), None),
            step("review-1", "codex", "done", Some(20_000), Some("APPROVE")),
        ],
        json!({"exit_code": 0}),
    )
}

fn app_with(runs: Vec<FactoryRun>) -> App {
    let mut app = fixture_app(TokenRole::Write, Theme::default_theme());
    app.on_msg(Msg::Factory(Ok(runs)));
    app
}

#[test]
fn each_state_as_a_group_at_both_sizes() {
    for (name, r, words) in [
        (
            "in_review",
            in_review(),
            &[
                "fac-0003",
                "factory",
                "review",
                "├ worker",
                "claude",
                "0:42",
                "review-1",
            ][..],
        ),
        (
            "rejected",
            rejected(),
            &[
                "fac-0002",
                "rejected (exit 3)",
                "├ worker",
                "REQUEST_CHANGES",
            ][..],
        ),
        (
            "failed",
            failed(),
            &["fac-0001", "failed: worker_timed_out", "timed_out", "10:00"][..],
        ),
    ] {
        for (w, h) in SIZES {
            let mut app = app_with(vec![r.clone()]);
            let t = draw(&mut app, w, h);
            crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
            let s = text(&t);
            // Short of room the sessions come first: the group's header row at least.
            let shown = if w >= 160 { words.len() } else { 2 };
            for word in &words[..shown] {
                assert!(s.contains(word), "{name} {w}x{h}: {word}: {s}");
            }
            // The sessions are still listed, the focused one selected.
            assert!(s.contains("run-0001"), "{s}");
            assert!(s.contains("Sessions"), "{s}");
            insta::assert_snapshot!(format!("factory_{name}_{w}x{h}"), s);
        }
    }
}

#[test]
fn the_whole_tree_of_a_rejected_run_when_there_is_room() {
    let mut app = app_with(vec![rejected()]);
    let s = text(&draw(&mut app, 160, 48));
    for row in [
        "├ worker",
        "├ review-1",
        "├ repair",
        "└ review-2",
        "2:05",
        "claude → codex",
    ] {
        assert!(s.contains(row), "{row}: {s}");
    }
    // A running run says its upper bound of provider time, never an estimate.
    let mut app = app_with(vec![in_review()]);
    let s = text(&draw(&mut app, 160, 48));
    // (29:30, rounded up to the minute: still an upper bound.)
    assert!(s.contains("≤ 30m provider time"), "{s}");
    assert!(s.contains("└ review-1"), "{s}");
    // Its step in progress: 0:30 since the start the server reported.
    assert!(s.contains("0:30"), "{s}");
}

/// The server counts a running run's provider bound down at every poll: an answer that
/// changes only that, within the minute the row shows, is taken but draws no frame; one
/// that reads differently (the next minute, a step's change) does.
#[test]
fn a_factory_poll_that_changes_no_row_draws_nothing() {
    let mut app = app_with(vec![in_review()]);
    let with_bound = |ms: u64| {
        let mut r = in_review();
        r.provider_bound_ms = ms;
        r
    };
    app.dirty = false;
    app.on_msg(Msg::Factory(Ok(vec![with_bound(1_769_000)])));
    assert!(!app.dirty, "29:29 left reads 30m as 29:30 did");
    assert_eq!(
        app.factory.runs.as_ref().unwrap().as_ref().unwrap()[0].provider_bound_ms,
        1_769_000,
        "the answer is taken"
    );
    app.on_msg(Msg::Factory(Ok(vec![with_bound(1_740_000)])));
    assert!(app.dirty, "29m: a frame");
    assert!(text(&draw(&mut app, 160, 48)).contains("≤ 29m provider time"));
    app.dirty = false;
    let mut done = with_bound(1_740_000);
    done.steps[1].state = "done".into();
    done.steps[1].elapsed_ms = Some(5_000);
    app.on_msg(Msg::Factory(Ok(vec![done])));
    assert!(app.dirty, "a step's change: a frame");
}

/// A step in progress counts seconds in its first minute, then whole minutes: its clock
/// wakes the cockpit every second, then once a minute (at the minute it reads the next).
#[test]
fn a_running_step_counts_seconds_then_minutes() {
    let mut app = app_with(vec![in_review()]);
    // Only the factory's clock: no session's age.
    app.sessions.runs.clear();
    app.refilter();
    let at = |s: &str| crate::tui::data::instant(s).unwrap();
    // Started 11:59:30.
    app.now = at("2026-11-30T11:59:55.500Z");
    assert!(text(&draw(&mut app, 160, 48)).contains("0:25"));
    app.now = at("2026-11-30T11:59:55.500Z");
    assert_eq!(
        app.next_clock_change(),
        Some(at("2026-11-30T11:59:56.000Z"))
    );
    app.now = at("2026-11-30T12:01:35.000Z");
    let s = text(&draw(&mut app, 160, 48));
    assert!(s.contains("running         2m"), "{s}");
    app.now = at("2026-11-30T12:01:35.000Z");
    assert_eq!(
        app.next_clock_change(),
        Some(at("2026-11-30T12:02:30.000Z"))
    );
    app.now = at("2026-11-30T13:04:35.000Z");
    assert!(text(&draw(&mut app, 160, 48)).contains("1h05m"));
}

#[test]
fn every_group_at_once_folds_the_finished_ones_that_do_not_fit() {
    for (w, h) in SIZES {
        let mut app = app_with(vec![failed(), rejected(), in_review(), completed()]);
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        // The running one first.
        assert!(s.contains("fac-0003  factory  review"), "{s}");
        if w >= 160 {
            // Every tree when there is room.
            assert!(s.contains("├ worker"), "{s}");
            for id in ["fac-0001", "fac-0002", "fac-0004"] {
                assert!(s.contains(id), "{id}: {s}");
            }
        } else {
            // Short of room: the outcomes' header rows, then the count of the rest.
            assert!(!s.contains("├ worker"), "{s}");
            assert!(s.contains("more factory run"), "{s}");
        }
        insta::assert_snapshot!(format!("factory_all_{w}x{h}"), s);
    }
}

#[test]
fn outcomes_and_verdicts_are_drawn_in_their_roles() {
    let theme = Theme::default_theme();
    let mut app = app_with(vec![failed(), rejected(), in_review(), completed()]);
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let area = app.areas.sessions;
    // The running run's phase, after its header's `factory` (a session may say review).
    let (x, y) = find_in(buf, area, "factory  review").unwrap();
    assert_eq!(Some(buf[(x + 9, y)].fg), theme.style(Role::StateRunning).fg);
    for (word, role) in [
        ("rejected (exit 3)", Role::StateFailed),
        ("failed: worker_timed_out", Role::StateFailed),
        ("completed", Role::GatePassed),
        ("APPROVE", Role::GatePassed),
        ("REQUEST_CHANGES", Role::StateFailed),
    ] {
        let (x, y) = find_in(buf, area, word).unwrap_or_else(|| panic!("{word}"));
        assert_eq!(Some(buf[(x, y)].fg), theme.style(role).fg, "{word}");
    }
    // Completed never looks like failed.
    assert_ne!(
        theme.style(Role::GatePassed).fg,
        theme.style(Role::StateFailed).fg
    );
}

#[test]
fn a_failed_poll_shows_the_state_unknown_not_the_runs_heard_before() {
    for (w, h) in SIZES {
        let mut app = app_with(vec![rejected()]);
        assert!(text(&draw(&mut app, w, h)).contains("fac-0002"));
        app.on_msg(Msg::Factory(Err("the server does not answer".into())));
        let s = text(&draw(&mut app, w, h));
        assert!(!s.contains("fac-0002"), "stale: {s}");
        assert!(s.contains("factory  unknown: the server does not"), "{s}");
        // No factory run: no group, no row.
        app.on_msg(Msg::Factory(Ok(Vec::new())));
        let s = text(&draw(&mut app, w, h));
        assert!(!s.contains("factory"), "{s}");
    }
}

#[test]
fn the_sessions_keep_their_selection_and_keys() {
    for (w, h) in SIZES {
        let mut plain = fixture_app(TokenRole::Write, Theme::default_theme());
        let mut app = app_with(vec![failed(), rejected(), in_review()]);
        for a in [&mut plain, &mut app] {
            draw(a, w, h);
        }
        assert!(app.sessions.rows >= 1);
        assert!(app.sessions.rows <= plain.sessions.rows);
        // The same keys move the same selection; the last session is in view.
        for k in ['j', 'j', 'G'] {
            plain.on_key(ch(k));
            app.on_key(ch(k));
        }
        assert_eq!(app.sessions.selected, plain.sessions.selected);
        let sel = app.sessions.selected.clone().unwrap();
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains(&sel), "{sel} in view: {s}");
        assert!(s.contains("fac-0003"), "{s}");
        app.on_key(ch('g'));
        assert_eq!(app.sessions.selected_index(), Some(0));
    }
}

#[test]
fn a_run_whose_worker_is_in_a_rig_names_the_rig() {
    let mut r = completed();
    r.rig = Some("rig-0001".into());
    let mut app = app_with(vec![r]);
    let t = draw(&mut app, 160, 48);
    let s = text(&t);
    assert!(s.contains("worker in rig-0001"), "{s}");
    let mut app = app_with(vec![completed()]);
    let s = text(&draw(&mut app, 160, 48));
    assert!(
        !s.contains("worker in"),
        "a run on the host names no rig: {s}"
    );
}

#[test]
fn a_demo_runs_label_is_never_cut_off_by_a_long_header() {
    let mut r = completed();
    r.demo = true;
    r.rig = Some("rig-0001".into());
    r.candidate = Some("c13b866764d0e1f2a3b4c5d6e7f8091a".into());
    for (w, h) in SIZES {
        let mut app = app_with(vec![r.clone()]);
        let s = text(&draw(&mut app, w, h));
        let row = s
            .lines()
            .find(|l| l.contains("fac-0004"))
            .unwrap_or_else(|| panic!("{w}x{h}: no fac-0004 row: {s}"));
        assert!(row.contains("demo"), "{w}x{h}: {row}");
    }
}
