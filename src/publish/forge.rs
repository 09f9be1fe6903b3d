//! The forge adapter: GitHub's REST API "create a pull request", and nothing else.
//!
//! `POST {api_base}/repos/{owner}/{repo}/pulls` with `{title, head, base, body}`; the answer's
//! `number` and `html_url` are kept (they are forge text: displayed only through
//! [`crate::text`]). The base URL is configurable for GitHub Enterprise
//! (`https://ghe.example/api/v3`).
//!
//! The configuration is `config/forge.toml` in proctor's home (see [`ForgeConfig`]). The token
//! comes from the operator's credential source: a command run without a shell
//! (`token_command = ["gh", "auth", "token"]`) or a 0600 file the user owns (`token_file`).
//! It lives in memory only ([`Token`] zeroes itself and never prints), is sent only in the
//! `Authorization` header, never over plain HTTP to a host other than the loopback, never to a
//! redirect, and never in the argv or environment of a child.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use zeroize::Zeroizing;

use crate::files;
use crate::home::Home;

/// The file name of the forge configuration, in the home's config folder.
pub const CONFIG_FILE: &str = "forge.toml";
/// GitHub's public API.
pub const DEFAULT_API_BASE: &str = "https://api.github.com";
/// The longest token proctor accepts from a credential source.
const MAX_TOKEN_BYTES: usize = 4096;
/// How long a token command may run.
const TOKEN_COMMAND_DEADLINE: Duration = Duration::from_secs(20);
/// The longest answer read from the forge.
const MAX_ANSWER_BYTES: u64 = 1 << 20;
/// The longest `html_url` kept.
const MAX_URL_CHARS: usize = 2048;
/// The longest forge error message kept.
const MAX_MESSAGE_CHARS: usize = 400;

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error(
        "no forge configuration at {path}. Remedy: create it (0600), for example:\n  \
         api_base = \"https://api.github.com\"\n  base = \"main\"\n  \
         token_command = [\"gh\", \"auth\", \"token\"]\n(see docs/publish.md)"
    )]
    NoConfig { path: PathBuf },
    #[error("cannot read the forge configuration {path}: {reason}")]
    BadConfig { path: PathBuf, reason: String },
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error(
        "the forge repository is not configured and cannot be derived from the remote URL \
         {url}. Remedy: set `repo = \"owner/name\"` in {path}"
    )]
    NoRepo { url: String, path: PathBuf },
    #[error("bad api_base {api_base:?}: {reason}")]
    BadApiBase { api_base: String, reason: String },
    #[error(
        "the token file {path} is readable by others or its group (mode {mode:04o}); a token \
         must be private. Remedy: `chmod 600 {path}`"
    )]
    TokenFileExposed { path: PathBuf, mode: u32 },
    #[error(
        "the token file {path} is owned by uid {uid}, not by you. Remedy: use a token file \
         you own (0600)"
    )]
    TokenFileForeign { path: PathBuf, uid: u32 },
    #[error("cannot read the token file {path}: {err}")]
    TokenFile { path: PathBuf, err: std::io::Error },
    #[error("cannot run the token command {program:?}: {err}")]
    TokenCommandSpawn {
        program: String,
        err: std::io::Error,
    },
    #[error(
        "the token command {program:?} {outcome}. Remedy: run it yourself to see why (its \
         output is not shown here because it may hold a secret)"
    )]
    TokenCommandFailed { program: String, outcome: String },
    #[error(
        "the credential source ({source_name}) gave no usable token (empty, several lines, \
         or characters that cannot be sent in a header)"
    )]
    TokenUnusable { source_name: String },
    #[error("the forge at {api_base} could not be reached: {reason}")]
    Transport { api_base: String, reason: String },
    #[error("the forge refused to open the pull request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the forge answered {status} with something that is not a pull request: {reason}")]
    BadAnswer { status: u16, reason: String },
}

/// Where a token comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// A command run without a shell; its standard output is the token.
    Command(Vec<String>),
    /// A 0600 file the user owns; its content is the token.
    File(PathBuf),
}

impl TokenSource {
    /// How the source is named in messages and receipts (never the token).
    pub fn describe(&self) -> String {
        match self {
            TokenSource::Command(argv) => format!("token_command {argv:?}"),
            TokenSource::File(p) => format!("token_file {}", p.display()),
        }
    }
}

