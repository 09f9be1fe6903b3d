//! The sessions list's columns and the screen's split at 80×24, 120×40 and 160×48, the
//! status line's long messages, and the default theme's colours on the wire.

use chrono::{DateTime, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use serde_json::{Value, json};

use super::tests::{fixture_app, fixture_gate};
use crate::auth::{Principal, Role as TokenRole};
use crate::tui::app::{App, Msg};
use crate::tui::data::{Counts, RunView, RunsPage, WhoAmI, instant};
use crate::tui::evidence::CandidateView;
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (160, 48)];

fn now() -> DateTime<Utc> {
    instant("2026-11-30T12:00:00.000Z").unwrap()
}

fn run(r#ref: &str, extra: Value) -> RunView {
    super::tests::run_at(r#ref, "11:58", extra)
}

/// The demo's six sessions, as `proctor demo` lists them (src/demo.rs), the worktree one
/// included only when `worktree`.
pub(super) fn demo_runs(worktree: bool) -> Vec<RunView> {
    let out = |last: &str| {
        json!({"first_seq": 1, "next_seq": 40, "bytes": 900,
            "last_at": format!("2026-11-30T11:59:{last}.000Z")})
    };
    let mut runs = vec![
        run(
            "run-0002",
            json!({"tool": "gemini", "profile": "gemini",
                "name": "lexer refactor (narrated)", "output": out("59")}),
        ),
        run(
            "run-0001",
            json!({"name": "parser fix (narrated)", "output": out("58")}),
        ),
        run(
            "run-0005",
            json!({"tool": "grok", "profile": "grok", "state": "failed", "exit_code": 3,
                "name": "flaky network test", "ended_at": "2026-11-30T11:58:30.000Z"}),
        ),
        run(
            "run-0004",
            json!({"tool": "opencode", "profile": "opencode", "state": "stopped",
                "exit_code": 0, "name": "release notes",
                "ended_at": "2026-11-30T11:58:20.000Z"}),
        ),
        run(
            "run-0003",
            json!({"tool": "codex", "profile": "codex", "transport": "pipe", "state": "idle",
                "name": "explain the failing test"}),
        ),
    ];
    if worktree {
        runs.insert(
            2,
            run(
                "run-0006",
                json!({"tool": "codex", "profile": "codex", "transport": "pipe",
                    "state": "idle", "name": "lexer escapes (worktree)",
                    "worktree_branch": "proctor/run-0006"}),
            ),
        );
    }
    runs
}

pub(super) fn demo_app(worktree: bool) -> App {
    let mut app = App::new(
        "vm".into(),
        "/tmp/proctor-demo".into(),
        Keymap::defaults(),
        Theme::default_theme(),
    );
    app.who = Some(WhoAmI {
        token_id: "tok-1".into(),
        name: "owner".into(),
        role: TokenRole::Admin,
        principal: Principal::Person,
    });
    app.now = now();
    let runs = demo_runs(worktree);
    let counts = Counts::of(&runs);
    app.on_msg(Msg::Runs(Ok(RunsPage {
        total: runs.len(),
        items: runs,
        counts,
    })));
    app.sessions.selected = Some("run-0002".into());
    app.sync_focus();
    if worktree {
        app.on_msg(Msg::Candidates(Ok(vec![CandidateView {
            id: "cand-0001".into(),
            run_ref: "run-0006".into(),
            branch: "proctor/run-0006".into(),
            bound_at: "2026-11-30T11:59:00.000Z".into(),
            identity_digest: "format=candidate-identity/1 digest=candidate-identity-sha256/1 \
                              3f2a9c0d1e4b5a6978877665544332211000ffeeddccbbaa9988776655443322"
                .into(),
        }])));
        app.on_msg(Msg::Gate {
            candidate: "cand-0001".into(),
            result: Ok(fixture_gate("cand-0001", "run-0006", "awaiting_human")),
        });
    }
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

/// The rows of `area` as text.
fn rows(buf: &Buffer, area: Rect) -> Vec<String> {
    (area.y..area.bottom())
        .map(|y| {
            (area.x..area.right())
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

/// The sessions list's header row (its first inner row).
fn list_header(app: &App, buf: &Buffer) -> String {
    let inner = super::inner(app.areas.sessions);
    rows(buf, Rect { height: 1, ..inner }).remove(0)
}

#[test]
fn the_sessions_list_uses_its_width_at_three_sizes() {
    for (w, h) in SIZES {
        let mut app = demo_app(true);
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        crate::tui::widgets::testing::assert_no_controls(buf);
        insta::assert_snapshot!(format!("sessions_demo_{w}x{h}"), format!("{}", t.backend()));
        let list = rows(buf, app.areas.sessions).join("\n");
        let header = list_header(&app, buf);
        if w >= 120 {
            // The name grows first: every demo name is whole once the screen has the room.
            for name in [
                "lexer refactor (narrated)",
                "parser fix (narrated)",
                "explain the failing test",
                "lexer escapes (worktree)",
            ] {
                assert!(list.contains(name), "{w}x{h}: {name:?} is cut:\n{list}");
            }
            // The age shows when there is room, and the state keeps its word.
            assert!(header.contains("AGE"), "{w}x{h}: no age column: {header:?}");
            if w == 120 {
                assert!(list.contains("running · output"), "{w}x{h}:\n{list}");
            }
            assert!(list.contains("awaiting"), "{w}x{h}:\n{list}");
        }
        // A cut never leaves a lone word of a state: `running · o…` says nothing.
        assert!(!list.contains("· o…"), "{w}x{h}:\n{list}");
        // At 80×24 the list shows five of the six runs (the selection scrolls to the sixth),
        // and the live terminal keeps more rows than the list and the events.
        if (w, h) == (80, 24) {
            let shown = list.matches("run-000").count();
            assert!(shown >= 5, "{w}x{h}: {shown} runs in view:\n{list}");
            let live = super::inner(app.areas.live).height;
            let events = super::inner(app.areas.events).height;
            assert!(
                live >= 7 && live > events,
                "{w}x{h}: live {live}, events {events}"
            );
        }
        // The live terminal keeps the screen's width (stacked), or 80 columns beside the
        // list.
        if w < 160 {
            assert_eq!(app.areas.live.width, w, "{w}x{h}");
        } else {
            assert!(super::inner(app.areas.live).width >= 80, "{w}x{h}");
        }
    }
}

#[test]
fn typing_a_filter_does_not_resize_the_live_terminal() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    for (w, h) in SIZES.into_iter().chain([(200, 60)]) {
        let mut app = demo_app(true);
        draw(&mut app, w, h);
        let before = (app.live.inner, app.areas);
        for c in ['/', 'l', 'e', 'x'] {
            app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            draw(&mut app, w, h);
            assert!(app.sessions.view.len() < app.sessions.runs.len() || c == '/' || c == 'l');
            assert_eq!((app.live.inner, app.areas), before, "{w}x{h} after {c:?}");
        }
    }
}

#[test]
fn a_column_no_row_has_a_value_is_not_drawn() {
    for (w, h) in SIZES {
        // No worktree run and no candidate: no gate to show.
        let mut app = demo_app(false);
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        let header = list_header(&app, buf);
        assert!(
            !header.contains("GATE"),
            "{w}x{h}: empty gate column: {header:?}"
        );
        insta::assert_snapshot!(
            format!("sessions_no_gate_{w}x{h}"),
            format!("{}", t.backend())
        );
        // The same list with a worktree run shows the gate.
        let mut app = demo_app(true);
        let t = draw(&mut app, w, h);
        let header = list_header(&app, t.backend().buffer());
        assert!(
            header.contains("GATE"),
            "{w}x{h}: no gate column: {header:?}"
        );
    }
    // Nothing pinned, snoozed, archived or done: the marks column is only the selection's.
    let mut app = demo_app(false);
    let t = draw(&mut app, 120, 40);
    let header = list_header(&app, t.backend().buffer());
    assert!(header.starts_with("  REF"), "{header:?}");
    // No run is a demo one: no demo column.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    for r in &mut app.sessions.runs {
        r.demo = false;
    }
    let t = draw(&mut app, 160, 48);
    let list = rows(t.backend().buffer(), app.areas.sessions).join("\n");
    assert!(!list.contains("demo"), "{list}");
}

/// A start refusal as the server words it, with its remedy.
const REFUSAL: &str = "cannot start the session: 422: tool codex is not installed: no \
                       executable named `codex` on PATH (/usr/local/bin:/usr/bin:/bin). \
                       Remedy: install codex for this user (npm install -g @openai/codex), \
                       or choose another tool in the new-session form";

#[test]
fn a_long_status_message_is_readable_in_full_at_80_columns() {
    for (w, h) in [(80u16, 24u16), (120, 40), (100, 30)] {
        let mut app = demo_app(true);
        let before = draw(&mut app, w, h);
        let live_before = app.live.inner;
        let areas_before = app.areas;
        drop(before);
        app.error(REFUSAL);
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        // The panes keep their size (the PTY is not resized by a message).
        assert_eq!(app.live.inner, live_before, "{w}x{h}");
        assert_eq!(app.areas, areas_before, "{w}x{h}");
        let screen = rows(buf, buf.area);
        // The message's rows, from the bottom up, joined.
        let start = screen
            .iter()
            .position(|l| l.contains("cannot start the session"))
            .unwrap_or_else(|| panic!("{w}x{h}: no message:\n{}", screen.join("\n")));
        let msg: Vec<&str> = screen[start..].iter().map(|l| l.trim()).collect();
        let joined = msg.join(" ");
        let flat = crate::text::one_line(REFUSAL, usize::MAX);
        assert!(
            joined.contains(&flat),
            "{w}x{h}: the message is not whole:\n{}",
            screen[start..].join("\n")
        );
        for l in &msg {
            assert!(!l.ends_with('…'), "{w}x{h}: {l:?}");
        }
        if w == 80 {
            insta::assert_snapshot!(
                format!("status_long_error_{w}x{h}"),
                format!("{}", t.backend())
            );
        }
        // A short message keeps one line.
        app.info("renamed run-0002");
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        let screen = rows(buf, buf.area);
        assert!(screen[usize::from(h) - 1].contains("renamed run-0002"));
        assert!(!screen[usize::from(h) - 2].contains("renamed"));
    }
    // A screen too short for the message shows half its height of it, and says it is cut.
    let mut app = demo_app(true);
    app.error(REFUSAL);
    let t = draw(&mut app, 40, 12);
    let buf = t.backend().buffer();
    let screen = rows(buf, buf.area);
    assert!(screen[6].starts_with("──"), "{}", screen.join("\n"));
    assert!(screen[7].contains("cannot start"), "{}", screen.join("\n"));
    assert!(
        screen[11].trim_end().ends_with('…'),
        "{}",
        screen.join("\n")
    );
}

/// Every colour the default theme puts in a buffer is one of the 16 ANSI colours or the
/// terminal's own.
fn assert_ansi16(buf: &Buffer, what: &str) {
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            for col in [c.fg, c.bg] {
                assert!(
                    !matches!(col, Color::Indexed(_) | Color::Rgb(..)),
                    "{what}: cell ({x},{y}) {:?} has {col:?}",
                    c.symbol()
                );
            }
        }
    }
}

/// What the cockpit's screen writer writes for a frame, as bytes.
fn wire_bytes(app: &mut App, w: u16, h: u16) -> Vec<u8> {
    let sink = Sink::default();
    let mut p = crate::tui::ansi::Painter::new(sink.clone(), w, h, None).unwrap();
    p.paint(app).unwrap();
    drop(p);
    sink.0.lock().unwrap().clone()
}

/// A writer whose bytes the test reads back.
#[derive(Clone, Default)]
pub(super) struct Sink(pub(super) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The parameters of every SGR sequence (`ESC [ … m`) in `bytes`.
fn sgr_params(bytes: &[u8]) -> Vec<Vec<u16>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == 0x1b && bytes[i + 1] == b'[' {
            let mut j = i + 2;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b';') {
                j += 1;
            }
            if j < bytes.len() && bytes[j] == b'm' {
                let p = std::str::from_utf8(&bytes[i + 2..j]).unwrap();
                out.push(p.split(';').map(|n| n.parse().unwrap_or(0)).collect());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn the_default_theme_writes_only_the_16_ansi_colours() {
    // The demo's screen: no agent output with colours of its own.
    for (w, h) in SIZES {
        let mut app = demo_app(true);
        let t = draw(&mut app, w, h);
        assert_ansi16(t.backend().buffer(), &format!("{w}x{h}"));
        let bytes = wire_bytes(&mut demo_app(true), w, h);
        for p in sgr_params(&bytes) {
            assert!(
                !p.windows(2).any(|w| matches!(w, [38 | 48, 5 | 2])),
                "{w}x{h}: a 256-colour or truecolor code {p:?} in {}",
                String::from_utf8_lossy(&bytes)
            );
        }
        for bad in ["38;5;", "48;5;", "38;2;", "48;2;"] {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(bad),
                "{w}x{h}: {bad}"
            );
        }
        // The colours are there, as 16-colour codes: green for running, yellow for keys.
        let s = String::from_utf8_lossy(&bytes);
        assert!(s.contains("\x1b[32m") || s.contains(";32m"), "{s}");
        assert!(s.contains("33m"), "{s}");
    }
    // Every dialog and view of the fixture, in the default theme.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    // Its live pane holds an agent's own 256-colour and truecolor text, which is the
    // agent's, not the theme's: clear it.
    app.live.slot = None;
    for tab in crate::tui::app::Tab::ALL {
        app.show_tab(tab);
        let t = draw(&mut app, 160, 48);
        assert_ansi16(t.backend().buffer(), &format!("{tab:?}"));
    }
    // NO_COLOR writes no colour at all.
    let mut app = demo_app(true);
    app.theme = Theme::default_theme().no_color();
    let bytes = wire_bytes(&mut app, 120, 40);
    for p in sgr_params(&bytes) {
        assert!(
            !p.iter()
                .any(|n| matches!(n, 30..=38 | 40..=48 | 90..=97 | 100..=107)),
            "NO_COLOR: a colour code {p:?} in {}",
            String::from_utf8_lossy(&bytes)
        );
    }
}
