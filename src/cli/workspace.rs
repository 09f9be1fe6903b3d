//! `proctor workspace …`: register folders, set and approve their setup command and check
//! policy, and review and approve the agent configuration they carry. Thin client of
//! `/v1/m/sessions/workspaces`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::Method;

use super::{Ctx, UsageError, print_json, show_path};
use crate::api::workspaces::{
    self as wire, AddRequest, ApproveProjectConfigRequest, ApproveRequest, PolicyRequest,
    PolicyView, ProjectConfigView, SetupRequest, WorkspaceList, WorkspaceView,
};
use crate::client::{self, Client};
use crate::text;
use crate::workspaces::Approval;

/// Register folders and approve, by SHA-256, what runs in them.
///
/// A workspace is a folder registered with proctor (ws-0001). It holds, in proctor and never
/// in the repository:
///
/// - a setup command: a worktree start is refused (409) until a person approved its exact
///   text. Nothing executes it yet.
///
/// - a check policy (`proctor workspace policy`), approved the same way.
///
/// It also carries agent configuration that a repository can bring (hooks, MCP servers, base
/// URLs, proxies in .claude/, .mcp.json, .codex/config.toml, .gemini/, .env). Starting or
/// resuming a tool that reads a flagged file is refused (409) until a person approved the
/// SHA-256 of the flagged part (`proctor workspace project-config`).
///
/// Approvals need an admin token that belongs to a person; an agent's token is refused.
/// An approval stays as evidence when the text changes, and applies again when the text
/// returns to the approved one.
///
/// WS is a ref (ws-0001, ws-1 or 1) or the path of a registered folder. Exit codes: 0 ok;
/// 1 the server refused (its status and message are printed: 404 unknown, 409 changed since
/// reviewed, 422 invalid, 403 not allowed); 2 bad usage.
#[derive(Debug, Args)]
pub struct WorkspaceArgs {
    #[command(subcommand)]
    pub command: WorkspaceCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    Add(AddArgs),
    List(ListArgs),
    /// Show a workspace: its folder, setup command, policy and approvals.
    Show(WsArgs),
    Setup(SetupArgs),
    /// Approve the setup command whose sha256 you reviewed (an admin token of a person).
    ///
    /// The hash must be the stored text's now; if it changed since you read it, the approval
    /// is refused (exit 1, 409): review again with `setup`. Audited in the ledger. Prints the
    /// hash and whether the command is approved now.
    ///
    /// Example: proctor workspace approve-setup ws-0001 --sha256 <hash printed by `setup`>
    ApproveSetup(ApproveArgs),
    /// Review the agent configuration the workspace folder (or a commit) carries.
    ///
    /// Lists the files Claude Code, Codex and Gemini CLI read from the folder (.claude/,
    /// .mcp.json, .codex/config.toml, .gemini/, .env), the flagged keys in them with their
    /// values (URL passwords masked), the files flagged whole (unreadable, over 1 MiB, nested
    /// deeper than 64 levels, links), the sha256 of the flagged part and whether the last
    /// approval covers it. Nothing is executed. Starting or resuming a tool that reads a
    /// flagged file is refused (409) until that sha256 is approved.
    ///
    /// With --from REV (a local branch, or a full commit id a ref retains: what
    /// `session start --worktree --from` takes), the files as committed at REV are reviewed
    /// instead, as a worktree started there carries them; nothing is checked out. The
    /// output names the full commit id.
    ///
    /// Example: proctor workspace project-config ws-0001 --from feature
    ProjectConfig(ProjectConfigArgs),
    /// Approve the flagged agent configuration whose sha256 you reviewed (admin, a person).
    ///
    /// The folder (with --from, the commit REV names) is scanned again: if the flagged part
    /// is not the one you reviewed, the approval is refused (exit 1, 409). The approval
    /// applies to any folder whose flagged part has that sha256, and replaces the last one.
    /// Changing an unflagged key later needs no new approval; changing a flagged value, or
    /// adding or removing a flagged key, does.
    ///
    /// Example: proctor workspace approve-project-config ws-0001 --from feature --sha256 <hash>
    ApproveProjectConfig(ApproveProjectConfigArgs),
    Policy(PolicyArgs),
    /// Approve the check policy whose sha256 you reviewed (an admin token of a person).
    ///
    /// Checks run only under an approved policy. 409 when the policy changed since you read
    /// it.
    ///
    /// Example: proctor workspace approve-policy ws-0001 --sha256 <hash printed by `policy`>
    ApprovePolicy(ApproveArgs),
}

