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
/// With `--host H` (before INTENT) the approval runs on H, with H's key: proctor runs
/// `ssh -t H proctor --host local publish approve INTENT` at this terminal (never in batch
/// mode), sshd gives the remote proctor a terminal of its own on H, and you type the
/// revision and the passphrase into this terminal; the key is decrypted on H and never
/// leaves it. Refused before any ssh runs when stdin or stdout is not this process's
/// terminal. The exit status is the remote approval's (255: ssh failed). See
/// docs/remote.md.
///
/// Example: proctor publish approve int-0001
/// Example: proctor --host build publish approve int-0001
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
    // On another host, the approval runs there, at a PTY sshd allocates for the person.
    let command = match args.command {
        PublishCommand::Approve(a) => {
            return match remote_host() {
                Some(host) => approve_remote(&home, &host, a),
                None => approve_here(&home, a),
            };
        }
        other => other,
    };
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    let c = client.with_token(&home)?;
    match command {
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
        PublishCommand::Approve(_) => unreachable!("handled above"),
    }
}

/// The host `--host` (or `PROCTOR_HOST`) names, if any (`--host local` clears it).
fn remote_host() -> Option<String> {
    std::env::var_os(crate::remote::HOST_ENV)
        .filter(|v| !v.is_empty())
        .map(|v| v.to_string_lossy().into_owned())
}

/// The offered words, dropped at once and never read (zeroed in place first); how many.
fn drop_offered(a: &mut ApproveArgs) -> usize {
    let offered = a.offered.len();
    for mut w in std::mem::take(&mut a.offered) {
        zeroize::Zeroize::zeroize(&mut w);
    }
    offered
}

/// The approval on this machine's server, with this machine's key.
fn approve_here(home: &crate::home::Home, mut a: ApproveArgs) -> anyhow::Result<ExitCode> {
    let id = intent::normalize_id(&a.intent).map_err(|e| UsageError::new(e.to_string()))?;
    let offered = drop_offered(&mut a);
    let client = Client::new(home)?;
    client::block_on(client.ensure_server(home))??;
    let c = client.with_token(home)?;
    let key = keys::default_key_path(home);
    let outcome = if offered > 0 {
        approve::run(&c, &key, &id, &mut approve::OfferedPrompter::new(offered))
    } else {
        approve::run(&c, &key, &id, &mut TtyPrompter::new())
    };
    report(&outcome);
    Ok(ExitCode::from(outcome.exit_code()))
}

/// The most of the remote approval's output kept to find its outcome line.
const REMOTE_TAIL: usize = 16 * 1024;

/// `proctor --host H publish approve ID`: the approval runs on H, by `ssh -t H proctor --host
/// local publish approve ID` (docs/remote.md, "Publication approvals"). sshd allocates a PTY
/// on H for the person: the remote proctor runs at that controlling terminal and proves it to
/// H's server exactly as a local approval does; the person types the revision and H's key's
/// passphrase into this terminal, and ssh carries the keys; the key is decrypted on H and
/// never leaves it. Refused here, before any ssh runs, when this is not a person's terminal,
/// when words were offered after INTENT, or when the intent is not an intent id. The exit
/// status is the remote approval's (255: ssh itself failed).
fn approve_remote(
    home: &crate::home::Home,
    host: &str,
    mut a: ApproveArgs,
) -> anyhow::Result<ExitCode> {
    use std::io::{IsTerminal, Read, Write};
    // Validated as an intent id before it is placed in a remote command line.
    let id = intent::normalize_id(&a.intent).map_err(|e| UsageError::new(e.to_string()))?;
    let offered = drop_offered(&mut a);
    let shown = text::one_line(host, 80);
    let refuse = |code: &str, why: String| -> anyhow::Result<ExitCode> {
        eprintln!("proctor: refused ({code}): {why}");
        eprintln!("nothing was run on {shown}: no ssh was started");
        Ok(ExitCode::from(1))
    };
    if offered > 0 {
        return refuse(
            approve::PromptError::Offered(offered).code(),
            approve::PromptError::Offered(offered).to_string(),
        );
    }
    let terminal = crate::authority::tty::check_input_terminal(libc::STDIN_FILENO)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            if std::io::stdout().is_terminal() {
                Ok(())
            } else {
                Err("stdout is not a terminal".to_string())
            }
        });
    if let Err(why) = terminal {
        return refuse(
            "no_terminal",
            format!(
                "approving on {shown} runs `ssh -t {shown} proctor publish approve {id}` at                  your terminal: you type the revision and the passphrase there. Here {why}.                  Run it yourself, at a terminal (not through a pipe, a script or in the                  background)"
            ),
        );
    }
    let remote = crate::remote::Remote::resolve(host, &home.config)?;
    let mut cmd = remote.terminal_command(&["--host", "local", "publish", "approve", &id])?;
    cmd.stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running ssh to {shown}"))?;
    // What the remote terminal shows passes through to this one as it comes; its tail is
    // kept to name the outcome afterwards (the remote's report is on its terminal: stdout).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    if let Some(mut out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut buf = [0u8; 4096];
            let mut me = std::io::stdout();
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let _ = me.write_all(&buf[..n]);
                let _ = me.flush();
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * REMOTE_TAIL {
                    tail.drain(..tail.len() - REMOTE_TAIL);
                }
            }
            let _ = done_tx.send(tail);
        });
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for ssh to {shown}"))?;
    let tail = done_rx
        .recv_timeout(std::time::Duration::from_secs(2))
        .unwrap_or_default();
    let code = status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1));
    match remote_outcome(&tail) {
        Some(line) => eprintln!("proctor: on {shown}: {line}"),
        None if code == 0 => eprintln!("proctor: on {shown}: the approval ended with exit 0"),
        None => eprintln!(
            "proctor: on {shown}: the approval ended with {status}{}",
            if code == 255 {
                " (ssh failed: what it said is above)"
            } else {
                ""
            }
        ),
    }
    Ok(ExitCode::from(code))
}

/// The remote approval's outcome line in what its terminal showed (its `report`: `published
/// …` or `proctor: refused (CODE): …`), the last one, sanitised.
fn remote_outcome(tail: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(tail);
    s.split('\n')
        .map(|l| l.trim_matches(|c| c == '\r' || c == ' '))
        .rev()
        .find_map(|l| {
            ["published int-", "proctor: refused ("]
                .iter()
                .find_map(|m| l.find(m))
                .map(|at| &l[at..])
        })
        .map(|l| text::one_line(l.strip_prefix("proctor: ").unwrap_or(l), 300))
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

#[cfg(test)]
mod tests {
    use super::remote_outcome;

    /// The remote approval's last outcome line is found in what its terminal showed, behind
    /// an escape sequence too, and comes back sanitised.
    #[test]
    fn the_remote_outcome_line_is_found_and_sanitised() {
        let shown = b"Revision: 0123\r\nPassphrase for the publish key: \r\n\
            proctor: refused (wrong_revision): the revision typed is not the intent's\r\n\
            receipt /h/rcpt-0001.json (redacted)\r\n";
        assert_eq!(
            remote_outcome(shown).as_deref(),
            Some("refused (wrong_revision): the revision typed is not the intent's")
        );
        let shown = b"\x1b[2Kpublished int-0001: abc pushed to fix\x1b]0;pwned\x07\r\npull request #1 u\r\n";
        let line = remote_outcome(shown).unwrap();
        assert!(
            line.starts_with("published int-0001: abc pushed to fix"),
            "{line}"
        );
        assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
        assert_eq!(remote_outcome(b"Connection to h closed.\r\n"), None);
    }
}
