//! A start request carries the client's PATH: the server resolves the tool against it, the
//! child runs with it, the run records it, and a resume uses the recorded one. Real server,
//! real binary, the provider fakes installed into a folder *after* the server started.

mod common;

use std::path::Path;

use common::{DemoServer, TestHome, call_as};
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A server started with the system PATH only: no provider tool is on it.
fn bare_server(extra_args: &[&str]) -> TestHome {
    let home = TestHome::new();
    let mut args = vec!["serve"];
    args.extend_from_slice(extra_args);
    let out = home
        .cmd()
        .args(&args)
        .env("PATH", SYSTEM_PATH)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home
}

fn workspace(home: &TestHome) -> String {
    let w = home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

/// Installs the fakes (as `claude`, `codex`, …) into a new folder of the home, now.
fn install_later(home: &TestHome, name: &str) -> String {
    let dir = home.path().join(name);
    proctor::providers::fake::install_shims(&dir, Path::new(env!("CARGO_BIN_EXE_proctor")))
        .unwrap();
    dir.to_str().unwrap().to_string()
}

fn call(home: &TestHome, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    call_as(
        &home.socket(),
        Some(&home.owner_token()),
        method,
        path,
        body,
    )
}

fn started_events(home: &TestHome, run: &str) -> Vec<Value> {
    let (code, v) = call(home, "GET", &format!("{RUNS}/{run}/events"), None);
    assert_eq!(code, 200, "{v}");
    v["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {v}"))
        .iter()
        .filter(|e| e["kind"] == "sessions.run.started")
        .map(|e| e["fields"].clone())
        .collect()
}

fn wait_state(home: &TestHome, run: &str, want: &[&str]) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, v) = call(home, "GET", &format!("{RUNS}/{run}"), None);
        assert_eq!(code, 200, "{v}");
        if want.contains(&v["state"].as_str().unwrap_or("")) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{run} never reached {want:?}: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_tool_installed_after_the_server_started_is_found_on_the_clients_path() {
    let home = bare_server(&[]);
    let ws = workspace(&home);
    // Installed after `serve`: the server's own PATH does not have it.
    let bin = install_later(&home, "later-bin");
    let client_path = format!("{bin}:{SYSTEM_PATH}");

    // Through the CLI, as an operator would after installing the tool: its PATH is sent.
    let out = home
        .cmd()
        .args([
            "session",
            "start",
            "--tool",
            "claude",
            "--transport",
            "pipe",
            "--workspace",
            &ws,
            "--json",
            "--",
            "!env PATH",
        ])
        .env("PATH", &client_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the CLI's PATH has the tool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["demo"], true, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    wait_state(&home, &run, &["idle"]);

    // The child ran with that PATH (the fake reports its own environment)…
    let out = home.cmd().args(["session", "tail", &run]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!("env PATH={client_path}")),
        "the child's PATH is the client's: {text}"
    );
    // …and the run's `started` event records it, with where it came from.
    let started = started_events(&home, &run);
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["path"], client_path.as_str(), "{started:?}");
    assert_eq!(started[0]["path_from"], "client", "{started:?}");
    assert_eq!(
        started[0]["program"],
        format!("{bin}/claude").as_str(),
        "{started:?}"
    );

    // Resume uses the PATH recorded for the run, not the resuming client's.
    let (code, v) = call(&home, "POST", &format!("{RUNS}/{run}/stop"), None);
    assert_eq!(code, 200, "{v}");
    let out = home
        .cmd()
        .args(["session", "resume", &run, "--json"])
        .env("PATH", SYSTEM_PATH)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "resume runs the run's own tool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = started_events(&home, &run);
    assert_eq!(started.len(), 2, "{started:?}");
    assert_eq!(started[1]["path"], client_path.as_str(), "{started:?}");
    assert_eq!(started[1]["path_from"], "run", "{started:?}");
    let (code, v) = call(&home, "POST", &format!("{RUNS}/{run}/stop"), None);
    assert_eq!(code, 200, "{v}");

    // A request without a PATH still uses the server's, where the tool is not.
    let (code, v) = call(
        &home,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws})),
    );
    assert_eq!(code, 422, "{v}");
}

#[test]
fn a_missing_tools_error_names_the_path_it_searched() {
    let home = bare_server(&[]);
    let ws = workspace(&home);
    let searched = "/nonexistent/tools-a:/nonexistent/tools-b";
    let (code, v) = call(
        &home,
        "POST",
        RUNS,
        Some(json!({"tool": "codex", "transport": "pipe", "workspace": ws, "path": searched})),
    );
    assert_eq!(code, 422, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("codex is not installed"), "{msg}");
    assert!(msg.contains(searched), "names the PATH searched: {msg}");
    assert!(msg.contains("client"), "says whose PATH it was: {msg}");

    // Without a PATH in the request: the server's own, named as such.
    let (code, v) = call(
        &home,
        "POST",
        RUNS,
        Some(json!({"tool": "codex", "transport": "pipe", "workspace": ws})),
    );
    assert_eq!(code, 422, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(SYSTEM_PATH), "{msg}");
    assert!(msg.contains("server"), "{msg}");

    // Through the CLI: its error shows the same, sanitised (an escape in PATH is not
    // passed to the terminal).
    let out = home
        .cmd()
        .args(["session", "start", "--tool", "gemini", "--workspace", &ws])
        .env("PATH", "/nonexistent/\x1b[31mred:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gemini is not installed"), "{err}");
    assert!(err.contains("/nonexistent/"), "{err}");
    assert!(!err.contains('\x1b'), "sanitised: {err:?}");
}

#[test]
fn an_oversized_or_malformed_path_is_refused_422() {
    let home = bare_server(&[]);
    let ws = workspace(&home);
    let bin = install_later(&home, "bin");
    let refused = |path: String, needle: &str| {
        let (code, v) = call(
            &home,
            "POST",
            RUNS,
            Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws, "path": path})),
        );
        assert_eq!(code, 422, "{v}");
        let msg = v["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("path"), "{msg}");
        assert!(msg.contains(needle), "{needle:?} in {msg}");
    };
    // Too many bytes (the tool is on it: the size alone refuses it).
    refused(format!("{bin}:/{}", "x".repeat(40_000)), "16384");
    // Too many entries.
    let many: Vec<String> = (0..400).map(|i| format!("/p{i}")).collect();
    refused(format!("{bin}:{}", many.join(":")), "256");
    // A NUL byte cannot be in an environment variable.
    refused(format!("{bin}:/a\0b"), "NUL");
    // Nothing was created by a refusal.
    let (code, v) = call(&home, "GET", RUNS, None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["total"], 0, "{v}");
    // Within the bounds, the same folder works.
    let (code, v) = call(
        &home,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws, "path": bin})),
    );
    assert_eq!(code, 201, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    call(&home, "POST", &format!("{RUNS}/{run}/stop"), None);
}

#[test]
fn a_server_that_keeps_its_own_path_ignores_the_requests() {
    // `proctor demo` starts its server so: every client of a demo home gets the fakes.
    let s = DemoServer::start(&["--keep-server-path"]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        RUNS,
        Some(
            json!({"tool": "codex", "transport": "pipe", "workspace": ws, "path": "/nonexistent"}),
        ),
    );
    assert_eq!(v["demo"], true, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    let started = started_events(&s.home, &run);
    assert_eq!(started[0]["path_from"], "server", "{started:?}");
    assert!(
        started[0]["path"]
            .as_str()
            .unwrap()
            .starts_with(s.shims.to_str().unwrap()),
        "{started:?}"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
