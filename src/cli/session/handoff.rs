//! `proctor session handoff`: continue a session in another profile (of any tool) from its
//! stored conversation, through `GET /runs/{ref}/handoff` (the preview) and `POST
//! /runs/{ref}/handoff` (the handoff): a thin client, every rule is the server's.

use std::process::ExitCode;

use clap::Args;
use hyper::Method;

use super::{Client, normalise_ref, t};
use crate::api::runs::{
    self as wire, Handoff, HandoffBody, HandoffPreview, SummaryState, TranscriptState,
};
use crate::text;

/// Continue a session in another profile, even of another tool, from its conversation.
///
/// Step 1, the preview: `proctor session handoff REF` (or with `--preview`) prints the
/// summary the handoff would start from. It is a digest made WITHOUT a model from the
/// conversation the tool stored (the first ask, the last answer, the counts). Review it;
/// write the summary you want into a file.
///
/// Step 2, the handoff: `proctor session handoff REF --to PROFILE --summary-file F` (or
/// `--summary TEXT`; without either, the digest is sent). It stops the source first if it
/// is running (as `session stop` does), writes the whole conversation to a transcript file
/// under the target profile's account home (0600), and starts a new session in that profile,
/// in the same workspace, whose first turn is your summary plus the transcript's path. It
/// prints the new run and whether the first turn was delivered; when it was not (or is
/// unknown), it prints the first turn to send with `session input`.
///
/// Sessions of Claude Code, Codex, Gemini CLI and OpenCode are read (Grok: exit 1, 422). Exit 1 when refused: 409
/// for a run that never started, a target whose home cannot be used; 422 for an unknown
/// profile, a record that is a link or too large (256 MiB, or one record over 32 MiB). A
/// refusal after the stop says so: the source can be resumed. Everything from the record
/// is shown sanitised.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// The run: run-0001 (or 1, or run-1).
    #[arg(value_name = "REF")]
    pub run: String,
    /// The profile the new session starts in (`proctor profile list`).
    #[arg(long, value_name = "PROFILE")]
    pub to: Option<String>,
    /// The reviewed summary (instead of the digest).
    #[arg(long, value_name = "TEXT", conflicts_with = "summary_file")]
    pub summary: Option<String>,
    /// The reviewed summary, read from a file.
    #[arg(long, value_name = "FILE")]
    pub summary_file: Option<std::path::PathBuf>,
    /// The new session's name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Only print the preview (the default without --to).
    #[arg(long, conflicts_with_all = ["summary", "summary_file", "name"])]
    pub preview: bool,
    /// Print the server's JSON answer.
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: &Client, a: HandoffArgs) -> anyhow::Result<ExitCode> {
    let run_ref = normalise_ref(&a.run)?;
    let path = wire::at(wire::HANDOFF, &run_ref);
    let Some(to) = a.to.clone().filter(|_| !a.preview) else {
        if a.summary.is_some() || a.summary_file.is_some() || a.name.is_some() {
            return Err(crate::cli::UsageError::new(
                "--summary, --summary-file and --name go with --to PROFILE (the handoff); \
                 without --to, handoff prints the preview",
            ));
        }
        let p: HandoffPreview = c.get_blocking(&path)?;
        if a.json {
            crate::cli::print_json(&p)?;
        } else {
            print!("{}", preview_human(&p));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let summary =
        match (&a.summary, &a.summary_file) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
                anyhow::anyhow!("cannot read the summary file {}: {e}", f.display())
            })?),
            (None, None) => None,
        };
    let body = HandoffBody {
        provider_profile_ref: Some(to),
        summary,
        name: a.name.clone(),
    };
    let h: Handoff = c.request_blocking(Method::POST, &path, Some(&body))?;
    if a.json {
        crate::cli::print_json(&h)?;
    } else {
        print!("{}", handoff_human(&run_ref, &h));
    }
    Ok(ExitCode::SUCCESS)
}

