//! `proctor factory run|list|show`: the agent factory's faces on the command line, thin
//! clients of `/v1/m/factory`. `run` starts a run on the server, prints its progress on
//! stderr (the phase, the time elapsed and an upper bound of provider time left, labelled
//! `(not an ETA)`), and prints exactly the final receipt on stdout; its exit code is the
//! run's (0 completed, 3 rejected after the one repair, 1 failed or refused).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use super::{Ctx, UsageError, print_json};
use crate::api::factory::{FactoryRun, Phase, RunStatus, StartRequest};
use crate::client::{self, Client};
use crate::text;

fn client(ctx: &Ctx) -> anyhow::Result<Client> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    Ok(client.with_token(&home)?)
}

/// Run one worker in a clean linked worktree, have its candidate judged by a reviewer of
/// another vendor, and allow at most one repair.
///
/// The workspace must be a linked worktree (`git worktree add ../NAME`) with nothing in
/// `git status --ignored`: a main working copy, a submodule's, or a dirty one is refused.
/// The worker (default: the `claude` profile) runs headless in it as the host user, or with
/// --rig inside a namespace rig on a copy of its files; its HEAD and index must be unchanged
/// at the end. The candidate identity is then bound (base,
/// index tree, status bytes, binary patch, size and SHA-256 of each changed file, and every
/// byte of the tree, ignored files included), and the reviewer (default: `codex`, read-only)
/// judges it; a reviewer that changes anything, even in node_modules, is refused.
/// APPROVE completes the run, and grants no publication authority. REQUEST_CHANGES gets
/// exactly one repair, which must change the candidate; a fresh reviewer then judges it,
/// and a second REQUEST_CHANGES ends the run with exit code 3.
///
/// The run lives in the server: stopping this command does not stop it
/// (`proctor factory show fac-0001` follows it). Progress goes to stderr every 10 s;
/// stdout is exactly the final receipt (also written to --out, 0600). Task text, paths and
/// provider output never appear in the progress.
///
/// Exit codes: 0 completed (approved), 3 rejected after the repair, 1 failed or refused,
/// 2 bad usage.
///
/// Examples:
///   git worktree add ../proj-factory
///   proctor factory run --workspace ../proj-factory --task "Add a --verbose flag and its test" \
///       --out ../factory-report.json
///   proctor factory run --workspace ../wt --task-file task.md --out r.json --worker codex \
///       --reviewer claude --timeout 15m
///   proctor rig open --backend namespace      # rig-0001
///   proctor factory run --workspace ../wt --task "Fix the parser" --out r.json --rig rig-0001
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// The linked worktree the worker changes.
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// What the worker should do.
    #[arg(
        long,
        value_name = "TEXT",
        conflicts_with = "task_file",
        required_unless_present = "task_file"
    )]
    pub task: Option<String>,
    /// Read the task from this file instead.
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<PathBuf>,
    /// Where the receipt is written (outside the worktree).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The worker's provider profile (claude or codex; `proctor profile list`).
    #[arg(long, value_name = "PROFILE", default_value = "claude")]
    pub worker: String,
    /// The reviewer: a provider profile of another vendor than the worker's, or `tribunal`
    /// (a round of the blind tribunal: a unanimous pass approves, a refusal asks for changes).
    #[arg(long, value_name = "PROFILE", default_value = "codex")]
    pub reviewer: String,
    /// The worker's model (the tool's --model); default: the tool's own.
    #[arg(long, value_name = "MODEL")]
    pub worker_model: Option<String>,
    /// The reviewer's model.
    #[arg(long, value_name = "MODEL")]
    pub reviewer_model: Option<String>,
    /// Export the finished run's trace to this OpenTelemetry collector (OTLP/HTTP JSON),
    /// a loopback IP literal only: http://127.0.0.1:4318. Its failures change nothing.
    #[arg(long, value_name = "URL")]
    pub otel: Option<String>,
    /// The deadline of each provider invocation: 90, 90s, 15m or 1h.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub timeout: String,
    /// Run the worker and the repair inside this namespace rig (`proctor rig open --backend
    /// namespace`), on a copy of the worktree's files (no .git, no secret files); what they
    /// change comes back checked, and the receipt names the rig's boundary. The reviewer
    /// still runs on the host, read-only.
    #[arg(long, value_name = "RIG")]
    pub rig: Option<String>,
}

