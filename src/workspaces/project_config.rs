//! Agent configuration that a repository carries (seed 002, "Configuration d'agent que porte
//! un dépôt"): the files Claude Code, Codex and Gemini CLI read from a folder, and in them the
//! keys that can run a program or redirect traffic.
//!
//! [`scan`] reads exactly the files of [`FILES`], never follows a symbolic link, never
//! executes anything, and collects only the listed keys. A file that exists but cannot be
//! read in its format (invalid JSON or TOML, over 1 MiB, nested deeper than 64 levels, not a
//! regular file, a symbolic link on its path) is flagged as a whole. Nesting is counted on
//! the raw text before any parser sees it ([`json_depth`], [`toml_depth`]), so a nesting bomb
//! costs one linear pass and no recursion.
//!
//! [`scan_commit`] runs the same scan over the files as committed at a commit (a worktree
//! started from another commit carries them), without checking anything out.
//!
//! The flagged part has its own SHA-256 (recipe [`RECIPE`], see [`canonical_document`]);
//! displayed values have URL passwords masked (the hash covers the real values).

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::providers::Tool;

mod commit;
pub use commit::{CommitScanError, MAX_COMMIT_BLOB_BYTES, scan_commit};

/// The recipe of a scan's `sha256`: SHA-256 of the canonical document of the flagged part
/// (see [`canonical_document`]).
pub const RECIPE: &str = "project-config-flagged-sha256/1";
/// The `format` member of that document.
pub const DOCUMENT_FORMAT: &str = "proctor-project-config-flagged/1";
/// A larger file is flagged as a whole (and hashed in full on each check).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A file nested deeper than this is flagged as a whole.
pub const MAX_DEPTH: usize = 64;

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Claude Code `settings.json` / `settings.local.json`.
    ClaudeSettings,
    /// Claude Code `.mcp.json`.
    McpJson,
    /// Codex `config.toml`.
    CodexToml,
    /// Gemini CLI `settings.json` (JSON with comments, as Gemini CLI strips them).
    GeminiSettings,
    /// A dotenv file.
    DotEnv,
}

/// One scanned file: its path inside the folder, the tool that reads it, its format.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub path: &'static str,
    pub tool: Tool,
    pub format: Format,
}

/// Exactly the files of the seed's table, in the order of the canonical document.
pub const FILES: [Known; 7] = [
    Known {
        path: ".claude/settings.json",
        tool: Tool::Claude,
        format: Format::ClaudeSettings,
    },
    Known {
        path: ".claude/settings.local.json",
        tool: Tool::Claude,
        format: Format::ClaudeSettings,
    },
    Known {
        path: ".mcp.json",
        tool: Tool::Claude,
        format: Format::McpJson,
    },
    Known {
        path: ".codex/config.toml",
        tool: Tool::Codex,
        format: Format::CodexToml,
    },
    Known {
        path: ".gemini/settings.json",
        tool: Tool::Gemini,
        format: Format::GeminiSettings,
    },
    Known {
        path: ".gemini/.env",
        tool: Tool::Gemini,
        format: Format::DotEnv,
    },
    Known {
        path: ".env",
        tool: Tool::Gemini,
        format: Format::DotEnv,
    },
];

/// Claude Code settings keys that are flagged when not empty (`env` is handled per entry).
pub const CLAUDE_KEYS: [&str; 12] = [
    "hooks",
    "apiKeyHelper",
    "statusLine",
    "mcpServers",
    "enableAllProjectMcpServers",
    "enabledMcpjsonServers",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "fileSuggestion",
    "enabledPlugins",
    "extraKnownMarketplaces",
];

/// Codex keys flagged at the top level and under `profiles.<name>` (plus `*_base_url` and
/// the listed `shell_environment_policy.set` entries).
pub const CODEX_KEYS: [&str; 5] = ["hooks", "notify", "mcp_servers", "model_providers", "otel"];

/// Gemini CLI settings keys, as paths.
pub const GEMINI_KEYS: [&[&str]; 9] = [
    &["hooks"],
    &["mcpServers"],
    &["toolDiscoveryCommand"],
    &["toolCallCommand"],
    &["proxy"],
    &["tools", "discoveryCommand"],
    &["tools", "callCommand"],
    &["mcp", "serverCommand"],
    &["telemetry", "otlpEndpoint"],
];

