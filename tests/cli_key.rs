//! `proctor key`: the passphrase typed through a real pseudo-terminal, the refusals without
//! one (setsid + pipes, a background job, Ctrl-C), the file rules, and the key routes.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::pty::Term;
use common::{DemoServer, call_as};
use serde_json::json;

const PASSPHRASE: &str = "a long enough passphrase";
const KEYS: &str = "/v1/m/authority/keys";

fn key_path(home: &Path) -> PathBuf {
    home.join("config/keys/publish.p8")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The whole generation typed at a real terminal: a too-short passphrase, then two that
/// differ, then a matching pair. One key results, registered with the server; the
/// passphrase is never echoed; `key show` agrees; a second `generate` is refused.
#[test]
fn generate_through_a_pty_then_show() {
    let s = DemoServer::start_with_env(&[]);
    let home = s.home.path();
    let mut t = Term::proctor(home, &["key", "generate"]);
    t.wait_for_n("Passphrase: ", 1);
    t.send(b"short\r");
    t.wait_for_n("too short", 1);
    t.wait_for_n("Passphrase: ", 2);
    // An arrow key and a backspace while typing: neither becomes part of the passphrase.
    t.send(format!("{PASSPHRASE}X\x1b[D\x7f\r").as_bytes());
    t.wait_for_n("Passphrase again: ", 1);
    t.send(b"something else entirely\r");
    t.wait_for_n("differ", 1);
    t.wait_for_n("Passphrase: ", 3);
    t.send(format!("{PASSPHRASE}\r").as_bytes());
    t.wait_for_n("Passphrase again: ", 2);
    t.send(format!("{PASSPHRASE}\r").as_bytes());
    let code = t.exit_code();
    let out = t.wait_for_n("registered with the server", 1);
    assert_eq!(code, 0, "{out}");
    assert!(
        !out.contains(PASSPHRASE),
        "the passphrase was echoed:\n{out}"
    );
    assert!(out.contains("keyid=sha256-spki-der/1 "), "{out}");

    let path = key_path(home);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&path.with_extension("pub")), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    // The typed passphrase is the key's (one scrypt derivation).
    let key = proctor::authority::keys::load(&path, PASSPHRASE.as_bytes()).unwrap();
    let key_id = proctor::authority::keys::key_id(&key.verifying_key());
    assert!(out.contains(&key_id), "{out}");

    // The server knows it, and the ledger says who registered it.
    let v = s.expect(200, "GET", KEYS, None);
    assert_eq!(v["items"][0]["key_id"], key_id.as_str());
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    let line = ledger
        .lines()
        .find(|l| l.contains("\"authority.key.registered\""))
        .expect("no authority.key.registered in the ledger");
    assert!(line.contains(&key_id), "{line}");

    // key show, both forms.
    let v = s.home.json(&["key", "show", "--json"]);
    assert_eq!(v["key_id"], key_id.as_str());
    assert_eq!(v["recipe"], "sha256-spki-der/1");
    assert_eq!(v["registered"], true);
    assert_eq!(v["namespace"], "proctor-receipt");
    assert!(
        v["allowed_signers"]
            .as_str()
            .unwrap()
            .starts_with("proctor ssh-ed25519 AAAA")
    );
    let text = s.home.ok(&["key", "show"]);
    assert!(
        text.contains(&format!("keyid=sha256-spki-der/1 {key_id}")),
        "{text}"
    );
    assert!(text.contains("server   registered"), "{text}");

    // Never overwritten: refused before any prompt, exit 1.
    let before = std::fs::read(&path).unwrap();
    let out = s.home.run(&["key", "generate"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // A group-readable key file: show refuses with the remedy.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = s.home.run(&["key", "show"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600"), "{err}");
}

/// Without a controlling terminal (a new session, stdin a pipe that carries a passphrase,
/// the passphrase also offered in the environment): refused, exit 1, nothing written.
#[test]
fn no_controlling_terminal_is_refused() {
    let home = common::TestHome::new();
    let mut cmd = home.cmd();
    cmd.args(["key", "generate"])
        .env("PROCTOR_PASSPHRASE", PASSPHRASE)
        .env("SSH_ASKPASS", "/bin/echo")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe; it detaches the child from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(format!("{PASSPHRASE}\n{PASSPHRASE}\n").as_bytes());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no controlling terminal"), "{err}");
    assert!(!key_path(home.path()).exists());
    assert!(!key_path(home.path()).with_extension("pub").exists());
}

/// Ctrl-C at the prompt arrives as a byte and aborts: exit 1, nothing written, and the
/// terminal's modes are restored (echo and canonical mode back on).
#[test]
fn ctrl_c_at_the_prompt_aborts_and_restores_the_terminal() {
    let s = DemoServer::start_with_env(&[]);
    let home = s.home.path();
    let mut t = Term::proctor(home, &["key", "generate"]);
    t.wait_for_n("Passphrase: ", 1);
    let during = t.lflag();
    assert_eq!(
        during & libc::ECHO,
        0,
        "echo is off while the secret is read"
    );
    assert_eq!(during & libc::ISIG, 0, "signals are off: Ctrl-C is a byte");
    t.send(b"half typed\x03");
    let code = t.exit_code();
    let out = t.wait_for_n("aborted", 1);
    assert_eq!(code, 1, "{out}");
    assert!(!key_path(home).exists());
    let after = t.lflag();
    for (flag, name) in [
        (libc::ECHO, "ECHO"),
        (libc::ICANON, "ICANON"),
        (libc::ISIG, "ISIG"),
    ] {
        assert_ne!(after & flag, 0, "{name} was not restored");
    }
}

/// A background job of the terminal cannot answer: refused by name, exit 1.
#[test]
fn a_background_job_is_refused() {
    let home = common::TestHome::new();
    let script = format!(
        "set -m; '{}' --home '{}' key generate & wait $!; echo \"exit=$?\"",
        env!("CARGO_BIN_EXE_proctor"),
        home.path().display()
    );
    let mut t = Term::spawn("bash", &["--norc", "--noprofile", "-c", &script], 30, 120);
    let out = t.wait_for_n("exit=", 1);
    t.exit_code();
    assert!(out.contains("not in the terminal's foreground"), "{out}");
    assert!(out.contains("exit=1"), "{out}");
    assert!(!key_path(home.path()).exists());
}

#[test]
fn key_routes_have_roles_and_refuse_agents() {
    let s = DemoServer::start_with_env(&[]);
    let sock = s.home.socket();
    let vk = ed25519_dalek::SigningKey::from_bytes(&[5u8; 32]).verifying_key();
    let info = proctor::authority::keys::PublicInfo::of(&vk);
    let body = json!({"public_key_b64": info.public_key_b64});

    assert_eq!(call_as(&sock, None, "GET", KEYS, None).0, 401);
    assert_eq!(
        call_as(&sock, None, "POST", KEYS, Some(body.clone())).0,
        401
    );
    let read = s.json_token("read", "viewer");
    let write = s.json_token("write", "writer");
    assert_eq!(call_as(&sock, Some(&read), "GET", KEYS, None).0, 200);
    assert_eq!(
        call_as(&sock, Some(&read), "POST", KEYS, Some(body.clone())).0,
        403
    );
    assert_eq!(
        call_as(&sock, Some(&write), "POST", KEYS, Some(body.clone())).0,
        403
    );
    let agent = s.home.json(&[
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "bot",
        "--principal",
        "agent",
        "--json",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    // The kernel's checks come after the role: this test process holds admin tokens (an
    // agent's, the owner's) but is not the proctor binary and has no terminal. Refused,
    // recorded, and nothing registered: a bad key does not even reach the parser.
    for token in [&agent, &s.token] {
        for b in [body.clone(), json!({"public_key_b64": "AAAA"})] {
            let (st, v) = call_as(&sock, Some(token), "POST", KEYS, Some(b));
            assert_eq!(st, 403, "{v}");
            assert_eq!(v["error"]["code"], "authority_refused", "{v}");
        }
    }
    assert_eq!(s.expect(200, "GET", KEYS, None)["items"], json!([]));
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert_eq!(ledger.matches("\"authority.peer_refused\"").count(), 4);

    // `key show` of a key the server does not know, then `key register` at a terminal:
    // registered (one ledger event), then already known.
    let path = key_path(s.home.path());
    let mine = proctor::authority::keys::generate(&path, PASSPHRASE.as_bytes()).unwrap();
    assert_eq!(s.home.json(&["key", "show", "--json"])["registered"], false);
    let text = s.home.ok(&["key", "show"]);
    assert!(text.contains("NOT registered"), "{text}");
    // Without a terminal (a pipe, no controlling terminal): refused by the server.
    let out = s.home.run_without_terminal(&["key", "register"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no controlling terminal"), "{err}");
    let mut t = Term::proctor(s.home.path(), &["key", "register"]);
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    let out = t.text();
    assert!(out.contains(&mine.key_id_line()), "{out}");
    assert!(out.contains("registered with the server"), "{out}");
    assert!(!out.contains("already"), "{out}");
    assert_eq!(s.home.json(&["key", "show", "--json"])["registered"], true);
    let items = s.expect(200, "GET", KEYS, None)["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1);
    assert_eq!(items[0]["key_id"], mine.key_id.as_str());
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert_eq!(ledger.matches("\"authority.key.registered\"").count(), 1);
    assert_eq!(mode(&s.home.path().join("data/keys.json")), 0o600);
    let mut t = Term::proctor(s.home.path(), &["key", "register"]);
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    assert!(t.text().contains("already registered"), "{}", t.text());
}
