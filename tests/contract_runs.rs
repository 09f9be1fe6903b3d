//! The runs and server areas of the wire contract, as a client sees them on the socket: the
//! run is `ref` in every answer, a run's view carries every field its schema declares (an
//! absent value is `null`), and the CLI's JSON follows the same rules (`ledger tail --json`,
//! `profile list --json`).

mod common;
use common::DemoServer;
use serde_json::{Value, json};

/// The property names the OpenAPI document declares for a schema (with its `allOf` parts).
fn declared(schema: &str) -> Vec<String> {
    let doc: Value = serde_json::from_str(&proctor::api::openapi_json()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let mut out = Vec::new();
    let mut todo = vec![schemas[schema].clone()];
    while let Some(s) = todo.pop() {
        if let Some(p) = s["properties"].as_object() {
            out.extend(p.keys().cloned());
        }
        for part in s["allOf"].as_array().into_iter().flatten() {
            match part["$ref"].as_str() {
                Some(r) => todo.push(schemas[r.rsplit('/').next().unwrap()].clone()),
                None => todo.push(part.clone()),
            }
        }
    }
    out.sort();
    out
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn the_run_is_ref_in_every_runs_answer_and_every_declared_field_is_present() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws, "prompt": "hello"})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    // Live, no exit yet: every field of the schema is there, the absent ones null.
    assert_eq!(keys(&v), declared("RunView"), "{v}");
    assert!(v["exit_code"].is_null() && v["ended_at"].is_null(), "{v}");
    let v = s.wait_run(&run, "idle", |v| v["state"] == "idle");
    assert_eq!(keys(&v), declared("RunView"), "{v}");

    let v = s.expect(200, "GET", &s.run_path(&run, "/events"), None);
    assert_eq!(v["ref"], run.as_str(), "{v}");
    assert!(v.get("run_ref").is_none(), "{v}");
    assert_eq!(keys(&v), declared("RunEvents"), "{v}");
    for e in v["items"].as_array().unwrap() {
        assert!(e["fields"].is_object(), "every event has its fields: {e}");
    }

    for (method, tail, body) in [
        ("POST", "/pin", None),
        ("POST", "/done", None),
        (
            "POST",
            "/snooze",
            Some(json!({"until": "2099-01-01T00:00:00Z"})),
        ),
        ("DELETE", "/snooze", None),
        ("DELETE", "/pin", None),
    ] {
        let v = s.expect(200, method, &s.run_path(&run, tail), body);
        assert_eq!(v["ref"], run.as_str(), "{method} {tail}: {v}");
        assert_eq!(keys(&v), declared("MarksView"), "{method} {tail}: {v}");
    }

    let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    assert_eq!(keys(&v), declared("Stopped"), "{v}");
    assert!(v["stop"].is_object(), "{v}");
    assert_eq!(
        v["done"], true,
        "the stop answer carries the caller's marks: {v}"
    );
    let v = s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    assert!(
        v["stop"].is_null(),
        "a run that is not live: nothing signalled: {v}"
    );

    let v = s.expect(200, "POST", &s.run_path(&run, "/cleanup"), None);
    assert_eq!(keys(&v), declared("CleanedUp"), "{v}");
    assert_eq!(v["cleaned"]["worktree"], "none", "{v}");
    assert!(v["cleaned"]["branch"].is_null(), "{v}");
    let v = s.expect(200, "DELETE", &s.run_path(&run, ""), None);
    assert_eq!(v, json!({"ref": run, "deleted": true}));
}

#[test]
fn the_cli_prints_ref_for_the_run_in_ledger_tail_and_items_for_profiles() {
    let s = DemoServer::start(&[]);
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"tool": "claude", "transport": "pipe", "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    let out = s.home.ok(&["ledger", "tail", "-n", "50", "--json"]);
    let created: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "sessions.run.created")
        .collect();
    assert_eq!(created.len(), 1, "{out}");
    assert_eq!(created[0]["ref"], run.as_str(), "{out}");
    assert!(created[0].get("run").is_none(), "{out}");
    // The ledger itself keeps `run` (its lines are hashed as written).
    let ledger = std::fs::read_to_string(s.home.ledger()).unwrap();
    assert!(
        ledger.contains(&format!("\"run\":\"{run}\"")),
        "the ledger line is unchanged"
    );

    let v = s.home.json(&["profile", "list", "--json"]);
    assert!(v["items"].as_array().is_some_and(|i| i.len() >= 5), "{v}");
    let v = s.home.json(&["session", "events", &run, "--json"]);
    assert_eq!(v["ref"], run.as_str(), "{v}");
}
