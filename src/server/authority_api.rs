//! Routes under `/v1/m/authority`: the publish keys the server trusts, their signed changes,
//! and the back-off after wrong passphrases (see `docs/api.md` and `docs/security.md`).
//!
//! - `GET /keys` (read): `{generation, items: [{key_id, recipe, public_key_b64, openssh,
//!   registered_at, by, signed_by?, revoked_at?, revoked_signed_by?}]}`: every key ever
//!   registered, revoked ones marked.
//! - `POST /keys` (admin, person) `{public_key_b64}` or `{openssh}` (optionally `key_id`, which
//!   must match): the registry's FIRST key only, unsigned. 201 for it, 200 (`"registered":
//!   false`) for a key already registered and active; once the registry holds any key, 403
//!   `key_change_unsigned`: later keys come through `POST /keys/changes`.
//! - `POST /keys/changes` (admin, person) `{envelope}`: a change signed by a registered key
//!   ([`keychange`]): adds a key, revokes one, or both. 201; refusals 403/409/422 with a code.
//!   Records `authority.key.registered` / `authority.key.revoked` with `signed_by`.
//! - `GET /passphrase/{key_id}` (read): the key's back-off record and the wait left.
//! - `POST /passphrase/{key_id}/wrong` (write, person): one more wrong passphrase; records
//!   `authority.passphrase.wrong` {key_id, attempt, wait_ms, not_before}.
//! - `POST /passphrase/{key_id}/right` (write, person) `{proof}`: a right passphrase, proved by
//!   a signature of the decrypted key; resets the record (`authority.passphrase.reset`).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
pub use crate::api::authority::BASE;
use crate::api::authority::{
    ChangeAnswer, ChangeRequest, RecordView, RegisterKeyAnswer, RegisterKeyRequest, RightRequest,
    route,
};
use crate::auth::Role;
use crate::authority::keychange::{self, ChangeError};
use crate::authority::keys::{self, FirstKeyError};
use crate::authority::passphrase::{self, PassphraseError};

/// The server's settings for the publish authority (`proctor serve` flags).
#[derive(Debug, Clone)]
pub struct AuthoritySettings {
    /// The first wait after [`passphrase::FREE_ATTEMPTS`] wrong passphrases, in ms.
    pub passphrase_backoff_ms: u64,
}

impl Default for AuthoritySettings {
    fn default() -> Self {
        AuthoritySettings {
            passphrase_backoff_ms: passphrase::DEFAULT_BASE_MS,
        }
    }
}

/// The authority's part of the server's state: its settings and the locks that serialise the
/// read-modify-writes of the key registry and of the back-off record.
#[derive(Debug, Default)]
pub struct AuthorityState {
    pub settings: AuthoritySettings,
    registry: Mutex<()>,
    lock: Mutex<()>,
}

impl AuthorityState {
    pub fn new(settings: AuthoritySettings) -> AuthorityState {
        AuthorityState {
            settings,
            registry: Mutex::new(()),
            lock: Mutex::new(()),
        }
    }
}

/// The role each authority route needs (`route` is the full matched route).
pub fn authority_role(method: &str, full: &str) -> Option<Role> {
    use route::*;
    Some(match (method, full.strip_prefix(BASE)?) {
        ("GET", KEYS) => Role::Read,
        ("POST", KEYS | CHANGES) => Role::Admin,
        ("GET", PASSPHRASE) => Role::Read,
        ("POST", WRONG | RIGHT) => Role::Write,
        _ => return None,
    })
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(route::KEYS, get(list_keys).post(register_key))
        .route(route::CHANGES, post(change_keys))
        .route(route::PASSPHRASE, get(passphrase_record))
        .route(route::WRONG, post(passphrase_wrong))
        .route(route::RIGHT, post(passphrase_right))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e)
}
fn bad(m: String) -> ApiError {
    ApiError::bad_request(m)
}

fn person_only(caller: &Caller, what: &str) -> Result<(), ApiError> {
    super::api::person_only(
        caller,
        what,
        "a person does, with `proctor key …` at their terminal",
    )
}

async fn list_keys(State(s): State<Arc<Shared>>) -> Result<Response, ApiError> {
    let reg = keys::read_registry(&s.home).map_err(internal)?;
    Ok(axum::Json(reg).into_response())
}

async fn register_key(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    person_only(&caller, "register a publish key")?;
    let body: RegisterKeyRequest =
        crate::api::parse_body(&body).map_err(|e| bad(format!("bad JSON body: {e}")))?;
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
    let by = caller.token_id.clone();
    let v = blocking(move || {
        let (record, new) = match keys::register_first(
            &s.home,
            &s.authority.registry,
            &key,
            &by,
            &crate::ledger::now_at(),
        ) {
            Ok(v) => v,
            Err(e @ FirstKeyError::SignatureNeeded { .. }) => {
                let _ = s.record(
                    "authority.key.refused",
                    json!({"key_id": key_id, "code": "key_change_unsigned", "by": by}),
                );
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "key_change_unsigned",
                    e.to_string(),
                ));
            }
            Err(e) => return Err(internal(e)),
        };
        if new {
            s.record(
                "authority.key.registered",
                json!({"key_id": record.key_id, "by": by, "first": true}),
            )
            .map_err(internal)?;
        }
        Ok((
            new,
            RegisterKeyAnswer {
                key: record,
                registered: new,
            },
        ))
    })
    .await?;
    let status = if v.0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(v.1)).into_response())
}

