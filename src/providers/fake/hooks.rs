//! The fake claude's own hooks, as the real claude runs them: `--settings <JSON>` names a
//! command for an event (`hooks.<Event>[].hooks[]` of `type: "command"`); when the event
//! happens, the command runs through `/bin/sh -c` with the event's JSON on its stdin
//! (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, and `message` for a
//! `Notification`, `prompt` for a `UserPromptSubmit`, `stop_hook_active` for a `Stop`), and
//! claude waits for it (up to its `timeout`, 60 s by default).
//!
//! The interactive form fires `UserPromptSubmit` for each line typed and `Stop` when its
//! turn ends; the `!hook EVENT MESSAGE` directive fires any event (a `Notification` as claude
//! sends one when it needs a permission or waited for input), so a test can make a fake PTY
//! run report what the real claude would.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The hooks of this fake process (one process, one claude): its commands per event, and the
/// session they describe.
struct Hooks {
    commands: Vec<(String, String, u64)>,
    session_id: String,
    cwd: String,
    transcript: String,
}

static HOOKS: Mutex<Option<Hooks>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<Hooks>> {
    HOOKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads `--settings`' value: inline JSON (as the server passes it) or a file's path, as the
/// real claude takes either. Returns the error claude would print for one it cannot read.
pub fn configure(settings: &str) -> Result<(), String> {
    let text = if settings.trim_start().starts_with('{') {
        settings.to_string()
    } else {
        std::fs::read_to_string(settings)
            .map_err(|_| format!("Error: Settings file not found: {settings}"))?
    };
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("Error: Invalid settings JSON: {e}"))?;
    let mut commands = Vec::new();
    if let Some(events) = v.get("hooks").and_then(Value::as_object) {
        for (event, groups) in events {
            for group in groups.as_array().into_iter().flatten() {
                for h in group
                    .get("hooks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if h.get("type").and_then(Value::as_str) == Some("command")
                        && let Some(cmd) = h.get("command").and_then(Value::as_str)
                    {
                        let timeout = h.get("timeout").and_then(Value::as_u64).unwrap_or(60);
                        commands.push((event.clone(), cmd.to_string(), timeout));
                    }
                }
            }
        }
    }
    *lock() = Some(Hooks {
        commands,
        session_id: String::new(),
        cwd: String::new(),
        transcript: String::new(),
    });
    Ok(())
}

/// Names the session the hooks describe (once the interactive form knows its id).
pub fn session(id: &str, cwd: &std::path::Path, transcript: &std::path::Path) {
    if let Some(h) = lock().as_mut() {
        h.session_id = id.to_string();
        h.cwd = cwd.to_string_lossy().into_owned();
        h.transcript = transcript.to_string_lossy().into_owned();
    }
}

/// Runs the commands configured for `event` with its JSON on stdin (`extra` adds the
/// event's own fields), each waited for up to its timeout. Returns how many ran, and what
/// failed (for the fake's notes); `None` when no settings were given.
pub fn fire(event: &str, extra: Value) -> Option<(usize, Vec<String>)> {
    let (commands, mut payload) = {
        let g = lock();
        let h = g.as_ref()?;
        let commands: Vec<(String, u64)> = h
            .commands
            .iter()
            .filter(|(e, _, _)| e == event)
            .map(|(_, c, t)| (c.clone(), *t))
            .collect();
        let payload = json!({
            "session_id": h.session_id,
            "transcript_path": h.transcript,
            "cwd": h.cwd,
            "hook_event_name": event,
        });
        (commands, payload)
    };
    if let (Some(p), Some(x)) = (payload.as_object_mut(), extra.as_object()) {
        p.extend(x.clone());
    }
    let stdin = payload.to_string();
    let mut failed = Vec::new();
    for (cmd, timeout) in &commands {
        if let Err(e) = run(cmd, &stdin, Duration::from_secs(*timeout)) {
            failed.push(e);
        }
    }
    Some((commands.len(), failed))
}

fn run(cmd: &str, stdin: &str, timeout: Duration) -> Result<(), String> {
    super::flush_stdout();
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the hook: {e}"))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("hook exited {st}: {}", err.trim()));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("hook timed out".into());
            }
            Err(e) => return Err(format!("hook wait failed: {e}")),
        }
    }
}
