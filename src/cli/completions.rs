//! `proctor completions SHELL` and `proctor man`: shell completions (clap_complete) and a
//! man page (clap_mangen), both generated from the command tree itself, so they name every
//! verb and flag this build has. Neither reads or needs the home.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

/// Print a completion script for SHELL on stdout.
///
/// Load it for this shell session, or save it where your shell looks for completions.
///
/// bash: `source <(proctor completions bash)`, or save it as
/// ~/.local/share/bash-completion/completions/proctor.
///
/// zsh: `proctor completions zsh > ~/.zfunc/_proctor`, with `fpath+=~/.zfunc` before
/// compinit.
///
/// fish: `proctor completions fish > ~/.config/fish/completions/proctor.fish`.
///
/// Verbs, flags and fixed values (tools, transports, states) complete; run refs do not.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print proctor's man page (roff) on stdout.
///
/// Read it with `proctor man | man -l -`, or install it:
/// `proctor man > ~/.local/share/man/man1/proctor.1`. It documents the global options and
/// lists the commands; `proctor <command> --help` has each one's details.
#[derive(Debug, Args)]
pub struct ManArgs {}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "proctor", &mut out);
    write_out(&out)
}

pub fn man(_args: ManArgs) -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    write_out(&out)
}

/// Writes the whole text at once, so a failed write is an error and not a half script.
fn write_out(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}