/// Register a folder as a workspace (admin).
///
/// The folder is stored as its canonical absolute path; registering it twice (under any
/// spelling) is refused (409). Prints the new ref, e.g. `ws-0001 registered: /src/app`.
///
/// Example: proctor workspace add ~/src/app
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The folder.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// List the workspaces: REF, SETUP (none, approved, NOT APPROVED), POLICY, PATH.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// A workspace, and --json.
#[derive(Debug, Args)]
pub struct WsArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Read or set the setup command of a workspace.
///
/// Without --command, prints the command, its sha256 and whether it is approved, and the
/// exact command that approves it. With --command, sets it first (admin): the exact text,
/// spaces included, at most 8192 bytes; --command '' clears it. Any change needs a new
/// approval.
///
/// Example: proctor workspace setup ws-0001 --command 'npm ci'
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// The new command ('' clears it).
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    pub command: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Approve what you reviewed, by its SHA-256 (an admin token of a person).
///
/// The hash must be the one the server holds now; if the text or the files changed since
/// you read them, the approval is refused (exit 1, 409): review again. Audited in the ledger.
///
/// Example: proctor workspace approve-setup ws-0001 --sha256 <hash printed by `setup`>
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// The SHA-256 you reviewed (64 hex digits).
    #[arg(long, value_name = "H")]
    pub sha256: String,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// A workspace, and the commit whose files to review.
#[derive(Debug, Args)]
pub struct ProjectConfigArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// Review the files committed at REV (a local branch, or a full commit id a ref
    /// retains) instead of the folder.
    #[arg(long, value_name = "REV")]
    pub from: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Approve a reviewed project configuration, by its SHA-256 (an admin token of a person).
#[derive(Debug, Args)]
pub struct ApproveProjectConfigArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// The SHA-256 you reviewed (64 hex digits).
    #[arg(long, value_name = "H")]
    pub sha256: String,
    /// The files committed at REV (as `project-config --from`) rather than the folder's.
    #[arg(long, value_name = "REV")]
    pub from: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