/// Environment names flagged by exact name.
pub const ENV_NAMES: [&str; 15] = [
    "NODE_OPTIONS",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "BASH_ENV",
    "PATH",
    "PYTHONPATH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "SSL_CERT_FILE",
    "CLAUDE_CODE_SHELL_PREFIX",
    "ANTHROPIC_CUSTOM_HEADERS",
];

/// True for an environment name of the seed's last line: the exact names, `AWS_ENDPOINT_URL*`,
/// and any name ending in `_BASE_URL`, `_API_BASE`, `_ENDPOINT` or `_PROXY` except `NO_PROXY`.
/// The prefix and suffixes are matched without regard to case (`https_proxy` redirects curl
/// and git as `HTTPS_PROXY` does); the exact names are matched exactly.
pub fn is_flagged_env_name(name: &str) -> bool {
    if ENV_NAMES.contains(&name) {
        return true;
    }
    let up = name.to_ascii_uppercase();
    if up == "NO_PROXY" {
        return false;
    }
    up.starts_with("AWS_ENDPOINT_URL")
        || ["_BASE_URL", "_API_BASE", "_ENDPOINT", "_PROXY"]
            .iter()
            .any(|s| up.ends_with(s))
}

/// `{}`, `[]`, `""`, `false` and `null` configure nothing and are not flagged.
pub fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

/// One flagged key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    /// The key's path for display: segments joined by `.`, a segment that is not a bare
    /// key (`[A-Za-z0-9_-]+`) written as a JSON string.
    pub key: String,
    /// The key's path, segment by segment.
    pub path: Vec<String>,
    /// The value with URL passwords masked (`https://user:***@host`).
    pub value: Value,
    /// The real value (the hash covers it); never serialised.
    #[serde(skip)]
    pub raw: Value,
}

/// Why a whole file is flagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// `invalid_json`, `invalid_toml`, `invalid_utf8`, `not_an_object`, `too_large`,
    /// `too_deep`, `symlink`, `not_regular`, `io_error`.
    pub code: &'static str,
    /// A sentence.
    pub reason: String,
    /// SHA-256 of the whole file (of the link's target text for a symbolic link; of
    /// nothing for a file that is not regular or cannot be opened).
    pub sha256: String,
    /// The file's size when it was read.
    pub bytes: Option<u64>,
}

/// One file of [`FILES`] that exists in the folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileReport {
    pub path: &'static str,
    /// The tool that reads it.
    pub tool: &'static str,
    /// True when it has flagged keys or cannot be read in its format.
    pub flagged: bool,
    /// The flagged keys (empty when the file is unreadable).
    pub keys: Vec<Flag>,
    pub unreadable: Option<Unreadable>,
    #[serde(skip)]
    tool_id: Option<Tool>,
}

impl FileReport {
    /// The tool that reads this file.
    pub fn reader(&self) -> Option<Tool> {
        self.tool_id
    }
}

/// The result of a scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scan {
    /// The folder scanned (for [`scan_commit`], the repository).
    pub folder: PathBuf,
    /// For [`scan_commit`]: the full commit id whose files were scanned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Every file of [`FILES`] that exists, flagged or not, in table order.
    pub files: Vec<FileReport>,
    /// SHA-256 of the canonical document of the flagged part.
    pub sha256: String,
    pub recipe: &'static str,
}

impl Scan {
    /// The flagged files `tool` reads (none for grok and opencode).
    pub fn flagged_for(&self, tool: Tool) -> impl Iterator<Item = &FileReport> {
        self.files
            .iter()
            .filter(move |f| f.flagged && f.tool_id == Some(tool))
    }

    /// True when any file is flagged.
    pub fn any_flagged(&self) -> bool {
        self.files.iter().any(|f| f.flagged)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot open the folder {path}: {err}")]
    Folder { path: PathBuf, err: std::io::Error },
}

// ---------------------------------------------------------------------------------------------
// Reading files without following links
// ---------------------------------------------------------------------------------------------

enum Opened {
    Absent,
    Symlink { at: String, target: Vec<u8> },
    NotRegular { kind: &'static str },
    Failed(std::io::Error),
    Content(Vec<u8>),
    TooLarge { bytes: u64, sha256: String },
}

fn cstr(s: &str) -> CString {
    // Names come from FILES: no NUL.
    CString::new(s).unwrap_or_default()
}

fn openat(dir: &OwnedFd, name: &str, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = cstr(name);
    // SAFETY: a valid fd and a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn lstat_at(dir: &OwnedFd, name: &str) -> Option<libc::stat> {
    let c = cstr(name);
    // SAFETY: zeroed stat is a valid out-buffer; the result is checked.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (r == 0).then_some(st)
}

fn readlink_at(dir: &OwnedFd, name: &str) -> Vec<u8> {
    let c = cstr(name);
    let mut buf = vec![0u8; 4096];
    // SAFETY: the buffer is writable for its length; the result is checked.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Vec::new();
    }
    buf.truncate(n as usize);
    buf
}

fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a folder",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        _ => "not a regular file",
    }
}

