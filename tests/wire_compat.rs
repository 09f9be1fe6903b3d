//! The JSON on the wire stays compatible. A scripted scenario (the demo's home: sessions in
//! every state, a workspace with an approved policy, a worktree run, a bound candidate, a
//! check's evidence, receipts, an intent; then the run verbs, tokens, errors and the SSE
//! frames of attach, and the `--json` output of the CLI's listings) records the shape of
//! every answer: its field names and their JSON types, recursively. The shapes are compared
//! with `tests/wire/baseline.json`, recorded from the code as it was before the wire
//! contract was typed (issue 12). The only differences allowed are the ones `docs/api.md`
//! lists under "Changes", spelled in [`CHANGES`] below.
//!
//! A shape is a value's JSON type (`"string"`, `"number"`, `"bool"`, `"null"`), an object's
//! fields (each with the union of the types seen, and `absent` when some element of a listing
//! lacks it), or an array's element shape (merged over its elements). A value that is `null`
//! in one run and set in another (a run still narrating, a time not yet reached) is the same
//! field: `null` is compared as "any type"; a field present on one side and missing on the
//! other is a difference.
//!
//! A new route adds its shapes with `PROCTOR_WRITE_WIRE=1 cargo test --test wire_compat`,
//! which rewrites the baseline: review the diff, the lines that changed must be only the new
//! route's.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{TestHome, call_as};
use serde_json::{Value, json};