/// List the factory runs: id, status, phase and the worker and reviewer.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The listing as JSON (`{"items": [...]}`).
    #[arg(long)]
    pub json: bool,
}

/// Show one factory run (its steps, phase and outcome), or its receipt.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run: fac-0001 (or 1).
    pub run: String,
    /// Print the receipt instead (a finished run).
    #[arg(long)]
    pub receipt: bool,
    /// The run's record as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Seconds from `90`, `90s`, `15m`, `1h`.
pub fn parse_duration(raw: &str) -> anyhow::Result<u64> {
    let s = raw.trim();
    let (num, mul) = match s.char_indices().last() {
        Some((i, 's')) => (&s[..i], 1),
        Some((i, 'm')) => (&s[..i], 60),
        Some((i, 'h')) => (&s[..i], 3600),
        _ => (s, 1),
    };
    match num.parse::<u64>() {
        Ok(n) if n > 0 && n.checked_mul(mul).is_some() => Ok(n * mul),
        _ => Err(UsageError::new(format!(
            "--timeout {}: give a positive duration such as 90, 90s, 15m or 1h",
            text::one_line(raw, 40)
        ))),
    }
}

fn run_ref(raw: &str) -> anyhow::Result<String> {
    let digits = raw.strip_prefix("fac-").unwrap_or(raw);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = digits.parse()?;
        return Ok(format!("fac-{n:04}"));
    }
    Err(UsageError::new(format!(
        "{} is not a factory run: give fac-0001 (or 1); `proctor factory list` shows them",
        text::one_line(raw, 60)
    )))
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

