//! Rigs end to end, through the server's API with real engines: the control lock at the one
//! chokepoint (an agent's token, and an agent that descends from the server with the owner's
//! token), observation under the lock, the audit's seq, the hard TTL, the idle ladder, the
//! memory budget's eviction order, and the orphan sweep after `kill -9` of the server.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use base64::Engine;
use common::rigs::{agent_token, rig_path};
use common::{DemoServer, call_as};
use serde_json::{Value, json};

fn b64(s: &str) -> String {
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap()).unwrap()
}

/// Opens a rig and waits until it runs (or panics with its record).
fn open(s: &DemoServer, body: Value) -> String {
    let v = s.expect(201, "POST", "/v1/m/rigs", Some(body));
    let id = v["id"].as_str().unwrap().to_string();
    wait(s, &id, "running", |v| v["state"] == "running");
    id
}

fn wait(s: &DemoServer, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = s.expect(200, "GET", &rig_path(id, ""), None);
        if pred(&v) {
            return v;
        }
        assert!(
            v["state"] != "closed" || what.contains("closed"),
            "{id} closed while waiting for {what}: {v}"
        );
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn exec_as(s: &DemoServer, token: &str, id: &str, argv: &[&str]) -> (u16, Value) {
    call_as(
        &s.home.socket(),
        Some(token),
        "POST",
        &rig_path(id, "/exec"),
        Some(json!({"argv": argv})),
    )
}

#[test]
fn a_persons_lock_refuses_an_agents_actions_and_leaves_it_observation() {
    let s = DemoServer::start(&[]);
    let bot = agent_token(&s, "bot");
    let id = open(&s, json!({"backend": "namespace"}));

    // No lock: agent and person can both act.
    let (code, v) = exec_as(&s, &bot, &id, &["sh", "-c", "echo agent-was-here > /tmp/a"]);
    assert_eq!(code, 200, "{v}");
    let (code, v) = exec_as(&s, &s.token, &id, &["cat", "/tmp/a"]);
    assert_eq!(code, 200, "{v}");
    assert_eq!(b64(v["stdout_b64"].as_str().unwrap()), "agent-was-here\n");

    // An agent cannot take the lock; the person can.
    let sock = s.home.socket();
    let (code, v) = call_as(&sock, Some(&bot), "POST", &rig_path(&id, "/lock"), None);
    assert_eq!(code, 403, "{v}");
    let v = s.expect(200, "POST", &rig_path(&id, "/lock"), None);
    assert_eq!(v["lock"]["holder"]["principal"], "person", "{v}");

    // Every mutating action of the agent is refused, naming who holds it since when.
    let (code, v) = exec_as(&s, &bot, &id, &["touch", "/tmp/b"]);
    assert_eq!(code, 423, "{v}");
    assert_eq!(v["error"]["code"], "locked");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("owner") && msg.contains("since"), "{msg}");
    for (method, tail, body) in [
        ("POST", "/input", Some(json!({"text": "rm -rf /\r"}))),
        ("POST", "/suspend", None),
        ("POST", "/close", None),
        ("DELETE", "/lock", None),
    ] {
        let (code, v) = call_as(&sock, Some(&bot), method, &rig_path(&id, tail), body);
        assert!(code == 423 || code == 403, "{method} {tail}: {code} {v}");
    }
    // The agent's touch never ran.
    let (_, v) = exec_as(&s, &s.token, &id, &["sh", "-c", "test -e /tmp/b; echo $?"]);
    assert_eq!(b64(v["stdout_b64"].as_str().unwrap()), "1\n");

    // Observation still works for the agent: the screen, a file out, the rig, the audit.
    for tail in ["/screen", "/files?path=/tmp/a", "", "/audit"] {
        let (code, v) = call_as(&sock, Some(&bot), "GET", &rig_path(&id, tail), None);
        assert_eq!(code, 200, "GET {tail}: {v}");
    }

    // An agent the server started, holding the owner's own token, is an agent to the kernel:
    // refused too, and so is its grandchild after setsid, a double fork and a cleared
    // environment. The agent is a `claude` that is a python script (the shim replaced).
    let ws = s.home.path().join("agent-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let report = ws.join("answers.json");
    let script = AGENT
        .replace("@SOCK@", sock.to_str().unwrap())
        .replace("@TOKEN@", &s.token)
        .replace("@RIG@", &id)
        .replace("@OUT@", report.to_str().unwrap());
    let shim = s.shims.join("claude");
    std::fs::write(&shim, script).unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o700)).unwrap();
    s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !report.exists() {
        assert!(Instant::now() < deadline, "the agent wrote no answers");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    for who in ["child", "grandchild"] {
        assert_eq!(r[who]["exec"][0], 423, "{who}: {r}");
        assert_eq!(r[who]["unlock"][0], 403, "{who}: {r}");
        assert_eq!(r[who]["screen"][0], 200, "{who}: {r}");
    }
    let (_, v) = exec_as(&s, &s.token, &id, &["sh", "-c", "test -e /tmp/c; echo $?"]);
    assert_eq!(b64(v["stdout_b64"].as_str().unwrap()), "1\n");

    // The audit: every input event with its principal, seq from 1 without a gap, the
    // refusals included; a paste's content is never in it.
    let v = s.expect(200, "GET", &rig_path(&id, "/audit"), None);
    let events = v["events"].as_array().unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "{v}");
    }
    assert!(
        events
            .iter()
            .any(|e| e["by"]["principal"] == "agent" && e["outcome"] == "refused"),
        "{v}"
    );
    assert!(!v.to_string().contains("rm -rf"), "{v}");

    // Released, the agent acts again.
    s.expect(200, "DELETE", &rig_path(&id, "/lock"), None);
    let (code, v) = exec_as(&s, &bot, &id, &["true"]);
    assert_eq!(code, 200, "{v}");
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
}

