//! What the tool did, read from its own record (seed 002, `GET /runs/{ref}/activity`):
//! agents, tasks, files, todos, skills, MCP servers, model, the last request's context
//! tokens and compactions. Pure: bytes in, [`Activity`] out (the reading and its bounds are
//! [`super::raw`]'s).
//!
//! Claude Code's transcript (published shapes, `docs/providers.md`):
//! - an `assistant` line's `message.content` holds `tool_use` blocks `{id, name, input}`
//!   and its `message.usage` the request's tokens; `message.model` the model;
//! - a `user` line's `message.content` holds `tool_result` blocks `{tool_use_id, content,
//!   is_error}` and the line's `toolUseResult` the tool's structured result (Write's
//!   `type: create|update`, Edit's `structuredPatch`, Task's `status` and `agentId`);
//! - `Task` (or `Agent`) tool uses are the sub-agents, whose own transcripts are
//!   `<session>/subagents/agent-<agentId>.jsonl`; `TodoWrite`'s `todos` the todo list (the
//!   last one wins); `Skill`'s `skill` a skill; `mcp__<server>__<tool>` an MCP server;
//!   every other tool use (Bash, Read, Grep, WebFetch, …) a task;
//! - `system` lines of subtype `compact_boundary` are compactions (or, when a record has
//!   none, `isCompactSummary` lines).
//!
//! Codex's rollout: `turn_context.model`; `response_item` `function_call` / `custom_tool_call`
//! / `local_shell_call` (`shell`, `exec_command`, `apply_patch`, `update_plan`,
//! `mcp__server__tool`, …) and their `*_output` by `call_id`; `event_msg` `token_count`
//! (`info.last_token_usage.total_tokens`, `info.model_context_window`),
//! `exec_command_end` (`exit_code`), `patch_apply_end` (`success`), the collab events of
//! its child agents (`collab_agent_spawn_end`, `collab_waiting_end`, `collab_close_end`),
//! and `compacted` lines.
//!
//! Context: the LAST request's tokens, never a sum (claude: `input_tokens +
//! cache_creation_input_tokens + cache_read_input_tokens` of the last main-thread assistant
//! line; codex: the last `token_count`'s `last_token_usage.total_tokens`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json_lines;

/// The longest text kept of a command, a description or a todo (bytes).
pub const MAX_FIELD: usize = 512;
/// The most items of one list kept (the newest); more are counted in `*_omitted`.
pub const MAX_ITEMS: usize = 500;

/// Where an agent or a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Started, no result yet, and the run is live (or a background command still going).
    Running,
    /// Its result came back.
    Completed,
    /// Its result came back as an error (`is_error`, a non-zero exit code, a failed status).
    Failed,
    /// Interrupted or refused, or the run ended before its result came back.
    Stopped,
    /// Asked for and not started yet (a codex child agent reported `pending_init`).
    Scheduled,
}

/// A sub-agent (claude's Task tool) or a child agent (codex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityAgent {
    /// The id `/activity/agents/{agent}` takes (claude: the `agentId` of its transcript, or
    /// the tool use's id until the result names it; codex: the child's thread id).
    pub id: String,
    /// The task's description (claude) or prompt's first line (codex), as recorded.
    pub description: Option<String>,
    /// Claude's `subagent_type`.
    pub kind: Option<String>,
    pub state: WorkState,
    /// True when the agent's own transcript is there to read (claude only).
    pub transcript: bool,
}

/// A command or another tool use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityTask {
    /// The tool use's own id (claude `toolu_…`, codex `call_id`).
    pub id: String,
    /// The tool's name (`Bash`, `Read`, `shell`, `exec_command`, …).
    pub tool: String,
    /// The command or the tool's main argument (a path, a pattern, a URL), at most 512 bytes.
    pub command: Option<String>,
    /// True for work the tool runs in the background (claude's `run_in_background`).
    pub background: bool,
    pub state: WorkState,
    /// The exit code, when the record gives one.
    pub exit_code: Option<i64>,
}

/// A file the tool changed, summed over its changes (as far as the record says).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FileActivity {
    pub path: String,
    /// Lines added; null when the record does not say.
    pub added: Option<u64>,
    /// Lines removed; null when the record does not say.
    pub removed: Option<u64>,
    /// True when the tool created it.
    pub created: bool,
}

/// One entry of the tool's todo list (claude's TodoWrite, codex's update_plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityTodo {
    pub content: String,
    /// As the tool said it: `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// An MCP server the tool announced or used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct McpServer {
    pub name: String,
    /// How many of its tools' calls the record holds.
    pub calls: u64,
    /// As the tool announced it for the current launch (claude's `system/init` frame:
    /// `connected`, `failed`, `needs-auth`, `pending`, …, the tool's word); null when the
    /// server is known only from calls in the record.
    #[serde(default)]
    pub status: Option<String>,
    /// Where the tool says the server's definition came from (claude's `source`: `user`,
    /// `project`, `local`, `dynamic`, `plugin`, …); null when not announced.
    #[serde(default)]
    pub source: Option<String>,
}

/// What the record says the tool did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    pub agents: Vec<ActivityAgent>,
    pub tasks: Vec<ActivityTask>,
    pub tasks_omitted: u64,
    pub files: Vec<FileActivity>,
    pub todos: Vec<ActivityTodo>,
    pub skills: Vec<String>,
    /// The skills the record shows being used (a subset of `skills` once the tool's
    /// announcement is merged in, [`Activity::announce`]).
    pub skills_used: Vec<String>,
    pub mcp_servers: Vec<McpServer>,
    pub model: Option<String>,
    pub context_tokens: Option<u64>,
    /// Only when the record reports it (codex's `model_context_window`).
    pub context_window: Option<u64>,
    pub compactions: u64,
}

