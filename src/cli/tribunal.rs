//! `proctor tribunal …`: the blind tribunal's faces on the command line. `seats` shows the
//! registry and what is alive now; `convene` seats the lenses on a candidate's current bytes
//! and records a round; `rounds` and `show` read them; `red` records a workspace's red-first
//! commit. Thin clients of `/v1/m/tribunal`. Every string from the server (findings, answers'
//! tails, model names from the configuration, the intent) goes through `text`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{Ctx, UsageError, print_json};
use crate::api::tribunal::{
    Attempt, ConveneRequest, Judged, RedRequest, Round, RoundState, Seat, SeatState, SeatsReport,
};
use crate::client::{self, Client};
use crate::text;
use crate::tribunal::config;

fn client(ctx: &Ctx) -> anyhow::Result<Client> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    Ok(client.with_token(&home)?)
}

/// A server string for a terminal: through the sanitiser, at most `width` columns.
fn t(s: &str, width: usize) -> String {
    text::one_line(s, width)
}

/// `<prefix>0001` from `<prefix>0001`, `<prefix>1` or `1`.
fn id_ref(raw: &str, prefix: &str, what: &str, lister: &str) -> anyhow::Result<String> {
    let digits = raw.strip_prefix(prefix).unwrap_or(raw);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = digits.parse()?;
        return Ok(format!("{prefix}{n:04}"));
    }
    Err(UsageError::new(format!(
        "{} is not a {what}: give {prefix}0001 (or 1, or {prefix}1); {lister}",
        text::one_line(raw, 60)
    )))
}

fn candidate_ref(raw: &str) -> anyhow::Result<String> {
    id_ref(
        raw,
        "cand-",
        "candidate",
        "`proctor candidate list` shows them",
    )
}

fn round_ref(raw: &str) -> anyhow::Result<String> {
    id_ref(
        raw,
        "rnd-",
        "round",
        "`proctor tribunal rounds <candidate>` lists them",
    )
}

/// The blind tribunal: up to eight jurors, one lens each, from families other than the
/// builder's, judging one blind envelope of a candidate's current bytes.
///
/// A round seats each lens on its tier's ladder: rungs of the builder's family (and of the
/// family of the tool the candidate's run was made with) are refused before any send; a dead
/// or silent juror is re-seated down the ladder; a lens left without a juror is HOLD, never
/// handed back to the builder. Verdicts are bound to the candidate identity: stale when one
/// byte changes. Only a unanimous cross-family pass on the current bytes satisfies a gate
/// policy's `require = ["tribunal"]`. See docs/tribunal.md.
///
/// Examples:
///   proctor tribunal seats                       the registry, each rung probed now
///   proctor tribunal seats --print-default > tribunal.toml   (then edit it, and move it
///                                                into the config folder `proctor home` names)
///   proctor tribunal red --workspace ws-0001 $(git rev-parse HEAD)
///   proctor tribunal convene --candidate cand-0001 --builder claude-opus-4 \
///       --intent "an escaped quote no longer ends a string" --criteria criteria.md
///   proctor tribunal rounds cand-0001
///   proctor tribunal show rnd-0001 --envelope
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TribunalArgs {
    #[command(subcommand)]
    pub command: TribunalCommand,
}

#[derive(Debug, Subcommand)]
pub enum TribunalCommand {
    Seats(SeatsArgs),
    Convene(ConveneArgs),
    Rounds(RoundsArgs),
    Show(ShowArgs),
    Red(RedArgs),
}

