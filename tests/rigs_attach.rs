//! `proctor rig attach` end to end: a real namespace rig (bubblewrap) through a real server,
//! the proctor binary under a real PTY, a command typed into the guest's shell and its answer
//! seen, the detach key, the audit naming the person; an agent's keys refused under a
//! person's lock; and the modes of every file and folder a rig leaves in `data/rigs/`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::pty::Term;
use common::rigs::{agent_token, open_running as open, rig_path};
use common::{DemoServer, call_as};
use serde_json::{Value, json};

fn audit(s: &DemoServer, id: &str) -> Vec<Value> {
    let v = s.expect(200, "GET", &rig_path(id, "/audit?limit=1000"), None);
    v["events"].as_array().unwrap().clone()
}

/// `proctor rig attach ID` in a `rows`×`cols` terminal, with `env` added.
fn attach(s: &DemoServer, id: &str, rows: u16, cols: u16, env: &[(&str, &str)]) -> Term {
    let home = s.home.path().to_str().unwrap().to_string();
    Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &home, "rig", "attach", id],
        rows,
        cols,
        env,
        &[],
    )
}

#[test]
fn rig_attach_types_into_the_guest_sees_its_answer_and_detaches() {
    let s = DemoServer::start(&[]);
    let id = open(&s, json!({"backend": "namespace"}));

    let mut t = attach(&s, &id, 30, 100, &[]);
    t.wait_for(&format!("[attaching to {id}: namespace"));
    t.wait_for("detach with Ctrl-\\");
    // Attach sent this terminal's size to the rig's console.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sc = s.expect(200, "GET", &rig_path(&id, "/screen"), None);
        if sc["size"]["rows"] == 30 && sc["size"]["cols"] == 100 {
            break;
        }
        assert!(Instant::now() < deadline, "not resized: {}", sc["size"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Attached, the rig counts as watched (in use for the idle ladder).
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["watchers"], 1, "{v}");

    // Typed as a person would, one key at a time; the shell's answer comes back.
    t.type_keys("echo hi-$((6*7))\r");
    let out = t.wait_for("hi-42");
    assert!(
        !out.contains("not built"),
        "attach is built and attached: {out}"
    );
    t.send(b"\x1c");
    t.wait_for(&format!("[detached from {id}; it keeps running]"));
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    // The alternate screen was entered and left again (the operator's screen comes back).
    let out = t.text();
    let (enter, leave) = (out.find("\x1b[?1049h"), out.rfind("\x1b[?1049l"));
    assert!(enter.is_some() && leave > enter, "{out:?}");

    // The guest really ran it: its shell's history is in the screen, and the rig still runs.
    let sc = s.expect(200, "GET", &rig_path(&id, "/screen"), None);
    assert!(sc["text"].as_str().unwrap().contains("hi-42"), "{sc}");
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["state"], "running", "{v}");
    assert_eq!(v["watchers"], 0, "the watcher left with the detach: {v}");

    // The audit: attach, the typed keys (sizes only) by the person, detach, in seq order.
    let events = audit(&s, &id);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let pos = |action: &str| {
        events
            .iter()
            .position(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("no {action} in {events:?}"))
    };
    let (a, d) = (pos("attach"), pos("detach"));
    let typed: Vec<&Value> = events[a..d]
        .iter()
        .filter(|e| e["action"] == "type")
        .collect();
    assert!(
        !typed.is_empty(),
        "no input events between attach and detach"
    );
    let bytes: u64 = typed
        .iter()
        .map(|e| e["detail"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(bytes, "echo hi-$((6*7))\r".len() as u64, "{typed:?}");
    for e in typed.iter().copied().chain([&events[a], &events[d]]) {
        assert_eq!(e["by"]["principal"], "person", "{e}");
        assert_eq!(e["outcome"], "done", "{e}");
    }
    let raw = serde_json::to_string(&events).unwrap();
    assert!(
        !raw.contains("6*7"),
        "the audit holds no typed content: {raw}"
    );
    // `rig audit` shows them too.
    let listed = s.home.ok(&["rig", "audit", &id]);
    assert!(
        listed.contains(" attach ") && listed.contains(" type ") && listed.contains(" detach "),
        "{listed}"
    );

    // A second attach draws the screen first: what the guest showed is there before any key.
    let mut t = attach(&s, &id, 30, 100, &[]);
    t.wait_for(&format!("[attaching to {id}"));
    t.wait_screen("the redrawn screen", |sc| sc.contains("hi-42"));
    t.send(b"\x1c");
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
}

#[test]
fn an_agents_attach_watches_under_a_persons_lock_and_its_keys_are_refused() {
    let s = DemoServer::start(&[]);
    let bot = agent_token(&s, "bot");
    let id = open(&s, json!({"backend": "namespace"}));
    s.expect(200, "POST", &rig_path(&id, "/lock"), None);

    let mut t = attach(&s, &id, 24, 80, &[("PROCTOR_TOKEN", &bot)]);
    t.wait_for(&format!("[attaching to {id}"));
    t.type_keys("touch /tmp/agent-was-here\r");
    assert_eq!(t.exit_code(), 1, "{}", t.text());
    let out = t.text();
    assert!(
        out.contains("typing into") && out.contains("423") && out.contains("locked by"),
        "the agent learns of the lock from the refusal: {out}"
    );
    // Nothing the agent typed ran.
    let (code, v) = call_as(
        &s.home.socket(),
        Some(&s.token),
        "POST",
        &rig_path(&id, "/exec"),
        Some(json!({"argv": ["sh", "-c", "test -e /tmp/agent-was-here; echo $?"]})),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    use base64::Engine;
    let stdout = base64::engine::general_purpose::STANDARD
        .decode(v["stdout_b64"].as_str().unwrap())
        .unwrap();
    assert_eq!(stdout, b"1\n");
    // The refusal is audited with the agent's principal.
    let events = audit(&s, &id);
    assert!(
        events.iter().any(|e| e["action"] == "type"
            && e["outcome"] == "refused"
            && e["by"]["principal"] == "agent"),
        "{events:?}"
    );
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
}

#[test]
fn rig_attach_help_teaches_and_refuses_without_a_terminal() {
    let s = DemoServer::start(&[]);
    let help = s.home.ok(&["rig", "attach", "--help"]);
    for says in ["Ctrl-\\", "--detach-key", "423", "audit", "rig screen"] {
        assert!(help.contains(says), "{says}:\n{help}");
    }
    let list = s.home.ok(&["rig", "--help"]);
    assert!(
        list.lines()
            .any(|l| l.trim_start().starts_with("attach ") && l.contains("Ctrl-\\")),
        "{list}"
    );
    let out = s.home.run_without_terminal(&["rig", "attach", "rig-0001"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("rig screen rig-0001"), "{err}");
    let out = s
        .home
        .run(&["rig", "attach", "rig-0001", "--detach-key", "ctrl-c"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--detach-key"), "{err}");
}

/// Walks `dir`; every regular file must be 0600 (0700: an executable staged from the
/// workspace, the guest runs it) and every folder 0700. Symlinks (the workspace's own, copied
/// as links, never followed) and sockets (the agent's and relays', 0600 where bound) are
/// excepted by name and reason.
fn modes(dir: &Path, bad: &mut Vec<String>, seen: &mut usize) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let ft = meta.file_type();
        let mode = meta.permissions().mode() & 0o7777;
        let rel = p.display().to_string();
        use std::os::unix::fs::FileTypeExt;
        if ft.is_symlink() || ft.is_socket() {
            continue;
        }
        *seen += 1;
        if ft.is_dir() {
            if mode != 0o700 {
                bad.push(format!("folder {rel}: {mode:o}"));
            }
            modes(&p, bad, seen);
        } else if ft.is_file() {
            let exec_in_work = rel.contains("/work/") && mode == 0o700;
            if mode != 0o600 && !exec_in_work {
                bad.push(format!("file {rel}: {mode:o}"));
            }
        } else {
            bad.push(format!(
                "{rel}: neither a file, a folder, a symlink nor a socket"
            ));
        }
    }
}

#[test]
fn every_file_a_rig_leaves_is_0600_and_every_folder_0700() {
    let s = DemoServer::start(&[]);
    // A workspace with what a real one has: a git repository (hooks are executable), a
    // world-readable file, an executable script, a 0755 folder, a symlink.
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::set_permissions(ws.join("src"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::set_permissions(
        ws.join("src/main.rs"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(ws.join("build.sh"), "#!/bin/sh\necho built\n").unwrap();
    std::fs::set_permissions(ws.join("build.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/main.rs", ws.join("link")).unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(&ws)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["init", "-q"]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://user:secret@example.invalid/x.git",
    ]);
    s.home.ok(&["workspace", "add", ws.to_str().unwrap()]);

    let id = open(
        &s,
        json!({"backend": "namespace", "workspace": ws.to_str().unwrap()}),
    );
    // The guest still runs the staged script and reads the staged file.
    let v = s.expect(
        200,
        "POST",
        &rig_path(&id, "/exec"),
        Some(json!({"argv": ["sh", "-c", "./build.sh && cat src/main.rs"], "cwd": "/work"})),
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    // A file copied in, a fetch, an input: what a rig's life writes in its folder.
    s.expect(
        200,
        "POST",
        &rig_path(&id, "/input"),
        Some(json!({"text": "echo hello\r"})),
    );
    let data = s.home.path().join("data/rigs");
    let mut bad = Vec::new();
    let mut seen = 0;
    modes(&data, &mut bad, &mut seen);
    assert!(bad.is_empty(), "while open:\n{}", bad.join("\n"));
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
    let mut bad = Vec::new();
    let mut seen = 0;
    modes(&data, &mut bad, &mut seen);
    assert!(bad.is_empty(), "after close:\n{}", bad.join("\n"));
    assert!(seen > 10, "the walk saw {seen} entries only");
    // The staged .git/config lost the credentials, and is 0600 too.
    let cfg = data.join(&id).join("work/.git/config");
    if cfg.exists() {
        let text = std::fs::read_to_string(&cfg).unwrap();
        assert!(!text.contains("secret"), "{text}");
    }
}
