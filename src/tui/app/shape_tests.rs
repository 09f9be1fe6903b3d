//! The cockpit's shape: every dialog answers through the one [`Dialog`] interface, the
//! layout and each list's scroll are computed in the state ([`App::lay_out`]) before any
//! frame is drawn, and drawing ([`ui::render`]) reads the state without changing it.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::Rect;
use serde_json::{Value, json};

use super::*;
use crate::tui::action::Needs;
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;
use crate::tui::ui;
use crate::tui::ui::tests::{ch, fixture_app, fixture_evidence, fixture_intents, key};
use crate::tui::widgets::{Dialog, Outcome};

fn runs(n: u32) -> Vec<RunView> {
    (1..=n)
        .map(|i| {
            serde_json::from_value(json!({
                "ref": format!("run-{i:04}"), "tool": "claude", "profile": "claude",
                "transport": "pty", "workspace": "/home/op/src/app", "demo": true,
                "created_at": format!("2026-11-30T10:{:02}:00.000Z", i % 60),
                "state": "stopped", "generation": 1,
            }))
            .unwrap()
        })
        .collect()
}

fn app_with(n: u32) -> App {
    super::tests::app_with(runs(n))
}

/// `n` intents made from the fixture's: every third one blocked (two rows), the others
/// awaiting authority.
fn intents(n: u32) -> Vec<IntentView> {
    let fx = fixture_intents();
    (1..=n)
        .map(|i| {
            let mut it = if i % 3 == 0 {
                fx[1].clone()
            } else {
                fx[2].clone()
            };
            it.id = format!("int-{i:04}");
            it
        })
        .collect()
}

fn receipts(n: u32) -> Vec<ReceiptItem> {
    let v: Vec<Value> = (1..=n)
        .map(|i| {
            json!({
                "id": format!("rcpt-{i:04}"), "kind": "candidate.bound",
                "subject": "cand-0001", "at": "2026-11-30T11:20:00.000Z",
                "file": format!("/home/op/.proctor/data/receipts/rcpt-{i:04}.json"),
            })
        })
        .collect();
    serde_json::from_value(Value::Array(v)).unwrap()
}

/// `sel` is within the `rows` rows from `offset`.
fn in_view(sel: usize, offset: usize, rows: usize) -> bool {
    rows > 0 && sel >= offset && sel < offset + rows
}

/// A frame drawn from a shared borrow of the app.
fn render(app: &App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::render(f, app)).unwrap();
    t.backend().buffer().clone()
}

fn screen_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