/// The agent (python3, as the session's `claude`): with the owner's token, from the server's
/// own process tree, it execs in the rig, releases the lock and reads the screen; then a
/// grandchild in a new session with an empty environment does the same.
const AGENT: &str = r#"#!/usr/bin/python3
import json, os, socket, sys

def call(method, path, body=None):
    data = b"" if body is None else json.dumps(body).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect("@SOCK@")
    s.sendall((f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer @TOKEN@\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
               "Connection: close\r\n\r\n").encode() + data)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    head, _, body = got.partition(b"\r\n\r\n")
    return [int(head.split()[1]), body.decode(errors="replace")[:400]]

def attempt():
    base = "/v1/m/rigs/@RIG@"
    return {
        "exec": call("POST", base + "/exec", {"argv": ["touch", "/tmp/c"]}),
        "unlock": call("DELETE", base + "/lock"),
        "screen": call("GET", base + "/screen"),
    }

answers = {"child": attempt()}
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.environ.clear()
        os.write(w, json.dumps(attempt()).encode())
        os._exit(0)
    os._exit(0)
os.close(w)
data = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    data += b
answers["grandchild"] = json.loads(data)
tmp = "@OUT@" + ".tmp"
open(tmp, "w").write(json.dumps(answers))
os.rename(tmp, "@OUT@")
"#;

#[test]
fn a_rig_closes_at_its_ttl_and_idles_to_suspended_then_closed() {
    let s = DemoServer::start_with_env(&[]);
    let ttl = open(&s, json!({"backend": "namespace", "ttl": "3s"}));
    let idle = open(&s, json!({"backend": "namespace", "idle": "2s"}));
    let v = wait(&s, &ttl, "closed by ttl", |v| v["state"] == "closed");
    assert_eq!(v["close_reason"], "ttl_expired", "{v}");
    let v = wait(&s, &idle, "suspended", |v| {
        v["state"] == "suspended" || v["state"] == "closed"
    });
    assert_eq!(v["state"], "suspended", "{v}");
    let v = wait(&s, &idle, "closed by idle", |v| v["state"] == "closed");
    assert_eq!(v["close_reason"], "idle", "{v}");
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert!(ledger.contains("\"rig.suspended\""), "{ledger}");
}

