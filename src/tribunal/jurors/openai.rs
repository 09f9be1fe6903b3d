//! The OpenAI-compatible juror: `POST {base_url}/chat/completions`, one user message (the
//! prompt), a strict JSON-schema response format (the verdict's schema for the seated lens),
//! reasoning off (`reasoning_effort: "none"`: a structured verdict never shares its budget
//! with thinking; seed 001's reasoner that spent 65536 tokens on a 131k-token artefact and
//! emitted nothing), `user` = the convocation's run id, the key (when the rung names a
//! source) in the `Authorization` header only.
//!
//! What comes back: `choices[0].message.content` → [`Reply::Answered`] (unread: the verdict
//! module reads it); a structured-outputs refusal (`content: null`, `message.refusal`) is an
//! answer too (it counts as refuse); nothing emitted (`finish_reason: "length"`, an empty
//! content), a status 4xx/5xx, a timeout at `call.deadline`, an unreadable body →
//! [`Reply::NoAnswer`] naming why (a transport failure is never a pass); connection refused,
//! no base URL, no key where one is named → `NoAnswer { dead: true }`. A declared
//! `context_tokens` smaller than the prompt plus [`ANSWER_RESERVE_TOKENS`] →
//! [`Reply::Capacity`] before anything is sent.
//!
//! The key: read at each call from its source (an environment variable of the server's
//! environment by name, or a 0600 file the user owns), held in zeroed memory, sent only in
//! the header, only over https or to a loopback host (plain http elsewhere is refused before
//! sending), never to a redirect, never printed, logged or put in a reason: every reason is
//! scrubbed of it ([`scrub`]), and a 401/403 never repeats the server's message (real
//! servers echo part of a wrong key).
//!
//! This file also holds the HTTP plumbing the Ollama juror shares (the agent, the key, the
//! transport errors).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::files;
use crate::tribunal::jurors::{Call, Env, Juror, Reply};
use crate::tribunal::model::{KeySource, Probe, Rung};

/// The tokens kept free for the verdict itself, on top of the prompt's estimate, when a
/// context is checked or sized: a verdict object with a dozen findings is well under it.
pub const ANSWER_RESERVE_TOKENS: u64 = 2048;
/// How long a probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from a server.
pub const MAX_ANSWER_BYTES: u64 = 8 << 20;
/// The longest server message kept in a reason.
const MAX_MESSAGE_CHARS: usize = 300;
/// The longest key accepted from a source.
const MAX_KEY_BYTES: u64 = 4096;

/// Why a key could not be had (never the key).
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the key's environment variable {name} is not set in the server's environment. \
         Remedy: set it where `proctor serve` starts, or name a key file (0600)"
    )]
    EnvMissing { name: String },
    #[error(
        "the key file {path} is readable by others or its group (mode {mode:04o}). Remedy: \
         `chmod 600 {path}`"
    )]
    FileExposed { path: String, mode: u32 },
    #[error(
        "the key file {path} is owned by uid {uid}, not by you. Remedy: use a key file you own (0600)"
    )]
    FileForeign { path: String, uid: u32 },
    #[error("cannot read the key file {path}: {reason}")]
    File { path: String, reason: String },
    #[error(
        "the key from {source_name} is not usable (empty, several lines, too long, or \
         characters a header cannot carry)"
    )]
    Unusable { source_name: String },
}

/// Reads a rung's key from its source.
pub fn read_key(source: &KeySource) -> Result<Zeroizing<String>, KeyError> {
    let (bytes, source_name) = match source {
        KeySource::Env { name } => {
            let v = std::env::var_os(name)
                .ok_or_else(|| KeyError::EnvMissing { name: name.clone() })?;
            (
                Zeroizing::new(v.into_encoded_bytes()),
                format!("the environment variable {name}"),
            )
        }
        KeySource::File { path } => (read_key_file(Path::new(path))?, format!("the file {path}")),
    };
    let unusable = || KeyError::Unusable {
        source_name: source_name.clone(),
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| unusable())?;
    let t = text.trim();
    if t.is_empty() || t.len() as u64 > MAX_KEY_BYTES || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(unusable());
    }
    Ok(Zeroizing::new(t.to_string()))
}

