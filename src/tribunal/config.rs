//! The tribunal's registry: `config/tribunal.toml` (lenses, tiers, a ladder per tier and the
//! verifier's ladder), refused by name when malformed, and the families of models (the
//! builder's exclusion works on families: same vendor = same family).
//!
//! The file is optional: without it the registry is [`default_registry`] (the parse of
//! [`default_text`], which is what a person copies to `config/tribunal.toml` to edit it).
//! Every problem is one [`ConfigError`] that names the file, where (the line for a syntax or
//! shape problem; the lens, or the ladder and the rung's index, for a rule), what is wrong
//! and the remedy. See `docs/tribunal.md`, "Configuration".

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;

use crate::home::Home;
use crate::tribunal::model::{Backend, KeySource, Ladder, Lens, MAX_LENSES, Registry, Rung, Tier};

/// A convocation's longest allowed ceiling, and the default one.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// Every ladder holds at least this many rungs without a declared `context_tokens` (rungs
/// that carry a whole artefact) before its local tail (seed 001: "le plancher a trois
/// barreaux").
pub const FLOOR: usize = 3;
/// The ladder name of the verifier's ladder in messages and in `tribunal seats`.
pub const VERIFIER: &str = "verifier";

/// Where the registry lives in a home.
pub fn path(home: &Home) -> PathBuf {
    home.config.join("tribunal.toml")
}

/// Why the registry cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read {file}: {err}. Remedy: make it a readable file of yours, or remove it to use the default registry"
    )]
    Unreadable { file: String, err: std::io::Error },
    /// The TOML does not parse, or has an unknown key or a value of the wrong type.
    #[error(
        "{file}: {message}. Remedy: fix it (`proctor tribunal seats` checks it; the default registry with comments is in docs/tribunal.md)"
    )]
    Syntax {
        file: String,
        /// 1-based, when the parser knows it.
        line: Option<usize>,
        message: String,
    },
    /// A rule of the registry does not hold.
    #[error("{file}: {at}: {problem}. Remedy: {remedy}")]
    Invalid {
        file: String,
        /// `lens 3 (defect)`, `ladder deep-state rung 2`, `verifier rung 1`, `lenses`.
        at: String,
        /// A stable name of the rule broken (`floor`, `no_local_tail`, …; see [`ConfigError::kind`]).
        kind: &'static str,
        problem: String,
        remedy: String,
    },
    /// `--builder` names nothing proctor can put in a family.
    #[error(
        "the builder `{builder}` is not a known family, a model of the registry, nor a model id of a known vendor; what cannot be named cannot be excluded. Remedy: give the builder's family ({families}) or its model id"
    )]
    UnknownBuilder { builder: String, families: String },
}

impl ConfigError {
    /// The wire's code: `config_invalid` for every problem of the file, `unknown_builder`.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::UnknownBuilder { .. } => "unknown_builder",
            _ => "config_invalid",
        }
    }
    /// The precise problem: `unreadable`, `syntax`, `unknown_builder`, or a rule's name:
    /// `no_lenses`, `too_many_lenses`, `lens_name`, `duplicate_lens`, `charter`,
    /// `unknown_tier`, `unknown_ladder`, `missing_ladder`, `empty_ladder`, `no_local_tail`,
    /// `floor`, `model`, `family_name`, `family_mismatch`, `cli_local`, `ollama_local`,
    /// `base_url_missing`, `base_url`, `cli_base_url`, `cli_key`, `http_profile`, `key`,
    /// `profile_name`, `timeout_bounds`, `context_tokens`.
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigError::Unreadable { .. } => "unreadable",
            ConfigError::Syntax { .. } => "syntax",
            ConfigError::Invalid { kind, .. } => kind,
            ConfigError::UnknownBuilder { .. } => "unknown_builder",
        }
    }
}

