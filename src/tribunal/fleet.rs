//! The fake fleet, labelled demo: an OpenAI-compatible server and an Ollama-native server on
//! 127.0.0.1 (ephemeral ports, a small tokio runtime of their own on one thread), scripted
//! per model ([`FleetScript`], default [`Behaviour::from_model`]), for the tests and the
//! demo. No model runs: each answer is [`Behaviour::answer`] for the lens read from the
//! prompt (the LAST `"lens": "` in what the fake saw, read to the next `"`). It records every
//! request ([`FleetRequest`]) and stops when dropped.
//!
//! Labelled demo wherever it shows: `owned_by: "proctor-demo-fleet"` in `/v1/models`,
//! `system_fingerprint: "proctor-demo-fleet"` in every completion, `/api/version` answers
//! `0.0.0-proctor-demo-fleet`, and every answer carries `x-proctor-demo: fleet`.
//!
//! # The shapes, and where they were checked
//!
//! OpenAI-compatible (`/v1`), against OpenAI's chat completions reference as its official
//! SDKs encode it (`openai/openai-ruby`, `lib/openai/models/chat/completion_create_params.rb`,
//! `chat_completion.rb`, `reasoning_effort.rb`) and OpenAI's error bodies as users report
//! them (`{"error": {"message", "type": "invalid_request_error", "param", "code":
//! "context_length_exceeded"}}`, e.g. himanushi/chat-code#17):
//! - `POST /v1/chat/completions` `{model, messages, response_format: {type: "json_schema",
//!   json_schema: {name, strict, schema}}, reasoning_effort, user}` → 200 `{id, object:
//!   "chat.completion", created, model, system_fingerprint, choices: [{index, message: {role,
//!   content, refusal}, logprobs, finish_reason}], usage: {prompt_tokens, completion_tokens,
//!   total_tokens}}`. A refusal is `content: null` with the text in `message.refusal` (as
//!   structured outputs do). `reasoning_effort` values: `none`, `minimal`, `low`, `medium`,
//!   `high`, `xhigh` (`none` turns reasoning off; models before gpt-5.1 reject it, which is a
//!   real server's 400, not the fake's).
//! - errors: 401 `invalid_api_key` (the fake echoes the key it was given in the message,
//!   whole: harsher than OpenAI, which masks all but its ends, so that a juror that prints a
//!   server's message is caught), 404 `model_not_found`, 400 `context_length_exceeded`.
//! - `GET /v1/models` → `{object: "list", data: [{id, object: "model", created, owned_by}]}`.
//!
//! Ollama native, against `docs/api.md` of github:ollama/ollama (commit
//! fb30760996871fa9460115c753afd2c60d4ab0f7) and its server code (`server/routes.go`,
//! `llm/llama_server.go`, `api/types.go`, `envconfig/config.go`, `docs/faq.mdx`):
//! - `POST /api/chat` `{model, messages, stream, format, think, options: {num_ctx}}` → with
//!   `stream: false` one object `{model, created_at, message: {role, content}, done: true,
//!   done_reason: "stop" | "length", total_duration, prompt_eval_count, eval_count}`; without
//!   it, newline-delimited chunks (streaming is Ollama's default). `think: true` on a model
//!   without thinking is a 400 in the real one; `think: false` is harmless.
//! - the context: without `options.num_ctx` the real server uses 4096 (`docs/faq.mdx`; newer
//!   servers pick 4k/32k/256k by VRAM, `OLLAMA_CONTEXT_LENGTH`); a `num_ctx` above the
//!   model's trained maximum is capped to it. A prompt longer than the context is truncated
//!   silently (`llm/llama_server.go`, `completionPromptForRequest`): the first `num_keep` (4)
//!   tokens are kept, then the LAST `limit - num_keep` tokens, where `limit = num_ctx -
//!   max((num_ctx - num_keep) / 2, 1)`; the middle is dropped. The fake does exactly that on
//!   its token estimate (bytes / 3, rounded up) and records what it kept
//!   ([`FleetRequest::seen_tokens`]). So the foot (with the lens) survives a truncation and
//!   the head of the envelope does not: a juror that forgot `num_ctx` answers for the right
//!   lens about an artefact it never saw whole. That is why the juror sizes it and the
//!   record, not the answer, is what proves the sizing.
//! - `POST /api/show {model}` → `{modelfile, parameters, template, details, model_info:
//!   {"general.architecture": ARCH, "ARCH.context_length": N, …}, capabilities}`; 404
//!   `{"error": "model 'x' not found"}` when it is not pulled.
//! - `POST /api/generate {model, keep_alive: 0}` (no prompt) unloads: `{model, created_at,
//!   response: "", done: true, done_reason: "unload"}`.
//! - `GET /api/tags` → `{models: [{name, model, modified_at, size, digest, details}]}`,
//!   `GET /api/version` → `{version}`.
//!
//! What is not faithful: no tokenizer (bytes / 3 for every model), no real schema
//! enforcement (a `fake-garbage` model answers garbage even under a strict schema, as a
//! broken server or a proxy could), no rate limits, no streaming for OpenAI.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::{Value, json};

