//! `proctor serve` and `proctor server status|stop`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use hyper::Method;

use super::{Ctx, print_json, show_path};
use crate::api::server::{self as wire, ContainmentView, ServerStatus, Stopping};
use crate::client::{self, Client};
use crate::server;

/// Run the server for this home: it owns every agent session, the ledger and the tokens.
///
/// Without --foreground the server starts detached: in its own session (no controlling
/// terminal, so it survives this terminal and the SSH connection that started it), with its
/// output in the home's state/server.log. The command returns once the server answers on its
/// socket. If a server already runs for this home, it says so and exits 0.
///
/// With --foreground the server runs in this process until SIGTERM, Ctrl-C or
/// `proctor server stop`; a second server for the same home is refused (exit 1).
///
/// Every other client command starts the server the same way when it is absent.
/// On systemd machines with `KillUserProcesses=yes`, run `loginctl enable-linger $USER` so
/// that logind does not end the server when your last session closes.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Run in this process instead of detaching.
    #[arg(long)]
    pub foreground: bool,

    /// How long `stop` waits after SIGTERM before it sends SIGKILL to a run's process group.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub stop_grace_ms: u64,

    /// The output ring of each run, in KiB: what attach can replay before it reports lag.
    #[arg(long, value_name = "KIB", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(64..=1048576))]
    pub ring_kib: u64,

    /// The cap of each run's raw transcript on disk, in MiB. A PTY run's screen takes the
    /// output its ring has evicted from the transcript; past the cap the run's reader keeps
    /// the screen up itself, at the emulator's speed (docs/runs.md, "Threads").
    #[arg(long, value_name = "MIB", default_value_t = crate::runs::transcript::DEFAULT_TRANSCRIPT_CAP >> 20, value_parser = clap::value_parser!(u64).range(1..=1048576))]
    pub transcript_mib: u64,

    /// Tests only: hold runs by the subreaper fallback even where a cgroup is writable.
    #[arg(long, hide = true)]
    pub no_cgroups: bool,

    /// Tests only: abort during a run's start, `spawn` (right after the spawn, before the
    /// start is recorded) or `started-in-ledger` (before run.json has it): the crash
    /// windows a restart must clean up.
    #[arg(long, hide = true, value_name = "POINT", value_parser = ["spawn", "started-in-ledger"])]
    pub test_abort_at: Option<String>,

    /// A connection must send a complete request head within this many ms of being
    /// accepted or of its previous response ending; slow-header and idle keep-alive
    /// connections are closed then. A streamed response (attach) is never cut by it.
    #[arg(long, value_name = "MS", default_value_t = 15000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub head_timeout_ms: u64,

    /// The most connections one peer process may hold open at once.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_connections_per_process: u64,

    /// The most connections the server holds open at once; the processes of its runs
    /// (agents) share at most half of them.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(2..=65536))]
    pub max_connections: u64,
    /// The first wait, in ms, before the passphrase prompt of a publish key after three wrong
    /// passphrases in a row; each further wrong one doubles it, up to 60 times this value.
    /// The default (1000: 1 s, capped at a minute) is the production setting; the value is
    /// recorded in the ledger's `server.started` event. A smaller one is for tests.
    #[arg(long, value_name = "MS", default_value_t = crate::authority::passphrase::DEFAULT_BASE_MS, value_parser = clap::value_parser!(u64).range(1..=600000))]
    pub passphrase_backoff_ms: u64,

    /// Resolve the tools on this server's own PATH and run them with it, ignoring the PATH
    /// a start request carries (by default the client's PATH is used: the CLI and the
    /// cockpit send theirs). `proctor demo` starts its server so, so that every client of a
    /// demo home gets the fakes.
    #[arg(long)]
    pub keep_server_path: bool,

    /// How long `POST /runs/{ref}/handoff` waits, in ms, for the new session's tool to
    /// confirm its first turn (a turn it reports, or the turn in its own record) before it
    /// answers `summary_state: unknown`.
    #[arg(long, value_name = "MS", default_value_t = crate::sessions::manager::HANDOFF_DELIVERY_WAIT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub handoff_delivery_wait_ms: u64,
}

impl ServeArgs {
    fn settings(&self) -> crate::sessions::manager::Settings {
        crate::sessions::manager::Settings {
            stop_grace: Duration::from_millis(self.stop_grace_ms),
            ring_bytes: (self.ring_kib as usize) * 1024,
            transcript_cap: self.transcript_mib << 20,
            cgroups: !self.no_cgroups,
            keep_server_path: self.keep_server_path,
            handoff_delivery_wait: Duration::from_millis(self.handoff_delivery_wait_ms),
            abort_at: match self.test_abort_at.as_deref() {
                Some("spawn") => Some(crate::sessions::manager::AbortAt::Spawn),
                Some(_) => Some(crate::sessions::manager::AbortAt::StartedInLedger),
                None => None,
            },
        }
    }

    fn limits(&self) -> server::Limits {
        server::Limits {
            head_timeout: Duration::from_millis(self.head_timeout_ms),
            per_process: self.max_connections_per_process as usize,
            total: self.max_connections as usize,
        }
    }

