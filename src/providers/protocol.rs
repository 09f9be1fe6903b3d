//! The stdio protocols, as a pure state machine: no I/O, no clock, no threads.
//!
//! A runner owns the pipes; it writes what [`StdioSession::start`] returns, feeds every
//! stdout line to [`StdioSession::observe`] (which returns the lines to write back and the
//! [`Event`]s the line means), and asks for the bytes of an input ([`StdioSession::input`])
//! or an interrupt ([`StdioSession::interrupt`]). Every line returned ends with `\n`.
//!
//! Frame shapes, and where each was read:
//!
//! - **claude** (`claude -p --input-format stream-json --output-format stream-json`),
//!   from anthropics/claude-agent-sdk-python (`client.py`, `_internal/query.py`,
//!   `types.py`, `tests/test_message_parser.py`):
//!   - input: `{"type":"user","message":{"role":"user","content":TEXT},"parent_tool_use_id":null,"session_id":"default"}`;
//!   - interrupt: `{"type":"control_request","request_id":ID,"request":{"subtype":"interrupt"}}`,
//!     answered by `{"type":"control_response","response":{"subtype":"success","request_id":ID,...}}`;
//!   - output: `{"type":"system","subtype":"init","session_id":...}` then `assistant`
//!     frames then `{"type":"result",...,"session_id":...}` that ends the turn; an
//!     interrupted turn's result carries `terminal_reason` `aborted_streaming` or
//!     `aborted_tools` (SDK CHANGELOG, `ResultMessage.terminal_reason`).
//!
//!   There is no handshake: the process reads user lines as soon as it starts.
//! - **codex** (`codex app-server`), from openai/codex `codex-rs/app-server/README.md`:
//!   JSON-RPC 2.0 "with the `\"jsonrpc\":\"2.0\"` header omitted on the wire";
//!   `initialize` (with `clientInfo`) then the `initialized` notification, then
//!   `thread/start` or `thread/resume {threadId}` whose result carries `thread.id`;
//!   `turn/start {threadId, input:[{type:"text",text}]}`; `turn/interrupt {threadId, turnId}`;
//!   notifications `turn/started {threadId, turn}`, `item/agentMessage/delta
//!   {threadId, turnId, itemId, delta}`, `turn/completed {threadId, turn}` with
//!   `turn.status` `completed|interrupted|failed`. An unknown thread id is refused with an
//!   error whose message is `no rollout found for thread id <id>` (observed by several
//!   public clients; code -32600).
//! - **ACP** (`gemini --acp`, `grok agent stdio`, `opencode acp`), from the Agent Client
//!   Protocol docs (zed-industries/agent-client-protocol `docs/protocol/*.mdx`,
//!   `rust/agent.rs`): JSON-RPC 2.0 with `"jsonrpc":"2.0"`; `initialize {protocolVersion:1,
//!   clientCapabilities}`; `session/new {cwd, mcpServers:[]}` → `{sessionId}`;
//!   `session/load {sessionId, cwd, mcpServers:[]}` (replays the history as
//!   `session/update` notifications, then answers); `session/prompt {sessionId,
//!   prompt:[{type:"text",text}]}` → `{stopReason}`; the `session/cancel {sessionId}`
//!   notification makes the pending prompt answer `{"stopReason":"cancelled"}`.
//!
//! What the session does not decide: permission requests from the tool are surfaced as
//! [`Event::PermissionRequested`] (what is asked: [`PermissionAsk`]) and left to the caller,
//! who answers with a person's decision ([`StdioSession::answer_request`]) or refuses it
//! ([`StdioSession::cancel_request`]); nothing here ever allows a request on its own. Any
//! other request from the tool is answered "method not found", since proctor advertises no
//! client capability (no file system, no terminal).
//!
//! Permission requests, and where each shape was read:
//!
//! - **claude** (launched with `--permission-prompt-tool stdio`): `{"type":"control_request",
//!   "request_id":ID,"request":{"subtype":"can_use_tool","tool_name":…,"input":{…},
//!   "permission_suggestions":[…],"decision_reason":…,"blocked_path":…,"tool_use_id":…}}`,
//!   answered `{"type":"control_response","response":{"subtype":"success","request_id":ID,
//!   "response":{"behavior":"allow","updatedInput":INPUT}}}` (for the session: plus
//!   `"updatedPermissions"`, the tool's own suggestions with `destination` `session`) or
//!   `{"behavior":"deny","message":…}` (claude-agent-sdk-python `_internal/query.py`
//!   `_handle_control_request`). Allow for the session is offered only when the tool sent
//!   suggestions.
//! - **codex** (the JSON schema codex 0.171 generates, `codex app-server
//!   generate-json-schema`): `item/commandExecution/requestApproval {threadId, turnId, itemId,
//!   command, cwd, reason}` and `item/fileChange/requestApproval {threadId, turnId, itemId,
//!   reason, grantRoot}` (the paths are in the `fileChange` item's `changes`, sent by
//!   `item/started` before), answered `{"decision":"accept"|"acceptForSession"|"decline"}`;
//!   `item/permissions/requestApproval {permissions, reason}`, answered `{"permissions":
//!   GRANTED, "scope":"turn"|"session"}` (denied: nothing granted); the legacy
//!   `execCommandApproval {command:[…]}` and `applyPatchApproval {fileChanges:{PATH:…}}`,
//!   answered `{"decision":"approved"|"approved_for_session"|{"denied":{"rejection":…}}}`.
//! - **ACP** (`session/request_permission {sessionId, toolCall{toolCallId, title, kind,
//!   rawInput, locations}, options:[{optionId, name, kind}]}`, kinds `allow_once`,
//!   `allow_always`, `reject_once`, `reject_always`): answered `{"outcome":{"outcome":
//!   "selected","optionId":…}}`: allow is the `allow_once` option, allow for the session the
//!   `allow_always` one, deny the `reject_once` one; a decision whose option the tool did not
//!   offer is refused.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::{ProviderError, StdioProtocol, Tool, check_conversation_id};

/// The ACP protocol version proctor speaks.
pub const ACP_PROTOCOL_VERSION: u64 = 1;

/// The claude stderr line that refuses an unknown `--resume` id (observed in public issue
/// reports against Claude Code, e.g. anthropics/claude-code#62851).
pub const CLAUDE_NO_CONVERSATION: &str = "No conversation found with session ID:";

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Completed,
    Interrupted,
    Failed,
}

/// What a line of the tool's output means.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The tool reported its conversation id (claude `session_id`, codex thread id, ACP
    /// `sessionId`). Reported once per distinct value.
    ConversationId(String),
    /// A resumed tool reported a conversation id other than the one it was asked to resume.
    ResumeDiverged { expected: String, reported: String },
    /// The handshake is complete: input may be sent.
    Ready,
    /// The tool refused to resume the stored conversation.
    ResumeRefused { message: String },
    /// A turn began (codex `turn/started`; the other protocols have no such frame, their
    /// turn begins with the input).
    TurnStarted { turn_id: Option<String> },
    /// Text of the agent's reply (a whole message or a streamed chunk).
    AgentText(String),
    /// A turn ended.
    TurnEnded {
        outcome: TurnOutcome,
        /// The tool's own word for it (claude `subtype`/`terminal_reason`, codex
        /// `turn.status`, ACP `stopReason`) or an error message.
        detail: Option<String>,
    },
    /// The tool asks the operator for a permission; answer it with
    /// [`StdioSession::answer_request`], or refuse it with [`StdioSession::cancel_request`].
    PermissionRequested {
        method: String,
        id: Value,
        ask: PermissionAsk,
    },
    /// The tool gave up a permission request it had sent (claude
    /// `control_cancel_request`, codex `serverRequest/resolved` for a request proctor did
    /// not answer): no answer is expected any more.
    PermissionWithdrawn { id: Value },
    /// A request proctor made was answered with an error.
    RequestFailed {
        method: &'static str,
        message: String,
    },
    /// The tool said it cannot work (no login, its service unreachable, its retries
    /// exhausted): its own words and the frame that said so (issue 13 §2). Reported once per
    /// turn.
    Blocked {
        /// The frame: `result api_error` (claude), `error notification` or `turn/completed
        /// error` (codex), `stderr` (claude's "Not logged in").
        source: &'static str,
        words: String,
    },
    /// The tool reports an error it retries on its own (codex `error` with `willRetry:
    /// true`, "Reconnecting... 2/5"): the turn goes on. Reported when the words change.
    Retrying { words: String },
    /// A warning the tool reported (codex `warning` and `configWarning`).
    Warning { words: String },
    /// The turn ended on an account limit (issue 18 §2): claude's `result` of an API error
    /// `usage_limit_reached` or HTTP 429, codex's failed turn typed `usageLimitExceeded` or
    /// `rateLimitExceeded`. Reported after its [`Event::TurnEnded`]. `resets_at` is the
    /// tool's own reset time (Unix seconds) when it gave one: claude's rejected
    /// `rate_limit_event`, the latest reset of codex's exhausted `account/rateLimits/updated`
    /// windows. Whether a reset is too far away to show is the caller's call (it has a clock).
    LimitReached {
        kind: LimitKind,
        resets_at: Option<i64>,
    },
}

/// What kind of limit ended a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The account's plan allocation is used up.
    Usage,
    /// The provider throttles the rate of requests.
    Rate,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Usage => "usage",
            LimitKind::Rate => "rate",
        }
    }
}

/// One window of codex's `account/rateLimits/updated` (`primary` or `secondary`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct RateWindow {
    used_percent: Option<f64>,
    resets_at: Option<i64>,
}

/// The result of observing one output line.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Observed {
    /// Lines to write to the tool's stdin, in order.
    pub replies: Vec<Vec<u8>>,
    pub events: Vec<Event>,
}

/// A person's decision on a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    AllowForSession,
    Deny,
}

impl Decision {
    /// The decision's name on the wire and in the ledger's `options`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::AllowForSession => "allow_for_session",
            Decision::Deny => "deny",
        }
    }
}

/// The longest `what` of a permission request kept (characters, after sanitising).
pub const MAX_ASK_WHAT: usize = 500;
/// The longest `reason` of a permission request kept.
pub const MAX_ASK_REASON: usize = 500;

/// What a permission request asks, as the tool said it (sanitised with
/// [`crate::text::one_line`] and bounded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAsk {
    /// The tool call's kind or name (`Bash`, `commandExecution`, `edit`…).
    pub tool_name: String,
    /// The command or the file(s) it concerns.
    pub what: String,
    /// The tool's own reason, when it gave one.
    pub reason: Option<String>,
    /// The decisions the tool offered, in [`Decision`] order.
    pub options: Vec<Decision>,
}