use crate::tribunal::model::Behaviour;

/// What the fleet calls itself wherever it shows.
pub const DEMO_LABEL: &str = "proctor-demo-fleet";
/// Ollama's context when a request names no `num_ctx` (its documented default).
pub const OLLAMA_DEFAULT_NUM_CTX: u64 = 4096;
/// Ollama's default `num_keep`: the tokens of the prompt's head a truncation keeps.
pub const OLLAMA_NUM_KEEP: u64 = 4;
/// The maximum context `/api/show` reports for a fake model that declares none.
pub const DEFAULT_CONTEXT_MAX: u64 = 131_072;
/// The architecture the fake's `/api/show` names (`general.architecture`).
pub const FAKE_ARCH: &str = "qwen3";
/// How long the other holders of a rendezvous wait, after the first was answered, for an
/// unload that should not come (see [`FleetScript::rendezvous`]).
const RENDEZVOUS_GRACE: Duration = Duration::from_millis(1500);
/// The longest a rendezvous waits for its company.
const RENDEZVOUS_BOUND: Duration = Duration::from_secs(30);
/// The model names `/v1/models` and `/api/tags` always list.
const CANONICAL: [&str; 10] = [
    "fake-pass",
    "fake-pass-bare",
    "fake-refuse",
    "fake-blocker",
    "fake-wrong-lens",
    "fake-garbage",
    "fake-refusal-text",
    "fake-silent",
    "fake-reasoner",
    "fake-ctx-4096",
];

/// The token estimate the fakes use: bytes / 3, rounded up (the tribunal's own estimate).
pub fn tokens_of(text: &str) -> u64 {
    (text.len() as u64).div_ceil(3)
}

/// How the fleet answers, per model.
#[derive(Debug, Clone, Default)]
pub struct FleetScript {
    behaviours: BTreeMap<String, Behaviour>,
    contexts: BTreeMap<String, u64>,
    absent: BTreeSet<String>,
    rendezvous: BTreeMap<String, usize>,
    openai_key: Option<String>,
}

impl FleetScript {
    /// Every model as [`Behaviour::from_model`] says; a name it does not know is not there.
    pub fn new() -> FleetScript {
        FleetScript::default()
    }
    /// `model` behaves as `b` (and is listed by `/v1/models` and `/api/tags`).
    pub fn behaviour(mut self, model: &str, b: Behaviour) -> FleetScript {
        self.behaviours.insert(model.to_string(), b);
        self
    }
    /// `model` is listed, with its behaviour from its name (`fake-pass@b`).
    pub fn model(mut self, model: &str) -> FleetScript {
        if let Some(b) = Behaviour::from_model(model) {
            self.behaviours.insert(model.to_string(), b);
        }
        self
    }
    /// Ollama's `/api/show` says `model` holds at most `tokens` (the OpenAI side refuses a
    /// longer prompt with 400 `context_length_exceeded`). `fake-ctx-N` models hold N.
    pub fn context(mut self, model: &str, tokens: u64) -> FleetScript {
        self.contexts.insert(model.to_string(), tokens);
        self
    }
    /// `model` is not there (not pulled, not served), whatever its name says.
    pub fn absent(mut self, model: &str) -> FleetScript {
        self.absent.insert(model.to_string());
        self
    }
    /// The OpenAI side requires `Authorization: Bearer <key>`.
    pub fn require_key(mut self, key: &str) -> FleetScript {
        self.openai_key = Some(key.to_string());
        self
    }
    /// Ollama's chat calls to `model` wait until `n` of them are in flight together (at most
    /// 30 s); then the first to arrive is answered, and the others are held until an unload
    /// of the model arrives (recorded with them still in flight) or 1.5 s pass. So two lenses
    /// sharing one model overlap for certain, and an unload by the first holder cannot
    /// slip in unseen.
    pub fn rendezvous(mut self, model: &str, n: usize) -> FleetScript {
        self.rendezvous.insert(model.to_string(), n.max(1));
        self
    }

    fn behaviour_of(&self, model: &str) -> Option<Behaviour> {
        if self.absent.contains(model) {
            return None;
        }
        self.behaviours
            .get(model)
            .copied()
            .or_else(|| Behaviour::from_model(model))
    }