/// The registry of `home`: its `config/tribunal.toml` when present, else the default.
pub fn load(home: &Home) -> Result<Registry, ConfigError> {
    let file = path(home);
    match std::fs::read(&file) {
        Ok(bytes) => {
            let shown = file.display().to_string();
            let text = String::from_utf8(bytes).map_err(|_| ConfigError::Syntax {
                file: shown.clone(),
                line: None,
                message: "the file is not UTF-8 text".into(),
            })?;
            parse(&text, &shown)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(default_registry()),
        Err(err) => Err(ConfigError::Unreadable {
            file: file.display().to_string(),
            err,
        }),
    }
}

/// The default registry (`source: "default"`).
pub fn default_registry() -> Registry {
    parse(DEFAULT_TEXT, "default").expect("the default registry is valid (tested)")
}

/// The default registry as TOML, commented: what a person copies to `config/tribunal.toml`.
pub fn default_text() -> &'static str {
    DEFAULT_TEXT
}

// ---- the file's shape -------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    lens: Vec<LensToml>,
    /// Tier name → rungs.
    #[serde(default)]
    ladder: BTreeMap<String, Vec<RungToml>>,
    #[serde(default)]
    verifier: Vec<RungToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LensToml {
    name: String,
    charter: String,
    tier: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RungToml {
    backend: String,
    model: String,
    family: String,
    context_tokens: Option<u64>,
    base_url: Option<String>,
    key: Option<KeyToml>,
    local: Option<bool>,
    timeout_secs: Option<u64>,
    profile: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyToml {
    kind: String,
    name: Option<String>,
    path: Option<String>,
}

fn parse_tier(s: &str) -> Option<Tier> {
    Tier::ALL.into_iter().find(|t| t.as_str() == s)
}

fn parse_backend(s: &str) -> Option<Backend> {
    [
        Backend::Claude,
        Backend::Codex,
        Backend::Gemini,
        Backend::Openai,
        Backend::Ollama,
    ]
    .into_iter()
    .find(|b| b.as_str() == s)
}

/// `[a-z][a-z0-9-]{0,31}`: a lens's and a family's name.
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn one_line_ok(s: &str) -> bool {
    !s.trim().is_empty() && !s.chars().any(char::is_control)
}

/// Parses and validates a registry; `source` names it in errors and in the result.
pub fn parse(text: &str, source: &str) -> Result<Registry, ConfigError> {
    let file: FileToml = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().trim().to_string();
        ConfigError::Syntax {
            file: source.to_string(),
            line,
            message: match line {
                Some(l) => format!("line {l}: {msg}"),
                None => msg,
            },
        }
    })?;
    let bad =
        |at: String, kind: &'static str, problem: String, remedy: &str| ConfigError::Invalid {
            file: source.to_string(),
            at,
            kind,
            problem,
            remedy: remedy.to_string(),
        };

    // Lenses.
    if file.lens.is_empty() {
        return Err(bad(
            "lenses".into(),
            "no_lenses",
            "the registry has no [[lens]]".into(),
            "declare between one and eight [[lens]] tables (name, charter, tier)",
        ));
    }
    if file.lens.len() > MAX_LENSES {
        return Err(bad(
            "lenses".into(),
            "too_many_lenses",
            format!(
                "{} lenses; a tribunal seats at most {MAX_LENSES}",
                file.lens.len()
            ),
            "remove lenses until eight or fewer remain (a juror asked to check everything checks nothing well)",
        ));
    }
    let mut lenses = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, l) in file.lens.iter().enumerate() {
        let at = format!("lens {} ({})", i + 1, crate::text::one_line(&l.name, 40));
        if !valid_name(&l.name) {
            return Err(bad(
                at,
                "lens_name",
                "the name is not [a-z][a-z0-9-]{0,31}".into(),
                "name the lens in lowercase letters, digits and '-', starting with a letter, at most 32",
            ));
        }
        if !seen.insert(l.name.clone()) {
            return Err(bad(
                at,
                "duplicate_lens",
                format!("the lens `{}` is declared twice", l.name),
                "give each lens a unique name, or remove the second",
            ));
        }
        if !one_line_ok(&l.charter) || l.charter.chars().count() > 300 {
            return Err(bad(
                at,
                "charter",
                "the charter must be one non-empty line of at most 300 characters".into(),
                "say in one line what this juror checks, and only that",
            ));
        }
        let Some(tier) = parse_tier(&l.tier) else {
            return Err(bad(
                at,
                "unknown_tier",
                format!(
                    "the tier `{}` is not one of {}",
                    crate::text::one_line(&l.tier, 40),
                    tier_names()
                ),
                "give one of the four tiers",
            ));
        };
        lenses.push(Lens {
            name: l.name.clone(),
            charter: l.charter.trim().to_string(),
            tier,
        });
    }

    // Ladders.
    let mut ladders = Vec::new();
    for name in file.ladder.keys() {
        if parse_tier(name).is_none() {
            return Err(bad(
                format!("ladder {}", crate::text::one_line(name, 40)),
                "unknown_ladder",
                format!(
                    "`[[ladder.{name}]]` is not a tier's ladder ({})",
                    tier_names()
                ),
                "name each ladder after a tier (the verifier's is `[[verifier]]`)",
            ));
        }
    }
    for tier in Tier::ALL {
        let used = lenses.iter().any(|l| l.tier == tier);
        match file.ladder.get(tier.as_str()) {
            Some(rungs) => ladders.push(Ladder {
                tier,
                rungs: check_ladder(source, tier.as_str(), rungs)?,
            }),
            None if used => {
                return Err(bad(
                    format!("ladder {}", tier.as_str()),
                    "missing_ladder",
                    format!(
                        "a lens has the tier {} but there is no [[ladder.{}]]",
                        tier.as_str(),
                        tier.as_str()
                    ),
                    "declare the tier's ladder (at least three cloud rungs without context_tokens, then a local rung)",
                ));
            }
            None => {}
        }
    }
    let needs_verifier = lenses.iter().any(|l| l.tier == Tier::FastStructural);
    let verifier = if file.verifier.is_empty() && !needs_verifier {
        Vec::new()
    } else if file.verifier.is_empty() {
        return Err(bad(
            VERIFIER.into(),
            "missing_ladder",
            "a fast-structural lens needs a [[verifier]] ladder (its local verdict passes only with a verifier of another family)".into(),
            "declare the [[verifier]] ladder",
        ));
    } else {
        check_ladder(source, VERIFIER, &file.verifier)?
    };
    Ok(Registry {
        source: source.to_string(),
        lenses,
        ladders,
        verifier,
    })
}