#[test]
fn the_layout_keeps_each_selection_in_view_before_any_frame_is_drawn() {
    let mut app = app_with(40);
    app.lay_out(Rect::new(0, 0, 80, 24));
    let rows = app.sessions.rows;
    assert!(rows > 0 && rows < 40, "{rows}");
    assert_eq!(app.sessions.offset, 0);
    // To the last run: the list scrolls so that it is on its last row.
    app.on_key(key(KeyCode::End));
    app.lay_out(Rect::new(0, 0, 80, 24));
    let sel = app.selected_index().unwrap();
    assert_eq!(sel, 39);
    assert!(in_view(sel, app.sessions.offset, rows));
    assert_eq!(app.sessions.offset, 40 - rows);
    // What the state says is what is drawn: the selected run's row is on the screen.
    let shown = screen_text(&render(&app, 80, 24));
    let selected = app.sessions.selected.clone().unwrap();
    assert!(shown.contains(&format!("› {selected}")), "{shown}");
    // A taller screen alone (no key) shows more rows; the selection stays in view.
    app.lay_out(Rect::new(0, 0, 160, 48));
    assert!(app.sessions.rows >= rows);
    assert!(in_view(39, app.sessions.offset, app.sessions.rows));
    // Back to the top.
    app.on_key(key(KeyCode::Home));
    app.lay_out(Rect::new(0, 0, 80, 24));
    assert_eq!(app.sessions.offset, 0);

    // The intents: a blocked one takes two rows; the selected one's rows are all in view.
    app.on_msg(Msg::feed::<IntentsPane>(Ok(intents(30))));
    app.on_key(ch('3'));
    app.lay_out(Rect::new(0, 0, 80, 24));
    let rows = app.intents.rows;
    assert!(rows > 0 && rows < 30, "{rows}");
    app.on_key(key(KeyCode::End));
    app.lay_out(Rect::new(0, 0, 80, 24));
    let lines = app.intents.lines();
    let sel = app
        .intent_list()
        .iter()
        .position(|i| Some(&i.id) == app.selected_intent().map(|s| &s.id))
        .unwrap();
    assert_eq!(sel, 29);
    let first = lines.iter().position(|l| l.0 == sel).unwrap();
    let last = lines.iter().rposition(|l| l.0 == sel).unwrap();
    assert!(
        in_view(first, app.intents.offset, rows) && in_view(last, app.intents.offset, rows),
        "rows {first}..={last}, offset {}, {rows} rows",
        app.intents.offset
    );
    let shown = screen_text(&render(&app, 80, 24));
    let id = app.selected_intent().unwrap().id.clone();
    assert!(shown.contains(&format!("› {id}")), "{shown}");

    // The receipts.
    app.on_msg(Msg::feed::<ReceiptsPane>(Ok(receipts(25))));
    app.on_key(ch('4'));
    app.lay_out(Rect::new(0, 0, 80, 24));
    let rows = app.receipts.listing.rows;
    assert!(rows > 0 && rows < 25, "{rows}");
    app.on_key(key(KeyCode::End));
    app.lay_out(Rect::new(0, 0, 80, 24));
    let sel = app
        .receipt_list()
        .iter()
        .position(|r| Some(&r.id) == app.selected_receipt().map(|s| &s.id))
        .unwrap();
    assert_eq!(sel, 24);
    assert!(in_view(sel, app.receipts.listing.offset, rows));
    let shown = screen_text(&render(&app, 80, 24));
    let id = app.selected_receipt().unwrap().id.clone();
    assert!(shown.contains(&format!("› {id}")), "{shown}");
}

#[test]
fn the_gate_scroll_stays_within_its_graph_at_every_size() {
    let mut app = fixture_app(crate::auth::Role::Admin, Theme::default_theme());
    fixture_evidence(&mut app);
    app.on_key(ch('2'));
    for (w, h) in [(80, 24), (160, 48), (60, 14)] {
        app.lay_out(Rect::new(0, 0, w, h));
        // To the end of the graph, then one back: one row up from the last page.
        app.on_key(key(KeyCode::End));
        app.lay_out(Rect::new(0, 0, w, h));
        let end = app.gate.scroll;
        let inner = ui::inner(app.areas.live);
        let len = ui::gate::rows_len(&app, usize::from(inner.width.saturating_sub(1)));
        assert_eq!(app.gate.rows, usize::from(inner.height), "{w}×{h}");
        assert_eq!(end, len.saturating_sub(app.gate.rows), "{w}×{h}");
        app.on_key(key(KeyCode::Up));
        app.lay_out(Rect::new(0, 0, w, h));
        assert_eq!(app.gate.scroll, end.saturating_sub(1), "{w}×{h}");
        app.on_key(key(KeyCode::Home));
    }
}

/// What the layout leaves in the state.
fn laid_out(app: &App) -> (ui::Areas, Rect, usize, usize, usize, usize) {
    (
        app.areas,
        app.live.inner,
        app.sessions.offset,
        app.intents.offset,
        app.receipts.listing.offset,
        app.gate.scroll,
    )
}

#[test]
fn drawing_reads_the_state_and_changes_none_of_it() {
    let mut app = fixture_app(crate::auth::Role::Admin, Theme::default_theme());
    fixture_evidence(&mut app);
    for tab in ['1', '2', '3', '4'] {
        app.on_key(ch(tab));
        for (w, h) in [(80, 24), (160, 48)] {
            app.lay_out(Rect::new(0, 0, w, h));
            let before = laid_out(&app);
            let shared: &App = &app;
            let a = render(shared, w, h);
            let b = render(shared, w, h);
            assert_eq!(a, b, "{tab} at {w}×{h}");
            let after = laid_out(&app);
            assert_eq!(before, after, "{tab} at {w}×{h}");
        }
    }
}

