//! The closed provider profiles: the five official coding-agent CLIs proctor may launch, and
//! exactly how each one is launched, spoken to, interrupted and resumed.
//!
//! The set is closed on purpose (seed 000, "profils de fournisseur fermés"): proctor never
//! runs an arbitrary command as a "provider". A [`Tool`] is one of five variants; everything
//! about it (argv, transport protocol, the account-home variable, where it keeps its
//! transcripts) is decided here, not by a caller.
//!
//! Parts:
//! - this file: [`Tool`], [`Transport`], the argv of each form ([`launch`]) and executable
//!   resolution on `PATH` ([`resolve`]);
//! - [`env`]: the launch environment allowlist;
//! - [`profile`]: a tool plus an account home, and the `profiles.json` store;
//! - [`protocol`]: the stdio protocols as a pure state machine ([`protocol::StdioSession`]):
//!   the handshake lines, input encoding, interrupt lines, and what the tool's output means;
//! - [`fake`]: the faithful fakes behind `proctor demo-agent`.
//!
//! Nothing in this module spawns a provider: the runners (`src/runs/`) do, with what this
//! module computes.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod conversation;
pub mod env;
pub mod fake;
pub mod profile;
pub mod protocol;
pub mod records;

/// One of the five provider CLIs. Closed: there is no variant for "a command".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
    /// xAI's Grok Build CLI (`grok`).
    Grok,
    /// OpenCode (`opencode`).
    Opencode,
}

/// How a run's standard streams are wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// stdin, stdout and stderr are three pipes; the tool speaks its stdio protocol.
    Pipe,
    /// stdin/stdout on a pseudo-terminal; the tool runs its interactive (TUI) form.
    Pty,
}

/// The protocol a tool's stdio (pipe) form speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StdioProtocol {
    /// Claude Code's `--input-format stream-json --output-format stream-json` (NDJSON).
    ClaudeStreamJson,
    /// `codex app-server`: JSON-RPC 2.0 lines with the `"jsonrpc"` member omitted.
    CodexAppServer,
    /// The Agent Client Protocol: JSON-RPC 2.0 lines (with `"jsonrpc":"2.0"`).
    Acp,
}

/// What the account-home variable of a tool points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeVarTarget {
    /// The variable holds the config folder itself (e.g. `CLAUDE_CONFIG_DIR=/x/.claude`).
    Folder,
    /// The variable holds the folder's parent, and the tool appends a fixed name
    /// (e.g. `GEMINI_CLI_HOME=/x` makes Gemini CLI use `/x/.gemini`). A profile home for such a
    /// tool must therefore carry exactly that name.
    Parent { folder_name: &'static str },
}

/// The fixed facts about one tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub tool: Tool,
    /// The executable name looked up on `PATH`.
    pub program: &'static str,
    /// The product name, for people.
    pub display_name: &'static str,
    pub stdio_protocol: StdioProtocol,
    /// The environment variable that points the tool at an account home.
    pub home_var: &'static str,
    pub home_var_target: HomeVarTarget,
    /// The default account home, relative to the user's `$HOME`.
    pub default_home: &'static str,
    /// Where the tool keeps its conversation transcripts, relative to the account home
    /// (documentation for people; the fakes implement the same places).
    pub transcripts: &'static str,
}

impl Tool {
    /// Every tool, in a fixed order.
    pub const ALL: [Tool; 5] = [
        Tool::Claude,
        Tool::Codex,
        Tool::Gemini,
        Tool::Grok,
        Tool::Opencode,
    ];