fn tier_names() -> String {
    Tier::ALL.map(Tier::as_str).join(", ")
}

fn check_ladder(source: &str, ladder: &str, rungs: &[RungToml]) -> Result<Vec<Rung>, ConfigError> {
    let at_ladder = if ladder == VERIFIER {
        VERIFIER.to_string()
    } else {
        format!("ladder {ladder}")
    };
    let bad =
        |at: String, kind: &'static str, problem: String, remedy: &str| ConfigError::Invalid {
            file: source.to_string(),
            at,
            kind,
            problem,
            remedy: remedy.to_string(),
        };
    if rungs.is_empty() {
        return Err(bad(
            at_ladder,
            "empty_ladder",
            "the ladder has no rung".into(),
            "give it at least three cloud rungs without context_tokens, then a local rung",
        ));
    }
    let mut out = Vec::new();
    for (i, r) in rungs.iter().enumerate() {
        let at = format!("{at_ladder} rung {}", i + 1);
        out.push(check_rung(source, &at, r)?);
    }
    // The local tail: the trailing local rungs.
    let tail = out.iter().rev().take_while(|r| r.local).count();
    if tail == 0 {
        return Err(bad(
            at_ladder,
            "no_local_tail",
            format!(
                "the last rung ({} {}) is not local; every ladder ends on a local survival rung",
                out.last().map(|r| r.backend.as_str()).unwrap_or(""),
                crate::text::one_line(out.last().map(|r| r.model.as_str()).unwrap_or(""), 60)
            ),
            "end the ladder on an Ollama rung (or an OpenAI-compatible server on this machine with local = true)",
        ));
    }
    let head = &out[..out.len() - tail];
    let carriers = head
        .iter()
        .filter(|r| !r.local && r.context_tokens.is_none())
        .count();
    if carriers < FLOOR {
        return Err(bad(
            at_ladder,
            "floor",
            format!(
                "{carriers} rung(s) without context_tokens before the local tail; a ladder needs at least {FLOOR} (two cloud rungs are not a floor: a wrong lens and a cancellation must never hold a lens)"
            ),
            "add cloud rungs (of other families) without context_tokens before the local tail",
        ));
    }
    Ok(out)
}

