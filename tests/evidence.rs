//! Candidates, evidence, the gate and receipts against a real server (the provider fakes on
//! PATH), real worktree runs (`session start --worktree`) and real git repositories: seed
//! 003's V1 → V2 scenario end to end, the refusals by name, failing checks, deadlines,
//! missing artifacts, truncation, receipts and their verification, roles.

mod common;

use std::path::{Path, PathBuf};

use common::{DemoServer, call_as, http_status};
use proctor::git::Git;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";
const WS: &str = "/v1/m/sessions/workspaces";
const EV: &str = "/v1/m/evidence";

/// The check policy of the scenario: `test` passes when src/lib.txt says "ok".
const POLICY: &str = "[[check]]\nname = \"test\"\nargv = [\"sh\", \"-c\", \"mkdir -p target && grep ok src/lib.txt > target/report.txt\"]\ndeadline_secs = 60\nartifacts = [\"target/report.txt\"]\n\n[[check]]\nname = \"lint\"\nargv = [\"true\"]\n";

fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir)
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .text(args)
        .unwrap()
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn sha(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A repository with one commit (and a .gitignore), registered as a workspace whose check
/// policy is `policy` (approved when `approve`).
struct World {
    s: DemoServer,
    _repo: tempfile::TempDir,
    ws: String,
}

impl World {
    fn new(policy: Option<&str>, approve: bool) -> World {
        let s = DemoServer::start(&[]);
        let repo = tempfile::Builder::new()
            .prefix("evrepo")
            .tempdir_in("/tmp")
            .unwrap();
        let r = repo.path();
        git(r, &["init", "-q", "-b", "main"]);
        write(&r.join("src/lib.txt"), b"not yet\n");
        write(&r.join(".gitignore"), b"target/\nnode_modules/\n");
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "base"]);
        let path = std::fs::canonicalize(r).unwrap();
        let (code, v) = s.call("POST", WS, Some(json!({"path": path.to_str().unwrap()})));
        assert!(code == 200 || code == 201, "{code} {v}");
        let ws = v["ref"].as_str().unwrap().to_string();
        if let Some(p) = policy {
            s.expect(
                200,
                "PUT",
                &format!("{WS}/{ws}/policy"),
                Some(json!({"policy": p})),
            );
            if approve {
                s.expect(
                    200,
                    "POST",
                    &format!("{WS}/{ws}/policy/approve"),
                    Some(json!({"sha256": sha(p)})),
                );
            }
        }
        World { s, _repo: repo, ws }
    }

    /// A stopped worktree run; returns its ref and worktree.
    fn worktree_run(&self) -> (String, PathBuf) {
        let (code, v) = self.s.call(
            "POST",
            RUNS,
            Some(json!({"transport": "pipe", "tool": "gemini", "workspace": self.ws, "worktree": true})),
        );
        assert_eq!(code, 201, "{v}");
        let run = v["ref"].as_str().unwrap().to_string();
        self.s
            .expect(200, "POST", &self.s.run_path(&run, "/stop"), None);
        (run, PathBuf::from(v["workspace"].as_str().unwrap()))
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        self.s.home.run(args)
    }

    fn cli_json(&self, args: &[&str]) -> Value {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "proctor {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn ledger_kinds(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(self.s.home.ledger())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["kind"] == kind)
            .collect()
    }
}

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn node<'a>(gate: &'a Value, id: &str) -> &'a Value {
    fn find<'a>(n: &'a Value, id: &str) -> Option<&'a Value> {
        if n["id"] == id {
            return Some(n);
        }
        n["children"].as_array()?.iter().find_map(|c| find(c, id))
    }
    gate["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|n| find(n, id))
        .unwrap()
}

