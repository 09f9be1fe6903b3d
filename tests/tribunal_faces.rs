//! The tribunal's faces against real records: rounds written into a real home's
//! `data/tribunal/` (the contract's layout), read through a real server's routes (roles,
//! errors by code), the CLI's verbs (`tribunal rounds`, `show`, `show --envelope`, `seats
//! --print-default`) and what they print (untrusted text through the sanitiser).

mod common;

use common::{DemoServer, call_as};
use proctor::demo::tribunal::{ENVELOPE_TEXT, Spec, sample_round, write_round};
use proctor::evidence::store::DigestRef;
use proctor::home::Home;
use proctor::tribunal::model::{Round, RoundState, SeatState};

fn home_of(s: &DemoServer) -> Home {
    Home::resolve(Some(s.home.path())).unwrap()
}

fn spec(id: &str, number: u32, candidate: &str, in_progress: bool, earlier: Vec<u32>) -> Spec {
    Spec {
        id: id.into(),
        number,
        candidate: candidate.into(),
        run: "run-0007".into(),
        identity: DigestRef {
            recipe: "candidate-identity-sha256/1".into(),
            digest: "ab".repeat(32),
        },
        in_progress,
        earlier,
    }
}

/// Two rounds of cand-0003 (the second in progress) and one of another candidate.
fn seed(s: &DemoServer) -> Vec<Round> {
    let home = home_of(s);
    let mut rounds = vec![
        sample_round(&home, &spec("rnd-0001", 1, "cand-0003", false, vec![])),
        sample_round(&home, &spec("rnd-0002", 1, "cand-0009", false, vec![])),
        sample_round(&home, &spec("rnd-0003", 2, "cand-0003", true, vec![3])),
    ];
    // An untrusted claim that tries to drive the terminal (a title change and a bidi flip).
    if let Some(proctor::tribunal::model::Judged::Verdict { verdict, .. }) =
        &mut rounds[0].seats[1].judged
    {
        verdict.findings[0].claim = "evil\u{1b}]0;pwned\u{7}claim \u{202e}txt.exe".into();
    }
    for r in &rounds {
        write_round(&home, r, ENVELOPE_TEXT).unwrap();
    }
    rounds
}

