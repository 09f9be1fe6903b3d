//! `proctor token create|list|revoke|rotate-owner`: bearer tokens for the API.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hyper::Method;

use super::{Ctx, print_json};
use crate::api::server::{self as wire, CreateToken, CreatedToken, OwnerRotated, Token, TokenList};
use crate::auth::Principal;
use crate::client::{self, Client};
use crate::text;

/// `person` or `agent`.
fn who(p: Principal) -> &'static str {
    match p {
        Principal::Person => "person",
        Principal::Agent => "agent",
    }
}

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
            let body = CreateToken {
                name,
                role,
                principal: Some(principal),
            };
            let v: CreatedToken =
                client.request_blocking(Method::POST, wire::TOKENS, Some(&body))?;
            if json {
                print_json(&v)?;
            } else {
                println!(
                    "created {} ({}, {}, {})",
                    text::one_line(&v.token.id, 64),
                    text::one_line(&v.token.name, 64),
                    v.token.role.as_str(),
                    who(v.token.principal),
                );
                println!("secret (shown once; store it now):");
                println!("{}", text::one_line(&v.secret, 200));
            }
        }
        TokenCommand::List { json } => {
            let v: TokenList = client.get_blocking(wire::TOKENS)?;
            if json {
                print_json(&v)?;
            } else {
                println!(
                    "{:<18} {:<20} {:<6} {:<7} {:<25} REVOKED",
                    "ID", "NAME", "ROLE", "WHO", "CREATED"
                );
                for t in &v.items {
                    let s = |x: &str| text::one_line(x, 40);
                    println!(
                        "{:<18} {:<20} {:<6} {:<7} {:<25} {}",
                        s(&t.id),
                        s(&t.name),
                        t.role.as_str(),
                        who(t.principal),
                        s(&t.created_at),
                        s(t.revoked_at.as_deref().unwrap_or("-"))
                    );
                }
            }
        }
        TokenCommand::RotateOwner { json } => {
            let v: OwnerRotated =
                client.request_blocking::<(), _>(Method::POST, wire::OWNER_ROTATION, None)?;
            if json {
                print_json(&v)?;
            } else {
                let revoked: Vec<String> =
                    v.revoked.iter().map(|r| text::one_line(r, 64)).collect();
                println!(
                    "owner token rotated: {} is the owner now; revoked {}",
                    text::one_line(&v.owner.id, 64),
                    if revoked.is_empty() {
                        "nothing".to_string()
                    } else {
                        revoked.join(", ")
                    }
                );
                println!(
                    "the new secret is in {} (clients holding the old one get 401: restart them)",
                    text::one_line(&v.file.to_string_lossy(), 200)
                );
            }
        }
        TokenCommand::Revoke { token } => {
            let v: Token =
                client.request_blocking::<(), _>(Method::DELETE, &wire::token(&token), None)?;
            println!(
                "revoked {} ({})",
                text::one_line(&v.id, 64),
                text::one_line(&v.name, 64)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
