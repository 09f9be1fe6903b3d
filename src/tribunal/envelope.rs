//! The blind envelope (issue 14 §3, seed 001 "L'enveloppe"): the one text every juror of a
//! round judges. Built from the candidate's CURRENT bytes, never from a diff:
//!
//! - every file the change touches (the candidate identity's `files`): added, modified and
//!   type-changed files whole, as they are now; deleted files named, no content; binary
//!   files (a NUL byte, or not UTF-8) named with size and SHA-256, content omitted; a
//!   symbolic link as its target's text; a folder (a submodule) named;
//! - their test files: files of the candidate's tree that match the test patterns (the
//!   policy's, or [`DEFAULT_TEST_PATTERNS`]) and whose subject is a touched file's (see
//!   [`related_tests`]);
//! - the review contract: the one-line intent and the criteria text;
//! - and nothing else: no diff, no commit message, no path of the worktree, no branch, no
//!   author.
//!
//! The candidate must be current ([`candidate::currency`]), and every byte put in the
//! envelope is checked against the inventory recomputed now, whose digest must be the bound
//! one: what the jurors read is exactly the bound bytes, else the build is `stale`.
//!
//! Each part is framed by a fence derived from the whole content (a SHA-256 over every
//! part, re-derived until no part contains it) and carries its body's length in bytes: a
//! file cannot forge another file's header, because it cannot know the fence it will get,
//! and the reader ([`parse`]) takes exactly `body=N` bytes anyway.
//!
//! Leak detection fails the build hard (`leak`), naming what leaked, the file and the line:
//! the [`Forbidden`] strings (case-insensitive, word-bounded; a string ending in `*` is a
//! word prefix, the builder's model ids), author trailers (`Signed-off-by:`,
//! `Co-authored-by:`, any `…-by:`, `Author:`, `authors =` on a line with an email address),
//! in the files' text, their paths and the contract.
//!
//! See `docs/tribunal.md`, "The envelope".

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::LazyLock;

use sha2::{Digest, Sha256};

use crate::digest::EntryKind;
use crate::evidence::candidate::{self, Candidate, Currency};
use crate::git::{Git, GitError};
use crate::tribunal::model::{ENVELOPE_RECIPE, EnvelopeFile, EnvelopeRef, Lens};

/// The first line of every envelope.
pub const ENVELOPE_FORMAT: &str = "proctor-tribunal-envelope/1";
/// The test files when the policy names none (the policy's rule and list).
pub use crate::workspaces::policy::DEFAULT_TEST_PATTERNS;
/// The largest text file an envelope carries whole (a binary one is named at any size).
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The largest envelope.
pub const MAX_TOTAL_BYTES: u64 = 4 << 20;
/// `repository_authors` reads at most this many commits.
pub const AUTHOR_COMMITS: usize = 2000;
/// … and returns at most this many names and addresses.
pub const MAX_AUTHORS: usize = 256;
/// A forbidden string with fewer letters and digits than this is not searched: it would
/// match everywhere (see the docs' residuals).
pub const MIN_FORBIDDEN_CHARS: usize = 3;
/// The leaks an error lists (the count says how many there were).
pub const MAX_LEAKS_LISTED: usize = 20;
/// How many leading bytes decide whether a file is binary (a NUL among them), as git does.
const SNIFF_BYTES: usize = 8000;

/// The review contract: what the change is for, and what success is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    /// One line (`--intent`).
    pub intent: String,
    /// The success criteria (`--criteria FILE`'s text).
    pub criteria: String,
}

/// Strings that must not reach a juror: `(what, the string)`. The builder as given, its
/// family, the builder's model-id prefixes (`claude*`), the run's tool and profile names, the
/// run's conversation id, the repository's commit authors, anything the round adds.
/// Case-insensitive and word-bounded (letters and digits are word characters); a string
/// ending in `*` matches any word that starts with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forbidden {
    pub strings: Vec<(String, String)>,
}

impl Forbidden {
    /// The builder as given (`builder`), its family (`builder family`) and the well-known
    /// model-id prefixes of that family (`builder model id`).
    pub fn for_builder(builder: &str, family: &str) -> Forbidden {
        let mut f = Forbidden::default();
        f.add("builder", builder);
        f.add("builder family", family);
        for p in model_id_prefixes(family) {
            f.add("builder model id", p);
        }
        f
    }

    /// Adds one string (empty ones are ignored).
    pub fn add(&mut self, what: &str, string: &str) {
        let s = string.trim();
        if !s.is_empty() && !self.strings.iter().any(|(_, x)| x.eq_ignore_ascii_case(s)) {
            self.strings.push((what.to_string(), s.to_string()));
        }
    }