    fn context_of(&self, model: &str) -> u64 {
        if let Some(t) = self.contexts.get(model) {
            return *t;
        }
        match self.behaviour_of(model) {
            Some(Behaviour::Context(t)) => t,
            _ => DEFAULT_CONTEXT_MAX,
        }
    }

    fn listed(&self) -> Vec<String> {
        let mut v: BTreeSet<String> = CANONICAL.iter().map(|s| s.to_string()).collect();
        v.extend(self.behaviours.keys().cloned());
        v.retain(|m| !self.absent.contains(m));
        v.into_iter().collect()
    }
}

/// One request the fleet was sent, as it understood it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetRequest {
    /// Arrival order across both servers, from 0.
    pub seq: u64,
    /// `openai` or `ollama`.
    pub server: String,
    pub method: String,
    pub path: String,
    pub model: Option<String>,
    /// OpenAI: `reasoning_effort` as sent.
    pub reasoning_effort: Option<String>,
    /// Ollama: `think` as sent.
    pub think: Option<bool>,
    /// Ollama: `options.num_ctx` as sent.
    pub num_ctx: Option<u64>,
    /// OpenAI: `response_format.type` is `json_schema` with a schema; Ollama: `format` is
    /// present.
    pub response_format: bool,
    /// Ollama: `stream` as sent.
    pub stream: Option<bool>,
    /// OpenAI: `user` as sent.
    pub user: Option<String>,
    /// Whether a bearer header came, and (when the server requires a key) whether it was
    /// the right one.
    pub bearer: bool,
    pub key_ok: Option<bool>,
    /// Ollama: a `keep_alive: 0` generate with no prompt (an unload).
    pub unload: bool,
    /// Chat calls to this model in flight on this server when it arrived (itself excluded).
    pub in_flight: usize,
    /// The prompt's size (the last user message), estimated.
    pub prompt_tokens: u64,
    /// What the fake kept of it (Ollama truncates to its context).
    pub seen_tokens: u64,
    /// The lens the fake read (the last `"lens": "` in what it saw).
    pub lens: Option<String>,
    /// What it answered; `None` while it is still holding the request.
    pub status: Option<u16>,
}

#[derive(Default)]
struct Book {
    requests: Vec<FleetRequest>,
    /// (server, model) → chat calls in flight.
    in_flight: BTreeMap<(String, String), usize>,
    /// model → arrivals at its rendezvous; model → unloads seen.
    rdv_arrivals: BTreeMap<String, usize>,
    unloads: BTreeMap<String, usize>,
}

struct Fake {
    script: FleetScript,
    book: Mutex<Book>,
}

impl Fake {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn record(&self, mut r: FleetRequest) -> u64 {
        let mut b = self.book();
        let seq = b.requests.len() as u64;
        r.seq = seq;
        b.requests.push(r);
        seq
    }
    fn answered(&self, seq: u64, status: u16) {
        if let Some(r) = self.book().requests.get_mut(seq as usize) {
            r.status = Some(status);
        }
    }
    fn in_flight(&self, server: &str, model: &str) -> usize {
        self.book()
            .in_flight
            .get(&(server.to_string(), model.to_string()))
            .copied()
            .unwrap_or(0)
    }
    fn unloads(&self, model: &str) -> usize {
        self.book().unloads.get(model).copied().unwrap_or(0)
    }
}

/// A chat call in flight, counted until it is dropped (answered, or the client left).
struct Flight {
    fake: Arc<Fake>,
    key: (String, String),
}

