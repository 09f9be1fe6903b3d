//! The server: auto-start, one per home, detachment, auth, stop, and the ledger it keeps.

mod common;
use common::{TestHome, alive, http_status};

#[test]
fn a_client_starts_the_server_which_outlives_it_in_its_own_session() {
    let h = TestHome::new();
    let out = h.ok(&["serve"]);
    assert!(out.contains("started"), "{out}");
    let pid = h.server_pid().expect("the lock file holds the pid");
    assert!(alive(pid));
    // The server leads its own session: no controlling terminal, untouched by our hang-up.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let (session, tty) = (fields[3], fields[4]);
    assert_eq!(session, pid.to_string(), "the server is a session leader");
    assert_eq!(tty, "0", "the server has no controlling terminal");
    // Files and sockets are private.
    use std::os::unix::fs::MetadataExt;
    for p in [
        "run",
        "run/server.sock",
        "config/owner.token",
        "data/tokens.json",
        "data/ledger.jsonl",
    ] {
        let mode = std::fs::symlink_metadata(h.path().join(p)).unwrap().mode() & 0o777;
        let want = if p == "run" { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{p}");
    }
    let again = h.ok(&["serve"]);
    assert!(again.contains("already runs"), "{again}");
    assert_eq!(h.server_pid(), Some(pid));
}

#[test]
fn concurrent_clients_start_exactly_one_server() {
    let h = TestHome::new();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let mut c = h.cmd();
            let args: &[&str] = if i % 2 == 0 {
                &["serve"]
            } else {
                &["token", "list", "--json"]
            };
            c.args(args);
            std::thread::spawn(move || c.output().unwrap())
        })
        .collect();
    let outs: Vec<_> = handles.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(outs.iter().all(|o| o.status.success()));
    let ledger = std::fs::read_to_string(h.ledger()).unwrap();
    assert_eq!(
        ledger.matches("\"server.started\"").count(),
        1,
        "exactly one server started:\n{ledger}"
    );
}

#[test]
fn a_second_foreground_server_for_the_same_home_is_refused() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let out = h.run(&["serve", "--foreground"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already runs"), "{err}");
    assert!(err.contains(&h.server_pid().unwrap().to_string()), "{err}");
}

#[test]
fn a_stale_socket_from_a_killed_server_is_replaced() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let pid = h.server_pid().unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    while alive(pid) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(h.socket().exists(), "SIGKILL leaves the socket behind");
    let out = h.run(&["server", "status", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["running"], false, "status never starts a server");
    h.ok(&["serve"]);
    let v = h.json(&["server", "status", "--json"]);
    assert_ne!(v["pid"].as_i64().unwrap(), i64::from(pid));
    // The ledger still verifies across the crash.
    let ledger = std::fs::read_to_string(h.ledger()).unwrap();
    assert_eq!(ledger.matches("\"server.started\"").count(), 2);
}

#[test]
fn stop_records_and_removes_the_socket() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let pid = h.server_pid().unwrap();
    assert_eq!(h.ok(&["server", "stop"]).trim(), "server stopped");
    assert!(!alive(pid));
    assert!(!h.socket().exists());
    let ledger = std::fs::read_to_string(h.ledger()).unwrap();
    assert!(ledger.contains("\"server.stop_requested\""), "{ledger}");
    assert!(ledger.contains("\"server.stopped\""), "{ledger}");
    assert_eq!(
        h.ok(&["server", "stop"]).trim(),
        "no server was running for this home"
    );
    let st = h.run(&["server", "status"]);
    assert_eq!(st.status.code(), Some(1));
}

