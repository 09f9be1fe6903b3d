//! The server routes' contract (see [`crate::api`]): the version probe, the server's status
//! and stop, who the caller is, the tokens, the owner token's rotation, and this document.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::sessions::view::ContainmentView;

use super::ErrorBody;

/// `GET`, without a token: what the server is (the clients' probe).
pub const VERSION: &str = "/v1/version";
/// `GET` (read): the server's status.
pub const SERVER: &str = "/v1/server";
/// `POST` (admin): stop the server.
pub const SERVER_STOP: &str = "/v1/server/stop";
/// `GET` (read): who the caller is.
pub const WHOAMI: &str = "/v1/whoami";
/// `GET` (list) and `POST` (create), admin.
pub const TOKENS: &str = "/v1/tokens";
/// `DELETE` (revoke), admin.
pub const TOKEN: &str = "/v1/tokens/{id}";
/// `POST` (admin, a person at a terminal): the owner token's rotation.
pub const OWNER_ROTATION: &str = "/v1/tokens/owner/rotation";
/// `GET` (read): the OpenAPI 3.1 document of the API.
pub const OPENAPI: &str = "/v1/openapi.json";

/// [`TOKEN`] for one token id (percent-encoded as one path segment: an id is the caller's
/// text).
pub fn token(id: &str) -> String {
    let segment: String = id
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    TOKEN.replace("{id}", &segment)
}

/// `GET /v1/version`. Every field is always sent; a client reads any server's answer
/// (one of another protocol may lack some: they read as empty, and the protocol as 0), so it
/// can name the protocol it met.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct VersionInfo {
    /// Always `proctor`.
    #[schema(required = true)]
    pub name: String,
    #[schema(required = true)]
    pub version: String,
    /// The wire protocol; a client refuses a server that speaks another.
    #[schema(required = true)]
    pub protocol: u32,
    /// Runs a previous server left that this one is still sweeping (they show
    /// `recovering`).
    #[schema(required = true)]
    pub recovering: usize,
}

/// `GET /v1/server`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ServerStatus {
    pub name: String,
    pub version: String,
    pub protocol: u32,
    pub pid: u32,
    pub started_at: String,
    #[schema(value_type = String)]
    pub socket: PathBuf,
    /// The home's root (its data folder for an XDG home).
    #[schema(value_type = String)]
    pub home: PathBuf,
    #[schema(value_type = String)]
    pub ledger: PathBuf,
    /// How the server holds its runs' processes.
    pub runs_held_by: ContainmentView,
}

/// The peer of the caller's connection, as the kernel said at accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PeerView {
    /// 0 when the kernel gave none (a peer in another pid namespace).
    pub pid: u32,
    /// `descendant`, `outside`, `unknown` or `in_run_cgroup` (relative to the server's
    /// process tree).
    #[schema(value_type = String)]
    pub ancestry: crate::peer::Ancestry,
}

/// `GET /v1/whoami`: the caller's token, and the principal the server treats it as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub token_id: String,
    pub name: String,
    #[schema(value_type = String)]
    pub role: crate::auth::Role,
    /// `agent` whenever the kernel says the peer descends from the server, whatever the
    /// token says.
    #[schema(value_type = String)]
    pub principal: crate::auth::Principal,
    /// The principal the token names.
    #[schema(value_type = String)]
    pub token_principal: crate::auth::Principal,
    pub peer: PeerView,
}

/// `POST /v1/server/stop` answers 202 with this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Stopping {
    pub stopping: bool,
}

/// A token as the API shows it (never its secret nor its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Token {
    pub id: String,
    pub name: String,
    #[schema(value_type = String)]
    pub role: crate::auth::Role,
    #[schema(value_type = String)]
    pub principal: crate::auth::Principal,
    pub created_at: String,
    #[schema(required = true)]
    pub revoked_at: Option<String>,
}

impl From<&crate::auth::TokenRecord> for Token {
    fn from(r: &crate::auth::TokenRecord) -> Self {
        Token {
            id: r.id.clone(),
            name: r.name.clone(),
            role: r.role,
            principal: r.principal,
            created_at: r.created_at.clone(),
            revoked_at: r.revoked_at.clone(),
        }
    }
}