#[test]
fn the_memory_budget_evicts_the_least_recently_used_never_a_locked_rig() {
    let s = DemoServer::start_with_env(&[]);
    std::fs::write(
        s.home.path().join("config/rigs.toml"),
        "memory_budget_mb = 500\nnamespace_floor_mb = 200\n",
    )
    .unwrap();
    let a = open(&s, json!({"backend": "namespace"}));
    let b = open(&s, json!({"backend": "namespace"}));
    // b is used after a, then a again: b is the least recently used.
    exec_as(&s, &s.token, &b, &["true"]);
    exec_as(&s, &s.token, &a, &["true"]);
    let c = open(&s, json!({"backend": "namespace"}));
    let v = s.expect(200, "GET", &rig_path(&b, ""), None);
    assert_eq!(v["close_reason"], "memory_budget", "{v}");
    assert_eq!(
        s.expect(200, "GET", &rig_path(&a, ""), None)["state"],
        "running"
    );
    // a is now the least recently used, but a person holds its lock: c goes instead.
    s.expect(200, "POST", &rig_path(&a, "/lock"), None);
    let d = open(&s, json!({"backend": "namespace"}));
    assert_eq!(
        s.expect(200, "GET", &rig_path(&a, ""), None)["state"],
        "running"
    );
    let v = s.expect(200, "GET", &rig_path(&c, ""), None);
    assert_eq!(v["close_reason"], "memory_budget", "{v}");
    // With both open rigs unevictable, a new one is refused naming the budget.
    s.expect(200, "POST", &rig_path(&d, "/lock"), None);
    let (code, v) = s.call("POST", "/v1/m/rigs", Some(json!({"backend": "namespace"})));
    assert_eq!(code, 503, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory_budget_mb"),
        "{v}"
    );
}

#[test]
fn a_vm_left_by_a_killed_server_is_swept_at_the_next_start_and_nothing_else_is() {
    let s = DemoServer::start_with_env(&[]);
    common::rigs::install_image(s.home.path());
    let id = open(&s, json!({"backend": "vm"}));
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["boundary"]["shares_host_kernel"], false, "{v}");
    let qemu = v["pid"].as_i64().unwrap() as i32;
    assert!(common::alive(qemu));
    // A decoy that carries another home's tag, and one with this rig's id but no tag of
    // ours: the sweep must leave both alone.
    let mut decoy = std::process::Command::new("sleep")
        .arg("300")
        .env("PROCTOR_RIG_OWNER", format!("0000000000000000/{id}"))
        .spawn()
        .unwrap();

    let server = s.home.server_pid().unwrap();
    // SAFETY: kill(2) on the server's pid.
    unsafe { libc::kill(server, libc::SIGKILL) };
    s.home.wait_server_gone(server);
    // The hypervisor may outlive its server (an orphan) or end with its console's hangup;
    // either way the next start leaves nothing of it running and says so.
    let list = s.home.json(&["rig", "list", "--json"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::alive(qemu) {
        assert!(Instant::now() < deadline, "qemu {qemu} still runs: {list}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["state"], "closed", "{v}");
    assert_eq!(v["close_reason"], "orphan_swept", "{v}");
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert!(ledger.contains("\"rig.swept\""), "{ledger}");
    assert!(
        decoy.try_wait().unwrap().is_none(),
        "the sweep killed a process of another home"
    );
    decoy.kill().unwrap();
    decoy.wait().unwrap();
}

/// The processes whose environment carries a rig owner tag for `id` and whose command line
/// names `home` (QEMU's names the rig's folder).
fn engines_of(home: &std::path::Path, id: &str) -> Vec<i32> {
    let home = home.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let env = std::fs::read(ent.path().join("environ")).unwrap_or_default();
        let cmd = std::fs::read(ent.path().join("cmdline")).unwrap_or_default();
        let tagged = env.split(|&b| b == 0).any(|v| {
            v.starts_with(b"PROCTOR_RIG_OWNER=") && v.ends_with(format!("/{id}").as_bytes())
        });
        if tagged && String::from_utf8_lossy(&cmd).contains(&home) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_server_stopped_while_a_vm_boots_leaves_no_hypervisor() {
    let s = DemoServer::start_with_env(&[]);
    common::rigs::install_image(s.home.path());
    let v = s.expect(201, "POST", "/v1/m/rigs", Some(json!({"backend": "vm"})));
    let id = v["id"].as_str().unwrap().to_string();
    // Stopped while QEMU boots (the launch has no machine to shut down yet).
    let deadline = Instant::now() + Duration::from_secs(30);
    while engines_of(s.home.path(), &id).is_empty() {
        assert!(Instant::now() < deadline, "QEMU never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(
        v["state"], "booting",
        "the test needs a rig still booting: {v}"
    );
    s.home.ok(&["server", "stop"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = engines_of(s.home.path(), &id);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running after the server stopped: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
