//! Snapshots of every pane at 80×24 and 160×48 with fixed data (times filtered), hostile
//! names and output drawn harmlessly, colours checked on cells.

use chrono::{DateTime, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier};
use serde_json::{Value, json};

use crate::auth::{Principal, Role as TokenRole};
use crate::tui::action::Action;
use crate::tui::app::{App, Effect, LiveEvent, Msg, Pane};
use crate::tui::data::{Counts, EventItem, RunView, RunsPage, WhoAmI, instant};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// A name that tries everything: an escape sequence, a bidi override, an OSC 52 clipboard
/// write, a zero-width joiner, a C1 control.
pub const HOSTILE_NAME: &str =
    "evil\u{1b}[31mred\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{202e}txt.exe\u{200d}\u{9b}2J";

fn now() -> DateTime<Utc> {
    instant("2026-11-30T12:00:00.000Z").unwrap()
}

fn run(r#ref: &str, extra: Value) -> RunView {
    let mut v = json!({
        "ref": r#ref, "tool": "claude", "profile": "claude", "transport": "pty",
        "workspace": "/home/op/src/app", "demo": true,
        "created_at": "2026-11-30T11:00:00.000Z", "state": "running", "generation": 1,
        "started_at": "2026-11-30T11:00:01.000Z", "pinned": false, "done": false,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

/// One run of each kind the list must show.
pub fn fixture_runs() -> Vec<RunView> {
    vec![
        run(
            "run-0001",
            json!({"name": "fix flaky test", "output": {"first_seq": 1, "next_seq": 40,
                "bytes": 900, "last_at": "2026-11-30T11:59:58.000Z"}}),
        ),
        run(
            "run-0002",
            json!({"tool": "codex", "profile": "codex", "transport": "pipe", "state": "idle",
                "name": "review the diff", "output": {"first_seq": 1, "next_seq": 9, "bytes": 300,
                "last_at": "2026-11-30T11:50:00.000Z"}}),
        ),
        run(
            "run-0003",
            json!({"tool": "gemini", "profile": "gemini-work", "state": "stopped", "exit_code": 0,
                "ended_at": "2026-11-30T11:30:00.000Z", "done": true}),
        ),
        run(
            "run-0004",
            json!({"state": "failed", "exit_code": 3, "ended_at": "2026-11-30T11:40:00.000Z"}),
        ),
        run(
            "run-0005",
            json!({"tool": "grok", "profile": "grok", "state": "failed", "signal": "SIGKILL",
                "ended_at": "2026-11-30T11:20:00.000Z", "demo": false}),
        ),
        run(
            "run-0006",
            json!({"tool": "opencode", "profile": "opencode", "state": "lost",
                "ended_at": "2026-11-30T10:00:00.000Z"}),
        ),
        run(
            "run-0007",
            json!({"name": HOSTILE_NAME, "pinned": true,
            "pinned_at": "2026-11-30T11:10:00.000Z"}),
        ),
        run(
            "run-0008",
            json!({"name": "snoozed one", "snoozed_until": "2026-12-01T09:00:00.000Z"}),
        ),
        run(
            "run-0009",
            json!({"name": "archived one", "state": "stopped", "exit_code": 0,
                "archived_at": "2026-11-30T11:00:00.000Z"}),
        ),
    ]
}

fn events() -> Vec<EventItem> {
    let e = |seq: u64, kind: &str, fields: Value| EventItem {
        seq,
        at: "2026-11-30T11:00:01.000Z".into(),
        kind: format!("sessions.run.{kind}"),
        fields: fields.as_object().cloned().unwrap_or_default(),
    };
    vec![
        e(
            10,
            "created",
            json!({"tool": "claude", "profile": "claude", "transport": "pty", "demo": true}),
        ),
        e(11, "started", json!({"generation": 1, "pid": 4242})),
        e(12, "renamed", json!({})),
        e(
            13,
            "request_failed",
            json!({"method": "x", "message": HOSTILE_NAME}),
        ),
    ]
}

/// A cockpit with the fixture loaded, `run-0001` focused and its terminal fed.
pub fn fixture_app(role: TokenRole, theme: Theme) -> App {
    let mut app = App::new(
        "buildhost".into(),
        "~/proctor".into(),
        Keymap::defaults(),
        theme,
    );
    app.who = Some(WhoAmI {
        token_id: "tok-1".into(),
        name: "owner".into(),
        role,
        principal: Principal::Person,
    });
    app.now = now();
    let runs = fixture_runs();
    let counts = Counts::of(&runs);
    app.on_msg(Msg::Runs(Ok(RunsPage {
        total: runs.len(),
        items: runs,
        counts,
    })));
    app.selected = Some("run-0001".into());
    app.sync_focus();
    let epoch = app.live.as_ref().unwrap().epoch;
    app.on_msg(Msg::Live {
        epoch,
        ev: LiveEvent::Screen {
            rows: 8,
            cols: 60,
            formatted: "\x1b[H\x1b[2J".into(),
            seq: 1,
        },
    });
    let out = "\x1b[1;32m✓\x1b[0m 12 tests passed\r\n\x1b[31merror\x1b[0m: flaky_test failed\r\n\
               \x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07clipboard? \u{202e}gnp.exe\r\n\
               \x1b[38;5;208mindexed\x1b[0m \x1b[38;2;10;20;30mrgb\x1b[0m \x1b[7minverse\x1b[0m\r\n> ";
    app.on_msg(Msg::Live {
        epoch,
        ev: LiveEvent::Output(vec![(2, false, out.as_bytes().to_vec())]),
    });
    app.on_msg(Msg::Events {
        run: "run-0001".into(),
        result: Ok(events()),
    });
    app.take_effects();
    app
}

fn draw(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| {
        super::draw(f, app);
    })
    .unwrap();
    t
}

/// The screen as text, with clock times (local, machine-dependent) replaced by `[time]`.
fn text(t: &Terminal<TestBackend>) -> String {
    let s = format!("{}", t.backend());
    filter_times(&s)
}

fn filter_times(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let d = |c: char| c.is_ascii_digit();
    while i < b.len() {
        if i + 8 <= b.len()
            && d(b[i])
            && d(b[i + 1])
            && b[i + 2] == ':'
            && d(b[i + 3])
            && d(b[i + 4])
            && b[i + 5] == ':'
            && d(b[i + 6])
            && d(b[i + 7])
        {
            out.push_str("[time]  ");
            i += 8;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    let m = if c.is_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    KeyEvent::new(KeyCode::Char(c), m)
}

fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    crate::tui::widgets::testing::find(buf, needle)
}

#[test]
fn every_pane_at_both_sizes() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!(format!("cockpit_{w}x{h}"), text(&t));
    }
}

#[test]
fn pipe_session_in_the_live_pane() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        app.selected = Some("run-0002".into());
        app.sync_focus();
        let epoch = app.live.as_ref().unwrap().epoch;
        let frames = vec![
            (1, false, b"{\"id\":0,\"result\":{}}\n".to_vec()),
            (
                2,
                false,
                b"{\"method\":\"turn/started\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\"}}}\n"
                    .to_vec(),
            ),
            (
                3,
                false,
                b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"the diff looks right\\n\\u001b]52;c;eA==\\u0007but \\u202eone\"}}\n"
                    .to_vec(),
            ),
            (4, true, b"warning: slow disk\n".to_vec()),
            (
                5,
                false,
                b"{\"method\":\"turn/completed\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\",\"status\":\"completed\"}}}\n"
                    .to_vec(),
            ),
        ];
        app.on_msg(Msg::Live {
            epoch,
            ev: LiveEvent::Output(frames),
        });
        app.focus = Pane::Live;
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!(format!("cockpit_pipe_{w}x{h}"), text(&t));
        // stderr is dimmed.
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "warning: slow disk").unwrap();
        assert_eq!(
            buf[(x, y)].fg,
            Theme::default_theme()
                .style(crate::tui::role::Role::Dim)
                .fg
                .unwrap_or(Color::Reset)
        );
    }
}

