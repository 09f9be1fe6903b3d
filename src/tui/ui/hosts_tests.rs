//! The sessions list of a cockpit of several hosts (super::super::hosts): the HOST column,
//! the host lines, a stale host's rows greyed and never live, a stop addressed to its run's
//! host; and the one-host list without any of it.

use ratatui::crossterm::event::KeyCode;
use serde_json::json;

use super::tests::{ch, draw, key, run_at, text};
use crate::tui::app::{App, Effect, Msg};
use crate::tui::data::{Counts, RunsPage};
use crate::tui::hosts::{Hosts, join};
use crate::tui::keymap::Keymap;
use crate::tui::role::Role;
use crate::tui::theme::Theme;

fn page(host: &str, state: &str) -> RunsPage {
    let items = vec![run_at(
        &join(host, "run-0001"),
        "11:00",
        json!({"state": state, "transport": "pipe"}),
    )];
    RunsPage {
        total: 1,
        counts: Counts::of(&items),
        items,
    }
}

fn two_host_app() -> App {
    let mut app = App::new(
        "ws".into(),
        "~/proctor".into(),
        Keymap::defaults(),
        Theme::default_theme(),
    );
    app.hosts = Hosts::new(&["build".into(), "local".into()]);
    app.on_msg(Msg::HostVersion {
        host: "build".into(),
        version: "0.1.0".into(),
    });
    app.on_msg(Msg::HostRuns {
        host: "build".into(),
        result: Ok(page("build", "running")),
    });
    app.on_msg(Msg::HostRuns {
        host: "local".into(),
        result: Ok(page("local", "idle")),
    });
    let _ = app.take_effects();
    app
}

fn line_with<'a>(screen: &'a str, words: &[&str]) -> Option<&'a str> {
    screen.lines().find(|l| words.iter().all(|w| l.contains(w)))
}

#[test]
fn two_hosts_listed_with_their_host_and_a_line_each() {
    let mut app = two_host_app();
    let s = text(&draw(&mut app, 160, 48));
    assert!(s.contains("HOST"), "{s}");
    assert!(
        s.contains("build  reachable · proctor 0.1.0 · 1 live · 0 idle · 1 runs"),
        "{s}"
    );
    assert!(
        s.contains("local  reachable · version unknown · 0 live · 1 idle · 1 runs"),
        "{s}"
    );
    let b = line_with(&s, &["build ", "run-0001", "running"]).expect("build's row");
    assert!(
        !b.contains("build/"),
        "the ref column shows the host's own ref: {b}"
    );
    assert!(
        line_with(&s, &["local ", "run-0001", "idle"]).is_some(),
        "{s}"
    );
}

#[test]
fn a_stop_names_the_runs_host() {
    let mut app = two_host_app();
    let _ = draw(&mut app, 160, 48);
    // Move to the other row (whichever host's run is listed first).
    let first = app.sessions.selected.clone().unwrap();
    app.on_key(ch('j'));
    if app.sessions.selected.as_deref() == Some(first.as_str()) {
        app.on_key(ch('k'));
    }
    assert_ne!(app.sessions.selected.as_deref(), Some(first.as_str()));
    let target = app.sessions.selected.clone().unwrap();
    let _ = app.take_effects();
    app.on_key(ch('s'));
    app.on_key(key(KeyCode::Tab));
    app.on_key(key(KeyCode::Enter));
    let paths: Vec<String> = app
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some(c.path),
            _ => None,
        })
        .collect();
    assert_eq!(
        paths,
        [format!("/v1/m/sessions/runs/{target}/stop")],
        "the cockpit names the run HOST/REF; the event loop sends it to HOST"
    );
}

#[test]
fn a_host_that_drops_keeps_its_rows_greyed_and_never_live() {
    let mut app = two_host_app();
    app.on_msg(Msg::HostRuns {
        host: "build".into(),
        result: Err("the host build cannot be reached: \u{1b}[2Jrefused".into()),
    });
    assert_eq!(
        app.sessions.counts.live, 0,
        "a stale run is not counted live"
    );
    let t = draw(&mut app, 160, 48);
    let s = text(&t);
    assert!(s.contains("build  unreachable since "), "{s}");
    assert!(s.contains("refused"), "{s}");
    let row = line_with(&s, &["build ", "run-0001"]).expect("build's row is kept");
    assert!(row.contains("stale · host unreachable"), "{row}");
    assert!(!row.contains("running"), "{row}");
    // Greyed: the row's cells carry the stale role's colour.
    let buf = t.backend().buffer();
    let (x, y) = crate::tui::widgets::testing::find(buf, "stale · host").unwrap();
    assert_eq!(
        buf[(x, y)].fg,
        app.theme.style(Role::Stale).fg.unwrap(),
        "{row}"
    );
    // It answers again: live again.
    app.on_msg(Msg::HostRuns {
        host: "build".into(),
        result: Ok(page("build", "running")),
    });
    let s = text(&draw(&mut app, 160, 48));
    assert!(!s.contains("stale"), "{s}");
    assert!(
        line_with(&s, &["build ", "run-0001", "running"]).is_some(),
        "{s}"
    );
}

