//! The fakes checked against the real wire (issue 13 §1). `tests/real_tools.rs` records the
//! frames each real tool sent in its stdio scenario into `tests/data/real/<tool>-<version>.jsonl`
//! (`PROCTOR_RECORD_REAL=1`); this test runs each fake through the same scenario (the same
//! requests in the same order: a turn, an interrupt, a stop, a resume) and checks, for every
//! frame kind both sent, that each field the fake sends exists in the real frames of that kind
//! with the same JSON type (recursively: objects by field names, arrays by their elements).
//! No real tool is needed.
//!
//! A frame's kind: claude `type` (and `/subtype`); JSON-RPC a notification's `method`, a
//! request from the tool `request:<method>`, an answer `result:<method>` or `error:<method>`
//! (the method proctor's request had: its ids are given in a fixed order, see `asked`).

mod common;
use common::DemoServer;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

type Fields = BTreeMap<String, BTreeSet<&'static str>>;

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Objects whose keys are data, not field names (claude's `modelUsage` is keyed by model):
/// their entries are compared as `/…/*`.
const MAPS: &[&str] = &["/modelUsage"];

/// Every field path of `v` with its type (`/a/b`, array elements as `/a[]`).
fn flatten(v: &Value, path: &str, out: &mut Fields) {
    out.entry(path.to_string())
        .or_default()
        .insert(json_type(v));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let k = if MAPS.contains(&path) {
                    "*"
                } else {
                    k.as_str()
                };
                flatten(x, &format!("{path}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for x in a {
                flatten(x, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// The method of proctor's request `id` in generation `generation` of the scenario: proctor
/// numbers its requests from 0 in each process, in this order.
fn asked(tool: &str, generation: u64, id: u64) -> String {
    let m = match (tool, id) {
        (_, 0) => "initialize",
        ("codex", 1) if generation == 1 => "thread/start",
        ("codex", 1) => "thread/resume",
        ("codex", 2) => "turn/start",
        ("codex", 3) => "turn/interrupt",
        (_, 1) if generation == 1 => "session/new",
        (_, 1) => "session/load",
        _ => "session/prompt",
    };
    m.to_string()
}

fn kind(tool: &str, generation: u64, f: &Value) -> Option<String> {
    if tool == "claude" {
        let t = f["type"].as_str()?;
        return Some(match f["subtype"].as_str() {
            Some(s) => format!("{t}/{s}"),
            None => t.to_string(),
        });
    }
    match (f["method"].as_str(), f["id"].as_u64()) {
        // Tagged unions are compared variant by variant: codex items by `type`, ACP
        // updates by `sessionUpdate`.
        (Some(m), None) if f.get("id").is_none() => Some(
            match f["params"]["item"]["type"]
                .as_str()
                .or(f["params"]["update"]["sessionUpdate"].as_str())
            {
                Some(t) => format!("{m} {t}"),
                None => m.to_string(),
            },
        ),
        (Some(m), _) => Some(format!("request:{m}")),
        (None, Some(id)) if f.get("error").is_some() => {
            Some(format!("error:{}", asked(tool, generation, id)))
        }
        (None, Some(id)) => Some(format!("result:{}", asked(tool, generation, id))),
        _ => None,
    }
}

/// Every kind's fields over a list of `(generation, frame)`.
fn shapes(tool: &str, frames: &[(u64, Value)]) -> BTreeMap<String, Fields> {
    let mut out: BTreeMap<String, Fields> = BTreeMap::new();
    for (g, f) in frames {
        if let Some(k) = kind(tool, *g, f) {
            flatten(f, "", out.entry(k).or_default());
        }
    }
    out
}

/// The recorded transcript of the real `tool` (the one file `tests/data/real/<tool>-*.jsonl`).
fn recorded(tool: &str) -> (String, Vec<(u64, Value)>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{tool}-")) && n.ends_with(".jsonl"))
        })
        .unwrap_or_else(|| panic!("no recorded transcript of {tool} in {}", dir.display()));
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines = text.lines();
    let head: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let frames = lines
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["gen"].as_u64().unwrap(), v["frame"].clone()))
        .collect();
    (head["version"].as_str().unwrap().to_string(), frames)
}

fn turns_ended(s: &DemoServer, run: &str) -> usize {
    let v = s.expect(200, "GET", &s.run_path(run, "/events"), None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "sessions.run.turn_ended")
        .count()
}

/// Runs the fake of `tool` through the battery's stdio scenario; its frames.
fn fake_frames(s: &DemoServer, tool: &str) -> Vec<(u64, Value)> {
    let ws = s.home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let v = s.expect(
        201,
        "POST",
        "/v1/m/sessions/runs",
        Some(json!({"transport": "pipe", "tool": tool, "workspace": ws})),
    );
    let run = v["ref"].as_str().unwrap().to_string();
    let ended = |n: usize| {
        let run = run.clone();
        move |_: &Value| turns_ended(s, &run) >= n
    };
    if tool != "claude" {
        s.wait_run(&run, "the handshake", |v| v["conversation_id"].is_string());
    }
    // A turn that is interrupted (the real tools' first turn cannot end on its own here),
    // then a second turn, as the battery sends them.
    let input = |t: &str| {
        s.expect(
            202,
            "POST",
            &s.run_path(&run, "/input"),
            Some(json!({"text": t})),
        );
    };
    input("!sleep 20000");
    s.wait_run(&run, "the turn to start", |_| {
        s.call("POST", &s.run_path(&run, "/interrupt"), None).0 == 200
    });
    s.wait_run(&run, "the interrupted turn", ended(1));
    if tool != "codex" {
        input("hello");
        s.wait_run(&run, "the second turn", ended(2));
    }
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    s.expect(200, "POST", &s.run_path(&run, "/resume"), None);
    if tool == "claude" {
        input("again");
        s.wait_run(&run, "the resumed turn", ended(3));
    } else {
        s.wait_run(&run, "the resumed handshake", |v| {
            v["state"] == "running" || v["state"] == "idle"
        });
        s.wait_run(&run, "ready", |_| {
            let p = s
                .home
                .path()
                .join(format!("data/runs/{run}/gen-2/stdout.raw"));
            std::fs::read_to_string(p).is_ok_and(|t| t.contains("\"id\":1,"))
        });
    }
    s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
    let mut frames = Vec::new();
    for generation in 1..=2u64 {
        let p = s
            .home
            .path()
            .join(format!("data/runs/{run}/gen-{generation}/stdout.raw"));
        let raw = std::fs::read(&p).unwrap();
        for l in raw.split(|b| *b == b'\n') {
            if let Ok(f) = serde_json::from_slice::<Value>(l) {
                frames.push((generation, f));
            }
        }
    }
    frames
}

/// What the fake sends that the real tool does not, for the kinds both sent.
/// A null in the fake matches any type (an unknown value: the real tools send null for what
/// they fill later); the entries of a map the real frames left empty are not checked.
fn differences(real: &BTreeMap<String, Fields>, fake: &BTreeMap<String, Fields>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, fields) in fake {
        let Some(r) = real.get(k) else { continue };
        for (path, types) in fields {
            let unknown_map = MAPS
                .iter()
                .any(|m| path.starts_with(&format!("{m}/*")) && !r.contains_key(&format!("{m}/*")));
            if unknown_map {
                continue;
            }
            match r.get(path) {
                None => out.push(format!("{k}: {path} is not in the real frames")),
                Some(rt) => {
                    for t in types {
                        if *t != "null" && !rt.contains(t) {
                            out.push(format!(
                                "{k}: {path} is {t} in the fake, {rt:?} in the real"
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

fn check(tool: &str) {
    let (version, real) = recorded(tool);
    let s = DemoServer::start(&[]);
    let fake = fake_frames(&s, tool);
    let (r, f) = (shapes(tool, &real), shapes(tool, &fake));
    let both: Vec<&String> = f.keys().filter(|k| r.contains_key(*k)).collect();
    let only_fake: Vec<&String> = f.keys().filter(|k| !r.contains_key(*k)).collect();
    let only_real: Vec<&String> = r.keys().filter(|k| !f.contains_key(*k)).collect();
    eprintln!("fakes vs real: {tool} {version}: kinds both send {both:?}");
    eprintln!("fakes vs real: {tool}: only the fake {only_fake:?}; only the real {only_real:?}");
    assert!(!both.is_empty(), "{tool}: no frame kind in common");
    let d = differences(&r, &f);
    assert!(
        d.is_empty(),
        "the {tool} fake differs from the real {tool} {version}:\n{}",
        d.join("\n")
    );
}

#[test]
fn claude_fake_matches_the_real_wire() {
    check("claude");
}

#[test]
fn codex_fake_matches_the_real_wire() {
    check("codex");
}

#[test]
fn gemini_fake_matches_the_real_wire() {
    check("gemini");
}

#[test]
fn opencode_fake_matches_the_real_wire() {
    check("opencode");
}

#[test]
fn a_field_of_another_type_or_absent_from_the_real_frames_is_found() {
    let real = shapes(
        "codex",
        &[(
            1,
            json!({"method": "turn/started", "params": {"turn": {"id": "t", "items": []}}}),
        )],
    );
    let fake = shapes(
        "codex",
        &[(
            1,
            json!({"method": "turn/started", "params": {"turn": {"id": 7, "itemz": []}}}),
        )],
    );
    let d = differences(&real, &fake);
    assert_eq!(
        d,
        [
            "turn/started: /params/turn/id is number in the fake, {\"string\"} in the real",
            "turn/started: /params/turn/itemz is not in the real frames",
        ]
    );
}