/// The changes of issue 12 (docs/api.md, "Changes"), each `(answers, from, to)`: in the
/// answers named (a record's name is its method and route, then a label: a pattern names
/// every label), the field at `from` is now at `to`. `from: None` is a field that is new (its
/// shape is taken from today's answer); `to: None` a field that is gone. A path is the fields
/// from the answer's root (`.name`), `[]` for an array's elements, joined with `/`; `""` is
/// the whole answer.
///
/// One rule needs no line here, the null rule (docs/api.md, "Conventions"): a field that was
/// omitted when absent is now always present, `null` when absent. So a field that is new
/// and `null` in every answer seen, or that was sometimes absent and is now sometimes `null`,
/// is not a difference; a field that is sometimes absent now and was not before is one.
type Change = (
    &'static [&'static str],
    Option<&'static str>,
    Option<&'static str>,
);
const CHANGES: &[Change] = &[
    // The run is `ref` everywhere (it was `run_ref` in these answers).
    (
        &[
            "GET /runs/{run}/events",
            "GET /runs/{run}/diff",
            "GET /runs/{run}/diff/file",
            "POST /runs/{run}/pin",
            "DELETE /runs/{run}/pin",
            "POST /runs/{run}/snooze",
            "DELETE /runs/{run}/snooze",
            "POST /runs/{run}/done",
            "DELETE /runs/{run}/done",
            "POST /runs/{run}/resize",
            "DELETE /runs/{run}",
        ],
        Some(".run_ref"),
        Some(".ref"),
    ),
    // `ledger tail --json` names the run `ref` (it was `run`).
    (
        &["proctor ledger tail --json"],
        Some("[]/.run"),
        Some("[]/.ref"),
    ),
    // `profile list --json` is a listing like every other (it was a bare array).
    (&["proctor profile list --json"], Some(""), Some(".items")),
    // The run view of start, stop, interrupt, resume and cleanup is the same as GET's: it
    // carries the caller's marks too.
    (
        &[
            "POST /runs",
            "POST /runs/{run}/stop",
            "POST /runs/{run}/interrupt",
            "POST /runs/{run}/resume",
            "POST /runs/{run}/cleanup",
        ],
        None,
        Some(".pinned"),
    ),
    (
        &[
            "POST /runs",
            "POST /runs/{run}/stop",
            "POST /runs/{run}/interrupt",
            "POST /runs/{run}/resume",
            "POST /runs/{run}/cleanup",
        ],
        None,
        Some(".done"),
    ),
    // The null rule, where the scenario's timing decides whether the value is there yet: a
    // run view's `output.last_at` was omitted until the run's first byte, and is `null` now
    // (a run just started or resumed may or may not have written by the time it answers).
    (
        &[
            "POST /runs",
            "POST /runs/{run}/stop",
            "POST /runs/{run}/interrupt",
            "POST /runs/{run}/resume",
            "POST /runs/{run}/cleanup",
            "PUT /runs/{run}/name",
            "POST /runs/{run}/archive",
            "DELETE /runs/{run}/archive",
            "GET /runs/{run}",
            "proctor session show {run} --json",
        ],
        None,
        Some(".output/.last_at"),
    ),
    // The attach stream's `end` frame always says whether the exit was observed (it sent
    // `unobserved` only when true).
    (&["SSE /runs/{run}/attach end"], None, Some(".unobserved")),
    // Issue 13: a run view counts the permission requests that wait for a person (its
    // `blocked` and `waiting` are new too, `null` when absent: the null rule).
    (RUN_VIEWS, None, Some(".permissions_open")),
    (RUN_LISTS, None, Some(".items/[]/.permissions_open")),
    // Issue 13 also gives an attach `output` frame's `stream` a third value, `stdin` (a pipe
    // run's input as proctor wrote it): a new value of a string field, not a field, so no
    // line here (docs/api.md, "Changes", issue 13).
    // Issue 13: a run's `started` event names the account home its tool runs with (a
    // blocked run's remedy names it).
    (
        &["GET /runs/{run}/events"],
        None,
        Some(".items/[]/.fields/.account_home"),
    ),
    (
        &["proctor ledger tail --json"],
        None,
        Some("[]/.account_home"),
    ),
    // Issue 13: a profile says what its runs do with permission requests (`ask`, `deny`).
    (
        &["proctor profile list --json"],
        None,
        Some(".items/[]/.permissions"),
    ),
    // Issue 13 (waiting): what a run waits on a person for (an idle pipe run of the scenario
    // waits for input), and whether the run's form can say that it waits at all.
    (RUN_VIEWS, None, Some(".waiting")),
    (RUN_LISTS, None, Some(".items/[]/.waiting")),
    (RUN_VIEWS, None, Some(".waiting_known")),
    (RUN_LISTS, None, Some(".items/[]/.waiting_known")),
    // The demo's pipe sessions now show a retried error (`!fail`): their events include
    // `sessions.run.retrying` `{generation, words}`.
    (
        &["GET /runs/{run}/events pipe idle"],
        None,
        Some(".items/[]/.fields/.words"),
    ),
    // A claude PTY run's events now include `sessions.run.hook` (its own hooks report):
    // `event` is new, and `path` (of `started`) is absent from those.
    (
        &["GET /runs/{run}/events pty"],
        None,
        Some(".items/[]/.fields/.event"),
    ),
    (
        &["GET /runs/{run}/events pty"],
        None,
        Some(".items/[]/.fields/.path"),
    ),
    // Issue 15: the demo opens a rig, and the ledger's `rigs.*` events name it (`rig`).
    (&["proctor ledger tail --json"], None, Some("[]/.rig")),
    // Issue 15 §4: a run view names the boundary its provider process runs behind,
    // `{kind, rig, detail}` (the host's, or a rig's with `session start --rig`).
    (RUN_VIEWS, None, Some(".boundary")),
    (RUN_LISTS, None, Some(".items/[]/.boundary")),
    // Issue 15 §4: candidate and evidence receipts' facts name the run's boundary.
    (
        &[
            "GET /receipts/{id} candidate.bound",
            "GET /receipts/{id} evidence.attempt",
        ],
        None,
        Some(".receipt/.facts/.boundary"),
    ),
    // Issue 18, PTY runs: a claude PTY run learns its conversation from its own hooks, so
    // its `conversation_id` is a string where it was null, and its events carry the hook's
    // `source` and a `conversation` event's `conversation_id` and `hook_source`.
    (RUN_VIEWS, None, Some(".conversation_id")),
    (
        &["GET /runs/{run}/events"],
        None,
        Some(".items/[]/.fields/.conversation_id"),
    ),
    (
        &["GET /runs/{run}/events"],
        None,
        Some(".items/[]/.fields/.hook_source"),
    ),
    (
        &["GET /runs/{run}/events"],
        None,
        Some(".items/[]/.fields/.source"),
    ),
];