fn read_key_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let shown = path.display().to_string();
    let io = |reason: String| KeyError::File {
        path: shown.clone(),
        reason,
    };
    let file = files::open_private_read(path).map_err(|e| io(e.to_string()))?;
    let meta = file.metadata().map_err(|e| io(e.to_string()))?;
    if meta.uid() != files::my_uid() {
        return Err(KeyError::FileForeign {
            path: shown,
            uid: meta.uid(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::FileExposed { path: shown, mode });
    }
    let mut buf = Zeroizing::new(Vec::new());
    file.take(MAX_KEY_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io(e.to_string()))?;
    Ok(buf)
}

/// `text` with every occurrence of the key (and of its long pieces, which servers echo
/// masked at the ends) replaced.
pub fn scrub(text: &str, key: Option<&str>) -> String {
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return text.to_string();
    };
    let mut out = text.replace(key, "<key>");
    // Any run of 6 or more of the key's characters, in place: a masked echo keeps the key's
    // first and last few (`sk-abc1***wxyz`).
    let k = key.as_bytes();
    if k.len() >= 6 {
        for len in (6..k.len()).rev() {
            for start in 0..=k.len() - len {
                if let Ok(piece) = std::str::from_utf8(&k[start..start + len])
                    && out.contains(piece)
                {
                    out = out.replace(piece, "<key>");
                }
            }
        }
    }
    out
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks a base URL: `https://`, or `http://` to a loopback host (or anywhere when no key
/// is sent). The reason names the remedy.
pub fn check_base(base_url: &str, with_key: bool) -> Result<bool, String> {
    let uri: ureq::http::Uri = base_url
        .parse()
        .map_err(|_| format!("base_url {base_url:?} is not a URL"))?;
    let host = uri
        .host()
        .ok_or_else(|| format!("base_url {base_url:?} has no host"))?;
    let loopback = is_loopback(host);
    match uri.scheme_str() {
        Some("https") => Ok(loopback),
        Some("http") if loopback || !with_key => Ok(loopback),
        Some("http") => Err(format!(
            "base_url {base_url:?} is plain http to a host that is not this machine: the key \
             would travel in clear. Remedy: use https"
        )),
        _ => Err(format!(
            "base_url {base_url:?}: the scheme must be https (or http for a loopback host)"
        )),
    }
}

/// An agent for one call: no redirects, statuses as values, one global deadline, no proxy
/// for a loopback host (a proxy from the environment must not see it, nor its key).
pub fn agent(loopback: bool, deadline: Duration) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(format!("proctor/{}", crate::version::VERSION))
        .timeout_global(Some(deadline))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        );
    if loopback {
        config = config.proxy(None);
    }
    config.build().into()
}

/// What a transport error means for a juror.
pub fn transport_reply(e: &ureq::Error, deadline: Duration, key: Option<&str>) -> Reply {
    match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            Reply::NoAnswer {
                reason: "connection refused: nothing listens at the base URL".into(),
                dead: true,
            }
        }
        ureq::Error::HostNotFound => Reply::NoAnswer {
            reason: "the base URL's host does not resolve".into(),
            dead: true,
        },
        ureq::Error::ConnectionFailed => Reply::NoAnswer {
            reason: "no connection could be made to the base URL".into(),
            dead: true,
        },
        ureq::Error::Timeout(_) => Reply::NoAnswer {
            reason: format!(
                "no answer within {} s (the deadline)",
                deadline.as_secs_f64()
            ),
            dead: false,
        },
        other => Reply::NoAnswer {
            reason: format!("transport failure: {}", scrub(&other.to_string(), key)),
            dead: false,
        },
    }
}

/// Reads a bounded body.
pub fn read_body(resp: &mut ureq::http::Response<ureq::Body>) -> Result<Vec<u8>, ureq::Error> {
    resp.body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
}

/// A server's own error message, bounded and scrubbed (OpenAI's `error.message` and
/// `error.code`, Ollama's `error`).
pub fn server_message(raw: &[u8], key: Option<&str>) -> String {
    let v: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let text = match (&v["error"], v["error"]["message"].as_str()) {
        (_, Some(m)) => match v["error"]["code"].as_str() {
            Some(c) => format!("{c}: {m}"),
            None => m.to_string(),
        },
        (Value::String(s), None) => s.clone(),
        _ => String::from_utf8_lossy(raw).into_owned(),
    };
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_MESSAGE_CHARS)
        .collect();
    scrub(&text, key)
}

/// The reason for an HTTP error status (never a pass). A 401/403 does not repeat what the
/// server said: real servers echo part of a wrong key.
pub fn status_reason(status: u16, raw: &[u8], key: Option<&str>, key_source: &str) -> String {
    match status {
        401 | 403 => format!(
            "HTTP {status}: the server refused the key from {key_source} (its message is not \
             kept: it may repeat the key). Remedy: check the key"
        ),
        _ => format!("HTTP {status}: {}", server_message(raw, key)),
    }
}

/// How a rung's key source is named in a reason.
pub fn describe_key(key: &Option<KeySource>) -> String {
    match key {
        None => "no key source (none sent)".into(),
        Some(KeySource::Env { name }) => format!("the environment variable {name}"),
        Some(KeySource::File { path }) => format!("the file {path}"),
    }
}