    /// Adds what [`repository_authors`] returned: addresses as `commit author email`, names
    /// as `commit author name`.
    pub fn add_authors(&mut self, authors: &[String]) {
        for a in authors {
            let what = if a.contains('@') {
                "commit author email"
            } else {
                "commit author name"
            };
            self.add(what, a);
        }
    }
}

/// The model-id prefixes of a family's well-known models (a `*` pattern each).
pub fn model_id_prefixes(family: &str) -> &'static [&'static str] {
    match family.to_ascii_lowercase().as_str() {
        "anthropic" => &["claude*"],
        "openai" => &["gpt-*", "chatgpt*", "o1-*", "o3-*", "o4-*", "codex-*"],
        "google" => &["gemini*", "gemma*"],
        "xai" => &["grok*"],
        "meta" => &["llama*"],
        "alibaba" => &["qwen*", "qwq*"],
        "mistral" => &[
            "mistral*",
            "mixtral*",
            "codestral*",
            "devstral*",
            "magistral*",
        ],
        "deepseek" => &["deepseek*"],
        _ => &[],
    }
}

/// The envelope: its exact text (what `envelope.txt` holds) and its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub text: String,
    pub reference: EnvelopeRef,
}

/// One leak: what it is (`builder family`, `author trailer`, …), the text found, and where
/// (`file` a path, or `intent` / `criteria`; `line` 1-based, 0 for the path itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub what: String,
    pub found: String,
    pub file: String,
    pub line: usize,
}

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(
                f,
                "{} {:?} in the path {}",
                self.what, self.found, self.file
            )
        } else {
            write!(
                f,
                "{} {:?} in {} line {}",
                self.what, self.found, self.file, self.line
            )
        }
    }
}

fn leak_message(leaks: &[Leak], total: usize) -> String {
    let list: Vec<String> = leaks.iter().map(|l| l.to_string()).collect();
    let more = if total > leaks.len() {
        format!(" (and {} more)", total - leaks.len())
    } else {
        String::new()
    };
    format!(
        "the envelope would carry author traces, so no juror may see it: {}{more}. Remedy: \
         remove them from the candidate's files (or the contract) and bind the run again; \
         a tribunal never judges without the blind",
        list.join("; ")
    )
}

#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the review contract is refused: {problem}. Remedy: {remedy}")]
    BadContract {
        problem: String,
        remedy: &'static str,
    },
    #[error(
        "the test pattern {pattern:?} is not a valid glob ({detail}). Remedy: fix the \
         workspace policy's [tribunal] tests"
    )]
    BadPattern { pattern: String, detail: String },
    #[error(
        "candidate {candidate} is stale: {detail}. Remedy: bind the run again (proctor \
         candidate bind --run {run}) and convene on the new candidate"
    )]
    Stale {
        candidate: String,
        run: String,
        detail: String,
    },
    #[error(
        "{path} is {bytes} bytes, over the envelope's limit of {limit} bytes per text file. \
         Remedy: split the file or the change; a juror must see every touched file whole"
    )]
    FileTooLarge {
        path: String,
        bytes: u64,
        limit: u64,
    },
    #[error(
        "the envelope would be {bytes} bytes, over its limit of {limit} (largest: {largest}). \
         Remedy: split the change into smaller candidates"
    )]
    TotalTooLarge {
        bytes: u64,
        limit: u64,
        largest: String,
    },
    #[error("{}", leak_message(.leaks, *.total))]
    Leak { leaks: Vec<Leak>, total: usize },
    #[error("cannot read {path} of the candidate's worktree: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{0}")]
    Git(#[from] GitError),
}

impl EnvelopeError {
    /// A stable code for the API (`error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            EnvelopeError::BadContract { .. } => "bad_contract",
            EnvelopeError::BadPattern { .. } => "bad_pattern",
            EnvelopeError::Stale { .. } => "stale",
            EnvelopeError::FileTooLarge { .. } | EnvelopeError::TotalTooLarge { .. } => "too_large",
            EnvelopeError::Leak { .. } => "leak",
            EnvelopeError::Io { .. } | EnvelopeError::Git(_) => "internal",
        }
    }
}

/// What a part of the envelope carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The whole text (a file's, or a link's target).
    Text(String),
    /// Named with size and hash; content omitted.
    Binary,
    /// Named only.
    Deleted,
    /// A folder (a submodule): named only.
    Folder,
}

/// One file of the envelope, before layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub path: String,
    /// `changed`, `test` or `deleted` (the reference's role).
    pub role: String,
    /// `added`, `modified`, `deleted`, `type_changed`, or `unchanged` (a test file).
    pub change: String,
    /// `file`, `executable`, `symlink`, `folder`; empty when deleted.
    pub kind: String,
    pub bytes: u64,
    pub sha256: String,
    pub body: Body,
}

