//! `proctor system …`: the plumbing a remote client runs over ssh (docs/remote.md). Hidden
//! from the short help.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use std::io::{Read, Write};

use super::Ctx;
use crate::client::{self, Client};

/// Plumbing for remote clients (run by ssh on the host whose server it reaches).
#[derive(Debug, Args)]
pub struct SystemArgs {
    #[command(subcommand)]
    pub command: SystemCommand,
}

#[derive(Debug, Subcommand)]
pub enum SystemCommand {
    /// Relay stdin and stdout to this home's server socket, starting the server if absent
    /// (as any local client does). Writes nothing of its own on stdout; exits when either
    /// side closes. The server sees this relay as its caller (kernel peer credentials), like
    /// any local client.
    DialStdio,
    /// Print this home's owner token on stdout, starting the server if absent (the first
    /// start makes the token). A remote client reads it through its ssh channel.
    OwnerToken,
}

pub fn run(ctx: &Ctx, args: SystemArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let client = Client::local(&home)?;
    match args.command {
        SystemCommand::OwnerToken => {
            client::block_on(client.ensure_server(&home))??;
            let client = client.with_token(&home)?;
            // `with_token` prefers PROCTOR_TOKEN; the owner token is the file's.
            let token = std::fs::read_to_string(home.owner_token_path())
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .or_else(|| client.bearer().map(str::to_string))
                .ok_or_else(|| anyhow::anyhow!("no owner token in this home"))?;
            println!("{token}");
            Ok(ExitCode::SUCCESS)
        }
        SystemCommand::DialStdio => {
            client::block_on(client.ensure_server(&home))??;
            let sock = std::os::unix::net::UnixStream::connect(&client.socket).map_err(|err| {
                client::ClientError::Io {
                    op: "connect to",
                    path: client.socket.clone(),
                    err,
                }
            })?;
            let (done_tx, done) = std::sync::mpsc::channel::<bool>();
            let mut to_server = sock.try_clone()?;
            let up_tx = done_tx.clone();
            std::thread::spawn(move || {
                let _ = relay(&mut std::io::stdin().lock(), &mut to_server);
                // No shutdown of the socket's write side: the server would take the half
                // close for the end of the connection, and drop an answer in flight.
                let _ = up_tx.send(true);
            });
            let mut from_server = sock;
            std::thread::spawn(move || {
                let _ = relay(&mut from_server, &mut std::io::stdout().lock());
                let _ = done_tx.send(false);
            });
            // The server's side closed: done. The client's side closed: let the answer in
            // flight drain, briefly, then go.
            if done.recv() == Ok(true) {
                let _ = done.recv_timeout(Duration::from_secs(5));
            }
            // A relay thread may be blocked in read(2): do not wait for it.
            std::process::exit(0);
        }
    }
}

/// Copies until end of file or an error, flushing each chunk (no buffering in a relay).
fn relay(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}
