//! The Rigs view (`6`) at 80×24 and 160×48: each rig's backend and boundary (a namespace
//! rig named weaker than a VM), state, lock holder, TTL, idle time and memory (unknown as
//! unknown), the selected rig's audit tail; the keys call the rigs' routes (lock, unlock,
//! suspend, resume, close after a confirmation) and attach hands the terminal to `proctor
//! rig attach RIG`; a refusal shows the server's words; the empty view teaches.

use hyper::Method;
use ratatui::crossterm::event::KeyCode;

use super::tests::{HOSTILE_NAME, SIZES, ch, draw, fixture_app, key, text};
use crate::api::rigs::{Availability, BackendKind, ListItems};
use crate::auth::Role as TokenRole;
use crate::demo::rigs::{sample_audit, samples};
use crate::tui::action::Action;
use crate::tui::app::{App, CallTag, Effect, Modal, Mode, Msg, Pane, RigsPane, Tab};
use crate::tui::theme::Theme;

fn engines() -> Vec<Availability> {
    vec![
        Availability {
            backend: BackendKind::Vm,
            available: false,
            detail: "qemu-system-x86_64 not found: apt-get install qemu-system-x86".into(),
        },
        Availability {
            backend: BackendKind::Namespace,
            available: true,
            detail: "bubblewrap 0.8.0".into(),
        },
    ]
}

fn list() -> ListItems {
    ListItems {
        items: samples(HOSTILE_NAME),
        engines: engines(),
    }
}

fn rigs_app() -> App {
    let mut app = fixture_app(TokenRole::Write, Theme::default_theme());
    app.take_effects();
    app
}

/// The calls queued, as (method, path).
fn calls(app: &mut App) -> Vec<(Method, String, CallTag)> {
    app.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some((c.method, c.path, c.tag)),
            _ => None,
        })
        .collect()
}

/// The view opened with the samples listed and the locked rig's audit answered.
fn shown(app: &mut App) {
    app.on_key(ch('6'));
    app.on_msg(Msg::feed::<RigsPane>(Ok(list())));
    let asked = calls(app);
    // The newest open rig is selected first; its audit tail is asked for.
    assert!(
        asked.iter().any(|(m, p, t)| *m == Method::GET
            && p == "/v1/m/rigs/rig-0005/audit?after=0&limit=50"
            && matches!(t, CallTag::RigAudit { rig } if rig == "rig-0005")),
        "{asked:?}"
    );
    // Down to the locked rig: its audit tail is asked for (the tail: after next − 51).
    app.on_key(ch('j'));
    let asked = calls(app);
    assert!(
        asked
            .iter()
            .any(|(_, p, _)| p == "/v1/m/rigs/rig-0004/audit?after=0&limit=50"),
        "{asked:?}"
    );
    app.on_msg(Msg::CallDone {
        tag: CallTag::RigAudit {
            rig: "rig-0004".into(),
        },
        result: Ok(serde_json::to_value(sample_audit("rig-0004", HOSTILE_NAME)).unwrap()),
    });
}

