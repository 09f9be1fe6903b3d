//! The checked-in OpenAPI document (`docs/openapi.json`) is the one the code generates from
//! the wire contract's types (`proctor::api::openapi_json`), byte for byte; and the server
//! serves the same document at `GET /v1/openapi.json` to a read token.
//!
//! `PROCTOR_WRITE_OPENAPI=1 cargo test --test openapi` writes the file from the code (the
//! remedy when the contract changed); without the variable the test only compares.

use std::path::PathBuf;

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json")
}

#[test]
fn the_checked_in_document_is_what_the_code_generates() {
    let generated = proctor::api::openapi_json();
    let path = doc_path();
    if std::env::var_os("PROCTOR_WRITE_OPENAPI").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map(|i| i + 1)
            .unwrap_or_else(|| checked_in.lines().count().min(generated.lines().count()) + 1);
        panic!(
            "docs/openapi.json differs from the document the code generates (first at line \
             {line}: checked in {:?}, generated {:?}). Remedy: regenerate it with \
             `PROCTOR_WRITE_OPENAPI=1 cargo test --test openapi`, review the diff, and commit it",
            checked_in.lines().nth(line - 1).unwrap_or("<end of file>"),
            generated.lines().nth(line - 1).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn the_document_is_openapi_3_1_and_names_every_area_route() {
    let v: serde_json::Value = serde_json::from_str(&proctor::api::openapi_json()).unwrap();
    assert!(
        v["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        v["openapi"]
    );
    let paths = v["paths"].as_object().unwrap();
    for route in [
        proctor::api::server::VERSION,
        proctor::api::server::SERVER,
        proctor::api::server::OPENAPI,
        proctor::api::server::TOKEN,
        proctor::api::server::OWNER_ROTATION,
        proctor::api::runs::RUNS,
        proctor::api::runs::ATTACH,
        proctor::api::runs::DIFF_FILE,
    ] {
        assert!(paths.contains_key(route), "{route} is not in the document");
    }
    let schemas = v["components"]["schemas"].as_object().unwrap();
    for schema in [
        "RunView",
        "RunPage",
        "MarksView",
        "EndEvent",
        "WhoAmI",
        "ErrorBody",
    ] {
        assert!(
            schemas.contains_key(schema),
            "{schema} is not in the document"
        );
    }
}

mod common;
use common::{TestHome, call_as};

#[test]
fn the_server_serves_the_document_to_a_read_token() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let sock = h.socket();
    let c = h.json(&[
        "token", "create", "--role", "read", "--name", "reader", "--json",
    ]);
    let reader = c["secret"].as_str().unwrap();
    let (status, v) = call_as(&sock, Some(reader), "GET", "/v1/openapi.json", None);
    assert_eq!(status, 200, "{v}");
    let want: serde_json::Value = serde_json::from_str(&proctor::api::openapi_json()).unwrap();
    assert_eq!(v, want, "the served document is the generated one");
    let (status, _) = call_as(&sock, None, "GET", "/v1/openapi.json", None);
    assert_eq!(
        status, 401,
        "the document needs a token like every route but the version"
    );
    h.ok(&["server", "stop"]);
}
