//! The command line: a thin layer that parses, calls the modules, and prints through
//! [`crate::text`]. Errors become one sanitised message on stderr and an exit code:
//! 0 success, 1 the operation failed or found a fault, 2 bad usage or an unsafe home.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::home::{Home, HomeError};
use crate::text;

mod cockpit;
mod completions;
mod demo;
mod demo_agent;
mod digest;
mod evidence;
mod factory;
mod factory_run;
mod home;
mod key;
mod ledger;
mod profile;
mod publish;
mod rig;
mod rig_image;
mod rig_internal;
mod server;
mod session;
mod system;
mod token;
mod tribunal;
mod workspace;

/// Operator's terminal cockpit for autonomous coding agents.
#[derive(Debug, Parser)]
#[command(
    name = "proctor",
    version,
    about = "A terminal cockpit for operators of autonomous coding agents",
    long_about = "proctor's server runs provider CLIs (Claude Code, Codex, Gemini CLI, Grok, \
OpenCode) as owned children under PTYs or pipes, its cockpit shows them live, and every fact it \
observes goes to an append-only, verifiable ledger.\n\n\
State lives in one home: --home DIR, else $PROCTOR_HOME, else the XDG folders. Every folder \
proctor creates is 0700 and every file 0600.",
    after_help = "With no command, proctor opens the cockpit: the full-screen view of every \
session on this home (it starts the server if needed; quitting leaves the sessions running; \
press ? inside for the keys). It needs a terminal; from a script use `proctor session list`.\n\n\
Exit codes: 0 success, 1 the operation failed or found a fault, \
2 bad usage or an unsafe home.\nRun `proctor <command> --help` for the details of each command."
)]
pub struct Cli {
    /// Keep all state in this one folder (overrides $PROCTOR_HOME and the XDG folders).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,

    /// Speak to the proctor of another host over ssh: ssh://[user@]host[:port], or a host
    /// named in <config>/hosts.toml (overrides $PROCTOR_HOST; docs/remote.md). `local` is
    /// this home's own server. Repeated, for the cockpit only: it follows every host named
    /// (`proctor --host build --host local`).
    #[arg(long, global = true, value_name = "HOST", action = clap::ArgAction::Append)]
    pub host: Vec<String>,

    /// The verb; none opens the cockpit.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Session(session::SessionArgs),
    Workspace(workspace::WorkspaceArgs),
    Candidate(evidence::CandidateArgs),
    Check(evidence::CheckArgs),
    Gate(evidence::GateArgs),
    Receipt(evidence::ReceiptArgs),
    Tribunal(tribunal::TribunalArgs),
    Factory(factory::FactoryArgs),
    Rig(rig::RigArgs),
    Serve(server::ServeArgs),
    Server(server::ServerArgs),
    Token(token::TokenArgs),
    Key(key::KeyArgs),
    Publish(publish::PublishArgs),
    Profile(profile::ProfileArgs),
    Home(home::HomeArgs),
    Ledger(ledger::LedgerArgs),
    Digest(digest::DigestArgs),
    Demo(demo::DemoArgs),
    DemoAgent(demo_agent::DemoAgentArgs),
    Completions(completions::CompletionsArgs),
    Man(completions::ManArgs),
    #[command(hide = true)]
    System(system::SystemArgs),
}

/// An error that carries its own exit code (bad input that the operator must fix).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    pub message: String,
}

impl UsageError {
    #[allow(clippy::new_ret_no_self)] // builds the error already wrapped for `?`
    pub fn new(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(UsageError {
            message: message.into(),
        })
    }
}

pub(crate) struct Ctx {
    pub home_flag: Option<PathBuf>,
    /// The hosts a cockpit of several follows (two or more `--host`); empty otherwise.
    pub hosts: Vec<String>,
}

