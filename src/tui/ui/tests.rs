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
use crate::tui::app::{App, Effect, IntentsPane, LiveEvent, Msg, Pane, ReceiptsPane};
use crate::tui::data::{Counts, EventItem, RunView, RunsPage, WhoAmI, instant};
use crate::tui::evidence::{
    CandidateView, GateView, IntentView, ReceiptItem, Verdict, Verification, VerifyCheck,
};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;

pub(crate) const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// A name that tries everything: an escape sequence, a bidi override, an OSC 52 clipboard
/// write, a zero-width joiner, a C1 control.
pub const HOSTILE_NAME: &str =
    "evil\u{1b}[31mred\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{202e}txt.exe\u{200d}\u{9b}2J";

fn now() -> DateTime<Utc> {
    instant("2026-11-30T12:00:00.000Z").unwrap()
}

fn run(r#ref: &str, extra: Value) -> RunView {
    run_at(r#ref, "11:00", extra)
}

/// A running demo PTY run of claude created at `hh_mm` on the fixtures' day (started a
/// second later), with `extra` fields over it.
pub(crate) fn run_at(r#ref: &str, hh_mm: &str, extra: Value) -> RunView {
    let mut v = json!({
        "ref": r#ref, "tool": "claude", "profile": "claude", "transport": "pty",
        "workspace": "/home/op/src/app", "demo": true,
        "created_at": format!("2026-11-30T{hh_mm}:00.000Z"), "state": "running",
        "generation": 1, "started_at": format!("2026-11-30T{hh_mm}:01.000Z"),
        "pinned": false, "done": false,
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
                "last_at": "2026-11-30T11:50:00.000Z"}, "worktree_branch": "proctor/run-0002"}),
        ),
        run(
            "run-0003",
            json!({"tool": "gemini", "profile": "gemini-work", "state": "stopped", "exit_code": 0,
                "ended_at": "2026-11-30T11:30:00.000Z", "done": true,
                "worktree_branch": "proctor/run-0003"}),
        ),
        run(
            "run-0004",
            json!({"state": "failed", "exit_code": 3, "ended_at": "2026-11-30T11:40:00.000Z",
                "worktree_branch": "proctor/run-0004"}),
        ),
        run(
            "run-0005",
            json!({"tool": "grok", "profile": "grok", "state": "failed", "signal": "SIGKILL",
                "ended_at": "2026-11-30T11:20:00.000Z", "demo": false,
                "worktree_branch": "proctor/run-0005"}),
        ),
        run(
            "run-0006",
            json!({"tool": "opencode", "profile": "opencode", "state": "lost",
                "ended_at": "2026-11-30T10:00:00.000Z", "worktree_branch": HOSTILE_NAME}),
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

pub(crate) fn events() -> Vec<EventItem> {
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
    app.sessions.selected = Some("run-0001".into());
    app.sync_focus();
    let epoch = app.live.slot.as_ref().unwrap().epoch;
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
        ev: LiveEvent::Output(vec![(
            2,
            crate::runs::Stream::Stdout,
            out.as_bytes().to_vec(),
        )]),
    });
    app.on_msg(Msg::Events {
        run: "run-0001".into(),
        result: Ok(events()),
    });
    fixture_evidence(&mut app);
    app.take_effects();
    app
}

const DIGEST: &str = "3f2a9c0d1e4b5a6978877665544332211000ffeeddccbbaa9988776655443322";
const REVISION: &str = "9d4c2b1a0f9e8d7c6b5a49382716a5b4c3d2e1f0";

pub(crate) fn node(id: &str, kind: &str, label: &str, state: &str, cause: Option<&str>) -> Value {
    json!({"id": id, "kind": kind, "label": label, "state": state, "cause": cause,
        "evidence": null, "children": []})
}

/// A gate as the server answers it, in `state`.
pub fn fixture_gate(cand: &str, run: &str, state: &str) -> GateView {
    let (check, task, decision, causes): (&str, &str, &str, Vec<String>) = match state {
        "awaiting_human" => (
            "passed",
            "done",
            "awaiting",
            vec![
                "awaiting a person: passing checks is not approval; publication needs a \
                 person's authorisation for this exact identity"
                    .into(),
            ],
        ),
        "passed" => ("passed", "done", "satisfied", vec![]),
        "check_failed" => (
            "failed",
            "done",
            "blocked",
            vec![format!("check test failed: ev-0003 attempt 1: exit 1 {HOSTILE_NAME}")],
        ),
        "evidence_stale" => (
            "stale",
            "not_started",
            "blocked",
            vec!["the recorded evidence is stale (ev-0002: it judged identity 1a2b3c4d5e6f (cand-0001), not these bytes); it stays in history and is never reused. Remedy: run the checks on the current candidate".into()],
        ),
        _ => (
            "not_started",
            "not_started",
            "blocked",
            vec![format!("no check ran on these bytes under this policy. Remedy: `proctor check run --candidate {cand}`")],
        ),
    };
    let mut ev_group = node(
        "evidence",
        "expected_evidence",
        "expected evidence, one per check",
        check,
        None,
    );
    ev_group["children"] = json!([
        node(
            "check:test",
            "evidence",
            "test",
            check,
            Some("ev-0001 attempt 1: exit 0 in 212 ms, 1 artifact(s) present")
        ),
        node(
            "check:lint",
            "evidence",
            "lint",
            check,
            Some(&format!("ev-0001 attempt 1: exit 0 in 9 ms {HOSTILE_NAME}"))
        ),
    ]);
    let mut prereq = node(
        "prerequisites",
        "prerequisites",
        "prerequisites",
        "satisfied",
        None,
    );
    prereq["children"] = json!([
        node(
            "candidate",
            "prerequisite",
            &format!("{cand} bound and still current"),
            "satisfied",
            Some(
                "the worktree still holds the bound bytes (candidate-identity-sha256/1 3f2a9c0d1e4b)"
            )
        ),
        node(
            "policy",
            "prerequisite",
            "the check policy of ws-0001 approved",
            "satisfied",
            Some("policy-text-sha256/1 9c1b2a3d4e5f")
        ),
    ]);
    let v = json!({
        "candidate": cand, "run": run, "state": state, "evidence_ok": check == "passed",
        "identity": {"bound": format!("format=candidate-identity/1 digest=candidate-identity-sha256/1 {DIGEST}"),
            "now": "current"},
        "policy": {"workspace": "ws-0001", "digest": format!("policy-text-sha256/1 {DIGEST}")},
        "nodes": [prereq,
            node("task", "task", "run the policy's checks on these bytes", task,
                Some(&format!("attempt 1 of {cand} (ev-0001): {check}"))),
            ev_group,
            node("decision", "human_decision", "a person authorises publication of these exact bytes",
                decision, causes.first().map(String::as_str))],
        "causes": causes,
        "history": [],
        "evaluated_at": "2026-11-30T11:59:00.000Z",
    });
    serde_json::from_value(v).unwrap()
}

