//! `proctor profile`: the provider profiles (a tool plus an account home).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{Ctx, UsageError, print_json, show_path};
use crate::providers::Tool;
use crate::providers::profile::{PermissionPolicy, Profile, ProfileError, Store};
use crate::text;

/// List or add provider profiles.
///
/// A profile is one of the five provider CLIs (claude, codex, gemini, grok, opencode) plus
/// an account home: the tool's own config folder, where its login and its transcripts live.
/// One default profile per tool always exists, named after the tool, with the tool's default
/// folder under your $HOME (~/.claude, ~/.codex, ~/.gemini, ~/.grok,
/// ~/.local/share/opencode). Added profiles are kept in the config part of the state home,
/// in profiles.json (0600).
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: ProfileCommand,
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    List(ListArgs),
    Add(AddArgs),
}

/// Print every profile: the five defaults, then the added ones.
///
/// Text output has one profile per line: name, tool, account home, and whether it is a
/// default or added profile (and a note when the home folder does not exist). Exit 0, or 1
/// if profiles.json cannot be read or does not parse.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON: an array of {name, tool, home, default, home_exists, home_var}.
    #[arg(long)]
    pub json: bool,
}

/// Add a profile: NAME runs TOOL with the account home DIR (--account-home).
///
/// NAME is 1 to 63 characters from a-z, 0-9, '_' and '-', starting with a letter or digit,
/// and must be new (the five tool names belong to the default profiles). DIR must be an
/// existing folder; it is stored as its absolute canonical path. For gemini the folder must
/// be named `.gemini`, for opencode `opencode`, because those tools are pointed at the
/// folder's parent (GEMINI_CLI_HOME, XDG_DATA_HOME). Prints the profile added. Exit 0;
/// 2 for a bad name, a duplicate, an unknown tool or a missing home; 1 if profiles.json
/// cannot be read or written.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The new profile's name.
    pub name: String,
    /// The tool: claude, codex, gemini, grok or opencode.
    #[arg(long, value_name = "TOOL")]
    pub tool: String,
    /// The tool's config folder for this account. (Named --account-home because --home
    /// already selects proctor's own state home.)
    #[arg(long, value_name = "DIR")]
    pub account_home: PathBuf,
    /// What its pipe runs do with the tool's permission requests: `ask` holds each one open
    /// until a person answers it (`proctor session permissions`, `proctor session permit`,
    /// or the cockpit's dialog); `deny` refuses every one without asking. Nothing allows a
    /// request on its own.
    #[arg(long, value_name = "POLICY", default_value = "ask", value_parser = ["ask", "deny"])]
    pub permissions: String,
    /// Print the added profile as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    profile: &'a Profile,
    home_exists: bool,
    home_var: &'static str,
}

fn row(p: &Profile) -> Row<'_> {
    Row {
        profile: p,
        home_exists: p.home.is_dir(),
        home_var: p.tool.spec().home_var,
    }
}

fn user_home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h)),
        None => Err(UsageError::new(
            "HOME is not set, so the default profiles' homes cannot be found. Remedy: set HOME",
        )),
    }
}

fn usage_or_fault(e: ProfileError) -> anyhow::Error {
    match e {
        ProfileError::Corrupt { .. } | ProfileError::Files(_) => anyhow::Error::new(e),
        other => UsageError::new(other.to_string()),
    }
}

pub fn run(ctx: &Ctx, args: ProfileArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let store = Store::new(&home.config);
    match args.command {
        ProfileCommand::List(a) => {
            let profiles = store.list(&user_home()?).map_err(usage_or_fault)?;
            if a.json {
                print_json(&crate::api::Items::new(
                    profiles.iter().map(row).collect::<Vec<_>>(),
                ))?;
                return Ok(ExitCode::SUCCESS);
            }
            let width = profiles
                .iter()
                .map(|p| p.name.len())
                .max()
                .unwrap_or(0)
                .max(4);
            for p in &profiles {
                let kind = if p.is_default { "default" } else { "added" };
                let missing = if p.home.is_dir() {
                    ""
                } else {
                    "  (home absent)"
                };
                println!(
                    "{:<width$}  {:<8}  {:<7}  {}{missing}",
                    text::one_line(&p.name, 63),
                    p.tool.name(),
                    kind,
                    show_path(&p.home),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ProfileCommand::Add(a) => {
            let tool = Tool::parse(&a.tool).map_err(|e| UsageError::new(e.to_string()))?;
            home.ensure()?;
            let policy = match a.permissions.as_str() {
                "deny" => PermissionPolicy::Deny,
                _ => PermissionPolicy::Ask,
            };
            let p = store
                .add_with(&a.name, tool, &a.account_home, policy)
                .map_err(usage_or_fault)?;
            if a.json {
                print_json(&row(&p))?;
            } else {
                println!(
                    "added profile {} ({}, home {}, permission requests: {})",
                    text::one_line(&p.name, 63),
                    p.tool.name(),
                    show_path(&p.home),
                    p.permissions.as_str()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