/// `s` cut to at most `max` bytes on a character boundary.
pub fn bound(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

fn u64_at(v: &Value, p: &str) -> Option<u64> {
    v.pointer(p).and_then(Value::as_u64)
}

/// The first non-blank line of `s`, bounded.
fn first_line(s: &str) -> String {
    bound(
        s.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        MAX_FIELD,
    )
}

/// The text of a tool_result's `content` (a string or text blocks).
fn result_text(c: Option<&Value>) -> String {
    match c {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn lines_of(s: &str) -> u64 {
    if s.is_empty() {
        0
    } else {
        s.lines().count() as u64
    }
}

/// What a list keeps: the newest [`MAX_ITEMS`], and how many older ones it dropped.
fn keep_newest<T>(mut v: Vec<T>) -> (Vec<T>, u64) {
    let over = v.len().saturating_sub(MAX_ITEMS);
    v.drain(..over);
    (v, over as u64)
}

#[derive(Default)]
struct Files {
    by_path: BTreeMap<String, FileActivity>,
}

impl Files {
    fn add(&mut self, path: &str, added: Option<u64>, removed: Option<u64>, created: bool) {
        if self.by_path.len() >= MAX_ITEMS && !self.by_path.contains_key(path) {
            return;
        }
        let f = self
            .by_path
            .entry(bound(path, 4096))
            .or_insert(FileActivity {
                path: bound(path, 4096),
                added: Some(0),
                removed: Some(0),
                created: false,
            });
        f.added = f.added.zip(added).map(|(a, b)| a + b);
        f.removed = f.removed.zip(removed).map(|(a, b)| a + b);
        f.created |= created;
    }
    fn done(self) -> Vec<FileActivity> {
        self.by_path.into_values().collect()
    }
}

fn mcp_server(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("mcp__")?;
    rest.split("__").next().filter(|s| !s.is_empty())
}

fn count_mcp(m: &mut BTreeMap<String, u64>, name: &str) {
    if let Some(s) = mcp_server(name)
        && (m.len() < MAX_ITEMS || m.contains_key(s))
    {
        *m.entry(bound(s, MAX_FIELD)).or_default() += 1;
    }
}

fn mcp_list(m: BTreeMap<String, u64>) -> Vec<McpServer> {
    m.into_iter()
        .map(|(name, calls)| McpServer {
            name,
            calls,
            status: None,
            source: None,
        })
        .collect()
}

/// A claude tool use waiting for, or matched with, its result.
struct ClaudeUse {
    id: String,
    name: String,
    input: Value,
    result: Option<(bool, String, Value)>,
}

/// Claude's Task tool (named `Agent` by later versions).
fn is_agent_tool(name: &str) -> bool {
    matches!(name, "Task" | "Agent")
}

/// The main argument of a claude tool use.
fn claude_command(name: &str, input: &Value) -> Option<String> {
    let keys: &[&str] = match name {
        "Bash" => &["/command"],
        "Read" | "NotebookRead" => &["/file_path"],
        "Glob" | "Grep" => &["/pattern"],
        "WebFetch" => &["/url"],
        "WebSearch" => &["/query"],
        "BashOutput" | "KillShell" | "KillBash" => &["/bash_id", "/shell_id"],
        _ => &["/command", "/description", "/file_path", "/path", "/query"],
    };
    keys.iter().find_map(|k| str_at(input, k)).map(first_line)
}

fn stopped_text(t: &str) -> bool {
    t.starts_with("[Request interrupted")
        || t.contains("The user doesn't want to proceed with this tool use")
        || t.contains("Tool use was cancelled")
}

/// The activity of a Claude Code transcript. `live`: the run's process may still answer the
/// tool uses without a result (they are `running`; otherwise `stopped`). `has_agent_file`
/// tells whether a sub-agent's transcript exists.
pub fn claude(bytes: &[u8], live: bool, has_agent_file: &dyn Fn(&str) -> bool) -> Activity {
    let mut uses: Vec<ClaudeUse> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut a = Activity::default();
    let mut summaries = 0u64;
    for v in json_lines(bytes) {
        let kind = str_at(&v, "/type");
        if v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        match kind {
            Some("system") if str_at(&v, "/subtype") == Some("compact_boundary") => {
                a.compactions += 1;
            }
            Some("assistant") => {
                if let Some(m) = str_at(&v, "/message/model").filter(|m| !m.starts_with('<')) {
                    a.model = Some(bound(m, MAX_FIELD));
                }
                if let Some(u) = v.pointer("/message/usage") {
                    let parts = [
                        u64_at(u, "/input_tokens"),
                        u64_at(u, "/cache_creation_input_tokens"),
                        u64_at(u, "/cache_read_input_tokens"),
                    ];
                    if parts.iter().any(Option::is_some) {
                        a.context_tokens = Some(parts.iter().flatten().sum());
                    }
                }
                let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
                    continue;
                };
                for b in blocks {
                    if str_at(b, "/type") != Some("tool_use") {
                        continue;
                    }
                    let (Some(id), Some(name)) = (str_at(b, "/id"), str_at(b, "/name")) else {
                        continue;
                    };
                    if index.contains_key(id) {
                        continue;
                    }
                    index.insert(id.to_string(), uses.len());
                    uses.push(ClaudeUse {
                        id: bound(id, MAX_FIELD),
                        name: bound(name, MAX_FIELD),
                        input: b.get("input").cloned().unwrap_or(Value::Null),
                        result: None,
                    });
                }
            }
            Some("user") => {
                if v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
                    summaries += 1;
                }
                let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
                    continue;
                };
                let structured = v.get("toolUseResult").cloned().unwrap_or(Value::Null);
                for b in blocks {
                    if str_at(b, "/type") != Some("tool_result") {
                        continue;
                    }
                    let Some(i) = str_at(b, "/tool_use_id").and_then(|id| index.get(id)) else {
                        continue;
                    };
                    let err = b.get("is_error").and_then(Value::as_bool) == Some(true);
                    let text = bound(&result_text(b.get("content")), 64 * 1024);
                    uses[*i].result = Some((err, text, structured.clone()));
                }
            }
            _ => {}
        }
    }
    if a.compactions == 0 {
        a.compactions = summaries;
    }
    let pending = if live {
        WorkState::Running
    } else {
        WorkState::Stopped
    };
    let mut files = Files::default();
    let mut mcp = BTreeMap::new();
    let mut tasks = Vec::new();
    let mut killed: Vec<String> = Vec::new();
    for u in &uses {
        if matches!(u.name.as_str(), "KillShell" | "KillBash")
            && let Some((false, _, _)) = &u.result
            && let Some(s) = str_at(&u.input, "/shell_id").or(str_at(&u.input, "/bash_id"))
        {
            killed.push(s.to_string());
        }
    }
    for u in uses {
        let state = match &u.result {
            None => pending,
            Some((_, t, _)) if stopped_text(t) => WorkState::Stopped,
            Some((true, _, _)) => WorkState::Failed,
            Some((false, _, s)) => match str_at(s, "/status") {
                Some("failed" | "error") => WorkState::Failed,
                Some("killed" | "stopped" | "interrupted") => WorkState::Stopped,
                _ => WorkState::Completed,
            },
        };
        let ok = matches!(state, WorkState::Completed);
        match u.name.as_str() {
            n if is_agent_tool(n) => {
                let structured = u.result.as_ref().map(|r| &r.2);
                let id = structured
                    .and_then(|s| str_at(s, "/agentId"))
                    .map(|s| bound(s, MAX_FIELD))
                    .unwrap_or_else(|| u.id.clone());
                let state = match (state, structured.and_then(|s| str_at(s, "/status"))) {
                    (WorkState::Completed, Some("async_launched")) => pending,
                    (s, _) => s,
                };
                a.agents.push(ActivityAgent {
                    transcript: has_agent_file(&id),
                    id,
                    description: str_at(&u.input, "/description").map(first_line),
                    kind: str_at(&u.input, "/subagent_type").map(|s| bound(s, MAX_FIELD)),
                    state,
                });
            }
            "TodoWrite" => {
                if let Some(list) = u.input.get("todos").and_then(Value::as_array) {
                    a.todos = list
                        .iter()
                        .take(MAX_ITEMS)
                        .filter_map(|t| {
                            Some(ActivityTodo {
                                content: first_line(str_at(t, "/content")?),
                                status: bound(str_at(t, "/status").unwrap_or("pending"), 32),
                            })
                        })
                        .collect();
                }
            }
            "Skill" => {
                if let Some(s) = str_at(&u.input, "/skill").or(str_at(&u.input, "/command")) {
                    let s = bound(s, MAX_FIELD);
                    if !a.skills.contains(&s) && a.skills.len() < MAX_ITEMS {
                        a.skills.push(s);
                    }
                }
            }
            "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
                if ok {
                    claude_file(&mut files, &u);
                }
            }
            n if mcp_server(n).is_some() => count_mcp(&mut mcp, n),
            _ => {
                let background =
                    u.input.get("run_in_background").and_then(Value::as_bool) == Some(true);
                let state = if background && state == WorkState::Completed {
                    let shell = u
                        .result
                        .as_ref()
                        .and_then(|r| str_at(&r.2, "/backgroundTaskId"))
                        .map(str::to_string);
                    if shell.is_some_and(|s| killed.contains(&s)) {
                        WorkState::Stopped
                    } else {
                        pending
                    }
                } else {
                    state
                };
                tasks.push(ActivityTask {
                    exit_code: None,
                    command: claude_command(&u.name, &u.input),
                    id: u.id,
                    tool: u.name,
                    background,
                    state,
                });
            }
        }
    }
    (a.tasks, a.tasks_omitted) = keep_newest(tasks);
    let (agents, _) = keep_newest(std::mem::take(&mut a.agents));
    a.agents = agents;
    a.files = files.done();
    a.mcp_servers = mcp_list(mcp);
    a.skills_used = a.skills.clone();
    a
}