fn check_rung(source: &str, at: &str, r: &RungToml) -> Result<Rung, ConfigError> {
    let bad = |kind: &'static str, problem: String, remedy: &str| ConfigError::Invalid {
        file: source.to_string(),
        at: at.to_string(),
        kind,
        problem,
        remedy: remedy.to_string(),
    };
    let Some(backend) = parse_backend(&r.backend) else {
        // Unknown backends are a shape problem, named like one.
        return Err(bad(
            "unknown_backend",
            format!(
                "the backend `{}` is not one of claude, codex, gemini, openai, ollama",
                crate::text::one_line(&r.backend, 40)
            ),
            "give one of the five backends (the set is closed, like the provider profiles)",
        ));
    };
    if !one_line_ok(&r.model) || r.model.len() > 200 || r.model.contains(char::is_whitespace) {
        return Err(bad(
            "model",
            "the model id must be one word of at most 200 bytes, without spaces or control characters".into(),
            "give the model id as the backend names it",
        ));
    }
    if !valid_name(&r.family) {
        return Err(bad(
            "family_name",
            format!(
                "the family `{}` is not [a-z][a-z0-9-]{{0,31}}",
                crate::text::one_line(&r.family, 40)
            ),
            "give the vendor's family in lowercase (anthropic, openai, google, xai, meta, alibaba, mistral, deepseek, …)",
        ));
    }
    if let Some(family) = backend.cli_family()
        && r.family != family
    {
        return Err(bad(
            "family_mismatch",
            format!(
                "a {} rung is the vendor {family}'s CLI, but the rung says family `{}`; same vendor = same family",
                backend.as_str(),
                r.family
            ),
            &format!("set family = \"{family}\""),
        ));
    }
    let local = match (backend, r.local) {
        (Backend::Ollama, Some(false)) => {
            return Err(bad(
                "ollama_local",
                "an Ollama rung is always local; `local = false` is not possible".into(),
                "remove `local = false` (use an openai rung for a remote server)",
            ));
        }
        (Backend::Ollama, _) => true,
        (b, Some(true)) if b.is_cli() => {
            return Err(bad(
                "cli_local",
                format!(
                    "a {} rung is the vendor's cloud behind its CLI; it cannot be local",
                    b.as_str()
                ),
                "remove `local = true` (a local survival rung is Ollama, or an OpenAI-compatible server on this machine)",
            ));
        }
        (_, l) => l.unwrap_or(false),
    };
    if backend.is_cli() {
        if r.base_url.is_some() {
            return Err(bad(
                "cli_base_url",
                format!(
                    "a {} rung has no base_url (the CLI reaches its vendor itself)",
                    backend.as_str()
                ),
                "remove base_url, or use an openai rung",
            ));
        }
        if r.key.is_some() {
            return Err(bad(
                "cli_key",
                format!(
                    "a {} rung has no key (it uses the login of its account home)",
                    backend.as_str()
                ),
                "remove key; name a provider profile with `profile` to use another account",
            ));
        }
    } else if r.profile.is_some() {
        return Err(bad(
            "http_profile",
            "an HTTP rung has no provider profile".into(),
            "remove profile (an HTTP rung's account is its key)",
        ));
    }
    let base_url = match (&r.base_url, backend.is_cli()) {
        (None, false) => {
            return Err(bad(
                "base_url_missing",
                format!("a {} rung needs a base_url", backend.as_str()),
                if backend == Backend::Ollama {
                    "add base_url = \"http://127.0.0.1:11434\" (Ollama's default)"
                } else {
                    "add the server's base URL, e.g. base_url = \"https://api.openai.com/v1\""
                },
            ));
        }
        (Some(u), false) => {
            let ok = (u.starts_with("http://") || u.starts_with("https://"))
                && u.len() <= 500
                && !u.chars().any(|c| c.is_control() || c.is_whitespace());
            if !ok {
                return Err(bad(
                    "base_url",
                    format!(
                        "the base_url `{}` is not an http:// or https:// URL",
                        crate::text::one_line(u, 80)
                    ),
                    "give the server's URL, starting with http:// or https://",
                ));
            }
            Some(u.trim_end_matches('/').to_string())
        }
        _ => None,
    };
    let key = match &r.key {
        None => None,
        Some(k) => Some(match (k.kind.as_str(), &k.name, &k.path) {
            ("env", Some(name), None)
                if !name.is_empty()
                    && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                    && !name.as_bytes()[0].is_ascii_digit() =>
            {
                KeySource::Env { name: name.clone() }
            }
            ("file", None, Some(p)) if p.starts_with('/') && !p.contains(char::is_control) => {
                KeySource::File { path: p.clone() }
            }
            _ => {
                return Err(bad(
                    "key",
                    "the key must be {kind = \"env\", name = \"VARIABLE\"} or {kind = \"file\", path = \"/absolute/path\"}".into(),
                    "name where the key comes from (never the key itself)",
                ));
            }
        }),
    };
    if let Some(p) = &r.profile
        && crate::providers::profile::validate_name(p).is_err()
    {
        return Err(bad(
            "profile_name",
            format!(
                "`{}` is not a provider profile's name",
                crate::text::one_line(p, 40)
            ),
            "give the name of a profile from `proctor profile list`",
        ));
    }
    let timeout_secs = r.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(1..=MAX_TIMEOUT_SECS).contains(&timeout_secs) {
        return Err(bad(
            "timeout_bounds",
            format!("timeout_secs = {timeout_secs} is outside 1..={MAX_TIMEOUT_SECS}"),
            "give a ceiling in seconds between 1 and 3600 (the default is 600)",
        ));
    }
    if r.context_tokens == Some(0) {
        return Err(bad(
            "context_tokens",
            "context_tokens = 0 holds nothing".into(),
            "give the model's context in tokens, or leave it out when the model carries the whole artefact",
        ));
    }
    Ok(Rung {
        backend,
        model: r.model.clone(),
        family: r.family.clone(),
        context_tokens: r.context_tokens,
        base_url,
        key,
        local,
        timeout_secs,
        profile: r.profile.clone(),
    })
}