#[test]
fn zoomed_attached_and_filtered() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        app.on_key(key(KeyCode::Enter));
        assert!(app.zoomed);
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_zoomed_{w}x{h}"), text(&t));
        // The PTY should take the whole screen but the status line.
        assert_eq!((app.live_inner.width, app.live_inner.height), (w, h - 1));
        app.on_key(ch('a'));
        assert!(app.mode.is_attach());
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_attached_{w}x{h}"), text(&t));
        app.on_key(KeyEvent::new(KeyCode::Char('\\'), KeyModifiers::CONTROL));
        app.on_key(key(KeyCode::Esc));
        assert!(!app.zoomed && app.mode.is_normal());
        app.on_key(ch('/'));
        for c in "codex".chars() {
            app.on_key(ch(c));
        }
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_filter_{w}x{h}"), text(&t));
        assert_eq!(app.view.len(), 1);
    }
}

#[test]
fn dialogs_over_the_cockpit() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        app.on_key(ch('?'));
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_help_{w}x{h}"), text(&t));
        app.on_key(key(KeyCode::Esc));
        app.on_key(ch(':'));
        for c in "sto".chars() {
            app.on_key(ch(c));
        }
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_palette_{w}x{h}"), text(&t));
        app.on_key(key(KeyCode::Esc));
        // Rename with a name the validator refuses: the error shows in place.
        app.on_key(ch('R'));
        app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        app.on_paste("bad\u{202e}name");
        app.on_key(key(KeyCode::Enter));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!(format!("cockpit_rename_invalid_{w}x{h}"), text(&t));
        assert!(app.take_effects().is_empty(), "an invalid name is not sent");
        app.on_key(key(KeyCode::Esc));
        app.on_key(ch('s'));
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_confirm_stop_{w}x{h}"), text(&t));
        // Yes: the stop request goes out, the dialog closes.
        app.on_key(ch('y'));
        assert!(app.mode.is_normal());
        let eff = app.take_effects();
        assert!(
            matches!(&eff[..], [Effect::Call(c)] if c.path.ends_with("/runs/run-0001/stop")),
            "{eff:?}"
        );
        // The new-session form.
        app.workspace = "/home/op/src/app".into();
        app.on_key(ch('n'));
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_new_session_{w}x{h}"), text(&t));
        app.on_key(key(KeyCode::Enter));
        let eff = app.take_effects();
        let Some(Effect::Call(call)) = eff.first() else {
            panic!("the form sends POST /runs: {eff:?}")
        };
        assert!(call.path.ends_with("/runs"));
        let body = call.body.as_ref().unwrap();
        assert_eq!(body["workspace"], "/home/op/src/app");
        assert_eq!(body["transport"], "pty");
        // The server's refusal shows in the form, which stays open.
        app.on_msg(Msg::CallDone {
            tag: call.tag.clone(),
            result: Err("workspace /home/op/src/app is not an existing folder".into()),
        });
        assert!(app.mode.is_modal());
        let t = draw(&mut app, w, h);
        assert!(text(&t).contains("is not an existing folder"));
        app.on_key(key(KeyCode::Esc));
        // The snooze picker: a preset goes out as an RFC 3339 instant.
        app.on_key(ch('z'));
        assert!(app.mode.is_modal());
        app.on_key(key(KeyCode::Enter));
        let eff = app.take_effects();
        assert!(
            matches!(&eff[..], [Effect::Call(c)]
                if c.path.ends_with("/snooze") && c.body.as_ref().unwrap()["until"].is_string()),
            "{eff:?}"
        );
    }
}

