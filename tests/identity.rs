//! Who is calling, from the kernel: another uid is closed whatever the socket's mode; the
//! owner token is not revocable, only rotatable by a person at a terminal; an agent lists
//! and revokes only agent tokens; slow-header and idle connections are closed, an attach
//! stream is not; a process holds a bounded number of connections.
//! (The scripted attack from inside a run is in tests/publish.rs.)

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::pty::Term;
use common::{DemoServer, call_as};
use serde_json::json;

/// Reads until the server closes the connection; `Err` if it is still open after `wait`.
fn read_until_closed(s: &mut UnixStream, wait: Duration) -> Result<Vec<u8>, String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => {
                return Err(format!(
                    "still open after {wait:?} ({e}); got {:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
}

#[test]
fn another_uid_is_closed_whatever_the_socket_mode() {
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching to another uid (setpriv) needs root");
        return;
    }
    let s = DemoServer::start(&[]);
    // Make the socket reachable by anyone: the folders traversable, the socket 0666.
    let home = s.home.path();
    for dir in [home.to_path_buf(), home.join("run")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    let sock = s.home.socket();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let script = format!(
        "import socket,sys\n\
         s=socket.socket(socket.AF_UNIX); s.connect({sock:?})\n\
         try: s.sendall(b'GET /v1/whoami HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer {}\\r\\nConnection: close\\r\\n\\r\\n')\n\
         except (BrokenPipeError, ConnectionResetError): pass\n\
         s.settimeout(20)\n\
         got=b''\n\
         while True:\n\
         \x20   try: b=s.recv(4096)\n\
         \x20   except (ConnectionResetError, BrokenPipeError): break\n\
         \x20   if not b: break\n\
         \x20   got+=b\n\
         sys.stdout.write('ANSWER:'+repr(got))\n",
        s.token,
        sock = sock.to_str().unwrap()
    );
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("ANSWER:b''"),
        "answered another uid: {text} {err}"
    );
    // The same request from our uid is answered.
    let (code, _) = s.call("GET", "/v1/whoami", None);
    assert_eq!(code, 200);
    let log = std::fs::read_to_string(home.join("state/server.log")).unwrap_or_default();
    assert!(log.contains("refused a connection from uid 65534"), "{log}");
}

#[test]
fn the_owner_token_is_rotated_at_the_terminal_never_revoked() {
    let s = DemoServer::start_with_env(&[]);
    let sock = s.home.socket();
    let agent = |role: &str, name: &str| {
        s.home.json(&[
            "token",
            "create",
            "--role",
            role,
            "--name",
            name,
            "--principal",
            "agent",
            "--json",
        ])["secret"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let bot = agent("admin", "bot");
    agent("read", "bot-reader");
    let person = s.json_token("write", "alice");
    let owner_id = s.expect(200, "GET", "/v1/whoami", None)["token_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Neither an agent's admin token nor the owner's own can revoke the owner token, by
    // name or by id; the refusal names the remedy.
    for token in [&bot, &s.token] {
        for target in ["owner", owner_id.as_str()] {
            let (code, v) = call_as(
                &sock,
                Some(token),
                "DELETE",
                &format!("/v1/tokens/{target}"),
                None,
            );
            assert_eq!(code, 403, "{v}");
            assert_eq!(v["error"]["code"], "owner_token");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("proctor token rotate-owner"),
                "{v}"
            );
        }
    }
    // An agent sees only agent tokens below admin, and revokes only those.
    let (_, v) = call_as(&sock, Some(&bot), "GET", "/v1/tokens", None);
    assert_eq!(v["only"], "agent", "{v}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bot-reader"], "{v}");
    let (code, v) = call_as(&sock, Some(&bot), "DELETE", "/v1/tokens/alice", None);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (403, Some("agent_refused"))
    );
    let (code, _) = call_as(&sock, Some(&bot), "DELETE", "/v1/tokens/bot-reader", None);
    assert_eq!(code, 200);
    let (code, _) = call_as(&sock, Some(&person), "GET", "/v1/whoami", None);
    assert_eq!(code, 200, "alice's token still works");
    // Every CLI verb still works with the owner token.
    s.home.ok(&["server", "status"]);

    // Rotation needs a person at a terminal: from a script (this process, or the binary
    // without a terminal) it is refused and recorded.
    let (code, v) = s.call("POST", "/v1/tokens/owner/rotation", None);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (403, Some("authority_refused"))
    );
    let out = s.home.run_without_terminal(&["token", "rotate-owner"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no controlling terminal"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.home.owner_token(), s.token, "nothing rotated");

    // At a real terminal: rotated; the old secret stops working, the new one in the file
    // works, and the CLI goes on with it.
    let mut t = Term::proctor(s.home.path(), &["token", "rotate-owner"]);
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    assert!(t.text().contains("owner token rotated"), "{}", t.text());
    let fresh = s.home.owner_token();
    assert_ne!(fresh, s.token);
    let mode = std::fs::metadata(s.home.path().join("config/owner.token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let (code, _) = call_as(&sock, Some(&s.token), "GET", "/v1/whoami", None);
    assert_eq!(code, 401, "the old owner secret is revoked");
    let (code, v) = call_as(&sock, Some(&fresh), "GET", "/v1/whoami", None);
    assert_eq!(code, 200);
    assert_eq!(v["name"], "owner");
    s.home.ok(&["server", "status"]);
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    let line = ledger
        .lines()
        .find(|l| l.contains("\"auth.owner.rotated\""))
        .expect("auth.owner.rotated");
    assert!(line.contains(&owner_id), "{line}");
}

#[test]
fn slow_header_and_idle_connections_are_closed_an_attach_is_not() {
    let s = DemoServer::start(&["--head-timeout-ms=1500"]);
    let sock = s.home.socket();

    // A request head that never ends.
    let mut slow = UnixStream::connect(&sock).unwrap();
    slow.write_all(b"GET /v1/version HTTP/1.1\r\nHost: pro")
        .unwrap();
    read_until_closed(&mut slow, Duration::from_secs(20)).expect("slow header");

    // A connection that says nothing at all.
    let mut mute = UnixStream::connect(&sock).unwrap();
    read_until_closed(&mut mute, Duration::from_secs(20)).expect("silent connection");

    // A keep-alive connection, idle after its answer.
    let mut idle = UnixStream::connect(&sock).unwrap();
    idle.write_all(b"GET /v1/version HTTP/1.1\r\nHost: proctor\r\n\r\n")
        .unwrap();
    let got = read_until_closed(&mut idle, Duration::from_secs(20)).expect("idle keep-alive");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));

    // An attach stream, quiet for well past the deadline, stays open and streams on.
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    let v = s.wait_run(&run, "some output", |v| {
        v["output"]["bytes"].as_u64().unwrap_or(0) > 0
    });
    let next = v["output"]["next_seq"].as_u64().unwrap();
    let mut attach = UnixStream::connect(&sock).unwrap();
    write!(
        attach,
        "GET {} HTTP/1.1\r\nHost: proctor\r\nAuthorization: Bearer {}\r\n\r\n",
        s.run_path(&run, &format!("/attach?from={next}")),
        s.token
    )
    .unwrap();
    attach
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 65536];
    let quiet_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < quiet_until {
        match attach.read(&mut buf) {
            Ok(0) => panic!(
                "the attach stream was closed: {}",
                String::from_utf8_lossy(&seen)
            ),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    assert!(
        String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    let before = seen.len();
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(json!({"text": "hello"})),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&seen[before..]).contains("event: output") {
        assert!(Instant::now() < deadline, "no output on the attach stream");
        match attach.read(&mut buf) {
            Ok(0) => panic!("the attach stream was closed"),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn one_process_holds_a_bounded_number_of_connections() {
    let s = DemoServer::start(&["--max-connections-per-process=3"]);
    let sock = s.home.socket();
    let mut held: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // The server reads each peer at accept; give it the time to count the three. Their
    // accepts run concurrently with the next connection's, so that one can take a slot
    // first and a held one be refused instead: a held connection the server answered (or
    // closed) is opened again, so that three are held when the fourth arrives.
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        for h in held.iter_mut() {
            use std::os::fd::AsRawFd;
            let mut b = [0u8; 1];
            // SAFETY: recv(2) peeking one byte into a local buffer, without blocking.
            let n = unsafe {
                libc::recv(
                    h.as_raw_fd(),
                    b.as_mut_ptr().cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            let waiting =
                n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
            if !waiting {
                *h = UnixStream::connect(&sock).unwrap();
            }
        }
        let mut extra = UnixStream::connect(&sock).unwrap();
        let _ = extra
            .write_all(b"GET /v1/version HTTP/1.1\r\nHost: proctor\r\nConnection: close\r\n\r\n");
        let got = read_until_closed(&mut extra, Duration::from_secs(20)).unwrap();
        let text = String::from_utf8_lossy(&got).to_string();
        if text.starts_with("HTTP/1.1 503") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.contains("too_many_connections"),
        "{answer}"
    );
    assert!(
        answer.contains("--max-connections-per-process 3"),
        "{answer}"
    );
    // Closing them frees the slots.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = UnixStream::connect(&sock).unwrap();
        let _ =
            c.write_all(b"GET /v1/version HTTP/1.1\r\nHost: proctor\r\nConnection: close\r\n\r\n");
        let got = read_until_closed(&mut c, Duration::from_secs(20)).unwrap();
        if got.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "the slots never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A background job of a real terminal: the proctor binary, outside the server's tree, with
/// a controlling terminal, but not its foreground group. `token rotate-owner` makes no
/// terminal check of its own: the server's refuses it, naming that one check.
#[test]
fn a_background_job_at_a_terminal_is_refused_by_the_server() {
    let s = DemoServer::start_with_env(&[]);
    let script = format!(
        "set -m; '{}' --home '{}' token rotate-owner & wait $!; echo \"exit=$?\"",
        env!("CARGO_BIN_EXE_proctor"),
        s.home.path().display()
    );
    let mut t = Term::spawn("bash", &["--norc", "--noprofile", "-c", &script], 30, 200);
    let out = t.wait_for_n("exit=", 1);
    t.exit_code();
    assert!(out.contains("exit=1"), "{out}");
    assert!(
        out.contains("authority_refused") || out.contains("not the foreground"),
        "{out}"
    );
    assert_eq!(s.home.owner_token(), s.token, "nothing rotated");
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    let refused: Vec<serde_json::Value> = ledger
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "authority.peer_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["route"], "/v1/tokens/owner/rotation");
    assert_eq!(
        refused[0]["failed"],
        json!(["not_foreground"]),
        "{refused:?}"
    );
}

/// A process the kernel places in a run's cgroup is an agent even when its parent chain does
/// not meet the server (a process started outside the tree and moved in, as root can): the
/// cgroup is a second, kernel-held sign besides ancestry.
#[test]
fn a_process_in_a_runs_cgroup_is_an_agent_whatever_its_ancestry() {
    let s = DemoServer::start(&[]);
    let status = s.expect(200, "GET", "/v1/server", None);
    if status["runs_held_by"]["mechanism"] != "cgroup" {
        eprintln!("no writable cgroup here: {status}");
        return;
    }
    let run = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pty", "workspace": s.home.path()})),
    );
    let r = run["ref"].as_str().unwrap().to_string();
    let v = s.expect(200, "GET", &format!("/v1/m/sessions/runs/{r}"), None);
    let cgroup = std::path::PathBuf::from(v["hold"]["path"].as_str().unwrap());
    let sock = s.home.socket();
    // A child of the test process (outside the server's tree) that waits for a line, then asks
    // the server who it is.
    let script = format!(
        "import socket,sys\n\
         sys.stdin.readline()\n\
         s=socket.socket(socket.AF_UNIX); s.connect({sock:?})\n\
         s.sendall(b'GET /v1/whoami HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer {}\\r\\nConnection: close\\r\\n\\r\\n')\n\
         got=b''\n\
         while True:\n\
         \x20   b=s.recv(4096)\n\
         \x20   if not b: break\n\
         \x20   got+=b\n\
         sys.stdout.write(got.split(b'\\r\\n\\r\\n',1)[1].decode())\n",
        s.token,
        sock = sock.to_str().unwrap()
    );
    let ask = |into_run: bool| -> serde_json::Value {
        let mut child = std::process::Command::new("/usr/bin/python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if into_run {
            std::fs::write(cgroup.join("cgroup.procs"), format!("{}\n", child.id())).unwrap();
        }
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    // The control: the same process left where it is is the person its token says.
    let outside = ask(false);
    assert_eq!(outside["principal"], "person", "{outside}");
    assert_eq!(outside["peer"]["ancestry"], "outside", "{outside}");
    let inside = ask(true);
    assert_eq!(inside["principal"], "agent", "{inside}");
    assert_eq!(inside["peer"]["ancestry"], "in_run_cgroup", "{inside}");
    s.expect(200, "POST", &format!("/v1/m/sessions/runs/{r}/stop"), None);
}