// ---- families ---------------------------------------------------------------------------

/// Well-known model-id prefixes and their vendor's family. A prefix matches when the id
/// starts with it and the next character is not a letter (`o3-mini`, `llama3.1`, `gpt-5`;
/// not `olmo`, `phind`).
const PREFIXES: &[(&str, &str)] = &[
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("text-davinci", "openai"),
    ("gemini", "google"),
    ("gemma", "google"),
    ("codegemma", "google"),
    ("palm", "google"),
    ("grok", "xai"),
    ("llama", "meta"),
    ("codellama", "meta"),
    ("qwen", "alibaba"),
    ("qwq", "alibaba"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("codestral", "mistral"),
    ("devstral", "mistral"),
    ("magistral", "mistral"),
    ("ministral", "mistral"),
    ("pixtral", "mistral"),
    ("deepseek", "deepseek"),
    ("phi", "microsoft"),
    ("command", "cohere"),
    ("aya", "cohere"),
    ("kimi", "moonshot"),
    ("moonshot", "moonshot"),
    ("glm", "zhipu"),
    ("nemotron", "nvidia"),
    ("granite", "ibm"),
];

/// Families known by name even when no rung of the registry names them.
const KNOWN_FAMILIES: &[&str] = &[
    "anthropic",
    "openai",
    "google",
    "xai",
    "meta",
    "alibaba",
    "mistral",
    "deepseek",
    "microsoft",
    "cohere",
    "moonshot",
    "zhipu",
    "nvidia",
    "ibm",
];

fn prefix_family(id: &str) -> Option<&'static str> {
    PREFIXES.iter().find_map(|(p, fam)| {
        let rest = id.strip_prefix(p)?;
        match rest.chars().next() {
            None => Some(*fam),
            Some(c) if !c.is_ascii_alphabetic() => Some(*fam),
            _ => None,
        }
    })
}

