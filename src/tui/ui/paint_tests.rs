//! The screen writer ([`crate::tui::ansi::Painter`]) against the cockpit's own frames: a
//! frame of the live pane alone writes exactly what a whole frame writes, and a cockpit
//! following a narrating session draws no frame that changes nothing on the screen.

use chrono::Duration;
use ratatui::buffer::Buffer;
use serde_json::json;

use super::layout_tests::{Sink, demo_app, demo_runs};
use crate::runs::Stream;
use crate::tui::ansi::Painter;
use crate::tui::app::{App, LiveEvent, Mode, Msg};
use crate::tui::data::{Counts, RunsPage};

const W: u16 = 160;
const H: u16 = 48;

/// The demo's cockpit at 160×48, its focused PTY session (run-0002) streaming.
fn narrating_app() -> App {
    let mut app = demo_app(true);
    let epoch = app.live.slot.as_ref().expect("a focused session").epoch;
    app.on_msg(Msg::Live {
        epoch,
        ev: LiveEvent::Connected,
    });
    app.take_effects();
    app
}

/// The `n`th line of a narration, as the fakes write it (a coloured mark, text, CRLF).
fn narration(n: usize) -> Vec<u8> {
    const LINES: [&str; 5] = [
        "Reading src/parser.rs (412 lines)",
        "Running: cargo test --lib parser",
        "    test parser::tests::escaped_quotes ... \x1b[31mFAILED\x1b[0m",
        "The failure: an escaped quote inside a string ends the token early.",
        "    test result: \x1b[32mok\x1b[0m. 14 passed; 0 failed — ✓ 日本",
    ];
    format!("\x1b[1;35m●\x1b[0m {} #{n}\r\n", LINES[n % LINES.len()]).into_bytes()
}

fn output(app: &mut App, n: usize) {
    let epoch = app.live.slot.as_ref().expect("a focused session").epoch;
    app.on_msg(Msg::Live {
        epoch,
        ev: LiveEvent::Output(vec![(n as u64 + 2, Stream::Stdout, narration(n))]),
    });
}

fn written(s: &Sink) -> Vec<u8> {
    s.0.lock().unwrap().clone()
}

fn frame(app: &mut App, p: &mut Painter<Sink>) {
    p.paint(app).unwrap();
    app.dirty = false;
    app.live_dirty = false;
}

/// The cells a terminal fed `bytes` shows, against `buf`'s: the symbols, row by row.
fn assert_terminal_shows(bytes: &[u8], buf: &Buffer, what: &str) {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap();
    let mut vt = vt100::Parser::new(nz(H), nz(W), 0);
    vt.process(bytes);
    let screen = vt.screen();
    for y in 0..H {
        for x in 0..W {
            let Some(c) = screen.cell(y, x) else { continue };
            if c.is_wide_continuation() {
                continue;
            }
            let got = if c.contents().is_empty() {
                " "
            } else {
                c.contents()
            };
            assert_eq!(
                got,
                buf[(x, y)].symbol(),
                "{what}: cell ({x},{y}) on the terminal differs from the frame"
            );
        }
    }
}

