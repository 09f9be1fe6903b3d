//! `proctor factory …`: the coordination tracer (`smoke`) and the agent factory (`run`,
//! `list`, `show`; in `factory_run`). docs/factory.md.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{Ctx, UsageError, print_json, show_path};
use crate::factory::smoke::{self, SmokeError};
use crate::files;
use crate::text;

/// The factory: the coordination tracer (`smoke`) and the agent factory (`run`: one worker,
/// a reviewer of another vendor, at most one repair).
#[derive(Debug, Args)]
pub struct FactoryArgs {
    #[command(subcommand)]
    pub command: FactoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum FactoryCommand {
    Smoke(SmokeArgs),
    Run(super::factory_run::RunArgs),
    List(super::factory_run::ListArgs),
    Show(super::factory_run::ShowArgs),
}

/// Prove the factory's control plane with no model in the loop: the coordination tracer.
///
/// On a fresh coordination log (<data-dir>/events.jsonl, in the ledger's format
/// proctor-ledger/1), a coordinator, a builder and a reviewer register, heartbeat, and
/// exchange three correlated messages and one handoff that transfers no authority; each
/// recipient reads its inbox and acknowledges receipt ("receipt only; not agreement,
/// approval, or completion"). No model runs and nothing is executed: the artifact is only
/// hashed, and its size and SHA-256 travel in the first message.
///
/// Five checks then block (a failing one fails the run): several-parties,
/// acked-by-another-actor, correlation-consistent, handoff-without-authority,
/// log-verifies (the log verifies and its fixed point is the file's). The report
/// (written to --out, 0600, atomically) carries the log's fixed point: anyone can
/// recompute it with `proctor ledger verify <data-dir>/events.jsonl`.
///
/// The data dir is made 0700; one whose events.jsonl already holds anything is refused,
/// never appended to. Without --data-dir, a new numbered folder
/// <home>/data/factory/smoke-NNNN is used. Needs no server.
///
/// Exit codes: 0 every check passed; 1 a check failed (the report says ok: false and
/// names it in failedChecks; the log is kept) or an I/O error; 2 bad usage (missing or
/// unreadable artifact, occupied data dir) or an unsafe home.
#[derive(Debug, Args)]
#[command(
    verbatim_doc_comment,
    after_help = "Examples:\n  \
proctor factory smoke --artifact README.md --task 'Review this candidate' --out smoke.json\n  \
proctor factory smoke --artifact README.md --task T --out r.json --data-dir ./fs --json\n  \
proctor ledger verify ./fs/events.jsonl    # the same bytes, events and sha256 as evidenceLog"
)]
pub struct SmokeArgs {
    /// The file under review: hashed (size and SHA-256), never run.
    #[arg(long, value_name = "FILE")]
    pub artifact: PathBuf,
    /// The task's text, carried in the first message and in the report.
    #[arg(long, value_name = "T")]
    pub task: String,
    /// Where to write the report (JSON, 0600, replaced atomically).
    #[arg(long, value_name = "REPORT")]
    pub out: PathBuf,
    /// The folder of the coordination log (default: a new <home>/data/factory/smoke-NNNN).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the whole report as JSON on stdout instead of key=value lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, args: FactoryArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        FactoryCommand::Smoke(a) => smoke_verb(ctx, a),
        FactoryCommand::Run(a) => super::factory_run::run(ctx, a),
        FactoryCommand::List(a) => super::factory_run::list(ctx, a),
        FactoryCommand::Show(a) => super::factory_run::show(ctx, a),
    }
}

fn smoke_verb(ctx: &Ctx, args: SmokeArgs) -> anyhow::Result<ExitCode> {
    // The artifact first: a bad one must leave no empty log behind.
    let artifact =
        smoke::hash_artifact(&args.artifact).map_err(|e| UsageError::new(e.to_string()))?;
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => {
            let home = ctx.home()?;
            let (_, dir) = files::reserve_numbered(&home.data.join("factory"), "smoke-", "")
                .context("cannot create the data dir")?;
            dir
        }
    };
    let report = match smoke::run_hashed(artifact, &args.task, &data_dir) {
        Ok(r) => r,
        Err(SmokeError::Bus(e @ crate::factory::bus::BusError::Occupied { .. })) => {
            return Err(UsageError::new(e.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    let mut bytes = serde_json::to_vec_pretty(&report)?;
    bytes.push(b'\n');
    files::write_atomic(&args.out, &bytes)
        .with_context(|| format!("cannot write the report {}", show_path(&args.out)))?;
    let log = data_dir.join(crate::factory::bus::EVENTS_FILE);
    if args.json {
        print_json(&report)?;
    } else {
        println!("ok={}", report.ok);
        println!("status={}", report.status);
        println!("execution={}", report.execution);
        println!("report={}", show_path(&args.out));
        println!("log={}", show_path(&log));
        println!("format={}", report.evidence_log.format);
        println!("bytes={}", report.evidence_log.bytes);
        println!("events={}", report.evidence_log.events);
        println!("sha256={}", report.evidence_log.sha256);
        for c in &report.checks {
            println!(
                "check {}={} {}",
                c.name,
                if c.ok { "ok" } else { "FAILED" },
                text::one_line(&c.detail, 200)
            );
        }
    }
    if !report.ok {
        eprintln!(
            "proctor: the coordination tracer failed: {} (the log is kept at {})",
            report.failed_checks.join(", "),
            show_path(&log)
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
