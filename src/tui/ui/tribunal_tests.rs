//! The Tribunal view (`5`) at 80×24 and 160×48: the seats of the focused run's latest
//! candidate's latest round (not another candidate's), each state drawn in its role, the
//! round and the trend of new findings; Enter opens a seat's routing and findings in a
//! dialog; untrusted text drawn as markers.

use ratatui::crossterm::event::KeyCode;

use super::tests::{HOSTILE_NAME, SIZES, ch, draw, fixture_app, fixture_evidence, key, text};
use crate::auth::Role as TokenRole;
use crate::demo::tribunal::{Spec, sample_round};
use crate::evidence::store::DigestRef;
use crate::tribunal::model::{Judged, Round};
use crate::tui::app::{Effect, Modal, Mode, Msg, Pane, Tab, TribunalPane};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

fn round(id: &str, number: u32, candidate: &str, in_progress: bool, earlier: Vec<u32>) -> Round {
    let home = crate::home::Home::resolve_with(Some(std::path::Path::new("/tmp/ph-fixture")), None)
        .unwrap();
    sample_round(
        &home,
        &Spec {
            id: id.into(),
            number,
            candidate: candidate.into(),
            run: "run-0003".into(),
            identity: DigestRef {
                recipe: "candidate-identity-sha256/1".into(),
                digest: "3f".repeat(32),
            },
            in_progress,
            earlier,
        },
    )
}

/// Round 1 (done) and round 2 (in progress) of cand-0002, the latest of run-0003; a round
/// of cand-0001 that must not show; a hostile claim in round 2's contract seat.
fn rounds() -> Vec<Round> {
    let mut r2 = round("rnd-0003", 2, "cand-0002", true, vec![3]);
    if let Some(Judged::Verdict { verdict, .. }) = &mut r2.seats[1].judged {
        verdict.findings[0].claim = format!("claim {HOSTILE_NAME}");
    }
    vec![
        round("rnd-0001", 1, "cand-0002", false, vec![]),
        round("rnd-0002", 1, "cand-0001", false, vec![]),
        r2,
    ]
}

fn tribunal_app() -> crate::tui::app::App {
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    fixture_evidence(&mut app);
    app.sessions.selected = Some("run-0003".into());
    app.sync_focus();
    app.take_effects();
    app
}

#[test]
fn the_seats_of_the_focused_runs_candidate_at_both_sizes() {
    for (w, h) in SIZES {
        let mut app = tribunal_app();
        app.on_key(ch('5'));
        assert_eq!(app.tab, Tab::Tribunal);
        assert_eq!(app.focus, Pane::Tribunal);
        assert!(
            app.take_effects().iter().any(|e| matches!(e,
                Effect::WatchView(v) if v.shown.contains(&Pane::Tribunal))),
            "the evidence task is told to fetch the rounds while the view is shown"
        );
        // Before the first answer: loading.
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("loading"), "{s}");
        app.on_msg(Msg::feed::<TribunalPane>(Ok(rounds())));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("Tribunal cand-0002"), "{s}");
        assert!(s.contains("round 2 of 2"), "{s}");
        assert!(s.contains("3 → 3 so far"), "{s}");
        assert!(s.contains("generalist"), "all eight seats are in view: {s}");
        for state in ["pass", "refuse", "pending", "unverified", "rejected"] {
            assert!(s.contains(state), "{state}: {s}");
        }
        assert!(s.contains("google fake-pass"), "{s}");
        assert!(s.contains("meta fake-pass@local"), "{s}");
        // The round of the other candidate is not the one shown.
        assert!(!s.contains("rnd-0002"), "{s}");
        insta::assert_snapshot!(format!("tribunal_in_progress_{w}x{h}"), s);
    }
}

#[test]
fn seat_states_are_drawn_in_their_roles() {
    let theme = Theme::default_theme();
    let mut app = tribunal_app();
    app.show_tab(Tab::Tribunal);
    app.on_msg(Msg::feed::<TribunalPane>(Ok(rounds())));
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let area = app.areas.live;
    for (word, role) in [
        ("refuse ", Role::Error),
        ("unverified", Role::Warning),
        ("rejected", Role::Warning),
    ] {
        let (x, y) = super::tests::find_in(buf, area, word).unwrap_or_else(|| panic!("{word}"));
        assert_eq!(Some(buf[(x, y)].fg), theme.style(role).fg, "{word}");
    }
}