/// A successful Write/Edit/MultiEdit/NotebookEdit's change.
fn claude_file(files: &mut Files, u: &ClaudeUse) {
    let Some(path) = str_at(&u.input, "/file_path").or(str_at(&u.input, "/notebook_path")) else {
        return;
    };
    let s = u.result.as_ref().map(|r| &r.2).unwrap_or(&Value::Null);
    let created = str_at(s, "/type") == Some("create");
    if let Some(hunks) = s.get("structuredPatch").and_then(Value::as_array)
        && (!hunks.is_empty() || !created)
    {
        let (mut add, mut rem) = (0, 0);
        for h in hunks {
            for l in h
                .get("lines")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match l.as_str().and_then(|l| l.chars().next()) {
                    Some('+') => add += 1,
                    Some('-') => rem += 1,
                    _ => {}
                }
            }
        }
        files.add(path, Some(add), Some(rem), created);
        return;
    }
    match u.name.as_str() {
        "Write" => {
            let added = str_at(&u.input, "/content").map(lines_of);
            // An update without a patch: what it replaced is unknown.
            let removed = if created { Some(0) } else { None };
            files.add(path, added, removed, created);
        }
        "Edit" => files.add(
            path,
            str_at(&u.input, "/new_string").map(lines_of),
            str_at(&u.input, "/old_string").map(lines_of),
            false,
        ),
        "MultiEdit" => {
            let edits = u.input.get("edits").and_then(Value::as_array);
            let sum = |k: &str| {
                edits.map(|e| {
                    e.iter()
                        .map(|e| e.get(k).and_then(Value::as_str).map_or(0, lines_of))
                        .sum()
                })
            };
            files.add(path, sum("new_string"), sum("old_string"), false);
        }
        _ => files.add(path, None, None, false),
    }
}

/// A codex call waiting for, or matched with, its output.
struct CodexCall {
    id: String,
    name: String,
    args: Value,
    /// Raw text of a custom tool's input (apply_patch's patch).
    input: Option<String>,
    /// Some(success) once its output or end event came back.
    done: Option<(bool, Option<i64>)>,
}

/// Codex's apply_patch text: (path, added, removed, created) per file.
fn patch_files(patch: &str) -> Vec<(String, u64, Option<u64>, bool)> {
    let mut out: Vec<(String, u64, Option<u64>, bool)> = Vec::new();
    for l in patch.lines() {
        if let Some(p) = l.strip_prefix("*** Add File: ") {
            out.push((p.trim().to_string(), 0, Some(0), true));
        } else if let Some(p) = l.strip_prefix("*** Update File: ") {
            out.push((p.trim().to_string(), 0, Some(0), false));
        } else if let Some(p) = l.strip_prefix("*** Delete File: ") {
            out.push((p.trim().to_string(), 0, None, false));
        } else if let Some(p) = l.strip_prefix("*** Move to: ") {
            if let Some(last) = out.last_mut() {
                last.0 = p.trim().to_string();
            }
        } else if l.starts_with("***") {
        } else if let Some(last) = out.last_mut() {
            if l.starts_with('+') {
                last.1 += 1;
            } else if l.starts_with('-') {
                last.2 = last.2.map(|r| r + 1);
            }
        }
    }
    out
}

/// The command of a codex shell call's arguments (an argv array, or a string).
fn codex_command(args: &Value) -> Option<String> {
    let c = args
        .get("command")
        .or(args.get("cmd"))
        .or(args.pointer("/action/command"))?;
    match c {
        Value::String(s) => Some(first_line(s)),
        Value::Array(a) => {
            let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            // `bash -lc "…"`: the script is the command.
            let shown = match words.as_slice() {
                [sh, flag, script] if sh.ends_with("sh") && flag.starts_with('-') => {
                    script.to_string()
                }
                _ => words.join(" "),
            };
            Some(first_line(&shown))
        }
        _ => None,
    }
}

