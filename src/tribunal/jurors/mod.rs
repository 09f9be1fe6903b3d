//! Jurors: how one rung is asked for a verdict, and probed.
//!
//! Closed, like the provider profiles: the provider CLIs in their headless read-only forms
//! (`cli`), an OpenAI-compatible HTTP server (`openai`), Ollama's native API (`ollama`). A
//! juror is asked once per round ([`Juror::convene`]): one try, no retries. What it answers
//! is returned as text, unread; `verdict::judge` reads it. A juror that never answered says
//! so ([`Reply::NoAnswer`]); a prompt that does not fit is refused before sending
//! ([`Reply::Capacity`], a type, never an error that stops the ladder).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::tribunal::model::{Backend, Probe, Rung};

pub mod cli;
pub mod ollama;
pub mod openai;

/// One convocation.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// `rnd-0001/defect/2`: the round, the lens, the rung. Carried to the juror (CLI: in its
    /// prompt's foot and its private folder's name; HTTP: the `user`/metadata field).
    pub run_id: &'a str,
    /// The lens seated, literally (the prompt's foot names it too).
    pub lens: &'a str,
    /// The whole rendered prompt (charter, envelope, protocol foot).
    pub prompt: &'a str,
    /// Its size estimate in tokens (`envelope::estimate_tokens`).
    pub prompt_tokens: u64,
    /// The verdict's JSON schema for this lens (`verdict::schema`).
    pub schema: &'a serde_json::Value,
    /// After this, the juror never answered.
    pub deadline: Duration,
    /// A private 0700 folder for this convocation (a CLI juror runs in it and may read only
    /// what is there: the envelope's files and the prompt; nothing of the repository).
    pub workdir: PathBuf,
}

/// What a juror did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// It answered; the text is what it said (its final message: the summary written last).
    Answered { text: String },
    /// It never answered: unreachable, transport failure, timeout, nothing emitted (a
    /// reasoning model that spent its budget: `finish_reason: length`). `dead` is true when
    /// nothing is there at all (connection refused, no such program).
    NoAnswer { reason: String, dead: bool },
    /// Refused before sending: the prompt needs `needed` tokens, the model holds `max`.
    Capacity { needed: u64, max: u64 },
}

/// One rung, ready to be asked.
pub trait Juror: Send + Sync {
    /// Whether it is there now, without spending a verdict.
    fn probe(&self) -> Probe;
    /// Ask it once.
    fn convene(&self, call: &Call<'_>) -> Reply;
}

/// Which local models are in use by which convocation, so that a model shared by two
/// lenses is unloaded only by its last holder. One per round (and one for the server's
/// probes); cloned handles share it.
#[derive(Debug, Default, Clone)]
pub struct Holders {
    inner: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl Holders {
    /// Take a hold on `key` (`<base_url> <model>`).
    pub fn acquire(&self, key: &str) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(key.to_string()).or_insert(0) += 1;
    }
    /// Give it back; true when this was the last hold (the caller may unload the model).
    pub fn release(&self, key: &str) -> bool {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match m.get_mut(key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                m.remove(key);
                true
            }
            None => false,
        }
    }
}

/// What a juror needs from its surroundings.
#[derive(Debug, Clone)]
pub struct Env {
    /// The PATH a CLI juror's program is looked up on (the server's, with the fakes first
    /// in the demo).
    pub path: std::ffi::OsString,
    /// The base environment a CLI juror gets (the provider allowlist's names and values).
    pub base_env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub holders: Holders,
    /// The provider profiles a CLI rung's `profile` may name (`providers::profile::Store::
    /// list`: the default ones and the added ones). Empty: a rung naming a profile is dead
    /// (the profile is not known), a rung without one runs under the default login.
    pub profiles: Vec<crate::providers::profile::Profile>,
}

/// The juror for a rung.
pub fn for_rung(rung: &Rung, env: &Env) -> Box<dyn Juror> {
    match rung.backend {
        Backend::Claude | Backend::Codex | Backend::Gemini => {
            Box::new(cli::CliJuror::new(rung.clone(), env.clone()))
        }
        Backend::Openai => Box::new(openai::OpenAiJuror::new(rung.clone(), env.clone())),
        Backend::Ollama => Box::new(ollama::OllamaJuror::new(rung.clone(), env.clone())),
    }
}