/// What answering a request needs, kept until it is answered.
#[derive(Debug, Clone)]
enum AskContext {
    Claude {
        input: Value,
        suggestions: Vec<Value>,
    },
    /// `item/*/requestApproval` (commandExecution, fileChange).
    CodexItem,
    /// `item/permissions/requestApproval`: what it asked for, granted as asked.
    CodexPermissions { requested: Value },
    /// `execCommandApproval`, `applyPatchApproval`.
    CodexLegacy,
    Acp {
        /// The option ids offered for allow, allow for the session, deny.
        allow: Option<String>,
        allow_always: Option<String>,
        reject: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Initialize,
    ThreadStart,
    ThreadResume,
    TurnStart,
    TurnInterrupt,
    SessionNew,
    SessionLoad,
    Prompt,
}

impl Pending {
    fn method(self) -> &'static str {
        match self {
            Pending::Initialize => "initialize",
            Pending::ThreadStart => "thread/start",
            Pending::ThreadResume => "thread/resume",
            Pending::TurnStart => "turn/start",
            Pending::TurnInterrupt => "turn/interrupt",
            Pending::SessionNew => "session/new",
            Pending::SessionLoad => "session/load",
            Pending::Prompt => "session/prompt",
        }
    }
}

/// One stdio conversation with one tool process.
#[derive(Debug, Clone)]
pub struct StdioSession {
    tool: Tool,
    protocol: StdioProtocol,
    cwd: String,
    resume: Option<String>,
    next_id: u64,
    pending: BTreeMap<u64, Pending>,
    conversation_id: Option<String>,
    ready: bool,
    /// claude: user lines sent whose `result` has not been seen.
    claude_in_flight: u32,
    control_seq: u64,
    /// codex: a `turn/start` was sent and its turn has not completed.
    codex_turn_open: bool,
    codex_turn_id: Option<String>,
    /// ACP: a `session/prompt` is pending.
    acp_prompt_open: bool,
    /// ACP: a `session/cancel` was sent for the pending prompt.
    acp_cancel_sent: bool,
    /// claude: the words of an API error message of this turn (an `assistant` frame with
    /// `is_api_error_message`, model `<synthetic>`).
    claude_api_error: Option<String>,
    /// codex: the words of the last retry reported, and whether this turn was reported
    /// blocked already.
    codex_last_retry: Option<String>,
    codex_blocked: bool,
    /// claude: the `error` word of this turn's API error message (`usage_limit_reached`,
    /// `rate_limit`…).
    claude_api_error_kind: Option<String>,
    /// claude: the reset time of the last `rate_limit_event` whose `status` was `rejected`
    /// since the last `result`.
    claude_rejected_reset: Option<Option<i64>>,
    /// codex: the windows of `account/rateLimits/updated`, merged (the notification is
    /// sparse): `primary`, `secondary`.
    codex_windows: [RateWindow; 2],
    /// Permission requests not answered yet, by the tool's request id (as JSON text).
    asks: BTreeMap<String, (Vec<Decision>, AskContext)>,
    /// codex: the paths of the `fileChange` items started and not completed, by item id.
    codex_file_items: BTreeMap<String, String>,
}

