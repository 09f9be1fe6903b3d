//! The Ollama juror: Ollama's native API, never its OpenAI-compatible endpoint (which ignores
//! `num_ctx` and silently truncates at the 4096-token default).
//!
//! One convocation:
//! 0. A `base_url` ending in `/v1` (the OpenAI-compatible endpoint) is refused, dead.
//! 1. `POST {base_url}/api/show {model}`: the model's maximum context is
//!    `model_info["<arch>.context_length"]`, the arch read from `general.architecture` (a
//!    declared `context_tokens` on the rung lowers it, never raises it). Unreachable → dead;
//!    404 with Ollama's `model '…' not found` → dead, the model is not pulled (`ollama pull
//!    MODEL`); another 404 → dead, no Ollama native API at the base URL; no context length in
//!    `model_info` and none declared → no answer (the prompt cannot be sized, and an unsized
//!    prompt would be truncated silently).
//! 2. The prompt's estimate plus [`ANSWER_RESERVE_TOKENS`] (2048: room for the verdict) that
//!    does not fit the maximum → [`Reply::Capacity`]; `/api/chat` is never called.
//! 3. A hold on the model (`env.holders.acquire("<base_url> <model>")`), then `POST
//!    {base_url}/api/chat {model, messages: [the prompt], stream: false, format: <the
//!    verdict's schema>, think: false, options: {num_ctx}}`, where `num_ctx` is the prompt
//!    plus the reserve rounded up to a multiple of [`NUM_CTX_STEP`], never above the
//!    maximum (so the whole prompt is seen: Ollama keeps only a prompt's head and tail when
//!    it is longer than the context). `message.content` → [`Reply::Answered`]; nothing with
//!    `done_reason: "length"` → [`Reply::NoAnswer`] naming it; a status → `NoAnswer` naming
//!    it; a timeout at `call.deadline` → `NoAnswer`.
//! 4. The hold is given back (`env.holders.release`); only when that was the last hold is
//!    the model unloaded (`POST /api/generate {model, keep_alive: 0}`): a model two lenses
//!    share is not pulled from under the other's call.

use std::time::Duration;

use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::tribunal::jurors::openai::{
    PROBE_TIMEOUT, agent, check_base, describe_key, read_body, rung_key, scrub, status_reason,
    transport_reply,
};
use crate::tribunal::jurors::{Call, Env, Juror, Reply};
use crate::tribunal::model::{Probe, Rung};

pub use crate::tribunal::jurors::openai::ANSWER_RESERVE_TOKENS;

