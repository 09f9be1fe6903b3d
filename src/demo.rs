//! `proctor demo`: a throwaway home whose server runs the provider fakes, with sessions in
//! every state an operator meets: narrating at a human pace, idle, stopped with its exit
//! code, failed. Every run is labelled demo by the server, because a fake backs it.
//!
//! One more session works in a worktree of a small throwaway git repository (with a bare
//! remote beside it, its `origin`) registered as a workspace with an approved check policy:
//! its agent (a fake) writes a fix, the demo binds the candidate, runs the policy's check, and
//! proposes a publication. So the cockpit's gate view (awaiting a person), its receipts and
//! its intents have something real to show.
//!
//! The demo completes a real publication: its server serves the demo forge ([`forge`], a
//! loopback fake of GitHub's REST API, labelled demo), the forge configuration names it with
//! a demo token in a 0600 file (`token_file`, the real credential mechanism), and the first
//! `P` in the cockpit offers to create a throwaway demo publish key (its passphrase typed
//! twice in the dialog, never a built-in one). Typing the revision and the passphrase then
//! pushes to the bare remote with the lease, opens a pull request on the demo forge, and
//! leaves a signed receipt.

pub use crate::publish::demo_forge as forge;

pub mod rigs;
pub mod tribunal;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hyper::Method;

use crate::api::runs::{self as wire, Accepted, InputRequest, RunView, StartRequest, State};
use crate::api::server::Stopping;
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
    #[error("the demo's git repository: {0}")]
    Git(#[from] crate::git::GitError),
    #[error(transparent)]
    Forge(#[from] forge::DemoForgeError),
    #[error(
        "the demo's server did not start the demo forge ({path} was not written within 30 s); \
         its log says why"
    )]
    NoForge { path: PathBuf },
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
        // One of each thing a conversation shows (reasoning, a plan, tool calls that end and
        // fail, a retried error, file changes), in codex's own shapes.
        script: "!think The failure names an escaped quote: read lex_string first.\n\
                 !plan Read the lexer|Run the failing test|Fix lex_string\n\
                 !tool read src/lexer.rs 0\n\
                 !tool bash cargo test --lib lexer 101\n\
                 !fail Reconnecting... 1/5\n\
                 !say The test fails because lex_string stops at an escaped quote.\n\
                 !tool edit src/lexer.rs 0\n\
                 !tool bash cargo test --lib lexer 0\n\
                 !say A fix: skip the character after a backslash.\n\
                 explain the failing test",
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

