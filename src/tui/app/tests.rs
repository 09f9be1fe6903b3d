//! The cockpit's state without a terminal: what happens to the selection when a list
//! shrinks under it, the filter, the stop dialog's words, the palette's count.

use ratatui::crossterm::event::KeyCode;
use serde_json::{Value, json};

use super::*;
use crate::tui::data::{Counts, RunView, RunsPage};
use crate::tui::evidence::{IntentView, ReceiptItem};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;
use crate::tui::ui::tests::{ch, key};

fn run(r#ref: &str, minute: u32, extra: Value) -> RunView {
    let mut v = json!({
        "ref": r#ref, "tool": "claude", "profile": "claude", "transport": "pty",
        "workspace": "/home/op/src/app", "demo": true,
        "created_at": format!("2026-11-30T11:{minute:02}:00.000Z"), "state": "running",
        "generation": 1, "started_at": format!("2026-11-30T11:{minute:02}:01.000Z"),
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

/// Six runs, the newest (shown first) `run-0006`.
fn six() -> Vec<RunView> {
    (1..=6)
        .map(|i| run(&format!("run-000{i}"), i * 5, json!({})))
        .collect()
}

fn page(runs: Vec<RunView>) -> Msg {
    let counts = Counts::of(&runs);
    Msg::Runs(Ok(RunsPage {
        total: runs.len(),
        items: runs,
        counts,
    }))
}

pub(super) fn app_with(runs: Vec<RunView>) -> App {
    let mut app = App::new(
        "host".into(),
        "~/proctor".into(),
        Keymap::defaults(),
        Theme::default_theme(),
    );
    app.now = crate::tui::data::instant("2026-11-30T12:00:00.000Z").unwrap();
    app.on_msg(page(runs));
    app
}

fn shown(app: &App) -> Vec<String> {
    app.sessions
        .view
        .iter()
        .map(|&i| app.sessions.runs[i].run_ref.clone())
        .collect()
}

#[test]
fn the_last_run_deleted_while_selected_selects_the_new_last() {
    let mut app = app_with(six());
    assert_eq!(shown(&app)[5], "run-0001");
    app.on_key(ch('G'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0001"));
    // `D` on it, confirmed: the server deletes it; the next poll has five runs.
    let mut runs = six();
    runs.retain(|r| r.run_ref != "run-0001");
    app.on_msg(page(runs));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0002"));
    assert_eq!(app.selected_index(), Some(4));
}

#[test]
fn a_run_deleted_from_another_client_selects_the_one_in_its_place() {
    let mut app = app_with(six());
    app.on_key(ch('j'));
    app.on_key(ch('j'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    let mut runs = six();
    runs.retain(|r| r.run_ref != "run-0004");
    app.on_msg(page(runs));
    // The one below it moved up into its row.
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0003"));
    // Every run but one gone at once, then all of them.
    app.on_msg(page(vec![run("run-0006", 30, json!({}))]));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0006"));
    app.on_msg(page(vec![]));
    assert_eq!(app.sessions.selected, None);
    assert!(app.sessions.view.is_empty());
}

#[test]
fn a_cleaned_run_deleted_with_d_does_not_panic_and_the_list_draws() {
    let mut runs = six();
    runs[0] = run(
        "run-0001",
        5,
        json!({"state": "cleaned", "ended_at": "2026-11-30T11:06:00.000Z"}),
    );
    let mut app = app_with(runs.clone());
    app.on_key(ch('G'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0001"));
    app.on_key(ch('D'));
    assert!(matches!(&app.mode, Mode::Modal(m) if matches!(**m, Modal::Confirm { .. })));
    app.on_key(ch('y'));
    let calls: Vec<_> = app
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].method, Method::DELETE);
    runs.remove(0);
    app.on_msg(page(runs));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    t.draw(|f| {
        crate::tui::ui::draw(f, &mut app);
    })
    .unwrap();
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0002"));
}

fn intent(id: &str, run: &str, state: &str) -> IntentView {
    serde_json::from_value(json!({
        "id": id, "run": run, "branch": "fix", "title": "Fix", "state": state,
        "candidate": {"id": format!("cand-{id}")},
    }))
    .unwrap()
}

fn receipt(id: &str) -> ReceiptItem {
    serde_json::from_value(json!({"id": id, "kind": "signed"})).unwrap()
}

#[test]
fn an_intent_gone_from_the_list_selects_the_one_in_its_place() {
    let mut app = app_with(six());
    let list = |ids: &[&str]| {
        Msg::feed::<IntentsPane>(Ok(ids
            .iter()
            .map(|i| intent(i, "run-0001", "blocked"))
            .collect()))
    };
    app.on_msg(list(&["int-0001", "int-0002", "int-0003", "int-0004"]));
    app.on_key(ch('3'));
    app.on_key(ch('j'));
    app.on_key(ch('j'));
    assert_eq!(app.selected_intent().unwrap().id, "int-0002");
    app.on_msg(list(&["int-0001", "int-0003", "int-0004"]));
    assert_eq!(app.selected_intent().unwrap().id, "int-0001");
    // The last one selected, then gone.
    app.on_key(ch('G'));
    assert_eq!(app.selected_intent().unwrap().id, "int-0001");
    app.on_msg(list(&["int-0003", "int-0004"]));
    assert_eq!(app.selected_intent().unwrap().id, "int-0003");
    app.on_msg(list(&[]));
    assert!(app.selected_intent().is_none());
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    t.draw(|f| {
        crate::tui::ui::draw(f, &mut app);
    })
    .unwrap();
}

#[test]
fn a_receipt_gone_from_the_list_selects_the_one_in_its_place() {
    let mut app = app_with(six());
    let list =
        |ids: &[&str]| Msg::feed::<ReceiptsPane>(Ok(ids.iter().map(|i| receipt(i)).collect()));
    app.on_msg(list(&["rcpt-0001", "rcpt-0002", "rcpt-0003"]));
    app.on_key(ch('4'));
    app.on_key(ch('j'));
    assert_eq!(app.selected_receipt().unwrap().id, "rcpt-0002");
    app.on_msg(list(&["rcpt-0001", "rcpt-0003"]));
    assert_eq!(app.selected_receipt().unwrap().id, "rcpt-0001");
    app.on_msg(list(&[]));
    assert!(app.selected_receipt().is_none());
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    t.draw(|f| {
        crate::tui::ui::draw(f, &mut app);
    })
    .unwrap();
    let _ = key(KeyCode::Esc);
}

fn confirm_text(app: &App) -> String {
    match &app.mode {
        Mode::Modal(m) => match &**m {
            Modal::Confirm { dialog, .. } => dialog.consequence().to_string(),
            _ => panic!("not a confirmation"),
        },
        _ => panic!("no dialog"),
    }
}

#[test]
fn the_stop_dialog_promises_a_resume_only_when_there_is_a_conversation() {
    let runs = vec![
        run("run-0001", 5, json!({})),
        run("run-0002", 10, json!({"conversation_id": "c0ffee-1"})),
        run(
            "run-0003",
            15,
            json!({"transport": "pipe", "conversation_id": "c-2"}),
        ),
    ];
    let mut app = app_with(runs);
    // Newest first: run-0003, run-0002, run-0001.
    for (steps, resumes) in [(0, true), (1, true), (2, false)] {
        app.on_key(ch('g'));
        for _ in 0..steps {
            app.on_key(ch('j'));
        }
        app.dispatch(Action::Stop);
        let t = confirm_text(&app);
        assert_eq!(
            t.contains("r resumes"),
            resumes,
            "{:?}: {t}",
            app.sessions.selected
        );
        if !resumes {
            assert!(t.contains("cannot be resumed"), "{t}");
        }
        app.on_key(key(KeyCode::Esc));
    }
}

fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        app.on_key(ch(c));
    }
}

#[test]
fn the_filter_matches_state_tool_and_branch() {
    let runs = vec![
        run("run-0001", 5, json!({"state": "failed", "exit_code": 3})),
        run(
            "run-0002",
            10,
            json!({"tool": "codex", "profile": "work", "state": "idle"}),
        ),
        run(
            "run-0003",
            15,
            json!({"worktree_branch": "proctor/run-0003", "name": "parser"}),
        ),
        run("run-0004", 20, json!({"name": "other"})),
    ];
    let mut app = app_with(runs);
    for (needle, want) in [
        ("failed", vec!["run-0001"]),
        ("IDLE", vec!["run-0002"]),
        ("codex", vec!["run-0002"]),
        ("proctor/run-0003", vec!["run-0003"]),
        ("parser", vec!["run-0003"]),
    ] {
        app.on_key(ch('/'));
        typed(&mut app, needle);
        assert_eq!(shown(&app), want, "filter {needle:?}");
        app.on_key(key(KeyCode::Esc));
        assert_eq!(shown(&app).len(), 4);
    }
}

#[test]
fn esc_from_the_filter_keeps_the_selected_run() {
    let mut app = app_with(six());
    app.on_key(ch('j'));
    app.on_key(ch('j'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    // A filter that matches nothing on the way (`run-0004x`), then one that keeps it.
    app.on_key(ch('/'));
    typed(&mut app, "run-0004x");
    assert_eq!(app.sessions.selected, None);
    app.on_key(key(KeyCode::Backspace));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    app.on_key(key(KeyCode::Esc));
    assert!(app.mode.is_normal());
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    // A filter that hides it shows another run selected while it is on; Esc brings the
    // chosen run back.
    app.on_key(ch('/'));
    typed(&mut app, "run-0002");
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0002"));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    // Kept with Enter, then cleared with Esc in the list: the same.
    app.on_key(ch('/'));
    typed(&mut app, "zzz");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.sessions.selected, None);
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
    // Choosing another run while filtered makes that one the choice.
    app.on_key(ch('/'));
    typed(&mut app, "run-000");
    app.on_key(key(KeyCode::Enter));
    app.on_key(ch('G'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0001"));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0001"));
}

fn palette(app: &App) -> &crate::tui::widgets::palette::Palette {
    match &app.mode {
        Mode::Modal(m) => match &**m {
            Modal::Palette(p) => p,
            _ => panic!("not the palette"),
        },
        _ => panic!("no dialog"),
    }
}

#[test]
fn the_palette_and_the_header_count_the_same_intents_awaiting_authority() {
    let key_file = tempfile::NamedTempFile::new().unwrap();
    let mut app = app_with(six());
    app.key_path = Some(key_file.path().to_path_buf());
    app.on_msg(Msg::feed::<IntentsPane>(Ok(vec![
        intent("int-0001", "run-0001", "awaiting_authority"),
        intent("int-0002", "run-0002", "blocked"),
    ])));
    assert_eq!(app.awaiting_authority(), 1);
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
    t.draw(|f| {
        crate::tui::ui::draw(f, &mut app);
    })
    .unwrap();
    let head = format!("{}", t.backend());
    assert!(
        head.contains("awaiting authority 1") || head.contains("auth 1"),
        "{head}"
    );
    // The focused run (run-0006) has no intent: the palette names the header's count.
    app.on_key(ch(':'));
    let why = palette(&app)
        .unavailable(Action::Approve)
        .unwrap()
        .to_string();
    assert!(
        why.starts_with("1 intent awaits authority, none of run-0006"),
        "{why}"
    );
    app.on_key(key(KeyCode::Esc));
    // The run whose intent awaits: available.
    app.on_key(ch('G'));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0001"));
    app.on_key(ch(':'));
    assert_eq!(palette(&app).unavailable(Action::Approve), None);
    app.on_key(key(KeyCode::Esc));
    // None awaiting: the palette says so, as the header's 0.
    app.on_msg(Msg::feed::<IntentsPane>(Ok(vec![intent(
        "int-0002", "run-0002", "blocked",
    )])));
    app.on_key(ch(':'));
    assert_eq!(
        palette(&app).unavailable(Action::Approve),
        Some("no publication intent awaits authority")
    );
}

fn calls(app: &mut App) -> Vec<Call> {
    app.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// The new-session form filled in: the transport toggled `toggles` times from PTY, then the
/// first prompt; Enter.
fn start_session(app: &mut App, toggles: usize, prompt: &str) -> Call {
    app.workspace = "/home/op/src/app".into();
    app.on_key(ch('n'));
    app.on_key(key(KeyCode::Tab));
    app.on_key(key(KeyCode::Tab));
    for _ in 0..toggles {
        app.on_key(key(KeyCode::Right));
    }
    app.on_key(key(KeyCode::Tab));
    typed(app, prompt);
    app.take_effects();
    app.on_key(key(KeyCode::Enter));
    let mut c = calls(app);
    assert_eq!(c.len(), 1, "{c:?}");
    c.remove(0)
}

#[test]
fn a_sessions_first_prompt_and_path_go_with_the_start_for_the_server() {
    // PTY: the server types it once the tool is up, then Enter (tested in
    // tests/cli_session.rs against a tool that discards keys typed before it is up).
    let mut app = app_with(six());
    app.client_path = Some("/opt/new/bin:/usr/bin".into());
    let call = start_session(&mut app, 0, "fix the parser");
    let body = call.body.clone().unwrap();
    assert_eq!(body["transport"], "pty", "{body}");
    assert_eq!(body["prompt"], "fix the parser", "{body}");
    // The cockpit's PATH goes with it: the server looks for the tool there.
    assert_eq!(body["path"], "/opt/new/bin:/usr/bin", "{body}");
    app.on_msg(Msg::CallDone {
        tag: call.tag,
        // The run view the server answers (a fresh run, running).
        result: Ok({
            let mut v = serde_json::to_value(run("run-0007", 1, json!({}))).unwrap();
            v["state"] = json!("running");
            v
        }),
    });
    // The cockpit types nothing itself.
    assert!(calls(&mut app).is_empty());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("first prompt is typed once the tool is up")
    );
    // Pipe: the protocol's first turn, the same field.
    let call = start_session(&mut app, 1, "one turn");
    let body = call.body.clone().unwrap();
    assert_eq!(body["transport"], "pipe", "{body}");
    assert_eq!(body["prompt"], "one turn", "{body}");
}

fn notices(app: &mut App) -> Vec<Notice> {
    app.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Notify(n) => Some(n),
            _ => None,
        })
        .collect()
}

#[test]
fn a_run_that_starts_waiting_after_the_cockpit_opened_is_notified_once() {
    let waiting = |since: &str| {
        json!({"state": "idle", "transport": "pipe", "waiting_known": true,
               "waiting": {"source": "protocol", "since": since,
                           "reason": "the turn ended; the tool waits for your input"}})
    };
    // run-0001 already waits when the cockpit opens: no notice for it.
    let mut app = app_with(vec![
        run("run-0001", 1, waiting("2026-11-30T11:01:30.000Z")),
        run("run-0002", 2, json!({})),
    ]);
    assert_eq!(
        notices(&mut app),
        vec![],
        "runs waiting at start are not announced"
    );
    // run-0002 starts waiting: one notice, with what the hook command gets.
    app.on_msg(page(vec![
        run("run-0001", 1, waiting("2026-11-30T11:01:30.000Z")),
        run("run-0002", 2, waiting("2026-11-30T11:59:00.000Z")),
    ]));
    let n = notices(&mut app);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].run, "run-0002");
    assert_eq!(n[0].tool, "claude");
    assert_eq!(n[0].source, "protocol");
    assert_eq!(n[0].since, "2026-11-30T11:59:00.000Z");
    assert_eq!(n[0].reason, "the turn ended; the tool waits for your input");
    // The next poll says the same: nothing new.
    app.on_msg(page(vec![
        run("run-0001", 1, waiting("2026-11-30T11:01:30.000Z")),
        run("run-0002", 2, waiting("2026-11-30T11:59:00.000Z")),
    ]));
    assert_eq!(notices(&mut app), vec![]);
    // It worked, then waits again (another since): a new notice.
    app.on_msg(page(vec![run("run-0002", 2, json!({}))]));
    app.on_msg(page(vec![run(
        "run-0002",
        2,
        waiting("2026-11-30T11:59:40.000Z"),
    )]));
    assert_eq!(notices(&mut app).len(), 1);
    // Off with the setting.
    app.notify.enabled = false;
    app.on_msg(page(vec![run(
        "run-0003",
        3,
        waiting("2026-11-30T11:59:50.000Z"),
    )]));
    assert_eq!(notices(&mut app), vec![]);
}

#[test]
fn the_header_counts_waiting_runs() {
    let runs = vec![
        run(
            "run-0001",
            1,
            json!({"waiting": {"source": "hook", "since": "2026-11-30T11:01:30.000Z", "reason": "x"}}),
        ),
        run("run-0002", 2, json!({})),
    ];
    assert_eq!(Counts::of(&runs).waiting, 1);
}

/// A run that narrates: its output ring's seq and the instant of its last output.
fn narrating(r#ref: &str, minute: u32, next_seq: u64, last_at: &str) -> RunView {
    run(
        r#ref,
        minute,
        json!({"name": "a name long enough to take the room of the states' sources",
               "output": {"first_seq": 1, "next_seq": next_seq, "bytes": next_seq * 40,
                          "last_at": last_at},
               // Its transcript grows with its output (the demo's narrating runs: the
               // list polls drew a frame a second for it alone).
               "transcript": {"bytes": next_seq * 40, "cap": 67_108_864, "capped": false}}),
    )
}

/// A list poll whose runs changed only in their output (what a narrating session changes at
/// every poll: its ring's seq, its last output's instant) draws no frame when no row shows
/// the change, and draws one when a row does: the order by activity, or the state's source
/// ("output 4s ago") on a list wide enough to show it. (Before, every such poll drew a
/// frame.)
#[test]
fn a_poll_that_changes_only_what_no_row_shows_draws_nothing() {
    use crate::tui::ui::tests::draw;
    let poll = |a: (u64, &str), b: (u64, &str)| {
        page(vec![
            narrating("run-0001", 5, a.0, a.1),
            narrating("run-0002", 10, b.0, b.1),
        ])
    };
    let mut app = app_with(Vec::new());
    app.on_msg(poll(
        (10, "2026-11-30T11:59:50.000Z"),
        (10, "2026-11-30T11:59:40.000Z"),
    ));
    draw(&mut app, 160, 48);
    app.dirty = false;
    let text = |app: &App| {
        let (_, rows) = crate::tui::ui::sessions::shown(app);
        rows.iter().map(|(_, l)| l.to_string()).collect::<Vec<_>>()
    };
    assert!(
        !text(&app)[0].contains("output"),
        "at 160 columns the sources do not fit: {:?}",
        text(&app)
    );
    // New output in both, the order kept: nothing a row shows changed.
    app.on_msg(poll(
        (12, "2026-11-30T11:59:55.000Z"),
        (11, "2026-11-30T11:59:45.000Z"),
    ));
    assert!(
        !app.dirty,
        "an output-only change no row shows draws no frame"
    );
    assert_eq!(
        app.sessions.runs[1].output.as_ref().map(|o| o.next_seq),
        Some(11),
        "the new list is held"
    );
    // run-0002 wrote last: it comes first.
    app.on_msg(poll(
        (12, "2026-11-30T11:59:55.000Z"),
        (13, "2026-11-30T11:59:58.000Z"),
    ));
    assert!(app.dirty, "a new order is drawn");
    draw(&mut app, 160, 48);
    assert!(text(&app)[0].contains("run-0002"), "{:?}", text(&app));
    // Wide enough for the sources: a new instant of output shows.
    draw(&mut app, 240, 48);
    app.dirty = false;
    assert!(text(&app)[0].contains("output 2s ago"), "{:?}", text(&app));
    app.on_msg(poll(
        (12, "2026-11-30T11:59:55.000Z"),
        (14, "2026-11-30T11:59:59.500Z"),
    ));
    assert!(app.dirty, "a source that reads differently is drawn");
    // Its seq alone: the rows read the same.
    draw(&mut app, 240, 48);
    app.dirty = false;
    app.on_msg(poll(
        (12, "2026-11-30T11:59:55.000Z"),
        (15, "2026-11-30T11:59:59.500Z"),
    ));
    assert!(!app.dirty, "a seq no row shows draws no frame");
    // Anything else that changes is a change, as before.
    let mut renamed = narrating("run-0002", 10, 15, "2026-11-30T11:59:59.500Z");
    renamed.name = Some("renamed".into());
    app.on_msg(page(vec![
        narrating("run-0001", 5, 12, "2026-11-30T11:59:55.000Z"),
        renamed,
    ]));
    assert!(app.dirty);
}
