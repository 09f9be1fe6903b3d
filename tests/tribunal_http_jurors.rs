//! The HTTP jurors (OpenAI-compatible, Ollama native) against the fake fleet on loopback:
//! real sockets, real HTTP, the fleet's record of what it was sent.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use proctor::tribunal::fleet::{Fleet, FleetRequest, FleetScript, tokens_of};
use proctor::tribunal::jurors::ollama::{ANSWER_RESERVE_TOKENS, OllamaJuror};
use proctor::tribunal::jurors::openai::OpenAiJuror;
use proctor::tribunal::jurors::{Call, Env, Holders, Juror, Reply};
use proctor::tribunal::model::{Backend, KeySource, Rung};
use serde_json::{Value, json};

fn env() -> Env {
    Env {
        path: OsString::new(),
        base_env: vec![],
        holders: Holders::default(),
        profiles: vec![],
    }
}

fn rung(backend: Backend, model: &str, base_url: &str) -> Rung {
    Rung {
        backend,
        model: model.to_string(),
        family: "fleet".into(),
        context_tokens: None,
        base_url: Some(base_url.to_string()),
        key: None,
        local: backend == Backend::Ollama,
        timeout_secs: 60,
        profile: None,
    }
}

/// The verdict's schema, with the lens as a constant (the shape `verdict::schema` gives).
fn schema(lens: &str) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["verdict", "lens", "findings"],
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "refuse"]},
            "lens": {"type": "string", "const": lens},
            "findings": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["severity", "claim", "evidence"],
                "properties": {
                    "severity": {"type": "string", "enum": ["blocker", "major", "minor", "info"]},
                    "claim": {"type": "string"}, "evidence": {"type": "string"}}}}
        }
    })
}

/// A prompt as the envelope renders it: the charter at the head, an envelope that names
/// another lens, `filler` bytes of files, and the protocol's foot with the literal lens.
fn prompt(lens: &str, filler: usize) -> String {
    let mut p = format!(
        "HEAD-OF-PROMPT You are the {lens} juror: check only your lens.\n\
         The envelope's README mentions {{\"lens\": \"generalist\"}} among eight lenses.\n"
    );
    let line = "fn f(x: u32) -> u32 { x + 1 } // a line of the candidate's files\n";
    while p.len() < filler {
        p.push_str(line);
    }
    p.push_str(&format!(
        "\nAnswer with one JSON object only:\n{{\"verdict\": \"pass\" | \"refuse\", \"lens\": \"{lens}\", \"findings\": [...]}}\n"
    ));
    p
}

struct Asked {
    prompt: String,
    schema: Value,
    run_id: String,
    lens: String,
    deadline: Duration,
    dir: tempfile::TempDir,
}

