//! The contract against the real provider CLIs, when they are installed. Each launch gets a
//! fresh HOME and account home, and no model turn is ever sent: only the protocol handshake,
//! then stop. A tool that is not on PATH (or is a proctor demo shim) is skipped, by name.

mod common;
use common::DemoServer;
use serde_json::json;

/// The real executable of `tool` on this machine's PATH, if there is one.
fn real_tool(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .filter(|p| {
            let head = std::fs::read(p).unwrap_or_default();
            !String::from_utf8_lossy(&head[..head.len().min(4096)]).contains("proctor demo shim")
        })
}

#[test]
fn real_tools_handshake_and_stop_without_a_model_turn() {
    let tools = ["claude", "codex", "gemini", "grok", "opencode"];
    let present: Vec<(&str, std::path::PathBuf)> = tools
        .iter()
        .filter_map(|t| real_tool(t).map(|p| (*t, p)))
        .collect();
    // CI installs the real CLIs and names them here: each must then be found (nothing is
    // silently skipped in CI).
    let required = std::env::var("PROCTOR_REAL_TOOLS").unwrap_or_default();
    for t in tools {
        if !present.iter().any(|(p, _)| *p == t) {
            assert!(
                !required.split(',').any(|r| r == t),
                "{t} is required (PROCTOR_REAL_TOOLS={required}) but not on PATH"
            );
            eprintln!("real-tool battery: {t} is not on PATH here; skipped");
        }
    }
    for (t, p) in &present {
        let v = std::process::Command::new(p).arg("--version").output();
        let v = v.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        eprintln!(
            "real-tool battery: {t} at {}: {}",
            p.display(),
            v.unwrap_or_default()
        );
    }
    if present.is_empty() {
        return;
    }
    // A server whose PATH holds the real tools and whose HOME is a fresh folder.
    let s = DemoServer::start_with_env(&[("HOME", "fresh-home")]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for (tool, program) in present {
        let v = s.expect(
            201,
            "POST",
            "/v1/m/sessions/runs",
            Some(json!({"transport": "pipe", "tool": tool, "workspace": ws})),
        );
        assert_eq!(v["demo"], false, "{tool} at {}", program.display());
        let run = v["ref"].as_str().unwrap().to_string();
        if tool != "claude" {
            // codex app-server and the ACP agents report their conversation id during the
            // handshake (thread/start, session/new), before any turn; a tool that refuses
            // its handshake without a login says so, and the run is `blocked`, never
            // `running` or `idle`.
            let v = s.wait_run(&run, "the handshake", |v| {
                v["conversation_id"].is_string()
                    || v["state"] == "failed"
                    || v["state"] == "blocked"
            });
            eprintln!(
                "real-tool battery: {tool} after its handshake: state {}, conversation {}, reason {}",
                v["state"], v["conversation_id"], v["reason"]
            );
            if v["state"] == "blocked" {
                let why = v["reason"].as_str().unwrap_or("");
                assert!(
                    why.contains("refused") && why.contains("Remedy"),
                    "{tool}: {v}"
                );
            }
        }
        let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
        assert_eq!(v["state"], "stopped", "{tool}: {v}");
        assert!(
            v["exit_code"].is_number() || v["signal"].is_string(),
            "{tool}: the exit is observed: {v}"
        );
    }
}

/// claude's PTY form, started by the server with its own hooks (`--settings` JSON naming
/// `proctor session hook`, issue 13 §5): the real claude accepts them and draws its first
/// screen (a `--settings` it could not read would be refused with "Settings file not found"
/// or "Invalid settings"). No login, so no hook fires here; the route and the verb are tested
/// with the fake (tests/hook_waiting.rs). Part D's one function in this battery.
#[test]
fn real_claude_accepts_its_hooks_on_the_pty_form() {
    let Some(program) = real_tool("claude") else {
        let required = std::env::var("PROCTOR_REAL_TOOLS").unwrap_or_default();
        assert!(
            !required.split(',').any(|r| r == "claude"),
            "claude is required (PROCTOR_REAL_TOOLS={required}) but not on PATH"
        );
        eprintln!("real-tool battery: claude is not on PATH here; its PTY hooks are not checked");
        return;
    };
    let s = DemoServer::start_with_env(&[("HOME", "fresh-home")]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(
            json!({"transport": "pty", "tool": "claude", "workspace": ws, "rows": 30, "cols": 100}),
        ),
    );
    assert_eq!(v["demo"], false, "claude at {}", program.display());
    assert_eq!(v["waiting_known"], true, "{v}");
    let run = v["ref"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let screen = loop {
        let sc = s.expect(200, "GET", &s.run_path(&run, "/screen"), None);
        let text = sc["text"].as_str().unwrap_or("").to_string();
        if text.contains("Claude Code") || text.contains("Settings") {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "claude drew nothing: {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    eprintln!("real-tool battery: claude's PTY form with its hooks drew:\n{screen}");
    assert!(
        !screen.contains("Settings file not found") && !screen.contains("Invalid settings"),
        "{screen}"
    );
    assert!(screen.contains("Claude Code"), "{screen}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