fn intent(id: &str, run: &str, cand: &str, state: &str, extra: Value) -> Value {
    let mut v = json!({
        "format": "proctor-publish-intent/1", "id": id, "created_at": "2026-11-30T11:58:00.000Z",
        "proposed_by": "tok-1", "run": run,
        "candidate": {"id": cand, "digest": DIGEST, "recipe": "candidate-identity-sha256/1",
            "base": "1".repeat(40), "index_tree": "2".repeat(40), "worktree_tree": "3".repeat(40)},
        "repo": "/home/op/src/app", "worktree": format!("/home/op/.proctor/worktrees/{run}"),
        "remote": {"name": "origin", "url": "git@github.com:acme/widget.git"},
        "branch": "fix/parser", "expected_tip": null, "title": "Fix the parser",
        "body": "", "commit": {"tree": "3".repeat(40), "parent": "1".repeat(40),
            "message": "Fix the parser\n", "author_name": "Ada", "author_email": "ada@example.invalid",
            "date": "1798632000 +0000"},
        "revision": REVISION,
        "forge": {"api_base": "https://api.github.com", "owner": "acme", "repo": "widget", "base": "main"},
        "state": state, "causes": [], "gate": {},
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// The intents the server lists: one awaiting authority, one blocked (hostile title, branch
/// and cause), one published.
pub fn fixture_intents() -> Vec<IntentView> {
    let v = json!([
        intent(
            "int-0001",
            "run-0002",
            "cand-0001",
            "published",
            json!({
            "outcome": {"effects": {"pull_request": {"number": 7,
                "html_url": "https://github.com/acme/widget/pull/7"}}}})
        ),
        intent(
            "int-0002",
            "run-0004",
            "cand-0003",
            "blocked",
            json!({
            "title": format!("Refactor {HOSTILE_NAME}"),
            "branch": format!("feat/{HOSTILE_NAME}"),
            "causes": [format!("check test failed: ev-0003 attempt 1: exit 1 {HOSTILE_NAME}")]})
        ),
        intent(
            "int-0003",
            "run-0003",
            "cand-0002",
            "awaiting_authority",
            json!({
            "title": "Fix the lexer's escaped quotes", "branch": "fix/lexer-escapes"})
        ),
    ]);
    serde_json::from_value(v).unwrap()
}

pub fn fixture_receipts() -> Vec<ReceiptItem> {
    let r = |id: &str, kind: Option<&str>, subject: Option<&str>, at: Option<&str>| ReceiptItem {
        id: id.into(),
        kind: kind.map(Into::into),
        subject: subject.map(Into::into),
        at: at.map(Into::into),
        file: format!("/home/op/.proctor/data/receipts/{id}.json"),
        problem: None,
    };
    let mut v = vec![
        r(
            "rcpt-0001",
            Some("candidate.bound"),
            Some("cand-0001"),
            Some("2026-11-30T11:20:00.000Z"),
        ),
        r(
            "rcpt-0002",
            Some("evidence.attempt"),
            Some("ev-0001"),
            Some("2026-11-30T11:21:00.000Z"),
        ),
        r(
            "rcpt-0003",
            Some("candidate.bound"),
            Some(HOSTILE_NAME),
            Some("2026-11-30T11:30:00.000Z"),
        ),
        r(
            "rcpt-0004",
            Some("evidence.attempt"),
            Some("ev-0002"),
            Some("2026-11-30T11:31:00.000Z"),
        ),
        r("rcpt-0005", Some("signed"), None, None),
        r("rcpt-0006", None, None, None),
    ];
    v[4].problem = Some("DSSE envelope (application/vnd.in-toto+json)".into());
    v[5].problem = Some("empty: reserved, never written".into());
    v
}

fn verification(by: &'static str, verdict: Verdict, checks: &[(&str, &str, &str)]) -> Verification {
    Verification {
        by,
        kind: None,
        subject: None,
        result: Ok((
            verdict,
            checks
                .iter()
                .map(|(n, o, d)| VerifyCheck {
                    name: (*n).into(),
                    outcome: (*o).into(),
                    detail: (*d).into(),
                })
                .collect(),
        )),
    }
}

/// Candidates, gates in every state, intents, receipts and their verdicts.
pub fn fixture_evidence(app: &mut App) {
    let cand = |id: &str, run: &str| CandidateView {
        id: id.into(),
        run_ref: run.into(),
        branch: format!("proctor/{run}"),
        bound_at: "2026-11-30T11:20:00.000Z".into(),
        identity_digest: format!(
            "format=candidate-identity/1 digest=candidate-identity-sha256/1 {DIGEST}"
        ),
    };
    app.on_msg(Msg::Candidates(Ok(vec![
        cand("cand-0001", "run-0002"),
        cand("cand-0002", "run-0003"),
        cand("cand-0003", "run-0004"),
        cand("cand-0004", "run-0005"),
        cand("cand-0005", "run-0006"),
    ])));
    for (c, r, st) in [
        ("cand-0001", "run-0002", "passed"),
        ("cand-0002", "run-0003", "awaiting_human"),
        ("cand-0003", "run-0004", "check_failed"),
        ("cand-0004", "run-0005", "not_started"),
        ("cand-0005", "run-0006", "evidence_stale"),
    ] {
        app.on_msg(Msg::Gate {
            candidate: c.into(),
            result: Ok(fixture_gate(c, r, st)),
        });
    }
    app.on_msg(Msg::feed::<IntentsPane>(Ok(fixture_intents())));
    app.on_msg(Msg::feed::<ReceiptsPane>(Ok(fixture_receipts())));
    let holds = verification(
        "server",
        Verdict::Holds,
        &[
            (
                "receipt",
                "holds",
                "the file is the canonical form of its content",
            ),
            (
                "identity",
                "holds",
                "the candidate's identity document: recomputed, equal",
            ),
            (
                "ledger",
                "holds",
                "the ledger's first 4096 bytes: recomputed, equal",
            ),
        ],
    );
    for (id, v) in [
        ("rcpt-0001", holds.clone()),
        ("rcpt-0002", holds),
        (
            "rcpt-0003",
            verification(
                "server",
                Verdict::Unreachable,
                &[
                    (
                        "receipt",
                        "holds",
                        "the file is the canonical form of its content",
                    ),
                    (
                        "worktree",
                        "unreachable",
                        &format!("the worktree is gone: {HOSTILE_NAME}"),
                    ),
                ],
            ),
        ),
        (
            "rcpt-0004",
            verification(
                "server",
                Verdict::Fails,
                &[(
                    "worktree",
                    "differs",
                    "the worktree's identity: recomputed, different",
                )],
            ),
        ),
        (
            "rcpt-0005",
            Verification {
                kind: Some("publication.published".into()),
                subject: Some("int-0001".into()),
                ..verification(
                    "server",
                    Verdict::Holds,
                    &[
                        ("envelope", "holds", "a DSSE envelope"),
                        (
                            "signature",
                            "holds",
                            "Ed25519 over the PAE by keyid=sha256-spki-der/1 ab12",
                        ),
                        ("sshsig", "holds", "namespace proctor-receipt"),
                    ],
                )
            },
        ),
        (
            "rcpt-0006",
            Verification {
                by: "server",
                result: Err("empty: reserved, never written".into()),
                kind: None,
                subject: None,
            },
        ),
    ] {
        app.on_msg(Msg::Verified {
            id: id.into(),
            verification: v,
        });
    }
}

pub(crate) fn draw(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| {
        super::draw(f, app);
    })
    .unwrap();
    t
}

/// The screen as text, with clock times (local, machine-dependent) replaced by `[time]`.
pub(crate) fn text(t: &Terminal<TestBackend>) -> String {
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

pub(crate) fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// A character key as a terminal sends it (an upper-case letter with Shift).
pub(crate) fn ch(c: char) -> KeyEvent {
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
        app.sessions.selected = Some("run-0002".into());
        app.sync_focus();
        let epoch = app.live.slot.as_ref().unwrap().epoch;
        use crate::runs::Stream::{Stderr, Stdin, Stdout};
        let frames = vec![
            (1, Stdout, b"{\"id\":0,\"result\":{}}\n".to_vec()),
            (
                2,
                Stdin,
                b"{\"id\":3,\"method\":\"turn/start\",\"params\":{\"threadId\":\"t\",\"input\":[{\"type\":\"text\",\"text\":\"check the diff\"}]}}\n"
                    .to_vec(),
            ),
            (
                3,
                Stdout,
                b"{\"method\":\"turn/started\",\"params\":{\"threadId\":\"t\",\"turn\":{\"id\":\"u\"}}}\n"
                    .to_vec(),
            ),
            (
                4,
                Stdout,
                b"{\"method\":\"item/started\",\"params\":{\"item\":{\"type\":\"userMessage\",\"id\":\"m\",\"content\":[{\"type\":\"text\",\"text\":\"check the diff\"}]}}}\n"
                    .to_vec(),
            ),
            (
                5,
                Stdout,
                b"{\"method\":\"item/started\",\"params\":{\"item\":{\"type\":\"commandExecution\",\"id\":\"c\",\"command\":\"git diff --stat\",\"status\":\"inProgress\"}}}\n"
                    .to_vec(),
            ),
            (
                6,
                Stdout,
                b"{\"method\":\"item/completed\",\"params\":{\"item\":{\"type\":\"commandExecution\",\"id\":\"c\",\"command\":\"git diff --stat\",\"status\":\"failed\",\"exitCode\":128,\"aggregatedOutput\":\"fatal: not a git repository\\n\"}}}\n"
                    .to_vec(),
            ),
            (
                7,
                Stdout,
                b"{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"the diff looks right\\n\\u001b]52;c;eA==\\u0007but \\u202eone\"}}\n"
                    .to_vec(),
            ),
            (8, Stderr, b"warning: slow disk\n".to_vec()),
            (
                9,
                Stdout,
                b"{\"method\":\"error\",\"params\":{\"error\":{\"message\":\"Reconnecting... 2/5\"},\"willRetry\":true}}\n"
                    .to_vec(),
            ),
            (
                10,
                Stdout,
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
        let fg = |role| {
            Theme::default_theme()
                .style(role)
                .fg
                .unwrap_or(Color::Reset)
        };
        use crate::tui::role::Role;
        // stderr is dimmed; the person's turn (once: codex's echo is not repeated), the
        // failed call and the retried error stand out.
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "warning: slow disk").unwrap();
        assert_eq!(buf[(x, y)].fg, fg(Role::Dim));
        if h >= 40 {
            // (At 80×24 it has scrolled off the pane.)
            assert_eq!(text(&t).matches("you: check the diff").count(), 1);
            let (x, y) = find(buf, "you: check the diff").unwrap();
            assert_eq!(buf[(x, y)].fg, fg(Role::Header));
        }
        let (x, y) = find(buf, "▸ commandExecution: git diff --stat (exit 128)").unwrap();
        assert_eq!(buf[(x, y)].fg, fg(Role::Error));
        let (x, y) = find(buf, "! error: Reconnecting... 2/5 (will retry)").unwrap();
        assert_eq!(buf[(x, y)].fg, fg(Role::Error));
        // `o` shows the call's output under its line, and hides it again.
        assert!(find(buf, "│ fatal: not a git repository").is_none());
        app.on_key(ch('o'));
        let t = draw(&mut app, w, h);
        assert!(
            find(t.backend().buffer(), "│ fatal: not a git repository").is_some(),
            "{}",
            text(&t)
        );
        app.on_key(ch('o'));
        let t = draw(&mut app, w, h);
        assert!(find(t.backend().buffer(), "│ fatal: not a git repository").is_none());
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
        assert_eq!((app.live.inner.width, app.live.inner.height), (w, h - 1));
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
        assert_eq!(app.sessions.view.len(), 1);
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
    // Wide enough for the states' sources beside the list's long names.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    let t = draw(&mut app, 200, 60);
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
        app.sessions.selected = Some("run-0007".into());
        app.sync_focus();
        let epoch = app.live.slot.as_ref().unwrap().epoch;
        app.on_msg(Msg::Live {
            epoch,
            ev: LiveEvent::Output(vec![(
                1,
                crate::runs::Stream::Stdout,
                HOSTILE_NAME.as_bytes().to_vec(),
            )]),
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
        .sessions
        .view
        .iter()
        .map(|&i| app.sessions.runs[i].run_ref.as_str())
        .collect();
    // Pinned first, then by recent activity; snoozed and archived hidden.
    assert_eq!(
        order,
        [
            "run-0007", "run-0001", "run-0002", "run-0004", "run-0003", "run-0005", "run-0006"
        ]
    );
    app.dispatch(Action::ToggleSnoozed);
    assert!(
        app.sessions
            .view
            .iter()
            .any(|&i| app.sessions.runs[i].run_ref == "run-0008")
    );
    app.dispatch(Action::ToggleArchived);
    assert!(
        app.sessions
            .view
            .iter()
            .any(|&i| app.sessions.runs[i].run_ref == "run-0009")
    );
    // Moving the selection follows the list and refocuses the live stream.
    app.take_effects();
    app.focus = Pane::Sessions;
    app.on_key(ch('j'));
    assert_ne!(app.sessions.selected.as_deref(), Some("run-0001"));
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
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0002"));
    app.on_event(ev(MouseEventKind::ScrollDown, 10, row));
    assert_eq!(app.sessions.selected.as_deref(), Some("run-0004"));
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

// ---------------------------------------------------------------------------------------------
// Candidates, gates, intents, receipts, and the publication approval dialog.
// ---------------------------------------------------------------------------------------------

use crate::publish::approve::{self, CheckView, Outcome as FlowOutcome, PromptError, ReceiptRef};
use crate::tui::app::{Modal, Mode, Tab};
use crate::tui::approval::ApprovalEvent;
use crate::tui::widgets::approval::{Answer, Field, Reply, Stage};

pub(crate) fn find_in(
    buf: &Buffer,
    area: ratatui::layout::Rect,
    needle: &str,
) -> Option<(u16, u16)> {
    for y in area.y..area.bottom() {
        let mut text = String::new();
        let mut xs = Vec::new();
        for x in area.x..area.right() {
            let s = buf[(x, y)].symbol();
            for _ in s.chars() {
                xs.push(x);
            }
            text.push_str(s);
        }
        if let Some(byte) = text.find(needle) {
            return Some((xs[text[..byte].chars().count()], y));
        }
    }
    None
}

fn fg(theme: &Theme, role: crate::tui::role::Role) -> Color {
    theme.style(role).fg.unwrap_or(Color::Reset)
}

#[test]
fn gate_intents_and_receipts_views_at_both_sizes() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        // The gate of the focused run's candidate: awaiting a person, never accepted.
        app.sessions.selected = Some("run-0003".into());
        app.sync_focus();
        app.take_effects();
        app.on_key(ch('2'));
        assert_eq!(app.tab, Tab::Gate);
        assert!(
            app.take_effects().iter().any(|e| matches!(e,
                Effect::WatchView(v) if v.gate.as_deref() == Some("cand-0002") && !v.shown.contains(&Pane::Receipts))),
            "the evidence task is told which gate the view shows"
        );
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        crate::tui::widgets::testing::assert_no_controls(buf);
        let s = text(&t);
        assert!(
            // (The sentence may wrap between the two words.)
            s.contains("AWAITING HUMAN")
                && (s.contains("not acceptance") || s.contains("This is not"))
                && s.contains("acceptance"),
            "{s}"
        );
        assert!(!s.contains("cm0gLXJmIH4"), "no OSC payload: {s}");
        insta::assert_snapshot!(format!("gate_awaiting_{w}x{h}"), s);
        // A failed check, with a hostile cause.
        app.sessions.selected = Some("run-0004".into());
        app.sync_focus();
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("CHECK FAILED") && s.contains("⟨U+202E⟩"), "{s}");
        insta::assert_snapshot!(format!("gate_failed_{w}x{h}"), s);

        // The intents: hostile title and branch drawn as markers; the blocked one's causes.
        app.on_key(ch('3'));
        assert_eq!((app.tab, app.focus), (Tab::Intents, Pane::Intents));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(
            s.contains("AWAITING_AUTHORITY") && s.contains("BLOCKED"),
            "{s}"
        );
        insta::assert_snapshot!(format!("intents_{w}x{h}"), s);
        app.on_key(ch('j'));
        assert_eq!(app.selected_intent().unwrap().id, "int-0002");
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(
            s.contains("blocked because") && s.contains("feat/evil"),
            "{s}"
        );
        assert!(!s.contains("cm0gLXJmIH4"));
        insta::assert_snapshot!(format!("intents_blocked_{w}x{h}"), s);
        // Enter on an intent: the gate of its candidate.
        app.on_key(key(KeyCode::Enter));
        assert_eq!(app.tab, Tab::Gate);
        assert_eq!(app.gate_candidate().as_deref(), Some("cand-0003"));

        // The receipts: every verdict, the hostile subject as markers.
        app.on_key(ch('4'));
        assert_eq!((app.tab, app.focus), (Tab::Receipts, Pane::Receipts));
        for _ in 0..3 {
            app.on_key(ch('j'));
        }
        assert_eq!(app.selected_receipt().unwrap().id, "rcpt-0003");
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        for word in ["holds", "fails", "unreachable", "unverified"] {
            assert!(s.contains(word), "{word}: {s}");
        }
        insta::assert_snapshot!(format!("receipts_{w}x{h}"), s);
        // `v` verifies them all again.
        app.take_effects();
        app.on_key(ch('v'));
        let eff = app.take_effects();
        assert!(
            matches!(&eff[..], [Effect::Verify(items)] if items.len() == 6),
            "{eff:?}"
        );
        // Esc goes back to the sessions.
        app.on_key(key(KeyCode::Esc));
        assert_eq!(app.tab, Tab::Sessions);
    }
}

#[test]
fn gate_states_are_coloured_by_role_and_awaiting_never_looks_passed() {
    use crate::tui::role::Role;
    let theme = Theme::default_theme();
    let mut app = fixture_app(TokenRole::Admin, theme.clone());
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let list = app.areas.sessions;
    for (word, role) in [
        ("awaiting", Role::GateAwaitingHuman),
        ("passed", Role::GatePassed),
        ("failed ", Role::GateCheckFailed),
        ("stale", Role::GateStale),
        ("not run", Role::GateNotStarted),
    ] {
        // The gate column is right of the state column: search from there.
        let gate_col = find_in(buf, list, "GATE").unwrap().0;
        let area = ratatui::layout::Rect::new(gate_col, list.y, 9, list.height);
        let (x, y) = find_in(buf, area, word).unwrap_or_else(|| panic!("{word}"));
        assert_eq!(buf[(x, y)].fg, fg(&theme, role), "{word}");
        assert_eq!(
            buf[(x, y)].modifier,
            theme.style(role).add_modifier,
            "{word}"
        );
    }
    assert_ne!(
        theme.style(Role::GateAwaitingHuman),
        theme.style(Role::GatePassed)
    );
    // The header counts the intents awaiting a person, in the awaiting role.
    let (x, y) = find(buf, "awaiting authority 1").unwrap();
    assert_eq!(y, 0);
    assert_eq!(buf[(x, y)].fg, fg(&theme, Role::GateAwaitingHuman));

    // The gate view: the state and the decision node in the awaiting role.
    app.sessions.selected = Some("run-0003".into());
    app.sync_focus();
    app.show_tab(Tab::Gate);
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let (x, y) = find_in(buf, app.areas.live, "AWAITING HUMAN").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(&theme, Role::GateAwaitingHuman));
    let (x, y) = find_in(buf, app.areas.live, "bytes  awaiting").unwrap();
    assert_eq!(buf[(x + 7, y)].fg, fg(&theme, Role::GateAwaitingHuman));
    let (x, y) = find_in(buf, app.areas.live, "  passed").unwrap();
    assert_eq!(buf[(x + 2, y)].fg, fg(&theme, Role::GatePassed));

    // Without colours the two still differ (by their modifiers), in every built-in theme.
    for (name, _) in crate::tui::theme::BUILTIN {
        let t = Theme::builtin(name).unwrap().no_color();
        assert_ne!(
            t.style(Role::GateAwaitingHuman),
            t.style(Role::GatePassed),
            "{name} under NO_COLOR"
        );
    }
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme().no_color());
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let gate_col = find_in(buf, app.areas.sessions, "GATE").unwrap().0;
    let area = ratatui::layout::Rect::new(gate_col, app.areas.sessions.y, 9, 20);
    let a = find_in(buf, area, "awaiting").unwrap();
    let p = find_in(buf, area, "passed").unwrap();
    assert_ne!(buf[a].modifier, buf[p].modifier);
}

/// What the approval flow shows for the awaiting intent, with hostile fields from the agent,
/// the remote and the forge.
fn check_view() -> CheckView {
    let mut it = intent(
        "int-0003",
        "run-0003",
        "cand-0002",
        "awaiting_authority",
        json!({
            "title": format!("Fix the lexer {HOSTILE_NAME}"),
            "branch": format!("fix/{HOSTILE_NAME}"),
            "body": format!("Line one\nclipboard \u{1b}]52;c;cm0gLXJmIH4=\u{7} and \u{202e}bidi\n{}",
                (3..=20).map(|n| format!("line {n}")).collect::<Vec<_>>().join("\n")),
        }),
    );
    it["remote"]["url"] = json!(format!(
        "https://forge.test/acme/widget.git\u{1b}[2J{HOSTILE_NAME}"
    ));
    serde_json::from_value(json!({
        "approval": "apr-1",
        "intent": it,
        "remote_tip": null,
        "ledger_head": {"seq": 42, "line_sha256": "a".repeat(64)},
        "gate_state": "awaiting_human",
        "evidence": [{"check": "test"}],
        "key_ids": ["k"],
    }))
    .unwrap()
}

/// A cockpit with the approval dialog open on int-0003 (as `P` opens it) and the flow's
/// text shown; returns the key file that must outlive it.
fn approving(role: TokenRole) -> (App, tempfile::NamedTempFile) {
    let mut app = fixture_app(role, Theme::default_theme());
    let key_file = tempfile::NamedTempFile::new().unwrap();
    app.key_path = Some(key_file.path().to_path_buf());
    app.on_key(ch('3'));
    app.take_effects();
    app.on_key(ch('P'));
    (app, key_file)
}

fn ask(app: &mut App, field: Field) -> std::sync::mpsc::Receiver<Answer> {
    let (tx, rx) = std::sync::mpsc::channel();
    app.on_msg(Msg::Approval(ApprovalEvent::Ask {
        field,
        prompt: match field {
            Field::Revision => "Revision: ".into(),
            Field::Passphrase => "Passphrase for the publish key: ".into(),
            Field::Offer => "Create the demo key? ".into(),
            Field::NewPassphrase => "New passphrase: ".into(),
        },
        reply: Reply::new(tx),
    }));
    rx
}

fn dialog(app: &App) -> &crate::tui::widgets::approval::Approval {
    match &app.mode {
        Mode::Modal(m) => match &**m {
            Modal::Approval(a) => a,
            _ => panic!("another dialog"),
        },
        _ => panic!("no dialog"),
    }
}

#[test]
fn the_approval_dialog_shows_every_field_sanitised_at_both_sizes() {
    for (w, h) in SIZES {
        let (mut app, _key) = approving(TokenRole::Write);
        let eff = app.take_effects();
        assert!(
            matches!(&eff[..], [Effect::Approve { intent }] if intent == "int-0003"),
            "{eff:?}"
        );
        let t = draw(&mut app, w, h);
        insta::assert_snapshot!(format!("approval_checking_{w}x{h}"), text(&t));
        app.on_msg(Msg::Approval(ApprovalEvent::Show(approve::display(
            &check_view(),
        ))));
        let rx = ask(&mut app, Field::Revision);
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        crate::tui::widgets::testing::assert_no_controls(buf);
        let s = text(&t);
        assert!(!s.contains("cm0gLXJmIH4"), "no OSC 52 payload: {s}");
        assert!(s.contains("⟨U+202E⟩"), "bidi shown as a marker: {s}");
        assert!(s.contains(REVISION), "the revision is on every page: {s}");
        insta::assert_snapshot!(format!("approval_revision_{w}x{h}"), s);
        // On a small screen the text takes pages: what is typed before the last page is
        // ignored; Enter shows the next page.
        let mut pages = 1;
        let mut last = None;
        while !dialog(&app).seen_all() {
            app.on_key(ch('9'));
            assert_eq!(dialog(&app).typed(), "", "typed before the last page");
            app.on_key(key(KeyCode::Enter));
            let t = draw(&mut app, w, h);
            crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
            last = Some(text(&t));
            pages += 1;
        }
        assert_eq!(
            pages > 1,
            (w, h) == (80, 24),
            "pages only on the small screen"
        );
        if let Some(s) = last {
            assert!(
                s.contains(REVISION) && s.contains("Type the full revision"),
                "{s}"
            );
            insta::assert_snapshot!(format!("approval_revision_last_page_{w}x{h}"), s);
        }
        assert!(rx.try_recv().is_err(), "nothing answered yet");
        for c in REVISION.chars() {
            app.on_key(ch(c));
        }
        let t = draw(&mut app, w, h);
        assert!(text(&t).contains(&format!("Revision: {REVISION}")));
        app.on_key(key(KeyCode::Enter));
        assert_eq!(rx.try_recv().unwrap().unwrap().as_str(), REVISION);

        // The passphrase: masked, nothing shows its length.
        let rx = ask(&mut app, Field::Passphrase);
        for c in "hunter2".chars() {
            app.on_key(ch(c));
        }
        let t = draw(&mut app, w, h);
        let s = text(&t);
        assert!(!s.contains("hunter2") && !s.contains("*******") && !s.contains("•"));
        insta::assert_snapshot!(format!("approval_passphrase_{w}x{h}"), s);
        app.on_key(key(KeyCode::Enter));
        assert_eq!(rx.try_recv().unwrap().unwrap().as_str(), "hunter2");
        assert!(matches!(
            dialog(&app).stage(),
            Stage::Working(Field::Passphrase)
        ));

        // The outcome, with the forge's hostile answer drawn harmlessly.
        app.on_msg(Msg::Approval(ApprovalEvent::Done(FlowOutcome::Published {
            intent: "int-0003".into(),
            revision: REVISION.into(),
            branch: format!("fix/{HOSTILE_NAME}"),
            pull_request: crate::publish::forge::PullRequest {
                number: 12,
                html_url: format!("https://forge.test/acme/widget/pull/12{HOSTILE_NAME}"),
            },
            receipt: ReceiptRef {
                id: "rcpt-0009".into(),
                path: "/home/op/.proctor/data/receipts/rcpt-0009.json".into(),
                signed: true,
            },
        })));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(
            s.contains("PUBLISHED int-0003") && !s.contains("cm0gLXJmIH4"),
            "{s}"
        );
        insta::assert_snapshot!(format!("approval_published_{w}x{h}"), s);
        assert!(
            app.take_effects()
                .iter()
                .any(|e| matches!(e, Effect::Refresh)),
            "the lists are reloaded"
        );
        app.on_key(key(KeyCode::Enter));
        assert!(app.mode.is_normal(), "Enter closes it once done");
    }
}

#[test]
fn paste_and_non_character_keys_never_reach_the_revision_or_the_passphrase() {
    let (mut app, _key) = approving(TokenRole::Write);
    app.on_msg(Msg::Approval(ApprovalEvent::Show(approve::display(
        &check_view(),
    ))));
    let rx = ask(&mut app, Field::Revision);
    draw(&mut app, 160, 48);
    assert!(dialog(&app).seen_all(), "one page at 160×48");
    let ignored = [
        key(KeyCode::Left),
        key(KeyCode::Right),
        key(KeyCode::Up),
        key(KeyCode::Down),
        key(KeyCode::Home),
        key(KeyCode::End),
        key(KeyCode::PageUp),
        key(KeyCode::PageDown),
        key(KeyCode::Tab),
        key(KeyCode::BackTab),
        key(KeyCode::Delete),
        key(KeyCode::Insert),
        key(KeyCode::F(1)),
        KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL),
        KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL),
        KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL),
        KeyEvent::new(KeyCode::Char('v'), KeyModifiers::CONTROL),
        KeyEvent::new(KeyCode::Char('b'), KeyModifiers::ALT),
        KeyEvent::new(KeyCode::Backspace, KeyModifiers::ALT),
        KeyEvent::new(KeyCode::Char('\u{202e}'), KeyModifiers::NONE),
    ];
    for c in "9d4c".chars() {
        app.on_key(ch(c));
    }
    for k in &ignored {
        app.on_key(*k);
        assert_eq!(dialog(&app).typed(), "9d4c", "{k:?} reached the field");
    }
    app.on_paste("2b1a0f9e8d7c6b5a49382716a5b4c3d2e1f0");
    assert_eq!(dialog(&app).typed(), "9d4c", "a paste reached the field");
    app.on_event(ratatui::crossterm::event::Event::Paste("x".into()));
    assert_eq!(dialog(&app).typed(), "9d4c");
    // Backspace erases; the rest typed by hand; Enter sends exactly what was typed.
    app.on_key(key(KeyCode::Backspace));
    assert_eq!(dialog(&app).typed(), "9d4");
    for c in REVISION[3..].chars() {
        app.on_key(ch(c));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(rx.try_recv().unwrap().unwrap().as_str(), REVISION);

    let rx = ask(&mut app, Field::Passphrase);
    assert_eq!(
        dialog(&app).typed(),
        "",
        "the passphrase field starts empty"
    );
    for c in "pass".chars() {
        app.on_key(ch(c));
    }
    for k in &ignored {
        app.on_key(*k);
        assert_eq!(dialog(&app).typed(), "pass", "{k:?} reached the passphrase");
    }
    app.on_paste("word");
    assert_eq!(
        dialog(&app).typed(),
        "pass",
        "a paste reached the passphrase"
    );
    // The keymap does not apply: `q` is a character here, not quit.
    app.on_key(ch('q'));
    assert!(!app.quit);
    app.on_key(key(KeyCode::Enter));
    assert_eq!(rx.try_recv().unwrap().unwrap().as_str(), "passq");
}