#[test]
fn a_read_only_token_sees_write_actions_unavailable_and_never_sends_them() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Read, Theme::default_theme());
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_read_only_{w}x{h}"), text(&t));
        let buf = t.backend().buffer();
        let unavailable = Theme::default_theme().style(crate::tui::role::Role::Unavailable);
        if let Some((x, y)) = find(buf, "attach") {
            assert_eq!(buf[(x, y)].fg, unavailable.fg.unwrap_or(Color::Reset));
        }
        for a in [
            Action::Stop,
            Action::Attach,
            Action::Rename,
            Action::NewSession,
            Action::Resume,
            Action::Interrupt,
            Action::Archive,
            Action::SendInput,
            Action::Cleanup,
            Action::Delete,
        ] {
            app.dispatch(a);
            assert!(
                !app.take_effects()
                    .iter()
                    .any(|e| matches!(e, Effect::Call(_) | Effect::Type { .. })),
                "{} was attempted with a read token",
                a.name()
            );
            assert!(app.mode.is_normal(), "{}: no dialog opens", a.name());
        }
        // The caller's own marks stay available.
        app.dispatch(Action::Pin);
        assert!(matches!(app.take_effects()[..], [Effect::Call(_)]));
        // And the PTY is never resized with a read token.
        assert_eq!(app.desired_resize(), None);
    }
}