/// Every answer that is one run view (issue 13's additions apply to each).
const RUN_VIEWS: &[&str] = &[
    "POST /runs",
    "POST /runs/{run}/stop",
    "POST /runs/{run}/interrupt",
    "POST /runs/{run}/resume",
    "POST /runs/{run}/cleanup",
    "PUT /runs/{run}/name",
    "POST /runs/{run}/archive",
    "DELETE /runs/{run}/archive",
    "GET /runs/{run}",
    "proctor session show {run} --json",
];

/// Every answer that is a page of run views.
const RUN_LISTS: &[&str] = &[
    "GET /runs",
    "GET /runs?archived",
    "GET /runs?limit",
    "proctor session list --json",
];

/// Whether a record's name is one of a change's answers (the name, or the name and a label).
fn names(answers: &[&str], name: &str) -> bool {
    answers
        .iter()
        .any(|a| name == *a || name.strip_prefix(a).is_some_and(|l| l.starts_with(' ')))
}

/// One recorded answer: a name (method, route template, and a label) and its shape.
type Shapes = BTreeMap<String, Value>;

fn baseline_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wire/baseline.json")
}

/// The shape of a value (see the module's doc).
fn shape(v: &Value) -> Value {
    match v {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(a) => {
            let mut merged: Option<Value> = None;
            for e in a {
                let s = shape(e);
                merged = Some(match merged {
                    None => s,
                    Some(m) => merge(&m, &s),
                });
            }
            json!({ "[]": merged.unwrap_or(json!("empty")) })
        }
        Value::Object(o) => {
            let mut out = serde_json::Map::new();
            for (k, v) in o {
                out.insert(format!(".{k}"), shape(v));
            }
            Value::Object(out)
        }
    }
}

/// The types of a shape, as a set (a union is `"a|b"`).
fn kinds(s: &Value) -> BTreeSet<String> {
    match s {
        Value::String(t) => t.split('|').map(str::to_string).collect(),
        Value::Object(o) if o.contains_key("[]") => ["array".to_string()].into(),
        Value::Object(_) => ["object".to_string()].into(),
        _ => ["?".to_string()].into(),
    }
}

/// Two shapes as one: objects field by field (a field only one side has becomes
/// `absent|…`), arrays by their elements, scalars as the union of their types.
fn merge(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if x.contains_key("[]") && y.contains_key("[]") => {
            let (ex, ey) = (&x["[]"], &y["[]"]);
            let e = if ex == "empty" {
                ey.clone()
            } else if ey == "empty" {
                ex.clone()
            } else {
                merge(ex, ey)
            };
            json!({ "[]": e })
        }
        (Value::Object(x), Value::Object(y)) if !x.contains_key("[]") && !y.contains_key("[]") => {
            let mut out = serde_json::Map::new();
            for k in x.keys().chain(y.keys()) {
                let m = match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => merge(p, q),
                    (Some(p), None) | (None, Some(p)) => with_absent(p),
                    (None, None) => unreachable!(),
                };
                out.insert(k.clone(), m);
            }
            Value::Object(out)
        }
        // A null beside an object or an array keeps the structure, marked nullable.
        (Value::String(t), s @ Value::Object(_)) | (s @ Value::Object(_), Value::String(t))
            if t == "null" =>
        {
            s.clone()
        }
        _ => {
            let mut k = kinds(a);
            k.extend(kinds(b));
            json!(k.into_iter().collect::<Vec<_>>().join("|"))
        }
    }
}

fn with_absent(s: &Value) -> Value {
    match s {
        Value::String(t) if t.split('|').any(|p| p == "absent") => s.clone(),
        Value::String(t) => json!(format!("absent|{t}")),
        // An object or array field missing from some elements: keep its structure, and
        // record the absence beside it.
        Value::Object(o) => {
            let mut o = o.clone();
            o.insert("absent".into(), json!(true));
            Value::Object(o)
        }
        _ => s.clone(),
    }
}

/// Whether a shape is `null` and nothing else (a new field the null rule explains).
fn only_null(s: &Value) -> bool {
    kinds(s).iter().all(|t| t == "null" || t == "absent")
}