/// A codex tool output's success and exit code: `{"output", "metadata": {"exit_code"}}`
/// JSON, or codex's text `Exit code: N`.
fn codex_output(output: &Value) -> (bool, Option<i64>) {
    let text = match output {
        Value::String(s) => s.clone(),
        Value::Object(_) => output
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    if let Some(ok) = output.get("success").and_then(Value::as_bool) {
        return (ok, None);
    }
    if let Ok(v) = serde_json::from_str::<Value>(&text)
        && let Some(code) = v.pointer("/metadata/exit_code").and_then(Value::as_i64)
    {
        return (code == 0, Some(code));
    }
    if let Some(code) = text
        .lines()
        .find_map(|l| l.strip_prefix("Exit code: "))
        .and_then(|c| c.trim().parse::<i64>().ok())
    {
        return (code == 0, Some(code));
    }
    (true, None)
}

/// A codex child agent's status word as a [`WorkState`].
fn codex_agent_state(s: &Value) -> Option<WorkState> {
    let word = match s {
        Value::String(w) => w.as_str(),
        Value::Object(o) => o.keys().next().map(String::as_str)?,
        _ => return None,
    };
    Some(match word {
        "pending_init" | "pendingInit" => WorkState::Scheduled,
        "running" => WorkState::Running,
        "completed" => WorkState::Completed,
        "errored" | "failed" => WorkState::Failed,
        "shutdown" | "not_found" | "interrupted" => WorkState::Stopped,
        _ => return None,
    })
}

/// The activity of a Codex rollout. `live` as for [`claude`].
pub fn codex(bytes: &[u8], live: bool) -> Activity {
    let mut a = Activity::default();
    let mut calls: Vec<CodexCall> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut agents: Vec<ActivityAgent> = Vec::new();
    let mut mcp = BTreeMap::new();
    let mut context_events = 0u64;
    let pending = if live {
        WorkState::Running
    } else {
        WorkState::Stopped
    };
    for v in json_lines(bytes) {
        let Some(p) = v.get("payload") else { continue };
        match str_at(&v, "/type") {
            Some("turn_context") => {
                if let Some(m) = str_at(p, "/model") {
                    a.model = Some(bound(m, MAX_FIELD));
                }
            }
            Some("compacted") => a.compactions += 1,
            Some("response_item") => match str_at(p, "/type") {
                Some(t @ ("function_call" | "custom_tool_call" | "local_shell_call")) => {
                    let Some(id) = str_at(p, "/call_id").or(str_at(p, "/id")) else {
                        continue;
                    };
                    let name = match t {
                        "local_shell_call" => "local_shell",
                        _ => str_at(p, "/name").unwrap_or("?"),
                    };
                    let args = match p.get("arguments") {
                        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
                        Some(v) => v.clone(),
                        None => p.clone(),
                    };
                    let mut input = str_at(p, "/input").map(str::to_string);
                    if input.is_none() && name == "apply_patch" {
                        input = str_at(&args, "/input").map(str::to_string);
                    }
                    let done = match (t, str_at(p, "/status")) {
                        ("local_shell_call", Some("completed")) => Some((true, None)),
                        _ => None,
                    };
                    if index.contains_key(id) {
                        continue;
                    }
                    index.insert(id.to_string(), calls.len());
                    calls.push(CodexCall {
                        id: bound(id, MAX_FIELD),
                        name: bound(name, MAX_FIELD),
                        args,
                        input,
                        done,
                    });
                }
                Some("function_call_output" | "custom_tool_call_output") => {
                    if let Some(i) = str_at(p, "/call_id").and_then(|id| index.get(id))
                        && calls[*i].done.is_none()
                    {
                        let out = p.get("output").cloned().unwrap_or(Value::Null);
                        calls[*i].done = Some(codex_output(&out));
                    }
                }
                _ => {}
            },
            Some("event_msg") => match str_at(p, "/type") {
                Some("token_count") => {
                    if let Some(t) = u64_at(p, "/info/last_token_usage/total_tokens") {
                        a.context_tokens = Some(t);
                    }
                    if let Some(w) = u64_at(p, "/info/model_context_window") {
                        a.context_window = Some(w);
                    }
                }
                Some("context_compacted") => context_events += 1,
                Some("exec_command_end") => {
                    if let Some(i) = str_at(p, "/call_id").and_then(|id| index.get(id)) {
                        let code = p.get("exit_code").and_then(Value::as_i64);
                        calls[*i].done = Some((code.is_none_or(|c| c == 0), code));
                    }
                }
                Some("patch_apply_end") => {
                    if let Some(i) = str_at(p, "/call_id").and_then(|id| index.get(id)) {
                        let ok = p.get("success").and_then(Value::as_bool) != Some(false);
                        calls[*i].done = Some((ok, None));
                    }
                }
                Some("mcp_tool_call_end") => {
                    if let Some(s) = str_at(p, "/invocation/server")
                        && !index.contains_key(str_at(p, "/call_id").unwrap_or(""))
                    {
                        count_mcp(&mut mcp, &format!("mcp__{s}__"));
                    }
                }
                Some("collab_agent_spawn_end") => {
                    if let Some(id) = str_at(p, "/new_thread_id")
                        && agents.len() < MAX_ITEMS
                    {
                        agents.push(ActivityAgent {
                            id: bound(id, MAX_FIELD),
                            description: str_at(p, "/prompt").map(first_line),
                            kind: None,
                            state: p
                                .get("status")
                                .and_then(codex_agent_state)
                                .unwrap_or(WorkState::Running),
                            transcript: false,
                        });
                    }
                }
                Some("collab_waiting_end" | "collab_close_end") => {
                    let mut set = |id: &str, s: &Value| {
                        if let (Some(ag), Some(st)) =
                            (agents.iter_mut().find(|a| a.id == id), codex_agent_state(s))
                        {
                            ag.state = st;
                        }
                    };
                    if let Some(m) = p.get("statuses").and_then(Value::as_object) {
                        for (id, s) in m {
                            set(id, s);
                        }
                    }
                    if let (Some(id), Some(s)) = (str_at(p, "/receiver_thread_id"), p.get("status"))
                    {
                        set(id, s);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    if a.compactions == 0 {
        a.compactions = context_events;
    }
    let mut files = Files::default();
    let mut tasks = Vec::new();
    for c in calls {
        let state = match c.done {
            None => pending,
            Some((true, _)) => WorkState::Completed,
            Some((false, _)) => WorkState::Failed,
        };
        match c.name.as_str() {
            "apply_patch" => {
                if state == WorkState::Completed {
                    for (path, add, rem, created) in
                        patch_files(c.input.as_deref().unwrap_or_default())
                    {
                        files.add(&path, Some(add), rem, created);
                    }
                }
            }
            "update_plan" => {
                if let Some(plan) = c.args.get("plan").and_then(Value::as_array) {
                    a.todos = plan
                        .iter()
                        .take(MAX_ITEMS)
                        .filter_map(|t| {
                            Some(ActivityTodo {
                                content: first_line(str_at(t, "/step")?),
                                status: bound(str_at(t, "/status").unwrap_or("pending"), 32),
                            })
                        })
                        .collect();
                }
            }
            n if mcp_server(n).is_some() => count_mcp(&mut mcp, n),
            _ => tasks.push(ActivityTask {
                command: codex_command(&c.args),
                exit_code: c.done.and_then(|d| d.1),
                id: c.id,
                tool: c.name,
                background: false,
                state,
            }),
        }
    }
    (a.tasks, a.tasks_omitted) = keep_newest(tasks);
    a.agents = agents;
    a.files = files.done();
    a.mcp_servers = mcp_list(mcp);
    a
}

/// The context window Claude Code reported for `model` in the last `result` frame of its
/// stream-json output (`modelUsage[model].contextWindow`): only a matching, unambiguous
/// report (the model the transcript names, exactly); none otherwise.
pub fn claude_reported_window(stream: &[u8], model: Option<&str>) -> Option<u64> {
    let model = model?;
    let last = json_lines(stream)
        .filter(|v| str_at(v, "/type") == Some("result") && v.get("modelUsage").is_some())
        .last()?;
    let usage = last.get("modelUsage")?.as_object()?;
    usage
        .get(model)
        .and_then(|u| u64_at(u, "/contextWindow"))
        .filter(|w| *w > 0)
}

/// The plan of the last `turn/plan/updated` notification in codex app-server's output
/// `stream` (`{"method": "turn/plan/updated", "params": {plan: [{step, status}]}}`, status
/// `pending`, `inProgress` or `completed`: given as the todos' `pending`, `in_progress`,
/// `completed`), if it sent one.
pub fn codex_bridge_plan(stream: &[u8]) -> Option<Vec<ActivityTodo>> {
    let last = json_lines(stream)
        .filter(|v| str_at(v, "/method") == Some("turn/plan/updated"))
        .last()?;
    let plan = last.pointer("/params/plan")?.as_array()?;
    Some(
        plan.iter()
            .take(MAX_ITEMS)
            .filter_map(|t| {
                let status = match str_at(t, "/status").unwrap_or("pending") {
                    "inProgress" => "in_progress",
                    s => s,
                };
                Some(ActivityTodo {
                    content: first_line(str_at(t, "/step")?),
                    status: bound(status, 32),
                })
            })
            .collect(),
    )
}

/// What Claude Code announced for its current launch, in the last `system/init` frame of
/// its stream-json output (checked on 2.1.332, which sends one at the start of each turn,
/// with no login too): `mcp_servers: [{name, status, source?}]` (the servers it was
/// configured with and how each stands: `connected`, `failed`, `needs-auth`, `pending`, …)
/// and `skills: [name]` (the skills it can run: the account home's, the project's and its
/// built-in ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announced {
    pub mcp_servers: Vec<McpServer>,
    pub skills: Vec<String>,
}

/// The last `system/init` frame of Claude Code's stream-json output `stream`, if any.
pub fn claude_announced(stream: &[u8]) -> Option<Announced> {
    json_lines(stream)
        .filter(|v| str_at(v, "/type") == Some("system") && str_at(v, "/subtype") == Some("init"))
        .last()
        .map(|v| announced_of(&v))
}

/// The announcement an init frame `v` carries (bounded as the record's lists are).
pub fn announced_of(v: &Value) -> Announced {
    let mut out = Announced::default();
    for m in v
        .get("mcp_servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = str_at(m, "/name").filter(|n| !n.is_empty()) else {
            continue;
        };
        let name = bound(name, MAX_FIELD);
        if out.mcp_servers.len() >= MAX_ITEMS || out.mcp_servers.iter().any(|x| x.name == name) {
            continue;
        }
        out.mcp_servers.push(McpServer {
            name,
            calls: 0,
            status: str_at(m, "/status").map(|s| bound(s, 64)),
            source: str_at(m, "/source").map(|s| bound(s, MAX_FIELD)),
        });
    }
    for s in v
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let s = bound(s, MAX_FIELD);
        if !s.is_empty() && !out.skills.contains(&s) && out.skills.len() < MAX_ITEMS {
            out.skills.push(s);
        }
    }
    out
}

impl Activity {
    /// Merges what the tool announced into what its record shows it used: `skills` become
    /// the announced ones (in the tool's order) then any used one it did not announce
    /// (`skills_used` keeps the used ones); each announced MCP server gets its `status` and
    /// `source` (with its calls, 0 when the record has none), by name.
    pub fn announce(&mut self, n: &Announced) {
        let mut skills = n.skills.clone();
        for s in &self.skills {
            if !skills.contains(s) && skills.len() < MAX_ITEMS {
                skills.push(s.clone());
            }
        }
        self.skills = skills;
        for m in &n.mcp_servers {
            let full = self.mcp_servers.len() >= MAX_ITEMS;
            match self.mcp_servers.iter_mut().find(|x| x.name == m.name) {
                Some(x) => {
                    x.status = m.status.clone();
                    x.source = m.source.clone();
                }
                None if !full => self.mcp_servers.push(m.clone()),
                None => {}
            }
        }
        self.mcp_servers.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// The most workflows a live read keeps (the newest), and the most phases of one.
pub const MAX_WORKFLOWS: usize = 32;
pub const MAX_PHASES: usize = 64;

/// A workflow's live snapshot (seed 002: "Les instantanés de workflow en direct proviennent
/// de la sortie system/task_progress de Claude Code"), the latest one Claude Code sent for
/// it in the current launch's stream-json output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Workflow {
    /// The workflow run's id (the frame's `run_id`; its `task_id` when it has none).
    pub run_id: String,
    /// The task that runs it (`task_id`), and the tool use that started it when the frame
    /// names one (`tool_use_id`: a `tasks[].id`).
    pub task_id: String,
    pub tool_use_id: Option<String>,
    /// The script's name (`workflow_name` of its `task_started` frame); null when that
    /// frame was not seen.
    pub name: Option<String>,
    /// The task's own `usage.duration_ms`.
    pub duration_ms: Option<u64>,
    /// The agents observed so far (`workflow_agent` rows), done and failed among them.
    pub agents_total: u64,
    pub agents_done: u64,
    pub agents_failed: u64,
    pub phases: Vec<WorkflowPhase>,
    /// The workflow's end as its final summary says it (`completed`, `failed`, or `stopped`
    /// for a killed run); null while only live snapshots are known.
    #[serde(default)]
    pub state: Option<WorkState>,
    /// Whether the tool's final summary (`workflows/<runId>.json` beside the transcript) was
    /// read: `none` (not there: the workflow runs, or its summary is not written), `read`
    /// (this entry is the summary's), or `unreadable` (refused or malformed: `summary_reason`
    /// says why, and the entry keeps the live snapshot, if any).
    #[serde(default)]
    pub summary: SummaryRead,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_reason: Option<String>,
}

/// How a workflow's final summary was read ([`Workflow::summary`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummaryRead {
    #[default]
    None,
    Read,
    Unreadable,
}

/// One phase of a [`Workflow`] (a `workflow_phase` row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkflowPhase {
    pub index: i64,
    pub title: String,
    pub detail: Option<String>,
    /// Live, from the agents observed in it: `failed` when one failed, else `running` when
    /// one runs, else `scheduled`. An agent's completion does not prove the script left
    /// the phase, so a live phase is never `completed` (seed 002).
    pub state: WorkState,
    pub agents_total: u64,
    pub agents_done: u64,
    pub agents_failed: u64,
}

/// The live workflow snapshots in Claude Code's stream-json output `stream`: for each
/// workflow run, the last `system` frame of subtype `task_progress` that carries
/// `workflow_progress` (rows `{type: "workflow_agent", index, label, state:
/// start|progress|done|error, phaseIndex?, …}` and `{type: "workflow_phase", index, title}`,
/// as 2.1.332 sends them), named by its task's `task_started` `workflow_name`. At most
/// [`MAX_WORKFLOWS`] (the newest), in the order they were first seen.
pub fn claude_workflows(stream: &[u8]) -> Vec<Workflow> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut latest: BTreeMap<String, Workflow> = BTreeMap::new();
    for v in json_lines(stream) {
        if str_at(&v, "/type") != Some("system") {
            continue;
        }
        let Some(task) = str_at(&v, "/task_id") else {
            continue;
        };
        match str_at(&v, "/subtype") {
            Some("task_started") => {
                if let Some(n) = str_at(&v, "/workflow_name") {
                    if names.len() >= 4 * MAX_WORKFLOWS {
                        names.pop_first();
                    }
                    names.insert(bound(task, 256), bound(n, 512));
                }
            }
            Some("task_progress") => {
                let Some(rows) = v.get("workflow_progress").and_then(Value::as_array) else {
                    continue;
                };
                let task = bound(task, 256);
                let run_id = str_at(&v, "/run_id").map_or_else(|| task.clone(), |r| bound(r, 256));
                let w = workflow_of(&v, rows, &run_id, &task, names.get(&task).cloned());
                if !latest.contains_key(&run_id) {
                    order.push(run_id.clone());
                    if order.len() > MAX_WORKFLOWS {
                        let gone = order.remove(0);
                        latest.remove(&gone);
                    }
                }
                latest.insert(run_id, w);
            }
            _ => {}
        }
    }
    order
        .into_iter()
        .filter_map(|r| latest.remove(&r))
        .collect()
}

fn workflow_of(
    v: &Value,
    rows: &[Value],
    run_id: &str,
    task: &str,
    name: Option<String>,
) -> Workflow {
    let mut phases: Vec<WorkflowPhase> = Vec::new();
    let mut agents: Vec<(Option<i64>, &str)> = Vec::new();
    for r in rows {
        match str_at(r, "/type") {
            Some("workflow_phase") => {
                let Some(index) = r.get("index").and_then(Value::as_i64) else {
                    continue;
                };
                if phases.len() >= MAX_PHASES || phases.iter().any(|p| p.index == index) {
                    continue;
                }
                phases.push(WorkflowPhase {
                    index,
                    title: bound(str_at(r, "/title").unwrap_or(""), 512),
                    detail: str_at(r, "/detail").map(|d| bound(d, 1024)),
                    state: WorkState::Scheduled,
                    agents_total: 0,
                    agents_done: 0,
                    agents_failed: 0,
                });
            }
            Some("workflow_agent") => agents.push((
                r.get("phaseIndex").and_then(Value::as_i64),
                str_at(r, "/state").unwrap_or(""),
            )),
            _ => {}
        }
    }
    let done = |s: &str| s == "done";
    let failed = |s: &str| s == "error";
    let running = |s: &str| s == "start" || s == "progress";
    for p in &mut phases {
        let mine: Vec<&str> = agents
            .iter()
            .filter(|(i, _)| *i == Some(p.index))
            .map(|(_, s)| *s)
            .collect();
        p.agents_total = mine.len() as u64;
        p.agents_done = mine.iter().filter(|s| done(s)).count() as u64;
        p.agents_failed = mine.iter().filter(|s| failed(s)).count() as u64;
        p.state = if p.agents_failed > 0 {
            WorkState::Failed
        } else if mine.iter().any(|s| running(s)) {
            WorkState::Running
        } else {
            WorkState::Scheduled
        };
    }
    Workflow {
        run_id: run_id.to_string(),
        task_id: task.to_string(),
        tool_use_id: str_at(v, "/tool_use_id").map(|t| bound(t, 256)),
        name,
        duration_ms: u64_at(v, "/usage/duration_ms"),
        agents_total: agents.len() as u64,
        agents_done: agents.iter().filter(|(_, s)| done(s)).count() as u64,
        agents_failed: agents.iter().filter(|(_, s)| failed(s)).count() as u64,
        phases,
        state: None,
        summary: SummaryRead::None,
        summary_reason: None,
    }
}

/// The most final workflow summaries one read takes (the most recently written).
pub const MAX_SUMMARIES: usize = MAX_WORKFLOWS;

/// A finished workflow as Claude Code's own summary `workflows/<runId>.json` records it
/// (2.1.332's writer, read from its published code: one JSON object `{runId, timestamp,
/// taskId, workflowName, title, status: completed|failed|killed, durationMs, agentCount,
/// workflowProgress: [the `workflow_phase` / `workflow_agent` rows of its task_progress
/// frames], phases, error?, …}`). The phases' states are final: a phase in which an agent
/// failed is `failed`; in a completed workflow every other phase is `completed`; in a failed
/// or killed one a phase whose observed agents all finished is `completed` and any other
/// `stopped`. Err names what is wrong with the file.
pub fn claude_workflow_summary(bytes: &[u8]) -> Result<Workflow, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let run_id = str_at(&v, "/runId")
        .filter(|r| !r.is_empty())
        .ok_or("no runId")?;
    let state = match str_at(&v, "/status") {
        Some("completed") => WorkState::Completed,
        Some("failed") => WorkState::Failed,
        Some("killed") => WorkState::Stopped,
        other => {
            return Err(format!(
                "status {} is not an end this reader knows (completed, failed, killed)",
                other.map_or_else(|| "(none)".to_string(), |s| bound(s, 32))
            ));
        }
    };
    let rows: Vec<Value> = v
        .get("workflowProgress")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let run_id = bound(run_id, 256);
    let task = str_at(&v, "/taskId").map_or_else(|| run_id.clone(), |t| bound(t, 256));
    let name = str_at(&v, "/workflowName").map(|n| bound(n, 512));
    let mut w = workflow_of(&Value::Null, &rows, &run_id, &task, name);
    if w.phases.is_empty() {
        // No phase rows: the seeded phase titles, in order.
        for (i, p) in v
            .get("phases")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_PHASES)
            .enumerate()
        {
            if let Some(title) = str_at(p, "/title") {
                w.phases.push(WorkflowPhase {
                    index: i as i64,
                    title: bound(title, 512),
                    detail: str_at(p, "/detail").map(|d| bound(d, 1024)),
                    state: WorkState::Scheduled,
                    agents_total: 0,
                    agents_done: 0,
                    agents_failed: 0,
                });
            }
        }
    }
    for p in &mut w.phases {
        p.state = if p.agents_failed > 0 {
            WorkState::Failed
        } else if state == WorkState::Completed
            || (p.agents_total > 0 && p.agents_done == p.agents_total)
        {
            WorkState::Completed
        } else {
            WorkState::Stopped
        };
    }
    w.duration_ms = u64_at(&v, "/durationMs");
    if let Some(n) = u64_at(&v, "/agentCount") {
        w.agents_total = w.agents_total.max(n);
    }
    w.state = Some(state);
    w.summary = SummaryRead::Read;
    Ok(w)
}