    fn authority(&self) -> server::AuthoritySettings {
        server::AuthoritySettings {
            passphrase_backoff_ms: self.passphrase_backoff_ms,
        }
    }

    fn passthrough(&self) -> Vec<String> {
        let mut v = vec![
            format!("--stop-grace-ms={}", self.stop_grace_ms),
            format!("--ring-kib={}", self.ring_kib),
            format!("--transcript-mib={}", self.transcript_mib),
            format!("--head-timeout-ms={}", self.head_timeout_ms),
            format!(
                "--max-connections-per-process={}",
                self.max_connections_per_process
            ),
            format!("--max-connections={}", self.max_connections),
            format!("--passphrase-backoff-ms={}", self.passphrase_backoff_ms),
            format!(
                "--handoff-delivery-wait-ms={}",
                self.handoff_delivery_wait_ms
            ),
        ];
        if self.no_cgroups {
            v.push("--no-cgroups".into());
        }
        if self.keep_server_path {
            v.push("--keep-server-path".into());
        }
        if let Some(p) = &self.test_abort_at {
            v.push(format!("--test-abort-at={p}"));
        }
        v
    }
}

/// Inspect or stop the server for this home.
#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(subcommand)]
    pub command: ServerCommand,
}

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Print the running server's pid, version, socket and home (exit 1 if none runs).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the server (it records the stop in the ledger), and wait until it is gone.
    /// Exits 0 when no server was running.
    Stop,
}

pub fn serve(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    if args.foreground {
        server::run_foreground(home, args.settings(), args.limits(), args.authority())?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = Client::new(&home)?;
    let (probe, started) =
        client::block_on(client.ensure_server_with(&home, &args.passthrough()))??;
    let pid = server::read_lock_pid(&home.server_lock_path())
        .map(|p| p.to_string())
        .unwrap_or_else(|| "?".into());
    if started {
        println!(
            "server {} started (pid {pid}), socket {}",
            probe.version,
            show_path(&client.socket)
        );
    } else {
        println!(
            "a server {} already runs for this home (pid {pid}), socket {}",
            probe.version,
            show_path(&client.socket)
        );
    }
    if probe.recovering > 0 {
        println!(
            "it is sweeping {} run(s) a previous server left (they show `recovering` until \
             then); it answers meanwhile",
            probe.recovering
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(ctx: &Ctx, args: ServerArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    match args.command {
        ServerCommand::Status { json } => {
            if client::block_on(client.probe())??.is_none() {
                if json {
                    print_json(&NotRunning {
                        running: false,
                        socket: &client.socket,
                    })?;
                } else {
                    println!(
                        "no server runs for this home (socket {})",
                        show_path(&client.socket)
                    );
                }
                return Ok(ExitCode::from(1));
            }
            let client = client.with_token(&home)?;
            let v: ServerStatus = client.get_blocking(wire::SERVER)?;
            if json {
                print_json(&Running {
                    running: true,
                    status: &v,
                })?;
            } else {
                for (key, val) in [
                    ("version", v.version.clone()),
                    ("protocol", v.protocol.to_string()),
                    ("pid", v.pid.to_string()),
                    ("started_at", v.started_at.clone()),
                    ("socket", v.socket.to_string_lossy().into_owned()),
                    ("home", v.home.to_string_lossy().into_owned()),
                    ("ledger", v.ledger.to_string_lossy().into_owned()),
                ] {
                    println!("{key:<10} {}", crate::text::one_line(&val, usize::MAX));
                }
                let (held, recovering) = match &v.runs_held_by {
                    ContainmentView::Cgroup {
                        cgroup_base,
                        recovering,
                    } => (format!("a cgroup per run under {cgroup_base}"), *recovering),
                    ContainmentView::Subreaper { reason, recovering } => (
                        format!("the server as child subreaper, no cgroup ({reason})"),
                        *recovering,
                    ),
                };
                println!(
                    "{:<10} {}",
                    "runs held",
                    crate::text::one_line(&held, usize::MAX)
                );
                if let Some(n) = Some(recovering).filter(|n| *n > 0) {
                    println!(
                        "{:<10} {n} run(s) a previous server left are being swept",
                        "recovering"
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ServerCommand::Stop => {
            if client::block_on(client.probe())??.is_none() {
                println!("no server was running for this home");
                return Ok(ExitCode::SUCCESS);
            }
            let client = client.with_token(&home)?;
            let _: Stopping =
                client.request_blocking::<(), _>(Method::POST, wire::SERVER_STOP, None)?;
            let started = Instant::now();
            // Gone means its lock is released: the process has exited, not just its socket.
            while server::server_lock_held(&home) {
                if started.elapsed() > Duration::from_secs(30) {
                    anyhow::bail!("the server accepted the stop but still answers after 30 s");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            println!("server stopped");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `server status --json` when no server runs.
#[derive(serde::Serialize)]
struct NotRunning<'a> {
    running: bool,
    socket: &'a std::path::Path,
}

/// `server status --json`: the server's status, and that it runs.
#[derive(serde::Serialize)]
struct Running<'a> {
    running: bool,
    #[serde(flatten)]
    status: &'a ServerStatus,
}