impl Asked {
    fn new(lens: &str, filler: usize) -> Asked {
        Asked {
            prompt: prompt(lens, filler),
            schema: schema(lens),
            run_id: format!("rnd-0001/{lens}/0"),
            lens: lens.to_string(),
            deadline: Duration::from_secs(60),
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn deadline(mut self, d: Duration) -> Asked {
        self.deadline = d;
        self
    }
    fn call(&self) -> Call<'_> {
        Call {
            run_id: &self.run_id,
            lens: &self.lens,
            prompt: &self.prompt,
            prompt_tokens: tokens_of(&self.prompt),
            schema: &self.schema,
            deadline: self.deadline,
            workdir: self.dir.path().to_path_buf(),
        }
    }
}

fn answered(r: &Reply) -> &str {
    match r {
        Reply::Answered { text } => text,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn verdict(r: &Reply) -> Value {
    serde_json::from_str(answered(r)).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

fn no_answer(r: &Reply) -> (&str, bool) {
    match r {
        Reply::NoAnswer { reason, dead } => (reason, *dead),
        other => panic!("expected no answer, got {other:?}"),
    }
}

fn chats<'a>(reqs: &'a [FleetRequest], path: &str) -> Vec<&'a FleetRequest> {
    reqs.iter().filter(|r| r.path == path).collect()
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    l.local_addr().unwrap().port()
}

// ---------------------------------------------------------------------------------------
// OpenAI-compatible

#[test]
fn openai_juror_reads_each_scripted_behaviour() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let url = fleet.openai_url();
    assert!(url.ends_with("/v1"), "{url}");
    let a = Asked::new("defect", 2000);
    let ask = |model: &str| {
        OpenAiJuror::new(rung(Backend::Openai, model, &url), env()).convene(&a.call())
    };

    let v = verdict(&ask("fake-pass"));
    assert_eq!(
        (v["verdict"].as_str(), v["lens"].as_str()),
        (Some("pass"), Some("defect"))
    );
    assert!(!v["findings"].as_array().unwrap().is_empty());
    let v = verdict(&ask("fake-pass-bare"));
    assert_eq!(v["findings"], json!([]));
    let v = verdict(&ask("fake-refuse"));
    assert_eq!(v["verdict"], "refuse");
    assert_eq!(v["findings"][0]["severity"], "major");
    let v = verdict(&ask("fake-blocker"));
    assert_eq!(
        (v["verdict"].as_str(), v["findings"][0]["severity"].as_str()),
        (Some("pass"), Some("blocker"))
    );
    let v = verdict(&ask("fake-wrong-lens"));
    assert_eq!(v["lens"], "generalist", "answered for another lens");
    assert_eq!(answered(&ask("fake-garbage")), "{\"verdict\": pa");
    // A structured-outputs refusal (content null, message.refusal) is an answer: it counts
    // as refuse when the verdict module reads it.
    assert!(answered(&ask("fake-refusal-text")).starts_with("I'm sorry"));
    // The reasoner answers because reasoning was turned off.
    let v = verdict(&ask("fake-reasoner"));
    assert_eq!(v["verdict"], "pass");
    let v = verdict(&ask("fake-slow-200"));
    assert_eq!(v["verdict"], "pass");

    let reqs = fleet.requests();
    let sent = chats(&reqs, "/v1/chat/completions");
    assert_eq!(sent.len(), 9);
    for r in sent {
        assert_eq!(r.reasoning_effort.as_deref(), Some("none"), "{r:?}");
        assert!(
            r.response_format,
            "json_schema response format with a schema: {r:?}"
        );
        assert_eq!(r.user.as_deref(), Some("rnd-0001/defect/0"));
        assert_eq!(
            r.lens.as_deref(),
            Some("defect"),
            "the foot's lens, not the envelope's"
        );
        assert_eq!(r.seen_tokens, r.prompt_tokens);
        assert!(!r.bearer, "no key source: no Authorization header");
    }
}

#[test]
fn a_reasoner_asked_without_reasoning_off_emits_nothing() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let p = prompt("tests", 500);
    // A raw request, as a juror that forgot reasoning_effort would send it.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let body = json!({"model": "fake-reasoner", "messages": [{"role": "user", "content": p}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "strict": true, "schema": schema("tests")}}});
    let mut resp = agent
        .post(format!("{}/chat/completions", fleet.openai_url()))
        .content_type("application/json")
        .send(body.to_string().as_bytes())
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let raw = resp.body_mut().read_to_vec().unwrap();
    let v: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["choices"][0]["message"]["content"], "");
    // What the juror makes of such an answer: no answer, named.
    let r = proctor::tribunal::jurors::openai::read_completion(&raw);
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("finish_reason length"), "{reason}");
    assert!(!dead);
    // The real juror sends reasoning_effort none, and the same model answers.
    let a = Asked::new("tests", 500);
    let juror = OpenAiJuror::new(
        rung(Backend::Openai, "fake-reasoner", &fleet.openai_url()),
        env(),
    );
    assert_eq!(verdict(&juror.convene(&a.call()))["lens"], "tests");
}

#[test]
fn openai_silence_is_no_answer_at_the_deadline() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("state", 300).deadline(Duration::from_millis(800));
    let r = OpenAiJuror::new(
        rung(Backend::Openai, "fake-silent", &fleet.openai_url()),
        env(),
    )
    .convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("deadline"), "{reason}");
    assert!(!dead, "it is there, it did not answer");
}

