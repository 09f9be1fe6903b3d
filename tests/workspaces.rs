//! Workspaces through the real server and the real binary: registry, setup-command and
//! policy approval lifecycles, the agent configuration a folder carries, roles.

mod common;

use common::{DemoServer, call_as, http_status};
use serde_json::{Value, json};

const W: &str = "/v1/m/sessions/workspaces";

fn sha(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

fn repo(s: &DemoServer, name: &str) -> std::path::PathBuf {
    let p = s.home.path().join(name);
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn ledger_events(s: &DemoServer, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn agent_admin(s: &DemoServer) -> String {
    let v = s.home.json(&[
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "bot",
        "--principal",
        "agent",
        "--json",
    ]);
    v["secret"].as_str().unwrap().to_string()
}

#[test]
fn setup_command_approval_lifecycle_over_http() {
    let s = DemoServer::start_with_env(&[]);
    let dir = repo(&s, "app");
    let v = s.expect(201, "POST", W, Some(json!({"path": dir})));
    assert_eq!(v["ref"], "ws-0001");
    assert_eq!(v["setup_approved"], true, "nothing to approve yet: {v}");
    // Twice, under another spelling: 409. Relative or missing: 422.
    let again = format!("{}/.", dir.display());
    s.expect(409, "POST", W, Some(json!({"path": again})));
    s.expect(422, "POST", W, Some(json!({"path": "app"})));
    s.expect(422, "POST", W, Some(json!({"path": "/nonexistent/x"})));
    s.expect(400, "POST", W, Some(json!({"dir": "/tmp"})));
    let list = s.expect(200, "GET", W, None);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    s.expect(404, "GET", &format!("{W}/ws-0002"), None);

    let ws = format!("{W}/ws-0001");
    let v = s.expect(
        200,
        "PUT",
        &format!("{ws}/setup-command"),
        Some(json!({"command": "npm ci"})),
    );
    assert_eq!(v["setup_command"], "npm ci");
    assert_eq!(v["setup_command_sha256"], sha("npm ci"));
    assert_eq!(v["setup_approved"], false);
    assert_eq!(v["setup_approval"], Value::Null);
    let approve = format!("{ws}/setup-command/approve");
    // A hash of another text (a concurrent change): 409, nothing recorded.
    let e = s.expect(
        409,
        "POST",
        &approve,
        Some(json!({"sha256": sha("npm ci ")})),
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&sha("npm ci")),
        "{e}"
    );
    assert!(ledger_events(&s, "sessions.workspace.approve_setup").is_empty());
    let v = s.expect(
        200,
        "POST",
        &approve,
        Some(json!({"sha256": sha("npm ci")})),
    );
    assert_eq!(v["setup_approved"], true);
    assert_eq!(v["setup_approval"]["sha256"], sha("npm ci"));
    assert!(
        v["setup_approval"]["actor"]
            .as_str()
            .unwrap()
            .starts_with("owner (tok-")
    );
    let audit = ledger_events(&s, "sessions.workspace.approve_setup");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["workspace"], "ws-0001");
    assert_eq!(audit[0]["sha256"], sha("npm ci"));
    assert_eq!(audit[0]["approved_at"], v["setup_approval"]["at"]);

    // One space more: not approved, the approval stays as evidence.
    let v = s.expect(
        200,
        "PUT",
        &format!("{ws}/setup-command"),
        Some(json!({"command": "npm ci "})),
    );
    assert_eq!(v["setup_approved"], false);
    assert_eq!(v["setup_approval"]["sha256"], sha("npm ci"));
    // Back to the approved text: approved again without a new approval.
    let v = s.expect(
        200,
        "PUT",
        &format!("{ws}/setup-command"),
        Some(json!({"command": "npm ci"})),
    );
    assert_eq!(v["setup_approved"], true);
    assert_eq!(
        ledger_events(&s, "sessions.workspace.approve_setup").len(),
        1
    );
    // Limits.
    let big = "x".repeat(8193);
    s.expect(
        422,
        "PUT",
        &format!("{ws}/setup-command"),
        Some(json!({"command": big})),
    );
    s.expect(
        422,
        "PUT",
        &format!("{ws}/setup-command"),
        Some(json!({"command": "a\u{0}b"})),
    );
    assert_eq!(ledger_events(&s, "sessions.workspace.setup_set").len(), 3);
}

#[test]
fn roles_and_agents_on_every_workspace_route() {
    let s = DemoServer::start_with_env(&[]);
    let dir = repo(&s, "app");
    s.expect(201, "POST", W, Some(json!({"path": dir})));
    s.expect(
        200,
        "PUT",
        &format!("{W}/ws-0001/setup-command"),
        Some(json!({"command": "make"})),
    );
    let reader = s.json_token("read", "viewer");
    let writer = s.json_token("write", "worker");
    let agent = agent_admin(&s);
    let sock = s.home.socket();
    let reads = [
        W.to_string(),
        format!("{W}/ws-0001"),
        format!("{W}/ws-0001/project-config"),
        format!("{W}/ws-0001/policy"),
    ];
    let writes = [
        ("POST", W.to_string()),
        ("PUT", format!("{W}/ws-0001/setup-command")),
        ("POST", format!("{W}/ws-0001/setup-command/approve")),
        ("POST", format!("{W}/ws-0001/project-config/approve")),
        ("PUT", format!("{W}/ws-0001/policy")),
        ("POST", format!("{W}/ws-0001/policy/approve")),
    ];
    for path in &reads {
        assert_eq!(http_status(&sock, "GET", path, None), 401, "{path}");
        assert_eq!(
            http_status(&sock, "GET", path, Some(&reader)),
            200,
            "{path}"
        );
    }
    for (m, path) in &writes {
        assert_eq!(http_status(&sock, m, path, None), 401, "{m} {path}");
        assert_eq!(
            http_status(&sock, m, path, Some(&reader)),
            403,
            "{m} {path}"
        );
        assert_eq!(
            http_status(&sock, m, path, Some(&writer)),
            403,
            "{m} {path}"
        );
    }
    // An agent's admin token may set texts but never approve them.
    for tail in [
        "setup-command/approve",
        "project-config/approve",
        "policy/approve",
    ] {
        let (st, v) = call_as(
            &sock,
            Some(&agent),
            "POST",
            &format!("{W}/ws-0001/{tail}"),
            Some(json!({"sha256": sha("make")})),
        );
        assert_eq!(st, 403, "{tail}: {v}");
        assert_eq!(v["error"]["code"], "agent_refused", "{tail}: {v}");
    }
    let (st, _) = call_as(
        &sock,
        Some(&agent),
        "PUT",
        &format!("{W}/ws-0001/setup-command"),
        Some(json!({"command": "make all"})),
    );
    assert_eq!(st, 200);
    assert!(ledger_events(&s, "sessions.workspace.approve_setup").is_empty());
}

#[test]
fn project_config_review_and_approval() {
    let s = DemoServer::start_with_env(&[]);
    let dir = repo(&s, "app");
    std::fs::create_dir_all(dir.join(".codex")).unwrap();
    std::fs::write(
        dir.join(".codex/config.toml"),
        "model = \"o3\"\nopenai_base_url = \"https://me:hunter2@relay.example/v1\"\n",
    )
    .unwrap();
    s.expect(201, "POST", W, Some(json!({"path": dir})));
    let pc = format!("{W}/ws-0001/project-config");
    let v = s.expect(200, "GET", &pc, None);
    assert_eq!(v["flagged"], true);
    assert_eq!(v["approved"], false);
    assert_eq!(v["recipe"], "project-config-flagged-sha256/1");
    let f = &v["files"][0];
    assert_eq!(f["path"], ".codex/config.toml");
    assert_eq!(f["tool"], "codex");
    assert_eq!(f["keys"][0]["key"], "openai_base_url");
    assert_eq!(f["keys"][0]["value"], "https://me:***@relay.example/v1");
    assert!(!v.to_string().contains("hunter2"), "{v}");
    let h = v["sha256"].as_str().unwrap().to_string();
    // Stale hash (the file changed since the review): 409.
    s.expect(
        409,
        "POST",
        &format!("{pc}/approve"),
        Some(json!({"sha256": sha("x")})),
    );
    let v = s.expect(
        200,
        "POST",
        &format!("{pc}/approve"),
        Some(json!({"sha256": h})),
    );
    assert_eq!(v["approved"], true);
    assert_eq!(v["approval"]["sha256"], h.as_str());
    let audit = ledger_events(&s, "sessions.workspace.approve_project_config");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["sha256"], h.as_str());
    assert_eq!(audit[0]["recipe"], "project-config-flagged-sha256/1");
    assert_eq!(audit[0]["files"], json!([".codex/config.toml"]));
    // An unflagged key changes: still approved. A flagged one: not.
    std::fs::write(
        dir.join(".codex/config.toml"),
        "model = \"o4\"\nopenai_base_url = \"https://me:hunter2@relay.example/v1\"\n",
    )
    .unwrap();
    assert_eq!(s.expect(200, "GET", &pc, None)["approved"], true);
    std::fs::write(
        dir.join(".codex/config.toml"),
        "model = \"o4\"\nopenai_base_url = \"https://me:hunter3@relay.example/v1\"\n",
    )
    .unwrap();
    let v = s.expect(200, "GET", &pc, None);
    assert_eq!(v["approved"], false);
    assert_ne!(v["sha256"], h.as_str());
    assert_eq!(
        v["approval"]["sha256"],
        h.as_str(),
        "the last approval stays"
    );
}

