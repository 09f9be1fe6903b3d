//! `proctor session …`: start agent sessions, list and inspect them, type into them, watch
//! them (`tail`, `attach`), stop and resume them, and keep per-operator marks on them. Every
//! verb talks to the server of the home (starting it when it is absent) under
//! `/v1/m/sessions/runs`.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use clap::{ArgGroup, Args, Subcommand};
use hyper::Method;
use serde_json::Value;

use super::{Ctx, UsageError, print_json, show_path};
use crate::api::runs::{
    self as wire, Accepted, CleanedUp, CleanupBody, Deleted, HoldView, InputRequest, MarksView,
    RenameBody, RunDiff, RunDiffFile, RunEvents, RunPage, RunView, SizeBody, SnoozeBody,
    StartRequest, State, Stopped,
};
use crate::client::{self, Client};
use crate::text;

mod activity;
pub(crate) mod attach;
mod export;
mod handoff;
mod hook;
mod messages;
mod output;
pub(crate) mod permissions;
mod reconnect;
mod tail;

/// Start, watch, steer and tidy agent sessions (runs) held by the server.
///
/// A session is a provider CLI (claude, codex, gemini, grok, opencode) that the server runs
/// as its own child, under a pseudo-terminal (pty) or over pipes (pipe, the tool's stdio
/// protocol). It outlives this command, the terminal and the SSH connection: the server
/// keeps it, and any client can watch it, type into it or stop it later.
///
/// A run is named by its ref (run-0001; `1` and `run-1` are accepted too). Runs that a
/// provider fake backs (`proctor demo-agent`, put on PATH as the tool) are labelled demo:
/// their output is a demo, not a model's.
///
/// Every command starts the server when none runs for the home. Exit codes: 0 success;
/// 1 the server refused (its status and message are printed) or the operation failed;
/// 2 bad usage or an unsafe home. `tail --follow` exits with the run's own exit status (see its help).
#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub command: SessionCommand,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    Start(StartArgs),
    List(ListArgs),
    /// Show one run: what it runs, where, its state, its observed exit and your marks.
    ///
    /// The state is derived from the events the server observed (starting, running, idle,
    /// stopped, failed, lost, cleaned); an exit code appears only once the OS reported one.
    Show(RefArgs),
    /// The run's lifecycle events (the ledger's lines for it), oldest first.
    Events(RefArgs),
    Attach(attach::AttachArgs),
    Tail(tail::TailArgs),
    Input(InputArgs),
    /// Interrupt the run's current turn; the process stays.
    ///
    /// Uses the tool's own protocol on pipe runs (claude control_request, codex
    /// turn/interrupt, ACP session/cancel); on PTY runs what a person's Ctrl-C does: SIGINT
    /// to the terminal's foreground group when the terminal is cooked, the ^C key typed when
    /// the tool holds it in raw mode (a full-screen TUI). Exit 1 (409) when the run is not live.
    Interrupt(RefArgs),
    /// Stop the run: SIGTERM to its process group, SIGKILL after the grace period.
    ///
    /// Returns once the exit is observed and prints it. Stopping a run that is not live
    /// changes nothing.
    Stop(RefArgs),
    Resume(ResumeArgs),
    Move(MoveArgs),
    Handoff(handoff::HandoffArgs),
    /// Pin the run in your list (at most 20 pins; the oldest drops). Yours only.
    Pin(RefArgs),
    /// Unpin the run. Idempotent.
    Unpin(RefArgs),
    Snooze(SnoozeArgs),
    /// End your snooze of the run.
    Unsnooze(RefArgs),
    /// Mark the run done in your list. Idempotent.
    Done(RefArgs),
    /// Remove your done mark. Idempotent.
    Undone(RefArgs),
    Rename(RenameArgs),
    /// Archive the run for everyone: lists leave it out.
    ///
    /// It keeps running; nothing is deleted. Idempotent: archiving an archived run keeps its
    /// date and records nothing.
    Archive(RefArgs),
    /// Unarchive the run. Idempotent.
    Unarchive(RefArgs),
    Diff(DiffArgs),
    Export(export::ExportArgs),
    Cleanup(CleanupArgs),
    /// Delete a cleaned run's record and transcripts (needs an admin token).
    ///
    /// Exit 1 (409) when the run was not cleaned up first. The ledger keeps its history.
    Delete(RefArgs),
    Permissions(permissions::PermissionsArgs),
    Permit(permissions::PermitArgs),
    Messages(messages::MessagesArgs),
    Activity(activity::ActivityArgs),
    Hook(hook::HookArgs),
}

/// Every state the server derives for a run, in its lifecycle order: what `list --state`
/// accepts (clap refuses anything else with exit 2 and lists these, as `--help` does).
const STATES: [State; 9] = [
    State::Starting,
    State::Running,
    State::Idle,
    State::Stopped,
    State::Failed,
    State::Lost,
    State::Cleaned,
    State::Recovering,
    State::Blocked,
];

/// Never called: a new [`State`] fails to compile here until it is added to [`STATES`].
#[allow(dead_code)]
fn states_are_complete(s: State) {
    match s {
        State::Starting
        | State::Running
        | State::Idle
        | State::Stopped
        | State::Failed
        | State::Lost
        | State::Cleaned
        | State::Recovering
        | State::Blocked => {}
    }
}