impl Flight {
    fn start(fake: &Arc<Fake>, server: &str, model: &str) -> (Flight, usize) {
        let key = (server.to_string(), model.to_string());
        let mut b = fake.book();
        let n = b.in_flight.entry(key.clone()).or_insert(0);
        let before = *n;
        *n += 1;
        drop(b);
        (
            Flight {
                fake: fake.clone(),
                key,
            },
            before,
        )
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut b = self.fake.book();
        if let Some(n) = b.in_flight.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The fleet: both servers, until dropped.
pub struct Fleet {
    fake: Arc<Fake>,
    openai: SocketAddr,
    ollama: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("openai", &self.openai)
            .field("ollama", &self.ollama)
            .finish()
    }
}

impl Fleet {
    /// Starts both servers on 127.0.0.1 (ports the kernel picks).
    pub fn start(script: FleetScript) -> std::io::Result<Fleet> {
        let openai_l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let ollama_l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        openai_l.set_nonblocking(true)?;
        ollama_l.set_nonblocking(true)?;
        let openai = openai_l.local_addr()?;
        let ollama = ollama_l.local_addr()?;
        let fake = Arc::new(Fake {
            script,
            book: Mutex::new(Book::default()),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let f = fake.clone();
        let thread = std::thread::Builder::new()
            .name("tribunal-fleet".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listeners = tokio::net::TcpListener::from_std(openai_l)
                        .and_then(|a| tokio::net::TcpListener::from_std(ollama_l).map(|b| (a, b)));
                    let (a, b) = match listeners {
                        Ok(l) => {
                            let _ = ready_tx.send(Ok(()));
                            l
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let oa = axum::serve(a, openai_router(f.clone()));
                    let ol = axum::serve(b, ollama_router(f));
                    tokio::select! {
                        _ = oa => {}
                        _ = ol => {}
                        _ = stopped => {}
                    }
                });
                // The runtime is dropped here: every request still held (silence) goes.
            })?;
        ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("the fleet's thread ended before listening"))??;
        Ok(Fleet {
            fake,
            openai,
            ollama,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.openai)
    }

    /// The Ollama base URL (`http://127.0.0.1:PORT`).
    pub fn ollama_url(&self) -> String {
        format!("http://{}", self.ollama)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<FleetRequest> {
        self.fake.book().requests.clone()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn demo_headers(mut r: Response) -> Response {
    r.headers_mut()
        .insert("x-proctor-demo", header::HeaderValue::from_static("fleet"));
    r
}

fn json_response(status: StatusCode, v: Value) -> Response {
    demo_headers((status, axum::Json(v)).into_response())
}

fn bearer_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|s| s.to_string())
}

/// The lens the fake reads: the last `"lens": "` in what it saw, to the next `"`.
pub fn lens_in(prompt: &str) -> Option<String> {
    const MARK: &str = "\"lens\": \"";
    let at = prompt.rfind(MARK)? + MARK.len();
    let rest = &prompt[at..];
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

/// The last user message's text.
fn prompt_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn blank(server: &str, method: &str, path: &str) -> FleetRequest {
    FleetRequest {
        seq: 0,
        server: server.into(),
        method: method.into(),
        path: path.into(),
        model: None,
        reasoning_effort: None,
        think: None,
        num_ctx: None,
        response_format: false,
        stream: None,
        user: None,
        bearer: false,
        key_ok: None,
        unload: false,
        in_flight: 0,
        prompt_tokens: 0,
        seen_tokens: 0,
        lens: None,
        status: None,
    }
}

// ---------------------------------------------------------------------------------------
// OpenAI-compatible

fn openai_router(fake: Arc<Fake>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(oa_chat))
        .route("/v1/models", get(oa_models))
        .fallback(|| async {
            oa_error(
                StatusCode::NOT_FOUND,
                "Not found",
                "invalid_request_error",
                None,
            )
        })
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(fake)
}

fn oa_error(status: StatusCode, message: &str, kind: &str, code: Option<&str>) -> Response {
    json_response(
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

/// The key check: `Err` is the 401 to answer.
fn oa_auth(fake: &Fake, headers: &HeaderMap, r: &mut FleetRequest) -> Result<(), Box<Response>> {
    let given = bearer_of(headers);
    r.bearer = given.is_some();
    let Some(want) = &fake.script.openai_key else {
        return Ok(());
    };
    let ok = given.as_deref() == Some(want.as_str());
    r.key_ok = Some(ok);
    if ok {
        return Ok(());
    }
    let message = match given {
        Some(k) => format!(
            "Incorrect API key provided: {k}. You can find your API key at the {DEMO_LABEL}."
        ),
        None => "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            .to_string(),
    };
    Err(Box::new(oa_error(
        StatusCode::UNAUTHORIZED,
        &message,
        "invalid_request_error",
        Some("invalid_api_key"),
    )))
}

async fn oa_models(State(fake): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let mut r = blank("openai", "GET", "/v1/models");
    let auth = oa_auth(&fake, &headers, &mut r);
    let seq = fake.record(r);
    let resp = match auth {
        Err(resp) => *resp,
        Ok(()) => {
            let data: Vec<Value> = fake
                .script
                .listed()
                .into_iter()
                .map(
                    |id| json!({"id": id, "object": "model", "created": 0, "owned_by": DEMO_LABEL}),
                )
                .collect();
            json_response(StatusCode::OK, json!({"object": "list", "data": data}))
        }
    };
    fake.answered(seq, resp.status().as_u16());
    resp
}

async fn oa_chat(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut r = blank("openai", "POST", "/v1/chat/completions");
    let auth = oa_auth(&fake, &headers, &mut r);
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    let body = parsed.as_ref().ok().cloned().unwrap_or(Value::Null);
    let model = body["model"].as_str().map(|s| s.to_string());
    let prompt = prompt_of(&body);
    r.model = model.clone();
    r.reasoning_effort = body["reasoning_effort"].as_str().map(|s| s.to_string());
    r.user = body["user"].as_str().map(|s| s.to_string());
    r.response_format = body["response_format"]["type"] == "json_schema"
        && body["response_format"]["json_schema"]["schema"].is_object();
    r.prompt_tokens = tokens_of(&prompt);
    r.seen_tokens = r.prompt_tokens;
    r.lens = lens_in(&prompt);
    let (flight, before) = match &model {
        Some(m) => {
            let (f, n) = Flight::start(&fake, "openai", m);
            (Some(f), n)
        }
        None => (None, 0),
    };
    r.in_flight = before;
    let lens = r.lens.clone().unwrap_or_default();
    let reasoning_off = r.reasoning_effort.as_deref() == Some("none");
    let prompt_tokens = r.prompt_tokens;
    let seq = fake.record(r);
    let resp = async {
        if let Err(resp) = auth {
            return *resp;
        }
        if parsed.is_err() {
            return oa_error(
                StatusCode::BAD_REQUEST,
                "We could not parse the JSON body of your request.",
                "invalid_request_error",
                None,
            );
        }
        let Some(model) = model else {
            return oa_error(
                StatusCode::BAD_REQUEST,
                "you must provide a model parameter",
                "invalid_request_error",
                None,
            );
        };
        let Some(b) = fake.script.behaviour_of(&model) else {
            return oa_error(
                StatusCode::NOT_FOUND,
                &format!("The model `{model}` does not exist or you do not have access to it."),
                "invalid_request_error",
                Some("model_not_found"),
            );
        };
        let max = fake.script.context_of(&model);
        if prompt_tokens > max {
            return oa_error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "This model's maximum context length is {max} tokens. However, your \
                     messages resulted in {prompt_tokens} tokens. Please reduce the length of \
                     the messages."
                ),
                "invalid_request_error",
                Some("context_length_exceeded"),
            );
        }
        match b {
            Behaviour::Silent => std::future::pending::<()>().await,
            Behaviour::Slow(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => {}
        }
        let answer = b.answer(&lens, reasoning_off);
        let (content, refusal, finish) = match (b, answer) {
            (Behaviour::RefusalText, Some(t)) => (Value::Null, Value::String(t), "stop"),
            (_, Some(t)) => (Value::String(t), Value::Null, "stop"),
            (_, None) => (Value::String(String::new()), Value::Null, "length"),
        };
        let completion = content.as_str().map(tokens_of).unwrap_or(0);
        // A reasoner that spent its budget: every token went to reasoning.
        let completion = if finish == "length" {
            65_536
        } else {
            completion
        };
        json_response(
            StatusCode::OK,
            json!({
                "id": format!("chatcmpl-fleet-{seq}"),
                "object": "chat.completion",
                "created": now_secs(),
                "model": model,
                "system_fingerprint": DEMO_LABEL,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "logprobs": null,
                    "finish_reason": finish,
                }],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": prompt_tokens + completion,
                },
            }),
        )
    }
    .await;
    drop(flight);
    fake.answered(seq, resp.status().as_u16());
    resp
}

// ---------------------------------------------------------------------------------------
// Ollama native

fn ollama_router(fake: Arc<Fake>) -> Router {
    Router::new()
        .route("/api/chat", post(ol_chat))
        .route("/api/show", post(ol_show))
        .route("/api/generate", post(ol_generate))
        .route("/api/tags", get(ol_tags))
        .route("/api/version", get(ol_version))
        .route(
            "/",
            get(|| async { demo_headers("Ollama is running".into_response()) }),
        )
        .fallback(|| async {
            demo_headers((StatusCode::NOT_FOUND, "404 page not found").into_response())
        })
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(fake)
}

fn ol_error(status: StatusCode, message: &str) -> Response {
    json_response(status, json!({"error": message}))
}

fn ol_not_found(model: &str) -> Response {
    ol_error(StatusCode::NOT_FOUND, &format!("model '{model}' not found"))
}

fn created_at() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

async fn ol_version(State(fake): State<Arc<Fake>>) -> Response {
    let seq = fake.record(blank("ollama", "GET", "/api/version"));
    fake.answered(seq, 200);
    json_response(
        StatusCode::OK,
        json!({"version": format!("0.0.0-{DEMO_LABEL}")}),
    )
}

async fn ol_tags(State(fake): State<Arc<Fake>>) -> Response {
    let seq = fake.record(blank("ollama", "GET", "/api/tags"));
    let models: Vec<Value> = fake
        .script
        .listed()
        .into_iter()
        .map(|m| {
            json!({
                "name": m, "model": m, "modified_at": "2026-01-01T00:00:00Z", "size": 0,
                "digest": hex::encode(<sha2::Sha256 as sha2::Digest>::digest(m.as_bytes())),
                "details": {"parent_model": "", "format": "gguf", "family": FAKE_ARCH,
                    "families": [FAKE_ARCH], "parameter_size": "0B",
                    "quantization_level": DEMO_LABEL},
            })
        })
        .collect();
    fake.answered(seq, 200);
    json_response(StatusCode::OK, json!({"models": models}))
}

async fn ol_show(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut r = blank("ollama", "POST", "/api/show");
    r.bearer = bearer_of(&headers).is_some();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = body["model"]
        .as_str()
        .or_else(|| body["name"].as_str())
        .map(|s| s.to_string());
    r.model = model.clone();
    let seq = fake.record(r);
    let resp = match model {
        None => ol_error(StatusCode::BAD_REQUEST, "model is required"),
        Some(m) if fake.script.behaviour_of(&m).is_none() => ol_not_found(&m),
        Some(m) => {
            let max = fake.script.context_of(&m);
            let mut info = serde_json::Map::new();
            info.insert("general.architecture".into(), json!(FAKE_ARCH));
            info.insert("general.parameter_count".into(), json!(0));
            // Another architecture's key, which a reader must not take.
            info.insert("llama.context_length".into(), json!(2048));
            info.insert(format!("{FAKE_ARCH}.context_length"), json!(max));
            info.insert(format!("{FAKE_ARCH}.embedding_length"), json!(4096));
            json_response(
                StatusCode::OK,
                json!({
                    "modelfile": format!("# {DEMO_LABEL}\nFROM {m}\n"),
                    "parameters": "",
                    "template": "{{ .Prompt }}",
                    "details": {"parent_model": "", "format": "gguf", "family": FAKE_ARCH,
                        "families": [FAKE_ARCH], "parameter_size": "0B",
                        "quantization_level": DEMO_LABEL},
                    "model_info": info,
                    "capabilities": ["completion"],
                }),
            )
        }
    };
    fake.answered(seq, resp.status().as_u16());
    resp
}

async fn ol_generate(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut r = blank("ollama", "POST", "/api/generate");
    r.bearer = bearer_of(&headers).is_some();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().map(|s| s.to_string());
    r.model = model.clone();
    let keep_alive_zero = body["keep_alive"] == json!(0)
        || body["keep_alive"] == json!("0")
        || body["keep_alive"] == json!("0s");
    let no_prompt = body["prompt"].as_str().is_none_or(|p| p.is_empty());
    r.unload = keep_alive_zero && no_prompt;
    if let Some(m) = &model {
        r.in_flight = fake.in_flight("ollama", m);
    }
    let unload = r.unload;
    let seq = fake.record(r);
    let resp = match model {
        None => ol_error(StatusCode::BAD_REQUEST, "model is required"),
        Some(m) if fake.script.behaviour_of(&m).is_none() => ol_not_found(&m),
        Some(m) if unload => {
            *fake.book().unloads.entry(m.clone()).or_insert(0) += 1;
            json_response(
                StatusCode::OK,
                json!({"model": m, "created_at": created_at(), "response": "", "done": true,
                    "done_reason": "unload"}),
            )
        }
        Some(m) if no_prompt => json_response(
            StatusCode::OK,
            json!({"model": m, "created_at": created_at(), "response": "", "done": true,
                "done_reason": "load"}),
        ),
        Some(_) => ol_error(
            StatusCode::BAD_REQUEST,
            "the fleet's Ollama fake answers /api/chat only; /api/generate loads and unloads",
        ),
    };
    fake.answered(seq, resp.status().as_u16());
    resp
}

/// What Ollama keeps of a prompt of `tokens` in a context of `num_ctx` (in tokens), as
/// `(head, tail)`: the first `head` tokens and the last `tail` (`llm/llama_server.go`).
pub fn ollama_keeps(tokens: u64, num_ctx: u64) -> Option<(u64, u64)> {
    if num_ctx <= 1 || tokens < num_ctx {
        return None;
    }
    let full_limit = num_ctx - 1;
    if tokens <= full_limit {
        return None;
    }
    let keep = OLLAMA_NUM_KEEP.min(full_limit);
    let limit = num_ctx - ((num_ctx - keep) / 2).max(1);
    Some((keep, limit - keep))
}

/// The prompt as the fake sees it in a context of `num_ctx` tokens.
fn truncate_like_ollama(prompt: &str, num_ctx: u64) -> String {
    let Some((head, tail)) = ollama_keeps(tokens_of(prompt), num_ctx) else {
        return prompt.to_string();
    };
    let floor = |mut i: usize| {
        while i > 0 && !prompt.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let head_end = floor(((head * 3) as usize).min(prompt.len()));
    let tail_start = floor(prompt.len().saturating_sub((tail * 3) as usize)).max(head_end);
    format!("{}{}", &prompt[..head_end], &prompt[tail_start..])
}

async fn ol_chat(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut r = blank("ollama", "POST", "/api/chat");
    r.bearer = bearer_of(&headers).is_some();
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    let body = parsed.as_ref().ok().cloned().unwrap_or(Value::Null);
    let model = body["model"].as_str().map(|s| s.to_string());
    let prompt = prompt_of(&body);
    r.model = model.clone();
    r.think = body["think"].as_bool();
    r.num_ctx = body["options"]["num_ctx"].as_u64();
    r.stream = body["stream"].as_bool();
    r.response_format = !body["format"].is_null();
    r.prompt_tokens = tokens_of(&prompt);
    let max = model
        .as_deref()
        .map(|m| fake.script.context_of(m))
        .unwrap_or(DEFAULT_CONTEXT_MAX);
    // A num_ctx above the model's maximum is capped to it; none is the default.
    let ctx = r.num_ctx.unwrap_or(OLLAMA_DEFAULT_NUM_CTX).min(max);
    let seen = truncate_like_ollama(&prompt, ctx);
    r.seen_tokens = tokens_of(&seen);
    r.lens = lens_in(&seen);
    let (flight, before) = match &model {
        Some(m) => {
            let (f, n) = Flight::start(&fake, "ollama", m);
            (Some(f), n)
        }
        None => (None, 0),
    };
    r.in_flight = before;
    let lens = r.lens.clone().unwrap_or_default();
    let think = r.think;
    let stream = r.stream != Some(false);
    let seen_tokens = r.seen_tokens;
    let seq = fake.record(r);
    let resp = async {
        if parsed.is_err() {
            return ol_error(StatusCode::BAD_REQUEST, "invalid character in the request body");
        }
        let Some(model) = model else {
            return ol_error(StatusCode::BAD_REQUEST, "model is required");
        };
        let Some(b) = fake.script.behaviour_of(&model) else {
            return ol_not_found(&model);
        };
        if think == Some(true) && b != Behaviour::Reasoner {
            return ol_error(
                StatusCode::BAD_REQUEST,
                &format!("\"{model}\" does not support thinking"),
            );
        }
        if let Some(n) = fake.script.rendezvous.get(&model).copied() {
            rendezvous(&fake, &model, n).await;
        }
        match b {
            Behaviour::Silent => std::future::pending::<()>().await,
            Behaviour::Slow(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => {}
        }
        let answer = b.answer(&lens, think == Some(false));
        let (content, reason) = match answer {
            Some(t) => (t, "stop"),
            None => (String::new(), "length"),
        };
        let eval = if reason == "length" { 65_536 } else { tokens_of(&content) };
        let first = json!({"model": model, "created_at": created_at(),
            "message": {"role": "assistant", "content": content}, "done": false});
        let last = json!({
            "model": model, "created_at": created_at(),
            "message": {"role": "assistant", "content": if stream { String::new() } else { content.clone() }},
            "done": true, "done_reason": reason,
            "total_duration": 1, "load_duration": 1,
            "prompt_eval_count": seen_tokens, "prompt_eval_duration": 1,
            "eval_count": eval, "eval_duration": 1,
        });
        if stream {
            let text = format!("{first}\n{last}\n");
            let mut resp = Response::new(Body::from(text));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/x-ndjson"),
            );
            demo_headers(resp)
        } else {
            json_response(StatusCode::OK, last)
        }
    }
    .await;
    drop(flight);
    fake.answered(seq, resp.status().as_u16());
    resp
}

/// See [`FleetScript::rendezvous`].
async fn rendezvous(fake: &Arc<Fake>, model: &str, n: usize) {
    let ord = {
        let mut b = fake.book();
        let a = b.rdv_arrivals.entry(model.to_string()).or_insert(0);
        let ord = *a;
        *a += 1;
        ord
    };
    let start = Instant::now();
    while fake.in_flight("ollama", model) < n && start.elapsed() < RENDEZVOUS_BOUND {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if ord % n == 0 {
        return;
    }
    let unloads = fake.unloads(model);
    let held = Instant::now();
    while fake.unloads(model) == unloads && held.elapsed() < RENDEZVOUS_GRACE {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The registry `proctor demo` seats its round on: the eight default lenses, every rung the
/// fleet on loopback (labelled demo), scripted so one round shows each kind of seat: the
/// builder's family refused before any send and a pass on another family (deep-state), a
/// local pass no verifier of another family can confirm (fast-structural: UNVERIFIED), two
/// seats still asking a slow juror (operator-security: pending for an hour), and a pass
/// listing a blocker after a rejected rung (generalist: refuse).
pub fn demo_registry(openai_url: &str, ollama_url: &str) -> String {
    let rung = |ladder: &str, backend: &str, model: &str, family: &str, extra: &str| {
        let url = if backend == "ollama" {
            ollama_url
        } else {
            openai_url
        };
        format!(
            "[[{ladder}]]\nbackend = \"{backend}\"\nmodel = \"{model}\"\nfamily = \"{family}\"\nbase_url = \"{url}\"\n{extra}\n"
        )
    };
    let dead_openai = "http://127.0.0.1:9/v1";
    let mut t = String::from(
        "# proctor demo: every rung below is the fake fleet on loopback (labelled demo); no\n\
         # model is asked. Rewritten at each start of the demo's server (its ports change).\n\n",
    );
    for (name, tier, charter) in [
        (
            "defect",
            "deep-state",
            "Find code that does not do what the intent and criteria say.",
        ),
        (
            "contract",
            "fast-structural",
            "Check every signature and format the change touches.",
        ),
        (
            "state",
            "deep-state",
            "Follow every piece of state the change reads or writes.",
        ),
        (
            "concurrency",
            "deep-state",
            "Look for races, lost updates and ordering assumptions.",
        ),
        (
            "security",
            "operator-security",
            "Find what an attacker controls and where it reaches.",
        ),
        (
            "tests",
            "fast-structural",
            "Check that each criterion has a test asserting its effect.",
        ),
        (
            "operator-safety",
            "operator-security",
            "Check what the operator sees and can do.",
        ),
        (
            "generalist",
            "generalist",
            "Refuse anything that should not ship, whatever its kind.",
        ),
    ] {
        t +=
            &format!("[[lens]]\nname = \"{name}\"\ncharter = \"{charter}\"\ntier = \"{tier}\"\n\n");
    }
    let slow = "timeout_secs = 3600\n";
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@claude",
        "anthropic",
        "",
    );
    t += &rung("ladder.deep-state", "openai", "fake-pass@grok", "xai", "");
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@deepseek",
        "deepseek",
        "",
    );
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@mistral",
        "mistral",
        "",
    );
    t += &rung(
        "ladder.deep-state",
        "ollama",
        "fake-pass@qwen",
        "alibaba",
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "ollama",
        "fake-pass@qwen-coder",
        "alibaba",
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@grok-fast",
        "xai",
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@deepseek-fast",
        "deepseek",
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@mistral-small",
        "mistral",
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "ollama",
        "fake-pass@llama",
        "meta",
        "",
    );
    t += &rung(
        "ladder.operator-security",
        "openai",
        "fake-slow-3600000",
        "xai",
        slow,
    );
    t += &rung(
        "ladder.operator-security",
        "openai",
        "fake-pass@deepseek-sec",
        "deepseek",
        "",
    );
    t += &rung(
        "ladder.operator-security",
        "openai",
        "fake-pass@mistral-sec",
        "mistral",
        "",
    );
    t += &rung(
        "ladder.operator-security",
        "ollama",
        "fake-pass@llama-sec",
        "meta",
        "",
    );
    t += &rung("ladder.generalist", "openai", "fake-wrong-lens", "xai", "");
    t += &rung(
        "ladder.generalist",
        "openai",
        "fake-blocker",
        "deepseek",
        "",
    );
    t += &rung(
        "ladder.generalist",
        "openai",
        "fake-pass@mistral-gen",
        "mistral",
        "",
    );
    t += &rung(
        "ladder.generalist",
        "ollama",
        "fake-pass@llama-gen",
        "meta",
        "",
    );
    t += &rung(
        "verifier",
        "openai",
        "fake-pass@claude-verify",
        "anthropic",
        "",
    );
    t += &rung("verifier", "openai", "fake-pass@qwen-verify", "alibaba", "");
    for family in ["mistral", "deepseek"] {
        t += &format!(
            "[[verifier]]\nbackend = \"openai\"\nmodel = \"fake-pass@{family}-verify\"\nfamily = \"{family}\"\nbase_url = \"{dead_openai}\"\n\n"
        );
    }
    t += "[[verifier]]\nbackend = \"ollama\"\nmodel = \"fake-pass@llama-verify\"\nfamily = \"meta\"\nbase_url = \"http://127.0.0.1:9\"\n";
    t
}
