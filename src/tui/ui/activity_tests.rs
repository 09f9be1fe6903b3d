//! The Activity view (`7`) at 80×24 and 160×48: the focused run's context bar (an unknown
//! window said so), model, compactions, transcript state, tasks, files, todos and agents,
//! read when the view opens and when the run's ledger moves (never on a frame); a tool
//! without activity says so; the message search (`/`), its matches with role and time,
//! `n` to move, paging with the server's cursor, Enter shows a message (clipped marked);
//! untrusted text drawn as markers.

use ratatui::crossterm::event::KeyCode;
use serde_json::{Value, json};

use super::tests::{HOSTILE_NAME, SIZES, ch, draw, events, fixture_app, key, text};
use crate::auth::Role as TokenRole;
use crate::tui::app::{App, CallTag, Effect, Modal, Mode, Msg, Pane, Tab};
use crate::tui::data::EventItem;
use crate::tui::theme::Theme;

fn app() -> App {
    fixture_app(TokenRole::Admin, Theme::default_theme())
}

fn activity(extra: Value) -> Value {
    let mut v = json!({
        "ref": "run-0001", "tool": "claude", "agents": [
            {"id": "ag-1", "description": "map the flaky test's callers", "kind": "Explore",
             "state": "completed", "transcript": true}
        ],
        "tasks": [
            {"id": "t1", "tool": "Bash", "command": "cargo test flaky", "background": false,
             "state": "failed", "exit_code": 101},
            {"id": "t2", "tool": "Read", "command": "src/flaky.rs", "background": false,
             "state": "completed", "exit_code": null},
            {"id": "t3", "tool": "Bash", "command": format!("echo {HOSTILE_NAME}"),
             "background": true, "state": "running", "exit_code": null}
        ],
        "tasks_omitted": 0,
        "files": [
            {"path": "src/flaky.rs", "added": 12, "removed": 3, "created": false},
            {"path": "tests/flaky_again.rs", "added": 40, "removed": 0, "created": true}
        ],
        "todos": [
            {"content": "find why the test flakes", "status": "completed"},
            {"content": "fix the race", "status": "in_progress"},
            {"content": "run it 100 times", "status": "pending"}
        ],
        "skills": [], "mcp_servers": [],
        "model": "claude-sonnet-4-5", "context_tokens": 90400, "context_window": 200000,
        "context_percent": 45.2, "compactions": 1, "transcript": "read"
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// The calls queued (the activity's and the messages').
fn calls(app: &mut App) -> Vec<(CallTag, String)> {
    app.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some((c.tag, c.path)),
            _ => None,
        })
        .collect()
}

fn activity_calls(app: &mut App) -> usize {
    calls(app)
        .iter()
        .filter(|(t, p)| {
            matches!(t, CallTag::Activity { run } if run == "run-0001")
                && p == "/v1/m/sessions/runs/run-0001/activity"
        })
        .count()
}

fn answer(app: &mut App, v: Result<Value, String>) {
    app.on_msg(Msg::CallDone {
        tag: CallTag::Activity {
            run: "run-0001".into(),
        },
        result: v,
    });
}

#[test]
fn the_focused_runs_activity_at_both_sizes() {
    for (w, h) in SIZES {
        let mut app = app();
        app.on_key(ch('7'));
        assert_eq!(app.tab, Tab::Activity);
        assert_eq!(app.focus, Pane::Activity);
        assert_eq!(activity_calls(&mut app), 1, "read when the view opens");
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("reading"), "{s}");
        answer(&mut app, Ok(activity(json!({}))));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("Activity run-0001"), "{s}");
        assert!(
            s.contains("[█████░░░░░] context 45.2% · 90,400 / 200,000 tokens"),
            "{s}"
        );
        assert!(
            s.contains("model claude-sonnet-4-5 · compactions 1 · transcript read"),
            "{s}"
        );
        assert!(
            s.contains("failed    Bash cargo test flaky · exit 101"),
            "{s}"
        );
        assert!(s.contains("Tasks 3"), "{s}");
        if h >= 48 {
            assert!(s.contains("+12   −3    src/flaky.rs"), "{s}");
            assert!(s.contains("(new)"), "{s}");
            assert!(s.contains("[>] fix the race"), "{s}");
            assert!(s.contains("Explore map the flaky test's callers"), "{s}");
        }
        insta::assert_snapshot!(format!("activity_{w}x{h}"), s);
        // Scrolling reaches the last section at any size.
        for _ in 0..30 {
            app.on_key(ch('j'));
        }
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("Explore map the flaky test's callers"), "{s}");
        // Drawing again asks for nothing: the activity is not read on a frame.
        draw(&mut app, w, h);
        assert_eq!(activity_calls(&mut app), 0);
    }
}