#[test]
fn openai_context_declared_too_small_is_refused_before_sending() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("defect", 30_000); // ~10k tokens
    let mut rg = rung(Backend::Openai, "fake-ctx-4096", &fleet.openai_url());
    rg.context_tokens = Some(4096);
    let r = OpenAiJuror::new(rg, env()).convene(&a.call());
    assert_eq!(
        r,
        Reply::Capacity {
            needed: tokens_of(&a.prompt) + ANSWER_RESERVE_TOKENS,
            max: 4096
        }
    );
    assert!(
        fleet.requests().is_empty(),
        "nothing was sent: {:?}",
        fleet.requests()
    );

    // Undeclared, the server's own 400 context_length_exceeded is a transport failure (no
    // answer, named), never a pass.
    let r = OpenAiJuror::new(
        rung(Backend::Openai, "fake-ctx-4096", &fleet.openai_url()),
        env(),
    )
    .convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(
        reason.contains("HTTP 400") && reason.contains("context_length_exceeded"),
        "{reason}"
    );
    assert!(!dead);
}

#[test]
fn openai_http_errors_are_no_answer_naming_the_status() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("defect", 300);
    let r = OpenAiJuror::new(
        rung(Backend::Openai, "gpt-unknown", &fleet.openai_url()),
        env(),
    )
    .convene(&a.call());
    let (reason, _) = no_answer(&r);
    assert!(
        reason.contains("HTTP 404") && reason.contains("model_not_found"),
        "{reason}"
    );
}

fn key_file(dir: &std::path::Path, key: &str, mode: u32) -> String {
    let p = dir.join("key");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "{key}").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p.display().to_string()
}

#[test]
fn the_key_is_sent_as_a_bearer_and_never_appears_in_an_error() {
    let right = "sk-fleet-right-7d1f0c9a2b";
    let wrong = "sk-fleet-WRONG-93be11f4c0aa57";
    let fleet = Fleet::start(FleetScript::new().require_key(right)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = Asked::new("security", 300);

    let mut rg = rung(Backend::Openai, "fake-pass", &fleet.openai_url());
    rg.key = Some(KeySource::File {
        path: key_file(dir.path(), wrong, 0o600),
    });
    let juror = OpenAiJuror::new(rg.clone(), env());
    let r = juror.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("HTTP 401"), "{reason}");
    assert!(!dead);
    let probe = juror.probe();
    assert_eq!(probe.state, "dead", "{probe:?}");
    // The fleet echoes the wrong key whole in its 401 message; none of it comes through.
    for shown in [
        reason.to_string(),
        format!("{r:?}"),
        format!("{probe:?}"),
        format!("{juror:?}"),
        format!("{:?}", fleet.requests()),
    ] {
        assert!(!shown.contains(wrong), "{shown}");
        assert!(!shown.contains(&wrong[8..20]), "{shown}");
    }
    let reqs = fleet.requests();
    assert!(
        reqs.iter().all(|r| r.bearer && r.key_ok == Some(false)),
        "{reqs:?}"
    );

    // A key file others can read is refused by name, with the remedy, before sending.
    std::fs::set_permissions(
        dir.path().join("key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let before = fleet.requests().len();
    let r = juror.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("chmod 600") && dead, "{reason}");
    assert!(!reason.contains(wrong));
    assert_eq!(fleet.requests().len(), before, "nothing sent");

    // The right key: an answer, and the fleet saw the right bearer.
    rg.key = Some(KeySource::File {
        path: key_file(dir.path(), right, 0o600),
    });
    let juror = OpenAiJuror::new(rg, env());
    assert_eq!(verdict(&juror.convene(&a.call()))["verdict"], "pass");
    assert_eq!(juror.probe().state, "alive");
    let last = fleet
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path == "/v1/chat/completions")
        .unwrap();
    assert_eq!(last.key_ok, Some(true));

    // An environment variable that is not set: named, dead, nothing sent.
    let mut rg = rung(Backend::Openai, "fake-pass", &fleet.openai_url());
    rg.key = Some(KeySource::Env {
        name: "PROCTOR_TEST_SURELY_UNSET_KEY_VAR".into(),
    });
    let before = fleet.requests().len();
    let r = OpenAiJuror::new(rg, env()).convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(
        reason.contains("PROCTOR_TEST_SURELY_UNSET_KEY_VAR") && dead,
        "{reason}"
    );
    assert_eq!(fleet.requests().len(), before);
}

