//! The hidden verbs of rigs (helper B): `rig guest-agent` (inside a guest), `rig relay`
//! (the host-controlled channels of `--allow`) and `rig guest-init` (a namespace rig's first
//! program: it starts the agent and the in-sandbox relays, then becomes the console's shell).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::rigs::guest::{self, AgentChannel};
use crate::rigs::relay::{self, RelayMode};

/// Serve the guest agent's protocol (inside a rig).
#[derive(Debug, Args)]
pub struct GuestAgentArgs {
    /// A character device to serve (a VM's virtio-serial port).
    #[arg(long, conflicts_with = "listen")]
    pub device: Option<PathBuf>,
    /// A Unix socket to listen on (a namespace rig).
    #[arg(long)]
    pub listen: Option<PathBuf>,
}

/// Relay one allowed service.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// stdin/stdout to this TCP HOST:PORT.
    #[arg(long)]
    pub stdio: bool,
    #[arg(long)]
    pub to: Option<String>,
    /// Listen on this TCP ADDR:PORT and relay each connection to --to-unix.
    #[arg(long)]
    pub listen: Option<String>,
    #[arg(long)]
    pub to_unix: Option<PathBuf>,
}

/// A namespace rig's init (inside the sandbox).
#[derive(Debug, Args)]
pub struct GuestInitArgs {
    /// Where the guest agent listens.
    #[arg(long)]
    pub agent: PathBuf,
    /// `ADDR:PORT=UNIX-SOCKET`: an in-sandbox relay for one allowed service (repeatable).
    #[arg(long)]
    pub relay: Vec<String>,
}

pub fn guest_agent(args: GuestAgentArgs) -> anyhow::Result<std::process::ExitCode> {
    let channel = match (args.device, args.listen) {
        (Some(d), None) => AgentChannel::Device(d),
        (None, Some(l)) => AgentChannel::Listen(l),
        _ => anyhow::bail!("rig guest-agent needs exactly one of --device PATH or --listen PATH"),
    };
    guest::serve(&channel)?;
    Ok(std::process::ExitCode::SUCCESS)
}

pub fn relay(args: RelayArgs) -> anyhow::Result<std::process::ExitCode> {
    let mode = match (args.stdio, args.to, args.listen, args.to_unix) {
        (true, Some(to), None, None) => RelayMode::Stdio { to },
        (false, None, Some(listen), Some(to_unix)) => RelayMode::ListenToUnix { listen, to_unix },
        _ => anyhow::bail!(
            "rig relay needs either --stdio --to HOST:PORT or --listen ADDR:PORT --to-unix PATH"
        ),
    };
    relay::run(&mode)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Starts the agent and the relays in their own sessions, then execs the login shell (the
/// console's foreground).
pub fn guest_init(args: GuestInitArgs) -> anyhow::Result<std::process::ExitCode> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().context("the guest's proctor binary")?;
    let detached = |cmd: &mut Command| -> anyhow::Result<()> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        cmd.spawn().context("start a guest helper")?;
        Ok(())
    };
    for r in &args.relay {
        let (listen, unix) = r
            .split_once('=')
            .with_context(|| format!("--relay {r:?}: expected ADDR:PORT=UNIX-SOCKET"))?;
        detached(Command::new(&exe).args(["rig", "relay", "--listen", listen, "--to-unix", unix]))?;
    }
    detached(
        Command::new(&exe)
            .args(["rig", "guest-agent", "--listen"])
            .arg(&args.agent),
    )?;
    let shell = ["/bin/bash", "/usr/bin/bash", "/bin/sh"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("/bin/sh");
    let err = Command::new(shell).arg("-l").exec();
    anyhow::bail!("cannot start the guest's shell {shell}: {err}")
}
