//! `GET /v1/whoami`: a client learns its own token's role (the cockpit uses it to show the
//! actions its token cannot perform as unavailable).

mod common;
use common::{TestHome, call_as};

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