/// A run ref, and --json.
#[derive(Debug, Args)]
pub struct RefArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Start a session: launch a provider CLI in a workspace, owned by the server.
///
/// Name the tool (--tool) or one of your profiles (--profile; `proctor profile list`). The
/// tool is found on this command's PATH (sent to the server with the request; absolute
/// entries only, no shell), so a tool installed after the server started is found; the run
/// keeps that PATH, and a resume uses it. It runs in the workspace folder, with a cleaned
/// environment (no API keys, no proxies).
///
/// The run is a PTY run (the tool's interactive terminal form, for `attach` and the
/// cockpit) unless --transport pipe asks for the tool's stdio protocol.
///
/// Words after `--` are the first prompt: a first turn on a pipe run; on a PTY run the
/// server types them once the tool has written its first output, then Enter, as a person
/// would.
///
/// With --worktree the tool works in a new git worktree on a new branch
/// (proctor/<run-ref>) of the workspace's repository, under the home's worktrees folder:
/// the workspace must be a registered workspace (`proctor workspace add`) at the root of a
/// git repository with a commit, writable, whose git config names no filter or include,
/// and its setup command must be approved (or --no-setup). --from starts it at a local
/// branch or a full commit id instead of the workspace's current commit; nothing else
/// moves. See docs/worktrees.md.
///
/// With --rig RIG the provider process runs inside a namespace rig (`proctor rig open
/// --backend namespace`): in the rig's user, mount, pid and network namespaces, working in
/// the rig's /work (or /root), with only `lo` and the rig's allowed services; the run's
/// record, its view and its receipts name that boundary ("namespace boundary: weaker than a
/// VM") instead of "not confined". The tool must be visible inside the rig at the path it
/// resolves to here (a rig without an image sees the host's /usr read-only; a demo shim
/// runs as the rig's proctor). A person's lock on the rig refuses an agent (423); a VM rig
/// is refused (its image has no provider CLI); --worktree is refused (the rig works in its
/// own copy: `proctor rig fetch` brings commits back). Closing the rig ends the session.
///
/// Prints the run's ref and state; exit 1 when the server refused (422 for an unfit
/// repository or --from value, 409 for an unapproved setup command or project config, 503
/// when the home cannot hold worktrees) or the tool failed to launch (with the reason).
///
/// Example: proctor session start --tool claude --workspace ~/src/app --worktree --from main
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["profile", "tool"])))]
pub struct StartArgs {
    /// A profile name (a tool and its account home).
    #[arg(long)]
    pub profile: Option<String>,
    /// A tool, with its default profile.
    #[arg(long, value_parser = ["claude", "codex", "gemini", "grok", "opencode"])]
    pub tool: Option<String>,
    /// The folder the tool works in, or a registered workspace's ref (ws-0001).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: std::path::PathBuf,
    /// Work in a new git worktree and branch of the workspace's repository.
    #[arg(long)]
    pub worktree: bool,
    /// With --worktree: start at this local branch or full commit id (40 or 64 hex digits).
    #[arg(long, value_name = "REV", requires = "worktree")]
    pub from: Option<String>,
    /// With --worktree: skip the workspace's setup command for this one start.
    #[arg(long, requires = "worktree")]
    pub no_setup: bool,
    /// pty: the tool's interactive terminal form, for `attach` and the cockpit (the
    /// default, as in the cockpit's new-session dialog and the API). pipe: its stdio
    /// protocol (turns, clean interrupts).
    #[arg(long, default_value = crate::providers::DEFAULT_TRANSPORT.name(), value_parser = ["pipe", "pty"])]
    pub transport: String,
    /// A name for the run (at most 200 characters; no control or invisible characters).
    #[arg(long)]
    pub name: Option<String>,
    /// Run the provider inside this namespace rig (rig-0001): its boundary, not the host's.
    #[arg(long, value_name = "RIG", conflicts_with = "worktree")]
    pub rig: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
    /// The first prompt (after `--`).
    #[arg(last = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// What a worktree run's branch changed since it left the workspace's current commit.
///
/// Lists the changed paths (A added, D deleted, M modified, T type changed) between the
/// merge base of the branch tip and the workspace's current commit (base) and the branch
/// tip (head). Only committed work shows: uncommitted files in the worktree do not. At most
/// 200 paths are listed; a footer says when there are more.
///
/// With --path P, prints P's text at base and at head instead (each cut at 64 KiB; a
/// binary file shows no text). Everything from the repository is printed through the
/// sanitiser.
///
/// Exit 1 when the server refuses: 404 for a run without a worktree or a path the branch
/// did not change, 409 when the branch is gone or shares no history with the workspace,
/// 413 for a file over 16 MiB.
///
/// Example: proctor session diff run-0003 --path src/main.rs
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Show this path's text at base and at head.
    #[arg(long, value_name = "P")]
    pub path: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Release a run that is not live; only delete remains afterwards.
///
/// Its marks are dropped and the server lets go of its output. A worktree run is released
/// only when nothing would be lost: its branch is merged into the workspace's current
/// branch, the worktree is on that branch, and it has no uncommitted file. The worktree
/// and its (merged) branch are then removed. Otherwise the server refuses (exit 1, 409)
/// naming every reason, and the run stays.
///
/// --discard-worktree removes the worktree and its branch anyway (the branch's tip is
/// recorded in the ledger), or, for a worktree this machine can no longer reach, releases
/// the run and leaves it where it is.
///
/// Exit 1 (409) on a live run: stop it first.
///
/// Example: proctor session cleanup run-0003 --discard-worktree
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Remove the worktree and its branch even with unmerged or uncommitted work.
    #[arg(long)]
    pub discard_worktree: bool,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// List runs, newest first, your pinned runs on top.
///
/// Columns: REF, STATE, TOOL (with `demo` when a fake backs it), TRANSPORT, NAME, MARKS
/// (pinned, snoozed, done, archived: yours, except archived which is everyone's), CREATED.
/// Archived runs and runs you snoozed are left out unless --all; a footer counts them.
/// --json prints the server's page as it is (nothing left out).
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs in this state.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(STATES.map(State::as_str)))]
    pub state: Option<String>,
    /// At most this many runs (1–200), plus your pinned runs outside them.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Include archived and snoozed runs.
    #[arg(long)]
    pub all: bool,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Type into a run: a user turn on a pipe run, keys on a PTY run.