#[test]
fn the_rigs_their_boundary_lock_and_audit_at_both_sizes() {
    for (w, h) in SIZES {
        let mut app = rigs_app();
        app.on_key(ch('6'));
        assert_eq!(app.tab, Tab::Rigs);
        assert_eq!(app.focus, Pane::Rigs);
        assert!(
            app.take_effects().iter().any(|e| matches!(e,
                Effect::WatchView(v) if v.shown.contains(&Pane::Rigs))),
            "the evidence task is told to fetch the rigs while the view is shown"
        );
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("loading"), "{s}");
        shown(&mut app);
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("6 Rigs"), "the tab: {s}");
        for id in ["rig-0001", "rig-0003", "rig-0004", "rig-0005"] {
            assert!(s.contains(id), "{id}: {s}");
        }
        for state in ["booting", "running", "suspended", "closed"] {
            assert!(s.contains(state), "{state}: {s}");
        }
        // The namespace rig names its weaker boundary; the VM is a VM.
        if w >= 160 {
            assert!(s.contains("namespace: weaker than a VM"), "{s}");
            assert!(s.contains("alice evil"), "{s}");
            assert!(s.contains("(person) since [time]"), "{s}");
            assert!(s.contains("terminal"), "the kind: {s}");
            assert!(s.contains("IDLE"), "{s}");
        } else {
            assert!(s.contains("ns: weaker than VM"), "{s}");
            assert!(s.contains("vm: own kernel"), "{s}");
            assert!(s.contains("alice evil"), "{s}");
            assert!(!s.contains("IDLE"), "the idle column drops at 80: {s}");
        }
        assert!(s.contains("unlocked"), "{s}");
        assert!(s.contains("unknown"), "the unmeasured memory: {s}");
        assert!(s.contains("250 MiB") && s.contains("5.4 MiB"), "{s}");
        assert!(s.contains("1h29m") || s.contains("1h"), "the TTL left: {s}");
        // The locked rig's boundary summary and its audit tail, hostile text harmless.
        assert!(
            s.contains("namespace boundary: weaker than a VM"),
            "the selected rig's measured boundary: {s}"
        );
        assert!(s.contains("Audit rig-0004"), "{s}");
        assert!(s.contains("refused"), "{s}");
        assert!(s.contains("lock"), "{s}");
        assert!(s.contains("paste=true"), "a paste by its size: {s}");
        assert!(s.contains("argv=[make test]"), "an argv as its words: {s}");
        assert!(!s.contains("cm0gLXJmIH4"), "no OSC payload: {s}");
        assert!(s.contains("l lock"), "the keys: {s}");
        insta::assert_snapshot!(format!("rigs_{w}x{h}"), s);
    }
}

#[test]
fn no_rigs_teaches_how_to_open_one_and_names_the_engines() {
    for (w, h) in SIZES {
        let mut app = rigs_app();
        app.on_key(ch('6'));
        app.on_msg(Msg::feed::<RigsPane>(Ok(ListItems {
            items: vec![],
            engines: engines(),
        })));
        let s = text(&draw(&mut app, w, h));
        assert!(
            s.contains("no rigs: proctor rig open --kind terminal"),
            "{s}"
        );
        assert!(s.contains("bubblewrap 0.8.0"), "{s}");
        assert!(s.contains("vm: not available"), "{s}");
        insta::assert_snapshot!(format!("rigs_empty_{w}x{h}"), s);
        // A key with no rig says so and calls nothing.
        app.on_key(ch('l'));
        assert!(calls(&mut app).is_empty());
        assert!(
            app.status
                .as_ref()
                .is_some_and(|s| s.text.contains("no rig selected")),
            "{:?}",
            app.status
        );
    }
}

/// The lock key calls the lock route of the selected rig; the unlock key releases it; a
/// refusal (423) shows the server's words in the status line.
#[test]
fn the_lock_key_calls_lock_and_a_refusal_shows_the_servers_words() {
    let mut app = rigs_app();
    shown(&mut app);
    app.on_key(ch('l'));
    let c = calls(&mut app);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].0, Method::POST);
    assert_eq!(c[0].1, "/v1/m/rigs/rig-0004/lock");
    assert_eq!(
        c[0].2,
        CallTag::Action {
            action: Action::RigLock,
            run: "rig-0004".into()
        }
    );
    let refusal = "rig-0004 is locked by bob (person) since 2026-11-30T11:56:00Z";
    app.on_msg(Msg::CallDone {
        tag: c[0].2.clone(),
        result: Err(refusal.into()),
    });
    let st = app.status.clone().unwrap();
    assert_eq!(st.tone, crate::tui::app::Tone::Error);
    assert!(st.text.contains(refusal), "{}", st.text);
    assert!(
        app.take_effects().contains(&Effect::Refresh),
        "after an action the rigs are fetched again"
    );
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("locked by bob"), "the status line: {s}");
    // A success says what the lock means.
    let mut view = samples("x")[2].clone();
    view.record.id = "rig-0004".into();
    app.on_msg(Msg::CallDone {
        tag: c[0].2.clone(),
        result: Ok(serde_json::to_value(&view).unwrap()),
    });
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("rig-0004 locked")
    );
    app.on_key(ch('u'));
    let c = calls(&mut app);
    assert_eq!(
        (c[0].0.clone(), c[0].1.as_str()),
        (Method::DELETE, "/v1/m/rigs/rig-0004/lock")
    );
}