/// Read or set the check policy of a workspace (TOML; see docs/workspaces.md).
///
/// Without --file, prints the policy, its sha256 (policy-text-sha256/1) and whether it is
/// approved. With --file F (or - for stdin), sets it first (admin); an invalid policy is
/// refused (exit 1, 422) with the problem named. An empty file clears it.
///
/// Example: proctor workspace policy ws-0001 --file checks.toml
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The workspace: ws-0001 (or 1, or a registered folder's path).
    #[arg(value_name = "WS")]
    pub ws: String,
    /// The policy file, or - for stdin.
    #[arg(long, value_name = "F")]
    pub file: Option<PathBuf>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, args: WorkspaceArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    let c = client.with_token(&home)?;
    match args.command {
        WorkspaceCommand::Add(a) => add(&c, a),
        WorkspaceCommand::List(a) => list(&c, a),
        WorkspaceCommand::Show(a) => {
            let r = resolve(&c, &a.ws)?;
            let v: WorkspaceView = c.get_blocking(&wire::one(&r))?;
            output(a.json, &v, show_lines)
        }
        WorkspaceCommand::Setup(a) => setup(&c, a),
        WorkspaceCommand::ApproveSetup(a) => {
            let v: WorkspaceView = approve(&c, &a, wire::SETUP_APPROVE)?;
            output(a.json, &v, |v| {
                vec![format!(
                    "setup command of {} approved (sha256 {}); approved now: {}",
                    t(&v.ws_ref, 32),
                    o(&v.setup_command_sha256, 64),
                    yes(v.setup_approved)
                )]
            })
        }
        WorkspaceCommand::ProjectConfig(a) => {
            let r = resolve(&c, &a.ws)?;
            let query = match &a.from {
                Some(f) => format!("?from={}", super::session::percent_encode(from_arg(f)?)),
                None => String::new(),
            };
            let v: ProjectConfigView =
                c.get_blocking(&format!("{}{query}", wire::path(wire::PROJECT_CONFIG, &r)))?;
            output(a.json, &v, project_config_lines)
        }
        WorkspaceCommand::ApproveProjectConfig(a) => {
            let r = resolve(&c, &a.ws)?;
            let b = ApproveProjectConfigRequest {
                sha256: sha256_arg(&a.sha256)?.to_string(),
                from: a
                    .from
                    .as_deref()
                    .map(from_arg)
                    .transpose()?
                    .map(str::to_string),
            };
            let v: ProjectConfigView = c.request_blocking(
                Method::POST,
                &wire::path(wire::PROJECT_CONFIG_APPROVE, &r),
                Some(&b),
            )?;
            output(a.json, &v, |v| {
                let at = match &v.from {
                    Some(f) => format!(" committed at {}", t(f, 64)),
                    None => String::new(),
                };
                let mut lines = vec![format!(
                    "agent configuration{at} of {} approved ({} {})",
                    t(&v.workspace, 32),
                    t(&v.recipe, 64),
                    t(&v.sha256, 64)
                )];
                lines.extend(project_config_lines(v));
                lines
            })
        }
        WorkspaceCommand::Policy(a) => policy(&c, a),
        WorkspaceCommand::ApprovePolicy(a) => {
            let v: PolicyView = approve(&c, &a, wire::POLICY_APPROVE)?;
            output(a.json, &v, |v| {
                vec![format!(
                    "policy of {} approved ({} {})",
                    t(&v.workspace, 32),
                    t(&v.recipe, 64),
                    o(&v.sha256, 64)
                )]
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A server string for a terminal: through the sanitiser, at most `width` columns.
fn t(s: &str, width: usize) -> String {
    text::one_line(s, width)
}

/// As [`t`]; `-` when absent.
fn o(s: &Option<String>, width: usize) -> String {
    s.as_deref().map_or_else(|| "-".into(), |s| t(s, width))
}

fn yes(v: bool) -> &'static str {
    if v { "yes" } else { "no" }
}

/// A workspace ref from `ws-0001`, `ws-1`, `1`, or the path of a registered folder.
fn resolve(c: &Client, raw: &str) -> anyhow::Result<String> {
    let candidate = if raw.bytes().all(|b| b.is_ascii_digit()) && !raw.is_empty() {
        format!("ws-{raw}")
    } else {
        raw.to_string()
    };
    if let Some(r) = crate::workspaces::normalise_ref(&candidate) {
        return Ok(r);
    }
    let Ok(path) = std::fs::canonicalize(raw) else {
        return Err(UsageError::new(format!(
            "{} is neither a workspace ref (ws-0001) nor an existing folder; \
             `proctor workspace list` shows the workspaces",
            text::one_line(raw, 200)
        )));
    };
    let v: WorkspaceList = c.get_blocking(wire::LIST)?;
    v.items
        .into_iter()
        .find(|w| Some(w.path.as_str()) == path.to_str())
        .map(|w| w.ws_ref)
        .ok_or_else(|| {
            UsageError::new(format!(
                "{} is not a registered workspace; register it with `proctor workspace add {}`",
                show_path(&path),
                show_path(&path)
            ))
        })
}

fn output<T: serde::Serialize>(
    json: bool,
    v: &T,
    lines: impl FnOnce(&T) -> Vec<String>,
) -> anyhow::Result<ExitCode> {
    if json {
        print_json(v)?;
    } else {
        for l in lines(v) {
            println!("{l}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A `--sha256` value: 64 hexadecimal digits (exit 2 otherwise).
fn sha256_arg(raw: &str) -> anyhow::Result<&str> {
    let h = raw.trim();
    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(UsageError::new(format!(
            "--sha256 {} is not 64 hexadecimal digits; copy the hash the review printed",
            text::one_line(h, 80)
        )));
    }
    Ok(h)
}

/// A `--from` value: not empty (exit 2); the server resolves it (422 when it names no
/// local branch and no retained full commit id).
fn from_arg(raw: &str) -> anyhow::Result<&str> {
    if raw.is_empty() {
        return Err(UsageError::new(
            "--from is empty; give a local branch or a full commit id, or leave it out",
        ));
    }
    Ok(raw)
}

fn approve<T: serde::de::DeserializeOwned>(
    c: &Client,
    a: &ApproveArgs,
    template: &str,
) -> anyhow::Result<T> {
    let r = resolve(c, &a.ws)?;
    let b = ApproveRequest {
        sha256: sha256_arg(&a.sha256)?.to_string(),
    };
    Ok(c.request_blocking(Method::POST, &wire::path(template, &r), Some(&b))?)
}

/// A text shown exactly: as a JSON string (spaces and escapes visible), sanitised.
fn exact(v: &Option<String>) -> String {
    match v {
        None => "(none)".into(),
        Some(s) => text::one_line(&serde_json::Value::String(s.clone()).to_string(), 16 * 1024),
    }
}

fn approval_line(what: &str, a: &Option<Approval>) -> String {
    let Some(a) = a else {
        return format!("{what}: never approved");
    };
    let from = match &a.from {
        Some(f) => format!(", for the files committed at {}", t(f, 64)),
        None => String::new(),
    };
    format!(
        "{what}: sha256 {} by {} at {}{from}",
        t(&a.sha256, 64),
        t(&a.actor, 120),
        t(&a.at, 40)
    )
}

// ---------------------------------------------------------------------------------------------
// Verbs
// ---------------------------------------------------------------------------------------------

fn add(c: &Client, a: AddArgs) -> anyhow::Result<ExitCode> {
    let dir = std::fs::canonicalize(&a.dir).map_err(|e| {
        UsageError::new(format!(
            "{}: {e}; give an existing folder",
            show_path(&a.dir)
        ))
    })?;
    let dir_s = dir.to_str().ok_or_else(|| {
        UsageError::new(format!(
            "{} is not valid UTF-8; the API carries paths as JSON strings",
            show_path(&dir)
        ))
    })?;
    let b = AddRequest {
        path: dir_s.to_string(),
    };
    let v: WorkspaceView = c.request_blocking(Method::POST, wire::LIST, Some(&b))?;
    output(a.json, &v, |v| {
        vec![format!(
            "{} registered: {}",
            t(&v.ws_ref, 32),
            t(&v.path, 4096)
        )]
    })
}

fn list(c: &Client, a: ListArgs) -> anyhow::Result<ExitCode> {
    let v: WorkspaceList = c.get_blocking(wire::LIST)?;
    output(a.json, &v, |v| {
        if v.items.is_empty() {
            return vec!["no workspaces; register one with `proctor workspace add DIR`".into()];
        }
        let state = |text: &Option<String>, ok: bool| match (text.is_none(), ok) {
            (true, _) => "none",
            (false, true) => "approved",
            _ => "NOT APPROVED",
        };
        let mut lines = vec![format!(
            "{:<9} {:<13} {:<13} PATH",
            "REF", "SETUP", "POLICY"
        )];
        for w in &v.items {
            lines.push(format!(
                "{:<9} {:<13} {:<13} {}",
                t(&w.ws_ref, 9),
                state(&w.setup_command, w.setup_approved),
                state(&w.policy_sha256, w.policy_approved),
                t(&w.path, 4096)
            ));
        }
        lines
    })
}

fn show_lines(v: &WorkspaceView) -> Vec<String> {
    let mut lines = vec![
        format!("{}  {}", t(&v.ws_ref, 32), t(&v.path, 4096)),
        format!("registered: {}", t(&v.created_at, 40)),
    ];
    lines.extend(setup_lines(v));
    lines.push(format!(
        "policy: {}",
        match &v.policy_sha256 {
            None => "none".to_string(),
            Some(h) => format!(
                "{} {}, approved: {}",
                t(&v.policy_recipe, 40),
                text::one_line(h, 64),
                yes(v.policy_approved)
            ),
        }
    ));
    lines.push(approval_line("last policy approval", &v.policy_approval));
    lines.push(approval_line(
        "last project-config approval",
        &v.project_config_approval,
    ));
    lines
}

fn setup_lines(v: &WorkspaceView) -> Vec<String> {
    let r = t(&v.ws_ref, 32);
    let mut lines = vec![format!("setup command: {}", exact(&v.setup_command))];
    if let Some(h) = &v.setup_command_sha256 {
        let h = text::one_line(h, 64);
        lines.push(format!("sha256 ({}): {h}", t(&v.setup_command_recipe, 40)));
        lines.push(format!("approved: {}", yes(v.setup_approved)));
        if !v.setup_approved {
            lines.push(format!(
                "to approve it: proctor workspace approve-setup {r} --sha256 {h}"
            ));
        }
    }
    lines.push(approval_line("last setup approval", &v.setup_approval));
    lines
}

fn setup(c: &Client, a: SetupArgs) -> anyhow::Result<ExitCode> {
    let r = resolve(c, &a.ws)?;
    let v: WorkspaceView = match &a.command {
        Some(cmd) => c.request_blocking(
            Method::PUT,
            &wire::path(wire::SETUP, &r),
            Some(&SetupRequest {
                command: cmd.clone(),
            }),
        )?,
        None => c.get_blocking(&wire::one(&r))?,
    };
    output(a.json, &v, setup_lines)
}

fn project_config_lines(v: &ProjectConfigView) -> Vec<String> {
    let r = t(&v.workspace, 32);
    let (head, from) = match &v.from {
        Some(c) => {
            let c = t(c, 64);
            (
                format!(
                    "agent configuration committed at {c} (repository {})",
                    t(&v.folder, 4096)
                ),
                format!(" --from {c}"),
            )
        }
        None => (
            format!("agent configuration in {}", t(&v.folder, 4096)),
            String::new(),
        ),
    };
    let mut lines = vec![head];
    if v.files.is_empty() {
        lines.push("  none of the scanned files exists".into());
    }
    for f in &v.files {
        let head = format!("  {} (read by {})", t(&f.path, 200), t(&f.tool, 16));
        if let Some(u) = &f.unreadable {
            lines.push(format!(
                "{head}: FLAGGED WHOLE, {} (file sha256 {})",
                t(&u.reason, 400),
                t(&u.sha256, 64)
            ));
            continue;
        }
        if f.keys.is_empty() {
            lines.push(format!("{head}: nothing flagged"));
            continue;
        }
        lines.push(format!("{head}:"));
        for k in &f.keys {
            lines.push(format!(
                "    {} = {}",
                t(&k.key, 200),
                text::one_line(&k.value.to_string(), 2000)
            ));
        }
    }
    lines.push(format!(
        "flagged part: {} {}",
        t(&v.recipe, 64),
        t(&v.sha256, 64)
    ));
    lines.push(format!("approved: {}", yes(v.approved)));
    lines.push(approval_line("last approval", &v.approval));
    if !v.approved {
        lines.push(format!(
            "to approve it: proctor workspace approve-project-config {r}{from} --sha256 {}",
            t(&v.sha256, 64)
        ));
    }
    lines
}

fn policy(c: &Client, a: PolicyArgs) -> anyhow::Result<ExitCode> {
    let r = resolve(c, &a.ws)?;
    let v: PolicyView = match &a.file {
        Some(f) => {
            let text = if f.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("cannot read the policy from stdin")?;
                s
            } else {
                std::fs::read_to_string(f).map_err(|e| {
                    UsageError::new(format!("cannot read the policy {}: {e}", show_path(f)))
                })?
            };
            c.request_blocking(
                Method::PUT,
                &wire::path(wire::POLICY, &r),
                Some(&PolicyRequest { policy: text }),
            )?
        }
        None => c.get_blocking(&wire::path(wire::POLICY, &r))?,
    };
    output(a.json, &v, |v| {
        let mut lines = Vec::new();
        let ws = t(&v.workspace, 32);
        match &v.policy {
            None => lines.push(format!(
                "{ws} has no check policy; set one with `proctor workspace policy {ws} --file F`"
            )),
            Some(p) => {
                lines.push(format!("policy of {ws}:"));
                for l in text::multi_line(p).lines() {
                    lines.push(format!("  {l}"));
                }
                let h = o(&v.sha256, 64);
                lines.push(format!("sha256 ({}): {h}", t(&v.recipe, 40)));
                lines.push(format!("approved: {}", yes(v.approved)));
                if !v.approved {
                    lines.push(format!(
                        "to approve it: proctor workspace approve-policy {ws} --sha256 {h}"
                    ));
                }
            }
        }
        lines.push(approval_line("last approval", &v.approval));
        lines
    })
}
