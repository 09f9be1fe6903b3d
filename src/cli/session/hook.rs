//! `proctor session hook --socket PATH`: what claude runs for its own hooks on a PTY run
//! (the server passes them with `--settings`; see `providers::launch_with_hooks`). It reads
//! the hook's JSON on stdin (`hook_event_name`, `session_id`, `message`, `source`, …) and
//! reports the event to the server over its socket, with no token: the server attributes
//! the caller to its run by the kernel's word about this process's pid, and checks the
//! session id itself (a UUID, or the report is refused). `transcript_path` is never sent:
//! the server derives the record's path from the profile's account home and the id.
//!
//! It prints nothing on stdout (claude adds a `UserPromptSubmit` hook's stdout to the
//! conversation) and never exits 2 (claude reads exit 2 as "block this event"): a failure is
//! one line on stderr and exit 1, which claude shows and goes on.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hyper::Method;

use crate::api::runs::{HOOK, HookRecorded, HookReport};
use crate::client::{self, Client};
use crate::providers::CLAUDE_HOOK_EVENTS;

/// The most bytes of hook JSON read from stdin.
const STDIN_MAX: u64 = 256 * 1024;
/// The longest message sent (bytes; the server bounds it again when it records it).
const MESSAGE_MAX: usize = 2000;

/// The longest `source` sent (bytes; claude's are words such as `startup`).
const SOURCE_MAX: usize = 32;

/// What proctor reads of the JSON claude writes on a hook's stdin (it has more:
/// `transcript_path`, `cwd`, `prompt`, …, none of which is sent).
#[derive(Debug, serde::Deserialize)]
struct ClaudeHookInput {
    hook_event_name: String,
    #[serde(default)]
    message: Option<String>,
    /// Sent as it is (the server is the one judge of it: a UUID or a refusal).
    #[serde(default)]
    session_id: Option<serde_json::Value>,
    #[serde(default)]
    source: Option<serde_json::Value>,
}

/// Report one of claude's own hooks to the server (claude runs this on a PTY run).
///
/// Not for typing by hand: the server passes it to claude's PTY form with `--settings`, as
/// the command of its SessionStart, Notification, Stop, StopFailure and UserPromptSubmit
/// hooks. It reads claude's hook
/// JSON on stdin and tells the server, which records it for the run that holds this process
/// (the kernel says which) and refuses any process outside every run. Prints nothing on
/// stdout; exit 0, or 1 with one line on stderr.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The server's socket (the server names its own).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
}

pub fn run(a: HookArgs) -> ExitCode {
    match report(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("proctor session hook: {}", crate::text::one_line(&e, 500));
            ExitCode::from(1)
        }
    }
}

fn report(a: HookArgs) -> Result<(), String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .take(STDIN_MAX + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the hook's JSON on stdin: {e}"))?;
    if raw.len() as u64 > STDIN_MAX {
        return Err(format!(
            "the hook's JSON on stdin is over {STDIN_MAX} bytes"
        ));
    }
    let input: ClaudeHookInput = serde_json::from_slice(&raw).map_err(|e| {
        format!("the hook's stdin is not claude's hook JSON ({e}); claude writes an object with `hook_event_name`")
    })?;
    let event = input.hook_event_name.as_str();
    if !CLAUDE_HOOK_EVENTS.contains(&event) {
        // An event proctor did not ask for says nothing it needs.
        return Ok(());
    }
    let message = input
        .message
        .map(|m| m.chars().take(MESSAGE_MAX).collect::<String>());
    // A session id that is not even a string is sent as its JSON text: the server refuses
    // it by name rather than this verb dropping it silently.
    let word = |v: Option<serde_json::Value>| {
        v.map(|v| match v {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })
    };
    let body = HookReport {
        event: event.to_string(),
        message,
        session_id: word(input.session_id),
        source: word(input.source).map(|s| s.chars().take(SOURCE_MAX).collect()),
    };
    let c = Client::for_socket(a.socket);
    client::block_on(c.request::<_, HookRecorded>(Method::POST, HOOK, Some(&body)))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_claudes_hook_json_gives_the_event_and_a_session_id_the_server_takes() {
        // What claude 2.1.332's PTY form wrote on its hooks' stdin (tests/data/real/records).
        let raw = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/real/records/claude-2.1.332-pty-hooks-resume.txt"
        ))
        .unwrap();
        let mut events = Vec::new();
        for obj in raw.split("\n\n").filter(|o| !o.trim().is_empty()) {
            let input: ClaudeHookInput = serde_json::from_str(obj).unwrap();
            let id = input.session_id.unwrap();
            assert!(
                crate::providers::is_claude_session_id(id.as_str().unwrap()),
                "{id}"
            );
            events.push((input.hook_event_name, input.source));
        }
        assert_eq!(
            events,
            [
                (
                    "SessionStart".to_string(),
                    Some(serde_json::json!("resume"))
                ),
                ("UserPromptSubmit".to_string(), None),
                ("StopFailure".to_string(), None),
            ]
        );
    }
}