    /// The tool's name as typed on the command line and stored in files.
    pub fn name(self) -> &'static str {
        self.spec().program
    }

    /// Parses a tool name (exact, lowercase).
    pub fn parse(name: &str) -> Result<Tool, ProviderError> {
        Tool::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| ProviderError::UnknownTool {
                name: name.to_string(),
            })
    }

    /// The closed table of facts. Sources, per row:
    /// - claude: `CLAUDE_CONFIG_DIR` and `projects/<sanitised cwd>/<session>.jsonl` from
    ///   anthropics/claude-agent-sdk-python `_internal/sessions.py`;
    /// - codex: `CODEX_HOME` from openai/codex app-server README (`initialize` returns
    ///   `codexHome`, "the server's $CODEX_HOME"); rollouts under `sessions/YYYY/MM/DD/`;
    /// - gemini: `GEMINI_CLI_HOME` is the *parent* of `.gemini`
    ///   (google-gemini/gemini-cli `packages/core/src/utils/paths.ts`, `homedir()`);
    ///   chats under `tmp/<project>/chats/` (0.61.0: `session-<time>-<id[..8]>.jsonl`);
    /// - grok: `GROK_HOME` (docs.x.ai/build/settings: "To configure the default home
    ///   directory, you can set $GROK_HOME"); sessions under `sessions/`;
    /// - opencode: no home variable of its own; it keeps its account (`auth.json`) and its
    ///   storage in `$XDG_DATA_HOME/opencode` (anomalyco/opencode `src/global/index.ts`).
    pub fn spec(self) -> &'static ToolSpec {
        match self {
            Tool::Claude => &ToolSpec {
                tool: Tool::Claude,
                program: "claude",
                display_name: "Claude Code",
                stdio_protocol: StdioProtocol::ClaudeStreamJson,
                home_var: "CLAUDE_CONFIG_DIR",
                home_var_target: HomeVarTarget::Folder,
                default_home: ".claude",
                transcripts: "projects/<cwd with every non-alphanumeric replaced by '-'>/<session_id>.jsonl",
            },
            Tool::Codex => &ToolSpec {
                tool: Tool::Codex,
                program: "codex",
                display_name: "Codex",
                stdio_protocol: StdioProtocol::CodexAppServer,
                home_var: "CODEX_HOME",
                home_var_target: HomeVarTarget::Folder,
                default_home: ".codex",
                transcripts: "sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl",
            },
            Tool::Gemini => &ToolSpec {
                tool: Tool::Gemini,
                program: "gemini",
                display_name: "Gemini CLI",
                stdio_protocol: StdioProtocol::Acp,
                home_var: "GEMINI_CLI_HOME",
                home_var_target: HomeVarTarget::Parent {
                    folder_name: ".gemini",
                },
                default_home: ".gemini",
                transcripts: "tmp/<project>/chats/session-<YYYY-MM-DDThh-mm>-<id[..8]>.jsonl",
            },
            Tool::Grok => &ToolSpec {
                tool: Tool::Grok,
                program: "grok",
                display_name: "Grok Build",
                stdio_protocol: StdioProtocol::Acp,
                home_var: "GROK_HOME",
                home_var_target: HomeVarTarget::Folder,
                default_home: ".grok",
                transcripts: "sessions/<encoded cwd>/<session id>/",
            },
            Tool::Opencode => &ToolSpec {
                tool: Tool::Opencode,
                program: "opencode",
                display_name: "OpenCode",
                stdio_protocol: StdioProtocol::Acp,
                home_var: "XDG_DATA_HOME",
                home_var_target: HomeVarTarget::Parent {
                    folder_name: "opencode",
                },
                default_home: ".local/share/opencode",
                transcripts: "opencode.db (SQLite), read through `opencode export <id>`",
            },
        }
    }

    /// The five names, for error messages.
    pub fn names() -> String {
        Tool::ALL.map(Tool::name).join(", ")
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The transport of a start that names none: the CLI's `--transport` default, the API's
/// default when the field is absent, and the cockpit's new-session dialog. One constant, so
/// the three cannot drift. PTY: operators drive sessions interactively.
pub const DEFAULT_TRANSPORT: Transport = Transport::Pty;

impl Transport {
    pub const fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Pty => "pty",
        }
    }
}

/// How a turn in progress is interrupted, per transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptMethod {
    /// A protocol message on stdin, built by [`protocol::StdioSession::interrupt`]:
    /// claude `control_request` subtype `interrupt`, codex `turn/interrupt`, ACP
    /// `session/cancel`.
    ProtocolMessage,
    /// SIGINT to the PTY's foreground process group (what Ctrl-C does at a terminal).
    SigintToForegroundGroup,
}

/// The interrupt method of a tool under a transport. The process stays in both cases.
pub fn interrupt_method(_tool: Tool, transport: Transport) -> InterruptMethod {
    match transport {
        Transport::Pipe => InterruptMethod::ProtocolMessage,
        Transport::Pty => InterruptMethod::SigintToForegroundGroup,
    }
}

/// A launch: the program name to resolve on `PATH` and its arguments (no shell, ever).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: &'static str,
    pub args: Vec<String>,
}

