//! `proctor token create|list|revoke|rotate-owner`: bearer tokens for the API.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hyper::Method;
use serde_json::json;

use super::{Ctx, print_json};
use crate::client::{self, Client};
use crate::text;

/// Manage the bearer tokens that clients present to the server.
///
/// Roles: read (list and watch), write (also start, type into and stop sessions), admin
/// (also clean up, delete, manage tokens, stop the server). A token belongs to a person or an
/// agent; some actions refuse agents whatever their role. Only a token's SHA-256 is stored:
/// the secret is printed once, at creation. Clients use the owner token
/// (config/owner.token) unless PROCTOR_TOKEN is set.
#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print its secret once.
    Create {
        /// read, write or admin.
        #[arg(long, value_parser = ["read", "write", "admin"])]
        role: String,
        /// A name to recognise it by (a-z, 0-9, '-', '_', '.').
        #[arg(long)]
        name: String,
        /// Who will hold it.
        #[arg(long, default_value = "person", value_parser = ["person", "agent"])]
        principal: String,
        /// Print JSON (the secret included).
        #[arg(long)]
        json: bool,
    },
    /// List tokens (never their secrets).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id or name; it stops working at once.
    ///
    /// The owner token is refused (every CLI verb uses it): replace it with `proctor token
    /// rotate-owner`. An agent (any process a run started) may revoke only agent tokens
    /// below admin.
    Revoke {
        /// The token's id (tok-…) or name.
        token: String,
    },
    /// Replace the owner token: a new secret in config/owner.token, the old one revoked.
    ///
    /// One step on the server: the new secret is written to the home (0600, atomically)
    /// before the old one stops working, so the home is never left without a way in; the
    /// ledger records `auth.owner.rotated`. Use it when the owner secret may have leaked.
    /// Clients that hold the old secret (a running cockpit, PROCTOR_TOKEN) get 401 after:
    /// restart them. The server answers only this proctor binary, run by a person at a
    /// controlling terminal in its foreground, outside the server's process tree: not an
    /// agent's run, not a script or a pipe (403 `authority_refused`).
    ///
    /// Exit codes: 0 rotated; 1 refused or failed.
    ///
    /// Example: proctor token rotate-owner
    RotateOwner {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(ctx: &Ctx, args: TokenArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    let client = client.with_token(&home)?;
    match args.command {
        TokenCommand::Create {
            role,
            name,
            principal,
            json,
        } => {
            let body = json!({"name": name, "role": role, "principal": principal});
            let v = client::block_on(client.call(Method::POST, "/v1/tokens", Some(body)))??;
            if json {
                print_json(&v)?;
            } else {
                println!(
                    "created {} ({}, {}, {})",
                    text::one_line(v["id"].as_str().unwrap_or("?"), 64),
                    text::one_line(v["name"].as_str().unwrap_or("?"), 64),
                    text::one_line(v["role"].as_str().unwrap_or("?"), 16),
                    text::one_line(v["principal"].as_str().unwrap_or("?"), 16),
                );
                println!("secret (shown once; store it now):");
                println!(
                    "{}",
                    text::one_line(v["secret"].as_str().unwrap_or(""), 200)
                );
            }
        }
        TokenCommand::List { json } => {
            let v = client::block_on(client.call(Method::GET, "/v1/tokens", None))??;
            if json {
                print_json(&v)?;
            } else {
                println!(
                    "{:<18} {:<20} {:<6} {:<7} {:<25} REVOKED",
                    "ID", "NAME", "ROLE", "WHO", "CREATED"
                );
                for t in v["items"].as_array().into_iter().flatten() {
                    let s = |k: &str| text::one_line(t[k].as_str().unwrap_or("-"), 40);
                    println!(
                        "{:<18} {:<20} {:<6} {:<7} {:<25} {}",
                        s("id"),
                        s("name"),
                        s("role"),
                        s("principal"),
                        s("created_at"),
                        s("revoked_at")
                    );
                }
            }
        }
        TokenCommand::RotateOwner { json } => {
            let v =
                client::block_on(client.call(Method::POST, "/v1/tokens/owner/rotation", None))??;
            if json {
                print_json(&v)?;
            } else {
                let revoked: Vec<String> = v["revoked"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| text::one_line(r.as_str().unwrap_or("?"), 64))
                    .collect();
                println!(
                    "owner token rotated: {} is the owner now; revoked {}",
                    text::one_line(v["owner"]["id"].as_str().unwrap_or("?"), 64),
                    if revoked.is_empty() {
                        "nothing".to_string()
                    } else {
                        revoked.join(", ")
                    }
                );
                println!(
                    "the new secret is in {} (clients holding the old one get 401: restart them)",
                    text::one_line(v["file"].as_str().unwrap_or("config/owner.token"), 200)
                );
            }
        }
        TokenCommand::Revoke { token } => {
            let path = format!("/v1/tokens/{}", percent_encode(&token));
            let v = client::block_on(client.call(Method::DELETE, &path, None))??;
            println!(
                "revoked {} ({})",
                text::one_line(v["id"].as_str().unwrap_or("?"), 64),
                text::one_line(v["name"].as_str().unwrap_or("?"), 64)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Percent-encodes a path segment (everything but unreserved ASCII).
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
