//! No process-wide static holds server state (issue 12, "One server state"): every `static`
//! item and `thread_local!` in `src/` is listed here with why it is not server state. A new
//! one fails this test, naming the file and the line: put the state in the server's state
//! (`server::Shared`) and pass it to the code that needs it, or add it here with a reason.

mod common;

use std::path::Path;

/// (file under `src/`, the static's name, why it is not server state).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "tribunal/envelope.rs",
        "EMAIL",
        "a compiled, constant regular expression (an email address): no state",
    ),
    (
        "tribunal/envelope.rs",
        "TRAILER",
        "a compiled, constant regular expression (an author trailer): no state",
    ),
    (
        "providers/fake/pty.rs",
        "SIGINT",
        "a fake tool's own signal flag (a separate process, not the server)",
    ),
    (
        "providers/fake/pty.rs",
        "WAKE",
        "a fake tool's own signal self-pipe (a separate process, not the server)",
    ),
    (
        "providers/fake/hooks.rs",
        "HOOKS",
        "a fake tool's own hook settings (a separate process, not the server)",
    ),
    (
        "digest.rs",
        "BUFFER",
        "a per-thread scratch buffer for hashing; holds nothing between calls",
    ),
    (
        "tui/term.rs",
        "ACTIVE",
        "the cockpit's terminal mode (the client process's one terminal)",
    ),
    (
        "tui/term.rs",
        "MOUSE",
        "the cockpit's terminal mode (the client process's one terminal)",
    ),
    (
        "tui/term.rs",
        "MOUSE_WANTED",
        "whether the cockpit asked for mouse capture, to take its one terminal back after a \
         child (rig attach) had it",
    ),
    (
        "tui/term.rs",
        "HOOK",
        "the cockpit's panic hook, installed once per process",
    ),
    (
        "cli/session/attach.rs",
        "SAVED",
        "the attaching client's saved terminal mode (the client process's one terminal)",
    ),
    (
        "cli/session/attach.rs",
        "HOOK",
        "the attaching client's panic hook, installed once per process",
    ),
    (
        "files.rs",
        "COUNTER",
        "a unique suffix for temporary file names; no state a server reads",
    ),
    (
        "files.rs",
        "UMASK",
        "serialises changes of the umask, which is the process's own",
    ),
    (
        "runs/mod.rs",
        "FORK",
        "serialises fork/exec in the process (file descriptor inheritance is process-wide)",
    ),
];

/// The name of the static a line declares, if it declares one.
fn declared(line: &str) -> Option<String> {
    let code = line.split("//").next().unwrap_or("").trim_start();
    let code = code
        .strip_prefix("pub(crate) ")
        .or_else(|| code.strip_prefix("pub "))
        .unwrap_or(code);
    let rest = code.strip_prefix("static ")?;
    let rest = rest.strip_prefix("mut ").unwrap_or(rest);
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_static_in_src_holds_server_state() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    common::rust_files(&src, &mut files);
    files.sort();
    let mut unknown = Vec::new();
    let mut seen = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let Some(name) = declared(line) else {
                continue;
            };
            if ALLOWED.iter().any(|(p, s, _)| *p == rel && *s == name) {
                seen.push((rel.clone(), name));
            } else {
                unknown.push(format!("src/{rel}:{}: static {name}", n + 1));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "process-wide statics that may hold server state (move them into server::Shared, or \
         list them in tests/server_state.rs with why they are not server state):\n{}",
        unknown.join("\n")
    );
    // The list stays true: every entry still exists.
    for (p, s, _) in ALLOWED {
        assert!(
            seen.iter().any(|(rp, rs)| rp == p && rs == s),
            "tests/server_state.rs lists src/{p} static {s}, which is gone: remove the entry"
        );
    }
}

#[test]
fn the_scan_sees_every_form_of_static() {
    assert_eq!(
        declared("static STORE: Mutex<()> = Mutex::new(());").as_deref(),
        Some("STORE")
    );
    assert_eq!(
        declared("    static MAP: OnceLock<X> = OnceLock::new();").as_deref(),
        Some("MAP")
    );
    assert_eq!(declared("pub static mut X: u8 = 0;").as_deref(), Some("X"));
    assert_eq!(
        declared("pub(crate) static Y: u8 = 0;").as_deref(),
        Some("Y")
    );
    assert_eq!(declared("fn f() -> &'static str {"), None);
    assert_eq!(declared("// static Z: u8 = 0;"), None);
}