/// The argv of a tool's form. `resume` is a conversation id the tool reported earlier.
///
/// | tool | pipe | pipe, resume | pty | pty, resume |
/// |---|---|---|---|---|
/// | claude | `-p --verbose --input-format stream-json --output-format stream-json --permission-prompt-tool stdio` | same + `--resume=<id>` | (none) | `--resume <id>` |
/// | codex | `app-server` | same (resume is `thread/resume` in the handshake) | (none) | `resume <id>` |
/// | gemini | `--acp` | same (resume is `session/load`) | (none) | `--resume <id>` |
/// | grok | `agent stdio` | same (`session/load`) | (none) | `--resume <id>` |
/// | opencode | `acp` | same (`session/load`) | (none) | `--session <id>` |
///
/// claude's permission prompts come over stdio (`--permission-prompt-tool stdio`, as the
/// Claude Agent SDK launches it when a `can_use_tool` callback is set; accepted by the real
/// claude 2.1.332), so a person answers them ([`protocol`]).
/// claude's PTY form started by the server ([`launch_with_hooks`]) also carries
/// `--settings <JSON>` first: its own `Notification`, `Stop` and `UserPromptSubmit` hooks,
/// each running `proctor session hook --socket <the server's socket>` (the server's own
/// executable, by absolute path, every word single-quoted): how a PTY run of claude says that
/// it waits for the person. No other PTY form has such a mechanism.
///
/// claude's resume uses the `--resume=<id>` form, as the Claude Agent SDK does
/// (`subprocess_cli.py`): `--resume` takes an optional value, so the one-token form cannot
/// be misread.
pub fn launch(
    tool: Tool,
    transport: Transport,
    resume: Option<&str>,
) -> Result<Launch, ProviderError> {
    if let Some(id) = resume {
        check_conversation_id(id)?;
    }
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let args = match (tool, transport, resume) {
        (Tool::Claude, Transport::Pipe, r) => {
            let mut a = s(&[
                "-p",
                "--verbose",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--permission-prompt-tool",
                "stdio",
            ]);
            if let Some(id) = r {
                a.push(format!("--resume={id}"));
            }
            a
        }
        (Tool::Codex, Transport::Pipe, _) => s(&["app-server"]),
        (Tool::Gemini, Transport::Pipe, _) => s(&["--acp"]),
        (Tool::Grok, Transport::Pipe, _) => s(&["agent", "stdio"]),
        (Tool::Opencode, Transport::Pipe, _) => s(&["acp"]),
        (_, Transport::Pty, None) => Vec::new(),
        (Tool::Claude | Tool::Gemini | Tool::Grok, Transport::Pty, Some(id)) => {
            vec!["--resume".to_string(), id.to_string()]
        }
        (Tool::Codex, Transport::Pty, Some(id)) => vec!["resume".to_string(), id.to_string()],
        (Tool::Opencode, Transport::Pty, Some(id)) => {
            vec!["--session".to_string(), id.to_string()]
        }
    };
    Ok(Launch {
        program: tool.spec().program,
        args,
    })
}

/// Where a run's tool hooks report to: the server's own executable (absolute) and its
/// socket. Only claude's PTY form has hooks proctor passes ([`launch_with_hooks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookTarget {
    pub exe: String,
    pub socket: String,
}

/// The claude hook events proctor asks to hear about on a PTY run: `SessionStart` (claude's
/// session began: at startup, on a resume, after `/clear`; it names the session id, the
/// run's conversation), `Notification` (claude needs a permission, or waited idle for
/// input), `Stop` (its turn ended), `StopFailure` (its turn ended on an API error: the
/// server reads the record for a limit), `UserPromptSubmit` (the person typed a prompt: it
/// no longer waits). Every hook's JSON carries `session_id`.
pub const CLAUDE_HOOK_EVENTS: [&str; 5] = [
    "SessionStart",
    "Notification",
    "Stop",
    "StopFailure",
    "UserPromptSubmit",
];

/// Whether `id` is a session id as claude makes them (`crypto.randomUUID()`): a UUID in its
/// canonical lowercase form, 8-4-4-4-12 hex digits. Nothing else is taken from a hook as a
/// conversation id.
pub fn is_claude_session_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