#[test]
fn v1_green_then_one_byte_makes_it_stale_and_v2_is_judged_afresh() {
    let w = World::new(Some(POLICY), true);
    // The worktree run, started as an operator would.
    let started = w.cli_json(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--workspace",
        &w.ws,
        "--worktree",
        "--json",
    ]);
    let run = started["ref"].as_str().unwrap().to_string();
    let wt = PathBuf::from(started["worktree"]["path"].as_str().unwrap());
    assert_eq!(code(&w.cli(&["session", "stop", &run])), 0);
    write(&wt.join("src/lib.txt"), b"ok v1\n");

    // V1: bound, checked green, awaiting a person (never shown as accepted).
    let v1 = w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    assert_eq!(v1["id"], "cand-0001");
    assert_eq!(v1["run_ref"], run.as_str());
    let identity1 = v1["identity"]["digest"].as_str().unwrap().to_string();
    assert_eq!(
        v1["identity_digest"],
        format!("format=candidate-identity/1 digest=candidate-identity-sha256/1 {identity1}")
    );
    assert_eq!(v1["identity"]["files"][0]["path"], "src/lib.txt");
    assert_eq!(v1["identity"]["files"][0]["change"], "modified");
    let human = w.cli(&["candidate", "show", "1"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("identity format=candidate-identity/1 digest=candidate-identity-sha256/1"),
        "{text}"
    );
    assert!(text.contains("modified     src/lib.txt"), "{text}");

    let out = w.cli(&["check", "run", "--candidate", "cand-0001", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let ev1: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (ev1["id"].as_str(), ev1["attempt"].as_u64()),
        (Some("ev-0001"), Some(1))
    );
    assert_eq!(ev1["result"], "passed");
    assert_eq!(ev1["identity"]["digest"], identity1.as_str());
    assert_eq!(ev1["policy"]["digest"], sha(POLICY));
    assert_eq!(
        ev1["checks"][0]["argv"],
        json!([
            "sh",
            "-c",
            "mkdir -p target && grep ok src/lib.txt > target/report.txt"
        ])
    );
    assert_eq!(ev1["checks"][0]["artifacts"][0]["sha256"], sha("ok v1\n"));
    assert!(
        !wt.join("target").exists(),
        "checks never write into the candidate's worktree"
    );

    let gate = w.cli_json(&["gate", "cand-0001", "--json"]);
    assert_eq!(gate["state"], "awaiting_human");
    assert_eq!(gate["evidence_ok"], true);
    assert_eq!(node(&gate, "decision")["state"], "awaiting");
    assert_eq!(node(&gate, "check:test")["state"], "passed");
    let tree = String::from_utf8_lossy(&w.cli(&["gate", "cand-0001"]).stdout).into_owned();
    assert!(
        tree.starts_with(&format!("cand-0001 ({run}): awaiting_human\n")),
        "{tree}"
    );
    assert!(
        tree.contains("\n    test [passed] ev-0001 attempt 1: exit 0"),
        "{tree}"
    );
    assert!(tree.contains("[awaiting] awaiting a person"), "{tree}");

    // One byte changes (in node_modules, ignored): V1's evidence is stale and refused.
    write(&wt.join("node_modules/dep/index.js"), b"1");
    let gate = w.cli_json(&["gate", "cand-0001", "--json"]);
    assert_eq!(gate["state"], "evidence_stale");
    assert_eq!(gate["evidence_ok"], false);
    assert_eq!(gate["identity"]["now"], "changed");
    assert_eq!(node(&gate, "check:test")["state"], "stale");
    let out = w.cli(&["check", "run", "--candidate", "cand-0001"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("stale: bind again"),
        "{}",
        stderr(&out)
    );

    // V2: its own candidate, its own attempt; V1's green stays in history, stale.
    let v2 = w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    assert_eq!(v2["id"], "cand-0002");
    assert_ne!(v2["identity"]["digest"], identity1.as_str());
    let gate = w.cli_json(&["gate", "cand-0002", "--json"]);
    assert_eq!(gate["state"], "evidence_stale");
    assert_eq!(gate["history"][0]["evidence"], "ev-0001");
    assert_eq!(gate["history"][0]["fresh"], false);
    let out = w.cli(&["check", "run", "--candidate", "cand-0002", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let ev2: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (ev2["id"].as_str(), ev2["attempt"].as_u64()),
        (Some("ev-0002"), Some(1))
    );
    let gate = w.cli_json(&["gate", "cand-0002", "--json"]);
    assert_eq!(gate["state"], "awaiting_human");
    let history: Vec<(&str, bool)> = gate["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["evidence"].as_str().unwrap(),
                h["fresh"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(history, [("ev-0001", false), ("ev-0002", true)]);
    let old =
        w.s.expect(200, "GET", &format!("{EV}/evidence/ev-0001"), None);
    assert_eq!(old["result"], "passed", "V1's green is kept");
    assert_eq!(w.ledger_kinds("evidence.candidate.bound").len(), 2);
    assert_eq!(w.ledger_kinds("evidence.recorded").len(), 2);

    // Receipts: one per binding and per attempt, each verified against the home's files.
    let list = w.cli_json(&["receipt", "list", "--json"]);
    let kinds: Vec<(&str, &str)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["subject"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("candidate.bound", "cand-0001"),
            ("evidence.attempt", "ev-0001"),
            ("candidate.bound", "cand-0002"),
            ("evidence.attempt", "ev-0002"),
        ]
    );
    let out = w.cli(&["receipt", "verify", "rcpt-0004", "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "holds"),
        "{report}"
    );
    // V1's receipt: its record holds, but its worktree no longer holds those bytes.
    let out = w.cli(&["receipt", "verify", "rcpt-0002", "--json"]);
    assert_eq!(code(&out), 1);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let state = |r: &Value, n: &str| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == n)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state(&report, "identity"), "holds");
    assert_eq!(state(&report, "worktree"), "differs");
    assert_eq!(state(&report, "entry"), "holds");

    // A tampered captured output and a tampered ledger are detected.
    let file = w.s.home.path().join("data/evidence/ev-0002/test.stderr");
    std::fs::write(&file, b"forged").unwrap();
    let out = w.cli(&["receipt", "verify", "rcpt-0004"]);
    assert_eq!(code(&out), 1);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("SOMETHING DIFFERS"), "{text}");
    assert!(text.contains("differs     check.test.stderr"), "{text}");
    std::fs::write(&file, b"").unwrap();
    let ledger = w.s.home.ledger();
    let original = std::fs::read(&ledger).unwrap();
    let mut tampered = original.clone();
    let needle = b"\"result\":\"passed\"";
    let at = tampered
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
        + 10;
    tampered[at] = b'P';
    std::fs::write(&ledger, &tampered).unwrap();
    let report: Value =
        serde_json::from_slice(&w.cli(&["receipt", "verify", "rcpt-0004", "--json"]).stdout)
            .unwrap();
    assert_eq!(state(&report, "ledger"), "differs");
    std::fs::write(&ledger, &original).unwrap();
    assert_eq!(code(&w.cli(&["receipt", "verify", "rcpt-0004"])), 0);
}

#[test]
fn failing_checks_deadlines_missing_artifacts_and_truncation_through_the_server() {
    let policy = r#"
[[check]]
name = "fails"
argv = ["sh", "-c", "echo broken >&2; exit 2"]

[[check]]
name = "slow"
argv = ["sleep", "30"]
deadline_secs = 1

[[check]]
name = "report"
argv = ["true"]
artifacts = ["out/report.xml"]

[[check]]
name = "loud"
argv = ["head", "-c", "4000", "/dev/zero"]
max_output_bytes = 1024
"#;
    let w = World::new(Some(policy), true);
    let (run, _wt) = w.worktree_run();
    w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    let out = w.cli(&["check", "run", "--candidate", "1", "--json"]);
    assert_eq!(code(&out), 1, "a failed check exits 1");
    let ev: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ev["result"], "failed");
    let by = |n: &str| {
        ev["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by("fails")["exit_code"], 2);
    assert_eq!(by("fails")["stderr"]["bytes"], 7);
    let slow = by("slow");
    assert_eq!(
        (slow["timed_out"].as_bool(), slow["signal"].as_str()),
        (Some(true), Some("SIGTERM"))
    );
    assert_eq!(slow["exit_code"], Value::Null, "no exit code was observed");
    let report = by("report");
    assert_eq!(
        (report["exit_code"].as_i64(), report["passed"].as_bool()),
        (Some(0), Some(false))
    );
    assert_eq!(report["artifacts"][0]["present"], false);
    let loud = by("loud");
    assert_eq!(loud["stdout"]["bytes"], 1024);
    assert_eq!(loud["stdout"]["observed_bytes"], 4000);
    assert_eq!(loud["stdout"]["truncated"], true);
    assert_eq!(
        std::fs::read(w.s.home.path().join("data/evidence/ev-0001/loud.stdout"))
            .unwrap()
            .len(),
        1024
    );

    let gate = w.cli_json(&["gate", "cand-0001", "--json"]);
    assert_eq!(gate["state"], "check_failed");
    for (id, state) in [
        ("check:fails", "failed"),
        ("check:slow", "failed"),
        ("check:report", "failed"),
        ("check:loud", "passed"),
    ] {
        assert_eq!(node(&gate, id)["state"], state, "{id}");
    }
    assert_eq!(node(&gate, "decision")["state"], "blocked");
    // The same bytes under the same policy are not judged again.
    let out = w.cli(&["check", "run", "--candidate", "cand-0001"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("already judged"), "{}", stderr(&out));
}

#[test]
fn refusals_by_name_and_roles() {
    let w = World::new(Some(POLICY), false);
    let (run, wt) = w.worktree_run();

    // No approved policy: 409 naming the remedy; the gate says not_started.
    w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    let (c, v) =
        w.s.call("POST", &format!("{EV}/candidates/cand-0001/checks"), None);
    assert_eq!(c, 409, "{v}");
    assert_eq!(v["error"]["code"], "policy_not_approved");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("proctor workspace approve-policy")
    );
    let gate =
        w.s.expect(200, "GET", &format!("{EV}/candidates/cand-0001/gate"), None);
    assert_eq!(gate["state"], "not_started");
    assert_eq!(node(&gate, "policy")["state"], "unmet");

    // An index touched, then a commit: typed refusals, never a candidate or a receipt.
    let receipts = || {
        w.s.expect(200, "GET", &format!("{EV}/receipts"), None)["items"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = receipts();
    write(&wt.join("src/lib.txt"), b"ok\n");
    git(&wt, &["add", "src/lib.txt"]);
    let (c, v) = w.s.call(
        "POST",
        &format!("{EV}/candidates"),
        Some(json!({"run": run})),
    );
    assert_eq!(
        (c, v["error"]["code"].as_str()),
        (409, Some("index_changed")),
        "{v}"
    );
    git(&wt, &["commit", "-q", "-m", "worker commit"]);
    let out = w.cli(&["candidate", "bind", "--run", &run]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("worker_committed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(receipts(), before);
    let list =
        w.s.expect(200, "GET", &format!("{EV}/candidates?run={run}"), None);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    // A run without a worktree, an unknown run, a bad id.
    let (c, v) = w.s.call(
        "POST",
        RUNS,
        Some(json!({"transport": "pipe", "tool": "gemini", "workspace": w.ws})),
    );
    assert_eq!(c, 201, "{v}");
    let plain = v["ref"].as_str().unwrap().to_string();
    let (c, v) = w.s.call(
        "POST",
        &format!("{EV}/candidates"),
        Some(json!({"run": plain})),
    );
    assert_eq!(
        (c, v["error"]["code"].as_str()),
        (409, Some("no_worktree")),
        "{v}"
    );
    let (c, _) = w.s.call(
        "POST",
        &format!("{EV}/candidates"),
        Some(json!({"run": "run-0099"})),
    );
    assert_eq!(c, 404);
    let (c, _) = w.s.call("GET", &format!("{EV}/candidates/cand-0042"), None);
    assert_eq!(c, 404);
    let (c, _) = w.s.call("GET", &format!("{EV}/candidates/..%2Fx"), None);
    assert_eq!(c, 400);

    // Roles: no token 401; read can read, not bind or check.
    let sock = w.s.home.socket();
    let read = w.s.json_token("read", "viewer");
    for (m, p) in [
        ("GET", format!("{EV}/candidates")),
        ("GET", format!("{EV}/candidates/cand-0001")),
        ("GET", format!("{EV}/candidates/cand-0001/gate")),
        ("GET", format!("{EV}/candidates/cand-0001/checks")),
        ("GET", format!("{EV}/evidence/ev-0001")),
        ("GET", format!("{EV}/receipts")),
        ("GET", format!("{EV}/receipts/rcpt-0001")),
        ("POST", format!("{EV}/candidates")),
        ("POST", format!("{EV}/candidates/cand-0001/checks")),
    ] {
        assert_eq!(http_status(&sock, m, &p, None), 401, "{m} {p}");
        let got = http_status(&sock, m, &p, Some(&read));
        if m == "POST" {
            assert_eq!(got, 403, "{m} {p}");
        } else {
            assert_ne!(got, 403, "{m} {p}");
            assert_ne!(got, 401, "{m} {p}");
        }
    }
    let (c, v) = call_as(
        &sock,
        Some(&read),
        "GET",
        &format!("{EV}/receipts/rcpt-0001"),
        None,
    );
    assert_eq!(c, 200);
    assert_eq!(v["receipt"]["kind"], "candidate.bound");
    // The worktree moved on (the worker committed): the receipt's bytes are gone from it.
    assert_eq!(v["verify"]["ok"], false, "{v}");
    let wt_check = v["verify"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "worktree")
        .unwrap();
    assert_eq!(wt_check["state"], "differs");
    assert!(
        wt_check["detail"]
            .as_str()
            .unwrap()
            .contains("worker_committed"),
        "{wt_check}"
    );
}
