//! `proctor session activity`: what a run's tool did, as its own record says, through
//! `GET /runs/{ref}/activity` (and `/activity/agents/{agent}` with `--agent`): a thin client.

use std::process::ExitCode;

use clap::Args;

use super::{Client, normalise_ref, t};
use crate::api::runs::{
    self as wire, AgentTranscript, MessageRole, RunActivity, SummaryRead, TranscriptState,
    WorkState,
};
use crate::text;

/// What the tool of a Claude Code, Codex, Gemini CLI or OpenCode session did, read from its own record.
///
/// Model and context (the last request's tokens, and the share of the window when the tool
/// reports one; otherwise the tokens with "window unknown"), compactions, agents, tasks
/// (commands and other tool uses with their state), files changed (+added -removed), the
/// todo list, skills and MCP servers. `--agent ID` prints a Claude Code sub-agent's
/// transcript. Everything from the record is shown sanitised. Exit 1 (422) for a tool whose
/// record proctor does not read (Grok).
#[derive(Debug, Args)]
pub struct ActivityArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// Print this sub-agent's transcript (an id from the agents list).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: &Client, a: ActivityArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    if let Some(agent) = &a.agent {
        let v: AgentTranscript = c.get_blocking(&wire::activity_agent(&run_ref, agent))?;
        if a.json {
            crate::cli::print_json(&v)?;
        } else {
            print!("{}", agent_human(&v));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let v: RunActivity = c.get_blocking(&wire::at(wire::ACTIVITY, &run_ref))?;
    if a.json {
        crate::cli::print_json(&v)?;
    } else {
        print!("{}", human(&v));
    }
    Ok(ExitCode::SUCCESS)
}

fn state(s: WorkState) -> &'static str {
    match s {
        WorkState::Running => "running",
        WorkState::Completed => "completed",
        WorkState::Failed => "failed",
        WorkState::Stopped => "stopped",
        WorkState::Scheduled => "scheduled",
    }
}

fn opt(s: Option<&str>, width: usize) -> String {
    s.map_or_else(|| "-".to_string(), |s| t(s, width))
}

/// The activity for a person: every string from the record through the sanitiser.
pub fn human(v: &RunActivity) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} {}: transcript {}\n",
        t(&v.run_ref, 32),
        t(&v.tool, 16),
        v.transcript.as_str()
    ));
    if let Some(r) = &v.reason {
        out.push_str(&format!("unreadable: {}\n", t(r, 400)));
    }
    if v.transcript == TranscriptState::Pending {
        out.push_str("(the tool has not written its record yet)\n");
    }
    out.push_str(&format!("model {}\n", opt(v.model.as_deref(), 80)));
    let context = match (v.context_tokens, v.context_window, v.context_percent) {
        (Some(n), Some(w), Some(p)) => format!("{n} tokens of {w} ({p:.1}%)"),
        (Some(n), Some(w), None) => format!("{n} tokens of {w}"),
        (Some(n), None, _) => format!("{n} tokens (window unknown)"),
        (None, _, _) => "unknown".to_string(),
    };
    out.push_str(&format!(
        "context {context}; compactions {}\n",
        v.compactions
    ));
    if !v.agents.is_empty() {
        out.push_str("agents:\n");
        for a in &v.agents {
            out.push_str(&format!(
                "  {:<10} {} {} {}{}\n",
                state(a.state),
                t(&a.id, 40),
                opt(a.kind.as_deref(), 32),
                opt(a.description.as_deref(), 80),
                if a.transcript { " (--agent)" } else { "" }
            ));
        }
    }
    if !v.tasks.is_empty() {
        out.push_str("tasks:\n");
        if v.tasks_omitted > 0 {
            out.push_str(&format!("  ({} older not shown)\n", v.tasks_omitted));
        }
        for k in &v.tasks {
            let code = k
                .exit_code
                .map_or_else(String::new, |c| format!(" exit {c}"));
            out.push_str(&format!(
                "  {:<10} {:<12} {}{}{}\n",
                state(k.state),
                t(&k.tool, 24),
                opt(k.command.as_deref(), 100),
                if k.background { " (background)" } else { "" },
                code
            ));
        }
    }
    if !v.files.is_empty() {
        out.push_str("files:\n");
        for f in &v.files {
            let n = |x: Option<u64>| x.map_or_else(|| "?".to_string(), |x| x.to_string());
            out.push_str(&format!(
                "  +{} -{} {}{}\n",
                n(f.added),
                n(f.removed),
                t(&f.path, 200),
                if f.created { " (created)" } else { "" }
            ));
        }
    }
    if !v.todos.is_empty() {
        out.push_str("todos:\n");
        for d in &v.todos {
            let mark = match d.status.as_str() {
                "completed" => "[x]",
                "in_progress" => "[~]",
                _ => "[ ]",
            };
            out.push_str(&format!("  {mark} {}\n", t(&d.content, 120)));
        }
    }
    if !v.workflows.is_empty() {
        let all_live = v.workflows.iter().all(|w| w.summary == SummaryRead::None);
        out.push_str(if all_live {
            "workflows (live):\n"
        } else {
            "workflows:\n"
        });
        for w in &v.workflows {
            let ms = w
                .duration_ms
                .map_or_else(String::new, |d| format!(", {:.1} s", d as f64 / 1000.0));
            let end = match (w.summary, w.state) {
                (SummaryRead::Read, Some(s)) => format!(" [ended {}: final summary]", state(s)),
                (SummaryRead::Unreadable, _) => format!(
                    " [final summary unreadable: {}]",
                    opt(w.summary_reason.as_deref(), 200)
                ),
                _ if all_live => String::new(),
                _ => " [live]".to_string(),
            };
            out.push_str(&format!(
                "  {} {}: agents {} done, {} failed of {}{ms}{end}\n",
                opt(w.name.as_deref(), 60),
                t(&w.run_id, 40),
                w.agents_done,
                w.agents_failed,
                w.agents_total
            ));
            for p in &w.phases {
                out.push_str(&format!(
                    "    {:<10} {} {}: agents {} done, {} failed of {}{}\n",
                    state(p.state),
                    p.index,
                    t(&p.title, 60),
                    p.agents_done,
                    p.agents_failed,
                    p.agents_total,
                    p.detail
                        .as_deref()
                        .map_or_else(String::new, |d| format!(" ({})", t(d, 80)))
                ));
            }
        }
    }
    if !v.skills.is_empty() {
        let s: Vec<String> = v.skills.iter().map(|s| t(s, 40)).collect();
        out.push_str(&format!("skills: {}\n", s.join(", ")));
    }
    if !v.mcp_servers.is_empty() {
        let s: Vec<String> = v
            .mcp_servers
            .iter()
            .map(|m| match &m.status {
                Some(st) => format!("{} ({}, {} calls)", t(&m.name, 40), t(st, 16), m.calls),
                None => format!("{} ({})", t(&m.name, 40), m.calls),
            })
            .collect();
        out.push_str(&format!("mcp servers: {}\n", s.join(", ")));
    }
    if v.unreadable > 0 {
        out.push_str(&format!(
            "unreadable: {} part(s) of the workflows' records\n",
            v.unreadable
        ));
        for r in &v.unreadable_reasons {
            out.push_str(&format!("  {}\n", t(r, 400)));
        }
    }
    out
}