/// The preview for a person: the digest through the sanitiser.
pub fn preview_human(p: &HandoffPreview) -> String {
    let n = |k: u64, one: &str, many: &str| {
        if k == 1 {
            format!("1 {one}")
        } else {
            format!("{k} {many}")
        }
    };
    let record = match p.transcript {
        TranscriptState::Read if p.messages == 0 => format!(
            "its record was read ({}) and holds no message yet: nothing to hand off",
            n(p.transcript_bytes, "byte", "bytes")
        ),
        TranscriptState::Read => format!(
            "{} from the person, {} in all, read from its record ({})",
            n(p.turns, "turn", "turns"),
            n(p.messages, "message", "messages"),
            n(p.transcript_bytes, "byte", "bytes")
        ),
        TranscriptState::Pending => {
            "no message yet: the tool has not written its record yet, nothing to hand off"
                .to_string()
        }
        TranscriptState::Missing => {
            "no message: its record is missing (it should be there and is not), nothing to \
             hand off"
                .to_string()
        }
        other => format!("its record is {}", other.as_str()),
    };
    let mut out = format!(
        "handoff preview of {} ({}): {record}\n\n",
        t(&p.run_ref, 32),
        t(&p.source_driver, 16),
    );
    out.push_str(&text::multi_line(&p.summary));
    out.push_str(&format!(
        "\n\n(a digest made without a model; review it, then `proctor session handoff {} --to \
         PROFILE --summary-file FILE`)\n",
        t(&p.run_ref, 32)
    ));
    out
}

/// What a handoff did, for a person.
pub fn handoff_human(source: &str, h: &Handoff) -> String {
    let mut out = String::new();
    if h.stopped_source {
        out.push_str(&format!(
            "{} was live: stopped first, as `session stop` does\n",
            t(source, 32)
        ));
    }
    out.push_str(&format!(
        "{} handed off to {} (profile {}, {}; state {})\ntranscript: {}\nfirst turn: {}\n",
        t(source, 32),
        t(&h.run.run_ref, 32),
        t(&h.run.profile, 64),
        t(&h.run.tool, 16),
        h.run.state.as_str(),
        t(&h.transcript_path, 400),
        h.summary_state.as_str()
    ));
    if let Some(first) = &h.first_turn {
        let what = match h.summary_state {
            SummaryState::Unknown => {
                "it was sent and not confirmed: check the new session before sending it again"
            }
            _ => "it did not go through: send it yourself",
        };
        out.push_str(&format!(
            "{what} (`proctor session input {} --text …`):\n{}\n",
            t(&h.run.run_ref, 32),
            text::multi_line(first)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_record_text_in_a_preview_is_sanitised() {
        let p = HandoffPreview {
            run_ref: "run-0001".into(),
            summary: "First ask:\nhi \u{1b}]0;pwned\u{7}\u{202e} there".into(),
            source_driver: "claude".into(),
            turns: 1,
            messages: 2,
            transcript_bytes: 10,
            transcript: TranscriptState::Read,
        };
        let s = preview_human(&p);
        assert!(
            !s.contains('\u{1b}') && !s.contains('\u{7}') && !s.contains('\u{202e}'),
            "{s:?}"
        );
        assert!(s.contains("First ask:\nhi"), "{s}");
        assert!(
            s.contains("(claude): 1 turn from the person, 2 messages in all, read from its record (10 bytes)"),
            "{s}"
        );
    }

    #[test]
    fn a_preview_counts_in_words_and_says_plainly_when_there_is_nothing() {
        let mut p = HandoffPreview {
            run_ref: "run-0002".into(),
            summary: "x".into(),
            source_driver: "opencode".into(),
            turns: 2,
            messages: 1,
            transcript_bytes: 1,
            transcript: TranscriptState::Read,
        };
        let s = preview_human(&p);
        assert!(
            s.contains("2 turns from the person, 1 message in all"),
            "{s}"
        );
        assert!(s.contains("(1 byte)"), "{s}");
        p.messages = 0;
        p.turns = 0;
        p.transcript_bytes = 0;
        let s = preview_human(&p);
        assert!(
            s.contains("holds no message yet: nothing to hand off"),
            "{s}"
        );
        assert!(!s.contains("0 turns") && !s.contains("0 messages"), "{s}");
        p.transcript = TranscriptState::Pending;
        let s = preview_human(&p);
        assert!(s.contains("not written its record yet"), "{s}");
        assert!(!s.contains("record read"), "{s}");
        p.transcript = TranscriptState::Missing;
        assert!(preview_human(&p).contains("its record is missing"));
    }
}
