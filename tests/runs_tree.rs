//! Runs stay in their tree: what an agent does to leave its process group, session or
//! environment does not take it out of its run (a cgroup per run here, the subreaper
//! fallback when cgroups are turned off); the restart sweep works from the ledger, in
//! parallel, after the socket listens; the ledger is checked against the home at start.
//!
//! The programs are shims named like the tools (`claude`, `codex`, `gemini`) that do what an
//! escaping agent does, and write the pids of what they left into files.

mod common;
use common::{TestHome, alive, call_as};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RUNS: &str = "/v1/m/sessions/runs";

struct Server {
    home: TestHome,
    shims: PathBuf,
    ws: PathBuf,
    /// The home's cgroup folder, once a server reported it (removed at the end if a
    /// killed server left it empty).
    base: std::cell::RefCell<Option<PathBuf>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.home.cmd().args(["server", "stop"]).output();
        if let Some(b) = self.base.borrow().as_ref() {
            let _ = std::fs::remove_dir(b);
        }
    }
}

impl Server {
    fn new() -> Server {
        let home = TestHome::new();
        let shims = home.path().join("shims");
        let ws = home.path().join("ws");
        std::fs::create_dir_all(&shims).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        Server {
            home,
            shims,
            ws,
            base: Default::default(),
        }
    }

    fn path_var(&self) -> String {
        format!("{}:/usr/bin:/bin", self.shims.display())
    }

