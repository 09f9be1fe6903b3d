//! `GET /runs/{ref}/activity` and `GET /runs/{ref}/activity/agents/{agent}`: what a run's
//! tool did, read at each request from its own record ([`crate::providers::records`],
//! [`crate::providers::records::activity`]), seed 002. The manager reads and audits; this
//! module holds the answers' shapes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::providers::records::activity::{Activity, Announced};
pub use crate::providers::records::activity::{
    ActivityAgent, ActivityTask, ActivityTodo, FileActivity, McpServer, SummaryRead, WorkState,
    Workflow, WorkflowPhase,
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
    /// The skills the tool announced for its current launch (claude's `system/init` frame
    /// of a stream-json run: the account home's, the project's and its built-in ones), then
    /// any other skill the record shows used.
    pub skills: Vec<String>,
    /// The skills the record shows used (claude's Skill tool, gemini's and opencode's
    /// skill tools).
    #[serde(default)]
    pub skills_used: Vec<String>,
    /// The MCP servers the tool announced (with their `status` and `source`: claude's
    /// `system/init` frame) and those whose tools the record shows being called (`calls`).
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
    /// `system/task_progress` frame with `workflow_progress` of its stream-json output, and
    /// each finished workflow's final summary (`workflows/<runId>.json` beside the
    /// transcript, `summary: read`, `state` its end, its phases' states final); at most the
    /// newest 32. `tool_use_id` names the `tasks[].id` that started it. Empty for the other
    /// tools.
    #[serde(default)]
    pub workflows: Vec<Workflow>,
    /// Claude only: how many parts of the workflows' records could not be read: each final
    /// summary refused or malformed, and a gap in the live output read (its older frames
    /// past the 8 MiB read, or frames after the run's transcript cap). 0 when everything
    /// was read; the live progress that was read is kept either way.
    #[serde(default)]
    pub unreadable: u64,
    /// Why, one line each (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_reasons: Vec<String>,
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
            skills_used: a.skills_used,
            mcp_servers: a.mcp_servers,
            model: a.model,
            context_tokens: a.context_tokens,
            context_window,
            context_percent,
            compactions: a.compactions,
            workflows: Vec::new(),
            unreadable: 0,
            unreadable_reasons: Vec::new(),
            transcript,
            reason,
        }
    }

    /// Counts one unreadable part, `why`.
    pub fn add_unreadable(&mut self, why: String) {
        self.unreadable += 1;
        if self.unreadable_reasons.len() < 8 {
            self.unreadable_reasons
                .push(crate::text::one_line(&why, 512));
        }
    }
}

/// What a stdio run's current launch wrote on its stdout (the attach stream's bytes as the
/// server stored them, `gen-N/stdout.raw`: claude's stream-json frames, codex's app-server
/// notifications), read for an activity.
#[derive(Debug, Default)]
pub struct LiveOutput {
    /// The last 8 MiB of the output, from its first whole line.
    pub tail: Vec<u8>,
    /// Claude: its last `system/init` frame's announcement (looked for in the first 1 MiB
    /// when the tail has none: the frame comes first in a turn).
    pub announced: Option<Announced>,
    /// Why the live frames read are not all the launch sent (older ones dropped past the
    /// read's bound, or the transcript capped), if they are not.
    pub gap: Option<String>,
}

/// The most bytes of a launch's output read for its live frames (the seed's 8 MiB per file).
pub const LIVE_MAX: u64 = crate::providers::records::MAX_FILE;
/// The most bytes of the output's start looked at for an init frame the tail does not have.
const HEAD_MAX: u64 = 1 << 20;

/// Reads proctor's own output file `stdout` of a stdio launch (`None` when there is none: a
/// PTY run, or a launch that wrote nothing yet). `capped`: the run's transcript reached its
/// cap, so what the tool wrote after it is not on disk.
pub fn read_live(stdout: &Path, capped: bool) -> Option<LiveOutput> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match crate::files::open_private_read(stdout) {
        Ok(f) => f,
        Err(crate::files::FilesError::Io { err, .. })
            if err.kind() == std::io::ErrorKind::NotFound =>
        {
            return None;
        }
        Err(e) => {
            return Some(LiveOutput {
                gap: Some(format!("the run's output could not be read: {e}")),
                ..LiveOutput::default()
            });
        }
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(LIVE_MAX);
    let mut tail = Vec::new();
    let read = f
        .seek(SeekFrom::Start(start))
        .and_then(|_| (&mut f).take(LIVE_MAX).read_to_end(&mut tail));
    if let Err(e) = read {
        return Some(LiveOutput {
            gap: Some(format!("the run's output could not be read: {e}")),
            ..LiveOutput::default()
        });
    }
    if start > 0 {
        let cut = tail
            .iter()
            .position(|c| *c == b'\n')
            .map_or(tail.len(), |i| i + 1);
        tail.drain(..cut);
    }
    let mut announced = crate::providers::records::activity::claude_announced(&tail);
    if announced.is_none() && start > 0 {
        let mut head = Vec::new();
        if f.seek(SeekFrom::Start(0)).is_ok()
            && (&mut f).take(HEAD_MAX).read_to_end(&mut head).is_ok()
        {
            // Only whole lines of the head.
            let end = head.iter().rposition(|c| *c == b'\n').map_or(0, |i| i + 1);
            announced = crate::providers::records::activity::claude_announced(&head[..end]);
        }
    }
    let gap = if start > 0 {
        Some(format!(
            "the run's output is {len} bytes: only its last {} MiB are read, so the live \
             workflow frames before them are missing",
            LIVE_MAX >> 20
        ))
    } else if capped {
        Some(
            "the run's output passed its transcript cap: live workflow frames after it were \
             not kept"
                .to_string(),
        )
    } else {
        None
    };
    Some(LiveOutput {
        tail,
        announced,
        gap,
    })
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