#[test]
fn esc_and_ctrl_c_refuse_at_each_prompt() {
    for abort in [
        key(KeyCode::Esc),
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
    ] {
        let (mut app, _key) = approving(TokenRole::Admin);
        // Esc before the first question: the question is refused as soon as it comes.
        app.on_key(abort);
        assert!(app.mode.is_modal(), "the dialog waits for the flow's end");
        let rx = ask(&mut app, Field::Revision);
        assert!(matches!(rx.try_recv().unwrap(), Err(PromptError::Aborted)));

        let (mut app, _key) = approving(TokenRole::Admin);
        app.on_msg(Msg::Approval(ApprovalEvent::Show(approve::display(
            &check_view(),
        ))));
        let rx = ask(&mut app, Field::Revision);
        draw(&mut app, 160, 48);
        app.on_key(ch('9'));
        app.on_key(abort);
        assert!(matches!(rx.try_recv().unwrap(), Err(PromptError::Aborted)));
        assert!(!app.quit, "ctrl-c in the dialog refuses, it does not quit");
        app.on_msg(Msg::Approval(ApprovalEvent::Done(FlowOutcome::Refused {
            code: "aborted".into(),
            message: "aborted at the prompt (Ctrl-C)".into(),
            receipt: Some(ReceiptRef {
                id: "rcpt-0010".into(),
                path: "/home/op/.proctor/data/receipts/rcpt-0010.json".into(),
                signed: false,
            }),
        })));
        let t = draw(&mut app, 80, 24);
        let s = text(&t);
        assert!(
            s.contains("REFUSED (aborted)") && s.contains("rcpt-0010"),
            "{s}"
        );
        insta::assert_snapshot!("approval_refused_80x24", s);
        app.on_key(abort);
        assert!(app.mode.is_normal());

        // Esc twice before the first question closes the dialog; the question that comes is
        // refused, and the flow's end goes to the status line.
        let (mut app, _key) = approving(TokenRole::Admin);
        app.on_key(abort);
        app.on_key(abort);
        assert!(app.mode.is_normal());
        let rx = ask(&mut app, Field::Revision);
        assert!(matches!(rx.try_recv().unwrap(), Err(PromptError::Aborted)));
        app.on_msg(Msg::Approval(ApprovalEvent::Done(FlowOutcome::Refused {
            code: "aborted".into(),
            message: "aborted at the prompt".into(),
            receipt: None,
        })));
        assert!(
            app.status
                .as_ref()
                .unwrap()
                .text
                .contains("approval refused (aborted)")
        );

        // The dialog dropped while a question waits (the cockpit ending): a refusal.
        let (mut app, _key) = approving(TokenRole::Admin);
        let rx = ask(&mut app, Field::Revision);
        app.mode = Mode::Normal;
        assert!(rx.recv().is_err(), "the flow sees its question unanswered");
    }
}

