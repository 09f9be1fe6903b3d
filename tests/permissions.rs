//! Permission requests held open and answered by a person (issue 13, point 4), against a
//! real server on a temporary home, with the fakes (which ask in each real tool's shape)
//! over real pipes.

mod common;
use common::{DemoServer, call_as, output_of};
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

fn workspace(s: &DemoServer) -> String {
    let w = s.home.path().join("ws");
    std::fs::create_dir_all(&w).unwrap();
    w.to_str().unwrap().to_string()
}

fn start(s: &DemoServer, body: Value) -> String {
    let v = s.expect(201, "POST", RUNS, Some(body));
    v["ref"].as_str().unwrap().to_string()
}

/// Waits until the run has `n` open requests; returns the list.
fn wait_open(s: &DemoServer, run: &str, n: u64) -> Value {
    s.wait_run(run, &format!("{n} open permission request(s)"), |v| {
        v["permissions_open"] == n
    });
    s.expect(200, "GET", &s.run_path(run, "/permissions"), None)
}

/// The run's output so far, until `needle` shows up in it.
fn output_until(s: &DemoServer, run: &str, needle: &str) -> String {
    let ev = s.attach(run, 0, |e| {
        String::from_utf8_lossy(&output_of(e)).contains(needle)
    });
    String::from_utf8_lossy(&output_of(&ev)).to_string()
}

fn events(s: &DemoServer, run: &str) -> Vec<Value> {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"].as_array().unwrap().clone()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == format!("sessions.run.{kind}"))
        .collect()
}

fn permit(s: &DemoServer, run: &str, id: &str, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["session", "permit", run, id];
    args.extend_from_slice(flags);
    s.home.run(&args)
}

#[test]
fn each_fake_asks_and_a_person_allows_or_denies_through_the_cli() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    // (tool, directive, the tool call's name, the decision flags, what the tool got)
    let cases = [
        (
            "claude",
            "!ask command cargo test",
            "Bash",
            &["--allow"][..],
            "permission: allowed",
        ),
        (
            "claude",
            "!ask file notes.txt",
            "Write",
            &["--allow", "--for-session"][..],
            "permission: allowed for the session",
        ),
        (
            "codex",
            "!ask command cargo build",
            "commandExecution",
            &["--allow"][..],
            "permission: allowed",
        ),
        (
            "codex",
            "!ask file src/new.rs",
            "fileChange",
            &["--deny"][..],
            "permission: denied",
        ),
        (
            "gemini",
            "!ask command ls -la",
            "execute",
            &["--allow"][..],
            "permission: allowed",
        ),
        (
            "opencode",
            "!ask file README.md",
            "edit",
            &["--deny"][..],
            "permission: denied",
        ),
    ];
    for (tool, directive, tool_name, flags, got) in cases {
        let run = start(
            &s,
            json!({"transport": "pipe", "tool": tool, "workspace": ws, "prompt": directive}),
        );
        let list = wait_open(&s, &run, 1);
        let item = &list["items"][0];
        assert_eq!(item["state"], "open", "{tool}: {list}");
        assert_eq!(item["tool_name"], tool_name, "{tool}: {list}");
        let what = directive.splitn(3, ' ').nth(2).unwrap();
        assert_eq!(item["what"], what, "{tool}: {list}");
        assert!(
            item["options"].as_array().unwrap().contains(&json!("deny")),
            "{tool}: {list}"
        );
        let v = s.expect(200, "GET", &s.run_path(&run, ""), None);
        assert_eq!(v["state"], "running", "{tool}: the turn waits: {v}");
        let id = item["id"].as_str().unwrap().to_string();
        let out = permit(&s, &run, &id, flags);
        assert!(
            out.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(line.contains(&format!("permission {id}")), "{line}");
        // The tool received the decision: its reply says what it got.
        let text = output_until(&s, &run, got);
        assert!(text.contains(got), "{tool}: {text}");
        s.wait_run(&run, "the turn's end", |v| {
            v["state"] == "idle" && v["permissions_open"] == 0
        });
        let ev = events(&s, &run);
        let asked = of_kind(&ev, "permission_requested");
        assert_eq!(asked.len(), 1, "{tool}: {ev:?}");
        assert_eq!(asked[0]["fields"]["id"], json!(id));
        let decided = of_kind(&ev, "permission_decided");
        assert_eq!(decided.len(), 1, "{tool}: {ev:?}");
        let f = &decided[0]["fields"];
        let allow = flags.contains(&"--allow");
        assert_eq!(f["decision"], if allow { "allow" } else { "deny" }, "{f}");
        assert_eq!(f["for_session"], flags.contains(&"--for-session"), "{f}");
        assert_eq!(f["by"]["principal"], "person", "{f}");
        assert_eq!(f["by"]["name"], "owner", "who decided is named: {f}");
        assert!(f["by"]["token_id"].as_str().unwrap().starts_with("tok-"));
        let list = s.expect(200, "GET", &s.run_path(&run, "/permissions"), None);
        assert_eq!(
            list["items"][0]["state"],
            if allow { "allowed" } else { "denied" },
            "{list}"
        );
        assert_eq!(list["items"][0]["by"]["name"], "owner", "{list}");
        // A second decision: 409, nothing written to the tool.
        let again = permit(&s, &run, &id, &["--deny"]);
        assert_eq!(again.status.code(), Some(1));
        let err = String::from_utf8_lossy(&again.stderr).to_string();
        assert!(err.contains("409") && err.contains("already"), "{err}");
        assert_eq!(of_kind(&events(&s, &run), "permission_decided").len(), 1);
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    }
}