///
/// TEXT is sent as one turn (pipe) or typed followed by Enter (PTY; --no-enter types it
/// alone). With `-` the text is read from stdin to its end: on a pipe run one trailing
/// newline is dropped; on a PTY run the bytes are typed as they are (a newline acts as
/// Enter). Exit 1 (409) when the run is not live.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The text, or `-` to read it from stdin.
    #[arg(value_name = "TEXT|-", allow_hyphen_values = true)]
    pub text: String,
    /// PTY runs: do not press Enter after TEXT.
    #[arg(long)]
    pub no_enter: bool,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Resume a run that is not live: a new process on its stored conversation.
///
/// A new process generation runs the tool's resume form with the exact stored conversation
/// id, in the same workspace.
/// Never a silent new conversation: a run whose tool never reported a conversation is
/// refused (exit 1, 409). A PTY run gets this terminal's size when stdout is a terminal.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Move a stopped or failed Claude Code run to another profile of the same tool.
///
/// Copies that one conversation (its transcript, sub-agent and tool-result files) from the
/// run's account home to the target profile's, never a login, a setting or another
/// conversation, and re-attaches the run to the target; nothing starts: `session resume`
/// then runs it under the target. Exit 1 when refused (409: a live run, a target of another
/// tool, a target that already holds another version…; 422: a link or special file in the
/// conversation, another tool's session): a refusal writes nothing.
#[derive(Debug, Args)]
pub struct MoveArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The target profile (of the run's tool).
    #[arg(long, value_name = "NAME")]
    pub profile: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Hide a run from your list until a moment.
///
/// The moment is an RFC 3339 instant in the future (2026-12-01T09:00:00Z) or a delay from
/// now: 45s, 30m, 2h, 1d, 1w. Yours only; a second snooze moves it. Exit 1 (400) for a
/// moment that is not in the future.
#[derive(Debug, Args)]
pub struct SnoozeArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// When the snooze ends.
    #[arg(long, value_name = "T")]
    pub until: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Rename a run; an empty NAME ("") clears the name. Everyone sees it.
///
/// The name is trimmed; more than 200 characters, or a control or invisible character
/// (zero-width, direction overrides, line separators), is refused (exit 1, 400).
#[derive(Debug, Args)]
pub struct RenameArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The new name ("" clears it).
    #[arg(value_name = "NAME", allow_hyphen_values = true)]
    pub name: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, args: SessionArgs) -> anyhow::Result<ExitCode> {
    // claude runs it under the run's environment: no home, no token, no server start.
    if let SessionCommand::Hook(a) = args.command {
        return Ok(hook::run(a));
    }
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    let c = client.with_token(&home)?;
    match args.command {
        SessionCommand::Hook(a) => Ok(hook::run(a)),
        SessionCommand::Start(a) => start(&c, a),
        SessionCommand::List(a) => list(&c, a),
        SessionCommand::Show(a) => show(&c, a),
        SessionCommand::Events(a) => events(&c, a),
        SessionCommand::Attach(a) => attach::run(&c, &home, a),
        SessionCommand::Tail(a) => tail::run(&c, a),
        SessionCommand::Input(a) => input(&c, a),
        SessionCommand::Interrupt(a) => {
            let v: RunView = post(&c, &a.run, wire::INTERRUPT, None::<&()>)?;
            report(a.json, &v, || {
                format!(
                    "interrupt sent to {} (state {})",
                    t(&v.run_ref, 32),
                    v.state.as_str()
                )
            })
        }
        SessionCommand::Stop(a) => stop(&c, a),
        SessionCommand::Resume(a) => resume(&c, a),
        SessionCommand::Move(a) => {
            let body = wire::MoveBody {
                provider_profile_ref: Some(a.profile.clone()),
            };
            let v: RunView = post(&c, &a.run, wire::MOVE, Some(&body))?;
            report(a.json, &v, || {
                format!(
                    "{} moved to profile {} (state {}); `proctor session resume {}` runs it there",
                    t(&v.run_ref, 32),
                    t(&v.profile, 64),
                    v.state.as_str(),
                    t(&v.run_ref, 32)
                )
            })
        }
        SessionCommand::Pin(a) => mark(&c, a, Method::POST, wire::PIN),
        SessionCommand::Unpin(a) => mark(&c, a, Method::DELETE, wire::PIN),
        SessionCommand::Snooze(a) => {
            let until = parse_until(&a.until, chrono::Utc::now())?;
            let v: MarksView = post(
                &c,
                &a.run,
                wire::SNOOZE,
                Some(&SnoozeBody { until: Some(until) }),
            )?;
            report(a.json, &v, || marks_line(&v))
        }
        SessionCommand::Unsnooze(a) => mark(&c, a, Method::DELETE, wire::SNOOZE),
        SessionCommand::Done(a) => mark(&c, a, Method::POST, wire::DONE),
        SessionCommand::Undone(a) => mark(&c, a, Method::DELETE, wire::DONE),
        SessionCommand::Rename(a) => {
            let run_ref = normalise_ref(&a.run)?;
            let v: RunView = c.request_blocking(
                Method::PUT,
                &wire::at(wire::NAME, &run_ref),
                Some(&RenameBody { name: Some(a.name) }),
            )?;
            report(a.json, &v, || match &v.name {
                Some(n) => format!("{} renamed: {}", t(&v.run_ref, 32), t(n, 200)),
                None => format!("{} has no name now", t(&v.run_ref, 32)),
            })
        }
        SessionCommand::Archive(a) => archive(&c, a, Method::POST),
        SessionCommand::Unarchive(a) => archive(&c, a, Method::DELETE),
        SessionCommand::Diff(a) => diff(&c, a),
        SessionCommand::Export(a) => export::run(&c, a),
        SessionCommand::Cleanup(a) => cleanup(&c, a),
        SessionCommand::Delete(a) => {
            let run_ref = normalise_ref(&a.run)?;
            let v: Deleted =
                c.request_blocking::<(), _>(Method::DELETE, &wire::at(wire::RUN, &run_ref), None)?;
            report(a.json, &v, || format!("{} deleted", t(&v.run_ref, 32)))
        }
        SessionCommand::Permissions(a) => permissions::list(&c, a),
        SessionCommand::Permit(a) => permissions::permit(&c, a),
        SessionCommand::Messages(a) => messages::run(&c, a),
        SessionCommand::Activity(a) => activity::run(&c, a),
        SessionCommand::Handoff(a) => handoff::run(&c, a),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the verbs
// ---------------------------------------------------------------------------------------------

/// `run-0001` from `run-0001`, `run-1` or `1`. Anything else is refused before it reaches a
/// URL.
pub(crate) fn normalise_ref(raw: &str) -> anyhow::Result<String> {
    let digits = raw.strip_prefix("run-").unwrap_or(raw);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = digits.parse()?;
        return Ok(format!("run-{n:04}"));
    }
    Err(UsageError::new(format!(
        "{} is not a run ref: give run-0001 (or 1, or run-1); `proctor session list` shows them",
        text::one_line(raw, 60)
    )))
}

/// `POST` to one of a run's routes (`pattern`, e.g. [`wire::STOP`]), read as `T`.
fn post<B: serde::Serialize, T: serde::de::DeserializeOwned>(
    c: &Client,
    raw_ref: &str,
    pattern: &str,
    body: Option<&B>,
) -> anyhow::Result<T> {
    let run_ref = normalise_ref(raw_ref)?;
    Ok(c.request_blocking(Method::POST, &wire::at(pattern, &run_ref), body)?)
}

/// Text from the server, for display: sanitised, capped.
fn t(x: &str, width: usize) -> String {
    text::one_line(x, width)
}

/// An optional text from the server, for display (`-` when absent).
fn o(x: &Option<String>, width: usize) -> String {
    x.as_deref().map_or_else(|| "-".into(), |x| t(x, width))
}

/// The data of one attach-stream event, read as the contract's frame `T`.
pub(crate) fn event_data<T: serde::de::DeserializeOwned>(
    ev: &client::SseEvent,
) -> anyhow::Result<T> {
    serde_json::from_str(&ev.data).map_err(|e| {
        anyhow::anyhow!(
            "the server sent a `{}` event the contract does not describe: {e}",
            text::one_line(&ev.event, 32)
        )
    })
}

fn report<T: serde::Serialize>(
    json: bool,
    v: &T,
    line: impl FnOnce() -> String,
) -> anyhow::Result<ExitCode> {
    if json {
        print_json(v)?;
    } else {
        println!("{}", line());
    }
    Ok(ExitCode::SUCCESS)
}

/// `claude (demo)` or `claude`.
pub(crate) fn tool_label(v: &RunView) -> String {
    let tool = t(&v.tool, 16);
    if v.demo {
        format!("{tool} (demo)")
    } else {
        tool
    }
}

/// The size of this terminal, when stdout is one, as (rows, cols), brought within the
/// limits a run's terminal may have (`runs::MAX_ROWS`, `runs::MAX_COLS`): the server refuses
/// more, and a larger terminal shows the run in its top-left part.
pub(crate) fn terminal_size() -> Option<(u16, u16)> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    crossterm::terminal::size()
        .ok()
        .filter(|(c, r)| *c > 0 && *r > 0)
        .map(|(cols, rows)| {
            let s = crate::runs::TermSize { rows, cols }.clamped();
            (s.rows, s.cols)
        })
}

