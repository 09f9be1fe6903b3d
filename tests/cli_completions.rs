//! `proctor completions SHELL` and `proctor man`: generated from the command tree itself, so
//! they name every verb; checked through the real binary (and bash loads the script).

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn proctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proctor"))
        .env_remove("PROCTOR_HOME")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = proctor(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_name_the_verbs_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _proctor"),
        ("zsh", "#compdef proctor"),
        ("fish", "complete -c proctor"),
    ] {
        let s = ok(&["completions", shell]);
        assert!(s.contains(marker), "{shell}: {marker} missing");
        for verb in ["session", "publish", "ledger", "completions", "man"] {
            assert!(s.contains(verb), "{shell}: {verb} missing");
        }
        assert!(s.contains("--home"), "{shell}: the global flag is missing");
    }
    let out = proctor(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn bash_loads_the_script_and_completes_a_verb() {
    let script = ok(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("proctor.bash");
    std::fs::write(&file, script).unwrap();
    // What bash does on `proctor sess<TAB>`.
    let probe = format!(
        "source '{}'; COMP_WORDS=(proctor sess); COMP_CWORD=1; COMP_LINE='proctor sess'; \
         COMP_POINT=12; _proctor proctor sess proctor; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let words = String::from_utf8_lossy(&out.stdout);
    assert_eq!(words.trim(), "session", "{out:?}");
}

#[test]
fn the_man_page_is_roff_naming_the_verbs() {
    let page = ok(&["man"]);
    assert!(page.contains(".TH proctor"), "{page}");
    for verb in ["session", "publish", "ledger", "completions"] {
        assert!(page.contains(verb), "{verb} missing");
    }
    assert!(page.contains("\\-\\-home"), "the global flag is documented");
    // A real formatter reads it without a warning (where nroff is installed).
    let Ok(mut nroff) = Command::new("nroff")
        .args(["-man", "-ww"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipped: no nroff to format the page");
        return;
    };
    nroff
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = nroff.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    // nroff emboldens by overstriking (c, backspace, c): keep what is left on paper.
    let mut shown = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\u{8}' {
            shown.pop();
        } else {
            shown.push(c);
        }
    }
    assert!(shown.contains("proctor(1)"), "{shown}");
    assert!(shown.contains("--home DIR"), "{shown}");
}