fn line(v: Value) -> Vec<u8> {
    // Serialising a Value cannot fail (string keys, no non-finite numbers by construction).
    let mut out = serde_json::to_vec(&v).unwrap_or_default();
    out.push(b'\n');
    out
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

impl StdioSession {
    /// A session with `tool`'s stdio form, working in `cwd` (absolute), resuming `resume`
    /// when given (claude resumes through its argv, see [`super::launch`]; the others
    /// through the handshake built here).
    pub fn new(tool: Tool, cwd: &Path, resume: Option<&str>) -> Result<Self, ProviderError> {
        if let Some(id) = resume {
            check_conversation_id(id)?;
        }
        let cwd_str = match cwd.to_str() {
            Some(s) if cwd.is_absolute() => s.to_string(),
            _ => {
                return Err(ProviderError::BadWorkspace {
                    path: cwd.to_path_buf(),
                });
            }
        };
        Ok(StdioSession {
            tool,
            protocol: tool.spec().stdio_protocol,
            cwd: cwd_str,
            resume: resume.map(str::to_string),
            next_id: 0,
            pending: BTreeMap::new(),
            conversation_id: None,
            ready: false,
            claude_in_flight: 0,
            control_seq: 0,
            codex_turn_open: false,
            codex_turn_id: None,
            acp_prompt_open: false,
            acp_cancel_sent: false,
            claude_api_error: None,
            codex_last_retry: None,
            codex_blocked: false,
            claude_api_error_kind: None,
            claude_rejected_reset: None,
            codex_windows: [RateWindow::default(); 2],
            asks: BTreeMap::new(),
            codex_file_items: BTreeMap::new(),
        })
    }

    pub fn tool(&self) -> Tool {
        self.tool
    }

    /// The conversation id the tool reported, once it has.
    pub fn conversation_id(&self) -> Option<&str> {
        self.conversation_id.as_deref()
    }

    /// Whether input may be sent.
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Whether a turn is in progress (input sent, its end not yet seen).
    pub fn turn_in_progress(&self) -> bool {
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => self.claude_in_flight > 0,
            StdioProtocol::CodexAppServer => self.codex_turn_open,
            StdioProtocol::Acp => self.acp_prompt_open,
        }
    }

    fn request(&mut self, method: &str, params: Value, kind: Pending) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, kind);
        match self.protocol {
            StdioProtocol::Acp => {
                line(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            }
            _ => line(json!({"id": id, "method": method, "params": params})),
        }
    }

    /// The first lines to write (the handshake's opening), and marks claude ready.
    pub fn start(&mut self) -> Vec<Vec<u8>> {
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => {
                self.ready = true;
                Vec::new()
            }
            StdioProtocol::CodexAppServer => vec![self.request(
                "initialize",
                json!({"clientInfo": {
                    "name": "proctor",
                    "title": "proctor",
                    "version": env!("CARGO_PKG_VERSION"),
                }}),
                Pending::Initialize,
            )],
            StdioProtocol::Acp => vec![self.request(
                "initialize",
                json!({
                    "protocolVersion": ACP_PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": false, "writeTextFile": false},
                        "terminal": false,
                    },
                }),
                Pending::Initialize,
            )],
        }
    }

    /// The line that sends `text` as the operator's next message.
    pub fn input(&mut self, text: &str) -> Result<Vec<u8>, ProviderError> {
        if !self.ready {
            return Err(ProviderError::NotReady {
                tool: self.tool,
                why: "the protocol handshake has not completed",
            });
        }
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => {
                self.claude_in_flight += 1;
                Ok(line(json!({
                    "type": "user",
                    "message": {"role": "user", "content": text},
                    "parent_tool_use_id": null,
                    "session_id": "default",
                })))
            }
            StdioProtocol::CodexAppServer => {
                if self.codex_turn_open {
                    return Err(ProviderError::NotReady {
                        tool: self.tool,
                        why: "a turn is in progress; interrupt it or wait for its end",
                    });
                }
                let thread = self.conversation_id.clone().unwrap_or_default();
                self.codex_turn_open = true;
                self.codex_turn_id = None;
                Ok(self.request(
                    "turn/start",
                    json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
                    Pending::TurnStart,
                ))
            }
            StdioProtocol::Acp => {
                if self.acp_prompt_open {
                    return Err(ProviderError::NotReady {
                        tool: self.tool,
                        why: "a prompt is in progress; cancel it or wait for its answer",
                    });
                }
                let session = self.conversation_id.clone().unwrap_or_default();
                self.acp_prompt_open = true;
                self.acp_cancel_sent = false;
                Ok(self.request(
                    "session/prompt",
                    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
                    Pending::Prompt,
                ))
            }
        }
    }

    /// The line that interrupts the turn in progress; the process stays.
    pub fn interrupt(&mut self) -> Result<Vec<u8>, ProviderError> {
        if !self.turn_in_progress() {
            return Err(ProviderError::NoActiveTurn { tool: self.tool });
        }
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => {
                self.control_seq += 1;
                Ok(line(json!({
                    "type": "control_request",
                    "request_id": format!("proctor_interrupt_{}", self.control_seq),
                    "request": {"subtype": "interrupt"},
                })))
            }
            StdioProtocol::CodexAppServer => {
                let Some(turn) = self.codex_turn_id.clone() else {
                    return Err(ProviderError::NotReady {
                        tool: self.tool,
                        why: "the turn's id has not been reported yet",
                    });
                };
                let thread = self.conversation_id.clone().unwrap_or_default();
                Ok(self.request(
                    "turn/interrupt",
                    json!({"threadId": thread, "turnId": turn}),
                    Pending::TurnInterrupt,
                ))
            }
            StdioProtocol::Acp => {
                let session = self.conversation_id.clone().unwrap_or_default();
                self.acp_cancel_sent = true;
                Ok(line(json!({
                    "jsonrpc": "2.0",
                    "method": "session/cancel",
                    "params": {"sessionId": session},
                })))
            }
        }
    }

    /// A refusal of a request the tool made ([`Event::PermissionRequested`]), without a
    /// person's decision: claude gets a `control_response` error, codex the approval
    /// decision `cancel` (`abort` for the legacy requests, nothing granted for a permissions
    /// request), ACP the permission outcome `cancelled`.
    pub fn cancel_request(&mut self, id: &Value) -> Vec<u8> {
        let ctx = self.asks.remove(&id.to_string()).map(|(_, c)| c);
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => line(json!({
                "type": "control_response",
                "response": {
                    "subtype": "error",
                    "request_id": id,
                    "error": "refused by proctor",
                },
            })),
            StdioProtocol::CodexAppServer => match ctx {
                Some(AskContext::CodexLegacy) => {
                    line(json!({"id": id, "result": {"decision": "abort"}}))
                }
                Some(AskContext::CodexPermissions { .. }) => {
                    line(json!({"id": id, "result": {"permissions": {}, "scope": "turn"}}))
                }
                _ => line(json!({"id": id, "result": {"decision": "cancel"}})),
            },
            StdioProtocol::Acp => line(json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {"outcome": {"outcome": "cancelled"}},
            })),
        }
    }

    /// The permission requests not answered yet: the tool's request ids.
    pub fn open_requests(&self) -> usize {
        self.asks.len()
    }

    /// Whether an interrupt leaves the open permission requests to be answered `cancelled`
    /// by the client (ACP: "the Client MUST respond to all pending
    /// `session/request_permission` requests with the `cancelled` outcome" once it sent
    /// `session/cancel`); claude and codex withdraw theirs themselves.
    pub fn interrupt_cancels_requests(&self) -> bool {
        self.protocol == StdioProtocol::Acp
    }

    /// The tool withdrew its request `id`, if it was open.
    fn withdrawn(&mut self, id: Option<&Value>, out: &mut Observed) {
        if let Some(id) = id
            && self.asks.remove(&id.to_string()).is_some()
        {
            out.events
                .push(Event::PermissionWithdrawn { id: id.clone() });
        }
    }

    /// The answer that gives the tool a person's `decision` on its request `id`
    /// ([`Event::PermissionRequested`]), in the tool's own shape (see the module's docs).
    /// Refused, writing nothing, for a request not open or a decision the tool did not offer.
    pub fn answer_request(
        &mut self,
        id: &Value,
        decision: Decision,
    ) -> Result<Vec<u8>, ProviderError> {
        let key = id.to_string();
        let Some((offered, ctx)) = self.asks.get(&key) else {
            return Err(ProviderError::NoSuchRequest { tool: self.tool });
        };
        if !offered.contains(&decision) {
            return Err(ProviderError::DecisionNotOffered {
                tool: self.tool,
                decision: decision.as_str(),
                offered: offered
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let bytes = match ctx {
            AskContext::Claude { input, suggestions } => {
                let response = match decision {
                    Decision::Deny => json!({
                        "behavior": "deny",
                        "message": "denied by a person through proctor",
                    }),
                    Decision::Allow => json!({"behavior": "allow", "updatedInput": input}),
                    Decision::AllowForSession => {
                        let for_session: Vec<Value> = suggestions
                            .iter()
                            .map(|sug| {
                                let mut sug = sug.clone();
                                if let Some(o) = sug.as_object_mut() {
                                    o.insert("destination".into(), json!("session"));
                                }
                                sug
                            })
                            .collect();
                        json!({
                            "behavior": "allow",
                            "updatedInput": input,
                            "updatedPermissions": for_session,
                        })
                    }
                };
                line(json!({
                    "type": "control_response",
                    "response": {"subtype": "success", "request_id": id, "response": response},
                }))
            }
            AskContext::CodexItem => {
                let d = match decision {
                    Decision::Allow => "accept",
                    Decision::AllowForSession => "acceptForSession",
                    Decision::Deny => "decline",
                };
                line(json!({"id": id, "result": {"decision": d}}))
            }
            AskContext::CodexPermissions { requested } => {
                let result = match decision {
                    Decision::Allow => json!({"permissions": requested, "scope": "turn"}),
                    Decision::AllowForSession => {
                        json!({"permissions": requested, "scope": "session"})
                    }
                    Decision::Deny => json!({"permissions": {}, "scope": "turn"}),
                };
                line(json!({"id": id, "result": result}))
            }
            AskContext::CodexLegacy => {
                let d = match decision {
                    Decision::Allow => json!("approved"),
                    Decision::AllowForSession => json!("approved_for_session"),
                    Decision::Deny => {
                        json!({"denied": {"rejection": "denied by a person through proctor"}})
                    }
                };
                line(json!({"id": id, "result": {"decision": d}}))
            }
            AskContext::Acp {
                allow,
                allow_always,
                reject,
            } => {
                let option = match decision {
                    Decision::Allow => allow,
                    Decision::AllowForSession => allow_always,
                    Decision::Deny => reject,
                };
                line(json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {"outcome": {"outcome": "selected", "optionId": option}},
                }))
            }
        };
        self.asks.remove(&key);
        Ok(bytes)
    }

    /// Keeps a permission request open and says what it asks.
    fn ask(
        &mut self,
        method: &str,
        id: &Value,
        ask: PermissionAsk,
        ctx: AskContext,
        out: &mut Observed,
    ) {
        self.asks.insert(id.to_string(), (ask.options.clone(), ctx));
        out.events.push(Event::PermissionRequested {
            method: method.to_string(),
            id: id.clone(),
            ask,
        });
    }

    /// claude `can_use_tool`.
    fn claude_ask(&mut self, v: &Value, out: &mut Observed) {
        let id = v.get("request_id").cloned().unwrap_or(Value::Null);
        let req = v.get("request").cloned().unwrap_or(Value::Null);
        let input = req.get("input").cloned().unwrap_or_else(|| json!({}));
        let suggestions: Vec<Value> = req
            .get("permission_suggestions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut options = vec![Decision::Allow];
        if !suggestions.is_empty() {
            options.push(Decision::AllowForSession);
        }
        options.push(Decision::Deny);
        let what = [
            "/command",
            "/file_path",
            "/notebook_path",
            "/path",
            "/url",
            "/pattern",
        ]
        .iter()
        .find_map(|p| str_at(&input, p).map(str::to_string))
        .unwrap_or_else(|| input.to_string());
        let reason = str_at(&req, "/decision_reason")
            .or_else(|| str_at(&req, "/blocked_path"))
            .or_else(|| str_at(&input, "/description"))
            .map(str::to_string);
        let ask = permission_ask(
            str_at(&req, "/tool_name").unwrap_or("unknown"),
            &what,
            reason.as_deref(),
            options,
        );
        self.ask(
            "can_use_tool",
            &id,
            ask,
            AskContext::Claude { input, suggestions },
            out,
        );
    }

    /// codex `*requestApproval` and the legacy approvals; false for another method.
    fn codex_ask(&mut self, m: &str, id: &Value, v: &Value, out: &mut Observed) -> bool {
        let p = v.get("params").cloned().unwrap_or(Value::Null);
        let reason = str_at(&p, "/reason");
        let all = vec![Decision::Allow, Decision::AllowForSession, Decision::Deny];
        let (tool_name, what, ctx) = match m {
            "item/commandExecution/requestApproval" => {
                let what = str_at(&p, "/command")
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!("command of item {}", str_at(&p, "/itemId").unwrap_or("?"))
                    });
                ("commandExecution", what, AskContext::CodexItem)
            }
            "item/fileChange/requestApproval" => {
                let item = str_at(&p, "/itemId").unwrap_or("?");
                let what = self
                    .codex_file_items
                    .get(item)
                    .cloned()
                    .or_else(|| str_at(&p, "/grantRoot").map(str::to_string))
                    .unwrap_or_else(|| format!("file change of item {item}"));
                ("fileChange", what, AskContext::CodexItem)
            }
            "item/permissions/requestApproval" => {
                let requested = p.get("permissions").cloned().unwrap_or_else(|| json!({}));
                (
                    "permissions",
                    requested.to_string(),
                    AskContext::CodexPermissions { requested },
                )
            }
            "execCommandApproval" => {
                let what = match p.get("command") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                    _ => String::new(),
                };
                ("execCommand", what, AskContext::CodexLegacy)
            }
            "applyPatchApproval" => {
                let what = match p.get("fileChanges") {
                    Some(Value::Object(o)) => o.keys().cloned().collect::<Vec<_>>().join(", "),
                    _ => String::new(),
                };
                ("applyPatch", what, AskContext::CodexLegacy)
            }
            _ => return false,
        };
        let ask = permission_ask(tool_name, &what, reason, all);
        self.ask(m, id, ask, ctx, out);
        true
    }

    /// ACP `session/request_permission`.
    fn acp_ask(&mut self, id: &Value, v: &Value, out: &mut Observed) {
        let p = v.get("params").cloned().unwrap_or(Value::Null);
        let opt = |kind: &str| -> Option<String> {
            p.get("options")
                .and_then(Value::as_array)?
                .iter()
                .find(|o| str_at(o, "/kind") == Some(kind))
                .and_then(|o| str_at(o, "/optionId"))
                .map(str::to_string)
        };
        let (allow, allow_always, reject) =
            (opt("allow_once"), opt("allow_always"), opt("reject_once"));
        let mut options = Vec::new();
        for (d, o) in [
            (Decision::Allow, &allow),
            (Decision::AllowForSession, &allow_always),
            (Decision::Deny, &reject),
        ] {
            if o.is_some() {
                options.push(d);
            }
        }
        let call = p.get("toolCall").cloned().unwrap_or(Value::Null);
        let title = str_at(&call, "/title");
        let paths: Vec<&str> = call
            .get("locations")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|l| str_at(l, "/path")).collect())
            .unwrap_or_default();
        let what = str_at(&call, "/rawInput/command")
            .map(str::to_string)
            .or_else(|| (!paths.is_empty()).then(|| paths.join(", ")))
            .or_else(|| title.map(str::to_string))
            .unwrap_or_default();
        let reason = title.filter(|t| *t != what);
        let ask = permission_ask(
            str_at(&call, "/kind").unwrap_or("other"),
            &what,
            reason,
            options,
        );
        self.ask(
            "session/request_permission",
            id,
            ask,
            AskContext::Acp {
                allow,
                allow_always,
                reject,
            },
            out,
        );
    }

    fn method_not_found(&self, id: &Value) -> Vec<u8> {
        let err = json!({"code": -32601, "message": "Method not found"});
        match self.protocol {
            StdioProtocol::Acp => line(json!({"jsonrpc": "2.0", "id": id, "error": err})),
            _ => line(json!({"id": id, "error": err})),
        }
    }

    fn set_conversation(&mut self, id: &str, out: &mut Observed) {
        if check_conversation_id(id).is_err() {
            out.events.push(Event::RequestFailed {
                method: "conversation id",
                message: format!(
                    "the tool reported an unusable conversation id `{}`",
                    crate::text::one_line(id, 80)
                ),
            });
            return;
        }
        if let Some(expected) = &self.resume
            && expected != id
        {
            out.events.push(Event::ResumeDiverged {
                expected: expected.clone(),
                reported: id.to_string(),
            });
        }
        if self.conversation_id.as_deref() != Some(id) {
            self.conversation_id = Some(id.to_string());
            out.events.push(Event::ConversationId(id.to_string()));
        }
    }

    /// What one line of the tool's stdout means, and what to answer.
    pub fn observe(&mut self, raw: &[u8]) -> Observed {
        let mut out = Observed::default();
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(v) = serde_json::from_slice::<Value>(raw) else {
            return out;
        };
        if !v.is_object() {
            return out;
        }
        match self.protocol {
            StdioProtocol::ClaudeStreamJson => self.observe_claude(&v, &mut out),
            StdioProtocol::CodexAppServer | StdioProtocol::Acp => self.observe_rpc(&v, &mut out),
        }
        out
    }

    fn observe_claude(&mut self, v: &Value, out: &mut Observed) {
        match str_at(v, "/type") {
            Some("system") => {
                if str_at(v, "/subtype") == Some("init")
                    && let Some(id) = str_at(v, "/session_id")
                {
                    self.set_conversation(id, out);
                }
            }
            Some("assistant") => {
                // An API error is written as an assistant message the model never sent
                // (model `<synthetic>`, `is_api_error_message: true`, `error` e.g.
                // `authentication_failed`), seen from claude 2.1.332 without a login.
                let api_error = v.get("is_api_error_message").and_then(Value::as_bool)
                    == Some(true)
                    || (str_at(v, "/message/model") == Some("<synthetic>")
                        && str_at(v, "/error").is_some());
                if let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) {
                    for b in blocks {
                        if str_at(b, "/type") == Some("text")
                            && let Some(t) = str_at(b, "/text")
                        {
                            if api_error {
                                self.claude_api_error = Some(t.to_string());
                            }
                            out.events.push(Event::AgentText(t.to_string()));
                        }
                    }
                }
                if api_error && self.claude_api_error.is_none() {
                    self.claude_api_error = str_at(v, "/error").map(str::to_string);
                }
                if api_error && let Some(word) = str_at(v, "/error") {
                    self.claude_api_error_kind = Some(word.to_string());
                }
            }
            // `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"|
            // "allowed_warning"|"rejected","resetsAt":UNIX,"rateLimitType":"five_hour"|
            // "seven_day"|…,…}}`: only a rejected window says when a limit lifts.
            Some("rate_limit_event")
                if str_at(v, "/rate_limit_info/status") == Some("rejected") =>
            {
                let reset = v
                    .pointer("/rate_limit_info/resetsAt")
                    .and_then(Value::as_i64);
                self.claude_rejected_reset = Some(reset);
            }
            Some("result") => {
                if let Some(id) = str_at(v, "/session_id") {
                    self.set_conversation(id, out);
                }
                self.claude_in_flight = self.claude_in_flight.saturating_sub(1);
                let terminal = str_at(v, "/terminal_reason");
                let subtype = str_at(v, "/subtype");
                let outcome = if terminal.is_some_and(|t| t.starts_with("aborted")) {
                    TurnOutcome::Interrupted
                } else if v.pointer("/is_error").and_then(Value::as_bool) == Some(true)
                    || subtype.is_some_and(|s| s != "success")
                {
                    TurnOutcome::Failed
                } else {
                    TurnOutcome::Completed
                };
                out.events.push(Event::TurnEnded {
                    outcome,
                    detail: terminal.or(subtype).map(str::to_string),
                });
                let api_kind = self.claude_api_error_kind.take();
                let rejected = self.claude_rejected_reset.take();
                if outcome == TurnOutcome::Failed {
                    let word = str_at(v, "/error").or(api_kind.as_deref());
                    let status = v.pointer("/api_error_status").and_then(Value::as_i64);
                    let kind = if word == Some("usage_limit_reached") {
                        Some(LimitKind::Usage)
                    } else if status == Some(429) || word == Some("rate_limit") {
                        // A 429 while a plan window was rejected is that window's allocation
                        // used up; without one it is the request rate.
                        Some(if rejected.is_some() {
                            LimitKind::Usage
                        } else {
                            LimitKind::Rate
                        })
                    } else {
                        None
                    };
                    if let Some(kind) = kind {
                        out.events.push(Event::LimitReached {
                            kind,
                            resets_at: rejected.flatten(),
                        });
                        // A limit is not a missing login: no `Blocked` for it.
                        self.claude_api_error = None;
                        return;
                    }
                }
                // A turn the API refused (no login, no credit, the service unreachable):
                // `terminal_reason: "api_error"` (claude 2.1.332 sends `subtype: "success"`
                // with `is_error: true` for it), or an error result after an API error
                // message.
                let api_error = self.claude_api_error.take();
                if terminal == Some("api_error")
                    || (outcome == TurnOutcome::Failed && api_error.is_some())
                {
                    let words = str_at(v, "/result")
                        .filter(|r| !r.trim().is_empty())
                        .map(str::to_string)
                        .or(api_error)
                        .unwrap_or_else(|| "api_error".to_string());
                    out.events.push(Event::Blocked {
                        source: "result api_error",
                        words,
                    });
                }
            }
            Some("control_response") if str_at(v, "/response/subtype") == Some("error") => {
                out.events.push(Event::RequestFailed {
                    method: "control_request",
                    message: str_at(v, "/response/error").unwrap_or("").to_string(),
                });
            }
            Some("control_cancel_request") => self.withdrawn(v.get("request_id"), out),
            Some("control_request") => {
                if str_at(v, "/request/subtype") == Some("can_use_tool") {
                    self.claude_ask(v, out);
                } else {
                    // hook callbacks, MCP messages…: proctor registered none.
                    let id = v.get("request_id").cloned().unwrap_or(Value::Null);
                    out.replies.push(line(json!({
                        "type": "control_response",
                        "response": {
                            "subtype": "error",
                            "request_id": id,
                            "error": "not supported by proctor",
                        },
                    })));
                }
            }
            _ => {}
        }
    }

    fn observe_rpc(&mut self, v: &Value, out: &mut Observed) {
        let method = str_at(v, "/method");
        let id = v.get("id");
        match (method, id) {
            (Some(m), Some(id)) => {
                let asked = match self.protocol {
                    StdioProtocol::Acp if m == "session/request_permission" => {
                        self.acp_ask(id, v, out);
                        true
                    }
                    StdioProtocol::CodexAppServer => self.codex_ask(m, id, v, out),
                    _ => false,
                };
                if !asked {
                    out.replies.push(self.method_not_found(id));
                }
            }
            (Some(m), None) => self.observe_notification(m, v, out),
            (None, Some(id)) => {
                let Some(kind) = id.as_u64().and_then(|n| self.pending.remove(&n)) else {
                    return;
                };
                match v.get("error") {
                    Some(err) => self.observe_error(kind, err, out),
                    None => {
                        let result = v.get("result").cloned().unwrap_or(Value::Null);
                        self.observe_result(kind, &result, out);
                    }
                }
            }
            (None, None) => {}
        }
    }

    fn observe_result(&mut self, kind: Pending, result: &Value, out: &mut Observed) {
        match kind {
            Pending::Initialize => {
                let resume = self.resume.clone();
                match (self.protocol, resume) {
                    (StdioProtocol::CodexAppServer, r) => {
                        out.replies.push(line(json!({"method": "initialized"})));
                        let cwd = self.cwd.clone();
                        out.replies.push(match r {
                            Some(id) => self.request(
                                "thread/resume",
                                json!({"threadId": id, "cwd": cwd}),
                                Pending::ThreadResume,
                            ),
                            None => self.request(
                                "thread/start",
                                json!({"cwd": cwd}),
                                Pending::ThreadStart,
                            ),
                        });
                    }
                    (_, r) => {
                        let cwd = self.cwd.clone();
                        out.replies.push(match r {
                            Some(id) => self.request(
                                "session/load",
                                json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
                                Pending::SessionLoad,
                            ),
                            None => self.request(
                                "session/new",
                                json!({"cwd": cwd, "mcpServers": []}),
                                Pending::SessionNew,
                            ),
                        });
                    }
                }
            }
            Pending::ThreadStart | Pending::ThreadResume => match str_at(result, "/thread/id") {
                Some(id) => {
                    let id = id.to_string();
                    self.set_conversation(&id, out);
                    self.ready = true;
                    out.events.push(Event::Ready);
                }
                None => out.events.push(Event::RequestFailed {
                    method: kind.method(),
                    message: "the result carries no thread.id".into(),
                }),
            },
            Pending::SessionNew => match str_at(result, "/sessionId") {
                Some(id) => {
                    let id = id.to_string();
                    self.set_conversation(&id, out);
                    self.ready = true;
                    out.events.push(Event::Ready);
                }
                None => out.events.push(Event::RequestFailed {
                    method: kind.method(),
                    message: "the result carries no sessionId".into(),
                }),
            },
            Pending::SessionLoad => {
                // session/load answers without repeating the id: the loaded session is the
                // one asked for.
                if let Some(id) = self.resume.clone() {
                    self.set_conversation(&id, out);
                }
                self.ready = true;
                out.events.push(Event::Ready);
            }
            Pending::TurnStart => {
                if self.codex_turn_id.is_none()
                    && let Some(t) = str_at(result, "/turn/id")
                {
                    self.codex_turn_id = Some(t.to_string());
                }
            }
            Pending::TurnInterrupt => {}
            Pending::Prompt => {
                self.acp_prompt_open = false;
                let mut reason = str_at(result, "/stopReason").map(str::to_string);
                let outcome = match reason.as_deref() {
                    Some("cancelled") => TurnOutcome::Interrupted,
                    // A prompt answered after proctor cancelled it was interrupted, whatever
                    // its stop reason (opencode 1.18.33 says `end_turn`).
                    Some(r) if self.acp_cancel_sent => {
                        reason = Some(format!("{r} (after session/cancel)"));
                        TurnOutcome::Interrupted
                    }
                    Some("refusal") | None => TurnOutcome::Failed,
                    Some(_) => TurnOutcome::Completed,
                };
                self.acp_cancel_sent = false;
                out.events.push(Event::TurnEnded {
                    outcome,
                    detail: reason,
                });
            }
        }
    }

    fn observe_error(&mut self, kind: Pending, err: &Value, out: &mut Observed) {
        let mut message = str_at(err, "/message").unwrap_or("").to_string();
        if let Some(details) = str_at(err, "/data/details") {
            message = format!("{message}: {details}");
        }
        match kind {
            Pending::ThreadResume | Pending::SessionLoad => {
                out.events.push(Event::ResumeRefused { message });
            }
            Pending::TurnStart => {
                self.codex_turn_open = false;
                out.events.push(Event::TurnEnded {
                    outcome: TurnOutcome::Failed,
                    detail: Some(message),
                });
            }
            Pending::Prompt => {
                self.acp_prompt_open = false;
                out.events.push(Event::TurnEnded {
                    outcome: TurnOutcome::Failed,
                    detail: Some(message.clone()),
                });
                // ACP's "authentication required" (-32000), or opencode's `APIError` (1.18.33
                // without a network, after a minute of retries: "Internal error: Cannot
                // connect to API: …", `data.errorName: "APIError"`).
                let code = err.get("code").and_then(Value::as_i64);
                let name = str_at(err, "/data/errorName");
                if code == Some(-32000)
                    || matches!(name, Some("APIError" | "ProviderAuthError" | "AuthError"))
                {
                    out.events.push(Event::Blocked {
                        source: "session/prompt error",
                        words: message,
                    });
                }
            }
            _ => out.events.push(Event::RequestFailed {
                method: kind.method(),
                message,
            }),
        }
    }

    fn observe_notification(&mut self, m: &str, v: &Value, out: &mut Observed) {
        match (self.protocol, m) {
            (StdioProtocol::CodexAppServer, "turn/started") => {
                self.codex_last_retry = None;
                self.codex_blocked = false;
                let turn = str_at(v, "/params/turn/id").map(str::to_string);
                if turn.is_some() {
                    self.codex_turn_id = turn.clone();
                }
                out.events.push(Event::TurnStarted { turn_id: turn });
            }
            (StdioProtocol::CodexAppServer, "item/started")
                if str_at(v, "/params/item/type") == Some("fileChange") =>
            {
                let paths: Vec<&str> = v
                    .pointer("/params/item/changes")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|c| str_at(c, "/path")).collect())
                    .unwrap_or_default();
                if let Some(item) = str_at(v, "/params/item/id")
                    && self.codex_file_items.len() < 64
                {
                    self.codex_file_items
                        .insert(item.to_string(), paths.join(", "));
                }
            }
            (StdioProtocol::CodexAppServer, "serverRequest/resolved") => {
                self.withdrawn(v.pointer("/params/requestId"), out);
            }
            (StdioProtocol::CodexAppServer, "item/completed") => {
                if let Some(item) = str_at(v, "/params/item/id") {
                    self.codex_file_items.remove(item);
                }
            }
            (StdioProtocol::CodexAppServer, "item/agentMessage/delta") => {
                if let Some(d) = str_at(v, "/params/delta") {
                    out.events.push(Event::AgentText(d.to_string()));
                }
            }
            (StdioProtocol::CodexAppServer, "turn/completed") => {
                self.codex_turn_open = false;
                self.codex_turn_id = None;
                let status = str_at(v, "/params/turn/status").map(str::to_string);
                let outcome = match status.as_deref() {
                    Some("completed") => TurnOutcome::Completed,
                    Some("interrupted") => TurnOutcome::Interrupted,
                    _ => TurnOutcome::Failed,
                };
                let detail = str_at(v, "/params/turn/error/message")
                    .map(str::to_string)
                    .or(status);
                out.events.push(Event::TurnEnded { outcome, detail });
                if outcome == TurnOutcome::Failed
                    && let Some(kind) = v.pointer("/params/turn/error").and_then(codex_limit)
                {
                    out.events.push(Event::LimitReached {
                        kind,
                        resets_at: self.codex_exhausted_reset(),
                    });
                    return;
                }
                if outcome == TurnOutcome::Failed
                    && let Some(err) = v.pointer("/params/turn/error")
                    && codex_error_blocks(err)
                    && !std::mem::replace(&mut self.codex_blocked, true)
                {
                    out.events.push(Event::Blocked {
                        source: "turn/completed error",
                        words: codex_error_words(err),
                    });
                }
            }
            (StdioProtocol::CodexAppServer, "error") => {
                let Some(err) = v.pointer("/params/error") else {
                    return;
                };
                let words = codex_error_words(err);
                let will_retry = v.pointer("/params/willRetry").and_then(Value::as_bool);
                // After its numbered retries ("Reconnecting... 5/5") codex 0.171 falls back
                // to HTTPS and then waits for the network without end, still saying
                // `willRetry: true`: that is the point where it cannot work.
                let exhausted = match will_retry {
                    Some(true) => {
                        str_at(err, "/message").is_some_and(|m| m.contains("waiting for network"))
                    }
                    _ => codex_error_blocks(err),
                };
                if exhausted {
                    if !std::mem::replace(&mut self.codex_blocked, true) {
                        out.events.push(Event::Blocked {
                            source: "error notification",
                            words,
                        });
                    }
                } else if will_retry == Some(true)
                    && self.codex_last_retry.as_deref() != Some(words.as_str())
                {
                    self.codex_last_retry = Some(words.clone());
                    out.events.push(Event::Retrying { words });
                }
            }
            (StdioProtocol::CodexAppServer, "account/rateLimits/updated") => {
                // `{rateLimits:{primary:{usedPercent,windowDurationMins,resetsAt},secondary:…}}`,
                // sparse: a window or a field left out keeps what was known.
                for (i, name) in ["primary", "secondary"].into_iter().enumerate() {
                    let Some(w) = v.pointer(&format!("/params/rateLimits/{name}")) else {
                        continue;
                    };
                    if w.is_null() {
                        self.codex_windows[i] = RateWindow::default();
                        continue;
                    }
                    if let Some(p) = w.get("usedPercent").and_then(Value::as_f64) {
                        self.codex_windows[i].used_percent = Some(p);
                    }
                    if let Some(r) = w.get("resetsAt").and_then(Value::as_i64) {
                        self.codex_windows[i].resets_at = Some(r);
                    }
                }
            }
            (StdioProtocol::CodexAppServer, "warning") => {
                if let Some(m) = str_at(v, "/params/message") {
                    out.events.push(Event::Warning {
                        words: m.to_string(),
                    });
                }
            }
            (StdioProtocol::CodexAppServer, "configWarning") => {
                if let Some(m) = str_at(v, "/params/summary") {
                    let words = match str_at(v, "/params/details") {
                        Some(d) => format!("{m}: {d}"),
                        None => m.to_string(),
                    };
                    out.events.push(Event::Warning { words });
                }
            }
            (StdioProtocol::Acp, "session/update") => {
                if str_at(v, "/params/update/sessionUpdate") == Some("agent_message_chunk")
                    && str_at(v, "/params/update/content/type") == Some("text")
                    && let Some(t) = str_at(v, "/params/update/content/text")
                {
                    out.events.push(Event::AgentText(t.to_string()));
                }
            }
            _ => {}
        }
    }
}

