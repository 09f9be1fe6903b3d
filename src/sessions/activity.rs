//! `GET /runs/{ref}/activity` and `GET /runs/{ref}/activity/agents/{agent}`: what a run's
//! tool did, read at each request from its own record ([`crate::providers::records`],
//! [`crate::providers::records::activity`]), seed 002. The manager reads and audits; this
//! module holds the answers' shapes.

use serde::{Deserialize, Serialize};

use crate::providers::records::activity::Activity;
pub use crate::providers::records::activity::{
    ActivityAgent, ActivityTask, ActivityTodo, FileActivity, McpServer, WorkState, Workflow,
    WorkflowPhase,
};
pub use crate::providers::records::{Role, TranscriptState};

/// `GET /runs/{ref}/activity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunActivity {
    #[serde(rename = "ref")]
    pub run_ref: String,
    /// The tool (`claude` or `codex`).
    pub tool: String,
    /// Sub-agents (claude's Task tool uses) or child agents (codex).
    pub agents: Vec<ActivityAgent>,
    /// Commands and other tool uses, oldest first (at most the newest 500).
    pub tasks: Vec<ActivityTask>,
    /// How many older tasks were left out.
    pub tasks_omitted: u64,
    /// The files the tool changed (Write/Edit tool uses, codex patches), by path.
    pub files: Vec<FileActivity>,
    /// The tool's last todo list (claude's TodoWrite, codex's update_plan).
    pub todos: Vec<ActivityTodo>,
    /// The skills the tool used (claude's Skill tool).
    pub skills: Vec<String>,
    /// The MCP servers whose tools the record shows being called.
    pub mcp_servers: Vec<McpServer>,
    /// The model of the last request.
    pub model: Option<String>,
    /// The LAST request's context tokens (never a sum over the session).
    pub context_tokens: Option<u64>,
    /// The model's context window, only when the tool reports it (codex's rollout, claude's
    /// result frame `modelUsage[model].contextWindow` of the current launch); null otherwise.
    pub context_window: Option<u64>,
    /// Claude only: 100 × context_tokens / context_window, from a matching, unambiguous
    /// report; null when unknown (and always for codex).
    pub context_percent: Option<f64>,
    /// How many times the conversation was compacted.
    pub compactions: u64,
    /// Claude only: the live snapshot of each workflow the current launch runs, the latest
    /// `system/task_progress` frame with `workflow_progress` of its stream-json output (at
    /// most the newest 32); `tool_use_id` names the `tasks[].id` that started it. Empty for
    /// the other tools and for a PTY run (no stream-json output).
    #[serde(default)]
    pub workflows: Vec<Workflow>,
    /// Where the tool's record stands: read, pending, missing or unreadable (`reason`).
    pub transcript: TranscriptState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RunActivity {
    /// The answer for a record read (`activity` empty unless `transcript` is `read`).
    /// `reported_window`: the context window the tool itself reported for this launch
    /// (claude's result frame), when it did.
    pub fn new(
        run_ref: &str,
        tool: &str,
        a: Activity,
        transcript: TranscriptState,
        reason: Option<String>,
        reported_window: Option<u64>,
    ) -> RunActivity {
        let claude = tool == "claude";
        let context_window = if claude {
            reported_window
        } else {
            a.context_window
        };
        let context_percent = match (claude, a.context_tokens, context_window) {
            (true, Some(t), Some(w)) if w > 0 => {
                Some(((t as f64) * 1000.0 / (w as f64)).round() / 10.0)
            }
            _ => None,
        };
        // A window is kept only with a matching percent for claude (seed: otherwise both
        // are null).
        let context_window = if claude && context_percent.is_none() {
            None
        } else {
            context_window
        };
        RunActivity {
            run_ref: run_ref.to_string(),
            tool: tool.to_string(),
            agents: a.agents,
            tasks: a.tasks,
            tasks_omitted: a.tasks_omitted,
            files: a.files,
            todos: a.todos,
            skills: a.skills,
            mcp_servers: a.mcp_servers,
            model: a.model,
            context_tokens: a.context_tokens,
            context_window,
            context_percent,
            compactions: a.compactions,
            workflows: Vec::new(),
            transcript,
            reason,
        }
    }
}

/// One turn of a sub-agent's transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentTurn {
    pub role: Role,
    /// As the tool recorded it (not sanitised), at most 64 KiB (then `[...]`).
    pub text: String,
}

/// `GET /runs/{ref}/activity/agents/{agent}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentTranscript {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub agent: String,
    pub turns: Vec<AgentTurn>,
    /// `read`, or `unreadable` with `reason`.
    pub transcript: TranscriptState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The most bytes of one turn's text.
pub const MAX_TURN: usize = 64 * 1024;

/// `text` cut to [`MAX_TURN`] bytes, `[...]` included.
pub fn clip(text: &str) -> String {
    if text.len() <= MAX_TURN {
        return text.to_string();
    }
    let mark = super::messages::CLIP_MARK;
    let head = crate::providers::records::activity::bound(text, MAX_TURN - mark.len());
    format!("{head}{mark}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_percent_needs_a_reported_window_and_codex_has_none() {
        let a = Activity {
            context_tokens: Some(50_000),
            context_window: Some(272_000),
            ..Activity::default()
        };
        let c = RunActivity::new("r", "claude", a.clone(), TranscriptState::Read, None, None);
        assert_eq!((c.context_window, c.context_percent), (None, None));
        let c = RunActivity::new(
            "r",
            "claude",
            a.clone(),
            TranscriptState::Read,
            None,
            Some(200_000),
        );
        assert_eq!(
            (c.context_window, c.context_percent),
            (Some(200_000), Some(25.0))
        );
        let x = RunActivity::new("r", "codex", a, TranscriptState::Read, None, Some(1));
        assert_eq!((x.context_window, x.context_percent), (Some(272_000), None));
        assert_eq!(x.context_tokens, Some(50_000));
    }

    #[test]
    fn a_long_turn_is_clipped_with_the_mark() {
        let t = clip(&"é".repeat(40 * 1024));
        assert!(t.len() <= MAX_TURN && t.ends_with("[...]"));
    }
}