/// `config/forge.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForgeConfig {
    /// The REST API's base URL: `https://api.github.com`, or `https://HOST/api/v3` for
    /// GitHub Enterprise. Plain `http://` only for a loopback host (a local fake).
    pub api_base: String,
    /// `owner/name` on the forge; derived from the remote URL when absent.
    pub repo: Option<String>,
    /// The branch the pull request asks to merge into.
    pub base: String,
    /// The credential source.
    pub token: TokenSource,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    api_base: Option<String>,
    repo: Option<String>,
    base: Option<String>,
    token_command: Option<Vec<String>>,
    token_file: Option<PathBuf>,
}

/// The path of the forge configuration.
pub fn config_path(home: &Home) -> PathBuf {
    home.config.join(CONFIG_FILE)
}

/// Reads `config/forge.toml`.
pub fn load_config(home: &Home) -> Result<ForgeConfig, ForgeError> {
    let path = config_path(home);
    let file = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(files::FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(ForgeError::NoConfig { path });
        }
        Err(e) => return Err(e.into()),
    };
    let mut text = String::new();
    file.take(1 << 16)
        .read_to_string(&mut text)
        .map_err(|e| ForgeError::BadConfig {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    parse_config(&text).map_err(|reason| ForgeError::BadConfig { path, reason })
}

/// Parses the text of a forge configuration.
pub fn parse_config(text: &str) -> Result<ForgeConfig, String> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;
    let api_base = raw
        .api_base
        .unwrap_or_else(|| DEFAULT_API_BASE.to_string())
        .trim_end_matches('/')
        .to_string();
    check_api_base(&api_base).map_err(|e| e.to_string())?;
    if let Some(repo) = &raw.repo
        && split_repo(repo).is_none()
    {
        return Err(format!("repo {repo:?} is not `owner/name`"));
    }
    let base = raw.base.unwrap_or_else(|| "main".to_string());
    if base.is_empty() || base.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!("base {base:?} is not a branch name"));
    }
    let token = match (raw.token_command, raw.token_file) {
        (Some(argv), None) => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err("token_command is empty: name a program and its arguments".into());
            }
            TokenSource::Command(argv)
        }
        (None, Some(path)) => {
            if !path.is_absolute() {
                return Err(format!("token_file {} must be absolute", path.display()));
            }
            TokenSource::File(path)
        }
        (Some(_), Some(_)) => {
            return Err("set one of token_command and token_file, not both".into());
        }
        (None, None) => {
            return Err(
                "no credential source: set token_command (e.g. [\"gh\", \"auth\", \"token\"]) \
                 or token_file (a 0600 file you own)"
                    .into(),
            );
        }
    };
    Ok(ForgeConfig {
        api_base,
        repo: raw.repo,
        base,
        token,
    })
}

/// `owner/name` split in two, both non-empty and made of the characters GitHub allows.
pub fn split_repo(repo: &str) -> Option<(String, String)> {
    let (owner, name) = repo.split_once('/')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (ok(owner) && ok(name)).then(|| (owner.to_string(), name.to_string()))
}

/// `owner/name` from a remote URL: `https://host/owner/name(.git)`,
/// `ssh://git@host[:port]/owner/name(.git)` or `git@host:owner/name(.git)`. None for a local
/// path or anything else.
pub fn repo_from_url(url: &str) -> Option<(String, String)> {
    let path = if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("ssh://"))
        .or_else(|| url.strip_prefix("git://"))
    {
        rest.split_once('/')?.1
    } else if !url.contains("://") && !url.starts_with('/') && !url.starts_with('.') {
        // scp-like: [user@]host:path
        let (host, path) = url.split_once(':')?;
        if host.is_empty() || host.contains('/') {
            return None;
        }
        path
    } else {
        return None;
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    split_repo(path)
}

/// The forge repository for a remote URL: the configured one, else derived from the URL.
pub fn resolve_repo(
    cfg: &ForgeConfig,
    remote_url: &str,
    home: &Home,
) -> Result<(String, String), ForgeError> {
    if let Some(r) = &cfg.repo
        && let Some(pair) = split_repo(r)
    {
        return Ok(pair);
    }
    repo_from_url(remote_url).ok_or_else(|| ForgeError::NoRepo {
        url: remote_url.to_string(),
        path: config_path(home),
    })
}