#[test]
fn a_key_is_never_sent_in_clear_to_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut rg = rung(Backend::Openai, "fake-pass", "http://192.0.2.1:9/v1");
    rg.key = Some(KeySource::File {
        path: key_file(dir.path(), "sk-never-sent-1234", 0o600),
    });
    let a = Asked::new("defect", 100).deadline(Duration::from_secs(5));
    let r = OpenAiJuror::new(rg, env()).convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("in clear") && dead, "{reason}");
}

#[test]
fn openai_probe_says_listed_unlisted_or_dead() {
    let fleet = Fleet::start(FleetScript::new().model("fake-pass@b")).unwrap();
    let url = fleet.openai_url();
    let p = OpenAiJuror::new(rung(Backend::Openai, "fake-pass@b", &url), env()).probe();
    assert_eq!(p.state, "alive", "{p:?}");
    assert!(p.detail.contains("listed"), "{p:?}");
    let p = OpenAiJuror::new(rung(Backend::Openai, "gpt-not-served", &url), env()).probe();
    assert_eq!(p.state, "dead", "{p:?}");
    assert!(p.detail.contains("not listed"), "{p:?}");
    assert!(
        fleet.requests().iter().all(|r| r.path == "/v1/models"),
        "a probe spends no verdict"
    );
    let url = format!("http://127.0.0.1:{}/v1", dead_port());
    let p = OpenAiJuror::new(rung(Backend::Openai, "fake-pass", &url), env()).probe();
    assert_eq!(p.state, "dead", "{p:?}");
}

#[test]
fn a_dead_port_is_dead() {
    let a = Asked::new("defect", 100);
    let port = dead_port();
    let r = OpenAiJuror::new(
        rung(
            Backend::Openai,
            "fake-pass",
            &format!("http://127.0.0.1:{port}/v1"),
        ),
        env(),
    )
    .convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(dead && reason.contains("connection refused"), "{reason}");
    let j = OllamaJuror::new(
        rung(
            Backend::Ollama,
            "fake-pass",
            &format!("http://127.0.0.1:{port}"),
        ),
        env(),
    );
    let r = j.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(dead && reason.contains("connection refused"), "{reason}");
    let p = j.probe();
    assert_eq!(p.state, "dead", "{p:?}");
    assert!(p.detail.contains("connection refused"), "{p:?}");
}

// ---------------------------------------------------------------------------------------
// Ollama native

#[test]
fn ollama_juror_reads_each_scripted_behaviour_through_the_native_api() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let url = fleet.ollama_url();
    let a = Asked::new("concurrency", 2000);
    let ask = |model: &str| {
        OllamaJuror::new(rung(Backend::Ollama, model, &url), env()).convene(&a.call())
    };

    let v = verdict(&ask("fake-pass"));
    assert_eq!(
        (v["verdict"].as_str(), v["lens"].as_str()),
        (Some("pass"), Some("concurrency"))
    );
    assert_eq!(verdict(&ask("fake-pass-bare"))["findings"], json!([]));
    assert_eq!(verdict(&ask("fake-refuse"))["verdict"], "refuse");
    assert_eq!(
        verdict(&ask("fake-blocker"))["findings"][0]["severity"],
        "blocker"
    );
    assert_eq!(verdict(&ask("fake-wrong-lens"))["lens"], "generalist");
    assert_eq!(answered(&ask("fake-garbage")), "{\"verdict\": pa");
    assert!(answered(&ask("fake-refusal-text")).starts_with("I'm sorry"));
    // think: false is reasoning off for Ollama's thinking models.
    assert_eq!(verdict(&ask("fake-reasoner"))["verdict"], "pass");
    assert_eq!(verdict(&ask("fake-slow-200"))["verdict"], "pass");

    let reqs = fleet.requests();
    assert!(
        reqs.iter()
            .all(|r| r.server == "ollama" && !r.path.starts_with("/v1")),
        "never the OpenAI-compatible endpoint"
    );
    let sent = chats(&reqs, "/api/chat");
    assert_eq!(sent.len(), 9);
    for r in &sent {
        assert_eq!(r.stream, Some(false), "{r:?}");
        assert!(r.response_format, "a JSON format: {r:?}");
        assert_eq!(r.think, Some(false), "{r:?}");
        assert!(
            r.num_ctx.unwrap() >= r.prompt_tokens + ANSWER_RESERVE_TOKENS,
            "{r:?}"
        );
        assert_eq!(
            r.seen_tokens, r.prompt_tokens,
            "the whole prompt was seen: {r:?}"
        );
    }
    // One /api/show before each chat, one unload after each (each call was its model's
    // only holder).
    assert_eq!(chats(&reqs, "/api/show").len(), 9);
    let unloads: Vec<_> = reqs.iter().filter(|r| r.unload).collect();
    assert_eq!(unloads.len(), 9);
    assert!(unloads.iter().all(|u| u.in_flight == 0));
}