/// Differences between the baseline's shape and today's, by field path (the null rule of
/// [`CHANGES`]'s doc applied).
fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => diff(&format!("{path}{k}"), va, vb, out),
                    None if k == "absent" => {}
                    None => out.push(format!("{path}{k}: gone (was {})", short(va))),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) && k != "absent" && !only_null(vb) {
                    out.push(format!("{path}{k}: new ({})", short(vb)));
                }
            }
            if b.contains_key("absent") && !a.contains_key("absent") {
                out.push(format!("{path}: now sometimes absent"));
            }
        }
        // A null on one side is any type (see the module's doc).
        (Value::String(t), _) | (_, Value::String(t)) if t == "null" => {}
        (Value::String(t), Value::Object(_)) | (Value::Object(_), Value::String(t))
            if t == "empty" => {}
        _ => {
            let (ka, kb) = (kinds(old), kinds(new));
            if kb.contains("absent") && !ka.contains("absent") {
                out.push(format!(
                    "{path}: now sometimes absent ({} → {})",
                    short(old),
                    short(new)
                ));
            }
            let strip = |k: BTreeSet<String>| {
                k.into_iter()
                    .filter(|t| t != "null" && t != "absent")
                    .collect::<BTreeSet<_>>()
            };
            let (ka, kb) = (strip(ka), strip(kb));
            if ka != kb && !ka.is_empty() && !kb.is_empty() {
                out.push(format!("{path}: {} → {}", short(old), short(new)));
            }
        }
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!("{}…", &s[..80])
    } else {
        s
    }
}

/// Applies [`CHANGES`] to a baseline shape: what the answer looks like once the listed
/// renames, removals and additions are made.
fn expected(name: &str, mut old: Value, new: &Value) -> Value {
    for (answers, from, to) in CHANGES {
        if !names(answers, name) {
            continue;
        }
        let taken = from.and_then(|f| take(&mut old, f));
        match (taken, to) {
            (Some(v), Some(t)) => put(&mut old, t, v),
            (None, Some(t)) if from.is_none() => {
                if let Some(v) = lookup(new, t) {
                    put(&mut old, t, v.clone());
                }
            }
            _ => {}
        }
    }
    old
}

fn segments(path: &str) -> Vec<String> {
    path.split('/').map(str::to_string).collect()
}

fn take(v: &mut Value, path: &str) -> Option<Value> {
    if path.is_empty() {
        return Some(std::mem::replace(v, json!({})));
    }
    let segs = segments(path);
    let (last, init) = segs.split_last()?;
    let mut cur = v;
    for s in init {
        cur = cur.get_mut(s)?;
    }
    cur.as_object_mut()?.remove(last)
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path).iter().try_fold(v, |cur, s| cur.get(s))
}

fn put(v: &mut Value, path: &str, x: Value) {
    let segs = segments(path);
    let (last, init) = segs.split_last().unwrap();
    let mut cur = v;
    for s in init {
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(s.clone())
            .or_insert(json!({}));
    }
    cur.as_object_mut().unwrap().insert(last.clone(), x);
}

struct Scenario {
    home: TestHome,
    token: String,
    shapes: Shapes,
}

impl Scenario {
    fn record(&mut self, name: &str, v: &Value) {
        let s = shape(v);
        let merged = match self.shapes.remove(name) {
            Some(old) => merge(&old, &s),
            None => s,
        };
        self.shapes.insert(name.to_string(), merged);
    }

    /// Calls `method path` and records its answer under `name` (the route's template and a
    /// label), asserting the status.
    fn call(
        &mut self,
        status: u16,
        name: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let (got, v) = call_as(&self.home.socket(), Some(&self.token), method, path, body);
        assert_eq!(got, status, "{method} {path}: {v}");
        self.record(&format!("{method} {name}"), &v);
        v
    }

    fn get(&mut self, name: &str, path: &str) -> Value {
        self.call(200, name, "GET", path, None)
    }

    fn cli(&mut self, args: &[&str]) -> Value {
        // One JSON document, or JSON lines (`ledger tail`), recorded as an array.
        let out = self.home.ok(args);
        let v = serde_json::from_str(&out).unwrap_or_else(|_| {
            Value::Array(
                out.lines()
                    .map(|l| serde_json::from_str(l).expect("a JSON line"))
                    .collect(),
            )
        });
        // A run's ref in the arguments is named `{run}` in the record.
        let name: Vec<&str> = args
            .iter()
            .map(|a| if a.starts_with("run-") { "{run}" } else { a })
            .collect();
        self.record(&format!("proctor {}", name.join(" ")), &v);
        v
    }
}

