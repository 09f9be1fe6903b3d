//! Absurd sizes against a live rig, as a hostile agent would send them: a huge argv, a huge
//! stdin, a huge timeout, a 100 MiB input, terminal sizes of 0×0 and 65535×65535, a file over
//! the bound copied in, guest paths with `..` or a NUL. Each is refused with a 4xx naming the
//! bound, nothing of it reaches the guest, and the rig still answers after.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use common::DemoServer;
use serde_json::{Value, json};

fn rig_path(id: &str, tail: &str) -> String {
    format!("/v1/m/rigs/{id}{tail}")
}

fn open(s: &DemoServer) -> String {
    let v = s.expect(
        201,
        "POST",
        "/v1/m/rigs",
        Some(json!({"backend": "namespace"})),
    );
    let id = v["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = s.expect(200, "GET", &rig_path(&id, ""), None);
        if v["state"] == "running" {
            return id;
        }
        assert!(Instant::now() < deadline, "{id} did not start: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request with a raw body over the socket (written on a thread: a server that refuses
/// early stops reading, and the answer is read all the same).
fn raw(
    socket: &Path,
    token: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: proctor\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&body);
    });
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let _ = s.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    let split = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {:?}", String::from_utf8_lossy(&got)));
    let head = String::from_utf8_lossy(&got[..split]).to_string();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut payload = got[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload = dechunk(&payload);
    }
    let v = serde_json::from_slice(&payload)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&payload).into()));
    (status, v)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 2 + size + 2).min(b.len())..];
    }
    out
}

/// Asserts a refusal: the status, the error's message naming `says`.
fn refused(what: &str, got: (u16, Value), status: u16, says: &[&str]) {
    let (code, v) = got;
    assert_eq!(code, status, "{what}: {v}");
    let msg = v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: not the JSON error shape: {v}"));
    for s in says {
        assert!(msg.contains(s), "{what}: {msg:?} does not say {s:?}");
    }
}