/// The live snapshots `live` with the final summaries merged in: a summary (`Ok`) replaces
/// its run's snapshot (keeping the snapshot's `tool_use_id`, which only the live frames
/// name); an unreadable one (`Err(reason)`) marks its run's snapshot, or stands alone with
/// its run id when no snapshot is known. Summaries of runs no snapshot names come after the
/// snapshots; at most [`MAX_WORKFLOWS`] in all (the last ones).
pub fn merge_summaries(
    mut live: Vec<Workflow>,
    summaries: Vec<(String, Result<Workflow, String>)>,
) -> Vec<Workflow> {
    for (run_id, s) in summaries {
        let at = live.iter().position(|w| w.run_id == run_id);
        match (s, at) {
            (Ok(mut w), Some(i)) => {
                if w.tool_use_id.is_none() {
                    w.tool_use_id = live[i].tool_use_id.clone();
                }
                if w.name.is_none() {
                    w.name = live[i].name.clone();
                }
                live[i] = w;
            }
            (Ok(w), None) => live.push(w),
            (Err(reason), Some(i)) => {
                live[i].summary = SummaryRead::Unreadable;
                live[i].summary_reason = Some(reason);
            }
            (Err(reason), None) => live.push(Workflow {
                task_id: run_id.clone(),
                run_id,
                tool_use_id: None,
                name: None,
                duration_ms: None,
                agents_total: 0,
                agents_done: 0,
                agents_failed: 0,
                phases: Vec::new(),
                state: None,
                summary: SummaryRead::Unreadable,
                summary_reason: Some(reason),
            }),
        }
    }
    let over = live.len().saturating_sub(MAX_WORKFLOWS);
    live.drain(..over);
    live
}