#[test]
fn ollama_num_ctx_is_sized_to_a_large_prompt() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("defect", 30_000);
    let tokens = tokens_of(&a.prompt);
    assert!(tokens >= 10_000, "{tokens}");
    let r = OllamaJuror::new(
        rung(Backend::Ollama, "fake-pass", &fleet.ollama_url()),
        env(),
    )
    .convene(&a.call());
    assert_eq!(verdict(&r)["lens"], "defect");
    let reqs = fleet.requests();
    let chat = chats(&reqs, "/api/chat")[0];
    let n = chat.num_ctx.expect("num_ctx sent");
    assert!(
        n >= tokens + ANSWER_RESERVE_TOKENS && n <= 131_072,
        "num_ctx {n} for {tokens}"
    );
    assert_eq!(chat.seen_tokens, tokens, "nothing truncated");

    // What a request without num_ctx gets from the same server (Ollama's 4096 default): the
    // middle and the head are dropped, the foot kept: the juror would judge an artefact it
    // never saw whole.
    let agent: ureq::Agent = ureq::Agent::config_builder().proxy(None).build().into();
    let body = json!({"model": "fake-pass", "stream": false, "format": schema("defect"),
        "messages": [{"role": "user", "content": a.prompt}]});
    let mut resp = agent
        .post(format!("{}/api/chat", fleet.ollama_url()))
        .content_type("application/json")
        .send(body.to_string().as_bytes())
        .unwrap();
    let _ = resp.body_mut().read_to_vec().unwrap();
    let reqs = fleet.requests();
    let raw = chats(&reqs, "/api/chat")[1];
    assert_eq!(raw.num_ctx, None);
    assert!(
        raw.seen_tokens < 4096 && raw.seen_tokens < tokens,
        "{raw:?}"
    );
}

#[test]
fn ollama_capacity_is_refused_before_any_chat() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("defect", 9000); // ~3k tokens + 2048 reserve > 4096
    let r = OllamaJuror::new(
        rung(Backend::Ollama, "fake-ctx-4096", &fleet.ollama_url()),
        env(),
    )
    .convene(&a.call());
    assert_eq!(
        r,
        Reply::Capacity {
            needed: tokens_of(&a.prompt) + ANSWER_RESERVE_TOKENS,
            max: 4096
        }
    );
    let reqs = fleet.requests();
    assert_eq!(chats(&reqs, "/api/show").len(), 1);
    assert!(
        chats(&reqs, "/api/chat").is_empty(),
        "no chat was sent: {reqs:?}"
    );
    assert!(
        !reqs.iter().any(|r| r.unload),
        "nothing was loaded, nothing unloaded"
    );

    // A smaller prompt fits, and num_ctx never goes above the model's maximum.
    let a = Asked::new("defect", 3000);
    let r = OllamaJuror::new(
        rung(Backend::Ollama, "fake-ctx-4096", &fleet.ollama_url()),
        env(),
    )
    .convene(&a.call());
    assert_eq!(verdict(&r)["verdict"], "pass");
    let reqs = fleet.requests();
    assert_eq!(chats(&reqs, "/api/chat")[0].num_ctx, Some(4096));
}