/// The words of a codex `TurnError` (`message`, then `additionalDetails` when present).
fn codex_error_words(err: &Value) -> String {
    let message = str_at(err, "/message").unwrap_or("");
    match str_at(err, "/additionalDetails").filter(|d| !d.is_empty()) {
        Some(d) if !message.is_empty() => format!("{message}: {d}"),
        Some(d) => d.to_string(),
        None => message.to_string(),
    }
}

/// Whether a codex `TurnError` says the tool cannot work without a person: no login or
/// account login (`unauthorized`; a limit is [`Event::LimitReached`]), or its service unreachable (the
/// connection and stream failures of `CodexErrorInfo`, codex 0.171's generated schema).
fn codex_error_blocks(err: &Value) -> bool {
    match err.get("codexErrorInfo") {
        Some(Value::String(s)) => s == "unauthorized",
        Some(Value::Object(o)) => o.keys().any(|k| {
            matches!(
                k.as_str(),
                "httpConnectionFailed"
                    | "responseStreamConnectionFailed"
                    | "responseStreamDisconnected"
                    | "responseTooManyFailedAttempts"
            )
        }),
        _ => false,
    }
}

/// The limit a codex turn error is typed with (`codexErrorInfo` `usageLimitExceeded` or
/// `rateLimitExceeded`; codex spells some variants in PascalCase too).
fn codex_limit(err: &Value) -> Option<LimitKind> {
    let info = err.get("codexErrorInfo")?;
    let word = match info {
        Value::String(s) => s.as_str(),
        // A variant with data is an object of one key.
        Value::Object(o) if o.len() == 1 => o.keys().next()?.as_str(),
        _ => return None,
    };
    match word.to_ascii_lowercase().as_str() {
        "usagelimitexceeded" => Some(LimitKind::Usage),
        "ratelimitexceeded" => Some(LimitKind::Rate),
        _ => None,
    }
}