/// An intent of a remote host (the cockpit's first host is `build`): `P` opens a dialog that
/// names the host whose key and remote are used and sends nothing; `y` hands the terminal to
/// `proctor --host build publish approve int-0003` (no in-cockpit prompt, no local key);
/// the outcome it said comes back to the status line, a refusal as an error.
#[test]
fn a_remote_hosts_intent_is_approved_there_after_a_dialog_naming_the_host() {
    let mut app = fixture_app(TokenRole::Write, Theme::default_theme());
    app.remote_intents_host = Some("build".into());
    app.key_path = None;
    app.proctor_argv = vec!["/usr/bin/proctor".into(), "--home".into(), "/h".into()];
    app.on_key(ch('3'));
    app.take_effects();
    app.on_key(ch('P'));
    let sent = |eff: &[Effect]| {
        eff.iter()
            .any(|e| matches!(e, Effect::Approve { .. } | Effect::ApproveRemote { .. }))
    };
    assert!(!sent(&app.take_effects()), "nothing before the answer");
    let t = text(&draw(&mut app, 120, 40));
    assert!(t.contains("Approve int-0003 on host build?"), "{t}");
    let said = match &app.mode {
        Mode::Modal(m) => match &**m {
            Modal::Confirm { dialog, .. } => dialog.consequence().to_string(),
            _ => panic!("another dialog"),
        },
        _ => panic!("no dialog"),
    };
    assert!(said.contains("with build's publish key"), "{said}");
    assert!(
        said.contains("`ssh -t build proctor publish approve int-0003`"),
        "{said}"
    );
    app.on_key(key(KeyCode::Esc));
    assert!(app.mode.is_normal());
    assert!(!sent(&app.take_effects()), "cancelled: nothing sent");
    app.on_key(ch('P'));
    app.on_key(ch('y'));
    let eff = app.take_effects();
    assert!(
        eff.iter()
            .any(|e| matches!(e, Effect::ApproveRemote { host, intent }
            if host == "build" && intent == "int-0003")),
        "{eff:?}"
    );
    assert!(!eff.iter().any(|e| matches!(e, Effect::Approve { .. })));
    assert_eq!(
        app.remote_approve_argv("build", "int-0003"),
        [
            "/usr/bin/proctor",
            "--home",
            "/h",
            "--host",
            "build",
            "publish",
            "approve",
            "int-0003"
        ]
    );
    app.approved_remotely(
        "build",
        "int-0003",
        false,
        "proctor: on build: refused (wrong_revision): the revision typed is not".into(),
    );
    let st = app.status.clone().unwrap();
    assert_eq!(st.tone, crate::tui::app::Tone::Error);
    assert!(
        st.text.contains("on build: refused (wrong_revision)"),
        "{}",
        st.text
    );
    assert!(
        app.take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Refresh))
    );
    app.approved_remotely(
        "build",
        "int-0003",
        true,
        "proctor: on build: published".into(),
    );
    assert_eq!(
        app.status.clone().unwrap().tone,
        crate::tui::app::Tone::Success
    );
}