const RUNS: &str = "/v1/m/sessions/runs";

/// The number of turns `run` has ended so far (its `turn_ended` events).
fn turns_ended(s: &Scenario, run: &str) -> usize {
    let (_, v) = call_as(
        &s.home.socket(),
        Some(&s.token),
        "GET",
        &format!("{RUNS}/{run}/events"),
        None,
    );
    v["items"].as_array().map_or(0, |a| {
        a.iter()
            .filter(|e| e["kind"] == "sessions.run.turn_ended")
            .count()
    })
}

/// Waits until `run` has ended more than `before` turns (the turn an input started, not
/// the idle state it had before the turn began).
fn wait_turn_ended(s: &Scenario, run: &str, before: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while turns_ended(s, run) <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "{run}: the turn never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    wait_idle(s, run);
}

/// Waits until `run` is idle (the fake answers its turn).
fn wait_idle(s: &Scenario, run: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, v) = call_as(
            &s.home.socket(),
            Some(&s.token),
            "GET",
            &format!("{RUNS}/{run}"),
            None,
        );
        if v["state"] == "idle" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{run} never idle: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn scenario() -> Shapes {
    let home = TestHome::new();
    let demo = home.json(&["demo", "--no-cockpit", "--json"]);
    let token = home.owner_token();
    let mut s = Scenario {
        home,
        token,
        shapes: Shapes::new(),
    };
    let by_name = |n: &str| {
        demo["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .unwrap_or_else(|| panic!("the demo has no run {n}: {demo}"))["ref"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let pty = by_name("parser fix (narrated)");
    let pty2 = by_name("lexer refactor (narrated)");
    let idle = by_name("explain the failing test");
    let stopped = by_name("release notes");
    let failed = by_name("flaky network test");
    let worktree = by_name("lexer escapes (worktree)");

    // The server.
    let (st, v) = call_as(&s.home.socket(), None, "GET", "/v1/version", None);
    assert_eq!(st, 200);
    s.record("GET /v1/version", &v);
    s.get("/v1/server", "/v1/server");
    s.get("/v1/whoami", "/v1/whoami");
    s.get("/v1/tokens", "/v1/tokens");
    let made = s.call(
        201,
        "/v1/tokens",
        "POST",
        "/v1/tokens",
        Some(json!({"role": "read", "name": "wire-reader"})),
    );
    let id = made["id"].as_str().expect("a token id").to_string();
    let reader = made["secret"].as_str().expect("a token secret").to_string();
    s.call(
        200,
        "/v1/tokens/{id}",
        "DELETE",
        &format!("/v1/tokens/{id}"),
        None,
    );

    // The runs, in every state the demo has.
    s.get("/runs", RUNS);
    s.get("/runs?limit", &format!("{RUNS}?limit=2"));
    for (label, r) in [
        ("pty", &pty),
        ("pipe idle", &idle),
        ("stopped", &stopped),
        ("failed", &failed),
        ("worktree", &worktree),
    ] {
        s.get(&format!("/runs/{{run}} {label}"), &format!("{RUNS}/{r}"));
        s.get(
            &format!("/runs/{{run}}/events {label}"),
            &format!("{RUNS}/{r}/events"),
        );
    }
    s.get("/runs/{run}/screen", &format!("{RUNS}/{pty}/screen"));

    // The caller's marks, names and archive.
    let mark = format!("{RUNS}/{idle}");
    s.call(200, "/runs/{run}/pin", "POST", &format!("{mark}/pin"), None);
    s.call(
        200,
        "/runs/{run}/pin",
        "DELETE",
        &format!("{mark}/pin"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/snooze",
        "POST",
        &format!("{mark}/snooze"),
        Some(json!({"until": "2099-01-01T00:00:00Z"})),
    );
    s.call(
        200,
        "/runs/{run}/snooze",
        "DELETE",
        &format!("{mark}/snooze"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/done",
        "POST",
        &format!("{mark}/done"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/done",
        "DELETE",
        &format!("{mark}/done"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/name",
        "PUT",
        &format!("{mark}/name"),
        Some(json!({"name": "wire check"})),
    );
    s.call(
        200,
        "/runs/{run}/archive",
        "POST",
        &format!("{RUNS}/{stopped}/archive"),
        None,
    );
    s.get("/runs?archived", &format!("{RUNS}?archived=true"));
    s.call(
        200,
        "/runs/{run}/archive",
        "DELETE",
        &format!("{RUNS}/{stopped}/archive"),
        None,
    );

    // Input, interrupt, resize, stop, resume, start, delete.
    let before = turns_ended(&s, &idle);
    s.call(
        202,
        "/runs/{run}/input",
        "POST",
        &format!("{mark}/input"),
        Some(json!({"text": "and the next step?"})),
    );
    wait_turn_ended(&s, &idle, before);
    s.call(
        409,
        "/runs/{run}/interrupt (no turn)",
        "POST",
        &format!("{mark}/interrupt"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/interrupt",
        "POST",
        &format!("{RUNS}/{pty}/interrupt"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/resize",
        "POST",
        &format!("{RUNS}/{pty}/resize"),
        Some(json!({"rows": 30, "cols": 100})),
    );
    s.call(
        200,
        "/runs/{run}/stop",
        "POST",
        &format!("{RUNS}/{pty2}/stop"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/stop",
        "POST",
        &format!("{mark}/stop"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/resume",
        "POST",
        &format!("{mark}/resume"),
        None,
    );
    let started = s.call(
        201,
        "/runs",
        "POST",
        RUNS,
        Some(json!({
            "tool": "codex",
            "transport": "pipe",
            "name": "wire start",
            "prompt": "hello",
            "workspace": demo["runs"][2]["workspace"],
        })),
    );
    let new_run = started["ref"].as_str().unwrap().to_string();
    wait_idle(&s, &new_run);
    s.call(
        200,
        "/runs/{run}/stop",
        "POST",
        &format!("{RUNS}/{new_run}/stop"),
        None,
    );
    s.call(
        200,
        "/runs/{run}/cleanup",
        "POST",
        &format!("{RUNS}/{new_run}/cleanup"),
        Some(json!({})),
    );
    s.call(
        200,
        "/runs/{run}",
        "DELETE",
        &format!("{RUNS}/{new_run}"),
        None,
    );

    // The attach stream's frames: output, then a notice for a run that is not live.
    let events = common::sse(
        &s.home.socket(),
        &s.token.clone(),
        &format!("{RUNS}/{pty}/attach?from=1"),
        |ev| ev.iter().any(|e| e.event == "output"),
    );
    assert!(
        events.iter().any(|e| e.event == "output"),
        "no output frames"
    );
    for e in &events {
        s.record(&format!("SSE /runs/{{run}}/attach {}", e.event), &e.data);
    }
    let events = common::sse(
        &s.home.socket(),
        &s.token.clone(),
        &format!("{RUNS}/{stopped}/attach?from=1"),
        |_| false,
    );
    for e in &events {
        s.record(
            &format!("SSE /runs/{{run}}/attach {} (not live)", e.event),
            &e.data,
        );
    }

    // Workspaces.
    const WS: &str = "/v1/m/sessions/workspaces";
    let wss = s.get("/workspaces", WS);
    let ws = wss["items"][0]["ref"]
        .as_str()
        .expect("the demo's workspace")
        .to_string();
    s.get("/workspaces/{ws}", &format!("{WS}/{ws}"));
    s.get(
        "/workspaces/{ws}/project-config",
        &format!("{WS}/{ws}/project-config"),
    );
    s.get("/workspaces/{ws}/policy", &format!("{WS}/{ws}/policy"));

    // Candidates, evidence, gates, receipts.
    const EV: &str = "/v1/m/evidence";
    let cands = s.get("/candidates", &format!("{EV}/candidates"));
    let cand = cands["items"][0]["id"]
        .as_str()
        .expect("the demo's candidate")
        .to_string();
    s.get("/candidates/{id}", &format!("{EV}/candidates/{cand}"));
    s.get(
        "/candidates/{id}/gate",
        &format!("{EV}/candidates/{cand}/gate"),
    );
    let receipts = s.get("/receipts", &format!("{EV}/receipts"));
    let items = receipts["items"].as_array().unwrap().clone();
    for r in &items {
        let id = r["id"].as_str().unwrap();
        s.get(
            &format!("/receipts/{{id}} {}", r["kind"].as_str().unwrap()),
            &format!("{EV}/receipts/{id}"),
        );
        if r["kind"] == "evidence.attempt" {
            let ev = r["subject"].as_str().unwrap();
            s.get("/evidence/{id}", &format!("{EV}/evidence/{ev}"));
        }
    }

    // The tribunal: the demo candidate's round in progress, one round, its envelope.
    const TR: &str = "/v1/m/tribunal";
    let rounds = s.get(
        "/tribunal/rounds?candidate",
        &format!("{TR}/rounds?candidate={cand}"),
    );
    let rnd = rounds["items"][0]["id"]
        .as_str()
        .expect("the demo's round")
        .to_string();
    s.get("/tribunal/rounds/{id}", &format!("{TR}/rounds/{rnd}"));
    s.get(
        "/tribunal/rounds/{id}/envelope",
        &format!("{TR}/rounds/{rnd}/envelope"),
    );

    // Publication and authority (what a script may read; every approval step needs a
    // person at a terminal, and is refused here).
    const PUB: &str = "/v1/m/publish";
    let intents = s.get("/intents", &format!("{PUB}/intents"));
    let intent = intents["items"][0]["id"]
        .as_str()
        .expect("the demo's intent")
        .to_string();
    s.get("/intents/{intent}", &format!("{PUB}/intents/{intent}"));
    s.call(
        403,
        "/intents/{intent}/approvals (no terminal)",
        "POST",
        &format!("{PUB}/intents/{intent}/approvals"),
        Some(json!({})),
    );
    s.get("/keys", "/v1/m/authority/keys");

    // The worktree run's diff, once its change is committed on its branch.
    s.get(
        "/runs/{run}/diff (nothing committed)",
        &format!("{RUNS}/{worktree}/diff"),
    );
    let (_, view) = call_as(
        &s.home.socket(),
        Some(&s.token),
        "GET",
        &format!("{RUNS}/{worktree}"),
        None,
    );
    let tree = view["worktree"]["path"]
        .as_str()
        .expect("the worktree run's folder")
        .to_string();
    let git = std::process::Command::new("git")
        .args([
            "-C",
            &tree,
            "-c",
            "user.name=wire",
            "-c",
            "user.email=wire@test.invalid",
        ])
        .args(["commit", "-qam", "wire: the change"])
        .output()
        .unwrap();
    assert!(
        git.status.success(),
        "{}",
        String::from_utf8_lossy(&git.stderr)
    );
    let d = s.get("/runs/{run}/diff", &format!("{RUNS}/{worktree}/diff"));
    let changed = d["files"][0]["path"]
        .as_str()
        .expect("a changed path")
        .to_string();
    s.get(
        "/runs/{run}/diff/file",
        &format!("{RUNS}/{worktree}/diff/file?path={changed}"),
    );

    // Errors.
    s.call(
        404,
        "/runs/{run} unknown",
        "GET",
        &format!("{RUNS}/run-9999"),
        None,
    );
    let (st, v) = call_as(&s.home.socket(), Some(&reader), "GET", "/v1/tokens", None);
    assert_eq!(st, 401, "a revoked token: {v}");
    s.record("GET /v1/tokens (revoked token)", &v);

    // The CLI's machine output of its listings.
    s.cli(&["session", "list", "--json"]);
    s.cli(&["session", "show", &idle, "--json"]);
    s.cli(&["ledger", "tail", "--json"]);
    s.cli(&["profile", "list", "--json"]);
    s.cli(&["workspace", "list", "--json"]);
    // (After the ledger's listing, which these events would change.)
    // Issue 13: a permission request held open, listed, and answered by a person.
    let asking = s.call(
        201,
        "/runs",
        "POST",
        RUNS,
        Some(json!({
            "tool": "codex",
            "transport": "pipe",
            "prompt": "!ask command cargo test",
            "workspace": demo["runs"][2]["workspace"],
        })),
    );
    let asking = asking["ref"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while call_as(
        &s.home.socket(),
        Some(&s.token),
        "GET",
        &format!("{RUNS}/{asking}"),
        None,
    )
    .1["permissions_open"]
        != 1
    {
        assert!(std::time::Instant::now() < deadline, "{asking} never asked");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    s.get(
        "/runs/{run}/permissions (open)",
        &format!("{RUNS}/{asking}/permissions"),
    );
    s.call(
        200,
        "/runs/{run}/permissions/{id}",
        "POST",
        &format!("{RUNS}/{asking}/permissions/1"),
        Some(json!({"decision": "allow"})),
    );
    wait_idle(&s, &asking);
    s.get(
        "/runs/{run}/permissions (decided)",
        &format!("{RUNS}/{asking}/permissions"),
    );
    s.cli(&["session", "permissions", &asking, "--json"]);
    s.call(
        200,
        "/runs/{run}/stop",
        "POST",
        &format!("{RUNS}/{asking}/stop"),
        None,
    );
    s.shapes
}

#[test]
fn every_answer_keeps_its_field_names_and_types() {
    let now = scenario();
    if std::env::var_os("PROCTOR_WRITE_WIRE").is_some() {
        let mut text = serde_json::to_string_pretty(&now).unwrap();
        text.push('\n');
        std::fs::create_dir_all(baseline_path().parent().unwrap()).unwrap();
        std::fs::write(baseline_path(), text).unwrap();
        return;
    }
    let text = std::fs::read_to_string(baseline_path()).expect(
        "tests/wire/baseline.json is missing: it is checked in (record a new one only for new \
         routes, with PROCTOR_WRITE_WIRE=1)",
    );
    let base: Shapes = serde_json::from_str(&text).unwrap();
    let mut problems = Vec::new();
    for (name, old) in &base {
        let Some(new) = now.get(name) else {
            problems.push(format!("{name}: not recorded any more"));
            continue;
        };
        let want = expected(name, old.clone(), new);
        let mut d = Vec::new();
        diff("", &want, new, &mut d);
        problems.extend(d.into_iter().map(|x| format!("{name}: {x}")));
    }
    for name in now.keys() {
        if !base.contains_key(name) {
            problems.push(format!(
                "{name}: not in the baseline (a new route: record it with PROCTOR_WRITE_WIRE=1)"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the wire changed beyond docs/api.md's \"Changes\":\n{}",
        problems.join("\n")
    );
}

/// The comparison itself: a renamed field, a changed type and a field that became absent
/// are differences; a null on either side is not.
#[test]
fn the_shape_comparison_sees_renames_types_and_absence() {
    let d = |a: Value, b: Value| {
        let mut out = Vec::new();
        diff("", &shape(&a), &shape(&b), &mut out);
        out
    };
    assert!(d(json!({"ref": "r", "n": 1}), json!({"ref": "x", "n": 2})).is_empty());
    assert!(d(json!({"t": null}), json!({"t": "now"})).is_empty());
    assert!(
        d(json!([{"a": 1}, {}]), json!([{"a": 1}, {"a": null}])).is_empty(),
        "the null rule: sometimes absent becomes sometimes null"
    );
    assert!(
        d(json!({}), json!({"t": null})).is_empty(),
        "the null rule: a new null"
    );
    assert_eq!(
        d(json!({}), json!({"t": 1})).len(),
        1,
        "a new field with a value"
    );
    assert_eq!(d(json!({"run_ref": "r"}), json!({"ref": "r"})).len(), 2);
    assert_eq!(d(json!({"n": 1}), json!({"n": "1"})).len(), 1);
    assert_eq!(
        d(json!([{"a": 1}, {"a": 2}]), json!([{"a": 1}, {}])).len(),
        1,
        "a field missing from some elements"
    );
    assert!(
        !d(json!({"items": []}), json!([])).is_empty(),
        "a bare array"
    );
    let renamed = {
        let old = shape(&json!({"run_ref": "r", "pinned": true}));
        let new = shape(&json!({"ref": "r", "pinned": true}));
        let mut o = old.clone();
        let v = take(&mut o, ".run_ref").unwrap();
        put(&mut o, ".ref", v);
        let mut out = Vec::new();
        diff("", &o, &new, &mut out);
        out
    };
    assert!(renamed.is_empty(), "{renamed:?}");
}