/// Esc, as every dialog reads it.
fn esc<D: Dialog>(d: &mut D, km: &Keymap) -> Outcome<D::Output> {
    d.handle_key(&key(KeyCode::Esc), km)
}

#[test]
fn every_dialog_the_approval_included_answers_through_one_interface() {
    use crate::tui::widgets::{
        approval::Approval, confirm::Confirm, duration::SnoozePicker, help::Help,
        new_session::NewSessionForm, palette::Palette, prompt::Prompt,
    };
    let km = Keymap::defaults();
    let now = chrono::DateTime::parse_from_rfc3339("2026-03-10T14:05:00+01:00").unwrap();
    assert_eq!(
        esc(&mut Help::new(&km, &[Context::Global]), &km),
        Outcome::Cancel
    );
    let mut palette = Palette::new(&km, &[Context::Global], Needs::Admin);
    assert_eq!(palette.contexts(), &[Context::Palette, Context::Modal]);
    assert_eq!(esc(&mut palette, &km), Outcome::Cancel);
    let mut prompt = Prompt::new("Rename run-0001", "name");
    prompt.handle_paste("fix");
    assert_eq!(
        prompt.handle_key(&key(KeyCode::Enter), &km),
        Outcome::Submit("fix".to_string())
    );
    assert_eq!(esc(&mut prompt, &km), Outcome::Cancel);
    let mut confirm = Confirm::new("Stop run-0001?", "It stops.", "Stop");
    assert_eq!(confirm.contexts(), &[Context::Modal]);
    assert_eq!(esc(&mut confirm, &km), Outcome::Cancel);
    assert_eq!(
        esc(&mut SnoozePicker::new("Snooze run-0001", now), &km),
        Outcome::Cancel
    );
    assert_eq!(
        esc(&mut NewSessionForm::new(vec!["claude".into()], "/w"), &km),
        Outcome::Cancel
    );
    // The approval: a first Esc before the server answered asks for the refusal and keeps
    // the dialog; a second closes it. A paste reaches no field.
    let mut approval = Approval::new("int-0001");
    approval.handle_paste("0123456789abcdef");
    assert_eq!(approval.typed(), "");
    assert_eq!(esc(&mut approval, &km), Outcome::Continue);
    assert_eq!(esc(&mut approval, &km), Outcome::Cancel);
    assert_eq!(approval.contexts(), &[Context::Modal]);
}

#[test]
fn the_cockpit_routes_keys_and_pastes_to_the_open_dialog_through_its_interface() {
    let mut app = fixture_app(crate::auth::Role::Admin, Theme::default_theme());
    // Rename: the pasted text reaches the prompt's field through the dialog interface.
    app.on_key(ch('R'));
    app.on_paste(" (pasted)");
    let Mode::Modal(m) = &app.mode else {
        panic!("no dialog")
    };
    let Modal::Prompt { dialog, .. } = &**m else {
        panic!("another dialog")
    };
    assert!(dialog.value().ends_with(" (pasted)"), "{}", dialog.value());
    app.on_key(key(KeyCode::Esc));
    assert!(app.mode.is_normal());
    // The palette's keys are looked up in its own context first.
    app.on_key(ch(':'));
    assert_eq!(app.contexts(), vec![Context::Palette, Context::Modal]);
    app.on_key(key(KeyCode::Esc));
    assert!(app.mode.is_normal());
}