/// An envelope read back ([`parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub fence: String,
    pub intent: String,
    pub criteria: String,
    pub files: Vec<ParsedFile>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFile {
    pub path: String,
    pub role: String,
    pub change: String,
    /// The header line whole.
    pub header: String,
    pub body: String,
}

/// Test patterns: the policy's rule, one for the engine and the envelope
/// (`workspaces::policy::is_test_path`: `tests/` a folder at any depth, `*_test.rs` a file's
/// name, anything else the whole path; `*`, `**`, `?`).
pub struct Patterns {
    list: Vec<String>,
}

impl Patterns {
    /// `patterns`, or the policy's [`DEFAULT_TEST_PATTERNS`] when empty.
    pub fn new(patterns: &[String]) -> Result<Patterns, EnvelopeError> {
        let list: Vec<String> = if patterns.is_empty() {
            DEFAULT_TEST_PATTERNS
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            patterns.to_vec()
        };
        if let Some(bad) = list
            .iter()
            .find(|p| !crate::workspaces::policy::valid_pattern(p))
        {
            return Err(EnvelopeError::BadPattern {
                pattern: bad.clone(),
                detail: "a pattern is a relative path pattern: not empty, not absolute, no `.`, `..` or empty segment".into(),
            });
        }
        Ok(Patterns { list })
    }

    pub fn is_test(&self, path: &str) -> bool {
        crate::workspaces::policy::is_test_path(&self.list, path)
    }
}

/// Names that say nothing about which module a file is (`mod.rs`, `tests/`, `src/`): a file
/// so named takes its folder's name as its subject.
const GENERIC: &[&str] = &[
    "",
    "test",
    "tests",
    "spec",
    "specs",
    "__tests__",
    "mod",
    "index",
    "__init__",
    "lib",
    "main",
    "src",
    "source",
    "sources",
    "app",
    "pkg",
    "internal",
    "cmd",
    "common",
    "util",
    "utils",
    "helpers",
    "support",
    "fixtures",
];

fn normalise(s: &str) -> String {
    s.to_lowercase().replace('-', "_")
}

fn is_generic(s: &str) -> bool {
    GENERIC.contains(&s)
}

/// The subject of a path: its file name without the last extension and without test
/// affixes (`test_`, `_test`, `.test`, `.spec`, `Test`, …), lowercase, `-` as `_`; a name
/// that says nothing (`tests.rs`, `mod.rs`, `index.ts`) takes its nearest folder's name
/// that does. `None` when none does.
pub fn subject(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop()?;
    let stem = match name.rfind('.') {
        Some(0) | None => name,
        Some(i) => &name[..i],
    };
    let mut s = stem;
    for suf in [
        ".test", ".spec", "_tests", "_test", "-tests", "-test", "_spec", "Tests", "Test",
    ] {
        if let Some(x) = s.strip_suffix(suf)
            && !x.is_empty()
        {
            s = x;
            break;
        }
    }
    for pre in ["test_", "tests_", "test-"] {
        if let Some(x) = s.strip_prefix(pre)
            && !x.is_empty()
        {
            s = x;
            break;
        }
    }
    let s = normalise(s);
    if !is_generic(&s) {
        return Some(s);
    }
    while let Some(dir) = parts.pop() {
        let d = normalise(dir);
        if !is_generic(&d) {
            return Some(d);
        }
    }
    None
}