// ---------------------------------------------------------------------------------------------
// Verbs
// ---------------------------------------------------------------------------------------------

/// True for a registered workspace's ref (`ws-` and digits).
fn is_workspace_ref(p: &std::path::Path) -> bool {
    p.to_str()
        .and_then(|s| s.strip_prefix("ws-"))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn start(c: &Client, a: StartArgs) -> anyhow::Result<ExitCode> {
    // `ws-0001` names a registered workspace, unless a folder of that name is here.
    let workspace = if is_workspace_ref(&a.workspace) && !a.workspace.exists() {
        a.workspace.to_string_lossy().into_owned()
    } else {
        workspace_path(&a.workspace)?
    };
    let pty = a.transport == "pty";
    let size = if pty { terminal_size() } else { None };
    let body = StartRequest {
        tool: a.tool.clone(),
        profile: a.profile.clone(),
        transport: Some(a.transport.clone()),
        workspace: Some(workspace),
        name: a.name.clone(),
        // On a PTY run the server types it once the tool is up, then Enter.
        prompt: (!a.prompt.is_empty()).then(|| a.prompt.join(" ")),
        rows: size.map(|(rows, _)| rows),
        cols: size.map(|(_, cols)| cols),
        worktree: a.worktree.then_some(true),
        worktree_from: a.worktree.then(|| a.from.clone()).flatten(),
        no_setup: (a.worktree && a.no_setup).then_some(true),
        // This machine's PATH means nothing on another host: its server uses its own.
        path: if c.remote_host().is_some() {
            None
        } else {
            client_path()?
        },
        rig: a.rig.clone(),
    };
    let v: RunView = c.request_blocking(Method::POST, wire::RUNS, Some(&body))?;
    let failed = v.state == State::Failed;
    if a.json {
        print_json(&v)?;
    } else {
        let r = t(&v.run_ref, 32);
        println!(
            "started {r}: {}, {}, in {} (state {})",
            tool_label(&v),
            t(&v.transport, 8),
            t(&v.workspace, usize::MAX),
            v.state.as_str()
        );
        println!("boundary: {}", t(&v.boundary.detail, 300));
        if let Some(w) = &v.worktree {
            println!(
                "worktree: branch {} at {} (of {})",
                t(&w.branch, 300),
                t(&w.base, 300),
                t(&w.repo, 300)
            );
        }
        if failed {
            println!("launch failed: {}", o(&v.reason, usize::MAX));
        } else if pty {
            println!("attach: proctor session attach {r}   (detach: Ctrl-\\)");
        } else {
            println!(
                "follow: proctor session tail --follow {r}   type: proctor session input {r} TEXT"
            );
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// This command's PATH, sent with a start so the server finds the tools this shell finds.
/// None when PATH is unset (the server's is used then).
pub(crate) fn client_path() -> anyhow::Result<Option<String>> {
    match std::env::var_os("PATH") {
        None => Ok(None),
        Some(p) => match p.into_string() {
            Ok(s) => Ok(Some(s)),
            Err(p) => Err(UsageError::new(format!(
                "PATH is not valid UTF-8 ({}); the API carries it as a JSON string: fix PATH, \
                 or unset it to use the server's",
                text::one_line(&p.to_string_lossy(), 300)
            ))),
        },
    }
}

/// The absolute, canonical path of the workspace folder, as UTF-8.
fn workspace_path(raw: &std::path::Path) -> anyhow::Result<String> {
    let workspace = std::fs::canonicalize(raw).map_err(|e| {
        UsageError::new(format!(
            "workspace {}: {e}; give an existing folder with --workspace DIR",
            show_path(raw)
        ))
    })?;
    if !workspace.is_dir() {
        return Err(UsageError::new(format!(
            "workspace {} is not a folder",
            show_path(&workspace)
        )));
    }
    let workspace = workspace.to_str().ok_or_else(|| {
        UsageError::new(format!(
            "workspace {} is not valid UTF-8; the API carries paths as JSON strings",
            show_path(&workspace)
        ))
    })?;
    Ok(workspace.to_string())
}

fn list(c: &Client, a: ListArgs) -> anyhow::Result<ExitCode> {
    // clap admitted only one of STATES.
    let state = a
        .state
        .as_deref()
        .and_then(|st| STATES.into_iter().find(|s| s.as_str() == st));
    let v: RunPage = c.get_blocking(&wire::list(a.limit, state))?;
    if a.json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (mut archived, mut snoozed) = (0usize, 0usize);
    let mut shown: Vec<&RunView> = Vec::new();
    for it in &v.items {
        if !a.all && it.archived_at.is_some() {
            archived += 1;
        } else if !a.all && it.snoozed_until.is_some() {
            snoozed += 1;
        } else {
            shown.push(it);
        }
    }
    // Pinned first (stable: newest first within each group).
    shown.sort_by_key(|it| !it.pinned);
    println!(
        "{:<9} {:<8} {:<16} {:<5} {:<30} {:<22} CREATED",
        "REF", "STATE", "TOOL", "VIA", "NAME", "MARKS"
    );
    for it in &shown {
        println!(
            "{:<9} {:<8} {:<16} {:<5} {:<30} {:<22} {}",
            t(&it.run_ref, 9),
            t(it.state.as_str(), 8),
            tool_label(it),
            t(&it.transport, 5),
            o(&it.name, 30),
            marks_of(it),
            t(&it.created_at, 30)
        );
    }
    let mut footer = Vec::new();
    if archived > 0 {
        footer.push(format!("{archived} archived"));
    }
    if snoozed > 0 {
        footer.push(format!("{snoozed} snoozed"));
    }
    if !footer.is_empty() {
        println!("({} not shown; --all shows them)", footer.join(" and "));
    }
    let page = v.items.len().saturating_sub(v.pinned_outside_page);
    if v.total > page {
        println!("({page} of {} runs; --limit N shows more)", v.total);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pinned,snoozed,done,archived` (the marks a run carries), or `-`.
fn marks_of(v: &RunView) -> String {
    let mut m = Vec::new();
    if v.pinned {
        m.push("pinned");
    }
    if v.snoozed_until.is_some() {
        m.push("snoozed");
    }
    if v.done {
        m.push("done");
    }
    if v.archived_at.is_some() {
        m.push("archived");
    }
    if m.is_empty() {
        "-".into()
    } else {
        m.join(",")
    }
}

fn show(c: &Client, a: RefArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let v: RunView = c.get_blocking(&wire::at(wire::RUN, &run_ref))?;
    if a.json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let line = |k: &str, val: String| println!("{k:<13} {val}");
    line("ref", t(&v.run_ref, 32));
    line("name", o(&v.name, usize::MAX));
    line("tool", tool_label(&v));
    if v.demo {
        line(
            "demo",
            "yes: a provider fake backs this run; its output is a demo, not a model's".into(),
        );
    }
    line("profile", t(&v.profile, usize::MAX));
    line("transport", t(&v.transport, 8));
    line("workspace", t(&v.workspace, usize::MAX));
    line(
        "boundary",
        match &v.boundary.rig {
            Some(r) => format!("{} (in {})", t(&v.boundary.detail, 300), t(r, 32)),
            None => t(&v.boundary.detail, 300),
        },
    );
    if let Some(w) = &v.worktree {
        line(
            "worktree",
            format!(
                "branch {} from {} (repository {})",
                t(&w.branch, 300),
                t(&w.base, 300),
                t(&w.repo, 300)
            ),
        );
    }
    let mut state = format!("{} (generation {}", v.state.as_str(), v.generation);
    if let Some(pid) = v.pid {
        state.push_str(&format!(", pid {pid}"));
    }
    state.push(')');
    line("state", state);
    if v.state == State::Recovering {
        line(
            "recovering",
            "a previous server left it live; this server is ending what it left, then \
             records it lost"
                .into(),
        );
    }
    // Issue 13 §5: what the run waits on the person for, with where that is known from; or
    // that its form cannot say (never guessed from the screen).
    match &v.waiting {
        Some(w) => line(
            "waiting",
            format!(
                "for you since {} ({}): {}",
                t(&w.since, 40),
                match w.source {
                    crate::api::runs::WaitSource::Protocol => "protocol",
                    crate::api::runs::WaitSource::Hook => "the tool's own hook",
                },
                t(&w.reason, usize::MAX)
            ),
        ),
        None if !v.waiting_known && v.state.is_live() => line(
            "waiting",
            "unknown: this tool's PTY form has no way to say it waits (it is never guessed \
             from the screen)"
                .into(),
        ),
        None => {}
    }
    // Issue 18 §2: the account limit the tool ended its last turn on.
    if let Some(l) = &v.limit {
        line(
            "limit",
            format!(
                "{} under profile {}, {}",
                match l.kind {
                    crate::api::runs::LimitKind::Usage =>
                        "usage (the plan's allocation is used up)",
                    crate::api::runs::LimitKind::Rate => "rate (the provider throttles requests)",
                },
                t(&l.account_ref, 64),
                match &l.resets_at {
                    Some(at) => format!("resets at {}", t(at, 40)),
                    None => "the tool did not say when it resets".to_string(),
                }
            ),
        );
    }
    match &v.hold {
        Some(HoldView::Cgroup { path }) => {
            line("held by", format!("its own cgroup {}", o(path, usize::MAX)))
        }
        Some(HoldView::Subreaper) => line(
            "held by",
            "the server as child subreaper (processes attributed by scanning; no cgroup)".into(),
        ),
        Some(HoldView::ProcessGroup) => line("held by", "process_group".into()),
        None => {}
    }
    line("created", t(&v.created_at, 40));
    if let Some(at) = &v.started_at {
        line("started", t(at, 40));
    }
    if let Some(at) = &v.ended_at {
        line("ended", t(at, 40));
        line("exit", output::Exit::from_view(&v).describe());
    }
    if let Some(r) = &v.reason {
        line("reason", t(r, usize::MAX));
    }
    if let Some(c) = &v.conversation_id {
        line("conversation", t(c, 200));
    }
    match &v.output {
        Some(o) => {
            let next = o.next_seq;
            line(
                "output",
                if next > o.first_seq {
                    format!("seq {}..{} held, {} bytes", o.first_seq, next - 1, o.bytes)
                } else {
                    format!("none yet (next seq {next})")
                },
            );
        }
        None => line(
            "output",
            "not held by this server (the run is not live here)".into(),
        ),
    }
    if let Some(tr) = &v.transcript {
        line(
            "transcript",
            format!(
                "{} bytes{}",
                tr.bytes,
                if tr.capped {
                    " (cap reached: later output was not kept on disk)"
                } else {
                    ""
                }
            ),
        );
    }
    line("marks", marks_of(&v));
    if let Some(at) = &v.pinned_at {
        line("pinned at", t(at, 40));
    }
    if let Some(at) = &v.snoozed_until {
        line("snoozed to", t(at, 40));
    }
    if let Some(at) = &v.archived_at {
        line("archived at", t(at, 40));
    }
    Ok(ExitCode::SUCCESS)
}

fn events(c: &Client, a: RefArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let v: RunEvents = c.get_blocking(&wire::at(wire::EVENTS, &run_ref))?;
    if a.json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<7} {:<25} {:<28} DETAILS", "SEQ", "AT", "KIND");
    for e in &v.items {
        let kind = e.kind.strip_prefix("sessions.run.").unwrap_or(&e.kind);
        // The event's own fields, as the ledger holds them (free-form by design).
        let details = e
            .fields
            .iter()
            .map(|(k, v)| match v {
                Value::String(x) => format!("{k}={x}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" ");
        println!(
            "{:<7} {:<25} {:<28} {}",
            e.seq,
            t(&e.at, 25),
            text::one_line(kind, 28),
            text::one_line(&details, 160)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn input(c: &Client, a: InputArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let from_stdin = a.text == "-";
    let mut text_in = if from_stdin {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf)?;
        String::from_utf8(buf).map_err(|_| {
            UsageError::new("the text on stdin is not UTF-8; the API carries text as JSON strings")
        })?
    } else {
        a.text.clone()
    };
    let view: RunView = c.get_blocking(&wire::at(wire::RUN, &run_ref))?;
    let pty = view.transport == "pty";
    if pty {
        if !from_stdin && !a.no_enter {
            text_in.push('\r');
        }
    } else if from_stdin {
        if text_in.ends_with("\r\n") {
            text_in.truncate(text_in.len() - 2);
        } else if text_in.ends_with('\n') {
            text_in.pop();
        }
    }
    if text_in.is_empty() {
        return Err(UsageError::new("nothing to send: the text is empty"));
    }
    let len = text_in.len();
    let body = InputRequest {
        text: Some(text_in),
        ..Default::default()
    };
    let v: Accepted =
        c.request_blocking(Method::POST, &wire::at(wire::INPUT, &run_ref), Some(&body))?;
    report(a.json, &v, || {
        format!(
            "sent {len} bytes to {run_ref} ({})",
            if pty { "typed" } else { "a turn" }
        )
    })
}

fn stop(c: &Client, a: RefArgs) -> anyhow::Result<ExitCode> {
    let v: Stopped = post(c, &a.run, wire::STOP, None::<&()>)?;
    report(a.json, &v, || {
        let mut line = format!("{} {}", t(&v.run.run_ref, 32), v.run.state.as_str());
        if v.run.ended_at.is_some() {
            line.push_str(&format!(": {}", output::Exit::from_view(&v.run).describe()));
        }
        match &v.stop {
            Some(st) => {
                line.push_str(if st.sent_kill {
                    " (SIGTERM, then SIGKILL after the grace period)"
                } else if st.sent_term {
                    " (SIGTERM)"
                } else {
                    ""
                });
                if !st.group_gone {
                    line.push_str("; warning: a member of its process group was still alive");
                }
            }
            None => line.push_str(" (it was not live: nothing to stop)"),
        }
        line
    })
}

fn resume(c: &Client, a: ResumeArgs) -> anyhow::Result<ExitCode> {
    let body = terminal_size().map(|(rows, cols)| SizeBody {
        rows: Some(rows),
        cols: Some(cols),
    });
    let v: RunView = post(c, &a.run, wire::RESUME, body.as_ref())?;
    let failed = v.state == State::Failed;
    if a.json {
        print_json(&v)?;
    } else {
        println!(
            "{} resumed: generation {} (state {})",
            t(&v.run_ref, 32),
            v.generation,
            v.state.as_str()
        );
        if failed {
            println!("launch failed: {}", o(&v.reason, usize::MAX));
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn diff(c: &Client, a: DiffArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let Some(p) = &a.path else {
        let v: RunDiff = c.get_blocking(&wire::at(wire::DIFF, &run_ref))?;
        return report(a.json, &v, || diff_listing(&v));
    };
    let v: RunDiffFile = c.get_blocking(&wire::diff_file(&run_ref, p))?;
    report(a.json, &v, || diff_texts(&v))
}

/// A query value: every byte but the unreserved ones (RFC 3986) as %XX.
pub(crate) fn percent_encode(v: &str) -> String {
    wire::percent_encode(v)
}

/// The human form of `GET …/diff`.
fn diff_listing(v: &RunDiff) -> String {
    let d = &v.diff;
    let mut out = format!(
        "{} branch {}\nbase {}\nhead {}\n",
        t(&v.run_ref, 32),
        t(&d.branch, 200),
        t(&d.base, 64),
        t(&d.head, 64)
    );
    if d.files.is_empty() {
        out.push_str("no committed change since base\n");
    }
    for f in &d.files {
        out.push_str(&format!(
            "{:<2} {}\n",
            t(&f.status, 2),
            t(&f.path, usize::MAX)
        ));
    }
    if d.truncated {
        out.push_str(&format!("({} of {} paths shown)\n", d.files.len(), d.total));
    }
    out.trim_end().to_string()
}

/// The human form of `GET …/diff/file`: each side's text, sanitised.
fn diff_texts(v: &RunDiffFile) -> String {
    let f = &v.file;
    let side =
        |size: Option<u64>, binary: bool, clipped: bool, text_of: &str, at: &str, rev: &str| {
            let mut head = format!("=== {at} {} ", t(rev, 64));
            match size {
                None => head.push_str("(absent)"),
                Some(n) => head.push_str(&format!("({n} bytes")),
            }
            if size.is_some() {
                if binary {
                    head.push_str(", binary: no text shown");
                }
                if clipped {
                    head.push_str(", cut at 64 KiB");
                }
                head.push(')');
            }
            let body = text::multi_line(text_of);
            if body.is_empty() {
                head
            } else {
                format!("{head}\n{}", body.trim_end_matches('\n'))
            }
        };
    format!(
        "{} {} ({}) on branch {}\n{}\n{}",
        t(&v.run_ref, 32),
        t(&f.path, usize::MAX),
        t(&f.status, 2),
        t(&f.branch, 200),
        side(
            f.original_size,
            f.original_binary,
            f.original_clipped,
            &f.original,
            "base",
            &f.base
        ),
        side(
            f.modified_size,
            f.modified_binary,
            f.modified_clipped,
            &f.modified,
            "head",
            &f.head
        )
    )
}

fn cleanup(c: &Client, a: CleanupArgs) -> anyhow::Result<ExitCode> {
    let body = a.discard_worktree.then_some(CleanupBody {
        discard_worktree: Some(true),
    });
    let v: CleanedUp = post(c, &a.run, wire::CLEANUP, body.as_ref())?;
    report(a.json, &v, || {
        let mut line = format!(
            "{} cleaned up (state {}); only delete remains",
            t(&v.run.run_ref, 32),
            v.run.state.as_str()
        );
        if let Some(done) = &v.cleaned {
            match done.worktree.as_str() {
                "removed" => line.push_str(&format!(
                    "\nworktree {} removed; branch {} (tip {}) {}",
                    o(&done.path, usize::MAX),
                    o(&done.branch, 200),
                    o(&done.branch_tip, 64),
                    if done.branch_deleted == Some(true) {
                        "deleted"
                    } else {
                        "was already gone"
                    }
                )),
                "left_inaccessible" => line.push_str(&format!(
                    "\nworktree {} was inaccessible and is left where it is; branch {} (tip {}) kept",
                    o(&done.path, usize::MAX),
                    o(&done.branch, 200),
                    o(&done.branch_tip, 64)
                )),
                _ => {}
            }
        }
        line
    })
}

fn mark(c: &Client, a: RefArgs, method: Method, pattern: &str) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let v: MarksView = c.request_blocking::<(), _>(method, &wire::at(pattern, &run_ref), None)?;
    report(a.json, &v, || marks_line(&v))
}

/// `run-0001: pinned (at …), snoozed until …, done` from a marks answer.
fn marks_line(v: &MarksView) -> String {
    let mut parts = Vec::new();
    parts.push(if v.pinned {
        format!("pinned (at {})", o(&v.pinned_at, 40))
    } else {
        "not pinned".into()
    });
    match &v.snoozed_until {
        Some(u) => parts.push(format!("snoozed until {}", t(u, 40))),
        None => parts.push("not snoozed".into()),
    }
    parts.push(if v.done {
        "done".into()
    } else {
        "not done".into()
    });
    format!("{}: {}", t(&v.run_ref, 32), parts.join(", "))
}

fn archive(c: &Client, a: RefArgs, method: Method) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let v: RunView =
        c.request_blocking::<(), _>(method, &wire::at(wire::ARCHIVE, &run_ref), None)?;
    report(a.json, &v, || match &v.archived_at {
        Some(at) => format!("{} archived (since {})", t(&v.run_ref, 32), t(at, 40)),
        None => format!("{} not archived", t(&v.run_ref, 32)),
    })
}

/// The end of a snooze: an RFC 3339 instant (sent as given; the server checks that it is in
/// the future), or `N` + `s|m|h|d|w` from `now`.
fn parse_until(raw: &str, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<String> {
    let t = raw.trim();
    if chrono::DateTime::parse_from_rfc3339(t).is_ok() {
        return Ok(t.to_string());
    }
    let bad = || {
        UsageError::new(format!(
            "--until {} is neither an RFC 3339 instant (2026-12-01T09:00:00Z) nor a delay \
             (45s, 30m, 2h, 1d, 1w)",
            text::one_line(raw, 60)
        ))
    };
    let (num, unit) = t.split_at(t.len().saturating_sub(1));
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        "w" => n.checked_mul(7 * 86_400),
        _ => None,
    }
    .ok_or_else(bad)?;
    let delta = chrono::TimeDelta::try_seconds(secs).ok_or_else(bad)?;
    let at = now.checked_add_signed(delta).ok_or_else(bad)?;
    Ok(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_default_transport_for_the_cli_the_api_and_the_cockpit() {
        use clap::Args as _;
        let cmd = StartArgs::augment_args(clap::Command::new("start"));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "transport")
            .unwrap();
        let defaults: Vec<_> = arg.get_default_values().iter().collect();
        assert_eq!(defaults, [crate::providers::DEFAULT_TRANSPORT.name()]);
        assert_eq!(
            crate::providers::DEFAULT_TRANSPORT,
            crate::providers::Transport::Pty
        );
        let form =
            crate::tui::widgets::new_session::NewSessionForm::new(vec!["claude".into()], "/w");
        assert_eq!(form.transport(), crate::providers::DEFAULT_TRANSPORT);
    }

    #[test]
    fn refs_are_normalised_or_refused() {
        assert_eq!(normalise_ref("run-0001").unwrap(), "run-0001");
        assert_eq!(normalise_ref("run-1").unwrap(), "run-0001");
        assert_eq!(normalise_ref("42").unwrap(), "run-0042");
        assert_eq!(normalise_ref("run-12345").unwrap(), "run-12345");
        for bad in [
            "",
            "run-",
            "run-1/../x",
            "abc",
            "run-1a",
            "-1",
            "run-99999999999999999999",
        ] {
            assert!(normalise_ref(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn until_takes_instants_and_delays() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(parse_until("30m", now).unwrap(), "2026-11-30T10:30:00Z");
        assert_eq!(parse_until("2h", now).unwrap(), "2026-11-30T12:00:00Z");
        assert_eq!(parse_until("1d", now).unwrap(), "2026-12-01T10:00:00Z");
        assert_eq!(parse_until("1w", now).unwrap(), "2026-12-07T10:00:00Z");
        assert_eq!(parse_until("45s", now).unwrap(), "2026-11-30T10:00:45Z");
        assert_eq!(
            parse_until("2020-01-01T00:00:00+02:00", now).unwrap(),
            "2020-01-01T00:00:00+02:00",
            "an instant goes as given: the server judges the past"
        );
        for bad in [
            "",
            "m",
            "-5m",
            "5",
            "5y",
            "1.5h",
            "tomorrow",
            "99999999999999999w",
        ] {
            assert!(parse_until(bad, now).is_err(), "{bad:?}");
        }
    }
}