#[test]
fn a_home_whose_socket_path_is_too_long_gets_a_short_private_runtime_folder() {
    let base = tempfile::tempdir().unwrap();
    let long = base.path().join("x".repeat(120));
    let proctor = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
            .env_remove("PROCTOR_HOME")
            .arg("--home")
            .arg(&long)
            .args(args)
            .output()
            .unwrap()
    };
    let out = proctor(&["serve"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home: serde_json::Value =
        serde_json::from_slice(&proctor(&["home", "--json"]).stdout).unwrap();
    let socket = home["socket"].as_str().unwrap().to_string();
    let stop = proctor(&["server", "stop"]);
    assert!(stop.status.success());
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert!(
        socket.starts_with(&format!("/tmp/proctor-{uid}/")) && socket.len() <= 107,
        "{socket}"
    );
    assert!(
        said.contains(&socket),
        "serve names the socket it used: {said}"
    );
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(format!("/tmp/proctor-{uid}")).unwrap();
    assert!(meta.is_dir() && meta.uid() == uid && meta.mode() & 0o777 == 0o700);
    // This home's folder there holds only its locks now.
    let _ = std::fs::remove_dir_all(std::path::Path::new(&socket).parent().unwrap());
}

#[test]
fn a_server_speaking_another_protocol_is_named() {
    let h = TestHome::new();
    std::fs::create_dir_all(h.path().join("run")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for d in ["", "run"] {
        std::fs::set_permissions(h.path().join(d), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let listener = std::os::unix::net::UnixListener::bind(h.socket()).unwrap();
    let t = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).unwrap();
        let body = r#"{"name":"proctor","version":"9.9.9","protocol":99}"#;
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    let out = h.run(&["token", "list"]);
    t.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("protocol 99"), "{err}");
    assert!(err.contains("proctor server stop"), "{err}");
}

#[test]
fn auth_matrix_401_403_per_role() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let owner = h.owner_token();
    let mut secrets = std::collections::HashMap::new();
    for role in ["read", "write", "admin"] {
        let v = h.json(&["token", "create", "--role", role, "--name", role, "--json"]);
        secrets.insert(role, v["secret"].as_str().unwrap().to_string());
    }
    let agent = h.json(&[
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "bot",
        "--principal",
        "agent",
        "--json",
    ]);
    let agent = agent["secret"].as_str().unwrap().to_string();
    let sock = h.socket();
    // (method, path, least role) — the stop route is checked last, since it ends the server.
    let routes = [
        ("GET", "/v1/server", "read"),
        ("GET", "/v1/tokens", "admin"),
        ("POST", "/v1/tokens", "admin"),
        ("DELETE", "/v1/tokens/no-such", "admin"),
    ];
    let rank = |r: &str| {
        ["read", "write", "admin"]
            .iter()
            .position(|x| *x == r)
            .unwrap()
    };
    for (m, p, least) in routes {
        assert_eq!(
            http_status(&sock, m, p, None),
            401,
            "{m} {p} without a token"
        );
        assert_eq!(
            http_status(&sock, m, p, Some("proctor_bogus")),
            401,
            "{m} {p} bad token"
        );
        for role in ["read", "write", "admin"] {
            let got = http_status(&sock, m, p, Some(&secrets[role]));
            if rank(role) < rank(least) {
                assert_eq!(got, 403, "{m} {p} as {role}");
            } else {
                assert_ne!(got, 403, "{m} {p} as {role}");
                assert_ne!(got, 401, "{m} {p} as {role}");
            }
        }
    }
    // The version probe needs no token; unknown routes are 404 only after authentication.
    assert_eq!(http_status(&sock, "GET", "/v1/version", None), 200);
    // An agent, even an admin one, cannot mint tokens.
    assert_eq!(http_status(&sock, "POST", "/v1/tokens", Some(&agent)), 403);
    // A revoked token stops working at once.
    h.ok(&["token", "revoke", "read"]);
    assert_eq!(
        http_status(&sock, "GET", "/v1/server", Some(&secrets["read"])),
        401
    );
    for role in ["read", "write"] {
        if role == "read" {
            continue;
        }
        assert_eq!(
            http_status(&sock, "POST", "/v1/server/stop", Some(&secrets[role])),
            403
        );
    }
    assert_eq!(
        http_status(&sock, "POST", "/v1/server/stop", Some(&owner)),
        202
    );
}