const POLICY: &str = "[[check]]\nname = \"test\"\nargv = [\"cargo\", \"test\"]\n";

#[test]
fn policy_set_and_approve() {
    let s = DemoServer::start_with_env(&[]);
    let dir = repo(&s, "app");
    s.expect(201, "POST", W, Some(json!({"path": dir})));
    let p = format!("{W}/ws-0001/policy");
    let v = s.expect(200, "GET", &p, None);
    assert_eq!(v["policy"], Value::Null);
    assert_eq!(v["approved"], false);
    let e = s.expect(
        422,
        "PUT",
        &p,
        Some(json!({"policy": "[[check]]\nname = \"Bad Name\"\nargv = [\"x\"]\n"})),
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("Bad Name"),
        "{e}"
    );
    s.expect(422, "PUT", &p, Some(json!({"policy": "[[check]\n"})));
    s.expect(
        422,
        "PUT",
        &p,
        Some(json!({"policy": format!("a = {}", "[".repeat(50_000))})),
    );
    let v = s.expect(200, "PUT", &p, Some(json!({"policy": POLICY})));
    assert_eq!(v["sha256"], sha(POLICY));
    assert_eq!(v["recipe"], "policy-text-sha256/1");
    assert_eq!(v["approved"], false);
    s.expect(
        409,
        "POST",
        &format!("{p}/approve"),
        Some(json!({"sha256": sha("x")})),
    );
    let v = s.expect(
        200,
        "POST",
        &format!("{p}/approve"),
        Some(json!({"sha256": sha(POLICY)})),
    );
    assert_eq!(v["approved"], true);
    assert_eq!(ledger_events(&s, "sessions.workspace.policy_set").len(), 1);
    assert_eq!(
        ledger_events(&s, "sessions.workspace.approve_policy").len(),
        1
    );
    let show = s.expect(200, "GET", &format!("{W}/ws-0001"), None);
    assert_eq!(show["policy_approved"], true);
    assert_eq!(show["policy_sha256"], sha(POLICY));
}

