//! `proctor publish propose|list|show|approve`: publication intents and their approval.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::Method;

use super::{Ctx, UsageError, print_json, show_path};
use crate::api::Items;
use crate::api::publish::{self as wire, Intent, IntentView, ProposeRequest};
use crate::authority::keys;
use crate::client::{self, Client};
use crate::publish::approve::{self, Outcome, TtyPrompter};
use crate::publish::intent;
use crate::text;

/// Publish a bound candidate: one commit, pushed with a lease, and a pull request.
///
/// An agent's work reaches a branch others can see only through this path. `propose` makes
/// an intent from a run's bound candidate; it awaits authority only when the evidence passes
/// for that exact candidate. `approve` is for a person at a terminal: it shows the intent,
/// asks for the full revision to be typed and for the publish key's passphrase (read from
/// the controlling terminal only; no option, variable, file or pipe can supply it), then
/// moves the local branch, pushes with the lease, and opens the pull request. Nothing
/// merges: proctor has no merge capability.
///
/// The forge is configured in <home config>/forge.toml (see docs/publish.md). Exit codes:
/// 0 done; 1 refused or failed (the reason is printed; an approval always leaves a receipt);
/// 2 bad usage.
#[derive(Debug, Args)]
pub struct PublishArgs {
    #[command(subcommand)]
    pub command: PublishCommand,
}

#[derive(Debug, Subcommand)]
pub enum PublishCommand {
    Propose(ProposeArgs),
    List(ListArgs),
    /// Show one intent: its candidate, revision, branch, lease, forge target and state.
    ///
    /// Example: proctor publish show int-0001
    Show(ShowArgs),
    Approve(ApproveArgs),
}

/// Make a publication intent from a run's latest bound candidate.
///
/// The intent's revision is the full id of a commit object built from the candidate's tree
/// on its base (`git commit-tree`; no ref moves), with TITLE (and the body) as its message
/// and your git user.name/user.email as author; the intent stores everything needed to
/// rebuild it byte for byte. It also records the remote's URL and the branch's current tip:
/// the push's lease (an absent branch must still be absent).
///
/// Prints the intent and its state: AWAITING_AUTHORITY when the gate says the evidence
/// passes for that exact candidate, else BLOCKED with its causes (exit 0 either way: the
/// intent exists). Exit 1 when the server refuses (no bound candidate, unknown remote, no
/// forge configuration, …).
///
/// Example: proctor publish propose --run run-0003 --remote origin --branch fix-parser \
/// --title "Fix the parser" --body-file notes.md
#[derive(Debug, Args)]
pub struct ProposeArgs {
    /// The run whose latest bound candidate is published.
    #[arg(long, value_name = "REF")]
    pub run: String,
    /// The git remote (of the run's repository) to push to.
    #[arg(long, value_name = "NAME")]
    pub remote: String,
    /// The remote branch to create or move (never checked out anywhere).
    #[arg(long, value_name = "B")]
    pub branch: String,
    /// The commit's and the pull request's title (one line).
    #[arg(long, value_name = "T")]
    pub title: String,
    /// The commit's and the pull request's body, read from this file.
    #[arg(long, value_name = "F")]
    pub body_file: Option<PathBuf>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// List the intents, oldest first: ID, STATE, RUN, BRANCH, REVISION, TITLE.
///
/// Example: proctor publish list --json
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The intent: int-0001 (or 1).
    #[arg(value_name = "INTENT")]
    pub intent: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Authorise one publication, at this terminal, with your publish key.
///
/// Before anything is spent, the server re-reads the remote branch (the lease) and
/// re-derives the candidate, the gate and the commit; if anything moved it refuses and says
/// what. The receipt file is reserved first. Then every field that came from the agent, the
/// remote or the forge is shown (sanitised, bounded), you type the full revision (compared
/// exactly) and the passphrase of your publish key (masked). Only then is the key
/// decrypted, a single-use authorisation minted (random nonce, 120 s expiry, bound to the
/// revision, the ledger head and the key), appended to the ledger and spent: the local
/// branch moves, the revision is pushed with the lease, the pull request opens.
///
/// Reads only from the controlling terminal: run through a pipe, without a terminal, or in
/// the background, it refuses. There is no option, variable or file for the passphrase.
///
/// Prints the pull request and the receipt (a DSSE envelope, signed, with a detached
/// SSHSIG beside it). Exit 0 when published with a signed receipt; exit 1 on any refusal
/// (no terminal, Ctrl-C, wrong revision, wrong passphrase, stale candidate, lease moved,
/// …), each named, always with a receipt (redacted: no secret, the refusal named).
///
/// INTENT is the last word: anything after it (an answer, `--passphrase …`, even `--home`)
/// makes the approval refuse itself, unread. Put options before INTENT.
///
/// Example: proctor publish approve int-0001
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The intent: int-0001 (or 1).
    #[arg(value_name = "INTENT")]
    pub intent: String,
    /// Nothing else is accepted: any further word (`--passphrase x`, a revision, …) makes the
    /// approval refuse itself with a redacted receipt. The words are never read or recorded.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        hide = true,
        value_name = "NOTHING"
    )]
    pub offered: Vec<String>,
}

