//! The factory runs in the Sessions view of a real terminal, served by a real server: a
//! finished run's record (`data/factory/fac-0001/run.json`, `proctor-factory-run/1`, 0600 in
//! a 0700 folder, serialised from `FactoryRun`) is written into the home before `proctor
//! demo` starts the server; the cockpit polls `GET /v1/m/factory/runs` and shows the run as
//! a group: its outcome and the tree of its steps, next to the demo's sessions and its own
//! two factory runs.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::pty::Term;
use proctor::api::factory::{AgentRef, FactoryRun, Phase, RunStatus, StepView};

fn step(role: &str, tool: &str, ms: u64, verdict: Option<&str>) -> StepView {
    StepView {
        role: role.into(),
        tool: tool.into(),
        state: "done".into(),
        started_at: "2026-11-30T11:50:00.000Z".into(),
        elapsed_ms: Some(ms),
        exit: Some(0),
        verdict: verdict.map(str::to_string),
    }
}

fn agent(tool: &str) -> AgentRef {
    AgentRef {
        tool: tool.into(),
        profile: tool.into(),
        model: None,
    }
}

/// A run rejected after its repair: two REQUEST_CHANGES, exit 3.
fn rejected() -> FactoryRun {
    FactoryRun {
        format: "proctor-factory-run/1".into(),
        id: "fac-0001".into(),
        status: RunStatus::Rejected,
        phase: Phase::Done,
        started_at: "2026-11-30T11:50:00.000Z".into(),
        finished_at: Some("2026-11-30T11:55:00.000Z".into()),
        workspace: "/tmp/wt-feature".into(),
        task_sha256: "ab".repeat(32),
        worker: agent("claude"),
        reviewer: agent("codex"),
        timeout_ms: 600_000,
        demo: false,
        rig: None,
        steps: vec![
            step("worker", "claude", 42_000, None),
            step("review-1", "codex", 65_000, Some("REQUEST_CHANGES")),
            step("repair", "claude", 125_000, None),
            step("review-2", "codex", 51_000, Some("REQUEST_CHANGES")),
        ],
        reachable_after: 0,
        provider_bound_ms: 0,
        candidate: Some("3f2a9c0d1e4b5a6978877665544332211000ffeeddccbbaa9988776655443322".into()),
        error: None,
        exit_code: Some(3),
        receipt: None,
        ledger_seq: None,
    }
}

fn private_dir(p: &std::path::Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_finished_factory_run_shows_as_a_group_in_a_real_terminal() {
    let h = common::TestHome::new();
    let data = h.path().join("data");
    let dir = data.join("factory").join("fac-0001");
    for d in [&data, &data.join("factory"), &dir] {
        private_dir(d);
    }
    let record = dir.join("run.json");
    std::fs::write(&record, serde_json::to_vec_pretty(&rejected()).unwrap()).unwrap();
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o600)).unwrap();

    let out = h.run(&["demo", "--no-cockpit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server serves the record as written.
    let listed = h.json(&["factory", "list", "--json"]);
    assert!(
        listed.to_string().contains("fac-0001"),
        "the server lists the run: {listed}"
    );
    let home = h.path().to_str().unwrap().to_string();
    for (rows, cols) in [(24u16, 80u16), (48, 160)] {
        let mut t = Term::spawn(
            env!("CARGO_BIN_EXE_proctor"),
            &["--home", &home],
            rows,
            cols,
        );
        // At 160×48 the whole group, beside the demo's own two factory runs. At 80×24 the
        // sessions come first: the groups have two rows, the running one's header and the
        // count of the others.
        let s = t.wait_screen("the factory group", |s| {
            s.contains("Sessions 6")
                && if cols >= 160 {
                    s.contains("fac-0001")
                        && s.contains("rejected (exit 3)")
                        && s.contains("└ review-2")
                } else {
                    s.contains("  factory  worker") && s.contains("2 more factory run")
                }
        });
        if cols >= 160 {
            assert!(s.matches("  factory  ").count() >= 3, "{s}");
            assert!(s.contains("├ worker"), "the group's steps: {s}");
            for row in [
                "├ review-1",
                "├ repair",
                "└ review-2",
                "REQUEST_CHANGES",
                "2:05",
            ] {
                assert!(s.contains(row), "{row}: {s}");
            }
        } else {
            // The sessions keep three of the five rows (which three depends on the demo's
            // sessions' order at that moment: their activity moves them).
            let sessions = s
                .lines()
                .filter(|l| l.starts_with('┃') && l.contains(" run-00"))
                .count();
            assert_eq!(sessions, 3, "three session rows: {s}");
        }
        // The sessions' keys still move the sessions' selection.
        t.send(b"j");
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(t.screen().contains("  factory  "));
        t.send(b"q");
        assert_eq!(t.exit_code(), 0);
    }
}
