//! `proctor factory …`: the coordination tracer (`smoke`) and the agent factory (`run`,
//! `list`, `show`).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::Ctx;
use super::factory_run;

/// The factory: one worker, a reviewer of another vendor, at most one repair.
#[derive(Debug, Args)]
pub struct FactoryArgs {
    #[command(subcommand)]
    pub command: FactoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum FactoryCommand {
    Run(factory_run::RunArgs),
    List(factory_run::ListArgs),
    Show(factory_run::ShowArgs),
}

pub fn run(ctx: &Ctx, a: FactoryArgs) -> anyhow::Result<ExitCode> {
    match a.command {
        FactoryCommand::Run(a) => factory_run::run(ctx, a),
        FactoryCommand::List(a) => factory_run::list(ctx, a),
        FactoryCommand::Show(a) => factory_run::show(ctx, a),
    }
}