/// What a touched file relates to: its subject, and its folder's name when that folder is
/// not at the top of the tree and not generic (`src/tribunal/envelope.rs`: `envelope`,
/// `tribunal`).
fn keys_of(path: &str) -> Vec<String> {
    let mut k = Vec::new();
    if let Some(s) = subject(path) {
        k.push(s);
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() >= 3 {
        let d = normalise(parts[parts.len() - 2]);
        if !is_generic(&d) && !k.contains(&d) {
            k.push(d);
        }
    }
    k
}

/// The test files of `tree` (paths, any order) that relate to the `changed` paths: they
/// match the patterns, are not themselves changed, and their [`subject`] is one of a changed
/// file's keys (its subject, or its folder's name when that folder is neither top-level nor
/// generic). In ordinal order.
pub fn related_tests(changed: &[&str], tree: &[&str], patterns: &Patterns) -> Vec<String> {
    let keys: BTreeSet<String> = changed.iter().flat_map(|p| keys_of(p)).collect();
    let changed: BTreeSet<&str> = changed.iter().copied().collect();
    let mut out: Vec<String> = tree
        .iter()
        .filter(|p| !changed.contains(**p) && patterns.is_test(p))
        .filter(|p| subject(p).is_some_and(|s| keys.contains(&s)))
        .map(|p| p.to_string())
        .collect();
    out.sort_by(|a, b| crate::digest::ordinal_cmp(a, b));
    out.dedup();
    out
}

fn sha_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The fence for these parts: `@@envelope-` and 32 hex digits of a SHA-256 over every part
/// (length-prefixed), with a counter bumped until no part contains it.
fn fence_for(contract: &Contract, items: &[Item]) -> String {
    let mut h = Sha256::new();
    let mut feed = |b: &[u8]| {
        h.update((b.len() as u64).to_be_bytes());
        h.update(b);
    };
    feed(contract.intent.as_bytes());
    feed(contract.criteria.as_bytes());
    for it in items {
        feed(it.path.as_bytes());
        if let Body::Text(t) = &it.body {
            feed(t.as_bytes());
        }
    }
    let seed = h.finalize();
    let texts: Vec<&str> = std::iter::once(contract.intent.as_str())
        .chain(std::iter::once(contract.criteria.as_str()))
        .chain(items.iter().filter_map(|i| match &i.body {
            Body::Text(t) => Some(t.as_str()),
            _ => None,
        }))
        .chain(items.iter().map(|i| i.path.as_str()))
        .collect();
    let mut n: u64 = 0;
    loop {
        let mut h = Sha256::new();
        h.update(seed);
        h.update(n.to_be_bytes());
        let f = format!("@@envelope-{}", &hex::encode(h.finalize())[..32]);
        if !texts.iter().any(|t| t.contains(&f)) {
            return f;
        }
        n += 1;
    }
}

/// The envelope's text for these parts, in the order given. See `docs/tribunal.md` for the
/// layout; [`parse`] reads it back.
pub fn layout(contract: &Contract, items: &[Item]) -> String {
    let fence = fence_for(contract, items);
    let total: usize = items
        .iter()
        .map(|i| match &i.body {
            Body::Text(t) => t.len() + i.path.len() + 200,
            _ => i.path.len() + 200,
        })
        .sum();
    let mut out = String::with_capacity(total + contract.criteria.len() + 1200);
    out.push_str(ENVELOPE_FORMAT);
    out.push('\n');
    out.push_str("fence: ");
    out.push_str(&fence);
    out.push('\n');
    out.push_str(
        "This envelope is everything there is to judge: the review contract, then the whole \
         current text of every file the change touches and of their test files. Each part \
         opens with a line that starts with the fence above and ends with `body=N`; exactly N \
         bytes of the part follow, then a line feed and the line `<fence> END`. Anything \
         between belongs to the part, even when it looks like a header. Binary files are \
         named with size and SHA-256, their content omitted; deleted files are named only.\n",
    );
    let part = |out: &mut String, header: &str, body: &str| {
        out.push_str(&fence);
        out.push(' ');
        out.push_str(header);
        out.push_str(&format!(" body={}\n", body.len()));
        out.push_str(body);
        out.push('\n');
        out.push_str(&fence);
        out.push_str(" END\n");
    };
    out.push_str("\n# The review contract\n");
    part(&mut out, "INTENT", &contract.intent);
    part(&mut out, "CRITERIA", &contract.criteria);
    out.push_str(&format!("\n# Files ({})\n", items.len()));
    let n = items.len();
    for (i, it) in items.iter().enumerate() {
        let path = serde_json::to_string(&it.path).unwrap_or_default();
        let mut h = format!("FILE {}/{n} role={} change={}", i + 1, it.role, it.change);
        let body = match &it.body {
            Body::Text(t) => {
                h.push_str(&format!(
                    " kind={} bytes={} sha256={}",
                    it.kind, it.bytes, it.sha256
                ));
                t.as_str()
            }
            Body::Binary => {
                h.push_str(&format!(
                    " kind={} bytes={} sha256={} content=omitted-binary",
                    it.kind, it.bytes, it.sha256
                ));
                ""
            }
            Body::Folder => {
                h.push_str(" kind=folder content=omitted-folder");
                ""
            }
            Body::Deleted => {
                h.push_str(" content=none-deleted");
                ""
            }
        };
        // The path last: a JSON string to the end of the line (no raw line feed).
        out.push_str(&fence);
        out.push(' ');
        out.push_str(&format!("{h} body={} path={path}\n", body.len()));
        out.push_str(body);
        out.push('\n');
        out.push_str(&fence);
        out.push_str(" END\n");
    }
    out.push_str(&fence);
    out.push_str(" END ENVELOPE\n");
    out
}

fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pre = format!(" {key}=");
    let at = header.find(&pre)? + pre.len();
    let rest = &header[at..];
    Some(rest.split(' ').next().unwrap_or(""))
}