#[test]
fn enter_opens_a_seats_routing_and_findings_sanitised() {
    for (w, h) in SIZES {
        let mut app = tribunal_app();
        app.show_tab(Tab::Tribunal);
        app.on_msg(Msg::feed::<TribunalPane>(Ok(rounds())));
        draw(&mut app, w, h);
        // The second seat: contract, refused with a hostile claim.
        app.on_key(ch('j'));
        app.on_key(key(KeyCode::Enter));
        let Mode::Modal(m) = &app.mode else {
            panic!("no dialog opened")
        };
        let Modal::Seat(d) = m.as_ref() else {
            panic!("not the seat dialog")
        };
        let all = d.text().join("\n");
        assert!(all.contains("builder_family"), "{all}");
        assert!(all.contains("family anthropic is the builder's"), "{all}");
        assert!(
            all.contains("xai fake-refuse") || all.contains("fake-refuse (xai)"),
            "{all}"
        );
        assert!(all.contains("[major] claim evil"), "{all}");
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("Seat contract"), "{s}");
        assert!(s.contains("family anthropic is the builder's"), "{s}");
        insta::assert_snapshot!(format!("tribunal_seat_{w}x{h}"), s);
        // The findings at the end of the routing (scrolled to on a small screen).
        app.on_key(key(KeyCode::End));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("[major] claim evil"), "{s}");
        assert!(s.contains("⟨U+202E⟩"), "{s}");
        assert!(!s.contains("cm0gLXJmIH4"), "no OSC payload: {s}");
        insta::assert_snapshot!(format!("tribunal_seat_findings_{w}x{h}"), s);
        // Esc closes it.
        app.on_key(key(KeyCode::Esc));
        assert!(!app.mode.is_modal());
    }
}

#[test]
fn a_run_without_a_candidate_or_a_round_says_what_to_do() {
    let mut app = tribunal_app();
    app.show_tab(Tab::Tribunal);
    app.on_msg(Msg::feed::<TribunalPane>(Ok(Vec::new())));
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("no tribunal round for cand-0002"), "{s}");
    app.sessions.selected = Some("run-0001".into());
    app.sync_focus();
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("this run has no candidate"), "{s}");
    app.on_msg(Msg::feed::<TribunalPane>(Err("server unreachable".into())));
    let s = text(&draw(&mut app, 80, 24));
    assert!(
        s.contains("the tribunal's rounds: server unreachable"),
        "{s}"
    );
}

/// The gate's `tribunal` node (one of its prerequisites) is drawn like the others: its label,
/// its state in the gate's roles (a refused tribunal in the failed role, a unanimous one in
/// the passed role), its cause sanitised.
#[test]
fn the_gate_draws_its_tribunal_node() {
    let theme = Theme::default_theme();
    for (state, role) in [
        ("refused", Role::GateCheckFailed),
        ("unanimous", Role::GatePassed),
        ("held", Role::Warning),
    ] {
        let mut app = tribunal_app();
        let mut g = super::tests::fixture_gate("cand-0002", "run-0003", "awaiting_human");
        let mut v = serde_json::to_value(&g).unwrap();
        let node = serde_json::json!({"id": "tribunal", "kind": "tribunal",
            "label": "the tribunal: a unanimous cross-family pass on these bytes",
            "state": state, "cause": format!("rnd-0003 round 2: {HOSTILE_NAME}"),
            "evidence": null, "deadline_secs": null, "children": []});
        v["nodes"].as_array_mut().unwrap().insert(1, node);
        g = serde_json::from_value(v).unwrap();
        app.on_msg(Msg::Gate {
            candidate: "cand-0002".into(),
            result: Ok(g),
        });
        app.show_tab(Tab::Gate);
        let t = draw(&mut app, 160, 48);
        let buf = t.backend().buffer();
        crate::tui::widgets::testing::assert_no_controls(buf);
        let s = text(&t);
        assert!(
            s.contains("the tribunal: a unanimous cross-family pass"),
            "{s}"
        );
        assert!(s.contains("⟨U+202E⟩"), "{s}");
        let label = "cross-family pass on these bytes  ";
        let (x, y) = super::tests::find_in(buf, app.areas.live, label)
            .unwrap_or_else(|| panic!("{state}: {s}"));
        let at = x + label.chars().count() as u16;
        assert_eq!(Some(buf[(at, y)].fg), theme.style(role).fg, "{state}");
    }
}