/// Checks an API base: `https://` anywhere, `http://` only for a loopback host.
pub fn check_api_base(api_base: &str) -> Result<(), ForgeError> {
    let bad = |reason: &str| ForgeError::BadApiBase {
        api_base: api_base.to_string(),
        reason: reason.to_string(),
    };
    let uri: ureq::http::Uri = api_base.parse().map_err(|_| bad("not a URL"))?;
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    if uri.query().is_some() {
        return Err(bad("a query string does not belong in a base URL"));
    }
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(host) => Ok(()),
        Some("http") => Err(bad(
            "plain http would send the token in clear; use https (http is accepted only for \
             a loopback host)",
        )),
        _ => Err(bad("the scheme must be https")),
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A forge token: in memory only, zeroed on drop, never printed.
pub struct Token(Zeroizing<String>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    fn from_bytes(bytes: &[u8], source: &TokenSource) -> Result<Token, ForgeError> {
        let unusable = || ForgeError::TokenUnusable {
            source_name: source.describe(),
        };
        let text = std::str::from_utf8(bytes).map_err(|_| unusable())?;
        let t = text.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(unusable());
        }
        Ok(Token(Zeroizing::new(t.to_string())))
    }

    fn header(&self) -> Zeroizing<String> {
        Zeroizing::new(format!("Bearer {}", self.0.as_str()))
    }

    /// Whether an `Authorization` header carries this token (`Bearer <token>`), compared in
    /// time independent of where they differ. For a forge of proctor's own: the demo's.
    pub fn authorizes(&self, header: &str) -> bool {
        let want = self.header();
        let (a, b) = (want.as_bytes(), header.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Reads the token from its source.
pub fn read_token(source: &TokenSource) -> Result<Token, ForgeError> {
    match source {
        TokenSource::File(path) => read_token_file(path, source),
        TokenSource::Command(argv) => run_token_command(argv, source),
    }
}

fn read_token_file(path: &Path, source: &TokenSource) -> Result<Token, ForgeError> {
    let file = files::open_private_read(path).map_err(|e| match e {
        files::FilesError::Io { err, .. } => ForgeError::TokenFile {
            path: path.to_path_buf(),
            err,
        },
        other => ForgeError::Files(other),
    })?;
    let meta = file.metadata().map_err(|err| ForgeError::TokenFile {
        path: path.to_path_buf(),
        err,
    })?;
    if meta.uid() != files::my_uid() {
        return Err(ForgeError::TokenFileForeign {
            path: path.to_path_buf(),
            uid: meta.uid(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(ForgeError::TokenFileExposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut buf = Zeroizing::new(Vec::new());
    file.take(MAX_TOKEN_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|err| ForgeError::TokenFile {
            path: path.to_path_buf(),
            err,
        })?;
    if buf.len() > MAX_TOKEN_BYTES {
        return Err(ForgeError::TokenUnusable {
            source_name: source.describe(),
        });
    }
    Token::from_bytes(&buf, source)
}

fn run_token_command(argv: &[String], source: &TokenSource) -> Result<Token, ForgeError> {
    let program = argv.first().cloned().unwrap_or_default();
    let mut child = Command::new(&program)
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| ForgeError::TokenCommandSpawn {
            program: program.clone(),
            err,
        })?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| ForgeError::TokenCommandFailed {
            program: program.clone(),
            outcome: "gave no standard output".into(),
        })?;
    let reader = std::thread::spawn(move || {
        let mut buf = Zeroizing::new(Vec::new());
        let _ = (&mut stdout)
            .take(MAX_TOKEN_BYTES as u64 + 1)
            .read_to_end(&mut buf);
        // Drain the rest so the child is not blocked on a full pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        buf
    });
    let deadline = Instant::now() + TOKEN_COMMAND_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ForgeError::TokenCommandFailed {
                    program,
                    outcome: format!(
                        "did not finish within {} s and was killed",
                        TOKEN_COMMAND_DEADLINE.as_secs()
                    ),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(err) => return Err(ForgeError::TokenCommandSpawn { program, err }),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(ForgeError::TokenCommandFailed {
            program,
            outcome: format!("failed ({status})"),
        });
    }
    if out.len() > MAX_TOKEN_BYTES {
        return Err(ForgeError::TokenUnusable {
            source_name: source.describe(),
        });
    }
    Token::from_bytes(&out, source)
}

/// What a pull request asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequestAsk {
    pub api_base: String,
    pub owner: String,
    pub repo: String,
    /// The branch pushed (same repository).
    pub head: String,
    /// The branch it asks to merge into.
    pub base: String,
    pub title: String,
    pub body: String,
}

/// What the forge answered: untrusted text, displayed only through [`crate::text`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PullRequest {
    pub number: u64,
    pub html_url: String,
}

/// `POST {api_base}/repos/{owner}/{repo}/pulls`. The only call this adapter makes.
pub fn open_pull_request(ask: &PullRequestAsk, token: &Token) -> Result<PullRequest, ForgeError> {
    check_api_base(&ask.api_base)?;
    let url = format!("{}/repos/{}/{}/pulls", ask.api_base, ask.owner, ask.repo);
    let loopback = ask
        .api_base
        .parse::<ureq::http::Uri>()
        .ok()
        .and_then(|u| u.host().map(is_loopback))
        .unwrap_or(false);
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(format!("proctor/{}", crate::version::VERSION))
        .timeout_global(Some(Duration::from_secs(60)))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        );
    if loopback {
        // A proxy from the environment must not see a loopback call (nor its token).
        config = config.proxy(None);
    }
    let agent: ureq::Agent = config.build().into();
    let body = json!({
        "title": ask.title,
        "head": ask.head,
        "base": ask.base,
        "body": ask.body,
    });
    let transport = |e: ureq::Error| ForgeError::Transport {
        api_base: ask.api_base.clone(),
        reason: e.to_string(),
    };
    let auth = token.header();
    let mut resp = agent
        .post(&url)
        .header("Accept", "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        .header("Authorization", auth.as_str())
        .content_type("application/json")
        .send(body.to_string().as_bytes())
        .map_err(transport)?;
    let status = resp.status().as_u16();
    let bytes = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
        .map_err(transport)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    if status != 201 {
        return Err(ForgeError::Refused {
            status,
            message: error_message(&value, &bytes),
        });
    }
    let bad = |reason: &str| ForgeError::BadAnswer {
        status,
        reason: reason.to_string(),
    };
    let number = value["number"]
        .as_u64()
        .ok_or_else(|| bad("no numeric `number`"))?;
    let html_url = value["html_url"]
        .as_str()
        .ok_or_else(|| bad("no `html_url`"))?;
    if html_url.chars().count() > MAX_URL_CHARS {
        return Err(bad("`html_url` is too long"));
    }
    Ok(PullRequest {
        number,
        html_url: html_url.to_string(),
    })
}

/// The forge's own message (`message` and each `errors[].message`), bounded; stored as data
/// and displayed through the sanitiser.
fn error_message(value: &serde_json::Value, raw: &[u8]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = value["message"].as_str() {
        parts.push(m.to_string());
    }
    for e in value["errors"].as_array().into_iter().flatten() {
        if let Some(m) = e["message"].as_str() {
            parts.push(m.to_string());
        }
    }
    let text = if parts.is_empty() {
        String::from_utf8_lossy(raw).into_owned()
    } else {
        parts.join("; ")
    };
    text.chars().take(MAX_MESSAGE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn config_parses_defaults_and_refuses_mistakes() {
        let c = parse_config("token_command = [\"gh\", \"auth\", \"token\"]\n").unwrap();
        assert_eq!(c.api_base, DEFAULT_API_BASE);
        assert_eq!(c.base, "main");
        assert_eq!(c.repo, None);
        assert_eq!(
            c.token,
            TokenSource::Command(vec!["gh".into(), "auth".into(), "token".into()])
        );
        let c = parse_config(
            "api_base = \"https://ghe.example/api/v3/\"\nrepo = \"acme/widget\"\nbase = \"dev\"\n\
             token_file = \"/t/tok\"\n",
        )
        .unwrap();
        assert_eq!(c.api_base, "https://ghe.example/api/v3");
        assert_eq!(c.repo.as_deref(), Some("acme/widget"));
        assert_eq!(c.token, TokenSource::File("/t/tok".into()));
        for (text, why) in [
            ("", "no credential source"),
            ("token_file = \"rel\"", "absolute"),
            ("token_file = \"/a\"\ntoken_command = [\"x\"]", "not both"),
            ("token_command = []", "empty"),
            (
                "api_base = \"http://api.github.com\"\ntoken_file = \"/a\"",
                "in clear",
            ),
            ("repo = \"nope\"\ntoken_file = \"/a\"", "owner/name"),
            ("tokn_file = \"/a\"", "unknown field"),
        ] {
            let e = parse_config(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        assert!(parse_config("api_base = \"http://127.0.0.1:9/api\"\ntoken_file = \"/a\"").is_ok());
        assert!(parse_config("api_base = \"http://[::1]:9\"\ntoken_file = \"/a\"").is_ok());
    }

    #[test]
    fn repo_from_remote_urls() {
        let want = Some(("acme".to_string(), "widget".to_string()));
        for url in [
            "https://github.com/acme/widget.git",
            "https://github.com/acme/widget",
            "git@github.com:acme/widget.git",
            "ssh://git@ghe.example:2222/acme/widget.git",
        ] {
            assert_eq!(repo_from_url(url), want, "{url}");
        }
        for url in [
            "/srv/git/widget.git",
            "./widget",
            "https://github.com/acme",
            "file:///x/y",
        ] {
            assert_eq!(repo_from_url(url), None, "{url}");
        }
    }

    #[test]
    fn token_debug_never_shows_the_token() {
        let src = TokenSource::File("/x".into());
        let t = Token::from_bytes(b"ghp_secret\n", &src).unwrap();
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        assert!(Token::from_bytes(b"two\nlines", &src).is_err());
        assert!(Token::from_bytes(b"  ", &src).is_err());
    }

    #[test]
    fn token_file_must_be_private_and_token_command_runs_without_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tok");
        std::fs::write(&path, "ghp_abc\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_token(&TokenSource::File(path.clone())).unwrap_err();
        assert!(
            matches!(e, ForgeError::TokenFileExposed { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = read_token(&TokenSource::File(path)).unwrap();
        assert_eq!(t.0.as_str(), "ghp_abc");

        // No shell: `$(...)` and `;` are plain bytes of one argument.
        let t = read_token(&TokenSource::Command(vec![
            "printf".into(),
            "%s".into(),
            "tok;$(id)".into(),
        ]))
        .unwrap();
        assert_eq!(t.0.as_str(), "tok;$(id)");
        let e = read_token(&TokenSource::Command(vec![
            "sh".into(),
            "-c".into(),
            "echo ghp_leak; echo ghp_leak >&2; exit 3".into(),
        ]))
        .unwrap_err();
        assert!(!e.to_string().contains("ghp_leak"), "{e}");
        assert!(e.to_string().contains("exit status: 3"), "{e}");
    }

    /// A one-shot fake forge on the loopback: records the request, answers `answer`.
    fn fake(
        status: &'static str,
        answer: &'static str,
    ) -> (String, std::thread::JoinHandle<String>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut head = String::new();
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let mut s = s;
            write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            head + &String::from_utf8(body).unwrap()
        });
        (format!("http://127.0.0.1:{port}/api/v3"), h)
    }

    fn ask(api_base: String) -> PullRequestAsk {
        PullRequestAsk {
            api_base,
            owner: "acme".into(),
            repo: "widget".into(),
            head: "feature".into(),
            base: "main".into(),
            title: "Add".into(),
            body: "Body".into(),
        }
    }

    #[test]
    fn opens_a_pull_request_with_the_token_in_the_header_only() {
        let (base, h) = fake(
            "201 Created",
            r#"{"number":42,"html_url":"https://ghe.example/acme/widget/pull/42"}"#,
        );
        let src = TokenSource::File("/x".into());
        let tok = Token::from_bytes(b"ghp_tok", &src).unwrap();
        let pr = open_pull_request(&ask(base), &tok).unwrap();
        assert_eq!(pr.number, 42);
        let req = h.join().unwrap();
        assert!(
            req.starts_with("POST /api/v3/repos/acme/widget/pulls HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(
            req.contains("authorization: Bearer ghp_tok\r\n")
                || req.contains("Authorization: Bearer ghp_tok\r\n"),
            "{req}"
        );
        let body: serde_json::Value =
            serde_json::from_str(req.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"title": "Add", "head": "feature", "base": "main", "body": "Body"})
        );
    }

    #[test]
    fn https_speaks_tls_and_never_sends_the_token_in_clear() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            // Answer in plain HTTP: a TLS client must refuse it.
            let _ = s.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
            buf.truncate(n);
            buf
        });
        let src = TokenSource::File("/x".into());
        let tok = Token::from_bytes(b"ghp_never_in_clear", &src).unwrap();
        let e =
            open_pull_request(&ask(format!("https://127.0.0.1:{port}/api/v3")), &tok).unwrap_err();
        assert!(matches!(e, ForgeError::Transport { .. }), "{e}");
        let first = h.join().unwrap();
        assert_eq!(
            first.first(),
            Some(&0x16),
            "a TLS handshake record comes first"
        );
        assert!(
            !first.windows(8).any(|w| w == b"ghp_neve"),
            "the token is not in what was sent"
        );
    }

    #[test]
    fn a_refusal_carries_the_forge_message_and_never_the_token() {
        let (base, h) = fake(
            "422 Unprocessable Entity",
            r#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists"}]}"#,
        );
        let src = TokenSource::File("/x".into());
        let tok = Token::from_bytes(b"ghp_tok", &src).unwrap();
        let e = open_pull_request(&ask(base), &tok).unwrap_err();
        h.join().unwrap();
        let s = e.to_string();
        assert!(s.contains("422") && s.contains("already exists"), "{s}");
        assert!(!s.contains("ghp_tok"), "{s}");
        let e = open_pull_request(&ask("http://10.0.0.1/api".into()), &tok).unwrap_err();
        assert!(matches!(e, ForgeError::BadApiBase { .. }), "{e}");
    }
}