/// `num_ctx` is rounded up to a multiple of this.
pub const NUM_CTX_STEP: u64 = 1024;
/// How long an unload may take.
const UNLOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/api/show` said of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub arch: Option<String>,
    pub context_max: Option<u64>,
}

/// `num_ctx` for a prompt of `prompt_tokens` in a model of `max`: `None` when it does not fit.
pub fn size_num_ctx(prompt_tokens: u64, max: u64) -> Option<u64> {
    let needed = prompt_tokens + ANSWER_RESERVE_TOKENS;
    (needed <= max).then(|| {
        needed
            .div_ceil(NUM_CTX_STEP)
            .saturating_mul(NUM_CTX_STEP)
            .min(max)
    })
}

/// Reads `/api/show`'s answer: the architecture and its context length.
pub fn read_show(v: &Value) -> Shown {
    let info = &v["model_info"];
    let arch = info["general.architecture"].as_str().map(|s| s.to_string());
    let context_max = arch
        .as_deref()
        .and_then(|a| info[format!("{a}.context_length")].as_u64());
    Shown { arch, context_max }
}

/// An Ollama rung.
pub struct OllamaJuror {
    rung: Rung,
    env: Env,
}

impl std::fmt::Debug for OllamaJuror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaJuror")
            .field("model", &self.rung.model)
            .field("base_url", &self.rung.base_url)
            .field("key", &describe_key(&self.rung.key))
            .finish()
    }
}

/// What the juror needs for a request: the base, whether it is loopback, the key.
struct Target {
    base: String,
    loopback: bool,
    key: Option<Zeroizing<String>>,
}

impl Target {
    fn k(&self) -> Option<&str> {
        self.key.as_ref().map(|k| k.as_str())
    }
    fn post(&self, path: &str, deadline: Duration, body: &Value) -> Result<(u16, Vec<u8>), Reply> {
        let mut req = agent(self.loopback, deadline)
            .post(format!("{}{path}", self.base))
            .header("Accept", "application/json");
        let auth = self
            .key
            .as_ref()
            .map(|k| Zeroizing::new(format!("Bearer {}", k.as_str())));
        if let Some(a) = &auth {
            req = req.header("Authorization", a.as_str());
        }
        let mut resp = req
            .content_type("application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| transport_reply(&e, deadline, self.k()))?;
        let status = resp.status().as_u16();
        let raw = read_body(&mut resp).map_err(|e| transport_reply(&e, deadline, self.k()))?;
        Ok((status, raw))
    }
}

impl OllamaJuror {
    pub fn new(rung: Rung, env: Env) -> OllamaJuror {
        OllamaJuror { rung, env }
    }

    /// The key under which a model's holds are counted.
    pub fn hold_key(&self) -> String {
        format!(
            "{} {}",
            self.rung
                .base_url
                .as_deref()
                .unwrap_or("")
                .trim_end_matches('/'),
            self.rung.model
        )
    }

    fn target(&self) -> Result<Target, Reply> {
        let base = self
            .rung
            .base_url
            .as_deref()
            .map(|b| b.trim_end_matches('/').to_string())
            .ok_or_else(|| Reply::NoAnswer {
                reason: format!(
                    "the rung {} has no base_url. Remedy: set base_url (Ollama's is \
                     http://127.0.0.1:11434) in config/tribunal.toml",
                    self.rung.model
                ),
                dead: true,
            })?;
        if base.ends_with("/v1") {
            return Err(Reply::NoAnswer {
                reason: format!(
                    "the rung {} names Ollama's OpenAI-compatible endpoint ({base}), which \
                     ignores num_ctx and truncates silently at 4096 tokens. Remedy: set \
                     base_url to the server's root ({})",
                    self.rung.model,
                    base.trim_end_matches("/v1")
                ),
                dead: true,
            });
        }
        let key = rung_key(&self.rung)?;
        let loopback = check_base(&base, key.is_some())
            .map_err(|reason| Reply::NoAnswer { reason, dead: true })?;
        Ok(Target {
            base,
            loopback,
            key,
        })
    }

    /// `/api/show`: the model's maximum (lowered by a declared `context_tokens`), or why not.
    fn show(&self, t: &Target, deadline: Duration) -> Result<(Shown, Option<u64>), Reply> {
        let (status, raw) = t.post("/api/show", deadline, &json!({"model": self.rung.model}))?;
        match status {
            200 => {
                let v: Value = serde_json::from_slice(&raw).map_err(|e| Reply::NoAnswer {
                    reason: format!("/api/show answered something that is not JSON: {e}"),
                    dead: false,
                })?;
                let shown = read_show(&v);
                let max = match (shown.context_max, self.rung.context_tokens) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                Ok((shown, max))
            }
            404 if is_model_not_found(&raw) => Err(Reply::NoAnswer {
                reason: format!(
                    "the model {} is not pulled on this Ollama (/api/show: 404). Remedy: \
                     `ollama pull {}`",
                    self.rung.model, self.rung.model
                ),
                dead: true,
            }),
            404 => Err(Reply::NoAnswer {
                reason: format!(
                    "no Ollama native API at {} (/api/show: 404 without Ollama's error). \
                     Remedy: set base_url to the Ollama server's root",
                    t.base
                ),
                dead: true,
            }),
            _ => Err(Reply::NoAnswer {
                reason: format!(
                    "/api/show: {}",
                    status_reason(status, &raw, t.k(), &describe_key(&self.rung.key))
                ),
                dead: false,
            }),
        }
    }

    /// The chat call itself (between acquire and release).
    fn chat(&self, t: &Target, call: &Call<'_>, num_ctx: u64) -> Reply {
        let body = json!({
            "model": self.rung.model,
            "messages": [{"role": "user", "content": call.prompt}],
            "stream": false,
            "format": call.schema,
            "think": false,
            "options": {"num_ctx": num_ctx},
        });
        let (status, raw) = match t.post("/api/chat", call.deadline, &body) {
            Ok(x) => x,
            Err(r) => return r,
        };
        if status == 404 {
            return Reply::NoAnswer {
                reason: format!(
                    "the model {} is not pulled on this Ollama (/api/chat: 404). Remedy: \
                     `ollama pull {}`",
                    self.rung.model, self.rung.model
                ),
                dead: true,
            };
        }
        if status != 200 {
            return Reply::NoAnswer {
                reason: format!(
                    "/api/chat: {}",
                    status_reason(status, &raw, t.k(), &describe_key(&self.rung.key))
                ),
                dead: false,
            };
        }
        read_chat(&raw)
    }

    fn unload(&self, t: &Target) {
        // Best effort: a model left loaded is Ollama's keep_alive to expire, not a verdict's.
        let _ = t.post(
            "/api/generate",
            UNLOAD_TIMEOUT,
            &json!({"model": self.rung.model, "keep_alive": 0}),
        );
    }
}

/// Ollama's own 404 for a model it does not have: `{"error": "model '…' not found"}`.
fn is_model_not_found(raw: &[u8]) -> bool {
    serde_json::from_slice::<Value>(raw)
        .ok()
        .and_then(|v| v["error"].as_str().map(|e| e.contains("not found")))
        .unwrap_or(false)
}

/// Reads `/api/chat`'s answer (`stream: false`: one object).
pub fn read_chat(raw: &[u8]) -> Reply {
    let v: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            return Reply::NoAnswer {
                reason: format!("/api/chat answered something that is not one JSON object: {e}"),
                dead: false,
            };
        }
    };
    if let Some(text) = v["message"]["content"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
    {
        return Reply::Answered {
            text: text.to_string(),
        };
    }
    let done = v["done_reason"].as_str().unwrap_or("none");
    let reason = if done == "length" {
        "it emitted nothing: done_reason length (its budget or context ran out before an \
         answer)"
            .to_string()
    } else {
        format!("it emitted nothing (empty content, done_reason {done})")
    };
    Reply::NoAnswer {
        reason,
        dead: false,
    }
}

impl Juror for OllamaJuror {
    fn probe(&self) -> Probe {
        let dead = |detail: String| Probe {
            state: "dead".into(),
            detail,
            context_max: None,
        };
        let reason_of = |r: Reply| match r {
            Reply::NoAnswer { reason, .. } => reason,
            other => format!("{other:?}"),
        };
        let t = match self.target() {
            Ok(t) => t,
            Err(r) => return dead(reason_of(r)),
        };
        match self.show(&t, PROBE_TIMEOUT) {
            Ok((shown, Some(max))) => Probe {
                state: "alive".into(),
                detail: format!(
                    "/api/show: {} is pulled, context {max} tokens{}",
                    self.rung.model,
                    match &shown.arch {
                        Some(a) if shown.context_max.is_some() => format!(" ({a}.context_length)"),
                        _ => " (declared context_tokens)".into(),
                    }
                ),
                context_max: Some(max),
            },
            Ok((shown, None)) => Probe {
                state: "alive".into(),
                detail: format!(
                    "/api/show: {} is pulled, but its model_info names no context length \
                     (architecture {}): a prompt cannot be sized. Remedy: declare \
                     context_tokens on the rung",
                    self.rung.model,
                    shown.arch.as_deref().unwrap_or("unknown")
                ),
                context_max: None,
            },
            Err(r) => dead(reason_of(r)),
        }
    }

    fn convene(&self, call: &Call<'_>) -> Reply {
        let started = std::time::Instant::now();
        let t = match self.target() {
            Ok(t) => t,
            Err(r) => return r,
        };
        let (shown, max) = match self.show(&t, call.deadline.min(PROBE_TIMEOUT)) {
            Ok(x) => x,
            Err(r) => return r,
        };
        let Some(max) = max else {
            return Reply::NoAnswer {
                reason: format!(
                    "/api/show names no context length for {} (architecture {}), and the rung \
                     declares none: the prompt cannot be sized and would be truncated silently. \
                     Remedy: declare context_tokens on the rung",
                    self.rung.model,
                    shown.arch.as_deref().unwrap_or("unknown")
                ),
                dead: false,
            };
        };
        let prompt_tokens = call
            .prompt_tokens
            .max((call.prompt.len() as u64).div_ceil(3));
        let Some(num_ctx) = size_num_ctx(prompt_tokens, max) else {
            return Reply::Capacity {
                needed: prompt_tokens + ANSWER_RESERVE_TOKENS,
                max,
            };
        };
        // The deadline is the whole convocation's: what /api/show took is spent.
        let left = call.deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Reply::NoAnswer {
                reason: format!(
                    "no answer within {} s (the deadline passed before the chat)",
                    call.deadline.as_secs_f64()
                ),
                dead: false,
            };
        }
        let call = Call {
            deadline: left,
            ..call.clone()
        };
        let key = self.hold_key();
        self.env.holders.acquire(&key);
        let reply = self.chat(&t, &call, num_ctx);
        if self.env.holders.release(&key) {
            self.unload(&t);
        }
        match reply {
            Reply::NoAnswer { reason, dead } => Reply::NoAnswer {
                reason: scrub(&reason, t.k()),
                dead,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_ctx_covers_the_prompt_and_the_reserve_and_never_exceeds_the_max() {
        assert_eq!(size_num_ctx(10_000, 131_072), Some(12_288));
        assert_eq!(size_num_ctx(100, 131_072), Some(3072));
        // Fits exactly: the max itself, not the rounded figure above it.
        assert_eq!(size_num_ctx(8192 - 2048, 8192), Some(8192));
        assert_eq!(size_num_ctx(7000, 8192), None);
        for p in [0u64, 1, 999, 4096, 50_000] {
            let n = size_num_ctx(p, 200_000).unwrap();
            assert!(
                n >= p + ANSWER_RESERVE_TOKENS && n <= 200_000 && n.is_multiple_of(NUM_CTX_STEP)
            );
        }
    }

    #[test]
    fn show_reads_the_context_of_the_named_architecture() {
        let v = json!({"model_info": {"general.architecture": "gemma3",
            "llama.context_length": 2048, "gemma3.context_length": 131072}});
        assert_eq!(
            read_show(&v),
            Shown {
                arch: Some("gemma3".into()),
                context_max: Some(131_072)
            }
        );
        let v = json!({"model_info": {"llama.context_length": 2048}});
        assert_eq!(read_show(&v).context_max, None);
    }
}