/// The family of `--builder`: a family's name, a model id of any rung of the registry, or
/// a model id with a well-known vendor prefix (`vendor/` and `vendor.` prefixes of routed
/// ids, such as `anthropic/claude-…` or `meta-llama/Llama-3…`, are read through). An
/// unknown builder is an error: what cannot be named cannot be excluded.
pub fn builder_families(reg: &Registry, builder: &str) -> Result<String, ConfigError> {
    let b = builder.trim().to_ascii_lowercase();
    let unknown = || ConfigError::UnknownBuilder {
        builder: crate::text::one_line(builder, 80),
        families: {
            let mut f: BTreeSet<String> = reg.families().into_iter().collect();
            f.extend(KNOWN_FAMILIES.iter().map(|s| s.to_string()));
            f.into_iter().collect::<Vec<_>>().join(", ")
        },
    };
    if b.is_empty() {
        return Err(unknown());
    }
    let families = reg.families();
    if families.contains(&b) || KNOWN_FAMILIES.contains(&b.as_str()) {
        return Ok(b);
    }
    if let Some(r) = reg
        .ladders
        .iter()
        .flat_map(|l| l.rungs.iter())
        .chain(reg.verifier.iter())
        .find(|r| r.model.to_ascii_lowercase() == b)
    {
        return Ok(r.family.clone());
    }
    // `vendor/model` (routers), `vendor.model` (Bedrock: `anthropic.claude-…`).
    let mut candidates = vec![b.as_str()];
    if let Some((org, rest)) = b.rsplit_once('/') {
        candidates.push(rest);
        candidates.push(org.rsplit('/').next().unwrap_or(org));
    }
    for c in candidates.clone() {
        if let Some((org, rest)) = c.split_once('.')
            && KNOWN_FAMILIES.contains(&org)
        {
            candidates.push(rest);
        }
    }
    for c in &candidates {
        if let Some(f) = prefix_family(c) {
            return Ok(f.to_string());
        }
        if KNOWN_FAMILIES.contains(c) || families.iter().any(|f| f == c) {
            return Ok(c.to_string());
        }
        // `meta-llama`, `mistralai`, `google-…`: an organisation named after its family.
        if let Some(f) = KNOWN_FAMILIES
            .iter()
            .find(|f| c.starts_with(**f) && c.len() > f.len())
            && b.contains('/')
            && *c != b.as_str()
        {
            return Ok(f.to_string());
        }
    }
    Err(unknown())
}

/// The family of a provider tool (the tool a candidate's run was made with).
pub fn family_of_tool(tool: &str) -> Option<&'static str> {
    match tool {
        "claude" => Some("anthropic"),
        "codex" => Some("openai"),
        "gemini" => Some("google"),
        "grok" => Some("xai"),
        _ => None,
    }
}

// ---- the default registry ---------------------------------------------------------------