impl StdioSession {
    /// The latest reset among codex's exhausted windows (`usedPercent` at 100 or more).
    fn codex_exhausted_reset(&self) -> Option<i64> {
        self.codex_windows
            .iter()
            .filter(|w| w.used_percent.is_some_and(|p| p >= 100.0))
            .filter_map(|w| w.resets_at)
            .max()
    }
}

/// A stderr line in which the tool says it cannot work (claude's "Not logged in" and
/// "Invalid API key" forms), recognised from the text; its words, trimmed.
pub fn blocked_in_stderr(tool: Tool, stderr: &str) -> Option<String> {
    match tool {
        Tool::Claude => stderr
            .lines()
            .find(|l| l.contains("Not logged in") || l.contains("Invalid API key"))
            .map(|l| l.trim().to_string()),
        _ => None,
    }
}

/// What is asked, sanitised and bounded.
fn permission_ask(
    tool_name: &str,
    what: &str,
    reason: Option<&str>,
    options: Vec<Decision>,
) -> PermissionAsk {
    PermissionAsk {
        tool_name: crate::text::one_line(tool_name, 80),
        what: crate::text::one_line(what, MAX_ASK_WHAT),
        reason: reason
            .filter(|r| !r.trim().is_empty())
            .map(|r| crate::text::one_line(r, MAX_ASK_REASON)),
        options,
    }
}

