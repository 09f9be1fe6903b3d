//! The rigs' faces that need no live rig: a real server's `/v1/m/rigs` routes (the role of
//! every route for a read token, the refusals of bad bodies and of an oversized file, an
//! agent's lock refused), the OpenAPI document naming every route, and the CLI's `--help`
//! and usage errors. The live rigs (open, exec, the lock against a real guest) are in
//! `tests/rigs.rs`.

mod common;

use common::{DemoServer, call_as};
use proctor::api::rigs as wire;

const RIG: &str = "rig-0001";

fn p(template: &str) -> String {
    wire::path(template, RIG)
}

/// Every route of the area, with its method, and whether it is observation.
fn routes() -> Vec<(&'static str, String, bool)> {
    use wire::*;
    vec![
        ("GET", RIGS.to_string(), true),
        ("GET", ENGINES.to_string(), true),
        ("GET", p(RIG), true),
        ("GET", p(SCREEN), true),
        ("GET", p(ATTACH), true),
        ("GET", format!("{}?path=/etc/hostname", p(FILES)), true),
        ("GET", p(AUDIT), true),
        ("POST", RIGS.to_string(), false),
        ("POST", p(CLOSE), false),
        ("POST", p(EXEC), false),
        ("POST", p(INPUT), false),
        ("POST", p(RESIZE), false),
        ("PUT", format!("{}?path=/work/x", p(FILES)), false),
        ("POST", p(LOCK), false),
        ("DELETE", p(LOCK), false),
        ("POST", p(SUSPEND), false),
        ("POST", p(RESUME), false),
        ("POST", p(FETCH), false),
    ]
}

#[test]
fn a_read_token_observes_and_is_refused_every_mutation() {
    let s = DemoServer::start(&[]);
    let read = s.json_token("read", "viewer");
    let sock = s.home.socket();
    for (method, path, observation) in routes() {
        let (st, v) = call_as(&sock, Some(&read), method, &path, None);
        if observation {
            assert!(
                st == 200 || st == 404,
                "{method} {path}: a read token observes (200, or 404 for no such rig): {st} {v}"
            );
        } else {
            assert_eq!(st, 403, "{method} {path}: {v}");
            assert_eq!(v["error"]["code"], "forbidden", "{method} {path}: {v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("write"),
                "{method} {path}: {v}"
            );
        }
    }
    // No token at all: 401 on every route.
    for (method, path, _) in routes() {
        let (st, _) = call_as(&sock, None, method, &path, None);
        assert_eq!(st, 401, "{method} {path}");
    }
    // The listing is `{"items", "engines"}`, each backend probed.
    let v = s.expect(200, "GET", wire::RIGS, None);
    assert!(v["items"].as_array().unwrap().is_empty(), "{v}");
    let engines: Vec<&str> = v["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["backend"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["vm", "namespace"]);
    let e = s.expect(200, "GET", wire::ENGINES, None);
    assert_eq!(e["engines"], v["engines"]);
    assert!(e.as_object().unwrap().contains_key("image"), "{e}");
    // A rig that does not exist is 404 by code, and a bad id 400 naming an example.
    let nf = s.expect(404, "GET", &p(wire::RIG), None);
    assert_eq!(nf["error"]["code"], "not_found");
    let bad = s.expect(400, "GET", "/v1/m/rigs/..%2Fetc", None);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rig-0001"),
        "{bad}"
    );
}

#[test]
fn bad_bodies_and_queries_are_refused_with_their_remedy() {
    let s = DemoServer::start(&[]);
    let cases: Vec<(&str, String, Option<serde_json::Value>, &str)> = vec![
        // Not one JSON object.
        (
            "POST",
            wire::RIGS.into(),
            Some(serde_json::json!([true])),
            "one JSON object",
        ),
        (
            "POST",
            wire::RIGS.into(),
            Some(serde_json::json!({"backend": "docker"})),
            "`vm` or `namespace`",
        ),
        (
            "POST",
            wire::RIGS.into(),
            Some(serde_json::json!({"kind": "browser"})),
            "`terminal`",
        ),
        ("POST", p(wire::EXEC), None, "JSON body"),
        (
            "POST",
            p(wire::EXEC),
            Some(serde_json::json!({"argv": []})),
            "argv",
        ),
        (
            "POST",
            p(wire::EXEC),
            Some(serde_json::json!({"argv": "ls"})),
            "expected a sequence",
        ),
        (
            "POST",
            p(wire::INPUT),
            Some(serde_json::json!({})),
            "text or data_b64",
        ),
        (
            "POST",
            p(wire::INPUT),
            Some(serde_json::json!({"text": "a", "data_b64": "YQ=="})),
            "text or data_b64",
        ),
        (
            "POST",
            p(wire::RESIZE),
            Some(serde_json::json!({"rows": 0, "cols": 80})),
            "rows 1 to",
        ),
        (
            "POST",
            p(wire::RESIZE),
            Some(serde_json::json!({"rows": 24})),
            "cols",
        ),
        (
            "GET",
            format!("{}?path=etc/hostname", p(wire::FILES)),
            None,
            "absolute path",
        ),
        (
            "PUT",
            format!("{}?path=/work/x&mode=9", p(wire::FILES)),
            None,
            "octal",
        ),
        (
            "GET",
            format!("{}?limit=0", p(wire::AUDIT)),
            None,
            "1 to 1000",
        ),
        (
            "GET",
            format!("{}?limit=1001", p(wire::AUDIT)),
            None,
            "1 to 1000",
        ),
    ];
    for (method, path, body, says) in cases {
        let (st, v) = s.call(method, &path, body.clone());
        assert_eq!(st, 400, "{method} {path} {body:?}: {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{method} {path}: {v} does not say {says:?}"
        );
    }
}