const DEFAULT_TEXT: &str = r#"# proctor's tribunal registry: config/tribunal.toml (copy this file there to edit it).
# Seed 001: up to eight jurors, one lens each, seated by tier on a ladder of rungs; the
# builder's family is refused on every ladder, so every ladder holds several families.
#
# [[lens]]: name ([a-z][a-z0-9-]{0,31}, unique), charter (one line: what this juror checks,
# and only that), tier (deep-state, fast-structural, operator-security, generalist).
#
# [[ladder.<tier>]] and [[verifier]]: rungs in order, tried top to bottom.
#   backend        claude | codex | gemini (the vendor's CLI, headless and read-only, under
#                  the login of its account home, or of `profile`), openai (an OpenAI-
#                  compatible /v1/chat/completions), ollama (Ollama's native /api/chat)
#   model          the model id as the backend names it
#   family         the vendor, lowercase; same vendor = same family (a CLI's is fixed:
#                  claude = anthropic, codex = openai, gemini = google)
#   context_tokens a declared context limit; leave it out when the model carries the
#                  whole artefact (a prompt larger than it is refused before sending)
#   base_url       HTTP rungs: the server's base URL
#   key            HTTP rungs: {kind = "env", name = "VAR"} or {kind = "file", path = "/…"}
#                  (the key itself is never written here, never printed)
#   local          a local survival rung (Ollama always is)
#   timeout_secs   the most one convocation may take, 1..=3600 (default 600)
#   profile        CLI rungs: the provider profile whose account home the juror runs under
#
# Every ladder holds at least three rungs without context_tokens (not local) before its
# local tail, and ends on a local rung.

[[lens]]
name = "defect"
charter = "Find code that does not do what the intent and criteria say: wrong results, unhandled errors, edge cases, broken invariants."
tier = "deep-state"

[[lens]]
name = "contract"
charter = "Check every signature, type, format and documented promise the change touches against the criteria and its callers in the envelope."
tier = "fast-structural"

[[lens]]
name = "state"
charter = "Follow every piece of state the change reads or writes across files: lifecycle, persistence, partial writes, recovery after a crash."
tier = "deep-state"

[[lens]]
name = "concurrency"
charter = "Look for races, lost updates, deadlocks, ordering assumptions and shared state without its lock, across every interleaving."
tier = "deep-state"

[[lens]]
name = "security"
charter = "Find what an attacker controls and where it reaches: injection, path traversal, secrets, permissions, trust boundaries."
tier = "operator-security"

[[lens]]
name = "tests"
charter = "Check that each criterion has a test that asserts the real effect and would fail if the change were reverted."
tier = "fast-structural"

[[lens]]
name = "operator-safety"
charter = "Check what the operator sees and can do: destructive actions without consent, unclear errors, lost work, untrusted text printed raw."
tier = "operator-security"

[[lens]]
name = "generalist"
charter = "Read the change as a careful senior reviewer would and refuse anything that should not ship, whatever its kind."
tier = "generalist"

# deep-state: the largest context and the deepest reasoning, through harnesses that read
# (never write): the three vendors' CLIs first, then cloud HTTP of two more families.
[[ladder.deep-state]]
backend = "claude"
model = "claude-opus-4-1"
family = "anthropic"
timeout_secs = 1200

[[ladder.deep-state]]
backend = "codex"
model = "gpt-5-codex"
family = "openai"
timeout_secs = 1200

[[ladder.deep-state]]
backend = "gemini"
model = "gemini-2.5-pro"
family = "google"
timeout_secs = 1200

[[ladder.deep-state]]
backend = "openai"
model = "grok-4"
family = "xai"
base_url = "https://api.x.ai/v1"
key = {kind = "env", name = "XAI_API_KEY"}

[[ladder.deep-state]]
backend = "openai"
model = "deepseek-chat"
family = "deepseek"
base_url = "https://api.deepseek.com/v1"
key = {kind = "env", name = "DEEPSEEK_API_KEY"}

[[ladder.deep-state]]
backend = "ollama"
model = "qwen2.5-coder:32b"
family = "alibaba"
base_url = "http://127.0.0.1:11434"

# fast-structural: a free local GPU first (Ollama sizes num_ctx on the prompt and refuses
# what does not fit), then low-latency cloud models; a local verdict passes only with a
# verifier of another family (see [[verifier]]).
[[ladder.fast-structural]]
backend = "ollama"
model = "qwen2.5-coder:32b"
family = "alibaba"
base_url = "http://127.0.0.1:11434"