/// Show the registry (`config/tribunal.toml`, else the default): the lenses with their tier
/// and charter, and each ladder's rungs with backend, model, family, declared context,
/// local or not, and whether the rung is alive now (a probe per rung; no verdict spent).
///
/// A malformed tribunal.toml is refused by name: the file, the key or line, and the remedy.
///
/// Examples:
///   proctor tribunal seats
///   proctor tribunal seats --no-probe --json | jq '.registry.lenses[].name'
///   proctor tribunal seats --print-default      the default registry, commented, to copy
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SeatsArgs {
    /// Do not probe the rungs (each shows `unknown`).
    #[arg(long)]
    pub no_probe: bool,
    /// Print the default registry as TOML (what to copy to config/tribunal.toml) and exit.
    #[arg(long, conflicts_with_all = ["no_probe", "json"])]
    pub print_default: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Convene the tribunal on a candidate's current bytes and record a round (needs a write
/// token).
///
/// The builder is required: the model or family that made the change. Every rung of its
/// family is refused aloud, before any send, on every ladder. The envelope is built from the
/// candidate's current files (every changed file whole, plus its test files) and the review
/// contract (the intent, one line; the criteria, from FILE); a trace of the builder in it
/// refuses the round, naming what leaked and where. While the jurors sit, each seat's
/// decision is printed on stderr as it comes; stdout gets the round's summary.
///
/// --solo: only one family is available; the round is graded same-family-blind, not
/// cross-family, says so, and never counts for a gate.
///
/// Exit codes: 0 unanimous pass (cross-family, on these bytes); 1 the round refused, held or
/// was invalid (it is recorded: `proctor tribunal show`), or convening was refused; 2 bad
/// usage.
///
/// Example:
///   proctor tribunal convene --candidate cand-0001 --builder claude-opus-4 \
///       --intent "an escaped quote no longer ends a string" --criteria criteria.md
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ConveneArgs {
    /// The candidate: cand-0001 (or 1).
    #[arg(long, value_name = "C")]
    pub candidate: String,
    /// The model or family that built the change (claude-opus-4, gpt-5, anthropic, …).
    #[arg(long, value_name = "MODEL-OR-FAMILY")]
    pub builder: String,
    /// What the change is for, in one line.
    #[arg(long, value_name = "TEXT")]
    pub intent: String,
    /// A file stating the success criteria.
    #[arg(long, value_name = "FILE")]
    pub criteria: PathBuf,
    /// The round's folder (claimed with a stamp; refused if it holds round files without
    /// one). Default: the home's data/tribunal/rnd-NNNN/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One family available: graded same-family-blind, not cross-family.
    #[arg(long)]
    pub solo: bool,
    /// Print the round as JSON.
    #[arg(long)]
    pub json: bool,
}

/// List a candidate's rounds, oldest first: number, state, seats by state, new findings and
/// their trend, the mode.
///
/// Example: proctor tribunal rounds cand-0001
#[derive(Debug, Args)]
pub struct RoundsArgs {
    /// The candidate: cand-0001 (or 1).
    #[arg(value_name = "C")]
    pub candidate: String,
    /// Print `{"items": [...]}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Show one round: its identity and envelope, then per seat the routing table (every rung
/// tried, the one that sat, each refusal with its reason) and the findings.
///
/// Examples:
///   proctor tribunal show rnd-0001
///   proctor tribunal show 1 --envelope         the envelope the jurors read, exactly
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ShowArgs {
    /// The round: rnd-0001 (or 1).
    #[arg(value_name = "ROUND")]
    pub round: String,
    /// Also print the envelope's text.
    #[arg(long)]
    pub envelope: bool,
    /// Print the round as JSON (with --envelope: the envelope's view).
    #[arg(long)]
    pub json: bool,
}

/// Record a workspace's red-first commit: the commit of its failing test, made before the
/// build (needs a write token). A round then checks that the test files are unchanged since
/// it, and that the new tests fail with the change reverted.
///
/// Example: proctor tribunal red --workspace ws-0001 $(git rev-parse HEAD)
#[derive(Debug, Args)]
pub struct RedArgs {
    /// The workspace: ws-0001 (or 1).
    #[arg(long, value_name = "WS")]
    pub workspace: String,
    /// The full commit id.
    #[arg(value_name = "COMMIT")]
    pub commit: String,
    /// Print the record as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, args: TribunalArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        TribunalCommand::Seats(a) => seats(ctx, a),
        TribunalCommand::Convene(a) => convene(ctx, a),
        TribunalCommand::Rounds(a) => {
            let cand = candidate_ref(&a.candidate)?;
            let c = client(ctx)?;
            let rounds = client::block_on(c.tribunal_rounds(Some(&cand), None))??;
            if a.json {
                print_json(&crate::api::Items::new(rounds))?;
            } else {
                print!("{}", rounds_text(&cand, &rounds));
            }
            Ok(ExitCode::SUCCESS)
        }
        TribunalCommand::Show(a) => {
            let id = round_ref(&a.round)?;
            let c = client(ctx)?;
            let r = client::block_on(c.tribunal_round(&id))??;
            // The run's other rounds, for the trend of a round in progress.
            let known = client::block_on(c.tribunal_rounds(None, Some(&r.run_ref)))??;
            if a.envelope {
                let e = client::block_on(c.tribunal_envelope(&id))??;
                if a.json {
                    print_json(&e)?;
                } else {
                    print!("{}", round_text(&r, &known));
                    println!(
                        "envelope {} {} ({} bytes, ~{} tokens):",
                        t(&e.envelope.recipe, 40),
                        t(&e.envelope.digest, 80),
                        e.envelope.bytes,
                        e.envelope.tokens
                    );
                    println!("{}", text::multi_line(&e.text));
                }
            } else if a.json {
                print_json(&r)?;
            } else {
                print!("{}", round_text(&r, &known));
            }
            Ok(ExitCode::SUCCESS)
        }
        TribunalCommand::Red(a) => {
            let workspace = id_ref(
                &a.workspace,
                "ws-",
                "workspace",
                "`proctor workspace list` shows them",
            )?;
            let c = client(ctx)?;
            let rec = client::block_on(c.tribunal_record_red(&RedRequest {
                workspace,
                commit: a.commit.trim().to_string(),
            }))??;
            if a.json {
                print_json(&rec)?;
            } else {
                println!(
                    "{}: red-first commit {} recorded (ledger seq {})",
                    t(&rec.workspace, 16),
                    t(&rec.commit, 64),
                    rec.seq
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn seats(ctx: &Ctx, a: SeatsArgs) -> anyhow::Result<ExitCode> {
    if a.print_default {
        print!("{}", config::default_text());
        return Ok(ExitCode::SUCCESS);
    }
    let c = client(ctx)?;
    let report = client::block_on(c.tribunal_seats(!a.no_probe))??;
    if a.json {
        print_json(&report)?;
    } else {
        print!("{}", seats_text(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The registry and each ladder, one rung a line with its probe.
pub fn seats_text(r: &SeatsReport) -> String {
    let reg = &r.registry;
    let mut out = format!(
        "registry {} ({} lenses; families {})\n",
        t(&reg.source, 200),
        reg.lenses.len(),
        if reg.families().is_empty() {
            "-".to_string()
        } else {
            reg.families()
                .iter()
                .map(|f| t(f, 24))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    out.push_str("lenses\n");
    for l in &reg.lenses {
        out.push_str(&format!(
            "  {:<16} {:<18} {}\n",
            t(&l.name, 32),
            l.tier.as_str(),
            t(&l.charter, 100)
        ));
    }
    let mut ladders: Vec<(String, &[crate::api::tribunal::Rung])> = reg
        .ladders
        .iter()
        .map(|l| (l.tier.as_str().to_string(), l.rungs.as_slice()))
        .collect();
    ladders.push(("verifier".to_string(), reg.verifier.as_slice()));
    for (name, rungs) in ladders {
        out.push_str(&format!("ladder {name}\n"));
        let probes = r
            .probes
            .iter()
            .find(|p| p.ladder == name)
            .map(|p| p.rungs.as_slice())
            .unwrap_or(&[]);
        for (i, rung) in rungs.iter().enumerate() {
            let (state, detail) = match probes.get(i) {
                Some(p) => (t(&p.state, 8), t(&p.detail, 80)),
                None => ("unknown".to_string(), "not probed".to_string()),
            };
            let ctx = match (
                rung.context_tokens,
                probes.get(i).and_then(|p| p.context_max),
            ) {
                (Some(c), _) => format!("ctx {c}"),
                (None, Some(m)) => format!("ctx max {m}"),
                (None, None) => "ctx -".to_string(),
            };
            out.push_str(&format!(
                "  {i:>2} {:<7} {:<28} {:<10} {:<14} {:<5} {:<7} {}\n",
                rung.backend.as_str(),
                t(&rung.model, 28),
                t(&rung.family, 10),
                ctx,
                if rung.local { "local" } else { "cloud" },
                state,
                detail
            ));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("note: {}\n", t(n, 300)));
    }
    out
}

fn convene(ctx: &Ctx, a: ConveneArgs) -> anyhow::Result<ExitCode> {
    let candidate = candidate_ref(&a.candidate)?;
    let criteria = std::fs::read_to_string(&a.criteria).map_err(|e| {
        UsageError::new(format!(
            "cannot read the criteria file {}: {e}; give a readable text file that states the \
             success criteria (--criteria FILE)",
            super::show_path(&a.criteria)
        ))
    })?;
    let out = match &a.out {
        Some(p) => Some(
            std::path::absolute(p)
                .map_err(|e| UsageError::new(format!("--out {}: {e}", super::show_path(p))))?
                .to_string_lossy()
                .into_owned(),
        ),
        None => None,
    };
    let req = ConveneRequest {
        candidate: candidate.clone(),
        builder: a.builder.clone(),
        intent: a.intent.clone(),
        criteria,
        out,
        solo: Some(a.solo),
    };
    let c = client(ctx)?;
    let before: Vec<String> = client::block_on(c.tribunal_rounds(Some(&candidate), None))??
        .into_iter()
        .map(|r| r.id)
        .collect();
    let round: Round = client::block_on(async {
        let post = c.tribunal_convene(&req);
        tokio::pin!(post);
        let mut seen: Vec<(String, SeatState)> = Vec::new();
        loop {
            tokio::select! {
                r = &mut post => break r,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    let Ok(rounds) = c.tribunal_rounds(Some(&candidate), None).await else { continue };
                    let Some(r) = rounds.iter().rev().find(|r| !before.contains(&r.id)) else { continue };
                    for line in progress_lines(r, &mut seen) {
                        eprintln!("proctor tribunal: {line}");
                    }
                }
            }
        }
    })??;
    if a.json {
        print_json(&round)?;
    } else {
        print!("{}", round_text(&round, &[]));
    }
    Ok(if round.counts_for_gate() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The lines to print for what changed in `r` since `seen` (the seats already reported and
/// their states), which it updates: one line per seat that decided.
pub fn progress_lines(r: &Round, seen: &mut Vec<(String, SeatState)>) -> Vec<String> {
    let mut out = Vec::new();
    if seen.is_empty() {
        out.push(format!(
            "{} (round {} of {}): {} seats; builder {} ({}), excluded {}",
            t(&r.id, 16),
            r.number,
            t(&r.candidate, 16),
            r.seats.len(),
            t(&r.builder, 40),
            t(&r.builder_family, 24),
            r.excluded_families
                .iter()
                .map(|f| t(f, 24))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        seen.push((String::new(), SeatState::Pending));
    }
    for s in &r.seats {
        if s.state == SeatState::Pending {
            continue;
        }
        if seen.iter().any(|(l, st)| *l == s.lens && *st == s.state) {
            continue;
        }
        seen.retain(|(l, _)| *l != s.lens);
        seen.push((s.lens.clone(), s.state));
        let pending = r
            .seats
            .iter()
            .filter(|x| x.state == SeatState::Pending)
            .count();
        out.push(format!(
            "{} {}: {}{} ({pending} pending)",
            t(&r.id, 16),
            t(&s.lens, 32),
            s.state.as_str(),
            sat_text(s).map(|x| format!(" on {x}")).unwrap_or_default()
        ));
    }
    out
}

fn sat_text(s: &Seat) -> Option<String> {
    s.sat.as_ref().map(|x| {
        format!(
            "{} {} ({}{})",
            x.backend.as_str(),
            t(&x.model, 40),
            t(&x.family, 24),
            if x.local { ", local" } else { "" }
        )
    })
}

fn word(w: crate::api::tribunal::Word) -> &'static str {
    match w {
        crate::api::tribunal::Word::Pass => "pass",
        crate::api::tribunal::Word::Refuse => "refuse",
    }
}

fn counts_text(c: &crate::api::tribunal::Counts) -> String {
    format!(
        "{} blocker, {} major, {} minor, {} info",
        c.blocker, c.major, c.minor, c.info
    )
}

/// New findings per round of the run, oldest first: the convergence's trend once the round
/// ended; while it is in progress, the earlier rounds' (from `known`) and this one's so far.
fn trend_text(r: &Round, known: &[Round]) -> String {
    let join = |v: &[u32]| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" → ")
    };
    match &r.convergence {
        Some(c) => join(&c.trend),
        None => {
            let mut earlier: Vec<&Round> = known
                .iter()
                .filter(|o| o.run_ref == r.run_ref && o.number < r.number)
                .collect();
            earlier.sort_by_key(|o| o.number);
            let mut v: Vec<u32> = earlier.iter().map(|o| o.new_findings).collect();
            v.push(r.new_findings);
            format!("{} so far", join(&v))
        }
    }
}

/// A candidate's rounds, one a line.
pub fn rounds_text(candidate: &str, rounds: &[Round]) -> String {
    if rounds.is_empty() {
        return format!(
            "{candidate}: no round yet; `proctor tribunal convene --candidate {candidate} …` seats one\n"
        );
    }
    let mut out = String::new();
    for r in rounds {
        let by = |st: SeatState| r.seats.iter().filter(|s| s.state == st).count();
        out.push_str(&format!(
            "{} #{:<2} {:<15} pass {} refuse {} hold {} unverified {} rejected {} pending {}; new findings {} (trend {}); {}\n",
            t(&r.id, 16),
            r.number,
            r.state.as_str(),
            by(SeatState::Pass),
            by(SeatState::Refuse),
            by(SeatState::Hold),
            by(SeatState::Unverified),
            by(SeatState::Rejected),
            by(SeatState::Pending),
            r.new_findings,
            trend_text(r, rounds),
            t(&r.mode_note, 60),
        ));
    }
    out
}

fn attempt_text(a: &Attempt) -> String {
    format!(
        "      {:<8} {:>2} {:<7} {:<28} {:<10} {:<22} {}{}",
        t(&a.ladder, 8),
        a.rung,
        a.backend.as_str(),
        t(&a.model, 28),
        t(&a.family, 10),
        a.outcome.as_str(),
        t(&a.reason, 200),
        a.raw_tail
            .as_deref()
            .map(|r| format!("\n        said: {}", t(r, 200)))
            .unwrap_or_default()
    )
}

/// One round: its head, then each seat with its routing table and its findings.
pub fn round_text(r: &Round, known: &[Round]) -> String {
    let mut out = format!(
        "{} round {} of {} ({}): {}\n",
        t(&r.id, 16),
        r.number,
        t(&r.candidate, 16),
        t(&r.run_ref, 16),
        r.state.as_str()
    );
    out.push_str(&format!(
        "  identity {} {}\n  envelope {} {} ({} bytes, ~{} tokens, {} files)\n",
        t(&r.identity.recipe, 40),
        t(&r.identity.digest, 80),
        t(&r.envelope.recipe, 40),
        t(&r.envelope.digest, 80),
        r.envelope.bytes,
        r.envelope.tokens,
        r.envelope.files.len()
    ));
    out.push_str(&format!(
        "  builder {} (family {}); excluded on every ladder: {}\n  {}\n  intent: {}\n",
        t(&r.builder, 60),
        t(&r.builder_family, 24),
        r.excluded_families
            .iter()
            .map(|f| t(f, 24))
            .collect::<Vec<_>>()
            .join(", "),
        t(&r.mode_note, 80),
        t(&r.intent, 200)
    ));
    out.push_str(&format!(
        "  findings {}; new this round {}; trend {}\n",
        counts_text(&r.findings),
        r.new_findings,
        trend_text(r, known)
    ));
    if let Some(c) = &r.convergence {
        out.push_str(&format!(
            "  convergence {}: {}\n",
            t(&c.state, 16),
            t(&c.cause, 200)
        ));
    }
    if let Some(e) = &r.engine {
        out.push_str(&format!(
            "  engine {}{}\n",
            t(&e.state, 16),
            e.cause
                .as_deref()
                .map(|c| format!(": {}", t(c, 200)))
                .unwrap_or_default()
        ));
        for s in &e.steps {
            out.push_str(&format!(
                "    {:<16} {:<10} expect {:<4} {:<10} holds {}\n",
                t(&s.name, 16),
                t(&s.tree, 10),
                t(&s.expect, 4),
                t(&s.outcome, 10),
                s.holds
            ));
        }
    }
    for c in &r.causes {
        out.push_str(&format!("  cause: {}\n", t(c, 300)));
    }
    out.push_str("  seats\n");
    for s in &r.seats {
        out.push_str(&format!(
            "    {:<16} {:<18} {:<10} {}\n",
            t(&s.lens, 32),
            s.tier.as_str(),
            s.state.as_str(),
            sat_text(s)
                .map(|x| format!("sat on {x}"))
                .unwrap_or_else(|| "no rung sat".into())
        ));
        if let Some(c) = &s.cause {
            out.push_str(&format!("      why: {}\n", t(c, 300)));
        }
        out.push_str("      routing (ladder, rung, backend, model, family, outcome, reason)\n");
        for a in &s.routing {
            out.push_str(&attempt_text(a));
            out.push('\n');
        }
        if let Some(v) = &s.verification {
            out.push_str(&format!("      verification: {}\n", t(&v.state, 16)));
        }
        match &s.judged {
            Some(Judged::Verdict {
                verdict,
                counted,
                notes,
                bare,
            }) => {
                out.push_str(&format!(
                    "      verdict {} counted {}{}: {}\n",
                    word(verdict.verdict),
                    word(*counted),
                    if *bare {
                        " (bare: counts, never alone)"
                    } else {
                        ""
                    },
                    counts_text(&s.findings)
                ));
                for n in notes {
                    out.push_str(&format!("      note: {}\n", t(n, 300)));
                }
                for f in &verdict.findings {
                    out.push_str(&format!(
                        "      [{}] {}\n        evidence: {}\n",
                        f.severity.as_str(),
                        t(&f.claim, 300),
                        t(&f.evidence, 300)
                    ));
                }
            }
            Some(Judged::OffLens { answered, raw_tail }) => out.push_str(&format!(
                "      answered for lens {}: {}\n",
                t(answered, 32),
                t(raw_tail, 200)
            )),
            Some(Judged::Bad { problem, raw_tail }) => out.push_str(&format!(
                "      a bad answer (counts as refuse): {}: {}\n",
                t(problem, 200),
                t(raw_tail, 200)
            )),
            None => {}
        }
    }
    if r.state == RoundState::InProgress {
        out.push_str("  in progress: `proctor tribunal show` again for the seats still pending\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::tribunal::{
        Backend, Ladder, LadderProbe, Lens, Probe, Registry, Rung, SeatsReport, Tier,
    };
    use crate::demo::tribunal::{Spec, sample_round};

    fn round(in_progress: bool) -> Round {
        let home =
            crate::home::Home::resolve_with(Some(std::path::Path::new("/tmp/ph-x")), None).unwrap();
        sample_round(
            &home,
            &Spec {
                id: "rnd-0004".into(),
                number: 2,
                candidate: "cand-0001".into(),
                run: "run-0001".into(),
                identity: crate::evidence::store::DigestRef {
                    recipe: "candidate-identity-sha256/1".into(),
                    digest: "cd".repeat(32),
                },
                in_progress,
                earlier: vec![4],
            },
        )
    }

    /// While a round is convened, one line when it appears, then one per seat when it
    /// decides, never twice for the same decision; a seat that changes state is told again.
    #[test]
    fn convene_progress_tells_each_decision_once() {
        let mut seen = Vec::new();
        let mut r = round(true);
        let first = progress_lines(&r, &mut seen);
        assert!(first[0].starts_with("rnd-0004 (round 2 of cand-0001): 8 seats; builder claude-opus-4 (anthropic), excluded anthropic, openai"), "{first:?}");
        assert_eq!(first.len(), 1 + 6, "{first:?}");
        assert!(
            first
                .iter()
                .any(|l| l
                    == "rnd-0004 security: refuse on openai fake-blocker (mistral) (2 pending)"),
            "{first:?}"
        );
        assert!(progress_lines(&r, &mut seen).is_empty());
        // The slow juror answers.
        r.seats[2].state = SeatState::Pass;
        let next = progress_lines(&r, &mut seen);
        assert_eq!(next, vec!["rnd-0004 state: pass (1 pending)".to_string()]);
        assert!(progress_lines(&r, &mut seen).is_empty());
    }

    /// The registry's ladders, one rung a line with its probe; a hostile model name from the
    /// configuration is drawn as markers.
    #[test]
    fn seats_text_shows_each_rung_with_its_probe() {
        let rung = |backend, model: &str, family: &str, local| Rung {
            backend,
            model: model.into(),
            family: family.into(),
            context_tokens: None,
            base_url: None,
            key: None,
            local,
            timeout_secs: 600,
            profile: None,
        };
        let report = SeatsReport {
            registry: Registry {
                source: "/h/config/tribunal.toml".into(),
                lenses: vec![Lens {
                    name: "defect".into(),
                    charter: "find defects".into(),
                    tier: Tier::DeepState,
                }],
                ladders: vec![Ladder {
                    tier: Tier::DeepState,
                    rungs: vec![
                        rung(Backend::Claude, "claude-opus-4", "anthropic", false),
                        rung(Backend::Ollama, "qwen\u{1b}[2J3", "alibaba", true),
                    ],
                }],
                verifier: vec![rung(Backend::Openai, "gpt-5-mini", "openai", false)],
            },
            probes: vec![LadderProbe {
                ladder: "deep-state".into(),
                rungs: vec![
                    Probe {
                        state: "alive".into(),
                        detail: "claude 2.1.0".into(),
                        context_max: None,
                    },
                    Probe {
                        state: "dead".into(),
                        detail: "connection refused (127.0.0.1:11434)".into(),
                        context_max: Some(32768),
                    },
                ],
            }],
            notes: vec![],
        };
        let s = seats_text(&report);
        assert!(
            s.starts_with(
                "registry /h/config/tribunal.toml (1 lenses; families alibaba, anthropic, openai)"
            ),
            "{s}"
        );
        assert!(
            s.contains("  defect           deep-state         find defects"),
            "{s}"
        );
        assert!(
            s.contains("ladder deep-state\n   0 claude  claude-opus-4"),
            "{s}"
        );
        assert!(s.contains("alive   claude 2.1.0"), "{s}");
        assert!(s.contains("ctx max 32768"), "{s}");
        assert!(s.contains("local dead    connection refused"), "{s}");
        assert!(!s.contains('\u{1b}'), "{s}");
        // The verifier was not probed: unknown, said so.
        assert!(
            s.contains("ladder verifier\n   0 openai  gpt-5-mini"),
            "{s}"
        );
        assert!(s.contains("unknown not probed"), "{s}");
    }
}