fn clock(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// One progress line: no task text, no path, no provider output.
pub fn progress_line(run: &FactoryRun, elapsed: Duration) -> String {
    let what = match run.phase {
        Phase::Validating => "validating the input".to_string(),
        Phase::Worker => format!("worker ({}) running", text::one_line(&run.worker.tool, 20)),
        Phase::Binding => "binding the candidate (git, evidence)".to_string(),
        Phase::Review => {
            let n = run
                .steps
                .iter()
                .filter(|s| s.role.starts_with("review-"))
                .count();
            format!("review {} ({}) running", n.max(1), run.reviewer.tool)
        }
        Phase::Repair => format!("repair ({}) running", run.worker.tool),
        Phase::Receipt => "writing the receipt".to_string(),
        Phase::Done => match run.status {
            RunStatus::Completed => "completed (approved; no publication authority)".to_string(),
            RunStatus::Rejected => "rejected after the one repair".to_string(),
            RunStatus::Failed => format!(
                "failed: {}",
                run.error
                    .as_ref()
                    .map(|e| e.code.as_str())
                    .unwrap_or("unknown")
            ),
            RunStatus::Running => "running".to_string(),
        },
    };
    // Every server string through the sanitiser (ids, tools and codes are the server's own,
    // but nothing but `text` decides what is safe to print).
    format!(
        "factory {}: {} · {} elapsed · provider time left ≤ {} (not an ETA)",
        text::one_line(&run.id, 20),
        text::one_line(&what, 120),
        clock(elapsed.as_millis() as u64),
        clock(run.provider_bound_ms)
    )
}

pub fn run(ctx: &Ctx, a: RunArgs) -> anyhow::Result<ExitCode> {
    let timeout = parse_duration(&a.timeout)?;
    let task = match (&a.task, &a.task_file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| {
            UsageError::new(format!(
                "--task-file {}: {e}; give a readable UTF-8 file",
                super::show_path(f)
            ))
        })?,
        (None, None) => return Err(UsageError::new("give --task TEXT or --task-file FILE")),
    };
    let workspace = absolute(&a.workspace)?;
    let out = absolute(&a.out)?;
    let c = client(ctx)?;
    let req = StartRequest {
        workspace: workspace.to_string_lossy().into_owned(),
        task,
        worker: Some(a.worker),
        reviewer: Some(a.reviewer),
        worker_model: a.worker_model,
        reviewer_model: a.reviewer_model,
        timeout_secs: Some(timeout),
        out: Some(out.to_string_lossy().into_owned()),
        otel: a.otel,
        rig: a.rig,
    };
    let started = Instant::now();
    let first = client::block_on(c.factory_start(&req))??;
    let id = first.id.clone();
    eprintln!("{}", progress_line(&first, started.elapsed()));
    let mut last_phase = (first.phase, first.steps.len());
    let mut last_print = Instant::now();
    let run = loop {
        std::thread::sleep(Duration::from_millis(500));
        let r = client::block_on(c.factory_run(&id))??;
        let now = (r.phase, r.steps.len());
        if r.status != RunStatus::Running {
            eprintln!("{}", progress_line(&r, started.elapsed()));
            break r;
        }
        if now != last_phase || last_print.elapsed() >= Duration::from_secs(10) {
            eprintln!("{}", progress_line(&r, started.elapsed()));
            last_phase = now;
            last_print = Instant::now();
        }
    };
    let view = client::block_on(c.factory_receipt(&id))??;
    let bytes = serde_json::to_vec_pretty(&view.receipt)?;
    crate::files::write_atomic(&out, &bytes).map_err(|e| {
        anyhow::anyhow!(
            "{e}; the receipt stays at {} (`proctor factory show {id} --receipt`)",
            text::one_line(&view.bound.path, usize::MAX)
        )
    })?;
    print_json(&view.receipt)?;
    let code = run.exit_code.unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

pub fn list(ctx: &Ctx, a: ListArgs) -> anyhow::Result<ExitCode> {
    let c = client(ctx)?;
    let runs = client::block_on(c.factory_runs())??;
    if a.json {
        print_json(&crate::api::Items::new(runs))?;
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        println!("no factory runs (start one: proctor factory run --help)");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<10} {:<10} {:<10} {:<8} {:<8} STARTED",
        "RUN", "STATUS", "PHASE", "WORKER", "REVIEWER"
    );
    for r in runs {
        println!(
            "{:<10} {:<10} {:<10} {:<8} {:<8} {}",
            text::one_line(&r.id, 10),
            status_word(r.status),
            r.phase.as_str(),
            text::one_line(&r.worker.tool, 8),
            text::one_line(&r.reviewer.tool, 8),
            text::one_line(&r.started_at, 30)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn status_word(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Completed => "completed",
        RunStatus::Rejected => "rejected",
        RunStatus::Failed => "failed",
    }
}

pub fn show(ctx: &Ctx, a: ShowArgs) -> anyhow::Result<ExitCode> {
    let id = run_ref(&a.run)?;
    let c = client(ctx)?;
    if a.receipt {
        let v = client::block_on(c.factory_receipt(&id))??;
        print_json(&v.receipt)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = client::block_on(c.factory_run(&id))??;
    if a.json {
        print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}  {}  phase {}",
        text::one_line(&r.id, 20),
        status_word(r.status),
        r.phase.as_str()
    );
    println!("workspace  {}", text::one_line(&r.workspace, usize::MAX));
    println!(
        "worker     {} (profile {}){}",
        text::one_line(&r.worker.tool, 20),
        text::one_line(&r.worker.profile, 64),
        match &r.rig {
            Some(rig) => format!(", in {} (a copy of the worktree)", text::one_line(rig, 20)),
            None => ", as the host user: not confined".to_string(),
        }
    );
    println!(
        "reviewer   {} (profile {})",
        text::one_line(&r.reviewer.tool, 20),
        text::one_line(&r.reviewer.profile, 64)
    );
    if let Some(c) = &r.candidate {
        println!("candidate  {}", text::one_line(c, 80));
    }
    for s in &r.steps {
        println!(
            "  {:<9} {:<7} {:<9} {:>7} {}",
            text::one_line(&s.role, 9),
            text::one_line(&s.tool, 7),
            text::one_line(&s.state, 9),
            s.elapsed_ms.map(clock).unwrap_or_default(),
            s.verdict
                .as_deref()
                .map(|v| text::one_line(v, 20))
                .unwrap_or_default()
        );
    }
    if let Some(e) = &r.error {
        println!(
            "error      {}: {}",
            text::one_line(&e.code, 40),
            text::one_line(&e.message, 400)
        );
    }
    if let Some(b) = &r.receipt {
        println!(
            "receipt    {} ({} bytes, sha256 {})",
            text::one_line(&b.path, usize::MAX),
            b.bytes,
            text::one_line(&b.sha256, 64)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_writes_them() {
        assert_eq!(parse_duration("90").unwrap(), 90);
        assert_eq!(parse_duration("90s").unwrap(), 90);
        assert_eq!(parse_duration("15m").unwrap(), 900);
        assert_eq!(parse_duration("1h").unwrap(), 3600);
        for bad in ["", "0", "m", "-5", "1.5h", "10x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