impl Ctx {
    /// The resolved home, refused (exit 2, one message for every verb) when one of its
    /// folders that exist is unsafe: another user owns it, or group or others can write it.
    /// Nothing is created: a verb that writes creates the folders itself ([`Home::ensure`]).
    pub fn home(&self) -> Result<Home, HomeError> {
        let home = Home::resolve(self.home_flag.as_deref())?;
        for dir in home.folders() {
            if dir.exists() {
                crate::files::check_dir_is_private(dir).map_err(|source| HomeError::Unsafe {
                    source_kind: home.source,
                    source,
                })?;
            }
        }
        Ok(home)
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // A CLI verb whose reader went away (`proctor ledger tail | head`) ends quietly, as
    // Unix tools do. The server keeps SIGPIPE ignored: a child closing its stdin must not
    // kill it (it sees EPIPE instead).
    if !matches!(cli.command, Some(Command::Serve(_))) {
        // SAFETY: restoring a default signal disposition before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let mut hosts = Vec::new();
    match cli.host.as_slice() {
        [] => {}
        // `local`: this home's own server, whatever PROCTOR_HOST says.
        [h] if h == crate::remote::LOCAL => {
            // SAFETY: no other thread exists yet.
            unsafe { std::env::remove_var(crate::remote::HOST_ENV) };
        }
        [h] => {
            // SAFETY: no other thread exists yet. Every client of this process reads it
            // (`Client::new`); the server it may start is not given it.
            unsafe { std::env::set_var(crate::remote::HOST_ENV, h) };
        }
        several => {
            if cli.command.is_some() {
                eprintln!(
                    "proctor: error: several --host are for the cockpit only (`proctor --host A \
                     --host B`); a verb speaks to one host"
                );
                return ExitCode::from(2);
            }
            let mut seen = std::collections::BTreeSet::new();
            for h in several {
                if !seen.insert(h.clone()) {
                    eprintln!(
                        "proctor: error: the host {} is named twice",
                        text::one_line(h, 80)
                    );
                    return ExitCode::from(2);
                }
            }
            hosts = several.to_vec();
        }
    }
    let ctx = Ctx {
        home_flag: cli.home,
        hosts,
    };
    let result = match cli.command {
        None => cockpit::run(&ctx),
        Some(command) => match command {
            Command::Home(args) => home::run(&ctx, args),
            Command::Digest(args) => digest::run(args),
            Command::Serve(args) => server::serve(&ctx, args),
            Command::Server(args) => server::run(&ctx, args),
            Command::Token(args) => token::run(&ctx, args),
            Command::Key(args) => key::run(&ctx, args),
            Command::Publish(args) => publish::run(&ctx, args),
            Command::Profile(args) => profile::run(&ctx, args),
            Command::Demo(args) => demo::run(&ctx, args),
            Command::DemoAgent(args) => demo_agent::run(args),
            Command::Completions(args) => completions::completions(args),
            Command::Man(args) => completions::man(args),
            Command::Ledger(args) => ledger::run(&ctx, args),
            Command::Session(args) => session::run(&ctx, args),
            Command::Workspace(args) => workspace::run(&ctx, args),
            Command::Candidate(args) => evidence::candidate(&ctx, args),
            Command::Check(args) => evidence::check(&ctx, args),
            Command::Gate(args) => evidence::gate(&ctx, args),
            Command::Receipt(args) => evidence::receipt(&ctx, args),
            Command::Tribunal(args) => tribunal::run(&ctx, args),
            Command::Factory(args) => factory::run(&ctx, args),
            Command::Rig(args) => rig::run(&ctx, args),
            Command::System(args) => system::run(&ctx, args),
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("proctor: error: {}", text::multi_line(&format!("{e:#}")));
            ExitCode::from(exit_code_for(&e))
        }
    }
}

fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.chain()
        .any(|c| c.is::<UsageError>() || is_home_refusal(c))
    {
        2
    } else {
        1
    }
}

/// A refused home, also when it reached the verb through the client or the server (their
/// `transparent` variants hide it from the error chain).
fn is_home_refusal(e: &(dyn std::error::Error + 'static)) -> bool {
    use crate::client::ClientError;
    use crate::server::ServerError;
    e.is::<HomeError>()
        || matches!(e.downcast_ref(), Some(ServerError::Home(_)))
        || matches!(
            e.downcast_ref(),
            Some(ClientError::Server(ServerError::Home(_)))
        )
}

/// Prints a value as pretty JSON on stdout. JSON escapes every control character, so
/// untrusted strings inside it cannot drive the terminal.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A path for display: through the sanitiser, never truncated.
pub(crate) fn show_path(p: &std::path::Path) -> String {
    text::one_line(&p.to_string_lossy(), usize::MAX)
}