fn change_refusal(e: &ChangeError) -> ApiError {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ApiError::new(status, e.code(), e.to_string())
}

/// Refuses while `key_id` must still wait after wrong passphrases.
fn backoff_gate(s: &Shared, key_id: &str) -> Result<(), ApiError> {
    match passphrase::backoff_message(&s.home, key_id).map_err(internal)? {
        Some(message) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "passphrase_backoff",
            message,
        )),
        None => Ok(()),
    }
}

async fn change_keys(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    person_only(&caller, "change the publish keys")?;
    let req: ChangeRequest =
        crate::api::parse_body(&body).map_err(|e| bad(format!("bad JSON body: {e}")))?;
    let v = blocking(move || {
        let by = caller.token_id.clone();
        if let Some(signer) = keychange::claimed_signer(&req.envelope) {
            backoff_gate(&s, &signer)?;
        }
        let applied = match keychange::apply(
            &s.home,
            &s.authority.registry,
            &req.envelope,
            &by,
            chrono::Utc::now(),
        ) {
            Ok(a) => a,
            Err(e) => {
                let _ = s.record(
                    "authority.key.refused",
                    json!({"code": e.code(), "signed_by": keychange::claimed_signer(&req.envelope),
                           "by": by}),
                );
                return Err(change_refusal(&e));
            }
        };
        let p = &applied.payload;
        if let Some(k) = &applied.added {
            s.record(
                "authority.key.registered",
                json!({"key_id": k.key_id, "by": by, "signed_by": p.signer,
                       "action": p.action, "change_sha256": applied.payload_sha256,
                       "generation": applied.generation}),
            )
            .map_err(internal)?;
        }
        if let Some(k) = &applied.revoked {
            s.record(
                "authority.key.revoked",
                json!({"key_id": k.key_id, "by": by, "signed_by": p.signer,
                       "action": p.action, "change_sha256": applied.payload_sha256,
                       "generation": applied.generation}),
            )
            .map_err(internal)?;
        }
        Ok(ChangeAnswer {
            action: p.action.clone(),
            signed_by: p.signer.clone(),
            generation: applied.generation,
            added: applied.added.clone(),
            revoked: applied.revoked.clone(),
            change_sha256: applied.payload_sha256.clone(),
        })
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(v)).into_response())
}

fn check_key_id(key_id: &str) -> Result<(), ApiError> {
    if key_id.len() == 64
        && key_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        Ok(())
    } else {
        Err(bad(format!(
            "a key id is 64 lowercase hex digits ({}); got {} characters",
            keys::KEY_ID_RECIPE,
            key_id.len()
        )))
    }
}

fn passphrase_refusal(e: PassphraseError) -> ApiError {
    match e {
        PassphraseError::UnknownKey(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "key_not_registered", e.to_string())
        }
        PassphraseError::BadProof(_) => {
            ApiError::new(StatusCode::FORBIDDEN, "bad_proof", e.to_string())
        }
        PassphraseError::StaleProof { .. } => {
            ApiError::new(StatusCode::CONFLICT, "stale_proof", e.to_string())
        }
        other => internal(other),
    }
}

fn record_view(s: &Shared, key_id: &str, r: &passphrase::Record) -> RecordView {
    RecordView::of(
        key_id,
        r,
        s.authority.settings.passphrase_backoff_ms,
        chrono::Utc::now(),
    )
}

async fn passphrase_record(
    State(s): State<Arc<Shared>>,
    Path(key_id): Path<String>,
) -> Result<Response, ApiError> {
    check_key_id(&key_id)?;
    let v = blocking(move || {
        let r = passphrase::record(&s.home, &key_id).map_err(internal)?;
        Ok::<_, ApiError>(record_view(&s, &key_id, &r))
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

async fn passphrase_wrong(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(key_id): Path<String>,
) -> Result<Response, ApiError> {
    person_only(&caller, "report a passphrase")?;
    check_key_id(&key_id)?;
    let v = blocking(move || {
        let r = {
            let _g = s.authority.lock.lock().unwrap_or_else(|e| e.into_inner());
            passphrase::record_wrong(
                &s.home,
                &key_id,
                s.authority.settings.passphrase_backoff_ms,
                chrono::Utc::now(),
            )
            .map_err(passphrase_refusal)?
        };
        s.record(
            "authority.passphrase.wrong",
            json!({"key_id": key_id, "attempt": r.failures, "wait_ms": r.wait_ms,
                   "not_before": r.not_before, "by": caller.token_id}),
        )
        .map_err(internal)?;
        Ok::<_, ApiError>(record_view(&s, &key_id, &r))
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

async fn passphrase_right(
    State(s): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(key_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    person_only(&caller, "report a passphrase")?;
    check_key_id(&key_id)?;
    let req: RightRequest =
        crate::api::parse_body(&body).map_err(|e| bad(format!("bad JSON body: {e}")))?;
    let v = blocking(move || {
        let cleared = {
            let _g = s.authority.lock.lock().unwrap_or_else(|e| e.into_inner());
            passphrase::record_right(&s.home, &key_id, &req.proof).map_err(passphrase_refusal)?
        };
        if cleared > 0 {
            s.record(
                "authority.passphrase.reset",
                json!({"key_id": key_id, "after_failures": cleared, "by": caller.token_id}),
            )
            .map_err(internal)?;
        }
        let r = passphrase::Record::default();
        Ok::<_, ApiError>(record_view(&s, &key_id, &r))
    })
    .await?;
    Ok(axum::Json(v).into_response())
}

#[cfg(test)]
mod tests;