fn exec_ok(s: &DemoServer, id: &str, script: &str) -> String {
    let v = s.expect(
        200,
        "POST",
        &rig_path(id, "/exec"),
        Some(json!({"argv": ["sh", "-c", script]})),
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(v["stdout_b64"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn absurd_sizes_are_refused_naming_the_bound_and_the_rig_still_works() {
    let s = DemoServer::start(&[]);
    let id = open(&s);
    let sock = s.home.socket();
    let json_call = |path: &str, body: &Value| {
        raw(
            &sock,
            &s.token,
            "POST",
            path,
            "application/json",
            body.to_string().into_bytes(),
        )
    };
    let exec = rig_path(&id, "/exec");

    // exec: too many arguments, too many bytes of them, a body past its bound, a NUL.
    let many: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
    let mut argv = vec!["touch".to_string(), "/tmp/many".to_string()];
    argv.extend(many);
    refused(
        "5000 arguments",
        json_call(&exec, &json!({"argv": argv})),
        413,
        &["5002 arguments", "4096"],
    );
    let big = "x".repeat(300 << 10);
    refused(
        "a 300 KiB argument",
        json_call(&exec, &json!({"argv": ["touch", "/tmp/big", big]})),
        413,
        &["262144-byte bound", "256 KiB"],
    );
    let huge = "x".repeat(9 << 20);
    refused(
        "a 9 MiB exec body",
        json_call(&exec, &json!({"argv": ["touch", "/tmp/huge", huge]})),
        413,
        &["8388608-byte bound", "8 MiB"],
    );
    refused(
        "a NUL in argv",
        json_call(&exec, &json!({"argv": ["touch", "/tmp/nul\u{0}x"]})),
        400,
        &["NUL"],
    );
    // exec: stdin past its bound, a timeout past its bound (and zero, and past u64).
    let stdin = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 5 << 20]);
    refused(
        "5 MiB of stdin",
        json_call(
            &exec,
            &json!({"argv": ["sh", "-c", "cat > /tmp/stdin"], "stdin_b64": stdin}),
        ),
        413,
        &["4194304-byte bound", "4 MiB"],
    );
    for t in [0u64, 3601, u64::MAX] {
        refused(
            &format!("timeout {t}"),
            json_call(
                &exec,
                &json!({"argv": ["touch", "/tmp/timeout"], "timeout_secs": t}),
            ),
            400,
            &["1 to 3600"],
        );
    }
    let (code, v) = raw(
        &sock,
        &s.token,
        "POST",
        &exec,
        "application/json",
        br#"{"argv":["touch","/tmp/t"],"timeout_secs":1e40}"#.to_vec(),
    );
    assert_eq!(code, 400, "{v}");
    refused(
        "a cwd with ..",
        json_call(
            &exec,
            &json!({"argv": ["touch", "t"], "cwd": "/work/../tmp"}),
        ),
        400,
        &["cwd", "`..`"],
    );

    // input: a 100 MiB body, and text past the bound of one input in a body within its own.
    let text = "y".repeat(100 << 20);
    let input = rig_path(&id, "/input");
    refused(
        "a 100 MiB input",
        raw(
            &sock,
            &s.token,
            "POST",
            &input,
            "application/json",
            format!(r#"{{"text":"{text}"}}"#).into_bytes(),
        ),
        413,
        &["262144-byte bound", "256 KiB"],
    );
    refused(
        "100 KiB typed at once",
        json_call(&input, &json!({"text": "z".repeat(100 << 10)})),
        413,
        &["65536-byte bound", "64 KiB"],
    );

    // resize: 0×0, 65535×65535, and past u16.
    let resize = rig_path(&id, "/resize");
    for (r, c) in [(0u32, 0u32), (65535, 65535), (0, 80), (24, 0)] {
        refused(
            &format!("{r}x{c}"),
            json_call(&resize, &json!({"rows": r, "cols": c})),
            400,
            &["rows 1 to 500", "cols 1 to 1000"],
        );
    }
    let (code, v) = json_call(&resize, &json!({"rows": 70000, "cols": 80}));
    assert_eq!(code, 400, "{v}");

    // cp in: a file past the bound; guest paths with `..` or a NUL, in and out.
    let over = vec![b'f'; (16 << 20) + 1];
    refused(
        "a file over the bound",
        raw(
            &sock,
            &s.token,
            "PUT",
            &format!("{}?path=/tmp/over", rig_path(&id, "/files")),
            "application/octet-stream",
            over,
        ),
        413,
        &["16777216 bytes", "16 MiB"],
    );
    for (method, q) in [
        ("PUT", "/tmp/../etc/x"),
        ("GET", "/tmp/../etc/passwd"),
        ("PUT", "/tmp/a%00b"),
        ("GET", "/tmp/a%00b"),
        ("PUT", "relative/x"),
    ] {
        refused(
            &format!("{method} {q}"),
            raw(
                &sock,
                &s.token,
                method,
                &format!("{}?path={q}", rig_path(&id, "/files")),
                "application/octet-stream",
                b"x".to_vec(),
            ),
            400,
            &["give the guest's absolute path"],
        );
    }
    let long = format!("/tmp/{}", "p".repeat(5000));
    refused(
        "a 5000-byte path",
        raw(
            &sock,
            &s.token,
            "PUT",
            &format!("{}?path={long}", rig_path(&id, "/files")),
            "application/octet-stream",
            b"x".to_vec(),
        ),
        400,
        &["4096-byte bound"],
    );

    // Nothing of it reached the guest, and the rig still works.
    let out = exec_ok(
        &s,
        &id,
        "for f in /tmp/many /tmp/big /tmp/huge /tmp/stdin /tmp/timeout /tmp/t /tmp/over /tmp/a; \
         do test -e $f && echo $f; done; echo alive",
    );
    assert_eq!(out, "alive\n", "something half-written in the guest");
    let screen = s.expect(200, "GET", &rig_path(&id, "/screen"), None);
    assert!(
        !screen["text"].as_str().unwrap().contains("yyyyyyyy"),
        "the refused input was typed"
    );
    // Within the bounds, each works: the largest argv, stdin and input accepted.
    let v = s.expect(
        200,
        "POST",
        &exec,
        Some(json!({
            "argv": ["sh", "-c", "wc -c"],
            "stdin_b64": base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 4 << 20]),
            "timeout_secs": 3600,
        })),
    );
    let out = base64::engine::general_purpose::STANDARD
        .decode(v["stdout_b64"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap().trim(),
        (4 << 20).to_string()
    );
    s.expect(
        200,
        "POST",
        &resize,
        Some(json!({"rows": 500, "cols": 1000})),
    );
    s.expect(200, "POST", &rig_path(&id, "/close"), None);
}