#[test]
fn approving_needs_a_persons_write_token_and_an_intent_awaiting_authority() {
    // Read-only: unavailable with the role it needs; nothing opens or is sent.
    let (mut app, _key) = approving(TokenRole::Read);
    assert!(app.mode.is_normal());
    assert!(
        !app.take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Approve { .. }))
    );
    assert!(
        app.status
            .as_ref()
            .is_some_and(|s| s.text.contains("needs the write role"))
    );
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let unavailable = Theme::default_theme().style(crate::tui::role::Role::Unavailable);
    let (x, y) = find(buf, "approving needs a person's write token").unwrap();
    assert_eq!(buf[(x, y)].fg, unavailable.fg.unwrap_or(Color::Reset));
    app.status = None;
    let t = draw(&mut app, 160, 48);
    let buf = t.backend().buffer();
    let bar = app.areas.status;
    let (x, y) = find_in(buf, bar, "P approve").unwrap();
    assert_eq!(buf[(x, y)].fg, unavailable.fg.unwrap_or(Color::Reset));
    app.on_key(ch(':'));
    let Mode::Modal(m) = &app.mode else { panic!() };
    let Modal::Palette(p) = &**m else { panic!() };
    assert!(
        p.listed()
            .iter()
            .any(|(a, ok)| *a == Action::Approve && !ok)
    );

    // An agent's write token: refused by name.
    let mut app = fixture_app(TokenRole::Write, Theme::default_theme());
    app.who.as_mut().unwrap().principal = Principal::Agent;
    let key_file = tempfile::NamedTempFile::new().unwrap();
    app.key_path = Some(key_file.path().to_path_buf());
    app.on_key(ch('3'));
    app.on_key(ch('P'));
    assert!(app.mode.is_normal());
    assert!(app.status.as_ref().unwrap().text.contains("agent identity"));
    assert!(app.refusal(Action::Approve).is_some());

    // A blocked intent is not approvable: its cause is said instead.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    app.key_path = Some(key_file.path().to_path_buf());
    app.on_key(ch('3'));
    app.on_key(ch('j'));
    app.take_effects();
    app.on_key(ch('P'));
    assert!(app.mode.is_normal());
    assert!(app.take_effects().is_empty());
    let st = app.status.as_ref().unwrap().text.clone();
    assert!(
        st.contains("int-0002 is BLOCKED") && st.contains("check test failed"),
        "{st}"
    );
    // From the sessions list, P approves the focused run's awaiting intent.
    app.on_key(ch('1'));
    app.sessions.selected = Some("run-0003".into());
    app.sync_focus();
    assert_eq!(app.approve_target().as_deref(), Ok("int-0003"));
    // Without a key file, nothing opens and the remedy is named.
    app.key_path = Some(std::path::PathBuf::from("/nonexistent/publish.p8"));
    app.on_key(ch('P'));
    assert!(app.mode.is_normal());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("proctor key generate")
    );
}