pub fn run(ctx: &Ctx, args: PublishArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    let c = client.with_token(&home)?;
    match args.command {
        PublishCommand::Propose(a) => propose(&c, a),
        PublishCommand::List(a) => list(&c, a),
        PublishCommand::Show(a) => {
            let id = intent::normalize_id(&a.intent).map_err(|e| UsageError::new(e.to_string()))?;
            let v: IntentView = c.get_blocking(&wire::intent(&id))?;
            if a.json {
                print_json(&v)?;
            } else {
                print!("{}", describe(&v.intent));
            }
            Ok(ExitCode::SUCCESS)
        }
        PublishCommand::Approve(a) => {
            let id = intent::normalize_id(&a.intent).map_err(|e| UsageError::new(e.to_string()))?;
            let key = keys::default_key_path(&home);
            let offered = a.offered.len();
            // Dropped at once, never read: zeroed in place first.
            for mut w in a.offered {
                zeroize::Zeroize::zeroize(&mut w);
            }
            let outcome = if offered > 0 {
                approve::run(&c, &key, &id, &mut approve::OfferedPrompter::new(offered))
            } else {
                approve::run(&c, &key, &id, &mut TtyPrompter::new())
            };
            report(&outcome);
            Ok(ExitCode::from(outcome.exit_code()))
        }
    }
}

fn propose(c: &Client, a: ProposeArgs) -> anyhow::Result<ExitCode> {
    let body = match &a.body_file {
        Some(p) => {
            let meta = std::fs::metadata(p)
                .with_context(|| format!("reading the body file {}", show_path(p)))?;
            if meta.len() > intent::MAX_BODY_BYTES as u64 {
                return Err(UsageError::new(format!(
                    "the body file {} is larger than {} bytes",
                    show_path(p),
                    intent::MAX_BODY_BYTES
                )));
            }
            let bytes = std::fs::read(p)
                .with_context(|| format!("reading the body file {}", show_path(p)))?;
            String::from_utf8(bytes).map_err(|_| {
                UsageError::new(format!("the body file {} is not UTF-8", show_path(p)))
            })?
        }
        None => String::new(),
    };
    let req = ProposeRequest {
        run: a.run,
        remote: a.remote,
        branch: a.branch,
        title: a.title,
        body,
    };
    let it: Intent = c.request_blocking(Method::POST, &wire::intents(), Some(&req))?;
    if a.json {
        print_json(&it)?;
    } else {
        print!("{}", describe(&it));
    }
    Ok(ExitCode::SUCCESS)
}

fn tip(t: &Option<String>) -> String {
    t.clone().unwrap_or_else(|| "absent".into())
}

/// An intent for the terminal: every stored string through the sanitiser.
fn describe(it: &Intent) -> String {
    let f = |label: &str, v: &str| format!("{label:<10} {}\n", text::one_line(v, 120));
    let mut s = f(&it.id, it.state.label());
    s += &f("run", &it.run);
    s += &f(
        "candidate",
        &format!(
            "{} {}",
            it.candidate.id,
            crate::candidate::render_digest(&it.candidate.digest)
        ),
    );
    s += &f("revision", &it.revision);
    s += &f("title", &it.title);
    s += &f("branch", &it.branch);
    s += &f("remote", &format!("{} {}", it.remote.name, it.remote.url));
    s += &f("lease", &format!("expected tip {}", tip(&it.expected_tip)));
    s += &f(
        "forge",
        &format!(
            "{} {}/{} into {}",
            it.forge.api_base, it.forge.owner, it.forge.repo, it.forge.base
        ),
    );
    for c in &it.causes {
        s += &f("blocked", c);
    }
    if let Some(o) = &it.outcome {
        if let Some(pr) = &o.effects.pull_request {
            s += &f("pull req", &format!("#{} {}", pr.number, pr.html_url));
        }
        if let Some(e) = &o.error {
            s += &f("error", &e.message);
        }
    }
    if it.state == intent::IntentState::AwaitingAuthority {
        s += &format!(
            "next: a person approves it at a terminal: proctor publish approve {}\n",
            it.id
        );
    }
    s
}

fn list(c: &Client, a: ListArgs) -> anyhow::Result<ExitCode> {
    let v: Items<IntentView> = c.get_blocking(&wire::intents())?;
    if a.json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let items: Vec<Intent> = v.items.into_iter().map(|i| i.intent).collect();
    if items.is_empty() {
        println!("no intents (propose one with `proctor publish propose`)");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<9} {:<18} {:<9} {:<24} {:<12} TITLE",
        "ID", "STATE", "RUN", "BRANCH", "REVISION"
    );
    let awaiting = items
        .iter()
        .filter(|i| i.state == intent::IntentState::AwaitingAuthority)
        .count();
    for i in &items {
        println!(
            "{:<9} {:<18} {:<9} {:<24} {:<12} {}",
            text::one_line(&i.id, 9),
            i.state.label(),
            text::one_line(&i.run, 9),
            text::one_line(&i.branch, 24),
            text::one_line(&i.revision, 12),
            text::one_line(&i.title, 60)
        );
    }
    println!("{awaiting} awaiting authority");
    Ok(ExitCode::SUCCESS)
}

fn report(outcome: &Outcome) {
    match outcome {
        Outcome::Published {
            intent,
            revision,
            branch,
            pull_request,
            receipt,
        } => {
            println!(
                "published {}: {} pushed to {}",
                text::one_line(intent, 20),
                text::one_line(revision, 80),
                text::one_line(branch, 120)
            );
            println!(
                "pull request #{} {}",
                pull_request.number,
                text::one_line(&pull_request.html_url, 200)
            );
            println!("receipt {}", show_path(&receipt.path));
            if !receipt.signed {
                eprintln!(
                    "proctor: error: the receipt could not be signed; it stays unsigned at {}",
                    show_path(&receipt.path)
                );
            }
        }
        Outcome::Refused {
            code,
            message,
            receipt,
        } => {
            eprintln!(
                "proctor: refused ({}): {}",
                text::one_line(code, 40),
                text::multi_line(message)
            );
            match receipt {
                Some(r) => eprintln!(
                    "receipt {} ({})",
                    show_path(&r.path),
                    if r.signed { "signed" } else { "redacted" }
                ),
                None => eprintln!("nothing was reserved or done"),
            }
        }
    }
}