/// Opens `rel` (a path of [`FILES`]) under `root` without following any symbolic link.
fn open_known(root: &OwnedFd, rel: &str) -> Opened {
    let parts: Vec<&str> = rel.split('/').collect();
    let (last, dirs) = match parts.split_last() {
        Some(x) => x,
        None => return Opened::Absent,
    };
    let mut cur: Option<OwnedFd> = None;
    for (i, d) in dirs.iter().enumerate() {
        let parent = cur.as_ref().unwrap_or(root);
        match openat(
            parent,
            d,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        ) {
            Ok(fd) => cur = Some(fd),
            Err(e) => {
                return match lstat_at(parent, d) {
                    None => Opened::Absent,
                    Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Opened::Symlink {
                        at: dirs[..=i].join("/"),
                        target: readlink_at(parent, d),
                    },
                    // A file where a folder is expected: the tool finds nothing inside.
                    Some(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => Opened::Absent,
                    Some(_) => Opened::Failed(e),
                };
            }
        }
    }
    let parent = cur.as_ref().unwrap_or(root);
    let fd = match openat(
        parent,
        last,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
    ) {
        Ok(fd) => fd,
        Err(e) => {
            return match lstat_at(parent, last) {
                None if e.kind() == std::io::ErrorKind::NotFound => Opened::Absent,
                Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Opened::Symlink {
                    at: rel.to_string(),
                    target: readlink_at(parent, last),
                },
                Some(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => Opened::NotRegular {
                    kind: kind_of(st.st_mode),
                },
                _ => Opened::Failed(e),
            };
        }
    };
    let mut file = File::from(fd);
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return Opened::Failed(e),
    };
    if !meta.is_file() {
        use std::os::unix::fs::MetadataExt;
        return Opened::NotRegular {
            kind: kind_of(meta.mode() as libc::mode_t),
        };
    }
    let mut buf = Vec::with_capacity(meta.len().min(MAX_FILE_BYTES + 1) as usize);
    if let Err(e) = (&mut file).take(MAX_FILE_BYTES + 1).read_to_end(&mut buf) {
        return Opened::Failed(e);
    }
    if buf.len() as u64 <= MAX_FILE_BYTES {
        return Opened::Content(buf);
    }
    // Too large: hashed in full, every time.
    let mut h = Sha256::new();
    h.update(&buf);
    let mut total = buf.len() as u64;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&chunk[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Opened::Failed(e),
        }
    }
    Opened::TooLarge {
        bytes: total,
        sha256: hex::encode(h.finalize()),
    }
}

// ---------------------------------------------------------------------------------------------
// Nesting, counted on the raw text
// ---------------------------------------------------------------------------------------------

/// Why a text's nesting could not be established.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DepthError {
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("{0}")]
    Malformed(String),
}

/// The bracket nesting of a JSON text (`{}` and `[]` outside strings; the outermost counts
/// one). Stops at the first level past [`MAX_DEPTH`]. Brackets that do not balance are left
/// to the parser, which refuses them.
pub fn json_depth(bytes: &[u8]) -> Result<usize, DepthError> {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(DepthError::TooDeep);
                }
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(max)
}