/// The key for a rung (none when it names no source), or the `NoAnswer` that says why not.
pub fn rung_key(rung: &Rung) -> Result<Option<Zeroizing<String>>, Reply> {
    match &rung.key {
        None => Ok(None),
        Some(src) => read_key(src).map(Some).map_err(|e| Reply::NoAnswer {
            reason: e.to_string(),
            dead: true,
        }),
    }
}

/// An OpenAI-compatible rung.
pub struct OpenAiJuror {
    rung: Rung,
    _env: Env,
}

impl std::fmt::Debug for OpenAiJuror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiJuror")
            .field("model", &self.rung.model)
            .field("base_url", &self.rung.base_url)
            .field("key", &describe_key(&self.rung.key))
            .finish()
    }
}

impl OpenAiJuror {
    pub fn new(rung: Rung, env: Env) -> OpenAiJuror {
        OpenAiJuror { rung, _env: env }
    }

    fn base(&self) -> Result<&str, Reply> {
        self.rung
            .base_url
            .as_deref()
            .map(|b| b.trim_end_matches('/'))
            .ok_or_else(|| Reply::NoAnswer {
                reason: format!(
                    "the rung {} has no base_url. Remedy: set base_url in config/tribunal.toml",
                    self.rung.model
                ),
                dead: true,
            })
    }

    /// The request body (no key in it).
    pub fn body(&self, call: &Call<'_>) -> Value {
        json!({
            "model": self.rung.model,
            "messages": [{"role": "user", "content": call.prompt}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "strict": true, "schema": call.schema},
            },
            "reasoning_effort": "none",
            "user": call.run_id,
        })
    }
}

/// Reads a chat completion's answer.
pub fn read_completion(raw: &[u8]) -> Reply {
    let v: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            return Reply::NoAnswer {
                reason: format!("the server's answer is not a chat completion (not JSON: {e})"),
                dead: false,
            };
        }
    };
    let choice = &v["choices"][0];
    if !choice.is_object() {
        return Reply::NoAnswer {
            reason: "the server's answer has no choices[0]".into(),
            dead: false,
        };
    }
    let finish = choice["finish_reason"].as_str().unwrap_or("none");
    let msg = &choice["message"];
    if let Some(text) = msg["content"].as_str().filter(|t| !t.trim().is_empty()) {
        return Reply::Answered {
            text: text.to_string(),
        };
    }
    if let Some(text) = msg["refusal"].as_str().filter(|t| !t.trim().is_empty()) {
        // A structured-outputs refusal: it answered, badly (it counts as refuse).
        return Reply::Answered {
            text: text.to_string(),
        };
    }
    let reason = if finish == "length" {
        "it emitted nothing: finish_reason length (its whole budget went before an answer; \
         a reasoning model that was not told reasoning_effort none, or an output limit)"
            .to_string()
    } else {
        format!("it emitted nothing (empty content, finish_reason {finish})")
    };
    Reply::NoAnswer {
        reason,
        dead: false,
    }
}

impl Juror for OpenAiJuror {
    fn probe(&self) -> Probe {
        let dead = |detail: String| Probe {
            state: "dead".into(),
            detail,
            context_max: None,
        };
        let base = match self.base() {
            Ok(b) => b,
            Err(Reply::NoAnswer { reason, .. }) => return dead(reason),
            Err(_) => return dead("no base_url".into()),
        };
        let key = match rung_key(&self.rung) {
            Ok(k) => k,
            Err(Reply::NoAnswer { reason, .. }) => return dead(reason),
            Err(_) => return dead("no key".into()),
        };
        let loopback = match check_base(base, key.is_some()) {
            Ok(l) => l,
            Err(reason) => return dead(reason),
        };
        let k = key.as_ref().map(|k| k.as_str());
        let mut req = agent(loopback, PROBE_TIMEOUT).get(format!("{base}/models"));
        let auth = key
            .as_ref()
            .map(|k| Zeroizing::new(format!("Bearer {}", k.as_str())));
        if let Some(a) = &auth {
            req = req.header("Authorization", a.as_str());
        }
        let mut resp = match req.call() {
            Ok(r) => r,
            Err(e) => {
                return match transport_reply(&e, PROBE_TIMEOUT, k) {
                    Reply::NoAnswer { reason, .. } => dead(reason),
                    _ => dead("transport failure".into()),
                };
            }
        };
        let status = resp.status().as_u16();
        let raw = read_body(&mut resp).unwrap_or_default();
        match status {
            200 => {
                let v: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                match v["data"].as_array() {
                    Some(list) => {
                        if list.iter().any(|m| m["id"] == self.rung.model.as_str()) {
                            Probe {
                                state: "alive".into(),
                                detail: format!(
                                    "GET /models: 200, {} listed ({} models)",
                                    self.rung.model,
                                    list.len()
                                ),
                                context_max: None,
                            }
                        } else {
                            dead(format!(
                                "GET /models: 200, but {} is not listed ({} models)",
                                self.rung.model,
                                list.len()
                            ))
                        }
                    }
                    None => Probe {
                        state: "alive".into(),
                        detail: format!(
                            "GET /models: 200 without a model list: the server answers, {} \
                             not confirmed",
                            self.rung.model
                        ),
                        context_max: None,
                    },
                }
            }
            404 | 405 | 501 => Probe {
                state: "alive".into(),
                detail: format!(
                    "GET /models: {status} (no model list offered): the server answers, {} \
                     not confirmed",
                    self.rung.model
                ),
                context_max: None,
            },
            _ => dead(format!(
                "GET /models: {}",
                status_reason(status, &raw, k, &describe_key(&self.rung.key))
            )),
        }
    }