/// Reads an envelope back by its framing: the fence from its second line, each part by its
/// `body=N`. Fails naming what does not fit.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut lines = text.splitn(3, '\n');
    if lines.next() != Some(ENVELOPE_FORMAT) {
        return Err(format!("the first line is not {ENVELOPE_FORMAT}"));
    }
    let fence = lines
        .next()
        .and_then(|l| l.strip_prefix("fence: "))
        .ok_or("the second line is not `fence: …`")?
        .to_string();
    let open = format!("\n{fence} ");
    let mut at = text.find(&open).ok_or("no part opens with the fence")? + 1;
    let mut parts: Vec<(String, String)> = Vec::new();
    loop {
        let line_end = text[at..]
            .find('\n')
            .map(|i| at + i)
            .ok_or("a header without a line feed")?;
        let line = &text[at..line_end];
        let rest = line
            .strip_prefix(&fence)
            .and_then(|l| l.strip_prefix(' '))
            .ok_or_else(|| format!("expected a part at byte {at}"))?;
        if rest == "END ENVELOPE" {
            if line_end + 1 != text.len() {
                return Err("bytes after END ENVELOPE".into());
            }
            break;
        }
        let n: usize = field(line, "body")
            .ok_or_else(|| format!("a header without body=: {line}"))?
            .parse()
            .map_err(|_| format!("a bad body= in {line}"))?;
        let start = line_end + 1;
        let end = start
            .checked_add(n)
            .filter(|e| *e <= text.len() && text.is_char_boundary(*e))
            .ok_or_else(|| format!("a body runs past the end: {line}"))?;
        let close = format!("\n{fence} END\n");
        if !text[end..].starts_with(&close) {
            return Err(format!("a part is not closed by its END: {line}"));
        }
        parts.push((rest.to_string(), text[start..end].to_string()));
        at = end + close.len();
        // Skip the section headings between parts (lines that do not start with the fence).
        while at < text.len() && !text[at..].starts_with(&format!("{fence} ")) {
            let nl = text[at..].find('\n').ok_or("a stray line at the end")?;
            at += nl + 1;
        }
        if at >= text.len() {
            return Err("no END ENVELOPE".into());
        }
    }
    let mut it = parts.into_iter();
    let (h, intent) = it.next().ok_or("no INTENT")?;
    if !h.starts_with("INTENT ") {
        return Err("the first part is not INTENT".into());
    }
    let (h, criteria) = it.next().ok_or("no CRITERIA")?;
    if !h.starts_with("CRITERIA ") {
        return Err("the second part is not CRITERIA".into());
    }
    let mut files = Vec::new();
    for (h, body) in it {
        if !h.starts_with("FILE ") {
            return Err(format!("not a FILE part: {h}"));
        }
        let header = format!("{fence} {h}");
        let path_at = h.find(" path=").ok_or("a FILE without path=")? + " path=".len();
        let path: String =
            serde_json::from_str(&h[path_at..]).map_err(|e| format!("a bad path in {h}: {e}"))?;
        files.push(ParsedFile {
            path,
            role: field(&header, "role").unwrap_or("").to_string(),
            change: field(&header, "change").unwrap_or("").to_string(),
            header,
            body,
        });
    }
    Ok(Parsed {
        fence,
        intent,
        criteria,
        files,
    })
}

static EMAIL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+").expect("email")
});
static TRAILER: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"(?i)\b([a-z]+(-[a-z]+)*-by\s*:|authors?\s*[:=])").expect("trailer")
});

struct Needle {
    what: String,
    lower: String,
    prefix: bool,
}

fn needles(forbidden: &Forbidden) -> Vec<Needle> {
    forbidden
        .strings
        .iter()
        .filter_map(|(what, s)| {
            let (s, prefix) = match s.strip_suffix('*') {
                Some(p) => (p, true),
                None => (s.as_str(), false),
            };
            let lower = s.to_lowercase();
            (lower.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_FORBIDDEN_CHARS).then(
                || Needle {
                    what: what.clone(),
                    lower,
                    prefix,
                },
            )
        })
        .collect()
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric()
}