/// JSON with `//` and `/* */` comments (as Gemini CLI accepts): comments outside strings
/// become spaces, so positions and line numbers stay.
pub fn strip_json_comments(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let (mut i, mut in_str, mut esc) = (0usize, false, false);
    while i < out.len() {
        let b = out[i];
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match (b, out.get(i + 1).copied()) {
            (b'"', _) => {
                in_str = true;
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < out.len() && out[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 2;
                while i < out.len() && !(out[i] == b'*' && out.get(i + 1) == Some(&b'/')) {
                    if out[i] != b'\n' {
                        out[i] = b' ';
                    }
                    i += 1;
                }
                if i < out.len() {
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 2;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The nesting of a TOML text as seed 002 counts it: each segment of a dotted key or of a
/// table header is one level (a table), added to the brackets around it (inline tables and
/// arrays); once the file has any `[[array]]` header, header segments count double (each
/// may name an array and its element). A key's last segment adds nothing of its own: its
/// value's brackets count. So `[a.b]` then `k = {x = {}}` is 2 + 2 = 4 levels, and a
/// 30-segment header over 35 nested inline tables is 65.
///
/// One linear pass with no recursion; it stops as soon as the count passes [`MAX_DEPTH`].
/// A text it cannot follow is [`DepthError::Malformed`] (and would be refused by a parser).
pub fn toml_depth(bytes: &[u8]) -> Result<usize, DepthError> {
    TomlDepth { b: bytes, i: 0 }.run()
}

struct TomlDepth<'a> {
    b: &'a [u8],
    i: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    Array(usize),
    Table(usize),
}

impl TomlDepth<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, s: &[u8]) -> bool {
        self.b[self.i..].starts_with(s)
    }

    fn bad(&self, what: &str) -> DepthError {
        let line = self.b[..self.i.min(self.b.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        DepthError::Malformed(format!("line {line}: {what}"))
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_comment(&mut self) {
        if self.peek() == Some(b'#') {
            while !matches!(self.peek(), None | Some(b'\n')) {
                self.i += 1;
            }
        }
    }

    /// Whitespace, newlines and comments (inside arrays and, in TOML 1.1, inline tables).
    fn skip_all(&mut self) {
        loop {
            self.skip_ws();
            self.skip_comment();
            match self.peek() {
                Some(b'\n') => self.i += 1,
                Some(b'\r') if self.b.get(self.i + 1) == Some(&b'\n') => self.i += 2,
                _ => return,
            }
        }
    }

    /// A basic (`"`) or literal (`'`) string, single- or multi-line; `self.i` is on the quote.
    fn string(&mut self) -> Result<(), DepthError> {
        let q = self.b[self.i];
        let triple = [q, q, q];
        if self.at(&triple) {
            self.i += 3;
            loop {
                match self.peek() {
                    None => return Err(self.bad("unterminated multi-line string")),
                    Some(b'\\') if q == b'"' => self.i += 2,
                    Some(_) if self.at(&triple) => {
                        self.i += 3;
                        // Up to two more quotes belong to the content.
                        for _ in 0..2 {
                            if self.peek() == Some(q) {
                                self.i += 1;
                            }
                        }
                        return Ok(());
                    }
                    Some(_) => self.i += 1,
                }
            }
        }
        self.i += 1;
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(self.bad("unterminated string")),
                Some(b'\\') if q == b'"' => self.i += 2,
                Some(c) if c == q => {
                    self.i += 1;
                    return Ok(());
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// A key (`a.b."c"`); returns its number of segments.
    fn key(&mut self) -> Result<usize, DepthError> {
        let mut segs = 0;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"' | b'\'') => self.string()?,
                Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                    while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                    {
                        self.i += 1;
                    }
                }
                _ => return Err(self.bad("a key is expected")),
            }
            segs += 1;
            self.skip_ws();
            if self.peek() == Some(b'.') {
                self.i += 1;
            } else {
                return Ok(segs);
            }
        }
    }

    /// A scalar other than a string: up to a delimiter (a date may be followed by a space
    /// and a time).
    fn scalar(&mut self) -> Result<(), DepthError> {
        let start = self.i;
        let delim = |c: u8| matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' | b'#');
        while matches!(self.peek(), Some(c) if !delim(c)) {
            self.i += 1;
        }
        if self.i == start {
            return Err(self.bad("a value is expected"));
        }
        let tok = &self.b[start..self.i];
        let is_date = tok.len() == 10
            && tok.iter().enumerate().all(|(k, c)| {
                if k == 4 || k == 7 {
                    *c == b'-'
                } else {
                    c.is_ascii_digit()
                }
            });
        if is_date
            && self.peek() == Some(b' ')
            && matches!(self.b.get(self.i + 1), Some(c) if c.is_ascii_digit())
        {
            self.i += 1;
            while matches!(self.peek(), Some(c) if !delim(c)) {
                self.i += 1;
            }
        }
        Ok(())
    }

    /// A value whose container is at local depth `d`; returns the deepest local level seen.
    fn value(&mut self, d: usize, limit: usize) -> Result<usize, DepthError> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut max = d;
        let mut cur = d;
        loop {
            // A value is expected at container depth `cur`.
            match self.peek() {
                Some(b'{') | Some(b'[') => {
                    let open = self.b[self.i];
                    self.i += 1;
                    let depth = cur + 1;
                    if depth > limit {
                        return Err(DepthError::TooDeep);
                    }
                    max = max.max(depth);
                    self.skip_all();
                    if open == b'[' {
                        if self.peek() == Some(b']') {
                            self.i += 1;
                        } else {
                            stack.push(Frame::Array(depth));
                            cur = depth;
                            continue;
                        }
                    } else if self.peek() == Some(b'}') {
                        self.i += 1;
                    } else {
                        stack.push(Frame::Table(depth));
                        cur = self.inline_key(depth, limit, &mut max)?;
                        continue;
                    }
                }
                Some(b'"' | b'\'') => self.string()?,
                Some(_) => self.scalar()?,
                None => return Err(self.bad("a value is expected")),
            }
            // A value ended: close what closes, or find the next value.
            loop {
                let Some(top) = stack.last().copied() else {
                    return Ok(max);
                };
                self.skip_all();
                let (close, depth) = match top {
                    Frame::Array(x) => (b']', x),
                    Frame::Table(x) => (b'}', x),
                };
                match self.peek() {
                    Some(c) if c == close => {
                        self.i += 1;
                        stack.pop();
                    }
                    Some(b',') => {
                        self.i += 1;
                        self.skip_all();
                        if self.peek() == Some(close) {
                            self.i += 1;
                            stack.pop();
                            continue;
                        }
                        cur = match top {
                            Frame::Array(_) => depth,
                            Frame::Table(_) => self.inline_key(depth, limit, &mut max)?,
                        };
                        break;
                    }
                    _ => return Err(self.bad("',' or a closing bracket is expected")),
                }
            }
        }
    }

    /// `key =` inside an inline table at `depth`; returns the depth its value sits at.
    fn inline_key(
        &mut self,
        depth: usize,
        limit: usize,
        max: &mut usize,
    ) -> Result<usize, DepthError> {
        let segs = self.key()?;
        self.skip_ws();
        if self.peek() != Some(b'=') {
            return Err(self.bad("'=' is expected"));
        }
        self.i += 1;
        self.skip_ws();
        let at = depth + segs - 1;
        if at > limit {
            return Err(DepthError::TooDeep);
        }
        *max = (*max).max(at);
        Ok(at)
    }

    fn run(mut self) -> Result<usize, DepthError> {
        // Sections: (header segments, deepest local level under it).
        let mut sections: Vec<(usize, usize)> = vec![(0, 0)];
        let mut arrays = false;
        loop {
            self.skip_all();
            let Some(c) = self.peek() else { break };
            if c == b'[' {
                let double = self.at(b"[[");
                self.i += if double { 2 } else { 1 };
                arrays |= double;
                let segs = self.key()?;
                self.skip_ws();
                let close: &[u8] = if double { b"]]" } else { b"]" };
                if !self.at(close) {
                    return Err(self.bad("a table header is not closed"));
                }
                self.i += close.len();
                if segs > MAX_DEPTH {
                    return Err(DepthError::TooDeep);
                }
                sections.push((segs, 0));
            } else {
                let segs = self.key()?;
                self.skip_ws();
                if self.peek() != Some(b'=') {
                    return Err(self.bad("'=' is expected after a key"));
                }
                self.i += 1;
                self.skip_ws();
                let h = sections.last().map(|s| s.0).unwrap_or(0);
                let limit = MAX_DEPTH.saturating_sub(h);
                if segs - 1 > limit {
                    return Err(DepthError::TooDeep);
                }
                let local = self.value(segs - 1, limit)?;
                if let Some(s) = sections.last_mut() {
                    s.1 = s.1.max(local);
                }
            }
            self.skip_ws();
            self.skip_comment();
            match self.peek() {
                None => break,
                Some(b'\n') => self.i += 1,
                Some(b'\r') if self.b.get(self.i + 1) == Some(&b'\n') => self.i += 2,
                _ => return Err(self.bad("the line continues after its value")),
            }
        }
        let mult = if arrays { 2 } else { 1 };
        let depth = sections
            .iter()
            .map(|(h, local)| h * mult + local)
            .max()
            .unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(DepthError::TooDeep);
        }
        Ok(depth)
    }
}

// ---------------------------------------------------------------------------------------------
// Masking and display
// ---------------------------------------------------------------------------------------------

/// Masks the password of every URL in `s`: `scheme://user:secret@host` → `scheme://user:***@host`.
pub fn mask_url_passwords(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find("://") {
        let (head, tail) = rest.split_at(pos + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                        out.push_str(&authority[at..]);
                    }
                    None => out.push_str(authority),
                }
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A copy of `v` with every string's URL passwords masked.
pub fn mask_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(mask_url_passwords(s)),
        Value::Array(a) => Value::Array(a.iter().map(mask_value).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), mask_value(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

fn display_key(path: &[String]) -> String {
    path.iter()
        .map(|s| {
            if !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                s.clone()
            } else {
                Value::String(s.clone()).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn flag(path: &[&str], raw: &Value) -> Flag {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    Flag {
        key: display_key(&path),
        path,
        value: mask_value(raw),
        raw: raw.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Key extraction
// ---------------------------------------------------------------------------------------------

fn get_path<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object()?.get(*p)?;
    }
    Some(cur)
}

fn push_if_set(out: &mut Vec<Flag>, root: &Value, path: &[&str]) {
    if let Some(v) = get_path(root, path)
        && !is_empty_value(v)
    {
        out.push(flag(path, v));
    }
}

fn env_entries(out: &mut Vec<Flag>, root: &Value, path: &[&str]) {
    if let Some(Value::Object(env)) = get_path(root, path) {
        for (name, v) in env {
            if is_flagged_env_name(name) && !is_empty_value(v) {
                let mut p: Vec<&str> = path.to_vec();
                p.push(name);
                out.push(flag(&p, v));
            }
        }
    }
}

fn claude_flags(root: &Value) -> Vec<Flag> {
    let mut out = Vec::new();
    for k in CLAUDE_KEYS {
        push_if_set(&mut out, root, &[k]);
    }
    env_entries(&mut out, root, &["env"]);
    out
}

fn codex_level(out: &mut Vec<Flag>, root: &Value, prefix: &[&str]) {
    let Some(Value::Object(table)) = get_path(root, prefix) else {
        return;
    };
    let mut p: Vec<&str> = prefix.to_vec();
    for k in CODEX_KEYS {
        p.push(k);
        push_if_set(out, root, &p);
        p.pop();
    }
    for (k, v) in table {
        if k.ends_with("_base_url") && !is_empty_value(v) {
            p.push(k);
            out.push(flag(&p, v));
            p.pop();
        }
    }
    p.extend(["shell_environment_policy", "set"]);
    env_entries(out, root, &p);
}

fn codex_flags(root: &Value) -> Vec<Flag> {
    let mut out = Vec::new();
    codex_level(&mut out, root, &[]);
    if let Some(Value::Object(profiles)) = root.get("profiles") {
        for name in profiles.keys() {
            codex_level(&mut out, root, &["profiles", name]);
        }
    }
    out
}

fn gemini_flags(root: &Value) -> Vec<Flag> {
    let mut out = Vec::new();
    for path in GEMINI_KEYS {
        push_if_set(&mut out, root, path);
    }
    out
}

/// The entries of a dotenv file, as the `dotenv` package reads them: `[export ]NAME=VALUE`
/// or `NAME: VALUE`, values in `'…'`, `"…"` or `` `…` `` (which may span lines), or bare up
/// to a `#` or the end of the line, trimmed. Lines that are none of these are skipped.
pub fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-';
    let eol = |mut j: usize| {
        while j < b.len() && b[j] != b'\n' {
            j += 1;
        }
        (j + 1).min(b.len())
    };
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        if text[i..].starts_with("export")
            && b.get(i + 6).is_some_and(|c| *c == b' ' || *c == b'\t')
        {
            i += 6;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
        }
        let start = i;
        while i < b.len() && is_name(b[i]) {
            i += 1;
        }
        let name = &text[start..i];
        let mut j = i;
        while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
            j += 1;
        }
        let sep = match b.get(j) {
            Some(b'=') => Some(j + 1),
            Some(b':') if i == j && b.get(j + 1).is_some_and(|c| *c == b' ' || *c == b'\t') => {
                Some(j + 1)
            }
            _ => None,
        };
        let (Some(mut k), false) = (sep, name.is_empty()) else {
            i = eol(i);
            continue;
        };
        while k < b.len() && (b[k] == b' ' || b[k] == b'\t') {
            k += 1;
        }
        let mut value = None;
        if let Some(&q) = b.get(k)
            && matches!(q, b'"' | b'\'' | b'`')
        {
            let mut m = k + 1;
            while m < b.len() && !(b[m] == q && b[m - 1] != b'\\') {
                m += 1;
            }
            if m < b.len() {
                value = Some(text[k + 1..m].to_string());
                i = eol(m);
            }
        }
        if value.is_none() {
            let mut m = k;
            while m < b.len() && b[m] != b'#' && b[m] != b'\n' && b[m] != b'\r' {
                m += 1;
            }
            value = Some(text[k..m].trim().to_string());
            i = eol(m);
        }
        out.push((name.to_string(), value.unwrap_or_default()));
    }
    out
}

fn dotenv_flags(text: &str) -> Vec<Flag> {
    // The last assignment of a name wins, as it does for the tool.
    let mut last: Vec<(String, String)> = Vec::new();
    for (name, value) in parse_dotenv(text) {
        last.retain(|(n, _)| *n != name);
        last.push((name, value));
    }
    last.into_iter()
        .filter(|(n, v)| is_flagged_env_name(n) && !v.is_empty())
        .map(|(n, v)| flag(&[n.as_str()], &Value::String(v)))
        .collect()
}

/// A TOML value as JSON: datetimes as their text, non-finite floats as `nan`, `inf`, `-inf`.
/// Recursion is bounded: the text passed [`toml_depth`] first.
fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// The scan
// ---------------------------------------------------------------------------------------------

fn unreadable(code: &'static str, reason: String, bytes: &[u8]) -> Unreadable {
    Unreadable {
        code,
        reason,
        sha256: hex::encode(Sha256::digest(bytes)),
        bytes: Some(bytes.len() as u64),
    }
}

/// Reads a file's content in its format: the flagged keys, or why it is flagged whole.
pub fn examine(format: Format, bytes: &[u8]) -> Result<Vec<Flag>, Unreadable> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(unreadable(
            "invalid_utf8",
            "the file is not valid UTF-8".into(),
            bytes,
        ));
    };
    match format {
        Format::DotEnv => Ok(dotenv_flags(text)),
        Format::CodexToml => {
            if let Err(e) = toml_depth(bytes) {
                return Err(match e {
                    DepthError::TooDeep => unreadable(
                        "too_deep",
                        format!("nested deeper than {MAX_DEPTH} levels"),
                        bytes,
                    ),
                    DepthError::Malformed(m) => {
                        unreadable("invalid_toml", format!("not valid TOML: {m}"), bytes)
                    }
                });
            }
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                unreadable(
                    "invalid_toml",
                    format!("not valid TOML: {}", e.message()),
                    bytes,
                )
            })?;
            Ok(codex_flags(&toml_to_json(&toml::Value::Table(table))))
        }
        Format::ClaudeSettings | Format::McpJson | Format::GeminiSettings => {
            let stripped;
            let json = if format == Format::GeminiSettings {
                stripped = strip_json_comments(bytes);
                &stripped[..]
            } else {
                bytes
            };
            if json_depth(json) == Err(DepthError::TooDeep) {
                return Err(unreadable(
                    "too_deep",
                    format!("nested deeper than {MAX_DEPTH} levels"),
                    bytes,
                ));
            }
            let root: Value = serde_json::from_slice(json)
                .map_err(|e| unreadable("invalid_json", format!("not valid JSON: {e}"), bytes))?;
            if !root.is_object() {
                return Err(unreadable(
                    "not_an_object",
                    "the file is JSON but not an object of settings".into(),
                    bytes,
                ));
            }
            Ok(match format {
                Format::ClaudeSettings => claude_flags(&root),
                Format::McpJson => {
                    let mut out = Vec::new();
                    push_if_set(&mut out, &root, &["mcpServers"]);
                    out
                }
                _ => gemini_flags(&root),
            })
        }
    }
}

/// Scans `folder` for the files of [`FILES`]. Never executes anything, never follows a
/// symbolic link, and reads at most 1 MiB of a file into memory (a larger file is hashed
/// as a stream).
pub fn scan(folder: &Path) -> Result<Scan, ScanError> {
    let c = CString::new(folder.as_os_str().as_bytes()).map_err(|_| ScanError::Folder {
        path: folder.to_path_buf(),
        err: std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in the path"),
    })?;
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(ScanError::Folder {
            path: folder.to_path_buf(),
            err: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let root = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut files = Vec::new();
    for known in FILES {
        let result = match open_known(&root, known.path) {
            Opened::Absent => continue,
            Opened::Content(bytes) => examine(known.format, &bytes),
            Opened::TooLarge { bytes, sha256 } => Err(Unreadable {
                code: "too_large",
                reason: format!("{bytes} bytes, over the {MAX_FILE_BYTES} bytes read"),
                sha256,
                bytes: Some(bytes),
            }),
            Opened::Symlink { at, target } => Err(Unreadable {
                code: "symlink",
                reason: format!(
                    "{} is a symbolic link (to {}); links are not followed",
                    at,
                    String::from_utf8_lossy(&target)
                ),
                sha256: hex::encode(Sha256::digest(&target)),
                bytes: None,
            }),
            Opened::NotRegular { kind } => Err(Unreadable {
                code: "not_regular",
                reason: format!("not a regular file: {kind}"),
                sha256: hex::encode(Sha256::digest(b"")),
                bytes: None,
            }),
            Opened::Failed(e) => Err(Unreadable {
                code: "io_error",
                reason: format!("cannot be read: {e}"),
                sha256: hex::encode(Sha256::digest(b"")),
                bytes: None,
            }),
        };
        let (mut keys, unreadable) = match result {
            Ok(keys) => (keys, None),
            Err(u) => (Vec::new(), Some(u)),
        };
        keys.sort_by(|a, b| a.path.cmp(&b.path));
        files.push(FileReport {
            path: known.path,
            tool: known.tool.name(),
            flagged: unreadable.is_some() || !keys.is_empty(),
            keys,
            unreadable,
            tool_id: Some(known.tool),
        });
    }
    let doc = canonical_document(&files);
    Ok(Scan {
        folder: folder.to_path_buf(),
        commit: None,
        sha256: hex::encode(Sha256::digest(&doc)),
        files,
        recipe: RECIPE,
    })
}

/// The bytes the scan's `sha256` is computed over (recipe [`RECIPE`]):
///
/// ```text
/// {"files":[F…],"format":"proctor-project-config-flagged/1"}
/// F = {"entries":[{"key":[segment…],"value":V}…],"path":P}   (a file read in its format)
///   | {"path":P,"unreadable":{"code":C,"sha256":H}}          (a file flagged whole)
/// ```
///
/// Only flagged files appear, in the order of [`FILES`]; entries are sorted by their key
/// path (segment by segment, by bytes); V is the real value (not masked). The JSON is
/// canonical: no whitespace, object keys sorted by their UTF-8 bytes, strings escaped as the
/// ledger's canonical form does, integers in decimal, other numbers as `serde_json` writes
/// them (shortest round-trip form); TOML datetimes and non-finite floats appear as strings.
/// H is the SHA-256 of the whole file (of a link's target text; of nothing for a file that
/// is not regular or cannot be opened).
pub fn canonical_document(files: &[FileReport]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"files\":[");
    let mut first = true;
    for f in files.iter().filter(|f| f.flagged) {
        if !first {
            out.push(b',');
        }
        first = false;
        match &f.unreadable {
            Some(u) => {
                out.extend_from_slice(b"{\"path\":");
                crate::ledger::canonical::write_str(&mut out, f.path);
                out.extend_from_slice(b",\"unreadable\":{\"code\":");
                crate::ledger::canonical::write_str(&mut out, u.code);
                out.extend_from_slice(b",\"sha256\":");
                crate::ledger::canonical::write_str(&mut out, &u.sha256);
                out.extend_from_slice(b"}}");
            }
            None => {
                out.extend_from_slice(b"{\"entries\":[");
                for (i, k) in f.keys.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"key\":[");
                    for (j, seg) in k.path.iter().enumerate() {
                        if j > 0 {
                            out.push(b',');
                        }
                        crate::ledger::canonical::write_str(&mut out, seg);
                    }
                    out.extend_from_slice(b"],\"value\":");
                    write_canonical(&mut out, &k.raw);
                    out.push(b'}');
                }
                out.extend_from_slice(b"],\"path\":");
                crate::ledger::canonical::write_str(&mut out, f.path);
                out.push(b'}');
            }
        }
    }
    out.extend_from_slice(b"],\"format\":");
    crate::ledger::canonical::write_str(&mut out, DOCUMENT_FORMAT);
    out.push(b'}');
    out
}

/// Canonical JSON of any value (depth is bounded by the scan's depth check): the ledger's
/// one canonical writer, in its mode for any value.
fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    crate::ledger::canonical::write_any(out, v)
}

#[cfg(test)]
mod tests;