/// True in a home `proctor demo` prepared: the cockpit offers a throwaway demo publish key
/// there, and its server serves the demo forge.
pub fn is_demo_home(home: &Home) -> bool {
    forge::is_demo_home(home)
}

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
pub fn prepare(home: &Home, proctor: &Path) -> Result<Vec<RunView>, DemoError> {
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
    // The demo token first: the server serves the demo forge in a home that has one.
    forge::prepare(home)?;
    let client = Client::new(home)?;
    client::block_on(client.ensure_server_env(
        home,
        &["--keep-server-path".to_string()],
        &[("PATH".to_string(), path)],
    ))??;
    let client = client.with_token(home)?;
    let forge_address = wait_for_forge(home)?;
    let mut refs = Vec::new();
    for scene in &SCENES {
        let body = StartRequest {
            tool: Some(scene.tool.to_string()),
            transport: Some(scene.transport.to_string()),
            workspace: Some(workspace.to_string_lossy().into_owned()),
            name: Some(scene.name.to_string()),
            rows: Some(30),
            cols: Some(100),
            prompt: (scene.transport == "pipe").then(|| scene.script.to_string()),
            ..Default::default()
        };
        let run: RunView = client.request_blocking(Method::POST, wire::RUNS, Some(&body))?;
        let r = run.run_ref;
        if scene.transport == "pty" {
            let input = InputRequest {
                text: Some(format!("{}\r", scene.script)),
                ..Default::default()
            };
            let _: Accepted =
                client.request_blocking(Method::POST, &wire::at(wire::INPUT, &r), Some(&input))?;
        }
        refs.push((scene, r));
    }
    // The worktree scene starts now, so that its agent works while the others settle.
    let repo = demo_repository(home, &forge_address)?;
    let worktree_run = start_worktree_scene(&client, &repo)?;
    let mut out = Vec::new();
    for (scene, r) in refs {
        let path = wire::at(wire::RUN, &r);
        let started = Instant::now();
        loop {
            let run: RunView = client.get_blocking(&path)?;
            let state = run.state.as_str().to_string();
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
    out.push(finish_worktree_scene(&client, home, &worktree_run)?);
    factory_scene(&client, &repo)?;
    Ok(out)
}

/// Two agent-factory runs on linked worktrees of the demo repository, with the stand-ins
/// (labelled demo): one that went through a REQUEST_CHANGES, its one repair and a fresh
/// approval, and one whose worker is still at work while the cockpit is open.
fn factory_scene(client: &Client, repo: &Path) -> Result<(), DemoError> {
    use crate::api::factory::{self as fapi, FactoryRun, RunStatus, StartRequest};
    let scripts = [
        (
            "Make the lexer skip the character after a backslash.\n\
             !worker write src/lexer.txt lex_string: skip the character after a backslash\n\
             !review 1 REQUEST_CHANGES the escaped-quote case has no test\n\
             !repair write tests/escapes.txt an escaped quote does not end a string",
            120,
            true,
        ),
        (
            "Document the lexer's escapes in the README.\n!worker sleep 3600000",
            7200,
            false,
        ),
    ];
    for (i, (task, timeout, wait)) in scripts.into_iter().enumerate() {
        let wt = repo.with_file_name(format!("lexer-factory-{}", i + 1));
        crate::git::Git::new(repo).run(&[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("factory/demo-{}", i + 1),
            &wt.to_string_lossy(),
        ])?;
        let body = StartRequest {
            workspace: wt.to_string_lossy().into_owned(),
            task: task.to_string(),
            worker: None,
            reviewer: None,
            worker_model: None,
            reviewer_model: None,
            timeout_secs: Some(timeout),
            out: None,
            otel: None,
            rig: None,
        };
        let run: FactoryRun = client.request_blocking(Method::POST, fapi::RUNS, Some(&body))?;
        let started = Instant::now();
        if !wait {
            continue;
        }
        loop {
            let r: FactoryRun = client.get_blocking(&fapi::path(fapi::RUN, &run.id))?;
            if r.status != RunStatus::Running {
                break;
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(DemoError::Stuck {
                    name: "the factory run",
                    want: "finished",
                    got: r.phase.as_str().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// The worktree scene's name.
pub const WORKTREE_SCENE: &str = "lexer escapes (worktree)";

/// The demo repository's check policy: one trivial, real check.
pub const DEMO_POLICY: &str = "[[check]]\nname = \"escapes\"\nargv = [\"grep\", \"-q\", \"skip the character after a backslash\", \"src/lexer.txt\"]\ndeadline_secs = 10\n";

/// The demo forge's address, once the demo's server wrote it.
fn wait_for_forge(home: &Home) -> Result<String, DemoError> {
    let path = forge::address_path(home);
    let started = Instant::now();
    loop {
        if let Ok(a) = std::fs::read_to_string(&path)
            && a.ends_with('\n')
        {
            return Ok(a.trim().to_string());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(DemoError::NoForge { path });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A small git repository (one commit, a bare remote beside it as `origin`) under the
/// demo's state folder, and the demo's forge configuration (the demo forge at `forge_address`).
fn demo_repository(home: &Home, forge_address: &str) -> Result<PathBuf, DemoError> {
    let root = home.state.join("demo-git");
    files::ensure_private_dir(&root)?;
    let repo = root.join("lexer");
    let remote = root.join("lexer-remote.git");
    files::ensure_private_dir(&repo)?;
    files::ensure_private_dir(&remote)?;
    crate::git::Git::new(&remote).run(&["init", "-q", "--bare"])?;
    let git = crate::git::Git::new(&repo);
    git.run(&["init", "-q", "-b", "main"])?;
    git.run(&["config", "user.name", "Demo Operator"])?;
    git.run(&["config", "user.email", "operator@demo.invalid"])?;
    files::ensure_private_dir(&repo.join("src"))?;
    files::write_atomic(
        &repo.join("src/lexer.txt"),
        b"lex_string: stops at the first quote, escaped or not\n",
    )?;
    files::write_atomic(
        &repo.join("README.md"),
        b"# lexer\n\nA throwaway repository made by `proctor demo`.\n",
    )?;
    files::write_atomic(&repo.join(".gitignore"), b"target/\n")?;
    git.run(&["add", "-A"])?;
    git.run(&["commit", "-q", "-m", "lexer: the first version"])?;
    let url = remote.to_string_lossy().into_owned();
    git.run(&["remote", "add", "origin", &url])?;
    git.run(&["push", "-q", "origin", "main"])?;
    // The forge of the demo's intent: the demo forge, served by the demo's server.
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    let forge = format!(
        "# proctor demo: the {name}, a fake of GitHub's REST API\n\
         # served by the demo's server on 127.0.0.1. Nothing leaves this machine. Its token\n\
         # is a demo token in a 0600 file, read as a real token_file is.\n\
         api_base = {api}\nrepo = \"{owner}/{repo}\"\nbase = \"main\"\ntoken_file = {token}\n",
        name = forge::NAME,
        api = quote(&forge::api_base(forge_address)),
        owner = forge::OWNER,
        repo = forge::REPO,
        token = quote(&forge::token_path(home).to_string_lossy()),
    );
    files::ensure_private_dir(&home.config)?;
    files::write_atomic(&crate::publish::forge::config_path(home), forge.as_bytes())?;
    Ok(std::fs::canonicalize(&repo).map_err(|e| files::FilesError::io("resolve", &repo, e))?)
}

/// Registers the repository with an approved policy and starts a worktree run whose agent
/// writes the fix. Returns the run's ref.
fn start_worktree_scene(client: &Client, repo: &Path) -> Result<String, DemoError> {
    use crate::api::workspaces::{self as wsapi, AddRequest, ApproveRequest, PolicyRequest};
    let added: wsapi::WorkspaceView = client.request_blocking(
        Method::POST,
        wsapi::LIST,
        Some(&AddRequest {
            path: repo.to_string_lossy().into_owned(),
        }),
    )?;
    let ws = added.ws_ref;
    let _: wsapi::PolicyView = client.request_blocking(
        Method::PUT,
        &wsapi::path(wsapi::POLICY, &ws),
        Some(&PolicyRequest {
            policy: DEMO_POLICY.to_string(),
        }),
    )?;
    let _: wsapi::PolicyView = client.request_blocking(
        Method::POST,
        &wsapi::path(wsapi::POLICY_APPROVE, &ws),
        Some(&ApproveRequest {
            sha256: crate::evidence::policy::digest(DEMO_POLICY),
        }),
    )?;
    let script = "!say Reading src/lexer.txt\n\
                  !write src/lexer.txt lex_string: skip the character after a backslash, then stop at the closing quote\n\
                  !say Fixed: an escaped quote no longer ends the string\n\
                  fix the lexer's escaped quotes";
    let body = StartRequest {
        tool: Some("codex".into()),
        transport: Some("pipe".into()),
        workspace: Some(ws),
        worktree: Some(true),
        name: Some(WORKTREE_SCENE.into()),
        prompt: Some(script.into()),
        ..Default::default()
    };
    let run: RunView = client.request_blocking(Method::POST, wire::RUNS, Some(&body))?;
    Ok(run.run_ref)
}

/// Once the agent's turn is over: binds the candidate, runs the policy's check, proposes the
/// publication, and writes the tribunal's round in progress on the candidate. Returns the
/// run as the server shows it.
fn finish_worktree_scene(client: &Client, home: &Home, run: &str) -> Result<RunView, DemoError> {
    let path = wire::at(wire::RUN, run);
    let started = Instant::now();
    loop {
        let v: RunView = client.get_blocking(&path)?;
        if v.state == State::Idle {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(DemoError::Stuck {
                name: WORKTREE_SCENE,
                want: "idle",
                got: v.state.as_str().to_string(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    use crate::api::evidence::{self as evapi, BindRequest};
    let cand: evapi::CandidateView = client.request_blocking(
        Method::POST,
        evapi::CANDIDATES,
        Some(&BindRequest {
            run: run.to_string(),
        }),
    )?;
    let _: evapi::EvidenceEntry = client.request_blocking::<(), _>(
        Method::POST,
        &evapi::path(evapi::CHECKS, &cand.candidate.id),
        None,
    )?;
    let _: crate::api::publish::IntentView = client.request_blocking(
        Method::POST,
        &crate::api::publish::intents(),
        Some(&crate::api::publish::ProposeRequest {
            run: run.to_string(),
            remote: "origin".into(),
            branch: "fix/lexer-escapes".into(),
            title: "lexer: skip the character after a backslash".into(),
            body: "An escaped quote no longer ends a string.\n\nProposed by `proctor demo`.".into(),
        }),
    )?;
    convene_demo_round(home, &cand.candidate.id)?;
    Ok(client.get_blocking(&path)?)
}

/// The tribunal's round on the demo candidate, convened for real on the server's fake fleet
/// (labelled demo): the request is sent from a thread that is not waited for (two seats ask a
/// slow juror for an hour, so the round stays in progress while the cockpit is open; the
/// server goes on with the round whatever becomes of the request). Returns once the round is
/// recorded with every other seat decided (or, on a loaded machine, after two minutes).
fn convene_demo_round(home: &Home, cand: &str) -> Result<(), DemoError> {
    use crate::api::tribunal as tapi;
    let body = tapi::ConveneRequest {
        candidate: cand.to_string(),
        builder: "claude-sonnet-4-5".into(),
        intent: "an escaped quote no longer ends a string".into(),
        criteria: "- a backslash escapes the next character inside a string\n\
                   - the lexer's existing cases still pass\n"
            .into(),
        out: None,
        solo: None,
    };
    let sender = Client::new(home)?.with_token(home)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let answer = sender.request_blocking::<_, crate::tribunal::Round>(
            Method::POST,
            tapi::ROUNDS,
            Some(&body),
        );
        let _ = tx.send(answer);
    });
    let client = Client::new(home)?.with_token(home)?;
    let started = Instant::now();
    loop {
        if let Ok(Err(e)) = rx.try_recv() {
            return Err(e.into());
        }
        let list: tapi::RoundList = client.get_blocking(&tapi::rounds(Some(cand), None))?;
        let pending = list.items.first().map(|r| {
            r.seats
                .iter()
                .filter(|s| s.state == crate::tribunal::SeatState::Pending)
                .count()
        });
        match list.items.first() {
            Some(r) if r.state != crate::tribunal::RoundState::InProgress => {
                return Err(DemoError::Stuck {
                    name: "the tribunal's round",
                    want: "in_progress",
                    got: format!("{} ({})", r.state.as_str(), r.causes.join("; ")),
                });
            }
            Some(_) if pending == Some(2) => return Ok(()),
            _ => {}
        }
        // A loaded machine seats slowly: after two minutes the cockpit opens anyway, with the
        // round in progress (the server goes on with it).
        if started.elapsed() > Duration::from_secs(120) && pending.is_some() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err(DemoError::Stuck {
                name: "the tribunal's round",
                want: "recorded",
                got: "no round".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the demo's server (its sessions end with it) and removes the throwaway folder.
pub fn discard(home: &Home, root: &Path) -> Result<(), DemoError> {
    let client = Client::new(home)?.with_token(home)?;
    let _ = client.request_blocking::<(), Stopping>(
        Method::POST,
        crate::api::server::SERVER_STOP,
        None,
    );
    let started = Instant::now();
    while crate::server::server_lock_held(home) && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(root).map_err(|e| files::FilesError::io("remove", root, e))?;
    Ok(())
}
