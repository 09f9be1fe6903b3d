//! `proctor session messages`: a run's conversation as its tool recorded it, through
//! `GET /runs/{ref}/messages` (a thin client: every rule is the server's).

use std::process::ExitCode;

use clap::Args;

use super::{Client, normalise_ref, t};
use crate::api::runs::{self as wire, MessagePage, MessageRole, MessagesQuery, TranscriptState};
use crate::text;

/// The messages of a Claude Code, Codex, Gemini CLI or OpenCode session, read from the tool's own record.
///
/// By default what the person sent, oldest first, one line each: its id (its position in
/// the session, which does not change as the conversation grows), when, and its first line.
/// `--role assistant` keeps the tool's answers only; `--all` (`--role all`) adds them to what
/// the person sent. `--id N` prints one message whole, with how many later
/// messages of the same sender repeat its first line. `--text` prints each message whole
/// (at most 50 per page; a text over 64 KiB ends with [...]). The footer gives the total
/// and, when there is more, the `--cursor` of the next page. Everything comes from the
/// tool's record and is shown sanitised. Exit 1 (422) for a tool whose record proctor does
/// not read (Grok).
#[derive(Debug, Args)]
pub struct MessagesArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The tool's answers too, not only what the person sent (`--role all`).
    #[arg(long, conflicts_with = "role")]
    pub all: bool,
    /// Which messages: user (what the person sent, the default), assistant (the tool's
    /// answers) or all.
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
    /// Only the messages containing TEXT (case-insensitive, at most 256 bytes).
    #[arg(long, value_name = "TEXT")]
    pub q: Option<String>,
    /// Only the messages at this RFC 3339 time or later (the first one is the anchor).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Start the page at the newest (lines are still printed oldest first).
    #[arg(long)]
    pub desc: bool,
    /// At most N messages (1 to 200; default 50).
    #[arg(long, value_name = "N")]
    pub limit: Option<String>,
    /// Continue from a previous page's `next`.
    #[arg(long, value_name = "ID")]
    pub cursor: Option<String>,
    /// Print message N whole (no filter applies).
    #[arg(long, value_name = "N", conflicts_with_all = ["all", "role", "q", "at", "desc", "limit", "cursor", "text"])]
    pub id: Option<String>,
    /// Print each message whole.
    #[arg(long)]
    pub text: bool,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

fn role(r: MessageRole) -> &'static str {
    match r {
        MessageRole::User => "user",
        MessageRole::Assistant => "assistant",
    }
}

pub fn run(c: &Client, a: MessagesArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let q = MessagesQuery {
        role: a.role.or_else(|| a.all.then(|| "all".to_string())),
        q: a.q,
        at: a.at,
        order: a.desc.then(|| "desc".to_string()),
        limit: a.limit,
        cursor: a.cursor,
        id: a.id,
        text: a.text.then(|| "1".to_string()),
    };
    let whole = q.id.is_some() || a.text;
    let p: MessagePage = c.get_blocking(&wire::messages(&run_ref, &q))?;
    if a.json {
        crate::cli::print_json(&p)?;
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", human(&p, whole));
    Ok(ExitCode::SUCCESS)
}

/// The page for a person: every string from the record through the sanitiser.
pub fn human(p: &MessagePage, whole: bool) -> String {
    let mut out = String::new();
    for m in &p.items {
        let at =
            m.at.as_deref()
                .map_or_else(|| "-".to_string(), |a| t(a, 30));
        if whole {
            out.push_str(&format!("#{} {} {at}\n", m.id, role(m.role)));
            let body = m.text.as_deref().unwrap_or(&m.first_line);
            out.push_str(&text::multi_line(body));
            out.push('\n');
            if m.clipped {
                out.push_str("(clipped at 64 KiB)\n");
            }
            if let Some(n) = m.later_same {
                out.push_str(&format!("later messages repeating its first line: {n}\n"));
            }
            out.push('\n');
        } else {
            out.push_str(&format!(
                "{:>5} {:<9} {:<24} {}\n",
                m.id,
                role(m.role),
                at,
                t(&m.first_line, 120)
            ));
        }
    }
    let total = p
        .total
        .map_or_else(|| "unknown".to_string(), |n| n.to_string());
    out.push_str(&format!(
        "transcript {}; total {total}",
        p.transcript.as_str()
    ));
    if let Some(n) = &p.next {
        out.push_str(&format!("; next page: --cursor {}", t(n, 24)));
    }
    out.push('\n');
    if let Some(r) = &p.reason {
        out.push_str(&format!("unreadable: {}\n", t(r, 400)));
    }
    if p.transcript == TranscriptState::Pending && p.items.is_empty() {
        out.push_str("(the tool has not written its record yet)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::runs::MessageItem;

    #[test]
    fn hostile_record_text_is_sanitised() {
        let p = MessagePage {
            run_ref: "run-0001".into(),
            items: vec![MessageItem {
                id: 1,
                role: MessageRole::User,
                at: Some("2026-12-03T10:00:00Z".into()),
                first_line: "hi \u{1b}]0;pwned\u{7}\u{202e}there".into(),
                text: Some("hi \u{1b}[2Jthere\nsecond".into()),
                clipped: false,
                later_same: Some(0),
            }],
            total: Some(1),
            next: None,
            transcript: TranscriptState::Read,
            reason: None,
        };
        for whole in [false, true] {
            let s = human(&p, whole);
            assert!(
                !s.contains('\u{1b}') && !s.contains('\u{202e}') && !s.contains('\u{7}'),
                "{s:?}"
            );
            assert!(s.contains("total 1"));
        }
        assert!(human(&p, true).contains("second"));
    }
}
