//! `session start --rig`: a session whose provider process lives in a namespace rig, through
//! the real server, real bubblewrap and nsenter: the process is in the rig's namespaces (its
//! network namespace is the rig's, its files land in the rig's root, the host's do not), the
//! run's view and `session show --json` name the namespace boundary, a person's lock refuses
//! an agent (423), a VM rig is refused naming why, a closed or unknown rig is refused; stopping
//! the session ends the process inside the rig, and closing the rig ends the session.

mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::rigs::{agent_token, open_running as open, rig_path};
use common::{DemoServer, call_as};
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn rig_exec(s: &DemoServer, id: &str, argv: &[&str]) -> String {
    let v = s.expect(
        200,
        "POST",
        &rig_path(id, "/exec"),
        Some(json!({"argv": argv})),
    );
    let out = base64::engine::general_purpose::STANDARD
        .decode(v["stdout_b64"].as_str().unwrap())
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn start_body(s: &DemoServer, rig: &str, prompt: Option<&str>) -> Value {
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut b = json!({
        "tool": "claude",
        "transport": "pty",
        "workspace": ws.to_string_lossy(),
        "rig": rig,
        "path": s.home.path.as_ref().unwrap().to_string_lossy(),
    });
    if let Some(p) = prompt {
        b["prompt"] = json!(p);
    }
    b
}

/// The processes below `pid` (children first, depth first).
fn descendants(pid: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                for c in c.split_whitespace().filter_map(|x| x.parse::<u64>().ok()) {
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

fn ns(pid: &str, which: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{which}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn alive(pid: u64) -> bool {
    // A zombie has no /proc/PID/ns links readable; a reaped process has no folder.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn a_session_in_a_namespace_rig_runs_behind_its_boundary() {
    let s = DemoServer::start(&[]);
    let id = open(&s, json!({"backend": "namespace"}));
    let marker = format!("proctor-rig-session-{}", std::process::id());
    let prompt = format!("!write /root/{marker} written-inside-the-rig");

    let v = s.expect(201, "POST", RUNS, Some(start_body(&s, &id, Some(&prompt))));
    let run = v["ref"].as_str().unwrap().to_string();
    assert_eq!(v["boundary"]["kind"], "namespace", "{v}");
    assert_eq!(v["boundary"]["rig"], id.as_str(), "{v}");
    assert_eq!(
        v["boundary"]["detail"],
        "namespace boundary: weaker than a VM (shares the host kernel)"
    );
    let pid = v["pid"].as_u64().expect("the run has a pid");

    // The provider process (below the host-side nsenter) is in the rig's namespaces.
    let deadline = Instant::now() + Duration::from_secs(20);
    let inside = loop {
        let found = descendants(pid)
            .into_iter()
            .find(|c| ns(&c.to_string(), "net") != ns("self", "net"));
        if let Some(c) = found {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no process of {run} in another net namespace"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let rig_net = rig_exec(&s, &id, &["readlink", "/proc/self/ns/net"]);
    let rig_mnt = rig_exec(&s, &id, &["readlink", "/proc/self/ns/mnt"]);
    let rig_pid = rig_exec(&s, &id, &["readlink", "/proc/self/ns/pid"]);
    assert_eq!(ns(&inside.to_string(), "net"), rig_net.trim());
    assert_eq!(ns(&inside.to_string(), "mnt"), rig_mnt.trim());
    assert_eq!(ns(&inside.to_string(), "pid_for_children"), rig_pid.trim());
    assert_ne!(rig_net.trim(), ns("self", "net"));
    // Only `lo` in the network the provider sees.
    let dev = std::fs::read_to_string(format!("/proc/{inside}/net/dev")).unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, ["lo"], "{dev}");
    // No capability left to it in the rig's user namespace.
    let status = std::fs::read_to_string(format!("/proc/{inside}/status")).unwrap();
    assert!(
        status.contains("CapEff:\t0000000000000000"),
        "the provider kept capabilities: {status}"
    );

    // What the provider wrote landed in the rig's /root, not the host's.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = rig_exec(&s, &id, &["sh", "-c", &format!("cat /root/{marker} 2>&1")]);
        if got.contains("written-inside-the-rig") {
            break;
        }
        assert!(Instant::now() < deadline, "the rig has no {marker}: {got}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    for host in [format!("/root/{marker}"), format!("{home}/{marker}")] {
        assert!(
            !std::path::Path::new(&host).exists(),
            "{host} exists on the host"
        );
    }

    // `session show --json` names the boundary; the plain form prints it.
    let shown = s.home.json(&["session", "show", &run, "--json"]);
    assert_eq!(shown["boundary"]["kind"], "namespace", "{shown}");
    assert_eq!(shown["boundary"]["rig"], id.as_str());
    let plain = s.home.ok(&["session", "show", &run]);
    assert!(
        plain.contains("namespace boundary: weaker than a VM"),
        "{plain}"
    );
    // The run's record keeps it (run.json).
    let rec: Value = serde_json::from_slice(
        &std::fs::read(s.home.path().join(format!("data/runs/{run}/run.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["boundary"]["kind"], "namespace", "{rec}");
    // The rig's audit names the session's entry.
    let audit = s.expect(200, "GET", &rig_path(&id, "/audit"), None);
    assert!(
        audit.to_string().contains("\"session\""),
        "the audit has no session entry: {audit}"
    );

    // Stopping the session ends the process inside the rig.
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(inside) {
        assert!(Instant::now() < deadline, "{inside} outlived the stop");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Closing the rig ends a session running in it.
    let v = s.expect(201, "POST", RUNS, Some(start_body(&s, &id, None)));
    let run2 = v["ref"].as_str().unwrap().to_string();
    let pid2 = v["pid"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let inside2 = loop {
        if let Some(c) = descendants(pid2)
            .into_iter()
            .find(|c| ns(&c.to_string(), "net") != ns("self", "net"))
        {
            break c;
        }
        assert!(Instant::now() < deadline, "no process of {run2} in the rig");
        std::thread::sleep(Duration::from_millis(50));
    };
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
    let ended = s.wait_run(&run2, "the run to end with its rig", |v| {
        v["state"] != "running" && v["state"] != "starting"
    });
    assert!(!alive(inside2), "{inside2} outlived its rig");
    eprintln!(
        "closing the rig ended {run2}: state {}, exit {}, signal {}",
        ended["state"], ended["exit_code"], ended["signal"]
    );

    // A closed rig takes no session.
    let (code, v) = s.call("POST", RUNS, Some(start_body(&s, &id, None)));
    assert_eq!(code, 409, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("rig open"),
        "{v}"
    );
}

#[test]
fn the_rules_of_the_chokepoint_hold_for_a_session_start() {
    let s = DemoServer::start(&[]);
    let bot = agent_token(&s, "bot");
    let sock = s.home.socket();
    let id = open(&s, json!({"backend": "namespace"}));

    // Unknown and malformed rigs.
    let (code, v) = s.call("POST", RUNS, Some(start_body(&s, "rig-9999", None)));
    assert_eq!(code, 404, "{v}");
    let (code, v) = s.call("POST", RUNS, Some(start_body(&s, "../x", None)));
    assert_eq!(code, 400, "{v}");
    // --worktree with --rig: refused, naming why.
    let mut b = start_body(&s, &id, None);
    b["worktree"] = json!(true);
    let (code, v) = s.call("POST", RUNS, Some(b));
    assert_eq!(code, 422, "{v}");
    assert!(v.to_string().contains("rig fetch"), "{v}");

    // A person's lock refuses an agent's session start in the rig, and leaves the person's.
    s.expect(200, "POST", &rig_path(&id, "/lock"), None);
    let (code, v) = call_as(
        &sock,
        Some(&bot),
        "POST",
        RUNS,
        Some(start_body(&s, &id, None)),
    );
    assert_eq!(code, 423, "{v}");
    assert_eq!(v["error"]["code"], "locked", "{v}");
    let runs = s.expect(200, "GET", RUNS, None);
    assert_eq!(runs["items"].as_array().unwrap().len(), 0, "{runs}");
    let v = s.expect(201, "POST", RUNS, Some(start_body(&s, &id, None)));
    assert_eq!(v["boundary"]["kind"], "namespace", "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
    // Unlocked: the agent may.
    s.expect(200, "DELETE", &rig_path(&id, "/lock"), None);
    let (code, v) = call_as(
        &sock,
        Some(&bot),
        "POST",
        RUNS,
        Some(start_body(&s, &id, None)),
    );
    assert_eq!(code, 201, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
    // A run in a rig is not resumed on the host.
    let (code, v) = s.call("POST", &format!("{RUNS}/{run}/resume"), Some(json!({})));
    assert_eq!(code, 409, "{v}");

    // The audit has the refusal with the agent's principal.
    let audit = s.expect(200, "GET", &rig_path(&id, "/audit"), None);
    let refused = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["action"] == "session" && e["outcome"] == "refused");
    assert!(refused, "{audit}");

    // A session on the host still says it is not confined.
    let mut b = start_body(&s, &id, None);
    b.as_object_mut().unwrap().remove("rig");
    let v = s.expect(201, "POST", RUNS, Some(b));
    assert_eq!(v["boundary"]["kind"], "host", "{v}");
    assert!(v["boundary"]["rig"].is_null());
    assert!(
        v["boundary"]["detail"]
            .as_str()
            .unwrap()
            .contains("not confined")
    );
    let run = v["ref"].as_str().unwrap().to_string();
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
}

#[test]
fn a_vm_rig_is_refused_naming_why() {
    let s = DemoServer::start(&[]);
    common::rigs::install_image(s.home.path());
    // The refusal does not wait for the boot: a VM's image has no provider CLI.
    let v = s.expect(201, "POST", "/v1/m/rigs", Some(json!({"backend": "vm"})));
    let id = v["id"].as_str().unwrap().to_string();
    let (code, v) = s.call("POST", RUNS, Some(start_body(&s, &id, None)));
    assert_eq!(code, 503, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("VM rig") && msg.contains("no provider CLI") && msg.contains("namespace"),
        "{msg}"
    );
    let _ = s.call("POST", &rig_path(&id, "/close"), None);
}

#[test]
fn a_session_counts_as_use_of_its_rig_and_the_cli_names_the_boundary() {
    let s = DemoServer::start(&[]);
    let id = open(&s, json!({"backend": "namespace", "idle": "2s"}));
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = s.home.ok(&[
        "session",
        "start",
        "--tool",
        "claude",
        "--workspace",
        ws.to_str().unwrap(),
        "--rig",
        &id,
    ]);
    assert!(
        out.contains("boundary: namespace boundary: weaker than a VM"),
        "{out}"
    );
    let run = out
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_string();
    assert!(run.starts_with("run-"), "{out}");
    let help = s.home.ok(&["session", "start", "--help"]);
    assert!(
        help.contains("--rig") && help.contains("namespace rig"),
        "{help}"
    );

    // While the session lives, the rig counts it as a watcher: past twice its idle window it
    // is neither suspended nor closed.
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["watchers"], 1, "{v}");
    std::thread::sleep(Duration::from_secs(5));
    let v = s.expect(200, "GET", &rig_path(&id, ""), None);
    assert_eq!(v["state"], "running", "{v}");
    // Once the session ends, the rig is idle again: the ladder suspends it.
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = s.expect(200, "GET", &rig_path(&id, ""), None);
        if v["watchers"] == 0 && (v["state"] == "suspended" || v["state"] == "closed") {
            break;
        }
        assert!(Instant::now() < deadline, "the rig stayed in use: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The v1 freezer cgroup a process is in (`/sys/fs/cgroup/freezer/...`), if any.
fn freezer_of(pid: u64) -> Option<std::path::PathBuf> {
    let c = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let line = c.lines().find(|l| l.split(':').nth(1) == Some("freezer"))?;
    let path = line.splitn(3, ':').nth(2)?;
    (path != "/").then(|| std::path::PathBuf::from(format!("/sys/fs/cgroup/freezer{path}")))
}

#[test]
fn suspending_a_rig_freezes_the_session_running_in_it() {
    if !std::path::Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists() {
        // The v2 case is a named residual (docs/rigs.md): nothing to assert here.
        eprintln!("no v1 freezer hierarchy on this host");
        return;
    }
    let s = DemoServer::start(&[]);
    let id = open(&s, json!({"backend": "namespace"}));
    let v = s.expect(201, "POST", RUNS, Some(start_body(&s, &id, None)));
    let run = v["ref"].as_str().unwrap().to_string();
    let pid = v["pid"].as_u64().expect("the run has a pid");
    let deadline = Instant::now() + Duration::from_secs(20);
    let inside = loop {
        let found = descendants(pid)
            .into_iter()
            .find(|c| ns(&c.to_string(), "net") != ns("self", "net"));
        if let Some(c) = found {
            break c;
        }
        assert!(Instant::now() < deadline, "no process of {run} in the rig");
        std::thread::sleep(Duration::from_millis(50));
    };
    let freezer = freezer_of(inside).expect("the session's process is in a freezer cgroup");
    assert!(
        freezer.to_string_lossy().contains(&id),
        "the freezer {} is not the rig's",
        freezer.display()
    );
    let state = || std::fs::read_to_string(freezer.join("freezer.state")).unwrap();
    s.expect(200, "POST", &rig_path(&id, "/suspend"), None);
    assert_eq!(state().trim(), "FROZEN");
    let procs = std::fs::read_to_string(freezer.join("cgroup.procs")).unwrap();
    assert!(
        procs.split_whitespace().any(|p| p == inside.to_string()),
        "{inside} not among the frozen: {procs}"
    );
    s.expect(200, "POST", &rig_path(&id, "/resume"), None);
    assert_eq!(state().trim(), "THAWED");
    s.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None);
}