/// [`launch`], plus claude's own hooks on its PTY form when `hooks` is given.
pub fn launch_with_hooks(
    tool: Tool,
    transport: Transport,
    resume: Option<&str>,
    hooks: Option<&HookTarget>,
) -> Result<Launch, ProviderError> {
    let mut l = launch(tool, transport, resume)?;
    if let (Tool::Claude, Transport::Pty, Some(target)) = (tool, transport, hooks) {
        let mut settings = vec!["--settings".to_string(), claude_hook_settings(target)];
        settings.append(&mut l.args);
        l.args = settings;
    }
    Ok(l)
}

/// One word for a POSIX shell: single-quoted, a `'` inside closed, escaped and reopened. The
/// shell claude runs a command hook with sees exactly this word, no expansion of any kind.
fn sh_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The `--settings` JSON of claude's PTY form: a command hook for each of
/// [`CLAUDE_HOOK_EVENTS`] that runs `<exe> session hook --socket <socket>` (claude writes
/// the hook's JSON on its stdin; the verb reports it to the server, which attributes it to
/// the run by the kernel's word about the caller's pid).
pub fn claude_hook_settings(target: &HookTarget) -> String {
    let command = format!(
        "{} session hook --socket {}",
        sh_word(&target.exe),
        sh_word(&target.socket)
    );
    let mut hooks = serde_json::Map::new();
    for event in CLAUDE_HOOK_EVENTS {
        hooks.insert(
            event.to_string(),
            serde_json::json!([{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]),
        );
    }
    serde_json::json!({ "hooks": hooks }).to_string()
}

/// The longest conversation id accepted.
pub const MAX_CONVERSATION_ID: usize = 200;

/// A conversation id comes from a tool's output, so it is checked before it becomes an
/// argument or a JSON value: non-empty, at most 200 bytes, printable ASCII without spaces,
/// and not starting with `-` (it must never be read as a flag).
pub fn check_conversation_id(id: &str) -> Result<(), ProviderError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_CONVERSATION_ID
        && !id.starts_with('-')
        && id.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(ProviderError::BadConversationId {
            id: crate::text::one_line(id, 80),
        })
    }
}

/// Whose `PATH` a launch searched: named in the error for a missing tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathFrom {
    /// The PATH the start request carried (the client's: the CLI's or the cockpit's).
    Client,
    /// The PATH the server was started with.
    Server,
    /// The PATH recorded for the run when it started (a resume).
    Run,
}

impl PathFrom {
    pub fn name(self) -> &'static str {
        match self {
            PathFrom::Client => "client",
            PathFrom::Server => "server",
            PathFrom::Run => "run",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            PathFrom::Client => "the client's PATH (sent with the start request)",
            PathFrom::Server => "the server's PATH (what `proctor serve` was started with)",
            PathFrom::Run => "the PATH recorded for the run when it started",
        }
    }

    fn remedy(self) -> &'static str {
        match self {
            PathFrom::Client => "put the folder that holds it on your PATH and start again",
            PathFrom::Server => {
                "put the folder that holds it on the PATH of the client that starts the run (the \
                 CLI and the cockpit send theirs), or restart the server (`proctor server stop`) \
                 from a shell whose PATH has it"
            }
            PathFrom::Run => {
                "a resume runs the tool the run started with; reinstall it there, or start a new \
                 run"
            }
        }
    }
}

/// The longest PATH shown in an error (characters, after sanitising).
const SHOWN_PATH: usize = 1000;

/// Finds the tool's executable on `path_var` (a `PATH` value), at launch time. `from` says
/// whose PATH it is, for the error.
///
/// Only absolute `PATH` entries are searched: an empty or relative entry would make the
/// result depend on the current folder, which a workspace controls. The first regular file
/// with an execute bit wins, as `execvp` would choose.
pub fn resolve_from(
    tool: Tool,
    path_var: Option<&OsStr>,
    from: PathFrom,
) -> Result<PathBuf, ProviderError> {
    resolve(tool, path_var).map_err(|e| match e {
        ProviderError::NotInstalled { tool, .. } => ProviderError::NotInstalled {
            tool,
            searched: match path_var {
                Some(p) => format!(
                    "{}: {}",
                    from.describe(),
                    crate::text::one_line(&p.to_string_lossy(), SHOWN_PATH)
                ),
                None => format!("{}, which is not set", from.describe()),
            },
            remedy: from.remedy(),
        },
        other => other,
    })
}

