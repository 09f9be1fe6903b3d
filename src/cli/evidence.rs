//! `proctor candidate …`, `proctor check run`, `proctor gate`, `proctor receipt …`: bind a
//! worktree run's exact bytes, judge them with the workspace's approved checks, see what
//! still blocks them, and verify the receipts. Thin clients of `/v1/m/evidence`, except
//! `receipt verify`, which reads the home's files itself (no server needed).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use hyper::Method;

use super::session::normalise_ref;
use super::{Ctx, UsageError, print_json, show_path};
use crate::api::evidence::{
    self as wire, BindRequest, CandidateList, CandidateView, CheckProgress, EvidenceEntry, Gate,
    Node, ReceiptList,
};
use crate::client::{self, Client};
use crate::text;

fn client(ctx: &Ctx) -> anyhow::Result<Client> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    Ok(client.with_token(&home)?)
}

/// `cand-0001` from `cand-0001`, `cand-1` or `1`.
fn candidate_ref(raw: &str) -> anyhow::Result<String> {
    let digits = raw.strip_prefix("cand-").unwrap_or(raw);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = digits.parse()?;
        return Ok(format!("cand-{n:04}"));
    }
    Err(UsageError::new(format!(
        "{} is not a candidate: give cand-0001 (or 1, or cand-1); `proctor candidate list` shows them",
        text::one_line(raw, 60)
    )))
}

/// A server string for a terminal: through the sanitiser, at most `width` columns.
fn t(s: &str, width: usize) -> String {
    text::one_line(s, width)
}

/// As [`t`]; `-` when absent.
fn o(s: &Option<String>, width: usize) -> String {
    s.as_deref().map_or_else(|| "-".into(), |s| t(s, width))
}

// ---------------------------------------------------------------------------------------------
// candidate
// ---------------------------------------------------------------------------------------------

/// Bind a worktree run's exact bytes as a candidate, and list or show candidates.
///
/// A candidate is what checks, reviews and a publication judge: the exact bytes of a worktree
/// run (`proctor session start --worktree`). Its identity binds the base commit, the index
/// tree, the exact `git status` bytes, the binary patch of every change (untracked files
/// included), size and SHA-256 of every added or modified file, and the inventory of every
/// byte outside `.git`, ignored files and node_modules included. One changed byte anywhere
/// makes a new identity, and what was proven about the old one is stale.
///
/// The identity is printed with its format and recipe:
/// `format=candidate-identity/1 digest=candidate-identity-sha256/1 <hex>`.
///
/// Exit codes: 0 ok; 1 refused (a run without worktree, a main working copy, an input that was
/// not clean, a worker that committed or touched the index: the reason is printed) or failed;
/// 2 bad usage.
#[derive(Debug, Args)]
pub struct CandidateArgs {
    #[command(subcommand)]
    pub command: CandidateCommand,
}

#[derive(Debug, Subcommand)]
pub enum CandidateCommand {
    Bind(BindArgs),
    /// List the bound candidates, oldest first: id, run, time, changed paths, identity.
    List(ListArgs),
    /// Show one candidate: its worktree, identity, every changed path with its size and
    /// SHA-256, and its receipt.
    Show(ShowArgs),
}