#[test]
fn cli_verbs_print_what_to_approve() {
    let s = DemoServer::start_with_env(&[]);
    let h = &s.home;
    let dir = repo(&s, "app");
    std::fs::write(dir.join(".env"), "OPENAI_BASE_URL=http://u:secret@x\n").unwrap();
    let d = dir.to_str().unwrap();
    let out = h.ok(&["workspace", "add", d]);
    assert!(out.starts_with("ws-0001 registered: "), "{out}");
    let out = h.run(&["workspace", "add", d]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("409"));

    let out = h.ok(&["workspace", "setup", "1", "--command", "npm  ci"]);
    let hash = sha("npm  ci");
    assert!(out.contains("setup command: \"npm  ci\""), "{out}");
    assert!(out.contains("approved: no"), "{out}");
    assert!(
        out.contains(&format!(
            "proctor workspace approve-setup ws-0001 --sha256 {hash}"
        )),
        "{out}"
    );
    // Bad usage: exit 2; a stale hash: exit 1.
    assert_eq!(
        h.run(&["workspace", "approve-setup", "1", "--sha256", "xyz"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        h.run(&["workspace", "show", "nope/nope"]).status.code(),
        Some(2)
    );
    assert_eq!(
        h.run(&[
            "workspace",
            "approve-setup",
            "1",
            "--sha256",
            &sha("npm ci")
        ])
        .status
        .code(),
        Some(1)
    );
    let out = h.ok(&["workspace", "approve-setup", d, "--sha256", &hash]);
    assert!(out.contains("approved now: yes"), "{out}");
    let v = h.json(&["workspace", "setup", "ws-0001", "--json"]);
    assert_eq!(v["setup_approved"], true);

    let out = h.ok(&["workspace", "project-config", "ws-1"]);
    assert!(out.contains(".env (read by gemini):"), "{out}");
    assert!(
        out.contains("OPENAI_BASE_URL = \"http://u:***@x\""),
        "{out}"
    );
    assert!(!out.contains("secret"), "{out}");
    let v = h.json(&["workspace", "project-config", "ws-1", "--json"]);
    let ph = v["sha256"].as_str().unwrap().to_string();
    assert!(
        out.contains(&format!(
            "proctor workspace approve-project-config ws-0001 --sha256 {ph}"
        )),
        "{out}"
    );
    h.ok(&["workspace", "approve-project-config", "1", "--sha256", &ph]);
    assert_eq!(
        h.json(&["workspace", "project-config", "1", "--json"])["approved"],
        true
    );

    let pf = s.home.path().join("policy.toml");
    std::fs::write(&pf, POLICY).unwrap();
    let out = h.ok(&["workspace", "policy", "1", "--file", pf.to_str().unwrap()]);
    assert!(
        out.contains(&format!("approve-policy ws-0001 --sha256 {}", sha(POLICY))),
        "{out}"
    );
    h.ok(&["workspace", "approve-policy", "1", "--sha256", &sha(POLICY)]);
    let list = h.ok(&["workspace", "list"]);
    assert!(list.contains("ws-0001   approved      approved"), "{list}");
}

#[test]
fn the_server_replays_an_approval_the_registry_missed() {
    let s = DemoServer::start_with_env(&[]);
    let dir = repo(&s, "app");
    s.expect(201, "POST", W, Some(json!({"path": dir})));
    s.expect(
        200,
        "PUT",
        &format!("{W}/ws-0001/setup-command"),
        Some(json!({"command": "make"})),
    );
    let registry = s.home.path().join("data/workspaces.json");
    let before = std::fs::read(&registry).unwrap();
    s.expect(
        200,
        "POST",
        &format!("{W}/ws-0001/setup-command/approve"),
        Some(json!({"sha256": sha("make")})),
    );
    s.home.ok(&["server", "stop"]);
    // As if the server died between the ledger append and the registry write.
    std::fs::write(&registry, &before).unwrap();
    let v = s.home.json(&["workspace", "show", "1", "--json"]);
    assert_eq!(v["setup_approved"], true, "{v}");
    assert_eq!(v["setup_approval"]["sha256"], sha("make"));
}