#[test]
fn the_header_says_agents_unconfined_while_a_run_is_live() {
    use crate::tui::role::Role;
    let theme = Theme::default_theme();
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "agents unconfined").expect("a live run: the header warns");
        assert_eq!(y, 0, "in the header");
        assert_eq!(buf[(x, y)].fg, fg(&theme, Role::Warning));
        assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
        // The role is never what gives way.
        assert!(find(buf, "admin").is_some_and(|(_, y)| y == 0), "{w}x{h}");

        // NO_COLOR: the words themselves say it, still bold.
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme().no_color());
        let t = draw(&mut app, w, h);
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "agents unconfined").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::Reset);
        assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));

        // No live run: nothing to warn about.
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        app.sessions.counts = Counts {
            live: 0,
            idle: 0,
            ..app.sessions.counts
        };
        let t = draw(&mut app, w, h);
        assert!(
            !text(&t).lines().next().unwrap().contains("unconfined"),
            "{}",
            text(&t)
        );
    }
    // Narrower than 80: `agents` gives way before the warning does.
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    let t = draw(&mut app, 72, 24);
    let first = text(&t).lines().next().unwrap().to_string();
    assert!(
        first.contains("unconfined") && first.contains("admin"),
        "{first}"
    );
}

/// The flow's notice while it waits after wrong passphrases shows as the dialog's note, and
/// the next question clears it.
#[test]
fn the_approval_dialog_shows_the_passphrase_wait_as_its_note() {
    let (mut app, _key) = approving(TokenRole::Write);
    app.take_effects();
    app.on_msg(Msg::Approval(ApprovalEvent::Show(approve::display(
        &check_view(),
    ))));
    let wait = "4 wrong passphrases in a row for this key: waiting 2 s before asking again";
    app.on_msg(Msg::Approval(ApprovalEvent::Notice(wait.into())));
    let t = draw(&mut app, 160, 48);
    crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
    assert!(text(&t).contains(wait), "{}", text(&t));
    let _rx = ask(&mut app, Field::Passphrase);
    let t = draw(&mut app, 160, 48);
    assert!(!text(&t).contains(wait), "{}", text(&t));
}