/// The leaks of one line (`file`, `line` to name it).
fn scan_line(text: &str, needles: &[Needle], file: &str, line: usize, out: &mut Vec<Leak>) {
    let lower = text.to_lowercase();
    for n in needles {
        let mut from = 0;
        while let Some(i) = lower[from..].find(&n.lower) {
            let s = from + i;
            let e = s + n.lower.len();
            from = s + n.lower.len().max(1);
            let before_ok = lower[..s].chars().next_back().is_none_or(|c| !word_char(c));
            if !before_ok {
                continue;
            }
            if n.prefix {
                let tail: usize = lower[e..]
                    .char_indices()
                    .find(|(_, c)| !(c.is_alphanumeric() || matches!(c, '-' | '.' | '_')))
                    .map(|(i, _)| i)
                    .unwrap_or(lower.len() - e);
                let word = lower[s..e + tail].trim_end_matches(['.', '-', '_']);
                out.push(Leak {
                    what: n.what.clone(),
                    found: word.to_string(),
                    file: file.to_string(),
                    line,
                });
                break;
            }
            if lower[e..].chars().next().is_none_or(|c| !word_char(c)) {
                out.push(Leak {
                    what: n.what.clone(),
                    found: n.lower.clone(),
                    file: file.to_string(),
                    line,
                });
                break;
            }
        }
    }
    if let Some(m) = TRAILER.find(text)
        && EMAIL.is_match(text)
    {
        out.push(Leak {
            what: "author trailer".to_string(),
            found: m.as_str().trim().to_string(),
            file: file.to_string(),
            line,
        });
    }
}

fn scan_text(text: &str, needles: &[Needle], file: &str, out: &mut Vec<Leak>) {
    for (i, l) in text.split('\n').enumerate() {
        scan_line(l, needles, file, i + 1, out);
    }
}

/// Every leak in the contract and the parts (their paths and text), in order: the intent,
/// the criteria, then each file (its path, then its lines).
pub fn scan(contract: &Contract, items: &[Item], forbidden: &Forbidden) -> Vec<Leak> {
    let needles = needles(forbidden);
    let mut out = Vec::new();
    scan_text(&contract.intent, &needles, "intent", &mut out);
    scan_text(&contract.criteria, &needles, "criteria", &mut out);
    for it in items {
        scan_line(&it.path, &needles, &it.path, 0, &mut out);
        if let Body::Text(t) = &it.body {
            scan_text(t, &needles, &it.path, &mut out);
        }
    }
    out
}

fn check_contract(c: &Contract) -> Result<(), EnvelopeError> {
    let bad = |problem: &str, remedy: &'static str| {
        Err(EnvelopeError::BadContract {
            problem: problem.to_string(),
            remedy,
        })
    };
    if c.intent.trim().is_empty() {
        return bad(
            "the intent is empty",
            "pass --intent with one line saying what the change is for",
        );
    }
    if c.intent.contains(['\n', '\r']) {
        return bad(
            "the intent is more than one line",
            "pass --intent with one line; put the rest in the criteria file",
        );
    }
    if c.criteria.trim().is_empty() {
        return bad(
            "the criteria are empty",
            "pass --criteria FILE with the success criteria a juror judges against",
        );
    }
    Ok(())
}

fn stale(cand: &Candidate, detail: impl Into<String>) -> EnvelopeError {
    EnvelopeError::Stale {
        candidate: cand.id.clone(),
        run: cand.run_ref.clone(),
        detail: detail.into(),
    }
}

/// Opens `rel` under `root` without following a final symbolic link and without blocking on
/// a FIFO swapped in; refuses anything but a regular file.
fn open_file(root: &Path, rel: &str) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(root.join(rel))?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// Reads one file of the worktree for the envelope, checked against the inventory's entry.
fn read_item(
    cand: &Candidate,
    root: &Path,
    path: &str,
    role: &str,
    change: &str,
    entry: Option<&crate::digest::Entry>,
) -> Result<Item, EnvelopeError> {
    let entry = entry.ok_or_else(|| stale(cand, format!("{path} is not in the worktree now")))?;
    let want = hex::encode(entry.sha256);
    let kind = match entry.kind {
        EntryKind::File => "file",
        EntryKind::Executable => "executable",
        EntryKind::Symlink => "symlink",
        EntryKind::Folder => "folder",
    };
    let mut item = Item {
        path: path.to_string(),
        role: role.to_string(),
        change: change.to_string(),
        kind: kind.to_string(),
        bytes: entry.bytes,
        sha256: want.clone(),
        body: Body::Folder,
    };
    let io = |err: std::io::Error| match err.kind() {
        std::io::ErrorKind::NotFound => stale(cand, format!("{path} vanished while it was read")),
        _ if err.raw_os_error() == Some(libc::ELOOP) => stale(
            cand,
            format!("{path} became a symbolic link while it was read"),
        ),
        _ => EnvelopeError::Io {
            path: path.to_string(),
            err,
        },
    };
    let bytes = match entry.kind {
        EntryKind::Folder => return Ok(item),
        EntryKind::Symlink => {
            use std::os::unix::ffi::OsStrExt;
            let t = std::fs::read_link(root.join(path)).map_err(io)?;
            t.as_os_str().as_bytes().to_vec()
        }
        EntryKind::File | EntryKind::Executable => {
            let mut f = open_file(root, path).map_err(io)?;
            let mut head = vec![0u8; SNIFF_BYTES];
            let mut got = 0;
            while got < head.len() {
                match f.read(&mut head[got..]).map_err(io)? {
                    0 => break,
                    n => got += n,
                }
            }
            head.truncate(got);
            if head.contains(&0) {
                item.body = Body::Binary;
                return Ok(item);
            }
            if entry.bytes > MAX_FILE_BYTES {
                return Err(EnvelopeError::FileTooLarge {
                    path: path.to_string(),
                    bytes: entry.bytes,
                    limit: MAX_FILE_BYTES,
                });
            }
            let mut rest = Vec::new();
            (&mut f)
                .take(MAX_FILE_BYTES + 1 - head.len() as u64)
                .read_to_end(&mut rest)
                .map_err(io)?;
            head.extend_from_slice(&rest);
            head
        }
    };
    if sha_hex(&bytes) != want || bytes.len() as u64 != entry.bytes {
        return Err(stale(
            cand,
            format!("{path} is not the bytes the inventory holds (it changed while read)"),
        ));
    }
    item.body = match String::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => Body::Text(t),
        _ => Body::Binary,
    };
    Ok(item)
}