/// A resume refusal that the tool printed on stderr and then exited (claude's form, which
/// fails before any protocol frame), recognised from the stderr text.
pub fn resume_refusal_in_stderr(tool: Tool, stderr: &str) -> Option<String> {
    match tool {
        Tool::Claude => stderr
            .lines()
            .find(|l| l.contains(CLAUDE_NO_CONVERSATION))
            .map(|l| l.trim().to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cwd() -> PathBuf {
        PathBuf::from("/work/space")
    }

    fn s(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn claude_lines_are_exact() {
        let mut c = StdioSession::new(Tool::Claude, &cwd(), None).unwrap();
        assert!(c.start().is_empty());
        assert!(c.ready());
        assert!(matches!(
            c.interrupt(),
            Err(ProviderError::NoActiveTurn { .. })
        ));
        assert_eq!(
            s(&c.input("hi \"there\"\n").unwrap()),
            "{\"message\":{\"content\":\"hi \\\"there\\\"\\n\",\"role\":\"user\"},\
             \"parent_tool_use_id\":null,\"session_id\":\"default\",\"type\":\"user\"}\n"
        );
        assert_eq!(
            s(&c.interrupt().unwrap()),
            "{\"request\":{\"subtype\":\"interrupt\"},\"request_id\":\"proctor_interrupt_1\",\
             \"type\":\"control_request\"}\n"
        );
        let o =
            c.observe(br#"{"type":"system","subtype":"init","session_id":"abc","model":"demo"}"#);
        assert_eq!(o.events, [Event::ConversationId("abc".into())]);
        let o = c.observe(
            br#"{"type":"result","subtype":"success","is_error":false,"session_id":"abc","terminal_reason":"aborted_streaming"}"#,
        );
        assert_eq!(
            o.events,
            [Event::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                detail: Some("aborted_streaming".into())
            }]
        );
        assert!(!c.turn_in_progress());
    }

    #[test]
    fn claude_resume_that_forks_is_reported() {
        let mut c = StdioSession::new(Tool::Claude, &cwd(), Some("old")).unwrap();
        c.start();
        let o = c.observe(br#"{"type":"system","subtype":"init","session_id":"new"}"#);
        assert_eq!(
            o.events,
            [
                Event::ResumeDiverged {
                    expected: "old".into(),
                    reported: "new".into()
                },
                Event::ConversationId("new".into())
            ]
        );
    }

    #[test]
    fn codex_handshake_turn_and_interrupt() {
        let mut c = StdioSession::new(Tool::Codex, &cwd(), None).unwrap();
        let first = c.start();
        assert_eq!(
            s(&first[0]),
            format!(
                "{{\"id\":0,\"method\":\"initialize\",\"params\":{{\"clientInfo\":{{\"name\":\
                 \"proctor\",\"title\":\"proctor\",\"version\":\"{}\"}}}}}}\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert!(c.input("x").is_err());
        let o = c.observe(br#"{"id":0,"result":{"userAgent":"u","codexHome":"/h"}}"#);
        assert_eq!(s(&o.replies[0]), "{\"method\":\"initialized\"}\n");
        assert_eq!(
            s(&o.replies[1]),
            "{\"id\":1,\"method\":\"thread/start\",\"params\":{\"cwd\":\"/work/space\"}}\n"
        );
        let o = c.observe(br#"{"id":1,"result":{"thread":{"id":"thr_1"}}}"#);
        assert_eq!(
            o.events,
            [Event::ConversationId("thr_1".into()), Event::Ready]
        );
        assert_eq!(
            s(&c.input("go").unwrap()),
            "{\"id\":2,\"method\":\"turn/start\",\"params\":{\"input\":[{\"text\":\"go\",\
             \"type\":\"text\"}],\"threadId\":\"thr_1\"}}\n"
        );
        assert!(matches!(c.interrupt(), Err(ProviderError::NotReady { .. })));
        let o = c.observe(br#"{"method":"turn/started","params":{"threadId":"thr_1","turn":{"id":"turn_9","status":"inProgress","items":[]}}}"#);
        assert_eq!(
            o.events,
            [Event::TurnStarted {
                turn_id: Some("turn_9".into())
            }]
        );
        assert_eq!(
            s(&c.interrupt().unwrap()),
            "{\"id\":3,\"method\":\"turn/interrupt\",\"params\":{\"threadId\":\"thr_1\",\
             \"turnId\":\"turn_9\"}}\n"
        );
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"turn_9","status":"interrupted","items":[],"error":null}}}"#);
        assert_eq!(
            o.events,
            [Event::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                detail: Some("interrupted".into())
            }]
        );
    }

    #[test]
    fn codex_resume_refused() {
        let mut c = StdioSession::new(Tool::Codex, &cwd(), Some("t-1")).unwrap();
        c.start();
        let o = c.observe(br#"{"id":0,"result":{}}"#);
        assert_eq!(
            s(&o.replies[1]),
            "{\"id\":1,\"method\":\"thread/resume\",\"params\":{\"cwd\":\"/work/space\",\
             \"threadId\":\"t-1\"}}\n"
        );
        let o = c.observe(
            br#"{"id":1,"error":{"code":-32600,"message":"no rollout found for thread id t-1"}}"#,
        );
        assert_eq!(
            o.events,
            [Event::ResumeRefused {
                message: "no rollout found for thread id t-1".into()
            }]
        );
        assert!(!c.ready());
    }

    #[test]
    fn acp_handshake_prompt_cancel_and_requests() {
        let mut c = StdioSession::new(Tool::Gemini, &cwd(), None).unwrap();
        assert_eq!(
            s(&c.start()[0]),
            "{\"id\":0,\"jsonrpc\":\"2.0\",\"method\":\"initialize\",\"params\":{\
             \"clientCapabilities\":{\"fs\":{\"readTextFile\":false,\"writeTextFile\":false},\
             \"terminal\":false},\"protocolVersion\":1}}\n"
        );
        let o = c.observe(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#);
        assert_eq!(
            s(&o.replies[0]),
            "{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"session/new\",\"params\":{\"cwd\":\
             \"/work/space\",\"mcpServers\":[]}}\n"
        );
        let o = c.observe(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}"#);
        assert_eq!(
            o.events,
            [Event::ConversationId("s-1".into()), Event::Ready]
        );
        c.input("hello").unwrap();
        assert_eq!(
            s(&c.interrupt().unwrap()),
            "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s-1\"}}\n"
        );
        // A tool request proctor does not serve is answered "method not found".
        let o = c.observe(br#"{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}"#);
        assert_eq!(
            s(&o.replies[0]),
            "{\"error\":{\"code\":-32601,\"message\":\"Method not found\"},\"id\":7,\"jsonrpc\":\"2.0\"}\n"
        );
        let o = c.observe(
            br#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{}}"#,
        );
        assert_eq!(
            o.events,
            [Event::PermissionRequested {
                method: "session/request_permission".into(),
                id: json!("p1"),
                ask: PermissionAsk {
                    tool_name: "other".into(),
                    what: String::new(),
                    reason: None,
                    options: vec![],
                },
            }]
        );
        assert_eq!(
            s(&c.cancel_request(&json!("p1"))),
            "{\"id\":\"p1\",\"jsonrpc\":\"2.0\",\"result\":{\"outcome\":{\"outcome\":\"cancelled\"}}}\n"
        );
        let o = c.observe(br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#);
        assert_eq!(
            o.events,
            [Event::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                detail: Some("cancelled".into())
            }]
        );
    }

    #[test]
    fn claude_permission_answers_are_exact() {
        let mut c = StdioSession::new(Tool::Claude, &cwd(), None).unwrap();
        c.start();
        let o = c.observe(
            br#"{"type":"control_request","request_id":"r-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf \u001b[2J build","description":"Remove build"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"rm:*"}],"behavior":"allow","destination":"localSettings"}],"tool_use_id":"toolu_1"}}"#,
        );
        assert!(o.replies.is_empty(), "nothing is answered on its own");
        assert_eq!(
            o.events,
            [Event::PermissionRequested {
                method: "can_use_tool".into(),
                id: json!("r-1"),
                ask: PermissionAsk {
                    tool_name: "Bash".into(),
                    what: "rm -rf  build".into(),
                    reason: Some("Remove build".into()),
                    options: vec![Decision::Allow, Decision::AllowForSession, Decision::Deny],
                },
            }]
        );
        assert_eq!(c.open_requests(), 1);
        assert_eq!(
            s(&c.answer_request(&json!("r-1"), Decision::AllowForSession)
                .unwrap()),
            "{\"response\":{\"request_id\":\"r-1\",\"response\":{\"behavior\":\"allow\",\
             \"updatedInput\":{\"command\":\"rm -rf \\u001b[2J build\",\"description\":\"Remove build\"},\
             \"updatedPermissions\":[{\"behavior\":\"allow\",\"destination\":\"session\",\
             \"rules\":[{\"ruleContent\":\"rm:*\",\"toolName\":\"Bash\"}],\"type\":\"addRules\"}]},\
             \"subtype\":\"success\"},\"type\":\"control_response\"}\n"
        );
        assert!(
            matches!(
                c.answer_request(&json!("r-1"), Decision::Allow),
                Err(ProviderError::NoSuchRequest { .. })
            ),
            "answered once"
        );
        // Without suggestions there is no "for the session"; allow and deny lines.
        c.observe(br#"{"type":"control_request","request_id":"r-2","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"/w/a.txt","content":"x"},"tool_use_id":"toolu_2"}}"#);
        let e = c
            .answer_request(&json!("r-2"), Decision::AllowForSession)
            .unwrap_err()
            .to_string();
        assert!(e.contains("offered: allow, deny"), "{e}");
        assert_eq!(
            s(&c.answer_request(&json!("r-2"), Decision::Allow).unwrap()),
            "{\"response\":{\"request_id\":\"r-2\",\"response\":{\"behavior\":\"allow\",\
             \"updatedInput\":{\"content\":\"x\",\"file_path\":\"/w/a.txt\"}},\
             \"subtype\":\"success\"},\"type\":\"control_response\"}\n"
        );
        c.observe(br#"{"type":"control_request","request_id":"r-3","request":{"subtype":"can_use_tool","tool_name":"Read","input":{"file_path":"/etc/shadow"},"tool_use_id":"toolu_3"}}"#);
        assert_eq!(
            s(&c.answer_request(&json!("r-3"), Decision::Deny).unwrap()),
            "{\"response\":{\"request_id\":\"r-3\",\"response\":{\"behavior\":\"deny\",\
             \"message\":\"denied by a person through proctor\"},\"subtype\":\"success\"},\
             \"type\":\"control_response\"}\n"
        );
        // A request the tool withdraws is closed; one already answered means nothing.
        c.observe(br#"{"type":"control_request","request_id":"r-4","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_4"}}"#);
        let o = c.observe(br#"{"type":"control_cancel_request","request_id":"r-4"}"#);
        assert_eq!(o.events, [Event::PermissionWithdrawn { id: json!("r-4") }]);
        assert_eq!(c.open_requests(), 0);
        let o = c.observe(br#"{"type":"control_cancel_request","request_id":"r-3"}"#);
        assert!(o.events.is_empty());
        assert!(!c.interrupt_cancels_requests());
        // Another control request is refused at once, not surfaced.
        let o = c.observe(br#"{"type":"control_request","request_id":"h-1","request":{"subtype":"hook_callback","callback_id":"x"}}"#);
        assert!(o.events.is_empty());
        assert_eq!(
            s(&o.replies[0]),
            "{\"response\":{\"error\":\"not supported by proctor\",\"request_id\":\"h-1\",\
             \"subtype\":\"error\"},\"type\":\"control_response\"}\n"
        );
    }

    #[test]
    fn codex_approval_answers_are_exact() {
        let mut c = StdioSession::new(Tool::Codex, &cwd(), None).unwrap();
        c.start();
        let o = c.observe(br#"{"id":5,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"call_1","startedAtMs":1,"command":"cargo test","cwd":"/w","reason":"run the tests"}}"#);
        assert_eq!(
            o.events,
            [Event::PermissionRequested {
                method: "item/commandExecution/requestApproval".into(),
                id: json!(5),
                ask: PermissionAsk {
                    tool_name: "commandExecution".into(),
                    what: "cargo test".into(),
                    reason: Some("run the tests".into()),
                    options: vec![Decision::Allow, Decision::AllowForSession, Decision::Deny],
                },
            }]
        );
        assert_eq!(
            s(&c.answer_request(&json!(5), Decision::AllowForSession)
                .unwrap()),
            "{\"id\":5,\"result\":{\"decision\":\"acceptForSession\"}}\n"
        );
        // A file change: the paths come from the item that started it.
        c.observe(br#"{"method":"item/started","params":{"threadId":"t","turnId":"u","item":{"type":"fileChange","id":"fc_1","status":"inProgress","changes":[{"path":"src/a.rs","kind":{"type":"update"},"diff":""},{"path":"src/b.rs","kind":{"type":"add"},"diff":""}]}}}"#);
        let o = c.observe(br#"{"id":6,"method":"item/fileChange/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"fc_1","startedAtMs":1,"reason":null,"grantRoot":null}}"#);
        let Event::PermissionRequested { ask, .. } = &o.events[0] else {
            panic!("{o:?}")
        };
        assert_eq!(
            (ask.tool_name.as_str(), ask.what.as_str(), &ask.reason),
            ("fileChange", "src/a.rs, src/b.rs", &None)
        );
        assert_eq!(
            s(&c.answer_request(&json!(6), Decision::Allow).unwrap()),
            "{\"id\":6,\"result\":{\"decision\":\"accept\"}}\n"
        );
        c.observe(br#"{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"call_2","startedAtMs":1,"command":"curl x"}}"#);
        assert_eq!(
            s(&c.answer_request(&json!(7), Decision::Deny).unwrap()),
            "{\"id\":7,\"result\":{\"decision\":\"decline\"}}\n"
        );
        // Permissions: granted as asked, for the turn or the session; denied, nothing.
        c.observe(br#"{"id":8,"method":"item/permissions/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"p","startedAtMs":1,"cwd":"/w","permissions":{"network":{"enabled":true}}}}"#);
        assert_eq!(
            s(&c.answer_request(&json!(8), Decision::Allow).unwrap()),
            "{\"id\":8,\"result\":{\"permissions\":{\"network\":{\"enabled\":true}},\"scope\":\"turn\"}}\n"
        );
        c.observe(br#"{"id":9,"method":"item/permissions/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"p","startedAtMs":1,"cwd":"/w","permissions":{"network":{"enabled":true}}}}"#);
        assert_eq!(
            s(&c.answer_request(&json!(9), Decision::Deny).unwrap()),
            "{\"id\":9,\"result\":{\"permissions\":{},\"scope\":\"turn\"}}\n"
        );
        // The legacy approvals and their ReviewDecision.
        let o = c.observe(br#"{"id":10,"method":"execCommandApproval","params":{"conversationId":"t","callId":"c","command":["git","push"],"cwd":"/w","parsedCmd":[]}}"#);
        let Event::PermissionRequested { ask, .. } = &o.events[0] else {
            panic!("{o:?}")
        };
        assert_eq!(ask.what, "git push");
        assert_eq!(
            s(&c.answer_request(&json!(10), Decision::Deny).unwrap()),
            "{\"id\":10,\"result\":{\"decision\":{\"denied\":{\"rejection\":\"denied by a person through proctor\"}}}}\n"
        );
        c.observe(br#"{"id":11,"method":"applyPatchApproval","params":{"conversationId":"t","callId":"c","fileChanges":{"/w/x.rs":{}}}}"#);
        assert_eq!(
            s(&c.answer_request(&json!(11), Decision::AllowForSession)
                .unwrap()),
            "{\"id\":11,\"result\":{\"decision\":\"approved_for_session\"}}\n"
        );
        c.observe(br#"{"id":12,"method":"execCommandApproval","params":{"conversationId":"t","callId":"c","command":["ls"],"cwd":"/w","parsedCmd":[]}}"#);
        assert_eq!(
            s(&c.cancel_request(&json!(12))),
            "{\"id\":12,\"result\":{\"decision\":\"abort\"}}\n"
        );
        assert_eq!(c.open_requests(), 0);
        // codex resolves a request it gave up (an interrupted turn): closed.
        c.observe(br#"{"id":14,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"c","startedAtMs":1,"command":"ls"}}"#);
        let o = c.observe(
            br#"{"method":"serverRequest/resolved","params":{"threadId":"t","requestId":14}}"#,
        );
        assert_eq!(o.events, [Event::PermissionWithdrawn { id: json!(14) }]);
        let o = c.observe(
            br#"{"method":"serverRequest/resolved","params":{"threadId":"t","requestId":5}}"#,
        );
        assert!(o.events.is_empty(), "answered already: nothing withdrawn");
        // Another server request is not a permission: method not found.
        let o = c.observe(br#"{"id":13,"method":"item/tool/requestUserInput","params":{}}"#);
        assert!(o.events.is_empty());
        assert!(s(&o.replies[0]).contains("-32601"));
    }

    #[test]
    fn acp_permission_answers_use_the_offered_options() {
        let mut c = StdioSession::new(Tool::Opencode, &cwd(), None).unwrap();
        c.start();
        let o = c.observe(br#"{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"tc1","title":"Run cargo build","kind":"execute","rawInput":{"command":"cargo build"},"locations":[]},"options":[{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"always","name":"Always","kind":"allow_always"},{"optionId":"no","name":"Reject","kind":"reject_once"},{"optionId":"never","name":"Never","kind":"reject_always"}]}}"#);
        assert_eq!(
            o.events,
            [Event::PermissionRequested {
                method: "session/request_permission".into(),
                id: json!(3),
                ask: PermissionAsk {
                    tool_name: "execute".into(),
                    what: "cargo build".into(),
                    reason: Some("Run cargo build".into()),
                    options: vec![Decision::Allow, Decision::AllowForSession, Decision::Deny],
                },
            }]
        );
        assert_eq!(
            s(&c.answer_request(&json!(3), Decision::AllowForSession)
                .unwrap()),
            "{\"id\":3,\"jsonrpc\":\"2.0\",\"result\":{\"outcome\":{\"optionId\":\"always\",\
             \"outcome\":\"selected\"}}}\n"
        );
        c.observe(br#"{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"tc2","title":"Edit","kind":"edit","locations":[{"path":"/w/a.rs"}]},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}"#);
        let e = c
            .answer_request(&json!(4), Decision::AllowForSession)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("did not offer `allow_for_session`") && e.contains("offered: allow, deny"),
            "{e}"
        );
        assert_eq!(
            c.open_requests(),
            1,
            "a refused decision leaves the request open"
        );
        assert_eq!(
            s(&c.answer_request(&json!(4), Decision::Deny).unwrap()),
            "{\"id\":4,\"jsonrpc\":\"2.0\",\"result\":{\"outcome\":{\"optionId\":\"no\",\
             \"outcome\":\"selected\"}}}\n"
        );
        assert!(c.interrupt_cancels_requests());
        c.observe(br#"{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"tc3","title":"Fetch","kind":"fetch"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}"#);
        assert_eq!(
            s(&c.answer_request(&json!(5), Decision::Allow).unwrap()),
            "{\"id\":5,\"jsonrpc\":\"2.0\",\"result\":{\"outcome\":{\"optionId\":\"ok\",\
             \"outcome\":\"selected\"}}}\n"
        );
    }

    #[test]
    fn garbage_lines_mean_nothing_and_bad_ids_are_not_adopted() {
        let mut c = StdioSession::new(Tool::Grok, &cwd(), None).unwrap();
        c.start();
        for junk in [
            &b"not json"[..],
            b"[1,2]",
            b"",
            b"{\"id\":99,\"result\":{}}",
        ] {
            assert_eq!(c.observe(junk), Observed::default());
        }
        c.observe(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        let o = c.observe(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"--help"}}"#);
        assert!(c.conversation_id().is_none());
        assert!(matches!(o.events[0], Event::RequestFailed { .. }));
        assert!(StdioSession::new(Tool::Grok, std::path::Path::new("rel"), None).is_err());
    }

    /// Feeds a transcript recorded from a real tool (its stdout, one frame a line) to a new
    /// session, sending `input` once the handshake completes; every event, in order.
    fn replay(tool: Tool, transcript: &str, input: Option<&str>) -> Vec<Event> {
        let mut c = StdioSession::new(tool, &cwd(), None).unwrap();
        c.start();
        let mut events = Vec::new();
        let mut sent = false;
        if c.ready()
            && let Some(t) = input
        {
            c.input(t).unwrap();
            sent = true;
        }
        for l in transcript.lines() {
            let o = c.observe(l.as_bytes());
            let ready = o.events.contains(&Event::Ready);
            events.extend(o.events);
            if ready
                && !sent
                && let Some(t) = input
            {
                c.input(t).unwrap();
                sent = true;
            }
        }
        events
    }

    fn blocked(events: &[Event]) -> Vec<(&'static str, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Blocked { source, words } => Some((*source, words.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claude_api_error_without_a_login_is_blocked_with_its_words() {
        // claude 2.1.332, a fresh HOME, one user frame (/work/probe, 2026-12-01).
        let t = include_str!("../../tests/data/real/probe/claude-2.1.332-turn.stdout.jsonl");
        let events = replay(Tool::Claude, t, Some("say hi"));
        assert!(
            events.contains(&Event::TurnEnded {
                outcome: TurnOutcome::Failed,
                detail: Some("api_error".into())
            }),
            "{events:?}"
        );
        assert_eq!(
            blocked(&events),
            [(
                "result api_error",
                "Not logged in · Please run /login".to_string()
            )]
        );
        // A successful turn's result blocks nothing.
        let mut c = StdioSession::new(Tool::Claude, &cwd(), None).unwrap();
        c.start();
        c.input("x").unwrap();
        let o = c.observe(
            br#"{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"a","terminal_reason":"completed"}"#,
        );
        assert!(blocked(&o.events).is_empty(), "{:?}", o.events);
        // An error result after an API error message blocks even without terminal_reason.
        c.input("y").unwrap();
        c.observe(br#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"Invalid API key"}]},"error":"authentication_failed","is_api_error_message":true,"session_id":"a"}"#);
        let o =
            c.observe(br#"{"type":"result","subtype":"success","is_error":true,"session_id":"a"}"#);
        assert_eq!(
            blocked(&o.events),
            [("result api_error", "Invalid API key".to_string())]
        );
    }

    #[test]
    fn codex_retries_are_reported_and_their_exhaustion_blocks() {
        // codex 0.171.0, a fresh HOME, no network, one turn/start (/work/probe, 2026-12-01).
        let t = include_str!("../../tests/data/real/probe/codex-0.171.0-turn.stdout.jsonl");
        let events = replay(Tool::Codex, t, Some("say hi"));
        let retries: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::Retrying { words } => Some(words.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(retries.len(), 4, "2/5 to 5/5, each once: {retries:?}");
        assert!(retries[0].starts_with("Reconnecting... 2/5: stream disconnected"));
        assert!(retries[3].starts_with("Reconnecting... 5/5"));
        assert!(events.iter().any(|e| matches!(e, Event::Warning { words } if words.starts_with("Falling back from WebSockets"))));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Warning { words } if words.contains("bubblewrap")))
        );
        // "waiting for network" comes twice: blocked once.
        assert_eq!(
            blocked(&events),
            [(
                "error notification",
                "Reconnecting... waiting for network: Connection failed: error sending request"
                    .to_string()
            )]
        );
        // The retries come after the turn started, so a new turn clears them.
        let started = events
            .iter()
            .position(|e| matches!(e, Event::TurnStarted { .. }))
            .unwrap();
        let first_retry = events
            .iter()
            .position(|e| matches!(e, Event::Retrying { .. }))
            .unwrap();
        assert!(started < first_retry);
    }

    #[test]
    fn codex_failed_turn_or_final_error_for_connectivity_blocks() {
        let mut c = StdioSession::new(Tool::Codex, &cwd(), None).unwrap();
        c.start();
        c.observe(br#"{"id":0,"result":{}}"#);
        c.observe(br#"{"id":1,"result":{"thread":{"id":"t"}}}"#);
        c.input("x").unwrap();
        c.observe(br#"{"method":"turn/started","params":{"threadId":"t","turn":{"id":"u","status":"inProgress","items":[]}}}"#);
        // A failed turn for another reason (the context window) is a failure, not a block.
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","items":[],"error":{"message":"too long","codexErrorInfo":"contextWindowExceeded"}}}}"#);
        assert!(blocked(&o.events).is_empty());
        c.input("y").unwrap();
        c.observe(br#"{"method":"turn/started","params":{"threadId":"t","turn":{"id":"v","status":"inProgress","items":[]}}}"#);
        let o = c.observe(br#"{"method":"error","params":{"error":{"message":"exceeded retry limit","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":null}},"additionalDetails":null},"willRetry":false,"threadId":"t","turnId":"v"}}"#);
        assert_eq!(
            blocked(&o.events),
            [("error notification", "exceeded retry limit".to_string())]
        );
        // The turn's end repeats it: still one block for the turn.
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"v","status":"failed","items":[],"error":{"message":"exceeded retry limit","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":null}}}}}}"#);
        assert!(blocked(&o.events).is_empty());
        c.input("z").unwrap();
        c.observe(br#"{"method":"turn/started","params":{"threadId":"t","turn":{"id":"w","status":"inProgress","items":[]}}}"#);
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"w","status":"failed","items":[],"error":{"message":"401 Unauthorized","codexErrorInfo":"unauthorized"}}}}"#);
        assert_eq!(
            blocked(&o.events),
            [("turn/completed error", "401 Unauthorized".to_string())]
        );
    }

    fn limits(events: &[Event]) -> Vec<(LimitKind, Option<i64>)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::LimitReached { kind, resets_at } => Some((*kind, *resets_at)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claude_limits_come_from_its_result_and_the_reset_from_its_rate_limit_event() {
        let mut c = StdioSession::new(Tool::Claude, &cwd(), None).unwrap();
        c.start();
        c.input("x").unwrap();
        // An allowed window says nothing; a rejected one gives the reset; the result of an
        // API error `usage_limit_reached` is the fact (and no block: a limit is no login).
        let o = c.observe(br#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1700000000,"rateLimitType":"five_hour"},"session_id":"a"}"#);
        assert!(o.events.is_empty(), "{:?}", o.events);
        c.observe(br#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1771390800,"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false},"session_id":"a"}"#);
        c.observe(br#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"You've hit your limit"}]},"error":"usage_limit_reached","is_api_error_message":true,"session_id":"a"}"#);
        let o = c.observe(br#"{"type":"result","subtype":"success","is_error":true,"result":"You've hit your limit","terminal_reason":"api_error","session_id":"a"}"#);
        assert_eq!(limits(&o.events), [(LimitKind::Usage, Some(1771390800))]);
        assert!(blocked(&o.events).is_empty(), "{:?}", o.events);
        // HTTP 429 without a rejected window: the request rate, no reset known.
        c.input("y").unwrap();
        let o = c.observe(br#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429","terminal_reason":"api_error","session_id":"a"}"#);
        assert_eq!(limits(&o.events), [(LimitKind::Rate, None)]);
        // Any other result never sets it: a success, another API error, an interrupt.
        c.input("z").unwrap();
        let o = c.observe(br#"{"type":"result","subtype":"success","is_error":false,"api_error_status":429,"result":"hi","session_id":"a"}"#);
        assert!(limits(&o.events).is_empty());
        c.input("w").unwrap();
        let o = c.observe(br#"{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"overloaded","terminal_reason":"api_error","session_id":"a"}"#);
        assert!(limits(&o.events).is_empty());
        assert_eq!(blocked(&o.events).len(), 1);
        // A rejected window of an earlier turn says nothing about a later 429.
        c.input("v").unwrap();
        let o = c.observe(br#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429","terminal_reason":"api_error","session_id":"a"}"#);
        assert_eq!(limits(&o.events), [(LimitKind::Rate, None)]);
    }

    #[test]
    fn codex_limits_come_from_a_typed_failed_turn_with_the_latest_exhausted_reset() {
        let mut c = StdioSession::new(Tool::Codex, &cwd(), None).unwrap();
        c.start();
        c.observe(br#"{"id":0,"result":{}}"#);
        c.observe(br#"{"id":1,"result":{"thread":{"id":"t"}}}"#);
        // Both windows exhausted (the second in a sparse update): the later reset.
        c.observe(br#"{"method":"account/rateLimits/updated","params":{"rateLimits":{"primary":{"usedPercent":100,"windowDurationMins":300,"resetsAt":1800000000},"secondary":{"usedPercent":40,"windowDurationMins":10080,"resetsAt":1900000000}}}}"#);
        c.observe(br#"{"method":"account/rateLimits/updated","params":{"rateLimits":{"secondary":{"usedPercent":100}}}}"#);
        c.input("x").unwrap();
        c.observe(br#"{"method":"turn/started","params":{"threadId":"t","turn":{"id":"u","status":"inProgress","items":[]}}}"#);
        let o = c.observe(br#"{"method":"error","params":{"error":{"message":"You've hit your usage limit.","codexErrorInfo":"usageLimitExceeded","additionalDetails":null},"willRetry":false,"threadId":"t","turnId":"u"}}"#);
        assert!(blocked(&o.events).is_empty(), "{:?}", o.events);
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","items":[],"error":{"message":"You've hit your usage limit.","codexErrorInfo":"usageLimitExceeded"}}}}"#);
        assert_eq!(limits(&o.events), [(LimitKind::Usage, Some(1900000000))]);
        assert!(blocked(&o.events).is_empty());
        // One window left exhausted after a reset: its own reset.
        c.observe(br#"{"method":"account/rateLimits/updated","params":{"rateLimits":{"secondary":{"usedPercent":3,"resetsAt":1950000000}}}}"#);
        c.input("y").unwrap();
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"v","status":"failed","items":[],"error":{"message":"slow down","codexErrorInfo":"rateLimitExceeded"}}}}"#);
        assert_eq!(limits(&o.events), [(LimitKind::Rate, Some(1800000000))]);
        // Another failure, or a completed turn, never sets it.
        c.input("z").unwrap();
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"w","status":"failed","items":[],"error":{"message":"too long","codexErrorInfo":"contextWindowExceeded"}}}}"#);
        assert!(limits(&o.events).is_empty());
        c.input("q").unwrap();
        let o = c.observe(br#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"x","status":"completed","items":[],"error":null}}}"#);
        assert!(limits(&o.events).is_empty());
    }

    #[test]
    fn acp_refusals_from_real_handshakes() {
        // gemini 0.61.0 refuses session/new without a key; opencode 1.18.33 accepts it.
        let t = include_str!("../../tests/data/real/probe/gemini-0.61.0-start.stdout.jsonl");
        let events = replay(Tool::Gemini, t, None);
        assert_eq!(
            events,
            [Event::RequestFailed {
                method: "session/new",
                message: "Gemini API key is missing or not configured.".into()
            }]
        );
        let t = include_str!("../../tests/data/real/probe/opencode-1.18.33-start.stdout.jsonl");
        let events = replay(Tool::Opencode, t, None);
        assert_eq!(
            events,
            [
                Event::ConversationId("ses_dcda3babeffeuHdEDX42kxRq1N".into()),
                Event::Ready
            ]
        );
    }

    #[test]
    fn opencode_prompt_refused_without_its_service_is_blocked() {
        // opencode 1.18.33, a fresh HOME, no network, one session/prompt (2026-12-01).
        let t = include_str!("../../tests/data/real/probe/opencode-1.18.33-turn.stdout.jsonl");
        let events = replay(Tool::Opencode, t, Some("say hi"));
        let words = "Internal error: Cannot connect to API: Unable to connect. Is the computer \
                     able to access the url?";
        assert!(
            events.contains(&Event::TurnEnded {
                outcome: TurnOutcome::Failed,
                detail: Some(words.into())
            }),
            "{events:?}"
        );
        assert_eq!(
            blocked(&events),
            [("session/prompt error", words.to_string())]
        );
        // Another prompt error (a bad request) is the turn's failure only.
        let mut c = StdioSession::new(Tool::Opencode, &cwd(), None).unwrap();
        c.start();
        c.observe(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        c.observe(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#);
        c.input("x").unwrap();
        let o = c.observe(
            br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params"}}"#,
        );
        assert!(blocked(&o.events).is_empty(), "{:?}", o.events);
    }

    #[test]
    fn an_acp_prompt_cancelled_is_interrupted_whatever_its_stop_reason() {
        // opencode 1.18.33 answers a prompt cancelled while it retries its service with
        // `stopReason: "end_turn"` and no tokens (the real tools battery, 2026-12-01): a turn
        // that did not work, so it must not read as completed (which would clear a block).
        let mut c = StdioSession::new(Tool::Opencode, &cwd(), None).unwrap();
        c.start();
        c.observe(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        c.observe(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#);
        c.input("x").unwrap();
        c.interrupt().unwrap();
        let o = c.observe(br#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":0,"outputTokens":0,"totalTokens":0},"_meta":{}}}"#);
        assert_eq!(
            o.events,
            [Event::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                detail: Some("end_turn (after session/cancel)".into())
            }]
        );
        // The next prompt, not cancelled, ends as it says.
        c.input("y").unwrap();
        let o = c.observe(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#);
        assert_eq!(
            o.events,
            [Event::TurnEnded {
                outcome: TurnOutcome::Completed,
                detail: Some("end_turn".into())
            }]
        );
    }

    #[test]
    fn claude_stderr_not_logged_in() {
        assert_eq!(
            blocked_in_stderr(Tool::Claude, "x\nNot logged in · Please run /login\n").as_deref(),
            Some("Not logged in · Please run /login")
        );
        assert!(blocked_in_stderr(Tool::Codex, "Not logged in").is_none());
    }

    #[test]
    fn claude_stderr_refusal() {
        assert_eq!(
            resume_refusal_in_stderr(
                Tool::Claude,
                "warn\nNo conversation found with session ID: 1234\n"
            )
            .as_deref(),
            Some("No conversation found with session ID: 1234")
        );
        assert!(
            resume_refusal_in_stderr(Tool::Codex, "No conversation found with session ID: x")
                .is_none()
        );
    }
}