/// [`resolve_from`] without naming whose PATH it is.
pub fn resolve(tool: Tool, path_var: Option<&OsStr>) -> Result<PathBuf, ProviderError> {
    let program = tool.spec().program;
    if let Some(path_var) = path_var {
        for dir in std::env::split_paths(path_var) {
            if !dir.is_absolute() {
                continue;
            }
            let candidate = dir.join(program);
            if is_executable_file(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Err(ProviderError::NotInstalled {
        tool,
        searched: match path_var {
            Some(p) => format!(
                "PATH {}",
                crate::text::one_line(&p.to_string_lossy(), SHOWN_PATH)
            ),
            None => "PATH, which is not set".into(),
        },
        remedy: "put the folder that holds it on the PATH the run is started with",
    })
}

fn is_executable_file(p: &Path) -> bool {
    match std::fs::metadata(p) {
        Ok(m) => m.is_file() && m.permissions().mode() & 0o111 != 0,
        Err(_) => false,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "{} is not installed: no executable named `{}` in {} (only absolute entries are \
         searched). Remedy: install {} for this user, or {}",
        .tool, .tool.spec().program, .searched, .tool.spec().display_name, .remedy
    )]
    NotInstalled {
        tool: Tool,
        /// Whose PATH was searched and its value, sanitised and bounded.
        searched: String,
        remedy: &'static str,
    },
    #[error("unknown tool `{name}`; the tools are: {}", Tool::names())]
    UnknownTool { name: String },
    #[error(
        "refusing conversation id `{id}`: an id must be 1 to 200 printable ASCII characters \
         without spaces and must not start with '-'"
    )]
    BadConversationId { id: String },
    #[error("{tool} is not ready for input yet: {why}")]
    NotReady { tool: Tool, why: &'static str },
    #[error("{tool} has no turn in progress to interrupt")]
    NoActiveTurn { tool: Tool },
    #[error(
        "the workspace {path} must be an absolute UTF-8 path (the stdio protocols carry it as \
         JSON text)"
    )]
    BadWorkspace { path: PathBuf },
    #[error("{tool} has no open permission request with that id")]
    NoSuchRequest { tool: Tool },
    #[error("{tool} did not offer `{decision}` for this request; it offered: {offered}")]
    DecisionNotOffered {
        tool: Tool,
        decision: &'static str,
        offered: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names_round_trip_and_unknown_lists_the_five() {
        for t in Tool::ALL {
            assert_eq!(Tool::parse(t.name()).unwrap(), t);
        }
        let e = Tool::parse("bash").unwrap_err().to_string();
        assert!(e.contains("claude, codex, gemini, grok, opencode"), "{e}");
        assert!(Tool::parse("Claude").is_err(), "names are exact");
    }

    #[test]
    fn argv_of_every_form() {
        let a = |t, tr, r| launch(t, tr, r).unwrap().args;
        assert_eq!(
            a(Tool::Claude, Transport::Pipe, Some("abc-1")),
            [
                "-p",
                "--verbose",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--permission-prompt-tool",
                "stdio",
                "--resume=abc-1"
            ]
        );
        assert_eq!(a(Tool::Codex, Transport::Pipe, Some("t")), ["app-server"]);
        assert_eq!(a(Tool::Gemini, Transport::Pipe, None), ["--acp"]);
        assert_eq!(a(Tool::Grok, Transport::Pipe, None), ["agent", "stdio"]);
        assert_eq!(a(Tool::Opencode, Transport::Pipe, None), ["acp"]);
        assert!(a(Tool::Claude, Transport::Pty, None).is_empty());
        assert_eq!(
            a(Tool::Claude, Transport::Pty, Some("x")),
            ["--resume", "x"]
        );
        assert_eq!(a(Tool::Codex, Transport::Pty, Some("x")), ["resume", "x"]);
        assert_eq!(
            a(Tool::Opencode, Transport::Pty, Some("ses_1")),
            ["--session", "ses_1"]
        );
        assert_eq!(
            launch(Tool::Grok, Transport::Pty, None).unwrap().program,
            "grok"
        );
    }

    #[test]
    fn claudes_pty_form_carries_its_hooks_reporting_to_the_server() {
        let target = HookTarget {
            exe: "/opt/my tools/it's/proctor".into(),
            socket: "/run/x y/server.sock".into(),
        };
        for resume in [None, Some("c-1")] {
            let l = launch_with_hooks(Tool::Claude, Transport::Pty, resume, Some(&target)).unwrap();
            assert_eq!(l.args[0], "--settings", "{:?}", l.args);
            let tail: Vec<&str> = l.args[2..].iter().map(String::as_str).collect();
            match resume {
                None => assert!(tail.is_empty(), "{tail:?}"),
                Some(id) => assert_eq!(tail, ["--resume", id]),
            }
            let settings: serde_json::Value = serde_json::from_str(&l.args[1]).unwrap();
            let hooks = settings["hooks"].as_object().unwrap();
            assert_eq!(hooks.len(), CLAUDE_HOOK_EVENTS.len(), "{settings}");
            for event in CLAUDE_HOOK_EVENTS {
                let h = &hooks[event][0]["hooks"][0];
                assert_eq!(h["type"], "command", "{settings}");
                // claude runs a command hook through a shell: the real sh must split it into
                // exactly proctor's argv, whatever the paths hold.
                let cmd = h["command"].as_str().unwrap();
                let out = std::process::Command::new("/bin/sh")
                    .arg("-c")
                    .arg(format!("set -- {cmd}; printf '%s\\n' \"$@\""))
                    .output()
                    .unwrap();
                assert_eq!(
                    String::from_utf8(out.stdout).unwrap(),
                    "/opt/my tools/it's/proctor\nsession\nhook\n--socket\n/run/x y/server.sock\n",
                    "{cmd}"
                );
            }
        }
        // Without a target, and for every other form, the argv is launch's.
        assert_eq!(
            launch_with_hooks(Tool::Claude, Transport::Pty, None, None).unwrap(),
            launch(Tool::Claude, Transport::Pty, None).unwrap()
        );
        for t in Tool::ALL {
            assert_eq!(
                launch_with_hooks(t, Transport::Pipe, None, Some(&target)).unwrap(),
                launch(t, Transport::Pipe, None).unwrap()
            );
            if t != Tool::Claude {
                assert_eq!(
                    launch_with_hooks(t, Transport::Pty, None, Some(&target)).unwrap(),
                    launch(t, Transport::Pty, None).unwrap()
                );
            }
        }
    }

    #[test]
    fn only_a_canonical_lowercase_uuid_is_a_claude_session_id() {
        assert!(is_claude_session_id("0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0c"));
        for bad in [
            "",
            "0B8F2C1E-9A4D-4F6E-8C2B-1D3E5F7A9B0C",
            "0b8f2c1e9a4d4f6e8c2b1d3e5f7a9b0c",
            "0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0",
            "0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0cc",
            "0b8f2c1e-9a4d-4f6e-8c2b_1d3e5f7a9b0c",
            "../../../../etc/passwd-aaaa-bbbb-cccc",
            "served:0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a",
            "0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9b0\n",
            "0b8f2c1e-9a4d-4f6e-8c2b-1d3e5f7a9bé",
        ] {
            assert!(!is_claude_session_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn hostile_conversation_ids_never_become_arguments() {
        for bad in ["", "-rf", "--help", "a b", "a\nb", "é", &"x".repeat(201)] {
            assert!(
                matches!(
                    launch(Tool::Claude, Transport::Pipe, Some(bad)),
                    Err(ProviderError::BadConversationId { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn resolve_finds_the_first_executable_on_absolute_entries_only() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        // Not executable in a: skipped. Executable in b: found.
        std::fs::write(a.join("codex"), b"#!/bin/sh\n").unwrap();
        std::fs::write(b.join("codex"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(b.join("codex"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(resolve(Tool::Codex, Some(&path)).unwrap(), b.join("codex"));
        // A relative entry is ignored even when it would match.
        let rel = std::env::join_paths([std::path::Path::new("b")]).unwrap();
        let e = resolve(Tool::Codex, Some(&rel)).unwrap_err();
        assert!(matches!(
            e,
            ProviderError::NotInstalled {
                tool: Tool::Codex,
                ..
            }
        ));
        let msg = resolve(Tool::Gemini, None).unwrap_err().to_string();
        assert!(msg.contains("gemini is not installed"), "{msg}");
        assert!(msg.contains("Gemini CLI"), "{msg}");
        // A folder named like the tool is not an executable.
        std::fs::create_dir(a.join("grok")).unwrap();
        assert!(resolve(Tool::Grok, Some(&path)).is_err());
    }
}
