//! The authority routes' contract (see [`crate::api`]): the publish keys the server trusts,
//! their signed changes, and the back-off after wrong passphrases, under [`BASE`]. The bodies
//! are `authority`'s own types, re-exported here.

use utoipa::OpenApi;

pub use crate::authority::keys::{RegisteredKey, Registry};
pub use crate::authority::passphrase::RecordView;
pub use crate::authority::views::{
    ChangeAnswer, ChangeRequest, RegisterKeyAnswer, RegisterKeyRequest, RightRequest,
};

use super::ErrorBody;

/// Where the authority routes are nested.
pub const BASE: &str = "/v1/m/authority";

/// The route patterns under [`BASE`] (axum's syntax), as the server's router declares them.
pub mod route {
    pub const KEYS: &str = "/keys";
    pub const CHANGES: &str = "/keys/changes";
    pub const PASSPHRASE: &str = "/passphrase/{key_id}";
    pub const WRONG: &str = "/passphrase/{key_id}/wrong";
    pub const RIGHT: &str = "/passphrase/{key_id}/right";
}

/// The registered keys (`GET`), the first key (`POST`).
pub fn keys() -> String {
    format!("{BASE}/keys")
}
/// A signed key change.
pub fn changes() -> String {
    format!("{BASE}/keys/changes")
}
/// One key's back-off record.
pub fn passphrase(key_id: &str) -> String {
    format!("{BASE}/passphrase/{key_id}")
}
/// One more wrong passphrase.
pub fn passphrase_wrong(key_id: &str) -> String {
    format!("{BASE}/passphrase/{key_id}/wrong")
}
/// A right passphrase, proved.
pub fn passphrase_right(key_id: &str) -> String {
    format!("{BASE}/passphrase/{key_id}/right")
}

// The operations, for the OpenAPI document (the handlers are in `server::authority_api`).

/// Every key ever registered (revoked ones marked), and the registry's generation.
#[utoipa::path(get, path = "/v1/m/authority/keys", tag = "authority",
    responses((status = 200, body = Registry), (status = 401, body = ErrorBody)))]
#[allow(dead_code)]
fn list_keys() {}

/// The registry's first key, unsigned (admin, person); later keys come as signed changes.
#[utoipa::path(post, path = "/v1/m/authority/keys", tag = "authority",
    request_body = RegisterKeyRequest,
    responses((status = 201, body = RegisterKeyAnswer),
              (status = 200, body = RegisterKeyAnswer, description = "already registered"),
              (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
#[allow(dead_code)]
fn register_key() {}

/// A key change signed by a registered key (admin, person).
#[utoipa::path(post, path = "/v1/m/authority/keys/changes", tag = "authority",
    request_body = ChangeRequest,
    responses((status = 201, body = ChangeAnswer), (status = 403, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
#[allow(dead_code)]
fn change_keys() {}

/// A key's back-off record and the wait left.
#[utoipa::path(get, path = "/v1/m/authority/passphrase/{key_id}", tag = "authority",
    params(("key_id" = String, Path, description = "64 lowercase hex digits")),
    responses((status = 200, body = RecordView), (status = 400, body = ErrorBody)))]
#[allow(dead_code)]
fn passphrase_record() {}

/// One more wrong passphrase (write, person).
#[utoipa::path(post, path = "/v1/m/authority/passphrase/{key_id}/wrong", tag = "authority",
    params(("key_id" = String, Path, description = "64 lowercase hex digits")),
    responses((status = 200, body = RecordView), (status = 404, body = ErrorBody)))]
#[allow(dead_code)]
fn passphrase_wrong_op() {}

/// A right passphrase, proved by a signature of the decrypted key (write, person).
#[utoipa::path(post, path = "/v1/m/authority/passphrase/{key_id}/right", tag = "authority",
    params(("key_id" = String, Path, description = "64 lowercase hex digits")),
    request_body = RightRequest,
    responses((status = 200, body = RecordView), (status = 403, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
#[allow(dead_code)]
fn passphrase_right_op() {}

/// The OpenAPI operations of this area.
#[derive(OpenApi)]
#[openapi(
    paths(
        list_keys,
        register_key,
        change_keys,
        passphrase_record,
        passphrase_wrong_op,
        passphrase_right_op
    ),
    components(schemas(
        Registry,
        RegisteredKey,
        RegisterKeyRequest,
        RegisterKeyAnswer,
        ChangeRequest,
        ChangeAnswer,
        RecordView,
        RightRequest
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the server's router declares for this area has its operation in the
    /// OpenAPI document, and the document names no other path of this area.
    #[test]
    fn every_route_is_in_the_openapi_document() {
        let doc = Doc::openapi();
        let documented: std::collections::BTreeSet<String> =
            doc.paths.paths.keys().cloned().collect();
        let declared: std::collections::BTreeSet<String> = [
            route::KEYS,
            route::CHANGES,
            route::PASSPHRASE,
            route::WRONG,
            route::RIGHT,
        ]
        .iter()
        .map(|r| format!("{BASE}{r}"))
        .collect();
        assert_eq!(documented, declared);
        assert_eq!(keys(), format!("{BASE}/keys"));
        assert_eq!(changes(), format!("{BASE}/keys/changes"));
        assert_eq!(passphrase("k"), format!("{BASE}/passphrase/k"));
        assert_eq!(passphrase_wrong("k"), format!("{BASE}/passphrase/k/wrong"));
        assert_eq!(passphrase_right("k"), format!("{BASE}/passphrase/k/right"));
    }
}