/// The state of a tool call from its status word, `pending` when it has none yet.
fn status_state(status: Option<&str>, pending: WorkState) -> WorkState {
    match status {
        Some("success" | "completed") => WorkState::Completed,
        Some("error" | "failed") => WorkState::Failed,
        Some("cancelled" | "canceled" | "aborted") => WorkState::Stopped,
        Some("scheduled") => WorkState::Scheduled,
        _ => pending,
    }
}

/// The `Exit Code: N` a Gemini CLI shell result reports.
fn gemini_exit(result: Option<&Value>) -> Option<i64> {
    let text = result?.to_string();
    let at = text.find("Exit Code: ")? + "Exit Code: ".len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// The main argument of a tool call's arguments (gemini and opencode names).
fn arg_command(args: &Value) -> Option<String> {
    [
        "/command",
        "/file_path",
        "/filePath",
        "/dir_path",
        "/path",
        "/pattern",
        "/url",
        "/query",
        "/prompt",
        "/description",
    ]
    .iter()
    .find_map(|k| str_at(args, k))
    .map(first_line)
}

/// The activity of a Gemini CLI chat log (`super::gemini::records`): each `gemini` record's
/// `model`, `tokens.input` (the request's prompt: the last one is the context) and
/// `toolCalls[] {id, name, args, status, result, resultDisplay}`. `write_file` / `replace`
/// that succeeded are files (`resultDisplay.diffStat.model_added_lines` /
/// `model_removed_lines`, unknown when the person edited the proposal; `isNewFile` →
/// created); `write_todos` is the todo list (`todos[{description, status}]`, the last wins);
/// `activate_skill` a skill; every other call a task (`run_shell_command`'s `Exit Code: N`
/// is its exit code, non-zero → failed). Gemini's record names no MCP server, no sub-agent
/// state and no compaction: those stay empty. `live` as for [`claude`].
pub fn gemini(bytes: &[u8], live: bool) -> Activity {
    let pending = if live {
        WorkState::Running
    } else {
        WorkState::Stopped
    };
    let mut a = Activity::default();
    let mut files = Files::default();
    let mut tasks = Vec::new();
    let mut skills: Vec<String> = Vec::new();
    for r in super::gemini::records(bytes) {
        if str_at(&r, "/type") != Some("gemini") {
            continue;
        }
        if let Some(m) = str_at(&r, "/model") {
            a.model = Some(bound(m, MAX_FIELD));
        }
        if let Some(t) = u64_at(&r, "/tokens/input") {
            a.context_tokens = Some(t);
        }
        for c in r
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = str_at(c, "/name").unwrap_or("?");
            let args = c.get("args").cloned().unwrap_or(Value::Null);
            let mut state = status_state(str_at(c, "/status"), pending);
            match name {
                "write_file" | "replace" => {
                    if state != WorkState::Completed {
                        continue;
                    }
                    let d = c.get("resultDisplay").unwrap_or(&Value::Null);
                    let Some(path) = str_at(d, "/filePath").or(str_at(&args, "/file_path")) else {
                        continue;
                    };
                    let s = |k: &str| u64_at(d, &format!("/diffStat/{k}"));
                    let person =
                        s("user_added_lines").unwrap_or(0) + s("user_removed_lines").unwrap_or(0);
                    let (added, removed) = if person == 0 {
                        (s("model_added_lines"), s("model_removed_lines"))
                    } else {
                        (None, None)
                    };
                    let created = d.get("isNewFile").and_then(Value::as_bool) == Some(true);
                    files.add(path, added, removed, created);
                }
                "write_todos" => {
                    if let Some(t) = args.get("todos").and_then(Value::as_array) {
                        a.todos = todo_list(t, "/description");
                    }
                }
                "activate_skill" => {
                    if let Some(s) = str_at(&args, "/name").or(str_at(&args, "/skill"))
                        && skills.len() < MAX_ITEMS
                        && !skills.iter().any(|k| k == s)
                    {
                        skills.push(bound(s, MAX_FIELD));
                    }
                }
                _ => {
                    let exit_code = (name == "run_shell_command")
                        .then(|| gemini_exit(c.get("result")))
                        .flatten();
                    if state == WorkState::Completed && exit_code.is_some_and(|c| c != 0) {
                        state = WorkState::Failed;
                    }
                    tasks.push(ActivityTask {
                        id: bound(str_at(c, "/id").unwrap_or("?"), MAX_FIELD),
                        tool: bound(name, MAX_FIELD),
                        command: arg_command(&args),
                        background: false,
                        state,
                        exit_code,
                    });
                }
            }
        }
    }
    (a.tasks, a.tasks_omitted) = keep_newest(tasks);
    a.files = files.done();
    a.skills = skills;
    a.skills_used = a.skills.clone();
    a
}