/// The blob paths of a tree (`git ls-tree -r -z`), submodules and folders left out.
fn tree_files(repo: &str, tree: &str) -> Result<Vec<String>, GitError> {
    let out = Git::new(repo).run(&["ls-tree", "-r", "-z", "--full-tree", tree])?;
    Ok(out
        .split(|b| *b == 0)
        .filter_map(|rec| {
            let rec = std::str::from_utf8(rec).ok()?;
            let (meta, path) = rec.split_once('\t')?;
            meta.split(' ').nth(1).filter(|t| *t == "blob")?;
            Some(path.to_string())
        })
        .collect())
}

/// Builds the envelope of `cand` now (see the module's rules). `tests`: the policy's test
/// patterns; [`DEFAULT_TEST_PATTERNS`] when empty.
pub fn build(
    cand: &Candidate,
    contract: &Contract,
    forbidden: &Forbidden,
    tests: &[String],
) -> Result<Envelope, EnvelopeError> {
    check_contract(contract)?;
    let patterns = Patterns::new(tests)?;
    match candidate::currency(cand) {
        Currency::Current => {}
        Currency::Changed { .. } => {
            return Err(stale(
                cand,
                "the worktree's bytes are no longer the bound ones (its identity changed)",
            ));
        }
        Currency::Unavailable { code, detail } => {
            return Err(stale(
                cand,
                format!("its identity cannot be computed now ({code}: {detail})"),
            ));
        }
    }
    let root = Path::new(&cand.worktree);
    let (inv, entries) = candidate::inventory(root)
        .map_err(|e| stale(cand, format!("the worktree cannot be read now: {e}")))?;
    if inv.digest != cand.identity.inventory.digest {
        return Err(stale(
            cand,
            "the worktree's inventory is no longer the bound one",
        ));
    }
    let by_path: BTreeMap<&str, &crate::digest::Entry> =
        entries.iter().map(|e| (e.path.as_str(), e)).collect();

    let changed: Vec<&str> = cand
        .identity
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    let tree = tree_files(&cand.repo, &cand.identity.worktree_tree)?;
    let tree_refs: Vec<&str> = tree.iter().map(String::as_str).collect();
    let tests = related_tests(&changed, &tree_refs, &patterns);

    let mut items = Vec::new();
    for f in &cand.identity.files {
        if f.change == "deleted" {
            items.push(Item {
                path: f.path.clone(),
                role: "deleted".into(),
                change: "deleted".into(),
                kind: String::new(),
                bytes: 0,
                sha256: String::new(),
                body: Body::Deleted,
            });
            continue;
        }
        let item = read_item(
            cand,
            root,
            &f.path,
            "changed",
            &f.change,
            by_path.get(f.path.as_str()).copied(),
        )?;
        if f.sha256.as_deref().is_some_and(|s| s != item.sha256) {
            return Err(stale(
                cand,
                format!("{} is not the bytes the candidate bound", f.path),
            ));
        }
        items.push(item);
    }
    for t in &tests {
        items.push(read_item(
            cand,
            root,
            t,
            "test",
            "unchanged",
            by_path.get(t.as_str()).copied(),
        )?);
    }

    let body_bytes: u64 = items
        .iter()
        .map(|i| match &i.body {
            Body::Text(t) => t.len() as u64,
            _ => 0,
        })
        .sum::<u64>()
        + contract.criteria.len() as u64;
    if body_bytes > MAX_TOTAL_BYTES {
        let mut big: Vec<(&str, u64)> = items
            .iter()
            .filter_map(|i| match &i.body {
                Body::Text(t) => Some((i.path.as_str(), t.len() as u64)),
                _ => None,
            })
            .collect();
        big.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let largest: Vec<String> = big
            .iter()
            .take(3)
            .map(|(p, b)| format!("{p} {b} bytes"))
            .collect();
        return Err(EnvelopeError::TotalTooLarge {
            bytes: body_bytes,
            limit: MAX_TOTAL_BYTES,
            largest: largest.join(", "),
        });
    }

    let leaks = scan(contract, &items, forbidden);
    if !leaks.is_empty() {
        let total = leaks.len();
        return Err(EnvelopeError::Leak {
            leaks: leaks.into_iter().take(MAX_LEAKS_LISTED).collect(),
            total,
        });
    }

    let text = layout(contract, &items);
    let reference = EnvelopeRef {
        recipe: ENVELOPE_RECIPE.to_string(),
        digest: sha_hex(text.as_bytes()),
        bytes: text.len() as u64,
        tokens: estimate_tokens(&text),
        files: items
            .iter()
            .map(|i| EnvelopeFile {
                path: i.path.clone(),
                role: i.role.clone(),
                bytes: i.bytes,
                sha256: i.sha256.clone(),
            })
            .collect(),
        file: "envelope.txt".to_string(),
    };
    Ok(Envelope { text, reference })
}