#[test]
fn one_host_shows_no_host_column_and_no_host_lines() {
    let mut app = App::new(
        "ws".into(),
        "~/proctor".into(),
        Keymap::defaults(),
        Theme::default_theme(),
    );
    let mut p = page("x", "running");
    p.items[0].run_ref = "run-0001".into();
    app.on_msg(Msg::Runs(Ok(p)));
    let s = text(&draw(&mut app, 160, 48));
    assert!(!s.contains("HOST"), "{s}");
    assert!(!s.contains("reachable"), "{s}");
    assert!(line_with(&s, &["run-0001", "running"]).is_some(), "{s}");
}

/// The intents of a cockpit of several hosts: every host's, each in a HOST column and
/// named `HOST/ID` in the cockpit; an intent of a host that stopped answering is kept,
/// greyed, `STALE`, never counted as awaiting and never approvable. `P` on a remote host's
/// intent opens the dialog naming that host and then hands the terminal to `ssh -t` there
/// with the host's own id; on this machine's intent it opens the in-cockpit approval named
/// `on host local`, sent to this machine's server with its own id.
#[test]
fn every_hosts_intents_are_listed_and_each_is_approved_on_its_own_host() {
    use super::tests::{fixture_app, fixture_intents};
    use crate::auth::Role as TokenRole;
    use crate::tui::app::{IntentsPane, Modal, Mode};

    let mut app = fixture_app(TokenRole::Write, Theme::default_theme());
    app.hosts = Hosts::new(&["box".into(), "local".into()]);
    let key_file = tempfile::NamedTempFile::new().unwrap();
    app.key_path = Some(key_file.path().to_path_buf());
    app.proctor_argv = vec!["/usr/bin/proctor".into()];
    let mut list: Vec<_> = fixture_intents()
        .into_iter()
        .map(|i| i.on_host("box"))
        .collect();
    list.extend(fixture_intents().into_iter().map(|i| i.on_host("local")));
    // gone: a third host's awaiting intent, as last heard before it stopped answering.
    let mut kept = fixture_intents().pop().unwrap().on_host("gone");
    kept.stale = true;
    list.push(kept);
    app.on_msg(Msg::feed::<IntentsPane>(Ok(list)));
    // Two await authority (box's and local's int-0003); the stale one is not counted.
    assert_eq!(app.awaiting_authority(), 2);
    app.on_key(ch('3'));
    let _ = app.take_effects();
    let s = text(&draw(&mut app, 160, 48));
    assert!(s.contains("HOST"), "{s}");
    for host in ["box", "local", "gone"] {
        assert!(
            line_with(&s, &[host, "int-0003", "run-0003"]).is_some(),
            "{host}'s int-0003:\n{s}"
        );
    }
    let stale = line_with(&s, &["gone", "int-0003"]).unwrap();
    assert!(stale.contains("STALE"), "{stale}");
    assert!(!stale.contains("AWAITING"), "{stale}");

    let select = |app: &mut App, id: &str| {
        app.intents.selected = Some(id.to_string());
        app.status = None;
    };
    // box's: a dialog naming box, then ssh -t box with box's own id.
    select(&mut app, "box/int-0003");
    let s = text(&draw(&mut app, 160, 48));
    assert!(s.contains("approved on box by `ssh -t box`"), "{s}");
    app.on_key(ch('P'));
    let t = text(&draw(&mut app, 160, 48));
    assert!(t.contains("Approve int-0003 on host box?"), "{t}");
    app.on_key(ch('y'));
    let eff = app.take_effects();
    assert!(
        eff.iter()
            .any(|e| matches!(e, Effect::ApproveRemote { host, intent }
            if host == "box" && intent == "int-0003")),
        "{eff:?}"
    );
    assert!(!eff.iter().any(|e| matches!(e, Effect::Approve { .. })));

    // local's: the in-cockpit approval, named on host local, with local's own id.
    select(&mut app, "local/int-0003");
    app.on_key(ch('P'));
    let eff = app.take_effects();
    assert!(
        eff.iter()
            .any(|e| matches!(e, Effect::Approve { intent } if intent == "local/int-0003")),
        "{eff:?}"
    );
    assert!(
        !eff.iter()
            .any(|e| matches!(e, Effect::ApproveRemote { .. }))
    );
    match &app.mode {
        Mode::Modal(m) => match &**m {
            Modal::Approval(d) => assert_eq!(d.intent, "int-0003"),
            _ => panic!("another dialog"),
        },
        _ => panic!("no dialog"),
    }
    let t = text(&draw(&mut app, 160, 48));
    assert!(
        t.contains("Authorise publication int-0003 on host local"),
        "{t}"
    );
    app.mode = Mode::Normal;

    // gone's: refused, with why; nothing sent.
    select(&mut app, "gone/int-0003");
    app.on_key(ch('P'));
    let eff = app.take_effects();
    assert!(
        !eff.iter()
            .any(|e| matches!(e, Effect::Approve { .. } | Effect::ApproveRemote { .. })),
        "{eff:?}"
    );
    assert!(app.mode.is_normal());
    let said = app.status.clone().unwrap().text;
    assert!(said.contains("gone does not answer"), "{said}");
}
