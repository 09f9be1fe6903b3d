//! README.md's claims, checked against the real thing where a test can read them: the demo's
//! session count, the setup commands, every `proctor` verb (and its flags) the README names,
//! the toolchain it asks for.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::TestHome;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// Every `…` span of the README.
fn code_spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.split('`');
        parts.next();
        while let Some(span) = parts.next() {
            out.push(span.to_string());
            parts.next();
        }
    }
    out
}

const NUMBERS: [&str; 13] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
];

fn number(word: &str) -> Option<usize> {
    let w = word.to_ascii_lowercase();
    NUMBERS
        .iter()
        .position(|n| *n == w)
        .or_else(|| w.parse().ok())
}

#[test]
fn the_demo_session_count_the_readme_states_is_what_the_demo_creates() {
    let text = readme();
    // Every "<number> [demo ]sessions" on a line about the demo.
    let mut claims = Vec::new();
    for line in text.lines().filter(|l| l.contains("demo")) {
        let words: Vec<&str> = line
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            let next = words.get(i + 1).copied();
            let after = words.get(i + 2).copied();
            let counts =
                next == Some("sessions") || (next == Some("demo") && after == Some("sessions"));
            if counts && let Some(n) = number(w) {
                claims.push((n, line.to_string()));
            }
        }
    }
    assert!(
        !claims.is_empty(),
        "the README states how many sessions the demo has"
    );

    let home = TestHome::new();
    let out = home
        .cmd()
        .args(["demo", "--no-cockpit", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    for (n, line) in &claims {
        assert_eq!(*n, runs.len(), "README says {n} demo sessions: {line}");
    }
    // The exits the README's demo line names are the ones the demo's runs end with.
    for (_, line) in &claims {
        for part in line.split("(exit ").skip(1) {
            let code: i64 = part
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                runs.iter().any(|r| r["exit_code"] == code),
                "README names a demo run with exit {code}: {v}"
            );
        }
    }
    assert!(
        runs.iter().all(|r| r["demo"] == true),
        "every demo run is labelled demo: {v}"
    );
}

#[test]
fn the_setup_commands_exist_as_written() {
    let text = readme();
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    for cmd in ["    cargo run --release -- demo", "    cargo test --locked"] {
        assert!(lines.contains(&cmd), "README shows `{}`", cmd.trim());
    }
    // `-- demo` is a real verb of the binary cargo runs (the only binary).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(["demo", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    // `--locked` needs the lock file in the repository.
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.lock")
            .is_file()
    );
    // "a Rust toolchain (1.89 or newer, edition 2024)".
    let claim = text
        .lines()
        .find(|l| l.contains("Rust toolchain"))
        .expect("README names the toolchain");
    let version = claim
        .split('(')
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap();
    assert!(
        manifest.contains(&format!("rust-version = \"{version}\"")),
        "Cargo.toml's rust-version is the README's {version}"
    );
    assert!(claim.contains("edition 2024") && manifest.contains("edition = \"2024\""));
    // "CI runs `.ci/run`, which … then the test command above".
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run");
    if text.contains("`.ci/run`") {
        let ci = std::fs::read_to_string(&ci).expect(".ci/run exists");
        assert!(
            ci.contains("cargo test --locked"),
            ".ci/run runs the README's test command"
        );
        assert!(
            ci.contains("cargo fmt") && ci.contains("clippy"),
            ".ci/run checks fmt and clippy"
        );
    }
}

/// A word of a span that names a verb: lowercase letters and dashes.
fn is_word(w: &str) -> bool {
    !w.is_empty()
        && w.starts_with(|c: char| c.is_ascii_lowercase())
        && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
}

fn help(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn every_proctor_verb_and_flag_the_readme_names_is_real() {
    let text = readme();
    let mut checked = BTreeSet::new();
    for span in code_spans(&text) {
        let Some(rest) = span.strip_prefix("proctor ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let Some(verb) = words.first().filter(|w| is_word(w)) else {
            continue;
        };
        let (ok, verb_help) = help(&[verb]);
        assert!(
            ok,
            "README names `proctor {verb}`: `proctor {verb} --help` fails"
        );
        // A second word that the verb lists as a subcommand (`a|b` names two).
        let mut helps = vec![(vec![verb.to_string()], verb_help.clone())];
        if let Some(sub) = words.get(1) {
            let subs: Vec<&str> = sub.split('|').collect();
            if subs.iter().all(|s| is_word(s)) && verb_help.contains("Commands:") {
                helps.clear();
                for s in subs {
                    let (ok, h) = help(&[verb, s]);
                    assert!(ok, "README names `proctor {verb} {s}`: its --help fails");
                    helps.push((vec![verb.to_string(), s.to_string()], h));
                }
            }
        }
        // Every --flag the span names is in that command's help.
        for w in &words {
            let flag = w.trim_matches(|c: char| "[](){}|".contains(c));
            let Some(name) = flag.strip_prefix("--") else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if name.is_empty() {
                continue;
            }
            for (cmd, h) in &helps {
                assert!(
                    h.contains(&format!("--{name}")),
                    "README's `{span}`: `proctor {} --help` has no --{name}",
                    cmd.join(" ")
                );
            }
        }
        checked.insert(verb.to_string());
    }
    for verb in ["session", "demo", "serve", "ledger", "key", "publish"] {
        assert!(
            checked.contains(verb),
            "the README's verbs were read ({verb}): {checked:?}"
        );
    }
}