[[ladder.fast-structural]]
backend = "openai"
model = "gemini-2.5-flash"
family = "google"
base_url = "https://generativelanguage.googleapis.com/v1beta/openai"
key = {kind = "env", name = "GEMINI_API_KEY"}

[[ladder.fast-structural]]
backend = "openai"
model = "gpt-5.1"
family = "openai"
base_url = "https://api.openai.com/v1"
key = {kind = "env", name = "OPENAI_API_KEY"}

[[ladder.fast-structural]]
backend = "openai"
model = "mistral-medium-latest"
family = "mistral"
base_url = "https://api.mistral.ai/v1"
key = {kind = "env", name = "MISTRAL_API_KEY"}

[[ladder.fast-structural]]
backend = "openai"
model = "deepseek-chat"
family = "deepseek"
base_url = "https://api.deepseek.com/v1"
key = {kind = "env", name = "DEEPSEEK_API_KEY"}

[[ladder.fast-structural]]
backend = "ollama"
model = "llama3.1:8b"
family = "meta"
base_url = "http://127.0.0.1:11434"

# operator-security: the strongest coders, anchored on security.
[[ladder.operator-security]]
backend = "codex"
model = "gpt-5-codex"
family = "openai"
timeout_secs = 1200

[[ladder.operator-security]]
backend = "claude"
model = "claude-opus-4-1"
family = "anthropic"
timeout_secs = 1200

[[ladder.operator-security]]
backend = "gemini"
model = "gemini-2.5-pro"
family = "google"
timeout_secs = 1200

[[ladder.operator-security]]
backend = "openai"
model = "grok-4"
family = "xai"
base_url = "https://api.x.ai/v1"
key = {kind = "env", name = "XAI_API_KEY"}

[[ladder.operator-security]]
backend = "ollama"
model = "qwen2.5-coder:32b"
family = "alibaba"
base_url = "http://127.0.0.1:11434"

# generalist: a large, reliable generalist.
[[ladder.generalist]]
backend = "gemini"
model = "gemini-2.5-pro"
family = "google"

[[ladder.generalist]]
backend = "claude"
model = "claude-sonnet-4-5"
family = "anthropic"

[[ladder.generalist]]
backend = "openai"
model = "gpt-5.1"
family = "openai"
base_url = "https://api.openai.com/v1"
key = {kind = "env", name = "OPENAI_API_KEY"}

[[ladder.generalist]]
backend = "openai"
model = "deepseek-chat"
family = "deepseek"
base_url = "https://api.deepseek.com/v1"
key = {kind = "env", name = "DEEPSEEK_API_KEY"}

[[ladder.generalist]]
backend = "ollama"
model = "llama3.3:70b"
family = "meta"
base_url = "http://127.0.0.1:11434"

# verifier: cheap cloud models that judge the same prompt as a fast-structural lens's
# local seat; never of the seat's family (the round skips it), with a third family in
# plain HTTP behind the first two.
[[verifier]]
backend = "openai"
model = "gemini-2.5-flash"
family = "google"
base_url = "https://generativelanguage.googleapis.com/v1beta/openai"
key = {kind = "env", name = "GEMINI_API_KEY"}

[[verifier]]
backend = "openai"
model = "mistral-small-latest"
family = "mistral"
base_url = "https://api.mistral.ai/v1"
key = {kind = "env", name = "MISTRAL_API_KEY"}

[[verifier]]
backend = "openai"
model = "deepseek-chat"
family = "deepseek"
base_url = "https://api.deepseek.com/v1"
key = {kind = "env", name = "DEEPSEEK_API_KEY"}

[[verifier]]
backend = "openai"
model = "gpt-5.1"
family = "openai"
base_url = "https://api.openai.com/v1"
key = {kind = "env", name = "OPENAI_API_KEY"}

[[verifier]]
backend = "ollama"
model = "llama3.1:8b"
family = "meta"
base_url = "http://127.0.0.1:11434"
"#;

#[cfg(test)]
mod tests;