#[test]
fn a_pane_larger_than_a_run_may_be_asks_for_the_limits_once() {
    use crate::runs::{MAX_COLS, MAX_ROWS};
    let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
    app.live.inner = ratatui::layout::Rect::new(0, 0, 4000, 4000);
    let want = app.desired_resize();
    assert_eq!(want, Some(("run-0001".to_string(), MAX_ROWS, MAX_COLS)));
    let (run, rows, cols) = want.unwrap();
    app.send_resize(run, rows, cols);
    let calls: Vec<_> = app
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Call(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].body,
        Some(json!({"rows": MAX_ROWS, "cols": MAX_COLS}))
    );
    // Sent once: the pane being larger than the PTY is not a reason to ask again.
    assert_eq!(app.desired_resize(), None);
}

#[test]
fn waiting_runs_show_it_on_their_row_and_in_the_header() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        let mut runs = fixture_runs();
        runs.push(run_at(
            "run-0101",
            "11:50",
            json!({"name": "hooked", "waiting_known": true,
                   "waiting": {"source": "hook", "since": "2026-11-30T11:58:00.000Z",
                               "reason": "Claude needs your permission to use Bash"}}),
        ));
        runs.push(run_at(
            "run-0102",
            "11:51",
            json!({"name": "turn over", "transport": "pipe", "state": "idle",
                   "waiting_known": true,
                   "waiting": {"source": "protocol", "since": "2026-11-30T11:59:00.000Z",
                               "reason": "the turn ended; the tool waits for your input"}}),
        ));
        let counts = Counts::of(&runs);
        app.on_msg(Msg::Runs(Ok(RunsPage {
            total: runs.len(),
            items: runs,
            counts,
        })));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        let head = s.lines().next().unwrap();
        assert!(head.contains("waiting 2") || head.contains("wait 2"), "{s}");
        let rows = s
            .lines()
            .skip(1)
            .filter(|l| l.contains(" waiting "))
            .count();
        assert_eq!(rows, 2, "both rows say they wait: {s}");
        insta::assert_snapshot!(format!("cockpit_waiting_{w}x{h}"), s);
        // Where the list has the room, the row says it in full, with the source.
        let only: Vec<RunView> = app
            .sessions
            .runs
            .iter()
            .filter(|r| r.waiting.is_some())
            .cloned()
            .collect();
        let counts = Counts::of(&only);
        app.on_msg(Msg::Runs(Ok(RunsPage {
            total: only.len(),
            items: only,
            counts,
        })));
        let s = text(&draw(&mut app, w, h));
        assert!(s.contains("waiting for you · hook"), "{s}");
        assert!(s.contains("waiting for you · protocol"), "{s}");
    }
}