#[test]
fn an_unknown_window_is_shown_as_unknown() {
    for (w, h) in SIZES {
        let mut app = app();
        app.on_key(ch('7'));
        answer(
            &mut app,
            Ok(activity(json!({
                "context_window": null, "context_percent": null, "model": null,
                "transcript": "pending"
            }))),
        );
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("context 90,400 tokens · window unknown"), "{s}");
        assert!(!s.contains('%'), "no share without a window: {s}");
        assert!(s.contains("model unknown"), "{s}");
        assert!(s.contains("transcript pending"), "{s}");
        insta::assert_snapshot!(format!("activity_unknown_window_{w}x{h}"), s);
    }
}

#[test]
fn a_tool_without_activity_says_so() {
    let mut app = app();
    app.on_key(ch('7'));
    answer(
        &mut app,
        Err(
            "grok sessions have no activity proctor reads: activity is read from Claude \
             Code's transcript, Codex's rollout, Gemini CLI's chat log and OpenCode's export \
             only"
                .into(),
        ),
    );
    let s = text(&draw(&mut app, 80, 24));
    assert!(
        s.contains("no activity: grok sessions have no activity"),
        "{s}"
    );
}

#[test]
fn the_activity_is_read_again_when_the_ledger_moves() {
    let mut app = app();
    app.on_key(ch('7'));
    assert_eq!(activity_calls(&mut app), 1);
    answer(&mut app, Ok(activity(json!({}))));
    // The same events: nothing moved, nothing read.
    app.on_msg(Msg::Events {
        run: "run-0001".into(),
        result: Ok(events()),
    });
    assert_eq!(activity_calls(&mut app), 0);
    let mut more = events();
    more.push(EventItem {
        seq: 14,
        at: "2026-11-30T11:30:00.000Z".into(),
        kind: "sessions.run.turn_completed".into(),
        fields: Default::default(),
    });
    app.on_msg(Msg::Events {
        run: "run-0001".into(),
        result: Ok(more),
    });
    assert_eq!(activity_calls(&mut app), 1, "a new event: read again");
    // Another view: the ledger moving reads nothing.
    answer(&mut app, Ok(activity(json!({"compactions": 2}))));
    app.on_key(ch('1'));
    let mut more = events();
    more.push(EventItem {
        seq: 15,
        at: "2026-11-30T11:31:00.000Z".into(),
        kind: "sessions.run.turn_completed".into(),
        fields: Default::default(),
    });
    app.on_msg(Msg::Events {
        run: "run-0001".into(),
        result: Ok(more),
    });
    assert_eq!(activity_calls(&mut app), 0);
    // Another focused run: its own activity, the old one forgotten.
    app.on_key(ch('7'));
    calls(&mut app);
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.focus, Pane::Sessions);
    app.on_key(ch('j'));
    let asked: Vec<_> = calls(&mut app)
        .into_iter()
        .filter(|(t, _)| matches!(t, CallTag::Activity { .. }))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_ne!(app.activity.run.as_deref(), Some("run-0001"));
    assert!(app.activity.activity.is_none());
}

fn page(items: Value, next: Option<&str>) -> Value {
    json!({"ref": "run-0001", "items": items, "total": 3, "next": next, "transcript": "read"})
}

fn type_query(app: &mut App, q: &str) {
    for c in q.chars() {
        app.on_key(ch(c));
    }
}