/// The prompt for one seat: the lens and its charter, "judge only this lens", the envelope
/// whole, and the protocol foot naming the lens literally. The foot's shape line is the
/// prompt's last `"lens": "` (the fakes read the lens there).
pub fn render(envelope: &Envelope, lens: &Lens, run_id: &str) -> String {
    let name = serde_json::to_string(&lens.name).unwrap_or_default();
    let mut p = String::with_capacity(envelope.text.len() + 2000);
    p.push_str(&format!(
        "You are one juror of a blind review tribunal. You judge one lens, and only that \
         lens.\n\nLens: {}\nCharter: {}\n\nJudge only this lens: other lenses are judged by \
         other jurors, so report nothing outside this charter. You see no repository, no \
         author and no history: the envelope below is everything, and it holds the current \
         text of the files, not a diff. Judge what the files do against the review \
         contract; a finding names the file and the line it rests on.\n\n",
        lens.name, lens.charter
    ));
    p.push_str("=== envelope ===\n");
    p.push_str(&envelope.text);
    p.push_str("=== end of envelope ===\n\n");
    p.push_str(&format!(
        "Protocol (run_id {run_id}).\nAnswer with exactly one JSON object and nothing else: \
         no prose, no code fence. Each finding is an object with \"severity\" (one of \
         blocker, major, minor, info), \"claim\" and \"evidence\" (the file and line it rests \
         on). A pass that lists a blocker or major finding counts as refuse. A solid pass \
         names what it checked, as info findings with evidence. Your answer is for the lens \
         {}, in this shape:\n",
        lens.name
    ));
    p.push_str(&format!(
        "{{\"verdict\": \"pass\" | \"refuse\", \"lens\": {name}, \"findings\": [...]}}\n"
    ));
    p
}

/// A conservative estimate of the tokens of `text`: its bytes divided by 3, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(3)
}

/// The names and email addresses of the authors and committers of `repo`'s history (HEAD's,
/// at most [`AUTHOR_COMMITS`] commits, at most [`MAX_AUTHORS`] strings, each once, in order
/// of first appearance). Empty when git cannot read it.
pub fn repository_authors(repo: &str) -> Vec<String> {
    authors_at(repo, "HEAD")
}

/// [`repository_authors`] from `rev` (the candidate's base commit).
pub fn authors_at(repo: &str, rev: &str) -> Vec<String> {
    let n = format!("--max-count={AUTHOR_COMMITS}");
    let Ok(out) = Git::new(repo).run(&[
        "log",
        &n,
        "--no-show-signature",
        "--format=%an%x00%ae%x00%cn%x00%ce",
        rev,
        "--",
    ]) else {
        return Vec::new();
    };
    let mut seen = BTreeSet::new();
    let mut list = Vec::new();
    for line in String::from_utf8_lossy(&out).lines() {
        for s in line.split('\0') {
            let s = s.trim();
            if !s.is_empty() && seen.insert(s.to_lowercase()) {
                list.push(s.to_string());
                if list.len() == MAX_AUTHORS {
                    return list;
                }
            }
        }
    }
    list
}

#[cfg(test)]
mod tests;
