//! `proctor home`: where each part of the state home lives.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::{Ctx, print_json, show_path};

/// Print where proctor keeps its state, and check that it is private.
///
/// The home is resolved from --home, else $PROCTOR_HOME, else the XDG folders (data,
/// config, state). The runtime folder (the server's socket and locks) derives from the home
/// alone, never from XDG_RUNTIME_DIR: `run/` in the home (for XDG, in the state folder), or
/// /tmp/proctor-<uid>/<hash> when the socket's path there would be too long. Folders that
/// exist are checked: one that another user owns, or that group or others can write, is
/// refused with exit 2. Nothing is created.
#[derive(Debug, Args)]
pub struct HomeArgs {
    /// Print JSON instead of aligned text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Part {
    name: &'static str,
    path: std::path::PathBuf,
    exists: bool,
}

#[derive(Serialize)]
struct Report {
    source: crate::home::Source,
    root: Option<std::path::PathBuf>,
    parts: Vec<Part>,
    ledger: std::path::PathBuf,
    /// The server's socket: the same for every login of this user naming this home.
    socket: std::path::PathBuf,
}

pub fn run(ctx: &Ctx, args: HomeArgs) -> anyhow::Result<ExitCode> {
    // Refuses an unsafe home (every folder that exists is checked); creates nothing.
    let home = ctx.home()?;
    let parts = vec![
        ("data", &home.data),
        ("config", &home.config),
        ("state", &home.state),
        ("runtime", &home.runtime),
    ]
    .into_iter()
    .map(|(name, p)| Part {
        name,
        path: p.clone(),
        exists: p.is_dir(),
    })
    .collect::<Vec<_>>();
    let report = Report {
        source: home.source,
        root: home.root.clone(),
        parts,
        ledger: home.ledger_path(),
        socket: home.socket_path(),
    };
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("source   {}", report.source.describe());
    if let Some(root) = &report.root {
        println!("root     {}", show_path(root));
    }
    for p in &report.parts {
        let note = if p.exists {
            ""
        } else {
            "  (absent: created on first use)"
        };
        println!("{:<8} {}{note}", p.name, show_path(&p.path));
    }
    println!("ledger   {}", show_path(&report.ledger));
    println!("socket   {}", show_path(&report.socket));
    Ok(ExitCode::SUCCESS)
}