/// The rows of a frame that hold `needle`.
fn rows_with(buf: &ratatui::buffer::Buffer, needle: &str) -> usize {
    screen_text(buf)
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

#[test]
fn a_dialogs_pages_and_scroll_are_laid_out_in_its_state_and_drawing_changes_none() {
    use crate::tui::widgets::approval::{Approval, Field, Reply};
    use crate::tui::widgets::help::Help;
    let km = Keymap::defaults();
    let theme = Theme::default_theme();
    let draw_dialog = |d: &dyn Fn(&mut ratatui::Frame), w: u16, h: u16| {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| d(f)).unwrap();
        t.backend().buffer().clone()
    };

    // Help: a page is what the dialog shows at the size it was laid out for.
    let contexts = [Context::Pane(Pane::Sessions), Context::Global];
    let mut small = Help::new(&km, &contexts);
    let mut tall = Help::new(&km, &contexts);
    // Drawing alone changes nothing: pgdn then moves by the page of no size.
    let before = small.scroll();
    draw_dialog(&|f| small.render(f, f.area(), &theme, &km), 80, 24);
    assert_eq!(small.scroll(), before);
    small.lay_out(Rect::new(0, 0, 80, 18));
    tall.lay_out(Rect::new(0, 0, 80, 30));
    small.handle_key(&key(KeyCode::PageDown), &km);
    tall.handle_key(&key(KeyCode::PageDown), &km);
    assert!(small.scroll() > 0 && tall.scroll() > small.scroll());

    // The approval: the field opens once the last page is laid out to be shown, and
    // drawing alone does not open it.
    let mut one = Approval::new("int-0002");
    one.show("Authorise publication\n\none short page\n".into());
    let (tx, _rx1) = std::sync::mpsc::channel();
    one.ask(Field::Revision, "Revision: ".into(), Reply::new(tx));
    draw_dialog(&|f| one.render(f, f.area(), &theme, &km), 100, 24);
    assert!(!one.seen_all(), "drawing opened the field");
    one.lay_out(Rect::new(0, 0, 100, 24));
    assert!(one.seen_all());
    let mut a = Approval::new("int-0001");
    let body: String = (1..=60)
        .map(|i| format!("line {i} of the text\n"))
        .collect();
    a.show(format!("Authorise publication\n\n{body}"));
    let (tx, _rx) = std::sync::mpsc::channel();
    a.ask(Field::Revision, "Revision: ".into(), Reply::new(tx));
    let frame = draw_dialog(&|f| a.render(f, f.area(), &theme, &km), 100, 24);
    assert!(!a.seen_all(), "drawing opened the field");
    assert_eq!(rows_with(&frame, "(read every page first)"), 1);
    let mut pages = 1;
    a.lay_out(Rect::new(0, 0, 100, 24));
    while !a.seen_all() {
        a.handle_key(&key(KeyCode::Enter), &km);
        a.lay_out(Rect::new(0, 0, 100, 24));
        pages += 1;
        assert!(pages < 20, "the last page never came");
    }
    assert!(pages > 1);
    let frame = draw_dialog(&|f| a.render(f, f.area(), &theme, &km), 100, 24);
    assert_eq!(rows_with(&frame, "line 60 of the text"), 1);
    assert_eq!(rows_with(&frame, "Revision: ▏"), 1);
    a.handle_key(&ch('4'), &km);
    assert_eq!(a.typed(), "4");
}

#[test]
fn the_palettes_list_keeps_its_rows_still_while_the_selection_moves_within_them() {
    use crate::tui::widgets::palette::Palette;
    let km = Keymap::defaults();
    let theme = Theme::default_theme();
    let screen = Rect::new(0, 0, 80, 24);
    let mut p = Palette::new(
        &km,
        &[Context::Pane(Pane::Sessions), Context::Global],
        Needs::Admin,
    );
    // The row of the screen the selection marker is on, each frame laid out then drawn.
    let frame = |p: &mut Palette| {
        p.lay_out(screen);
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| p.render(f, f.area(), &theme, &km)).unwrap();
        let text = screen_text(t.backend().buffer());
        text.lines().position(|l| l.contains('▸')).unwrap()
    };
    let top = frame(&mut p);
    let mut row = top;
    for _ in 0..25 {
        p.handle_key(&key(KeyCode::Down), &km);
        row = frame(&mut p);
    }
    // Far down the list: the selection is on the list's last row.
    assert!(row > top);
    // Three up: the rows stay, the selection moves up three of them.
    for _ in 0..3 {
        p.handle_key(&key(KeyCode::Up), &km);
    }
    assert_eq!(frame(&mut p), row - 3);
}
