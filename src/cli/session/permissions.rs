//! `proctor session permissions` and `proctor session permit`: the permission requests a
//! pipe run's tool sent, held open by the server until a person answers them.

use std::process::ExitCode;

use clap::{ArgGroup, Args};
use hyper::Method;

use super::{Client, normalise_ref, report, t};
use crate::api::runs::{
    self as wire, PermissionList, PermissionState, PermissionView, PermitDecision, PermitRequest,
};
use crate::client::ClientError;
use crate::text;

/// List the permission requests of a run's tool: open ones wait for you.
///
/// A pipe run's tool asks before it runs a command or changes a file (claude's
/// `can_use_tool`, codex's `requestApproval`, ACP's `session/request_permission`). The
/// server holds each request open, and the tool waits, until a person answers it with
/// `proctor session permit REF ID --allow|--deny` (or the cockpit's dialog, key `p`).
/// Nothing allows a request on its own; a profile added with `--permissions deny` refuses
/// every one without asking.
///
/// One line per request of the run's current generation, oldest first: its id, its state
/// (open, allowed, denied, expired: the process ended first, refused: by the profile), the
/// tool call (Bash, commandExecution, execute…), what it concerns (the command or file),
/// the tool's reason, and when it was asked. Every string comes from the tool and is shown
/// sanitised and bounded.
#[derive(Debug, Args)]
pub struct PermissionsArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Print the server's JSON answer: {ref, generation, items:[{id, state, method,
    /// tool_name, what, reason, options, since, decided_at, for_session, by}]}.
    #[arg(long)]
    pub json: bool,
}

/// Answer a permission request of a run's tool: allow it or deny it.
///
/// ID is the request's id as `proctor session permissions REF` lists it. Exactly one of
/// --allow or --deny. --for-session (with --allow) allows such requests for the rest of the
/// tool's session, where the tool offered that (claude when it suggested a rule, codex,
/// ACP agents that offer "allow always"). The decision goes to the tool in its own protocol
/// and is recorded in the ledger with your token's name.
///
/// Only a person decides: a token whose principal is agent, or any command run from inside
/// one of the server's runs, is refused (exit 1, 403). Exit 1 too when the request is
/// unknown (404), already decided or expired, or the run is not live (409), or the tool did
/// not offer the decision (400).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("decision").required(true).args(["allow", "deny"])))]
pub struct PermitArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The request's id (`proctor session permissions REF`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Allow it: the tool goes ahead.
    #[arg(long)]
    pub allow: bool,
    /// Deny it: the tool does not do it (and goes on with its turn).
    #[arg(long)]
    pub deny: bool,
    /// With --allow: for the rest of the tool's session.
    #[arg(long, requires = "allow")]
    pub for_session: bool,
    /// Print the server's JSON answer (the request as decided).
    #[arg(long)]
    pub json: bool,
}

fn since(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|d| {
            d.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| t(at, 32))
}

fn o(x: &Option<String>, width: usize) -> String {
    x.as_deref().map_or_else(|| "-".into(), |x| t(x, width))
}

/// The table `permissions` prints.
pub fn table(l: &PermissionList) -> String {
    if l.items.is_empty() {
        return format!(
            "{} has no permission requests (generation {})",
            t(&l.run_ref, 32),
            l.generation
        );
    }
    let mut out = format!(
        "{:<4}  {:<8}  {:<18}  {:<40}  {:<30}  {}\n",
        "ID", "STATE", "TOOL", "WHAT", "REASON", "SINCE"
    );
    for p in &l.items {
        out.push_str(&format!(
            "{:<4}  {:<8}  {:<18}  {:<40}  {:<30}  {}\n",
            o(&p.id, 4),
            p.state.as_str(),
            o(&p.tool_name, 18),
            o(&p.what, 40),
            o(&p.reason, 30),
            since(&p.since),
        ));
    }
    out.pop();
    out
}

pub fn list(c: &Client, a: PermissionsArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let l: PermissionList = c.get_blocking(&wire::at(wire::PERMISSIONS, &run_ref))?;
    report(a.json, &l, || table(&l))
}

/// What was decided, in one line.
pub fn decided_line(run_ref: &str, p: &PermissionView) -> String {
    let what = match p.state {
        PermissionState::Allowed if p.for_session => "allowed for the session",
        PermissionState::Allowed => "allowed",
        PermissionState::Denied => "denied",
        other => other.as_str(),
    };
    let by =
        p.by.as_ref()
            .map(|b| format!(" by {}", t(&b.name, 60)))
            .unwrap_or_default();
    format!(
        "{} permission {} {what}{by}: {} {}",
        t(run_ref, 32),
        o(&p.id, 8),
        o(&p.tool_name, 30),
        o(&p.what, 200),
    )
}

pub fn permit(c: &Client, a: PermitArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    if a.id.is_empty() || a.id.len() > 20 || !a.id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(super::UsageError::new(format!(
            "{} is not a permission request id: give the number `proctor session permissions \
             {run_ref}` lists",
            text::one_line(&a.id, 30)
        )));
    }
    let body = PermitRequest {
        decision: Some(if a.allow {
            PermitDecision::Allow
        } else {
            PermitDecision::Deny
        }),
        for_session: Some(a.for_session),
    };
    let p: PermissionView = match c.request_blocking(
        Method::POST,
        &wire::permission(&run_ref, &a.id),
        Some(&body),
    ) {
        Ok(p) => p,
        Err(ClientError::Api {
            status, message, ..
        }) => {
            let status = status.as_u16();
            let remedy = match status {
                403 => {
                    " Remedy: decide it yourself, at your terminal, with a person's token \
                         (not from inside a run, not with an agent token)"
                }
                404 => " Remedy: `proctor session permissions REF` lists the requests",
                409 => " Remedy: `proctor session permissions REF` shows its state",
                _ => "",
            };
            let remedy = if message.contains("Remedy") {
                ""
            } else {
                remedy
            };
            anyhow::bail!(
                "the server refused ({status}): {}{remedy}",
                text::one_line(&message, 600)
            );
        }
        Err(e) => return Err(e.into()),
    };
    report(a.json, &p, || decided_line(&run_ref, &p))
}