/// A file over 16 MiB copied in is refused 413 by code, before the manager sees a byte.
#[test]
fn an_oversized_file_is_413() {
    use std::io::{Read, Write};
    let s = DemoServer::start(&[]);
    let mut sock = std::os::unix::net::UnixStream::connect(s.home.socket()).unwrap();
    let len = wire::FILE_MAX + 1;
    let head = format!(
        "PUT {}?path=/work/big HTTP/1.1\r\nHost: proctor\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n",
        p(wire::FILES),
        s.token
    );
    let mut writer = sock.try_clone().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = writer.write_all(head.as_bytes());
        let chunk = vec![b'x'; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            if writer.write_all(&chunk[..n]).is_err() {
                return;
            }
            left -= n;
        }
    });
    let mut raw = Vec::new();
    let _ = sock.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"too_large\""), "{text}");
    assert!(text.contains("16 MiB"), "{text}");
    let _ = sock.shutdown(std::net::Shutdown::Both);
    feeder.join().unwrap();
}

/// The lock is a person's: an agent token (write role) is refused 403 by name, before any
/// rig is read.
#[test]
fn an_agent_cannot_take_the_lock() {
    let s = DemoServer::start(&[]);
    let v = s.home.json(&[
        "token",
        "create",
        "--role",
        "write",
        "--name",
        "bot",
        "--principal",
        "agent",
        "--json",
    ]);
    let agent = v["secret"].as_str().unwrap();
    let (st, v) = call_as(&s.home.socket(), Some(agent), "POST", &p(wire::LOCK), None);
    assert_eq!(st, 403, "{v}");
    assert_eq!(v["error"]["code"], "forbidden");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("agent") && m.contains("proctor rig lock rig-0001"),
        "{m}"
    );
    // A person with a write token reaches the manager (no such rig: 404).
    let (st, v) = s.call("POST", &p(wire::LOCK), None);
    assert_eq!(st, 404, "{v}");
}

#[test]
fn the_openapi_document_names_every_rig_route() {
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json"))
            .unwrap(),
    )
    .unwrap();
    for (method, path, _) in routes() {
        let path = path.split('?').next().unwrap().replace(RIG, "{rig}");
        let op = &v["paths"][&path][method.to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{method} {path} is not in docs/openapi.json"
        );
        assert_eq!(op["tags"][0], "rigs", "{method} {path}");
    }
}

/// `rig --help` teaches what a rig is, each backend's boundary and the lock; every verb is
/// listed, the hidden ones are not.
#[test]
fn the_help_teaches_and_lists_every_verb() {
    let h = common::TestHome::new();
    let out = h.ok(&["rig", "--help"]);
    for says in [
        "throwaway terminal machine",
        "own kernel, disk and network stack",
        "weaker boundary",
        "--allow HOST:PORT",
        "The lock",
        "423",
    ] {
        assert!(
            out.contains(says),
            "rig --help does not say {says:?}:\n{out}"
        );
    }
    for verb in [
        "open", "list", "show", "close", "exec", "type", "attach", "screen", "cp", "lock",
        "unlock", "suspend", "resume", "audit", "fetch", "image",
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{verb} "))),
            "{verb} is not listed:\n{out}"
        );
    }
    assert!(
        !out.contains("guest-agent") && !out.contains("relay"),
        "{out}"
    );
    let open = h.ok(&["rig", "open", "--help"]);
    for says in [
        "--backend",
        "--ttl",
        "--idle",
        "--allow",
        "--workspace",
        "--json",
    ] {
        assert!(open.contains(says), "{says}:\n{open}");
    }
}

/// Bad usage exits 2 naming the remedy, before any server is asked; a refusal from the
/// server exits 1 with its message.
#[test]
fn usage_errors_exit_2_and_refusals_1() {
    let s = DemoServer::start(&[]);
    let h = &s.home;
    let cases: &[(&[&str], &str)] = &[
        (&["rig", "show", "nope"], "for example rig-0001"),
        (&["rig", "cp", "a", "b"], "exactly one side is RIG:PATH"),
        (
            &["rig", "cp", "rig-0001:/a", "rig-0002:/b"],
            "exactly one side",
        ),
        (&["rig", "cp", "a", "rig-0001:work/a"], "absolute"),
        (&["rig", "open", "--allow", "nohost"], "HOST:PORT"),
        (&["rig", "open", "--ttl", "2x"], "90s, 30m or 2h"),
        (&["rig", "open", "--backend", "docker"], "namespace"),
        (&["rig", "exec", "rig-0001"], "ARGV"),
        (
            &["rig", "exec", "rig-0001", "--timeout", "0", "--", "ls"],
            "1 to 3600",
        ),
    ];
    for (args, says) in cases {
        let out = h.run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err} does not say {says:?}");
    }
    // The server's refusal, as it wrote it, exit 1.
    let out = h.run(&["rig", "show", "rig-0042"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("rig-0042") && err.contains("404"), "{err}");
    // The listing works without a rig: the engines' header, and JSON with both keys.
    let list = h.ok(&["rig", "list"]);
    assert!(list.starts_with("engines: vm "), "{list}");
    assert!(list.contains("namespace "), "{list}");
    let v = h.json(&["rig", "list", "--json"]);
    assert!(v["items"].is_array() && v["engines"].is_array(), "{v}");
}