    /// Writes a tool shim: a shell script.
    fn shim(&self, tool: &str, body: &str) {
        let p = self.shims.join(tool);
        std::fs::write(
            &p,
            format!("#!/bin/sh\nexport PATH=/usr/bin:/bin\n{body}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn serve_output(&self, args: &[&str]) -> std::process::Output {
        self.home
            .cmd()
            .arg("serve")
            .args(args)
            .env("PATH", self.path_var())
            .output()
            .unwrap()
    }

    fn serve(&self, args: &[&str]) {
        let out = self.serve_output(args);
        assert!(
            out.status.success(),
            "serve {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let (_, v) = self.call("GET", "/v1/server", None);
        if let Some(b) = v["runs_held_by"]["cgroup_base"].as_str() {
            *self.base.borrow_mut() = Some(PathBuf::from(b));
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        call_as(
            &self.home.socket(),
            Some(&self.home.owner_token()),
            method,
            path,
            body,
        )
    }

    fn start(&self, tool: &str) -> String {
        let (code, v) = self.call(
            "POST",
            RUNS,
            Some(json!({"tool": tool, "transport": "pipe", "workspace": self.ws})),
        );
        assert_eq!(code, 201, "{v}");
        v["ref"].as_str().unwrap().to_string()
    }

    fn run(&self, r: &str) -> Value {
        let (code, v) = self.call("GET", &format!("{RUNS}/{r}"), None);
        assert_eq!(code, 200, "{v}");
        v
    }

    fn wait_state(&self, r: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.run(r);
            if v["state"] == state {
                return v;
            }
            assert!(Instant::now() < deadline, "{r} never became {state}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill_server(&self) {
        let pid = self.home.server_pid().unwrap();
        // SAFETY: plain kill(2).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        self.home.wait_server_gone(pid);
    }

    fn file(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for a pid file and returns the pid.
fn read_pid(p: &Path) -> i32 {
    wait_until(&format!("{}", p.display()), || {
        std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n'))
    });
    std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
}

/// Kills a pid left by a failed test.
struct Reap(Vec<i32>);
impl Drop for Reap {
    fn drop(&mut self) {
        for &p in &self.0 {
            if alive(p) {
                // SAFETY: plain kill(2) on a test's own leftovers.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    }
}

/// The three escapes of the attack session, each as a tool shim that leaves one process
/// behind (its pid written to `<home>/<tool>.pid`) and stays alive itself.
const ESCAPES: [(&str, &str); 3] = [
    // A setsid double fork: the middle process exits, the grandchild is an orphan in a
    // session of its own.
    (
        "claude",
        "( setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {F}' & ) ; exec sleep 1000",
    ),
    // A grandchild in a process group of its own (setpgid), still the shim's child.
    (
        "codex",
        "perl -e 'setpgrp(0,0); exec \"sleep\", \"1000\"' </dev/null >/dev/null 2>&1 & echo $! > {F}; exec sleep 1000",
    ),
    // setsid with a cleared environment: no run tag, another session.
    (
        "gemini",
        "setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {F}; exec sleep 1000",
    ),
];

fn install_escapes(s: &Server, round: &str) {
    for (tool, body) in ESCAPES {
        let f = s.file(&format!("{tool}-{round}.pid"));
        s.shim(tool, &body.replace("{F}", f.to_str().unwrap()));
    }
}

/// Starts the three escapes; returns (run ref, escaped pid) for each.
fn start_escapes(s: &Server, round: &str, reap: &mut Reap) -> Vec<(String, i32)> {
    install_escapes(s, round);
    ESCAPES
        .iter()
        .map(|(tool, _)| {
            let r = s.start(tool);
            let pid = read_pid(&s.file(&format!("{tool}-{round}.pid")));
            reap.0.push(pid);
            assert!(alive(pid), "{tool}: the escaped process runs");
            (r, pid)
        })
        .collect()
}

/// Waits (generously) for every escaped process to be gone; names every survivor. After a
/// stop, gone means reaped too: the server, as child subreaper, adopted the orphans and must
/// collect their zombies.
fn all_gone(runs: &[(String, i32)], after: &str) {
    let reaped = after == "session stop";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = runs
            .iter()
            .zip(ESCAPES)
            .filter(|((_, pid), _)| {
                alive(*pid) || (reaped && Path::new(&format!("/proc/{pid}")).exists())
            })
            .map(|((r, pid), (tool, _))| format!("{r} ({tool} escape) pid {pid}"))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "survived {after}: {}",
            left.join(", ")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn escapes_end_with_stop_and_with_a_crash(serve_args: &[&str], mechanism: &str) {
    let s = Server::new();
    let mut reap = Reap(Vec::new());
    s.serve(serve_args);
    let runs = start_escapes(&s, "a", &mut reap);
    for (r, pid) in &runs {
        let v = s.run(r);
        assert_eq!(v["hold"]["mechanism"], mechanism, "{v}");
        if mechanism == "cgroup" {
            let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
            let path = v["hold"]["path"].as_str().unwrap();
            assert!(
                path.ends_with(&cg.lines().find(|l| l.starts_with("0::")).unwrap()[3..]),
                "the escaped process is in its run's cgroup: {cg} vs {path}"
            );
        }
        let out = s.home.run(&["session", "stop", r]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    all_gone(&runs, "session stop");
    for (r, _) in &runs {
        let v = s.run(r);
        if let Some(path) = v["hold"]["path"].as_str() {
            wait_until(&format!("{r}: its cgroup {path} removed"), || {
                !Path::new(path).exists()
            });
        }
    }
    let show = s.home.ok(&["session", "show", &runs[0].0]);
    assert!(show.contains("held by"), "{show}");

    // The same escapes, then the server is killed: the restart ends them.
    let runs = start_escapes(&s, "b", &mut reap);
    s.kill_server();
    std::thread::sleep(Duration::from_millis(300));
    for (r, pid) in &runs {
        assert!(alive(*pid), "{r}: the escapee outlives the crashed server");
    }
    s.serve(serve_args);
    for (r, _) in &runs {
        let v = s.wait_state(r, "lost");
        assert!(v["exit_code"].is_null(), "nothing fabricated: {v}");
    }
    all_gone(&runs, "the restart sweep");
    let status = s.home.ok(&["server", "status"]);
    assert!(status.contains("runs held"), "{status}");
}

#[test]
fn escapes_end_with_their_run_in_a_cgroup() {
    escapes_end_with_stop_and_with_a_crash(&["--stop-grace-ms", "300"], "cgroup");
}

#[test]
fn escapes_end_with_their_run_under_the_subreaper_fallback() {
    escapes_end_with_stop_and_with_a_crash(
        &["--stop-grace-ms", "300", "--no-cgroups"],
        "subreaper",
    );
}

/// A crash in the start's windows: right after the spawn (`started` never reaches the
/// ledger), and with `started` in the ledger but not in `run.json` (the attack session's
/// finding). The restart finds the run's processes and ends them.
fn a_crash_at(point: &str) {
    let s = Server::new();
    let mut reap = Reap(Vec::new());
    let leader = s.file("leader.pid");
    let escaped = s.file("escaped.pid");
    s.shim(
        "claude",
        &format!(
            "echo $$ > {}; ( setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {}' & ); exec sleep 1000",
            leader.display(),
            escaped.display()
        ),
    );
    s.serve(&[
        "--stop-grace-ms",
        "300",
        &format!("--test-abort-at={point}"),
    ]);
    let server = s.home.server_pid().unwrap();
    {
        use std::io::{Read, Write};
        let body = json!({"tool": "claude", "transport": "pipe", "workspace": s.ws}).to_string();
        let mut c = std::os::unix::net::UnixStream::connect(s.home.socket()).unwrap();
        let _ = write!(
            c,
            "POST {RUNS} HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            s.home.owner_token(),
            body.len()
        );
        let mut sink = Vec::new();
        let _ = c.read_to_end(&mut sink);
    }
    wait_until("the server to abort", || !alive(server));
    let (l, e) = (read_pid(&leader), read_pid(&escaped));
    reap.0.extend([l, e]);
    assert!(
        alive(l) && alive(e),
        "the spawned processes outlive the crash"
    );
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    let record =
        std::fs::read_to_string(s.home.path().join("data/runs/run-0001/run.json")).unwrap();
    assert!(ledger.contains("sessions.run.created") && !record.contains("sessions.run.started"));
    assert_eq!(
        ledger.contains("sessions.run.started"),
        point == "started-in-ledger",
        "the crash came where it was asked"
    );
    s.serve(&["--stop-grace-ms", "300"]);
    let v = s.wait_state("run-0001", "lost");
    assert!(v["exit_code"].is_null(), "{v}");
    assert!(!alive(l), "the leader survived the restart");
    assert!(!alive(e), "the escaped grandchild survived the restart");
}

#[test]
fn a_crash_right_after_the_spawn_leaves_no_process_after_restart() {
    a_crash_at("spawn");
}

#[test]
fn a_crash_with_started_only_in_the_ledger_leaves_no_process_after_restart() {
    a_crash_at("started-in-ledger");
}

/// Many runs that ignore SIGTERM: the restarted server answers at once, shows them
/// `recovering`, and sweeps them all together (every run got its SIGTERM before the first
/// was recorded lost, which a one-after-another sweep cannot do).
#[test]
fn many_term_ignoring_runs_are_swept_in_parallel_after_the_socket_listens() {
    let s = Server::new();
    let mut reap = Reap(Vec::new());
    let n = 8;
    let marks = s.file("marks");
    std::fs::create_dir_all(&marks).unwrap();
    // (stderr to /dev/null: the shell reports its killed `sleep` there, and the pipe to a
    // dead server would end it with SIGPIPE.)
    s.shim(
        "claude",
        &format!(
            "exec 2>/dev/null; f={}/$$; echo $$ > $f.pid; trap 'echo term >> $f.term' TERM; while :; do sleep 0.2; done",
            marks.display()
        ),
    );
    s.serve(&["--stop-grace-ms", "3000"]);
    let refs: Vec<String> = (0..n).map(|_| s.start("claude")).collect();
    let pids: Vec<i32> = refs
        .iter()
        .map(|r| s.run(r)["pid"].as_i64().unwrap() as i32)
        .collect();
    for p in &pids {
        read_pid(&marks.join(format!("{p}.pid")));
    }
    reap.0.extend(&pids);
    s.kill_server();
    // The restart answers while the sweep runs: `serve` returns once the socket listens.
    s.serve(&["--stop-grace-ms", "3000"]);
    let (code, status) = s.call("GET", "/v1/server", None);
    assert_eq!(code, 200, "{status}");
    let (_, list) = s.call("GET", &format!("{RUNS}?state=recovering"), None);
    assert!(
        list["total"].as_u64().unwrap() > 0,
        "runs show recovering during the sweep: {list}"
    );
    // Wait for the first run recorded lost: by then every run had its SIGTERM.
    wait_until("a first run swept", || {
        refs.iter().any(|r| s.run(r)["state"] == "lost")
    });
    let log = std::fs::read_to_string(s.home.path().join("state/server.log")).unwrap();
    let states: Vec<Value> = refs.iter().map(|r| s.run(r)).collect();
    for p in &pids {
        assert!(
            marks.join(format!("{p}.term")).exists() || {
                eprintln!("{log}\n{states:#?}");
                false
            },
            "run pid {p} had no SIGTERM when the first run was recorded lost: the sweep is \
             one run after another"
        );
    }
    // A stop of a recovering run answers once its sweep has ended it.
    let (code, v) = s.call("POST", &format!("{RUNS}/{}/stop", refs[n - 1]), None);
    assert_eq!((code, v["state"].as_str()), (200, Some("lost")), "{v}");
    for (r, p) in refs.iter().zip(&pids) {
        let v = s.wait_state(r, "lost");
        assert!(!alive(*p), "{r} survived");
        let path = v["hold"]["path"].as_str().unwrap();
        wait_until(&format!("{r}: its cgroup {path} removed"), || {
            !Path::new(path).exists()
        });
    }
}

/// A server with one stopped run, killed (so the ledger ends with the run's events).
fn home_with_a_run() -> Server {
    let s = Server::new();
    s.shim("claude", "exec sleep 1000");
    s.serve(&["--stop-grace-ms", "300"]);
    let r = s.start("claude");
    s.home.ok(&["session", "stop", &r]);
    s.kill_server();
    s
}

fn refused(s: &Server, words: &[&str]) {
    let out = s.serve_output(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the server started: {err}");
    for w in words {
        assert!(err.contains(w), "the refusal names {w:?}: {err}");
    }
    // The foreground server says it too.
    let out = s.serve_output(&["--foreground"]);
    let err2 = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err2}");
    for w in words {
        assert!(err2.contains(w), "serve --foreground names {w:?}: {err2}");
    }
}

#[test]
fn a_ledger_that_lost_its_tail_is_refused_at_start() {
    let s = home_with_a_run();
    let ledger = s.home.ledger();
    let text = std::fs::read_to_string(&ledger).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[..lines.len() - 3].join("\n") + "\n";
    std::fs::write(&ledger, kept).unwrap();
    let verify = s.home.run(&["ledger", "verify"]);
    assert!(verify.status.success(), "a cut ledger still verifies alone");
    refused(
        &s,
        &[
            ledger.to_str().unwrap(),
            "lost its tail",
            "run.json",
            "Remedy",
        ],
    );
}

#[test]
fn an_emptied_ledger_is_refused_at_start() {
    let s = home_with_a_run();
    std::fs::write(s.home.ledger(), "").unwrap();
    refused(&s, &[s.home.ledger().to_str().unwrap(), "empty", "Remedy"]);
}

#[test]
fn a_deleted_ledger_is_refused_at_start() {
    let s = home_with_a_run();
    std::fs::remove_file(s.home.ledger()).unwrap();
    refused(
        &s,
        &[s.home.ledger().to_str().unwrap(), "missing", "Remedy"],
    );
    assert!(!s.home.ledger().exists(), "no ledger was started afresh");
}

#[test]
fn a_deleted_run_record_is_rebuilt_from_the_ledger() {
    let s = home_with_a_run();
    let rec = s.home.path().join("data/runs/run-0001/run.json");
    let before: Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    std::fs::remove_file(&rec).unwrap();
    s.serve(&[]);
    let v = s.run("run-0001");
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["tool"], "claude");
    assert_eq!(v["workspace"], before["workspace"]);
    let after: Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    let seqs = |r: &Value| -> Vec<u64> {
        r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        seqs(&after),
        seqs(&before),
        "the same events, from the ledger"
    );
    let log = std::fs::read_to_string(s.home.path().join("state/server.log")).unwrap();
    assert!(log.contains("rebuilt from its"), "{log}");
    // Refs are not reused: the next run is run-0002.
    s.shim("claude", "exec sleep 1000");
    assert_eq!(s.start("claude"), "run-0002");
}

/// A server that holds the home's lock but does not answer yet (it is starting): a client
/// waits for it, says it is starting, and never advises stopping it (nor starts a second).
#[test]
fn a_client_waiting_for_a_starting_server_says_so_and_never_advises_stopping_it() {
    use std::os::unix::fs::DirBuilderExt;
    let home = TestHome::new();
    let run = home.path().join("run");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&run)
        .unwrap();
    // This test stands in for the starting server: it holds the lock, with its own pid.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(run.join("server.lock"))
        .unwrap();
    lock.lock().unwrap();
    std::fs::write(run.join("server.lock"), format!("{}\n", std::process::id())).unwrap();
    let out = home.run(&["session", "list"]);
    // (TestHome's drop kills the pid in the lock file: that is this test's own.)
    std::fs::remove_file(run.join("server.lock")).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("still starting"), "says it is starting: {err}");
    assert!(
        !err.contains("server stop"),
        "never advises stopping a starting server: {err}"
    );
    drop(lock);
}

/// A home with receipts, intents, candidates, evidence and a worktree run (the demo's)
/// restarts cleanly (nothing it names is ahead of its ledger); with the ledger's tail cut
/// back to before the last receipt's event, the start is refused naming a file.
#[test]
fn a_full_home_restarts_and_a_ledger_behind_its_receipts_is_refused() {
    let h = TestHome::new();
    h.json(&["demo", "--no-cockpit", "--json"]);
    h.ok(&["server", "stop"]);
    h.ok(&["serve"]);
    h.ok(&["server", "stop"]);
    let ledger = h.ledger();
    let text = std::fs::read_to_string(&ledger).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let last_receipt = lines
        .iter()
        // The evidence's receipts (the factory's runs, recorded after them in the demo, name a
        // receipt too; their records are not among what the start checks against the ledger).
        .rposition(|l| {
            !l.contains("\"kind\":\"factory.")
                && (l.contains("\"kind\":\"receipts.") || l.contains("receipt"))
        })
        .expect("the demo records receipts");
    std::fs::write(&ledger, lines[..last_receipt].join("\n") + "\n").unwrap();
    let out = h.run(&["serve"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("lost its tail") && err.contains(ledger.to_str().unwrap()),
        "{err}"
    );
    // Without the run records (and the factory's), the receipts and intents alone show it.
    std::fs::rename(h.path().join("data/runs"), h.path().join("runs-aside")).unwrap();
    std::fs::rename(
        h.path().join("data/factory"),
        h.path().join("factory-aside"),
    )
    .unwrap();
    let out = h.run(&["serve"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("lost its tail")
            && (err.contains("data/receipts/") || err.contains("data/intents/")),
        "{err}"
    );
}

/// The demo's factory runs record events in the ledger; a ledger cut back to before the last
/// of them is refused at start, and the file named is a factory run's record (the other
/// files that name seqs are moved aside first, so only the factory's can show it).
#[test]
fn a_ledger_behind_a_factory_run_is_refused() {
    let h = TestHome::new();
    h.json(&["demo", "--no-cockpit", "--json"]);
    h.ok(&["server", "stop"]);
    let ledger = h.ledger();
    let text = std::fs::read_to_string(&ledger).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let last_factory = lines
        .iter()
        .rposition(|l| l.contains("\"kind\":\"factory.run."))
        .expect("the demo's factory runs record events");
    std::fs::write(&ledger, lines[..last_factory].join("\n") + "\n").unwrap();
    for aside in [
        "runs",
        "receipts",
        "intents",
        "candidates",
        "workspaces.json",
    ] {
        let from = h.path().join("data").join(aside);
        if from.exists() {
            std::fs::rename(&from, h.path().join(format!("aside-{aside}"))).unwrap();
        }
    }
    let out = h.run(&["serve"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("lost its tail") && err.contains("data/factory/fac-"),
        "{err}"
    );
}

/// A run cgroup folder left under the home's cgroup that no run accounts for (what a crash
/// leaves when its run was already settled): the next server ends its processes and
/// removes it.
#[test]
fn a_cgroup_left_behind_is_emptied_and_removed_at_start() {
    let s = Server::new();
    let mut reap = Reap(Vec::new());
    s.serve(&["--stop-grace-ms", "300"]);
    let (_, status) = s.call("GET", "/v1/server", None);
    assert_eq!(status["runs_held_by"]["mechanism"], "cgroup", "{status}");
    let base = PathBuf::from(status["runs_held_by"]["cgroup_base"].as_str().unwrap());
    s.home.ok(&["server", "stop"]);
    let left = base.join("run-0099.g1");
    std::fs::create_dir_all(&left).unwrap();
    let mut child = std::process::Command::new("/bin/sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    reap.0.push(pid);
    std::fs::write(left.join("cgroup.procs"), format!("{pid}\n")).unwrap();
    s.serve(&["--stop-grace-ms", "300"]);
    // The sleeper is this test's child: its end is observed here.
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM),
        "{status:?}"
    );
    wait_until("the leftover folder removed", || !left.exists());
    let log = std::fs::read_to_string(s.home.path().join("state/server.log")).unwrap();
    assert!(log.contains("a run cgroup left behind"), "{log}");
}
