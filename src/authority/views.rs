//! The values the authority routes take and answer (`/v1/m/authority`), as `authority`'s own
//! types; [`crate::api::authority`] re-exports them as the wire contract. The key listing is
//! [`super::keys::Registry`] (`{generation, items}`), a back-off record
//! [`super::passphrase::RecordView`].

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::dsse::Envelope;
use super::keys::RegisteredKey;

/// `POST /keys`: the registry's first key, unsigned: its raw public key (base64) or its
/// OpenSSH line, and optionally the key id it must have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterKeyRequest {
    #[serde(default)]
    pub public_key_b64: Option<String>,
    #[serde(default)]
    pub openssh: Option<String>,
    #[serde(default)]
    pub key_id: Option<String>,
}

/// The answer to `POST /keys`: the key as registered, and whether this call registered it
/// (`false`: it was registered and active already).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RegisterKeyAnswer {
    #[serde(flatten)]
    pub key: RegisteredKey,
    pub registered: bool,
}

/// `POST /keys/changes`: a key change signed by a registered key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeRequest {
    #[schema(value_type = Object)]
    pub envelope: Envelope,
}

/// The answer to a key change: what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChangeAnswer {
    /// `add`, `revoke` or `replace`.
    pub action: String,
    /// The key id that signed it.
    pub signed_by: String,
    /// The registry's generation after it.
    pub generation: u64,
    pub added: Option<RegisteredKey>,
    pub revoked: Option<RegisteredKey>,
    /// SHA-256 (hex) of the signed payload: how the ledger names the change.
    pub change_sha256: String,
}

/// `POST /passphrase/{key_id}/right`: the proof of a right passphrase (a signature of the
/// decrypted key over the record it resets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RightRequest {
    #[schema(value_type = Object)]
    pub proof: Envelope,
}
