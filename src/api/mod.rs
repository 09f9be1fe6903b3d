//! The wire contract: every request and response body, query, SSE frame and error of the
//! HTTP API as serde types, and every route path, in one place. The server's handlers, the
//! client, every CLI verb and the cockpit use these types; nobody indexes an answer by
//! string. The OpenAPI 3.1 document (`GET /v1/openapi.json`, `docs/openapi.json`) is
//! generated from the same types ([`openapi`]).
//!
//! One sub-module per area of routes. Each declares its paths (constants, or functions for
//! paths with parameters), its bodies, and a `Doc` (`utoipa::OpenApi`) listing its
//! operations; [`openapi`] merges them.
//!
//! Rules every type here keeps (`docs/api.md`, "Conventions"):
//! - the run is `ref` in every body;
//! - every listing is [`Items`] (`{"items": [...]}`, with its own extra fields beside);
//! - a field a type declares is always present: an absent value is `null`, never omitted.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub mod authority;
pub mod evidence;
pub mod factory;
pub mod publish;
pub mod rigs;
pub mod runs;
pub mod server;
pub mod tribunal;
pub mod workspaces;

/// The body of every non-2xx answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: a stable machine code (`not_found`, `conflict`, `agent_refused`, …)
/// and a sentence for a person that names the remedy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// A listing: `{"items": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Items<T> {
    pub items: Vec<T>,
}

impl<T> Items<T> {
    pub fn new(items: Vec<T>) -> Self {
        Items { items }
    }
}

/// A request body: one JSON object, read as `T`. Anything else is refused before the typed
/// read, because serde's derived structs also read a JSON array as their fields in order
/// (`[true]` would be `{"discard_worktree": true}`).
pub fn parse_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        _ => Err("a request body is one JSON object ({…})".to_string()),
    }
}

/// The OpenAPI 3.1 document of the whole API, generated from the types of this module.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    let mut doc = server::Doc::openapi();
    doc.merge(runs::Doc::openapi());
    doc.merge(workspaces::Doc::openapi());
    doc.merge(evidence::Doc::openapi());
    doc.merge(publish::Doc::openapi());
    doc.merge(authority::Doc::openapi());
    doc.merge(tribunal::Doc::openapi());
    doc.merge(rigs::Doc::openapi());
    doc.merge(factory::Doc::openapi());
    doc.info.title = "proctor".to_string();
    doc.info.version = crate::version::VERSION.to_string();
    doc.info.description = Some(
        "The HTTP API of the proctor server, over a Unix socket (docs/api.md). Every \
         route but GET /v1/version needs a bearer token."
            .to_string(),
    );
    doc
}

/// [`openapi`] as the pretty JSON checked in at `docs/openapi.json` (with a final newline).
pub fn openapi_json() -> String {
    let mut s = serde_json::to_string_pretty(&openapi()).expect("the OpenAPI document serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Body {
        discard: Option<bool>,
    }

    /// Every schema an area's operations refer to is in that area's components, and so in
    /// the merged document's.
    #[test]
    fn every_schema_referred_to_is_declared() {
        use utoipa::OpenApi;
        let areas = [
            ("server", server::Doc::openapi()),
            ("runs", runs::Doc::openapi()),
            ("workspaces", workspaces::Doc::openapi()),
            ("evidence", evidence::Doc::openapi()),
            ("publish", publish::Doc::openapi()),
            ("authority", authority::Doc::openapi()),
            ("tribunal", tribunal::Doc::openapi()),
            ("rigs", rigs::Doc::openapi()),
            ("factory", factory::Doc::openapi()),
            ("all", openapi()),
        ];
        for (area, doc) in areas {
            let doc = serde_json::to_value(doc).unwrap();
            let declared = doc
                .pointer("/components/schemas")
                .and_then(|v| v.as_object())
                .cloned()
                .unwrap_or_default();
            let text = doc.to_string();
            let mut refs = 0;
            for part in text.split("\"#/components/schemas/").skip(1) {
                let name = part.split('"').next().unwrap();
                assert!(
                    declared.contains_key(name),
                    "{area}: {name} is referred to but not declared"
                );
                refs += 1;
            }
            assert!(refs > 0, "{area}: no operation refers to a schema");
        }
    }

    #[test]
    fn a_body_is_one_object_never_an_array_of_fields() {
        assert_eq!(
            parse_body::<Body>(b" {\"discard\": true}").unwrap(),
            Body {
                discard: Some(true)
            }
        );
        // serde alone reads `[true]` as the struct's fields in order.
        assert!(serde_json::from_slice::<Body>(b"[true]").is_ok());
        for bad in [&b"[true]"[..], b"true", b"\"x\"", b"", b"  "] {
            let e = parse_body::<Body>(bad).unwrap_err();
            assert!(e.contains("one JSON object"), "{e}");
        }
        assert!(parse_body::<Body>(b"{\"discard\": 1}").is_err());
    }
}