/// The activity of an OpenCode export (`super::opencode`): each assistant message's
/// `providerID/modelID` and, for one that reached its model (no `error`, some tokens),
/// `tokens.input + tokens.cache.read + tokens.cache.write` (the last is the context); its
/// `tool` parts `{callID, tool, state: {status, input, output, metadata}}`: `edit` / `write`
/// / `patch` that completed are files (`metadata.filediff.additions` / `deletions`; a
/// `write` counts its content's lines and is created unless `metadata.exists`), `todowrite`
/// the todo list (`todos[{content, status}]`, the last wins), `task` a sub-agent
/// (`description`, `subagent_type`, `metadata.sessionId` when given), `skill` a skill,
/// every other tool a task (`bash`'s `metadata.exit` its exit code, non-zero → failed);
/// `compaction` parts are compactions. MCP tools are named `<server>_<tool>` in OpenCode,
/// which cannot be split with certainty: they are tasks, no MCP server is named.
pub fn opencode(bytes: &[u8], live: bool) -> Activity {
    let pending = if live {
        WorkState::Running
    } else {
        WorkState::Stopped
    };
    let mut a = Activity::default();
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return a;
    };
    let mut files = Files::default();
    let mut tasks = Vec::new();
    let mut skills: Vec<String> = Vec::new();
    for m in v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let info = m.get("info").unwrap_or(&Value::Null);
        if str_at(info, "/role") == Some("assistant") {
            match (str_at(info, "/providerID"), str_at(info, "/modelID")) {
                (Some(p), Some(id)) => a.model = Some(bound(&format!("{p}/{id}"), MAX_FIELD)),
                (None, Some(id)) => a.model = Some(bound(id, MAX_FIELD)),
                _ => {}
            }
            let t = |k: &str| u64_at(info, &format!("/tokens/{k}"));
            let ctx = t("input").unwrap_or(0)
                + t("cache/read").unwrap_or(0)
                + t("cache/write").unwrap_or(0);
            if info.get("error").is_none() && (ctx > 0 || t("output").unwrap_or(0) > 0) {
                a.context_tokens = Some(ctx);
            }
        }
        for p in m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match str_at(p, "/type") {
                Some("compaction") => {
                    a.compactions += 1;
                    continue;
                }
                Some("tool") => {}
                _ => continue,
            }
            let name = str_at(p, "/tool").unwrap_or("?");
            let st = p.get("state").unwrap_or(&Value::Null);
            let input = st.get("input").cloned().unwrap_or(Value::Null);
            let meta = st.get("metadata").unwrap_or(&Value::Null);
            let mut state = status_state(str_at(st, "/status"), pending);
            let id = bound(
                str_at(p, "/callID").or(str_at(p, "/id")).unwrap_or("?"),
                MAX_FIELD,
            );
            match name {
                "edit" | "write" | "patch" | "apply_patch" | "multiedit" => {
                    if state != WorkState::Completed {
                        continue;
                    }
                    let Some(path) = str_at(meta, "/filediff/file")
                        .or(str_at(&input, "/filePath"))
                        .or(str_at(meta, "/filepath"))
                    else {
                        continue;
                    };
                    let (added, removed) = (
                        u64_at(meta, "/filediff/additions"),
                        u64_at(meta, "/filediff/deletions"),
                    );
                    let existed = meta.get("exists").and_then(Value::as_bool);
                    if name == "write" && added.is_none() {
                        let created = existed == Some(false);
                        files.add(
                            path,
                            str_at(&input, "/content").map(lines_of),
                            if created { Some(0) } else { None },
                            created,
                        );
                    } else {
                        files.add(path, added, removed, existed == Some(false));
                    }
                }
                "todowrite" => {
                    if let Some(t) = input.get("todos").and_then(Value::as_array) {
                        a.todos = todo_list(t, "/content");
                    }
                }
                "task" => {
                    if a.agents.len() < MAX_ITEMS {
                        a.agents.push(ActivityAgent {
                            id: str_at(meta, "/sessionId")
                                .map(|s| bound(s, MAX_FIELD))
                                .unwrap_or(id),
                            description: str_at(&input, "/description").map(first_line),
                            kind: str_at(&input, "/subagent_type").map(|s| bound(s, MAX_FIELD)),
                            state,
                            transcript: false,
                        });
                    }
                }
                "skill" => {
                    if let Some(s) = str_at(&input, "/name")
                        && skills.len() < MAX_ITEMS
                        && !skills.iter().any(|k| k == s)
                    {
                        skills.push(bound(s, MAX_FIELD));
                    }
                }
                _ => {
                    let exit_code = meta.get("exit").and_then(Value::as_i64);
                    if state == WorkState::Completed && exit_code.is_some_and(|c| c != 0) {
                        state = WorkState::Failed;
                    }
                    tasks.push(ActivityTask {
                        id,
                        tool: bound(name, MAX_FIELD),
                        command: arg_command(&input),
                        background: false,
                        state,
                        exit_code,
                    });
                }
            }
        }
    }
    (a.tasks, a.tasks_omitted) = keep_newest(tasks);
    a.files = files.done();
    a.skills = skills;
    a.skills_used = a.skills.clone();
    a
}

/// A todo list as gemini's `write_todos` and opencode's `todowrite` write it: each item's
/// text at `text` (its first line), its status (`pending` when absent), at most
/// [`MAX_ITEMS`].
fn todo_list(items: &[Value], text: &str) -> Vec<ActivityTodo> {
    items
        .iter()
        .take(MAX_ITEMS)
        .filter_map(|t| {
            Some(ActivityTodo {
                content: first_line(str_at(t, text)?),
                status: bound(str_at(t, "/status").unwrap_or("pending"), 32),
            })
        })
        .collect()
}