/// Bind a worktree run's current bytes as a new candidate (needs a write token).
///
/// Refused by name: a run without worktree, a worktree that was not clean when the run
/// started, a main working copy or a submodule's, a worker that committed (worker_committed)
/// or touched the index (index_changed). A refusal never writes a candidate or a receipt.
/// Binding writes a receipt (`proctor receipt list`).
///
/// Example: proctor candidate bind --run run-0003
#[derive(Debug, Args)]
pub struct BindArgs {
    /// The worktree run: run-0001 (or 1, or run-1).
    #[arg(long, value_name = "REF")]
    pub run: String,
    /// Print the candidate as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only the candidates of this run.
    #[arg(long, value_name = "REF")]
    pub run: Option<String>,
    /// Print `{"items": [...]}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The candidate: cand-0001 (or 1).
    #[arg(value_name = "C")]
    pub candidate: String,
    /// Print the candidate as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn candidate(ctx: &Ctx, args: CandidateArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CandidateCommand::Bind(a) => {
            let run = normalise_ref(&a.run)?;
            let c = client(ctx)?;
            let v: CandidateView =
                c.request_blocking(Method::POST, wire::CANDIDATES, Some(&BindRequest { run }))?;
            if a.json {
                print_json(&v)?;
            } else {
                print_candidate(&v, false);
            }
            Ok(ExitCode::SUCCESS)
        }
        CandidateCommand::List(a) => {
            let path = match &a.run {
                Some(r) => format!("{}?run={}", wire::CANDIDATES, normalise_ref(r)?),
                None => wire::CANDIDATES.to_string(),
            };
            let c = client(ctx)?;
            let v: CandidateList = c.get_blocking(&path)?;
            if a.json {
                print_json(&v)?;
                return Ok(ExitCode::SUCCESS);
            }
            if v.items.is_empty() {
                println!("no candidates; bind one with `proctor candidate bind --run REF`");
            }
            for c in &v.items {
                println!(
                    "{:<10} {:<9} {:<24} {:>4} changed  {}",
                    t(&c.candidate.id, 16),
                    t(&c.candidate.run_ref, 16),
                    t(&c.candidate.bound_at, 24),
                    c.candidate.identity.files.len(),
                    t(&c.identity_digest, 200),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        CandidateCommand::Show(a) => {
            let id = candidate_ref(&a.candidate)?;
            let c = client(ctx)?;
            let v: CandidateView = c.get_blocking(&wire::path(wire::CANDIDATE, &id))?;
            if a.json {
                print_json(&v)?;
            } else {
                print_candidate(&v, true);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_candidate(v: &CandidateView, files: bool) {
    let c = &v.candidate;
    let id = &c.identity;
    println!(
        "{} bound from {} at {}",
        t(&c.id, 16),
        t(&c.run_ref, 16),
        t(&c.bound_at, 32)
    );
    println!(
        "  worktree {} (branch {}, repository {})",
        t(&c.worktree, usize::MAX),
        t(&c.branch, 200),
        t(&c.repo, usize::MAX)
    );
    println!("  identity {}", t(&v.identity_digest, 200));
    println!(
        "  base {}  index tree {}  worktree tree {}",
        t(&id.base, 80),
        t(&id.index_tree, 80),
        t(&id.worktree_tree, 80)
    );
    let list = &id.files;
    let count = |ch: &str| list.iter().filter(|f| f.change == ch).count();
    println!(
        "  {} changed ({} added, {} modified, {} deleted, {} type changed); status {} bytes, patch {} bytes",
        match list.len() {
            1 => "1 path".to_string(),
            n => format!("{n} paths"),
        },
        count("added"),
        count("modified"),
        count("deleted"),
        count("type_changed"),
        id.status.bytes,
        id.patch.bytes,
    );
    println!(
        "  inventory {} {} ({} entries, {} bytes)",
        t(&id.inventory.recipe, 40),
        t(&id.inventory.digest, 80),
        id.inventory.count,
        id.inventory.bytes,
    );
    if files {
        for f in list {
            match &f.sha256 {
                Some(sha) => println!(
                    "    {:<12} {}  {} bytes  {} {}",
                    t(&f.change, 12),
                    t(&f.path, 300),
                    f.bytes.unwrap_or(0),
                    crate::evidence::BYTES_RECIPE,
                    text::one_line(sha, 80)
                ),
                None => println!("    {:<12} {}", t(&f.change, 12), t(&f.path, 300)),
            }
        }
    }
    println!("  receipt {}", o(&c.receipt, 32));
}

// ---------------------------------------------------------------------------------------------
// check
// ---------------------------------------------------------------------------------------------

/// Run checks on a candidate.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(subcommand)]
    pub command: CheckCommand,
}

#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    Run(CheckRunArgs),
}

/// Run the workspace's approved check policy on a candidate; record one evidence entry.
///
/// Before anything runs, the candidate's identity is recomputed: a candidate whose bytes
/// changed is refused ("stale: bind again"). The policy must be approved (`proctor workspace
/// approve-policy`); the same bytes are not judged twice under the same policy.
///
/// The checks run one by one, without a shell, in an exact private copy of the candidate's
/// bytes (so build outputs never change the candidate), each with its deadline and bounded
/// output. Progress goes to stderr while they run (elapsed time and an upper bound of what
/// remains, not an ETA); stdout gets the result. The entry records the attempt number, the
/// checker, the policy digest, the candidate identity, each command with its exit code or
/// signal, duration and output digests, and the required artifacts with their SHA-256; a
/// missing artifact fails its check. A receipt is written.
///
/// Exit codes: 0 every check passed; 1 a check failed (the entry is recorded) or the run was
/// refused; 2 bad usage.
///
/// Example: proctor check run --candidate cand-0001
#[derive(Debug, Args)]
pub struct CheckRunArgs {
    /// The candidate: cand-0001 (or 1).
    #[arg(long, value_name = "C")]
    pub candidate: String,
    /// Print the evidence entry as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn check(ctx: &Ctx, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let CheckCommand::Run(a) = args.command;
    let id = candidate_ref(&a.candidate)?;
    let c = client(ctx)?;
    let path = wire::path(wire::CHECKS, &id);
    let started = Instant::now();
    let result: EvidenceEntry = client::block_on(async {
        let post = c.request::<(), EvidenceEntry>(Method::POST, &path, None);
        tokio::pin!(post);
        let mut last_line = String::new();
        let mut last_print = Instant::now();
        loop {
            tokio::select! {
                r = &mut post => break r,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    let Ok(p) = c.get::<CheckProgress>(&path).await else { continue };
                    if !p.running {
                        continue;
                    }
                    let line = match &p.check {
                        Some(name) => format!(
                            "{}: check {}/{} ({}) running for {} s; at most {} s left (not an ETA)",
                            o(&p.evidence, 16),
                            p.index.unwrap_or(0),
                            p.total.unwrap_or(0),
                            text::one_line(name, 64),
                            p.check_elapsed_secs.unwrap_or(0),
                            p.bound_secs.unwrap_or(0),
                        ),
                        None => format!("{}: making the private copy", o(&p.evidence, 16)),
                    };
                    let changed = line.split(" running for").next() != last_line.split(" running for").next();
                    if changed || last_print.elapsed() >= Duration::from_secs(10) {
                        eprintln!("proctor check: {} s elapsed; {line}", started.elapsed().as_secs());
                        last_line = line;
                        last_print = Instant::now();
                    }
                }
            }
        }
    })??;
    let passed = result.passed();
    if a.json {
        print_json(&result)?;
    } else {
        println!(
            "{}: attempt {} on {}: {}",
            t(&result.id, 16),
            result.attempt,
            t(&result.candidate, 16),
            t(&result.result, 16)
        );
        for r in &result.checks {
            let how = match (r.exit_code, &r.signal) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => text::one_line(sig, 16),
                (None, None) => "not started".into(),
            };
            let out = |o: &Option<wire::Output>| match o {
                None => "-".to_string(),
                Some(o) => format!(
                    "{} bytes{}",
                    o.bytes,
                    if o.truncated {
                        format!(" of {}, truncated", o.observed_bytes)
                    } else {
                        String::new()
                    }
                ),
            };
            println!(
                "  {:<16} {:<6} {} in {} ms (stdout {}, stderr {}){}",
                t(&r.name, 16),
                if r.passed { "passed" } else { "failed" },
                how,
                r.duration_ms,
                out(&r.stdout),
                out(&r.stderr),
                r.cause
                    .as_deref()
                    .map(|c| format!(": {}", text::one_line(c, 300)))
                    .unwrap_or_default()
            );
        }
        println!(
            "  identity {} {}",
            t(&result.identity.recipe, 40),
            t(&result.identity.digest, 80)
        );
        println!(
            "  policy {} {} ({})",
            t(&result.policy.recipe, 40),
            t(&result.policy.digest, 80),
            t(&result.policy.workspace, 32)
        );
        println!("  receipt {}", t(&result.receipt, 32));
        println!(
            "  `proctor gate {}` shows what still blocks it",
            t(&result.candidate, 16)
        );
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

// ---------------------------------------------------------------------------------------------
// gate
// ---------------------------------------------------------------------------------------------

/// Show what still blocks a candidate: the gate, evaluated now.
///
/// The candidate's identity is recomputed and the workspace's approved policy read again, so
/// evidence about other bytes or another policy shows as stale (kept in history, never
/// reused). The graph, in order: prerequisites (candidate bound and current, policy approved)
/// → the task (run the checks) → the expected evidence (one per check: not_started, passed,
/// failed or stale, with its cause and evidence entry) → the human decision.
///
/// The overall state is one of not_started, check_failed, evidence_stale, awaiting_human,
/// passed. Passing checks is not approval: with every check green the state is
/// awaiting_human until a person's publication authorisation for these exact bytes is spent.
///
/// Exit codes: 0 the gate was evaluated (whatever its state; use --json and `.state` in
/// scripts); 1 refused or failed; 2 bad usage.
///
/// Example: proctor gate cand-0001
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The candidate: cand-0001 (or 1).
    #[arg(value_name = "C")]
    pub candidate: String,
    /// Print the gate as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn gate(ctx: &Ctx, a: GateArgs) -> anyhow::Result<ExitCode> {
    let id = candidate_ref(&a.candidate)?;
    let c = client(ctx)?;
    let v: Gate = c.get_blocking(&wire::path(wire::GATE, &id))?;
    if a.json {
        print_json(&v)?;
    } else {
        print!("{}", gate_text(&v));
    }
    Ok(ExitCode::SUCCESS)
}

/// The gate as an indented tree, one node per line with its state and cause.
pub fn gate_text(v: &Gate) -> String {
    let mut out = format!(
        "{} ({}): {}\n  identity {}{}\n",
        t(&v.candidate, 16),
        t(&v.run, 16),
        v.state.as_str(),
        t(&v.identity.bound, 200),
        match v.identity.now.as_str() {
            "current" => " (current)".to_string(),
            "changed" => format!("\n  now      {}", o(&v.identity.current, 200)),
            _ => " (no identity can be computed now)".to_string(),
        }
    );
    if let Some(p) = &v.policy {
        out.push_str(&format!(
            "  policy   {} ({})\n",
            t(&p.digest, 200),
            t(&p.workspace, 32)
        ));
    }
    fn node(out: &mut String, n: &Node, depth: usize) {
        let pad = "  ".repeat(depth + 1);
        out.push_str(&format!(
            "{pad}{} [{}]",
            text::one_line(&n.label, 120),
            text::one_line(&n.state, 24)
        ));
        if let Some(c) = &n.cause {
            out.push_str(&format!(" {}", text::one_line(c, 400)));
        }
        out.push('\n');
        for c in &n.children {
            node(out, c, depth + 1);
        }
    }
    for n in &v.nodes {
        node(&mut out, n, 0);
    }
    if !v.history.is_empty() {
        out.push_str("  history\n");
        for h in &v.history {
            out.push_str(&format!(
                "    {} attempt {} of {}: {} at {} — {}\n",
                t(&h.evidence, 16),
                h.attempt,
                t(&h.candidate, 16),
                t(&h.result, 16),
                t(&h.at, 32),
                if h.fresh {
                    "fresh".to_string()
                } else {
                    format!("stale: {}", o(&h.stale_because, 300))
                }
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// receipt
// ---------------------------------------------------------------------------------------------

/// List and verify receipts.
///
/// Each bound candidate and each evidence attempt writes a receipt
/// (data/receipts/rcpt-NNNN.json, canonical JSON): every digest it binds with its recipe,
/// and the ledger's fixed point at that moment.
#[derive(Debug, Args)]
pub struct ReceiptArgs {
    #[command(subcommand)]
    pub command: ReceiptCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReceiptCommand {
    /// List the receipts, oldest first: id, kind, subject, time.
    List(ReceiptListArgs),
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct ReceiptListArgs {
    /// Print `{"items": [...]}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Recompute every digest a receipt binds and say, for each, whether it holds.
///
/// Works on the home's files directly (no server needed): the identity document in the
/// candidate file, the candidate's worktree now, the stored status and patch, the policy text
/// and each captured output and artifact, the git objects, and the ledger's prefix (same
/// bytes, same event count, and the event that names the receipt). Each digest holds,
/// differs, or is unreachable (e.g. a removed worktree or file). A worktree that moved on
/// since the receipt shows as `differs`: the bytes the receipt names are no longer there.
///
/// FILE is a receipt's path, or its id (rcpt-0001) in the home.
///
/// Exit codes: 0 nothing differs; 1 something differs (or the file is not a receipt); 2 bad
/// usage.
///
/// Example: proctor receipt verify rcpt-0002
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The receipt file (or its id).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn receipt(ctx: &Ctx, args: ReceiptArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ReceiptCommand::List(a) => {
            let c = client(ctx)?;
            let v: ReceiptList = c.get_blocking(wire::RECEIPTS)?;
            if a.json {
                print_json(&v)?;
                return Ok(ExitCode::SUCCESS);
            }
            if v.items.is_empty() {
                println!("no receipts yet");
            }
            for r in &v.items {
                println!(
                    "{:<10} {:<16} {:<10} {:<24}{}",
                    t(&r.id, 16),
                    o(&r.kind, 24),
                    o(&r.subject, 16),
                    o(&r.at, 24),
                    r.problem
                        .as_deref()
                        .map(|p| format!("  ({})", text::one_line(p, 200)))
                        .unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ReceiptCommand::Verify(a) => {
            let home = ctx.home()?;
            let mut path = a.file.clone();
            if !path.exists()
                && let Some(id) = a.file.to_str()
                && crate::evidence::valid_id(id, "rcpt-")
            {
                path = crate::receipts::receipts_dir(&home).join(format!("{id}.json"));
            }
            if !path.is_file() {
                return Err(UsageError::new(format!(
                    "{} is not a receipt file (nor a receipt id of this home); `proctor receipt list` shows them",
                    show_path(&a.file)
                )));
            }
            let report = crate::receipts::verify_file(&home, &path)?;
            if a.json {
                print_json(&report)?;
            } else {
                println!(
                    "{} ({} of {}, {}): {}",
                    text::one_line(&report.id, 32),
                    text::one_line(&report.kind, 32),
                    text::one_line(&report.subject, 32),
                    text::one_line(&report.at, 32),
                    if report.ok {
                        "nothing differs"
                    } else {
                        "SOMETHING DIFFERS"
                    }
                );
                for c in &report.checks {
                    println!(
                        "  {:<11} {:<28} {} {}",
                        c.state.as_str(),
                        text::one_line(&c.name, 60),
                        text::one_line(&c.recipe, 40),
                        text::one_line(&c.expected, 80)
                    );
                    println!("              {}", text::one_line(&c.detail, 400));
                    if c.state == crate::receipts::Holds::Differs
                        && let Some(f) = &c.found
                    {
                        println!("              found {}", text::one_line(f, 80));
                    }
                }
            }
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