/// A sub-agent's turns for a person, sanitised.
pub fn agent_human(v: &AgentTranscript) -> String {
    let mut out = format!(
        "{} agent {}: transcript {}\n",
        t(&v.run_ref, 32),
        t(&v.agent, 64),
        v.transcript.as_str()
    );
    if let Some(r) = &v.reason {
        out.push_str(&format!("unreadable: {}\n", t(r, 400)));
    }
    for turn in &v.turns {
        let who = match turn.role {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
        };
        out.push_str(&format!("\n{who}:\n{}\n", text::multi_line(&turn.text)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::runs::{ActivityAgent, ActivityTask, AgentTurn, FileActivity};

    #[test]
    fn hostile_record_text_is_sanitised() {
        let evil = "x\u{1b}]0;pwned\u{7}\u{202e}y\u{1b}[2J";
        let v = RunActivity {
            run_ref: "run-0001".into(),
            tool: "claude".into(),
            agents: vec![ActivityAgent {
                id: evil.into(),
                description: Some(evil.into()),
                kind: Some(evil.into()),
                state: WorkState::Running,
                transcript: true,
            }],
            tasks: vec![ActivityTask {
                id: "t".into(),
                tool: evil.into(),
                command: Some(evil.into()),
                background: true,
                state: WorkState::Failed,
                exit_code: Some(2),
            }],
            tasks_omitted: 3,
            files: vec![FileActivity {
                path: evil.into(),
                added: Some(1),
                removed: None,
                created: true,
            }],
            todos: vec![],
            skills: vec![evil.into()],
            skills_used: vec![],
            mcp_servers: vec![crate::api::runs::McpServer {
                name: evil.into(),
                calls: 0,
                status: Some(evil.into()),
                source: None,
            }],
            model: Some(evil.into()),
            context_tokens: Some(100),
            context_window: None,
            context_percent: None,
            compactions: 2,
            workflows: vec![crate::api::runs::Workflow {
                run_id: evil.into(),
                task_id: "t".into(),
                tool_use_id: None,
                name: Some(evil.into()),
                duration_ms: Some(1500),
                agents_total: 2,
                agents_done: 1,
                agents_failed: 0,
                phases: vec![crate::api::runs::WorkflowPhase {
                    index: 0,
                    title: evil.into(),
                    detail: Some(evil.into()),
                    state: WorkState::Running,
                    agents_total: 2,
                    agents_done: 1,
                    agents_failed: 0,
                }],
                state: None,
                summary: crate::api::runs::SummaryRead::Unreadable,
                summary_reason: Some(evil.into()),
            }],
            unreadable: 1,
            unreadable_reasons: vec![evil.into()],
            transcript: TranscriptState::Read,
            reason: None,
        };
        let s = human(&v);
        assert!(s.contains("agents 1 done, 0 failed of 2, 1.5 s"), "{s}");
        assert!(
            !s.contains('\u{1b}') && !s.contains('\u{202e}') && !s.contains('\u{7}'),
            "{s:?}"
        );
        assert!(s.contains("100 tokens (window unknown)"), "{s}");
        assert!(s.contains("+1 -?"), "{s}");
        let a = AgentTranscript {
            run_ref: "run-0001".into(),
            agent: evil.into(),
            turns: vec![AgentTurn {
                role: MessageRole::Assistant,
                text: format!("{evil}\nsecond"),
            }],
            transcript: TranscriptState::Read,
            reason: None,
        };
        let s = agent_human(&a);
        assert!(!s.contains('\u{1b}') && !s.contains('\u{202e}'), "{s:?}");
        assert!(s.contains("second"));
    }
}
