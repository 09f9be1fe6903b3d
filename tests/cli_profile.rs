//! `proctor profile list|add` through the real binary, on a temporary state home.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

struct Env {
    _t: tempfile::TempDir,
    root: std::path::PathBuf,
}

fn env() -> Env {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("user")).unwrap();
    Env { _t: t, root }
}

impl Env {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_proctor"))
            .arg("--home")
            .arg(self.root.join("state"))
            .args(args)
            .env_remove("PROCTOR_HOME")
            .env("HOME", self.root.join("user"))
            .output()
            .unwrap()
    }

    fn dir(&self, rel: &str) -> String {
        let p = self.root.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p.to_str().unwrap().to_string()
    }
}

fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn list_shows_the_five_defaults_without_writing_anything() {
    let e = env();
    let v = ok_json(&e.run(&["profile", "list", "--json"]));
    let rows = v["items"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["claude", "codex", "gemini", "grok", "opencode"]);
    for r in rows {
        assert_eq!(r["default"], true);
        assert_eq!(r["tool"], r["name"]);
        assert_eq!(r["home_exists"], false);
    }
    assert_eq!(
        rows[4]["home"],
        e.root.join("user/.local/share/opencode").to_str().unwrap()
    );
    assert_eq!(rows[0]["home_var"], "CLAUDE_CONFIG_DIR");
    assert!(!e.root.join("state").exists(), "list writes nothing");
    let text = e.run(&["profile", "list"]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(text.contains("(home absent)"), "{text}");
}

#[test]
fn add_then_list_and_the_store_is_private() {
    let e = env();
    let home = e.dir("accounts/claude-work");
    let v = ok_json(&e.run(&[
        "profile",
        "add",
        "work",
        "--tool",
        "claude",
        "--account-home",
        &home,
        "--json",
    ]));
    assert_eq!(v["name"], "work");
    assert_eq!(v["tool"], "claude");
    assert_eq!(v["home"], home.as_str());
    assert_eq!(v["default"], false);
    let store = e.root.join("state/config/profiles.json");
    let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    assert_eq!(stored["format"], "proctor-profiles/1");

    let gem = e.dir("accounts/g/.gemini");
    let out = e.run(&[
        "profile",
        "add",
        "g2",
        "--tool",
        "gemini",
        "--account-home",
        &gem,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("added profile g2 (gemini, home "));

    let rows = ok_json(&e.run(&["profile", "list", "--json"]));
    let rows = rows["items"].as_array().unwrap();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[5]["name"], "work");
    assert_eq!(rows[5]["home_exists"], true);
    assert_eq!(rows[6]["home_var"], "GEMINI_CLI_HOME");
}

#[test]
fn refusals_exit_2_name_the_problem_and_change_nothing() {
    let e = env();
    let home = e.dir("acct");
    let ok = e.run(&[
        "profile",
        "add",
        "work",
        "--tool",
        "codex",
        "--account-home",
        &home,
    ]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let store = e.root.join("state/config/profiles.json");
    let before = std::fs::read(&store).unwrap();

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["work", "--tool", "codex", "--account-home", &home],
            "already exists",
        ),
        (
            vec!["codex", "--tool", "codex", "--account-home", &home],
            "default profile",
        ),
        (
            vec!["w2", "--tool", "bash", "--account-home", &home],
            "claude, codex, gemini, grok, opencode",
        ),
        (
            vec!["Bad Name", "--tool", "grok", "--account-home", &home],
            "invalid profile name",
        ),
        (vec!["-x", "--tool", "grok", "--account-home", &home], ""),
        (
            vec![
                "w3",
                "--tool",
                "grok",
                "--account-home",
                "/nonexistent/acct",
            ],
            "does not exist",
        ),
        (
            vec!["w4", "--tool", "gemini", "--account-home", &home],
            "named `.gemini`",
        ),
        (
            vec!["w5", "--tool", "opencode", "--account-home", &home],
            "named `opencode`",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["profile", "add"];
        full.extend(args.iter().copied());
        let out = e.run(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&store).unwrap(), before);
    // A file where a home should be is refused too.
    std::fs::write(e.root.join("afile"), b"").unwrap();
    let out = e.run(&[
        "profile",
        "add",
        "w6",
        "--tool",
        "grok",
        "--account-home",
        e.root.join("afile").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a folder"), "{}", stderr(&out));
}

#[test]
fn a_corrupt_store_fails_with_1_and_is_not_overwritten() {
    let e = env();
    let cfg = e.root.join("state/config");
    std::fs::create_dir_all(&cfg).unwrap();
    for d in [e.root.join("state"), cfg.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(
        cfg.join("profiles.json"),
        b"{\"format\":\"other\",\"profiles\":[]}",
    )
    .unwrap();
    let out = e.run(&["profile", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("profiles.json"), "{}", stderr(&out));
    let home = e.dir("acct");
    let out = e.run(&[
        "profile",
        "add",
        "w",
        "--tool",
        "grok",
        "--account-home",
        &home,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read(cfg.join("profiles.json")).unwrap(),
        b"{\"format\":\"other\",\"profiles\":[]}"
    );
    assert!(!Path::new(&cfg.join("profiles.json.tmp")).exists());
}

#[test]
fn help_explains_the_verbs() {
    let e = env();
    let out = e.run(&["profile", "add", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("GEMINI_CLI_HOME"), "{help}");
    assert!(help.contains("Exit 0"), "{help}");
    let out = e.run(&["demo-agent", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("!sleep MS"), "{help}");
    assert!(help.contains("never the real tool"), "{help}");
}