#[test]
fn a_run_on_a_limit_shows_it_on_its_row_with_the_reset_time() {
    for (w, h) in SIZES {
        let mut app = fixture_app(TokenRole::Admin, Theme::default_theme());
        // Only limited runs: the row has the room for its whole state.
        let runs = vec![
            run_at(
                "run-0201",
                "11:50",
                json!({"name": "spent", "transport": "pipe", "state": "idle",
                       "waiting_known": true,
                       "waiting": {"source": "protocol", "since": "2026-11-30T11:59:00.000Z",
                                   "reason": "the turn ended; the tool waits for your input"},
                       "limit": {"kind": "usage", "resets_at": "2026-11-30T14:30:00Z",
                                 "account_ref": "claude"}}),
            ),
            run_at(
                "run-0202",
                "11:51",
                json!({"name": "throttled", "tool": "codex", "profile": "codex",
                       "transport": "pipe", "state": "stopped", "exit_code": 0,
                       "ended_at": "2026-11-30T11:55:00.000Z",
                       "limit": {"kind": "rate", "account_ref": "codex"}}),
            ),
            // A reset sent hostile (a client of another server): drawn harmlessly.
            run_at(
                "run-0203",
                "11:52",
                json!({"name": "odd", "transport": "pipe", "state": "idle",
                       "limit": {"kind": "usage", "resets_at": "soon\u{1b}[2J\u{202e}",
                                 "account_ref": "claude"}}),
            ),
        ];
        let counts = Counts::of(&runs);
        app.on_msg(Msg::Runs(Ok(RunsPage {
            total: runs.len(),
            items: runs,
            counts,
        })));
        let t = draw(&mut app, w, h);
        crate::tui::widgets::testing::assert_no_controls(t.backend().buffer());
        let s = text(&t);
        assert!(s.contains("limit · usage · resets 14:30Z in 2h"), "{s}");
        assert!(s.contains("limit · rate · reset unknown"), "{s}");
        assert!(!s.contains("waiting for you"), "the limit comes first: {s}");
        insta::assert_snapshot!(format!("cockpit_limit_{w}x{h}"), s);
    }
}
