//! `proctor demo`: a throwaway home whose server runs the provider fakes, with sessions in
//! every state an operator meets: narrating at a human pace, idle, stopped with its exit
//! code, failed. Every run is labelled demo by the server, because a fake backs it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};

use crate::client::{self, Client, ClientError};
use crate::files;
use crate::home::Home;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error("cannot install the demo shims in {path}: {err}")]
    Shims { path: PathBuf, err: std::io::Error },
    #[error(
        "{path} already holds proctor state; `proctor demo` needs an empty or new folder. \
         Remedy: omit --home (a throwaway folder is made), or pick an empty one"
    )]
    NotEmpty { path: PathBuf },
    #[error("the demo session {name:?} did not reach {want} within 30 s (it is {got})")]
    Stuck {
        name: &'static str,
        want: &'static str,
        got: String,
    },
}

/// One demo session: how it is started and what it is meant to show.
struct Scene {
    name: &'static str,
    tool: &'static str,
    transport: &'static str,
    /// The first turn (pipe), or the line typed into the terminal (PTY).
    script: &'static str,
    /// The state to wait for before the cockpit opens (None: do not wait).
    settle: Option<&'static str>,
}

const SCENES: [Scene; 5] = [
    Scene {
        name: "parser fix (narrated)",
        tool: "claude",
        transport: "pty",
        script: "!narrate 100",
        settle: None,
    },
    Scene {
        name: "lexer refactor (narrated)",
        tool: "gemini",
        transport: "pty",
        script: "!narrate 100",
        settle: None,
    },
    Scene {
        name: "explain the failing test",
        tool: "codex",
        transport: "pipe",
        script: "!say The test fails because lex_string stops at an escaped quote.\n!say A fix: skip the character after a backslash.\nexplain the failing test",
        settle: Some("idle"),
    },
    Scene {
        name: "release notes",
        tool: "opencode",
        transport: "pipe",
        script: "!say Writing CHANGELOG.md\n!say Done: 3 entries under 0.2.0\n!exit 0",
        settle: Some("stopped"),
    },
    Scene {
        name: "flaky network test",
        tool: "grok",
        transport: "pipe",
        script: "!say Running the integration suite\n!sleep 300\n!say error: connection refused (127.0.0.1:5432)\n!exit 3",
        settle: Some("failed"),
    },
];

/// A fresh, private folder for a throwaway home: `/tmp/proctor-demo-<random>` (short, so
/// the server's socket path fits).
pub fn throwaway_root() -> Result<PathBuf, DemoError> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| DemoError::Shims {
        path: PathBuf::from("/tmp"),
        err: std::io::Error::other(e.to_string()),
    })?;
    let path = std::env::temp_dir().join(format!("proctor-demo-{}", hex::encode(bytes)));
    files::ensure_private_dir(&path)?;
    Ok(path)
}

/// Starts the demo: shims, server, sessions. Returns the runs as the server shows them.
pub fn prepare(home: &Home, proctor: &Path) -> Result<Vec<Value>, DemoError> {
    if home.ledger_path().exists() {
        return Err(DemoError::NotEmpty {
            path: home.root.clone().unwrap_or_else(|| home.data.clone()),
        });
    }
    home.ensure().map_err(|e| ClientError::Server(e.into()))?;
    let shims = home.state.join("demo-shims");
    crate::providers::fake::install_shims(&shims, proctor).map_err(|err| DemoError::Shims {
        path: shims.clone(),
        err,
    })?;
    let mut path = OsString::from(shims.as_os_str());
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let workspace = home.state.join("demo-workspace");
    files::ensure_private_dir(&workspace)?;
    let client = Client::new(home)?;
    client::block_on(client.ensure_server_env(home, &[], &[("PATH".to_string(), path)]))??;
    let client = client.with_token(home)?;
    let mut refs = Vec::new();
    for scene in &SCENES {
        let mut body = json!({
            "tool": scene.tool,
            "transport": scene.transport,
            "workspace": workspace,
            "name": scene.name,
            "rows": 30,
            "cols": 100,
        });
        if scene.transport == "pipe" {
            body["prompt"] = json!(scene.script);
        }
        let run = client::block_on(client.call(Method::POST, "/v1/m/sessions/runs", Some(body)))??;
        let r = run["ref"].as_str().unwrap_or_default().to_string();
        if scene.transport == "pty" {
            let input = json!({"text": format!("{}\r", scene.script)});
            let path = format!("/v1/m/sessions/runs/{r}/input");
            client::block_on(client.call(Method::POST, &path, Some(input)))??;
        }
        refs.push((scene, r));
    }
    let mut out = Vec::new();
    for (scene, r) in refs {
        let path = format!("/v1/m/sessions/runs/{r}");
        let started = Instant::now();
        loop {
            let run = client::block_on(client.call(Method::GET, &path, None))??;
            let state = run["state"].as_str().unwrap_or("").to_string();
            if scene.settle.is_none_or(|want| want == state) {
                out.push(run);
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(DemoError::Stuck {
                    name: scene.name,
                    want: scene.settle.unwrap_or("?"),
                    got: state,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(out)
}

/// Stops the demo's server (its sessions end with it) and removes the throwaway folder.
pub fn discard(home: &Home, root: &Path) -> Result<(), DemoError> {
    let client = Client::new(home)?.with_token(home)?;
    let _ = client::block_on(client.call(Method::POST, "/v1/server/stop", None));
    let started = Instant::now();
    while crate::server::server_lock_held(home) && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(root).map_err(|e| files::FilesError::io("remove", root, e))?;
    Ok(())
}
