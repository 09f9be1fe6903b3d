//! Routes under `/v1/m/authority`: the publish keys the server trusts.
//!
//! - `GET /keys` (read): `{items: [{key_id, recipe, public_key_b64, openssh, registered_at,
//!   by}]}`.
//! - `POST /keys` (admin, person only) `{public_key_b64}` or `{openssh}` (optionally with
//!   `key_id`, which must then match): stores the key in `data/keys.json` and records
//!   `authority.key.registered` {key_id, by}. 201 for a new key, 200 (`"registered": false`)
//!   for a key already known. An agent token is refused with 403 `agent_refused`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::Shared;
use super::api::{ApiError, Caller};
use crate::auth::{Principal, Role};
use crate::authority::keys::{self, KeyError};

pub const BASE: &str = "/v1/m/authority";

/// The role each authority route needs (`route` is the full matched route).
pub fn authority_role(method: &str, route: &str) -> Option<Role> {
    Some(match (method, route.strip_prefix(BASE)?) {
        ("GET", "/keys") => Role::Read,
        ("POST", "/keys") => Role::Admin,
        _ => return None,
    })
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new().route("/keys", get(list_keys).post(register_key))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

async fn list_keys(State(s): State<Arc<Shared>>) -> Result<Response, ApiError> {
    let items = keys::registered(&s.home).map_err(internal)?;
    Ok(axum::Json(json!({"items": items})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterKey {
    #[serde(default)]
    public_key_b64: Option<String>,
    #[serde(default)]
    openssh: Option<String>,
    #[serde(default)]
    key_id: Option<String>,
}

async fn register_key(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    if caller.principal == Principal::Agent {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent_refused",
            "an agent identity cannot register a publish key; a person does, with \
             `proctor key generate` at their terminal",
        ));
    }
    let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", m);
    let body: RegisterKey =
        serde_json::from_slice(&body).map_err(|e| bad(format!("bad JSON body: {e}")))?;
    let key = match (&body.public_key_b64, &body.openssh) {
        (Some(b64), _) => keys::verifying_key_from_b64(b64),
        (None, Some(line)) => keys::parse_openssh_line(line),
        (None, None) => Err("the body needs public_key_b64 or openssh".to_string()),
    }
    .map_err(bad)?;
    let key_id = keys::key_id(&key);
    if let Some(claimed) = &body.key_id
        && !claimed.eq_ignore_ascii_case(&key_id)
    {
        return Err(bad(format!(
            "key_id {claimed} does not match the key (keyid={} {key_id})",
            keys::KEY_ID_RECIPE
        )));
    }
    let home = s.home.clone();
    let by = caller.token_id.clone();
    let (record, new) = tokio::task::spawn_blocking(move || {
        keys::register(&home, &key, &by, &crate::ledger::now_at())
    })
    .await
    .map_err(internal)?
    .map_err(|e: KeyError| internal(e))?;
    if new {
        s.record(
            "authority.key.registered",
            json!({"key_id": record.key_id, "by": caller.token_id}),
        )
        .map_err(internal)?;
    }
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut out = serde_json::to_value(&record).map_err(internal)?;
    out["registered"] = json!(new);
    Ok((status, axum::Json(out)).into_response())
}