#[test]
fn the_routes_read_the_records_with_roles_and_errors_by_code() {
    let s = DemoServer::start(&[]);
    let rounds = seed(&s);
    let v = s.expect(
        200,
        "GET",
        "/v1/m/tribunal/rounds?candidate=cand-0003",
        None,
    );
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["rnd-0001", "rnd-0003"]);
    let all = s.expect(200, "GET", "/v1/m/tribunal/rounds", None);
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    // One round, as stored, typed by the contract.
    let one = s.expect(200, "GET", "/v1/m/tribunal/rounds/rnd-0003", None);
    let back: Round = serde_json::from_value(one).unwrap();
    assert_eq!(back, rounds[2]);
    assert_eq!(back.state, RoundState::InProgress);
    assert!(back.seats.iter().any(|x| x.state == SeatState::Pending));
    // The envelope, exactly as written in the round's folder.
    let e = s.expect(200, "GET", "/v1/m/tribunal/rounds/rnd-0001/envelope", None);
    assert_eq!(e["text"], ENVELOPE_TEXT);
    assert_eq!(e["round"], "rnd-0001");
    assert_eq!(e["envelope"]["digest"], rounds[0].envelope.digest.as_str());
    // Errors by code.
    let nf = s.expect(404, "GET", "/v1/m/tribunal/rounds/rnd-0099", None);
    assert_eq!(nf["error"]["code"], "not_found");
    let bad = s.expect(400, "GET", "/v1/m/tribunal/rounds/..%2Fx", None);
    assert_eq!(bad["error"]["code"], "bad_request");
    let bad = s.expect(400, "GET", "/v1/m/tribunal/rounds?candidate=nope", None);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cand-0001")
    );
    // A convocation without a builder is refused, naming the remedy; nothing is written.
    let body = serde_json::json!({"candidate": "cand-0003", "builder": " ", "intent": "x", "criteria": "y"});
    let nb = s.expect(400, "POST", "/v1/m/tribunal/rounds", Some(body));
    assert!(
        nb["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--builder"),
        "{nb}"
    );
    let body = serde_json::json!({"candidate": "cand-0003", "builder": "gpt-5", "intent": "two\nlines", "criteria": "y"});
    s.expect(400, "POST", "/v1/m/tribunal/rounds", Some(body));
    let body = serde_json::json!({"workspace": "ws-0001", "commit": "HEAD"});
    let nc = s.expect(400, "POST", "/v1/m/tribunal/red", Some(body));
    assert!(
        nc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("git rev-parse"),
        "{nc}"
    );
    assert_eq!(
        std::fs::read_dir(s.home.path().join("data/tribunal"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json"))
            .count(),
        3
    );
    // Roles: a read token reads, and is refused the writes (403) before any handler runs.
    let read = s.json_token("read", "viewer");
    let sock = s.home.socket();
    let (st, _) = call_as(
        &sock,
        Some(&read),
        "GET",
        "/v1/m/tribunal/rounds/rnd-0001",
        None,
    );
    assert_eq!(st, 200);
    let (st, _) = call_as(
        &sock,
        Some(&read),
        "GET",
        "/v1/m/tribunal/seats?probe=false",
        None,
    );
    assert_eq!(st, 200);
    let (st, _) = call_as(&sock, Some(&read), "GET", "/v1/m/tribunal/red", None);
    assert_eq!(st, 200);
    let body = serde_json::json!({"candidate": "cand-0003", "builder": "gpt-5", "intent": "x", "criteria": "y"});
    let (st, v) = call_as(
        &sock,
        Some(&read),
        "POST",
        "/v1/m/tribunal/rounds",
        Some(body),
    );
    assert_eq!(st, 403, "{v}");
    let body = serde_json::json!({"workspace": "ws-0001", "commit": "a".repeat(40)});
    let (st, v) = call_as(&sock, Some(&read), "POST", "/v1/m/tribunal/red", Some(body));
    assert_eq!(st, 403, "{v}");
    let (st, _) = call_as(&sock, None, "GET", "/v1/m/tribunal/rounds", None);
    assert_eq!(st, 401);
}

#[test]
fn the_cli_shows_rounds_and_a_rounds_routing_sanitised() {
    let s = DemoServer::start(&[]);
    let rounds = seed(&s);
    let h = &s.home;
    let out = h.ok(&["tribunal", "rounds", "3"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("rnd-0001 #1  refused"), "{out}");
    assert!(lines[1].starts_with("rnd-0003 #2  in_progress"), "{out}");
    assert!(lines[1].contains("pending 2"), "{out}");
    assert!(lines[1].contains("trend 3 → 3 so far"), "{out}");
    let j = h.json(&["tribunal", "rounds", "cand-0003", "--json"]);
    assert_eq!(j["items"].as_array().unwrap().len(), 2);
    // The routing table: the builder's and the run's families refused before any send, and
    // the seat moved to another family.
    let show = h.ok(&["tribunal", "show", "rnd-1"]);
    assert!(
        show.contains(
            "builder claude-opus-4 (family anthropic); excluded on every ladder: anthropic, openai"
        ),
        "{show}"
    );
    assert!(
        show.contains("builder_family         family anthropic is the builder's"),
        "{show}"
    );
    assert!(
        show.contains(
            "defect           deep-state         pass       sat on gemini fake-pass (google)"
        ),
        "{show}"
    );
    assert!(
        show.contains("[blocker] the new test does not assert the effect"),
        "{show}"
    );
    assert!(
        show.contains("note: a pass that lists a blocker finding is a refuse"),
        "{show}"
    );
    assert!(
        show.contains("said: {\"verdict\": \"pass\", \"lens\": \"generalist\""),
        "{show}"
    );
    // The hostile claim: no escape reaches the terminal, the controls are shown as markers.
    assert!(!show.contains('\u{1b}') && !show.contains('\u{7}') && !show.contains('\u{202e}'));
    assert!(show.contains("[major] evil"), "{show}");
    assert!(show.contains("⟨U+202E⟩"), "{show}");
    let env = h.ok(&["tribunal", "show", "rnd-0001", "--envelope"]);
    assert!(env.contains(&rounds[0].envelope.digest), "{env}");
    assert!(env.contains("== file src/lexer.txt (changed) =="), "{env}");
    // Bad usage: exit 2 with the remedy.
    let bad = h.run(&["tribunal", "show", "round-one"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("rnd-0001"));
    let missing = h.run(&["tribunal", "show", "rnd-0042"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no round rnd-0042"));
    // A criteria file that cannot be read is refused before anything is sent.
    let c = h.run(&[
        "tribunal",
        "convene",
        "--candidate",
        "3",
        "--builder",
        "gpt-5",
        "--intent",
        "x",
        "--criteria",
        "/nonexistent/criteria.md",
    ]);
    assert_eq!(c.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&c.stderr).contains("cannot read the criteria file"));
}