/// `GET /v1/tokens`. An agent principal sees only the agent tokens below admin; `only` is
/// then `agent` (null for a person, who sees them all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    pub items: Vec<Token>,
    #[schema(required = true)]
    pub only: Option<String>,
}

/// `POST /v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateToken {
    pub name: String,
    /// `read`, `write` or `admin`.
    pub role: String,
    /// `person` (the default) or `agent`.
    #[serde(default)]
    pub principal: Option<String>,
}

/// `POST /v1/tokens` answers 201 with the token and its secret, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: Token,
    pub secret: String,
}

/// `POST /v1/tokens/owner/rotation`: the new owner token (its secret is in `file`, never in
/// the answer) and the ids it revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OwnerRotated {
    pub owner: Token,
    pub revoked: Vec<String>,
    #[schema(value_type = String)]
    pub file: PathBuf,
}

/// The operations of this area, declared in the contract (the contract layer may not name
/// the faces; see [`crate::api::runs`]). Each names the route constant and the body types
/// the handler in `server::api` takes and answers.
#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(get, path = VERSION, tag = "server", security(()),
        description = "What the server is; needs no token (the clients' probe).",
        responses((status = 200, description = "the answer", body = VersionInfo)))]
    pub fn version() {}

    #[utoipa::path(get, path = SERVER, tag = "server",
        description = "The server's status (read).",
        responses((status = 200, description = "the answer", body = ServerStatus),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn server_status() {}

    #[utoipa::path(post, path = SERVER_STOP, tag = "server",
        description = "Stops the server: every run is stopped first (admin).",
        responses((status = 202, description = "the answer", body = Stopping),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn server_stop() {}

    #[utoipa::path(get, path = WHOAMI, tag = "server",
        description = "Who the caller is (read): a client learns its role here.",
        responses((status = 200, description = "the answer", body = WhoAmI),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn whoami() {}

    #[utoipa::path(get, path = TOKENS, tag = "tokens",
        description = "The tokens (admin); an agent principal sees only agent tokens.",
        responses((status = 200, description = "the answer", body = TokenList),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn list_tokens() {}

    #[utoipa::path(post, path = TOKENS, tag = "tokens", request_body = CreateToken,
        description = "Creates a token (admin, a person); its secret is shown this once.",
        responses((status = 201, description = "the answer", body = CreatedToken),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn create_token() {}

    #[utoipa::path(delete, path = TOKEN, tag = "tokens",
        params(("id" = String, Path, description = "the token's id")),
        description = "Revokes a token (admin); the owner token is rotated, never revoked.",
        responses((status = 200, description = "the answer", body = Token),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn revoke_token() {}

    #[utoipa::path(post, path = OWNER_ROTATION, tag = "tokens",
        description = "A new owner secret in config/owner.token, the old one revoked (admin, a \
            person at a terminal).",
        responses((status = 200, description = "the answer", body = OwnerRotated),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn rotate_owner() {}

    #[utoipa::path(get, path = OPENAPI, tag = "server",
        description = "This document: the OpenAPI 3.1 description of the API (read).",
        responses((status = 200, description = "the OpenAPI document", content_type = "application/json"),
            (status = "4XX", description = "refused", body = ErrorBody)))]
    pub fn openapi() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::version,
        ops::server_status,
        ops::server_stop,
        ops::whoami,
        ops::list_tokens,
        ops::create_token,
        ops::revoke_token,
        ops::rotate_owner,
        ops::openapi,
    ),
    components(schemas(
        ErrorBody,
        VersionInfo,
        ServerStatus,
        ContainmentView,
        PeerView,
        WhoAmI,
        Stopping,
        Token,
        TokenList,
        CreateToken,
        CreatedToken,
        OwnerRotated,
    )),
    tags(
        (name = "server", description = "The server: version, status, stop, who the caller is"),
        (name = "tokens", description = "Bearer tokens and the owner token's rotation"),
    )
)]
pub struct Doc;
