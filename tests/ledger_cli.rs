//! The `proctor ledger` verbs, run as the real binary against real files.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use proctor::ledger::{self, Ledger};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

fn proctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(args)
        .env_remove("PROCTOR_HOME")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!(),
    }
}

fn make(path: &Path, n: u64) {
    let (l, _) = Ledger::open(path).unwrap();
    for i in 0..n {
        l.append("test.event", &fields(json!({ "i": i }))).unwrap();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn verify_prints_the_fixed_point_of_the_exact_bytes() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    make(&p, 3);
    let bytes = fs::read(&p).unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));

    let o = proctor(&["ledger", "verify", s(&p)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "format=proctor-ledger-fixed-point/1\nbytes={}\nevents=3\nsha256={sha}\n",
            bytes.len()
        )
    );

    let o = proctor(&["ledger", "verify", s(&p), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        json!({"format": "proctor-ledger-fixed-point/1", "bytes": bytes.len(), "events": 3, "sha256": sha})
    );
}

#[test]
fn verify_names_the_first_bad_line_and_never_modifies_the_file() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    make(&p, 4);
    let mut text = fs::read_to_string(&p).unwrap();
    text = text.replacen("\"i\":1", "\"i\":9", 1);
    text.push_str("{\"torn");
    fs::write(&p, &text).unwrap();
    let before = fs::metadata(&p).unwrap();

    let o = proctor(&["ledger", "verify", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("ok=false\n"), "{out}");
    assert!(out.contains("line=3\n"), "{out}");
    assert!(out.contains("reason=hash_mismatch\n"), "{out}");
    assert!(out.contains("intact_events=2\n"), "{out}");

    let o = proctor(&["ledger", "verify", "--json", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["line"], 3);
    assert_eq!(v["reason"], "hash_mismatch");
    assert!(v["detail"].as_str().unwrap().contains("line 2 hashes to"));

    assert_eq!(fs::read_to_string(&p).unwrap(), text);
    let after = fs::metadata(&p).unwrap();
    assert_eq!(
        (after.mtime(), after.mtime_nsec(), after.ino()),
        (before.mtime(), before.mtime_nsec(), before.ino())
    );
    assert_eq!(
        fs::read_dir(t.path()).unwrap().count(),
        1,
        "verify created nothing"
    );

    // A torn tail alone is reported as such, and verify leaves it in place.
    let mut good = fs::read(&p).unwrap();
    good.truncate(0);
    make(&t.path().join("b.jsonl"), 2);
    good.extend(fs::read(t.path().join("b.jsonl")).unwrap());
    good.extend_from_slice(b"{\"at\"");
    fs::write(&p, &good).unwrap();
    let o = proctor(&["ledger", "verify", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("line=3\nreason=missing_final_lf\n"),
        "{}",
        stdout(&o)
    );
    assert_eq!(fs::read(&p).unwrap(), good);
}

#[test]
fn without_a_path_the_verbs_use_the_homes_ledger() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let o = proctor(&["--home", s(&home), "ledger", "verify"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("no ledger at"), "{e}");
    assert!(e.contains("home/data/ledger.jsonl"), "{e}");
    for verb in ["tail", "recover"] {
        let o = proctor(&["--home", s(&home), "ledger", verb]);
        assert_eq!(o.status.code(), Some(1), "{verb}");
        assert!(
            stderr(&o).contains("no ledger at"),
            "{verb}: {}",
            stderr(&o)
        );
    }
    assert!(!home.exists(), "reading verbs create nothing");

    make(&home.join("data/ledger.jsonl"), 2);
    let o = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(["ledger", "verify"])
        .env("PROCTOR_HOME", &home)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("events=2\n"));
}

#[test]
fn an_unsafe_home_is_refused_with_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    make(&home.join("data/ledger.jsonl"), 1);
    fs::set_permissions(&home, fs::Permissions::from_mode(0o777)).unwrap();
    let o = proctor(&["--home", s(&home), "ledger", "verify"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn tail_prints_sanitised_events() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    {
        let (l, _) = Ledger::open(&p).unwrap();
        for i in 0..30 {
            l.append("test.event", &fields(json!({ "i": i }))).unwrap();
        }
        l.append(
            "sessions.run.renamed",
            &fields(json!({"name": "\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{9b}2J", "run": "r-1"})),
        )
        .unwrap();
    }
    let o = proctor(&["ledger", "tail", s(&p), "-n", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("30  "), "{out}");
    assert!(lines[0].ends_with("  test.event  i=29"), "{out}");
    assert!(lines[1].starts_with("31  "), "{out}");
    assert!(lines[1].contains("  sessions.run.renamed  name="), "{out}");
    assert!(lines[1].ends_with("  run=r-1"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{9b}'));

    let o = proctor(&["ledger", "tail", s(&p)]);
    assert_eq!(stdout(&o).lines().count(), 20, "default is 20");

    let o = proctor(&["ledger", "tail", s(&p), "-n", "1", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_ascii());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["seq"], 31);
    assert_eq!(v["name"], "\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{9b}2J");
    // The same object as the ledger line (whose `run` is printed as `ref`).
    let last = fs::read_to_string(&p)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .replace("\"run\":", "\"ref\":");
    assert_eq!(v, serde_json::from_str::<Value>(&last).unwrap());

    // A torn tail is reported, not printed, and makes the exit code 1.
    let mut b = fs::read(&p).unwrap();
    b.extend_from_slice(b"{\"partial");
    fs::write(&p, &b).unwrap();
    let o = proctor(&["ledger", "tail", s(&p), "-n", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("31  "));
    assert!(
        stderr(&o).contains("9 bytes that are not a complete line"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read(&p).unwrap(), b);
}

#[test]
fn recover_moves_a_torn_tail_aside_and_records_it() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    make(&p, 2);
    let o = proctor(&["ledger", "recover", s(&p)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("nothing to recover:"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("(2 events verified)"));

    let mut b = fs::read(&p).unwrap();
    let good_len = b.len();
    b.extend_from_slice(b"{\"at\":\"2026");
    fs::write(&p, &b).unwrap();
    let o = proctor(&["ledger", "recover", s(&p)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("11 bytes at offset"), "{out}");
    assert!(out.contains("recorded as event 3"), "{out}");
    let v = ledger::verify(&p).unwrap();
    assert_eq!(v.fixed_point.events, 3);
    let now = fs::read(&p).unwrap();
    assert_eq!(&now[..good_len], &b[..good_len]);
    let moved: Vec<_> = fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains(".torn."))
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(fs::read(&moved[0]).unwrap(), b"{\"at\":\"2026");
    assert!(out.contains(moved[0].file_name().unwrap().to_str().unwrap()));
}

#[test]
fn recover_refuses_damage_before_the_tail() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    make(&p, 3);
    let text = fs::read_to_string(&p)
        .unwrap()
        .replacen("\"i\":0", "\"i\":5", 1);
    fs::write(&p, &text).unwrap();
    let o = proctor(&["ledger", "recover", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("damaged before its tail, at line 2: hash mismatch"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&p).unwrap(), text);
}

#[test]
fn a_second_process_cannot_open_the_ledger_for_writing() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    l.append("test.event", &Map::new()).unwrap();
    let o = proctor(&["ledger", "recover", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("already open for writing"), "{e}");
    assert!(e.contains(s(&p)), "{e}");
    // Readers are never refused.
    assert_eq!(proctor(&["ledger", "verify", s(&p)]).status.code(), Some(0));
    assert_eq!(proctor(&["ledger", "tail", s(&p)]).status.code(), Some(0));
    drop(l);
    let o = proctor(&["ledger", "recover", s(&p)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