    fn convene(&self, call: &Call<'_>) -> Reply {
        let prompt_tokens = call
            .prompt_tokens
            .max((call.prompt.len() as u64).div_ceil(3));
        let needed = prompt_tokens + ANSWER_RESERVE_TOKENS;
        if let Some(max) = self.rung.context_tokens
            && needed > max
        {
            return Reply::Capacity { needed, max };
        }
        let base = match self.base() {
            Ok(b) => b,
            Err(r) => return r,
        };
        let key = match rung_key(&self.rung) {
            Ok(k) => k,
            Err(r) => return r,
        };
        let loopback = match check_base(base, key.is_some()) {
            Ok(l) => l,
            Err(reason) => return Reply::NoAnswer { reason, dead: true },
        };
        let k = key.as_ref().map(|k| k.as_str());
        let body = self.body(call).to_string();
        let mut req = agent(loopback, call.deadline)
            .post(format!("{base}/chat/completions"))
            .header("Accept", "application/json");
        let auth = key
            .as_ref()
            .map(|k| Zeroizing::new(format!("Bearer {}", k.as_str())));
        if let Some(a) = &auth {
            req = req.header("Authorization", a.as_str());
        }
        let mut resp = match req.content_type("application/json").send(body.as_bytes()) {
            Ok(r) => r,
            Err(e) => return transport_reply(&e, call.deadline, k),
        };
        let status = resp.status().as_u16();
        let raw = match read_body(&mut resp) {
            Ok(b) => b,
            Err(e) => return transport_reply(&e, call.deadline, k),
        };
        if status != 200 {
            return Reply::NoAnswer {
                reason: status_reason(status, &raw, k, &describe_key(&self.rung.key)),
                dead: false,
            };
        }
        match read_completion(&raw) {
            Reply::NoAnswer { reason, dead } => Reply::NoAnswer {
                reason: scrub(&reason, k),
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
    fn scrub_removes_the_key_and_its_masked_ends() {
        let key = "sk-test-0123456789abcdef";
        let msg = format!("Incorrect API key provided: {key}. Or sk-tes*****bcdef");
        let s = scrub(&msg, Some(key));
        assert!(!s.contains(key), "{s}");
        assert!(!s.contains("sk-tes"), "{s}");
        assert!(!s.contains("abcdef"), "{s}");
        assert!(s.contains("Incorrect API key provided"), "{s}");
    }

    #[test]
    fn plain_http_with_a_key_only_to_loopback() {
        assert_eq!(check_base("http://127.0.0.1:9/v1", true), Ok(true));
        assert_eq!(check_base("http://[::1]:9/v1", true), Ok(true));
        assert_eq!(check_base("https://api.example/v1", true), Ok(false));
        assert_eq!(check_base("http://gpu-box.lan:11434", false), Ok(false));
        let e = check_base("http://api.example/v1", true).unwrap_err();
        assert!(e.contains("in clear") && e.contains("https"), "{e}");
    }

    #[test]
    fn completion_reading() {
        let ok = br#"{"choices":[{"message":{"content":"{\"verdict\":\"pass\"}"},"finish_reason":"stop"}]}"#;
        assert_eq!(
            read_completion(ok),
            Reply::Answered {
                text: "{\"verdict\":\"pass\"}".into()
            }
        );
        let refusal = br#"{"choices":[{"message":{"content":null,"refusal":"I can't"},"finish_reason":"stop"}]}"#;
        assert_eq!(
            read_completion(refusal),
            Reply::Answered {
                text: "I can't".into()
            }
        );
        let length = br#"{"choices":[{"message":{"content":""},"finish_reason":"length"}]}"#;
        match read_completion(length) {
            Reply::NoAnswer { reason, dead } => {
                assert!(reason.contains("finish_reason length"), "{reason}");
                assert!(!dead);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_completion(b"<html>"),
            Reply::NoAnswer { dead: false, .. }
        ));
    }
}
