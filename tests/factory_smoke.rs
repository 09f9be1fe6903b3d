//! `proctor factory smoke`, the coordination tracer, run as the real binary: the report,
//! its fixed point recomputed by `proctor ledger verify`, modes, refusals.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::TestHome;
use serde_json::Value;

fn readme() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn smoke(h: &TestHome, out: &Path, data: Option<&Path>, json: bool) -> std::process::Output {
    let mut args: Vec<String> = vec![
        "factory".into(),
        "smoke".into(),
        "--artifact".into(),
        readme().display().to_string(),
        "--task".into(),
        "Review this candidate".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(d) = data {
        args.push("--data-dir".into());
        args.push(d.display().to_string());
    }
    if json {
        args.push("--json".into());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    h.run(&refs)
}

/// `proctor ledger verify FILE`'s key=value lines.
fn verify_lines(h: &TestHome, log: &Path) -> (bool, std::collections::BTreeMap<String, String>) {
    let out = h.run(&["ledger", "verify", log.to_str().unwrap()]);
    let s = String::from_utf8(out.stdout).unwrap();
    let kv = s
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (out.status.success(), kv)
}

#[test]
fn smoke_on_the_readme_reports_a_fixed_point_that_ledger_verify_recomputes() {
    let h = TestHome::new();
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("report.json");
    let data = t.path().join("fs");
    let o = smoke(&h, &out, Some(&data), true);
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let written: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(printed, written);
    let r = written;
    assert_eq!(r["ok"], true);
    assert_eq!(r["status"], "completed");
    assert_eq!(r["command"], "factory-smoke");
    assert_eq!(r["execution"], "coordination-tracer; no code execution");
    assert_eq!(r["task"], "Review this candidate");
    assert_eq!(r["artifact"]["path"], readme().display().to_string());
    assert_eq!(
        r["artifact"]["bytes"],
        std::fs::metadata(readme()).unwrap().len()
    );
    let sum = Command::new("sha256sum").arg(readme()).output().unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    assert_eq!(
        r["artifact"]["sha256"],
        sum.split_whitespace().next().unwrap()
    );
    assert_eq!(r["actors"]["coordinator"], "act-0001");
    assert_eq!(r["actors"]["builder"], "act-0002");
    assert_eq!(r["actors"]["reviewer"], "act-0003");
    assert_eq!(
        r["messages"],
        serde_json::json!(["msg-0001", "msg-0002", "msg-0004"])
    );
    assert_eq!(
        r["handoff"],
        serde_json::json!({"messageId": "msg-0003", "correlationId": "cor-0001", "authorityTransferred": []})
    );
    let acks = r["acknowledgements"].as_array().unwrap();
    assert_eq!(acks.len(), 4);
    for a in acks {
        assert_eq!(
            a["meaning"],
            "receipt only; not agreement, approval, or completion"
        );
    }
    assert_eq!(
        r["verification"],
        serde_json::json!({"ok": true, "evidenceOk": true, "evidenceGatesResult": true})
    );
    assert_eq!(
        r["toolSurface"],
        serde_json::json!(["ack", "handoff", "heartbeat", "inbox", "register", "send"])
    );
    assert_eq!(r["failedChecks"], serde_json::json!([]));
    assert_eq!(r["checks"].as_array().unwrap().len(), 5);

    let log = data.join("events.jsonl");
    let ev = &r["evidenceLog"];
    assert_eq!(ev["pathRole"], "data-dir/events.jsonl");
    let (ok, kv) = verify_lines(&h, &log);
    assert!(ok, "{kv:?}");
    assert_eq!(kv["format"], ev["format"].as_str().unwrap());
    assert_eq!(kv["bytes"], ev["bytes"].to_string());
    assert_eq!(kv["events"], ev["events"].to_string());
    assert_eq!(kv["sha256"], ev["sha256"].as_str().unwrap());
    // The report's sha256 is that of the exact file, as sha256sum sees it.
    let sum = Command::new("sha256sum").arg(&log).output().unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    assert_eq!(ev["sha256"], sum.split_whitespace().next().unwrap());

    assert_eq!(mode(&out), 0o600);
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&log), 0o600);
    // The bus needed no server.
    assert!(h.server_pid().is_none());

    // One tampered byte: ledger verify fails.
    let mut bytes = std::fs::read(&log).unwrap();
    let i = bytes.windows(8).position(|w| w == b"msg-0002").unwrap();
    bytes[i + 7] = b'9';
    std::fs::write(&log, &bytes).unwrap();
    let (ok, kv) = verify_lines(&h, &log);
    assert!(!ok);
    assert_eq!(kv["ok"], "false");
    assert_eq!(kv["reason"], "hash_mismatch", "{kv:?}");
}

#[test]
fn without_a_data_dir_each_run_gets_a_new_numbered_folder() {
    let h = TestHome::new();
    let out = h.path().join("r.json");
    for n in ["0001", "0002"] {
        let o = smoke(&h, &out, None, false);
        let s = String::from_utf8(o.stdout).unwrap();
        assert!(o.status.success(), "{s}");
        let dir = h.path().join(format!("data/factory/smoke-{n}"));
        let log = dir.join("events.jsonl");
        assert!(s.contains(&format!("log={}", log.display())), "{s}");
        assert!(s.lines().any(|l| l == "ok=true"), "{s}");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&h.path().join("data/factory")), 0o700);
        assert_eq!(mode(&log), 0o600);
        let (ok, kv) = verify_lines(&h, &log);
        assert!(ok);
        let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(kv["sha256"], r["evidenceLog"]["sha256"].as_str().unwrap());
        assert!(s.contains(&format!("sha256={}", kv["sha256"])), "{s}");
    }
}

#[test]
fn a_data_dir_whose_log_holds_events_is_refused_and_left_untouched() {
    let h = TestHome::new();
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("fs");
    let out1 = t.path().join("r1.json");
    assert!(smoke(&h, &out1, Some(&data), true).status.success());
    let log = data.join("events.jsonl");
    let before = std::fs::read(&log).unwrap();
    let out2 = t.path().join("r2.json");
    let o = smoke(&h, &out2, Some(&data), true);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("already holds events"), "{err}");
    assert!(err.contains("--data-dir"), "{err}");
    assert_eq!(std::fs::read(&log).unwrap(), before);
    assert!(!out2.exists());

    // An existing, empty events.jsonl is used.
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("events.jsonl"), b"").unwrap();
    let o = smoke(&h, &out2, Some(&empty), true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mode(&empty), 0o700);
}

#[test]
fn a_missing_artifact_is_refused_with_the_remedy_and_nothing_is_created() {
    let h = TestHome::new();
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("fs");
    let out = t.path().join("r.json");
    let o = h.run(&[
        "factory",
        "smoke",
        "--artifact",
        t.path().join("nope.md").to_str().unwrap(),
        "--task",
        "T",
        "--out",
        out.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("cannot read the artifact"), "{err}");
    assert!(err.contains("Remedy: give --artifact"), "{err}");
    assert!(!data.exists());
    assert!(!out.exists());
    assert!(!h.path().join("data/factory").exists());
}

#[test]
fn help_teaches_with_examples() {
    let h = TestHome::new();
    let s = h.ok(&["factory", "smoke", "--help"]);
    for needle in [
        "no model",
        "proctor ledger verify",
        "Examples:",
        "acked-by-another-actor",
        "Exit codes",
    ] {
        assert!(s.contains(needle), "{needle}: {s}");
    }
    assert!(h.ok(&["factory", "--help"]).contains("smoke"));
}