#[test]
fn an_agent_cannot_decide_and_nothing_reaches_the_tool() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "codex", "workspace": ws,
               "prompt": "!ask command git push --force"}),
    );
    let list = wait_open(&s, &run, 1);
    let id = list["items"][0]["id"].as_str().unwrap().to_string();
    let path = s.run_path(&run, &format!("/permissions/{id}"));
    let agent = s.home.json(&[
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "robot",
        "--principal",
        "agent",
        "--json",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v) = call_as(
        &s.home.socket(),
        Some(&agent),
        "POST",
        &path,
        Some(json!({"decision": "deny"})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "agent_refused", "{v}");
    // Through the CLI too, with the agent's token.
    let out = s
        .home
        .cmd()
        .env("PROCTOR_TOKEN", &agent)
        .args(["session", "permit", &run, &id, "--allow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("403") && err.contains("agent identity"),
        "{err}"
    );
    // A read token may list but not decide.
    let reader = s.json_token("read", "viewer");
    let (code, _) = call_as(
        &s.home.socket(),
        Some(&reader),
        "GET",
        &s.run_path(&run, "/permissions"),
        None,
    );
    assert_eq!(code, 200);
    let (code, v) = call_as(
        &s.home.socket(),
        Some(&reader),
        "POST",
        &path,
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    // Nothing was decided: still open, nothing recorded, the tool still waits.
    let list = s.expect(200, "GET", &s.run_path(&run, "/permissions"), None);
    assert_eq!(list["items"][0]["state"], "open", "{list}");
    assert!(of_kind(&events(&s, &run), "permission_decided").is_empty());
    assert_eq!(
        s.expect(200, "GET", &s.run_path(&run, ""), None)["state"],
        "running"
    );
    // Bad bodies and unknown ids are refused with the problem named.
    let (code, v) = s.call("POST", &path, Some(json!({"decision": "maybe"})));
    assert_eq!(code, 400, "{v}");
    let (code, v) = s.call("POST", &path, Some(json!({})));
    assert_eq!(code, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("decision"));
    let (code, v) = s.call(
        "POST",
        &path,
        Some(json!({"decision": "deny", "for_session": true})),
    );
    assert_eq!(code, 400, "{v}");
    let (code, v) = s.call(
        "POST",
        &s.run_path(&run, "/permissions/99"),
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(code, 404, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("Remedy"));
    // Now a person decides: the tool gets the person's answer, the first it got.
    let v = s.expect(200, "POST", &path, Some(json!({"decision": "allow"})));
    assert_eq!(v["state"], "allowed", "{v}");
    let text = output_until(&s, &run, "[permission:");
    assert!(text.contains("[permission: allowed]"), "{text}");
    assert!(!text.contains("denied"), "{text}");
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn a_request_open_when_the_process_ends_expires() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let run = start(
        &s,
        json!({"transport": "pipe", "tool": "claude", "workspace": ws,
               "prompt": "!ask command make deploy"}),
    );
    let list = wait_open(&s, &run, 1);
    let id = list["items"][0]["id"].as_str().unwrap().to_string();
    let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    assert_eq!(v["state"], "stopped", "{v}");
    let ev = events(&s, &run);
    let expired = of_kind(&ev, "permission_expired");
    assert_eq!(expired.len(), 1, "{ev:?}");
    assert_eq!(expired[0]["fields"]["id"], json!(id));
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
    assert!(
        at("sessions.run.permission_expired") < at("sessions.run.exited"),
        "expired before the exit: {kinds:?}"
    );
    let list = s.expect(200, "GET", &s.run_path(&run, "/permissions"), None);
    assert_eq!(list["items"][0]["state"], "expired", "{list}");
    assert!(list["items"][0]["decided_at"].is_string(), "{list}");
    let run_view = s.expect(200, "GET", &s.run_path(&run, ""), None);
    assert_eq!(run_view["permissions_open"], 0, "{run_view}");
    // Deciding now: 409, the run is not live.
    let (code, v) = s.call(
        "POST",
        &s.run_path(&run, &format!("/permissions/{id}")),
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(code, 409, "{v}");
    // The ledger itself holds the facts.
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert!(ledger.contains("sessions.run.permission_requested"));
    assert!(ledger.contains("sessions.run.permission_expired"));
}

#[test]
fn a_deny_all_profile_refuses_without_asking() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    let acct = s.home.path().join("acct/claude");
    std::fs::create_dir_all(&acct).unwrap();
    let out = s.home.ok(&[
        "profile",
        "add",
        "strict",
        "--tool",
        "claude",
        "--account-home",
        acct.to_str().unwrap(),
        "--permissions",
        "deny",
    ]);
    assert!(out.contains("permission requests: deny"), "{out}");
    let bad = s.home.run(&[
        "profile",
        "add",
        "loose",
        "--tool",
        "claude",
        "--account-home",
        acct.to_str().unwrap(),
        "--permissions",
        "allow",
    ]);
    assert_eq!(bad.status.code(), Some(2), "there is no allow policy");
    let run = start(
        &s,
        json!({"transport": "pipe", "profile": "strict", "workspace": ws,
               "prompt": "!ask command rm -rf target"}),
    );
    let text = output_until(&s, &run, "[permission:");
    assert!(text.contains("[permission: refused (error)]"), "{text}");
    s.wait_run(&run, "the turn's end", |v| v["state"] == "idle");
    let ev = events(&s, &run);
    assert!(of_kind(&ev, "permission_requested").is_empty(), "{ev:?}");
    let refused = of_kind(&ev, "permission_refused");
    assert_eq!(refused.len(), 1, "{ev:?}");
    assert_eq!(refused[0]["fields"]["by"], "profile");
    assert_eq!(refused[0]["fields"]["method"], "can_use_tool");
    let list = s.expect(200, "GET", &s.run_path(&run, "/permissions"), None);
    assert_eq!(list["items"][0]["state"], "refused", "{list}");
    assert!(list["items"][0]["id"].is_null(), "{list}");
    let table = s.home.ok(&["session", "permissions", &run]);
    assert!(
        table.contains("refused") && table.contains("rm -rf target"),
        "{table}"
    );
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
}

#[test]
fn an_interrupt_closes_the_turns_requests_in_each_protocol() {
    let s = DemoServer::start(&[]);
    let ws = workspace(&s);
    // claude and codex withdraw their request themselves (control_cancel_request,
    // serverRequest/resolved); for ACP the server answers it `cancelled`, as the protocol asks.
    for (tool, reason) in [
        ("claude", "withdrawn by the tool"),
        ("codex", "withdrawn by the tool"),
        ("gemini", "cancelled with the turn"),
    ] {
        let run = start(
            &s,
            json!({"transport": "pipe", "tool": tool, "workspace": ws,
                   "prompt": "!ask command sleep 1000"}),
        );
        let list = wait_open(&s, &run, 1);
        let id = list["items"][0]["id"].as_str().unwrap().to_string();
        s.expect(200, "POST", &s.run_path(&run, "/interrupt"), None);
        let v = s.wait_run(&run, "the interrupted turn's end", |v| {
            v["state"] == "idle" && v["permissions_open"] == 0
        });
        assert!(v["pid"].is_number(), "{tool}: the process stays: {v}");
        let ev = events(&s, &run);
        let expired = of_kind(&ev, "permission_expired");
        assert_eq!(expired.len(), 1, "{tool}: {ev:?}");
        assert_eq!(expired[0]["fields"]["id"], json!(id), "{tool}");
        assert_eq!(expired[0]["fields"]["reason"], reason, "{tool}");
        let list = s.expect(200, "GET", &s.run_path(&run, "/permissions"), None);
        assert_eq!(list["items"][0]["state"], "expired", "{tool}: {list}");
        // Too late to decide: 409, nothing sent.
        let (code, v) = s.call(
            "POST",
            &s.run_path(&run, &format!("/permissions/{id}")),
            Some(json!({"decision": "allow"})),
        );
        assert_eq!(code, 409, "{tool}: {v}");
        // The process is not held up: a next turn runs.
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": "after"})),
        );
        let text = output_until(&s, &run, "demo reply #2");
        assert!(text.contains("demo reply #2"), "{tool}: {text}");
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    }
}