#[test]
fn a_search_lists_its_matches_and_enter_shows_the_text() {
    for (w, h) in SIZES {
        let mut app = app();
        app.on_key(ch('7'));
        answer(&mut app, Ok(activity(json!({}))));
        calls(&mut app);
        app.on_key(ch('/'));
        assert!(matches!(&app.mode, Mode::Modal(m) if matches!(**m, Modal::Prompt { .. })));
        type_query(&mut app, "Flaky");
        app.on_key(key(KeyCode::Enter));
        assert!(app.mode.is_normal(), "the prompt closes");
        let sent = calls(&mut app);
        let (tag, path) = sent.last().expect("the search is sent");
        assert!(
            matches!(tag, CallTag::Messages { run, query, cursor: None }
                if run == "run-0001" && query == "Flaky"),
            "{tag:?}"
        );
        assert!(
            path.starts_with("/v1/m/sessions/runs/run-0001/messages?"),
            "{path}"
        );
        assert!(
            path.contains("q=Flaky") && path.contains("text=1"),
            "{path}"
        );
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("Search \"Flaky\": searching"), "{s}");
        let long = format!("{}[...]", "the flaky test again ".repeat(40));
        app.on_msg(Msg::CallDone {
            tag: tag.clone(),
            result: Ok(page(
                json!([
                    {"id": 0, "role": "user", "at": "2026-11-30T11:00:05Z",
                     "first_line": "fix the flaky test", "text": "fix the flaky test\nplease",
                     "clipped": false},
                    {"id": 3, "role": "assistant", "at": "2026-11-30T11:02:00Z",
                     "first_line": format!("flaky: {HOSTILE_NAME}"),
                     "text": format!("flaky: {HOSTILE_NAME}\n{long}"), "clipped": true}
                ]),
                Some("4"),
            )),
        });
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("Search \"Flaky\": 2 of 3 found · more"), "{s}");
        assert!(
            s.contains("› #0    user      11-30 11:00  fix the flaky test"),
            "{s}"
        );
        assert!(
            s.contains("#3    assistant 11-30 11:02  flaky: evil"),
            "{s}"
        );
        insta::assert_snapshot!(format!("activity_search_{w}x{h}"), s);
        // n: the next match, the last heard: the next page is asked with the cursor.
        app.on_key(ch('n'));
        assert_eq!(app.activity.search.as_ref().unwrap().selected, 1);
        let sent = calls(&mut app);
        assert!(
            sent.iter().any(
                |(t, p)| matches!(t, CallTag::Messages { cursor: Some(c), .. } if c == "4")
                    && p.contains("cursor=4")
            ),
            "{sent:?}"
        );
        // Enter: the message's text, clipped marked, sanitised.
        app.on_key(key(KeyCode::Enter));
        let t = draw(&mut app, w, h);
        let Mode::Modal(m) = &app.mode else {
            panic!("no dialog")
        };
        let Modal::Message(d) = m.as_ref() else {
            panic!("not the message dialog")
        };
        let all = d.text().join("\n");
        assert!(all.contains("assistant · 2026-11-30T11:02:00Z"), "{all}");
        assert!(all.contains("clipped"), "{all}");
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("run-0001 · message 3"), "{s}");
        insta::assert_snapshot!(format!("activity_message_{w}x{h}"), s);
        // Esc closes it; esc again leaves the search for the activity.
        app.on_key(key(KeyCode::Esc));
        assert!(app.mode.is_normal());
        app.on_key(key(KeyCode::Esc));
        assert!(app.activity.search.is_none());
        assert_eq!(app.tab, Tab::Activity);
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("Tasks 3"), "{s}");
    }
}

#[test]
fn a_query_longer_than_256_bytes_is_refused_in_the_prompt() {
    let mut app = app();
    app.on_key(ch('7'));
    calls(&mut app);
    app.on_key(ch('/'));
    type_query(&mut app, &"x".repeat(257));
    app.on_key(key(KeyCode::Enter));
    assert!(
        matches!(&app.mode, Mode::Modal(m) if matches!(**m, Modal::Prompt { .. })),
        "the prompt stays open"
    );
    assert!(
        calls(&mut app)
            .iter()
            .all(|(t, _)| !matches!(t, CallTag::Messages { .. })),
        "nothing sent"
    );
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("at most 256 bytes"), "{s}");
    // 256 bytes go.
    app.on_key(key(KeyCode::Backspace));
    app.on_key(key(KeyCode::Enter));
    assert!(
        calls(&mut app)
            .iter()
            .any(|(t, _)| matches!(t, CallTag::Messages { .. }))
    );
}

#[test]
fn no_match_and_a_refusal_are_said() {
    let mut app = app();
    app.on_key(ch('7'));
    app.on_key(ch('/'));
    type_query(&mut app, "nothing");
    app.on_key(key(KeyCode::Enter));
    let tag = CallTag::Messages {
        run: "run-0001".into(),
        query: "nothing".into(),
        cursor: None,
    };
    app.on_msg(Msg::CallDone {
        tag: tag.clone(),
        result: Ok(
            json!({"ref": "run-0001", "items": [], "total": 0, "next": null,
                          "transcript": "missing"}),
        ),
    });
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("0 of 0 found"), "{s}");
    assert!(s.contains("transcript missing"), "{s}");
    assert!(s.contains("no message holds it"), "{s}");
    app.on_msg(Msg::CallDone {
        tag,
        result: Err("grok sessions have no messages proctor reads".into()),
    });
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("grok sessions have no messages"), "{s}");
}