/// Suspend and resume call their routes for a rig in the right state, and say why not
/// otherwise; close asks first, then calls close.
#[test]
fn suspend_resume_and_close_through_the_routes() {
    let mut app = rigs_app();
    shown(&mut app);
    // rig-0004 runs: resume is refused here, suspend is called.
    app.on_key(ch('r'));
    assert!(calls(&mut app).is_empty());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("only a suspended rig")
    );
    app.on_key(ch('s'));
    let c = calls(&mut app);
    assert_eq!(c[0].1, "/v1/m/rigs/rig-0004/suspend");
    // The answer (the rig after it) changes its row at once: resume is now called.
    let mut after = app.selected_rig().unwrap().clone();
    after.record.state = crate::api::rigs::RigState::Suspended;
    app.on_msg(Msg::CallDone {
        tag: c[0].2.clone(),
        result: Ok(serde_json::to_value(&after).unwrap()),
    });
    assert_eq!(
        app.selected_rig().unwrap().record.state,
        crate::api::rigs::RigState::Suspended
    );
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("rig-0004 suspended")
    );
    app.on_key(ch('r'));
    let c = calls(&mut app);
    assert_eq!(c[0].1, "/v1/m/rigs/rig-0004/resume");
    // rig-0003 is suspended: resume.
    app.on_key(ch('j'));
    calls(&mut app);
    assert_eq!(app.selected_rig().unwrap().record.id, "rig-0003");
    app.on_key(ch('r'));
    let c = calls(&mut app);
    assert_eq!(
        (c[0].0.clone(), c[0].1.as_str()),
        (Method::POST, "/v1/m/rigs/rig-0003/resume")
    );
    // Close: the confirmation first (No by default), then the call.
    app.on_key(ch('c'));
    assert!(calls(&mut app).is_empty());
    assert!(
        matches!(&app.mode, Mode::Modal(m) if matches!(**m, Modal::Confirm { .. })),
        "close asks first"
    );
    let s = text(&draw(&mut app, 80, 24));
    assert!(s.contains("Close rig-0003?"), "{s}");
    app.on_key(key(KeyCode::Esc));
    assert!(calls(&mut app).is_empty(), "cancelled: nothing called");
    app.on_key(ch('c'));
    app.on_key(ch('y'));
    let c = calls(&mut app);
    assert_eq!(
        c.first().map(|c| (c.0.clone(), c.1.clone())),
        Some((Method::POST, "/v1/m/rigs/rig-0003/close".to_string())),
        "{c:?}"
    );
}

/// Attach hands the terminal to `proctor rig attach RIG` (this binary, this home); a rig
/// that is not live says so.
#[test]
fn attach_runs_the_rig_attach_verb() {
    let mut app = rigs_app();
    app.proctor_argv = vec!["/usr/bin/proctor".into(), "--home".into(), "/h".into()];
    shown(&mut app);
    app.on_key(ch('a'));
    let fx = app.take_effects();
    assert!(
        fx.contains(&Effect::RigAttach {
            rig: "rig-0004".into()
        }),
        "{fx:?}"
    );
    assert_eq!(
        app.rig_attach_argv("rig-0004"),
        [
            "/usr/bin/proctor",
            "--home",
            "/h",
            "rig",
            "attach",
            "rig-0004"
        ]
    );
    // Back from it: what it said, and the rigs fetched again.
    app.rig_attached(
        "rig-0004",
        "`proctor rig attach rig-0004` ended with exit status: 2".into(),
    );
    assert!(app.status.as_ref().unwrap().text.contains("ended with"));
    assert!(app.take_effects().contains(&Effect::Refresh));
    // The closed rig: nothing to attach to.
    app.on_key(key(KeyCode::End));
    calls(&mut app);
    assert_eq!(app.selected_rig().unwrap().record.id, "rig-0001");
    app.on_key(ch('a'));
    assert!(
        !app.take_effects()
            .iter()
            .any(|e| matches!(e, Effect::RigAttach { .. }))
    );
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("nothing to attach to")
    );
}

/// A read token sees the rigs but its keys are refused before any call.
#[test]
fn a_read_token_is_refused_before_the_call() {
    let mut app = fixture_app(TokenRole::Read, Theme::default_theme());
    app.take_effects();
    shown(&mut app);
    app.on_key(ch('l'));
    assert!(calls(&mut app).is_empty());
    assert!(
        app.status
            .as_ref()
            .is_some_and(|s| s.text.contains("rig-lock needs the write role")),
        "{:?}",
        app.status
    );
}