#[test]
fn colours_on_cells_and_no_colour() {
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let theme = Theme::default_theme();
    let fg = |role| theme.style(role).fg.unwrap_or(Color::Reset);
    use crate::tui::role::Role;
    let (x, y) = find(buf, "failed · exit 3").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(Role::StateFailed));
    let (x, y) = find(buf, "idle · protocol").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(Role::StateIdle));
    let (x, y) = find(buf, "lost · server restart").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(Role::StateLost));
    // The live terminal's own colours: ANSI, 256, RGB, attributes.
    let (x, y) = find(buf, "error").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Red);
    let (x, y) = find(buf, "12 tests").unwrap();
    assert_eq!(buf[(x - 2, y)].fg, Color::Green);
    assert!(buf[(x - 2, y)].modifier.contains(Modifier::BOLD));
    let (x, y) = find(buf, "indexed").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Indexed(208));
    let (x, y) = find(buf, "rgb").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Rgb(10, 20, 30));
    let (x, y) = find(buf, "inverse").unwrap();
    assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));

    // NO_COLOR: no cell has a colour; the selection is still visible.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme().no_color());
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    for y in 0..48 {
        for x in 0..160 {
            let c = &buf[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset),
                "({x},{y}) {:?} has a colour under NO_COLOR",
                c.symbol()
            );
        }
    }
    let (x, y) = find(buf, "› ").unwrap();
    assert!(buf[(x + 5, y)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn hostile_names_and_output_render_harmlessly() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        app.selected = Some("run-0007".into());
        app.sync_focus();
        let epoch = app.live.as_ref().unwrap().epoch;
        app.on_msg(Msg::Live {
            epoch,
            ev: LiveEvent::Output(vec![(1, false, HOSTILE_NAME.as_bytes().to_vec())]),
        });
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        crate::tui::widgets::testing::assert_no_controls(buf);
        let s = text(&t);
        assert!(
            !s.contains("cm0gLXJmIH4"),
            "the OSC 52 payload is not shown: {s}"
        );
        assert!(
            s.contains("⟨U+202E⟩"),
            "the bidi override is shown as a marker"
        );
        insta::assert_snapshot!(format!("cockpit_hostile_{w}x{h}"), s);
    }
}

#[test]
fn list_order_hiding_and_toggles() {
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    let order: Vec<&str> = app
        .view
        .iter()
        .map(|&i| app.runs[i].run_ref.as_str())
        .collect();
    // Pinned first, then by recent activity; snoozed and archived hidden.
    assert_eq!(
        order,
        [
            "run-0007", "run-0001", "run-0002", "run-0004", "run-0003", "run-0005", "run-0006"
        ]
    );
    app.dispatch(Action::ToggleSnoozed);
    assert!(app.view.iter().any(|&i| app.runs[i].run_ref == "run-0008"));
    app.dispatch(Action::ToggleArchived);
    assert!(app.view.iter().any(|&i| app.runs[i].run_ref == "run-0009"));
    // Moving the selection follows the list and refocuses the live stream.
    app.take_effects();
    app.focus = Pane::Sessions;
    app.on_key(ch('j'));
    assert_ne!(app.selected.as_deref(), Some("run-0001"));
    assert!(
        app.take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Attach { .. }))
    );
}

#[test]
fn empty_and_unreachable() {
    for (w, h) in SIZES {
        let mut app = App::new(
            "buildhost".into(),
            "~/proctor".into(),
            Keymap::defaults(),
            Theme::default_theme(),
        );
        app.now = now();
        app.on_msg(Msg::Runs(Ok(RunsPage {
            items: vec![],
            total: 0,
            counts: Counts::default(),
        })));
        app.on_msg(Msg::Runs(Err(
            "no server runs for this home (socket /tmp/x/run/server.sock). Start one with `proctor serve`"
                .into(),
        )));
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("cockpit_empty_unreachable_{w}x{h}"), text(&t));
    }
}

#[test]
fn the_mouse_selects_focuses_and_scrolls() {
    use ratatui::crossterm::event::{Event, MouseButton, MouseEvent, MouseEventKind};
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    draw(&mut app, 80, 24);
    let ev = |kind, column, row| {
        Event::Mouse(MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    // The list's rows start under its border and its column header.
    let row = app.areas.sessions.y + 2 + 2;
    app.on_event(ev(MouseEventKind::Down(MouseButton::Left), 10, row));
    assert_eq!(app.selected.as_deref(), Some("run-0002"));
    app.on_event(ev(MouseEventKind::ScrollDown, 10, row));
    assert_eq!(app.selected.as_deref(), Some("run-0004"));
    // A click in the live pane focuses it.
    let live = app.areas.live;
    app.on_event(ev(
        MouseEventKind::Down(MouseButton::Left),
        live.x + 2,
        live.y + 2,
    ));
    assert_eq!(app.focus, Pane::Live);
}

#[test]
fn tiny_screens_do_not_break_anything() {
    for w in [1u16, 2, 5, 10, 20, 40, 119, 120] {
        for h in [1u16, 2, 3, 5, 8, 12] {
            let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
            draw(&mut app, w, h);
            app.on_key(key(KeyCode::Enter));
            draw(&mut app, w, h);
            app.on_key(ch('?'));
            draw(&mut app, w, h);
        }
    }
}