/// A frame in which only the focused terminal's output changed draws the live pane alone;
/// what it writes is byte for byte what drawing the whole frame writes, in the plain, the
/// ASCII, the zoomed and the attached cockpit; and the bytes make the frame's screen.
#[test]
fn a_frame_of_the_live_pane_alone_writes_what_a_whole_frame_writes() {
    for case in ["plain", "ascii", "zoomed", "attached"] {
        let mut app = narrating_app();
        match case {
            "ascii" => app.ascii = true,
            "zoomed" => app.zoomed = true,
            "attached" => app.mode = Mode::Attach,
            _ => {}
        }
        let (sa, sb) = (Sink::default(), Sink::default());
        let mut alone = Painter::new(sa.clone(), W, H, None).unwrap();
        let mut whole = Painter::new(sb.clone(), W, H, None).unwrap();
        alone.paint(&mut app).unwrap();
        frame(&mut app, &mut whole);
        for n in 0..60 {
            output(&mut app, n);
            assert!(
                app.live_dirty && !app.dirty,
                "{case}: new output marks the live pane alone"
            );
            let (a0, b0) = (written(&sa).len(), written(&sb).len());
            alone.paint(&mut app).unwrap();
            whole.draw_whole_next();
            frame(&mut app, &mut whole);
            let (a, b) = (written(&sa), written(&sb));
            assert!(a.len() > a0, "{case}: frame {n} wrote nothing");
            assert_eq!(
                String::from_utf8_lossy(&a[a0..]),
                String::from_utf8_lossy(&b[b0..]),
                "{case}: frame {n}"
            );
        }
        assert_eq!(alone.counts.live, 60, "{case}: {:?}", alone.counts);
        assert_eq!(alone.counts.whole, 1, "{case}");
        assert_eq!(whole.counts.whole, 61, "{case}");
        assert!(alone.shown() == whole.shown(), "{case}");
        assert_terminal_shows(&written(&sa), alone.shown(), case);
        // Anything else drawn since makes the next frame whole again: a key.
        app.on_event(ratatui::crossterm::event::Event::Key(super::tests::ch('j')));
        if app.mode.is_attach() {
            continue;
        }
        output(&mut app, 99);
        alone.paint(&mut app).unwrap();
        assert_eq!(
            alone.counts.whole, 2,
            "{case}: a key and output draw the whole frame"
        );
    }
}

/// The live pane alone is not drawn where more than it may have changed: a dialog open, a
/// status message of several rows over the panes, the Gate view.
#[test]
fn the_live_pane_alone_only_where_nothing_covers_it() {
    let screen = ratatui::layout::Rect::new(0, 0, W, H);
    let mut app = narrating_app();
    let mut p = Painter::new(Sink::default(), W, H, None).unwrap();
    frame(&mut app, &mut p);
    assert!(super::live_alone(&app, screen).is_some());
    app.error("x ".repeat(400));
    assert_eq!(super::live_alone(&app, screen), None, "a long message");
    app.status = None;
    app.show_tab(crate::tui::app::Tab::Gate);
    frame(&mut app, &mut p);
    assert_eq!(super::live_alone(&app, screen), None, "the gate view");
}

/// The list the demo's server answers, its narrating sessions' output counters at `n`.
fn poll(n: i64) -> Msg {
    let mut runs = demo_runs(true);
    for r in &mut runs {
        if let Some(o) = &mut r.output {
            let v = json!({"first_seq": 1, "next_seq": 40 + n, "bytes": 900 + 60 * n,
                "last_at": (crate::tui::data::instant("2026-11-30T11:59:58.000Z").unwrap()
                    + Duration::seconds(n)).to_rfc3339()});
            *o = serde_json::from_value(v).unwrap();
        }
    }
    let counts = Counts::of(&runs);
    Msg::Runs(Ok(RunsPage {
        total: runs.len(),
        items: runs,
        counts,
    }))
}

/// What the demo's cockpit receives while a session narrates (a line a second, the list
/// polled with only the output counters moving, the same answer again, the clock going
/// on) makes frames only when something on the screen changes: no frame writes nothing.
#[test]
fn frames_come_only_from_visible_change() {
    let mut app = narrating_app();
    let sink = Sink::default();
    let mut p = Painter::new(sink.clone(), W, H, None).unwrap();
    frame(&mut app, &mut p);
    let start = app.now;
    let mut frames = 0;
    let mut step = |app: &mut App, p: &mut Painter<Sink>| {
        if app.wants_frame() {
            frames += 1;
            frame(app, p);
        }
    };
    for n in 0..90 {
        let now = start + Duration::seconds(n);
        // The event loop's clock: a wake when a shown text changes with time.
        if app.next_clock_change().is_some_and(|t| t <= now) {
            app.on_clock(now);
        }
        app.now = now;
        step(&mut app, &mut p);
        app.on_msg(poll(n));
        step(&mut app, &mut p);
        app.on_msg(poll(n));
        step(&mut app, &mut p);
        output(&mut app, n as usize);
        step(&mut app, &mut p);
    }
    assert!(frames >= 90, "every line is drawn: {frames} frames");
    assert_eq!(
        p.counts.unchanged, 0,
        "frames drawn with nothing visible changed ({:?})",
        p.counts
    );
    assert!(p.counts.live >= 80, "{:?}", p.counts);
}
