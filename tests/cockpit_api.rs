//! What the cockpit needs from the API beyond the session verbs: `GET /v1/whoami` (a client
//! learns its own token's role, to show the actions it cannot perform as unavailable) and
//! `output.last_at` (when a run last wrote output: `running · output 2s ago`).

mod common;
use common::{DemoServer, TestHome, call_as};

#[test]
fn whoami_names_the_callers_token_role_and_principal() {
    let h = TestHome::new();
    h.ok(&["serve"]);
    let sock = h.socket();
    let owner = h.owner_token();
    let (status, v) = call_as(&sock, Some(&owner), "GET", "/v1/whoami", None);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["role"], "admin", "{v}");
    assert_eq!(v["principal"], "person", "{v}");
    assert!(v["token_id"].is_string() && v["name"].is_string(), "{v}");
    assert!(v.get("secret").is_none() && v.get("hash").is_none(), "{v}");

    for (role, principal) in [("read", "person"), ("write", "agent")] {
        let c = h.json(&[
            "token",
            "create",
            "--role",
            role,
            "--name",
            &format!("{role}-who"),
            "--principal",
            principal,
            "--json",
        ]);
        let secret = c["secret"].as_str().unwrap();
        let (status, v) = call_as(&sock, Some(secret), "GET", "/v1/whoami", None);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["role"], role, "{v}");
        assert_eq!(v["principal"], principal, "{v}");
        assert_eq!(v["name"], format!("{role}-who"), "{v}");
        assert_eq!(v["token_id"], c["id"], "{v}");
    }
    // No token, or a revoked one: 401 like every authenticated route.
    let (status, _) = call_as(&sock, None, "GET", "/v1/whoami", None);
    assert_eq!(status, 401);
    let (status, _) = call_as(&sock, Some("not-a-token"), "GET", "/v1/whoami", None);
    assert_eq!(status, 401);
}

#[test]
fn a_run_view_says_when_the_run_last_wrote_output() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(serde_json::json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    let v = s.wait_run(&run, "some output", |v| {
        v["output"]["bytes"].as_u64().unwrap_or(0) > 0
    });
    let at = v["output"]["last_at"]
        .as_str()
        .expect("last_at once output exists");
    let at = chrono::DateTime::parse_from_rfc3339(at).unwrap();
    let created = chrono::DateTime::parse_from_rfc3339(v["created_at"].as_str().unwrap()).unwrap();
    assert!(at >= created, "output after creation: {v}");
    // It moves when the run writes again.
    s.expect(
        202,
        "POST",
        &s.run_path(&run, "/input"),
        Some(serde_json::json!({"text": "hello"})),
    );
    let before = v["output"]["next_seq"].as_u64().unwrap();
    let w = s.wait_run(&run, "the echo", |w| {
        w["output"]["next_seq"].as_u64().unwrap() > before
    });
    let at2 =
        chrono::DateTime::parse_from_rfc3339(w["output"]["last_at"].as_str().unwrap()).unwrap();
    assert!(at2 >= at, "{v} then {w}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}