#[test]
fn a_shared_local_model_is_unloaded_once_by_its_last_holder() {
    let model = "fake-pass@shared";
    let fleet = Fleet::start(FleetScript::new().model(model).rendezvous(model, 2)).unwrap();
    let holders = Holders::default();
    let url = fleet.ollama_url();
    let lenses = ["defect", "tests"];
    std::thread::scope(|s| {
        let handles: Vec<_> = lenses
            .iter()
            .map(|lens| {
                let e = Env {
                    holders: holders.clone(),
                    ..env()
                };
                let rg = rung(Backend::Ollama, model, &url);
                s.spawn(move || {
                    let a = Asked::new(lens, 1000);
                    let r = OllamaJuror::new(rg, e).convene(&a.call());
                    assert_eq!(verdict(&r)["lens"], *lens);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    let reqs = fleet.requests();
    let chat = chats(&reqs, "/api/chat");
    assert_eq!(chat.len(), 2);
    assert!(
        chat.iter().any(|c| c.in_flight == 1),
        "the two calls overlapped: {chat:?}"
    );
    let unloads: Vec<_> = reqs.iter().filter(|r| r.unload).collect();
    assert_eq!(
        unloads.len(),
        1,
        "one unload, by the last holder: {reqs:#?}"
    );
    assert_eq!(unloads[0].in_flight, 0, "no call in flight when it came");
    assert!(
        chat.iter()
            .all(|c| c.seq < unloads[0].seq && c.status == Some(200))
    );
}

#[test]
fn ollama_model_not_pulled_is_dead_and_a_probe_reads_the_context() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let url = fleet.ollama_url();
    let j = OllamaJuror::new(rung(Backend::Ollama, "llama3.2:1b", &url), env());
    let p = j.probe();
    assert_eq!(p.state, "dead", "{p:?}");
    assert!(p.detail.contains("ollama pull llama3.2:1b"), "{p:?}");
    let a = Asked::new("defect", 100);
    let r = j.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(dead && reason.contains("not pulled"), "{reason}");

    let p = OllamaJuror::new(rung(Backend::Ollama, "fake-ctx-4096", &url), env()).probe();
    assert_eq!(
        (p.state.as_str(), p.context_max),
        ("alive", Some(4096)),
        "{p:?}"
    );
    let p = OllamaJuror::new(rung(Backend::Ollama, "fake-pass", &url), env()).probe();
    assert_eq!(
        p.context_max,
        Some(131_072),
        "the arch's key, not another's: {p:?}"
    );
    // A declared context lowers what the server says.
    let mut rg = rung(Backend::Ollama, "fake-pass", &url);
    rg.context_tokens = Some(8192);
    assert_eq!(OllamaJuror::new(rg, env()).probe().context_max, Some(8192));
    assert!(
        chats(&fleet.requests(), "/api/chat").is_empty(),
        "probes spend no verdict"
    );
}

#[test]
fn ollama_silence_is_no_answer_and_the_hold_is_given_back() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let holders = Holders::default();
    let a = Asked::new("state", 300).deadline(Duration::from_millis(800));
    let j = OllamaJuror::new(
        rung(Backend::Ollama, "fake-silent", &fleet.ollama_url()),
        Env {
            holders: holders.clone(),
            ..env()
        },
    );
    let r = j.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(reason.contains("deadline") && !dead, "{reason}");
    // The hold was released: this caller is the only holder again, and its release is last.
    holders.acquire(&j.hold_key());
    assert!(holders.release(&j.hold_key()));
    assert_eq!(fleet.requests().iter().filter(|r| r.unload).count(), 1);
}

#[test]
fn ollama_through_its_openai_compatible_endpoint_is_refused() {
    let fleet = Fleet::start(FleetScript::new()).unwrap();
    let a = Asked::new("defect", 100);
    let url = format!("{}/v1", fleet.ollama_url());
    let j = OllamaJuror::new(rung(Backend::Ollama, "fake-pass", &url), env());
    let r = j.convene(&a.call());
    let (reason, dead) = no_answer(&r);
    assert!(dead && reason.contains("ignores num_ctx"), "{reason}");
    assert_eq!(j.probe().state, "dead");
    assert!(fleet.requests().is_empty(), "nothing sent");
    // A base URL where no Ollama answers (the OpenAI side's root) is not "not pulled".
    let url = fleet.openai_url().trim_end_matches("/v1").to_string();
    let p = OllamaJuror::new(rung(Backend::Ollama, "fake-pass", &url), env()).probe();
    assert_eq!(p.state, "dead", "{p:?}");
    assert!(p.detail.contains("no Ollama native API"), "{p:?}");
}
