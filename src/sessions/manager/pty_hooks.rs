//! What claude's own hooks on a PTY run tell the server beyond "it waits": the run's
//! conversation id (every hook's `session_id`) and, after a turn that ended on an API error
//! (`StopFailure`), a limit read from the tool's own record.
//!
//! The hook's caller is attributed to its run by the kernel ([`Sessions::run_holding`]);
//! what it says is still the word of a process of that run, so:
//! - a session id is taken only as a canonical UUID (the route refuses anything else), and
//!   never with a path: the record is found from the profile's account home, the run's
//!   folder and the id, as for a stdio run (`transcript_path` is never read);
//! - an id another run of the same tool already holds is not taken: the run's conversation
//!   becomes unknown (`conversation_id: null`, `refused: <id>`) rather than another run's,
//!   and the caller gets a 409;
//! - a limit is the record's word, never the hook's: the hook only says when to look.
//!
//! Conversation ids follow what claude 2.1.332 does: one session id per conversation,
//! kept by `--resume <id>` (its `SessionStart` then says `source: "resume"` with the same
//! id), and a new one after `/clear` (`source: "clear"`) or when the person picks another
//! conversation inside claude (`/resume`). So the first id a generation's hooks carry is
//! recorded (`sessions.run.conversation {generation, conversation_id, source: "hook",
//! event}`), the same id again adds nothing, and a different id later in the same
//! generation is recorded too (with `previous`): the run's conversation is the latest, the
//! one a resume continues, a move carries and `/messages` reads.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{SessionError, Sessions, kinds, limit_reset};
use crate::providers::Tool;
use crate::providers::records;
use crate::text;

/// What one hook said (the body of `POST /v1/m/sessions/hook`, checked).
#[derive(Debug, Clone, Copy)]
pub struct HookSaid<'a> {
    pub event: &'a str,
    pub message: Option<&'a str>,
    /// A canonical UUID (the route refused anything else).
    pub session_id: Option<&'a str>,
    /// `SessionStart`'s `source`.
    pub source: Option<&'a str>,
}

/// When the record is looked at again after a `StopFailure`, until it shows the turn's
/// API error line (claude may append it just after the hook ran): at most ~2.6 s in all.
const LIMIT_READ_DELAYS: [u64; 5] = [0, 100, 300, 700, 1500];

/// The most record readers for limits at once, over all runs: a process of a run can send
/// `StopFailure` as often as it likes, and each reader may read 8 MiB.
const LIMIT_READERS_MAX: usize = 8;

/// The conversation a run's record names last (`None`: none, or unknown).
fn last_conversation(rec: &super::RunRecord) -> Option<&str> {
    rec.events
        .iter()
        .rev()
        .find(|e| e.kind == kinds::CONVERSATION)
        .and_then(|e| e.fields.get("conversation_id"))
        .and_then(Value::as_str)
}

impl Sessions {
    /// Records `id` as the conversation of `run_ref`'s `generation` when it is new for that
    /// generation (see the module's notes). 409 when another run of the same tool holds it:
    /// the run's conversation is then recorded as unknown.
    pub(super) fn hook_conversation(
        &self,
        inner: &mut super::Inner,
        run_ref: &str,
        generation: u64,
        id: &str,
        said: &HookSaid<'_>,
    ) -> Result<(), SessionError> {
        let Some(rec) = inner.records.get(run_ref) else {
            return Ok(());
        };
        // Only claude's PTY form carries these hooks.
        if rec.tool != Tool::Claude.name() || rec.transport != "pty" {
            return Ok(());
        }
        let said_before = rec
            .events
            .iter()
            .rev()
            .filter(|e| e.kind == kinds::CONVERSATION)
            .find(|e| e.fields.get("generation").and_then(Value::as_u64) == Some(generation))
            .is_some_and(|e| {
                ["conversation_id", "refused"]
                    .iter()
                    .any(|k| e.fields.get(*k).and_then(Value::as_str) == Some(id))
            });
        if said_before {
            return Ok(());
        }
        let previous = last_conversation(rec).map(str::to_string);
        let held = inner
            .records
            .iter()
            .any(|(r, o)| r != run_ref && o.tool == rec.tool && last_conversation(o) == Some(id));
        let event = text::one_line(said.event, 40);
        let source = said.source.map(|s| text::one_line(s, 32));
        if held {
            self.record(
                inner,
                run_ref,
                kinds::CONVERSATION,
                json!({"generation": generation, "conversation_id": null, "refused": id,
                       "why": "another run holds this conversation", "source": "hook",
                       "event": event, "hook_source": source, "previous": previous}),
            )?;
            return Err(SessionError::Conflict(format!(
                "session {id} is the conversation of another run: it is not taken as this \
                 run's, whose conversation is now unknown (a resume of it is refused until its \
                 tool names one of its own)"
            )));
        }
        self.record(
            inner,
            run_ref,
            kinds::CONVERSATION,
            json!({"generation": generation, "conversation_id": id, "source": "hook",
                   "event": event, "hook_source": source, "previous": previous}),
        )?;
        Ok(())
    }

    /// After claude's `StopFailure` hook on a PTY run: reads the run's record (on a thread of
    /// its own: the hook is answered at once) until its last assistant line is an API error
    /// line, and records the limit that line says, once per fact, as a stdio turn's is.
    pub(super) fn read_pty_limit(self: &Arc<Self>, run_ref: &str, generation: u64) {
        // The runs whose record a reader is reading now: one per run (a `StopFailure` that
        // arrives meanwhile is answered by the reader already looking, which reads the
        // record as it is then), the manager's own (no process-wide state).
        let key = run_ref.to_string();
        let readers = Arc::clone(&self.limit_readers);
        {
            let mut busy = readers.lock().unwrap_or_else(|e| e.into_inner());
            if busy.contains(&key) {
                return;
            }
            if busy.len() >= LIMIT_READERS_MAX {
                crate::log::log(&format!(
                    "sessions: {run_ref}: StopFailure with {LIMIT_READERS_MAX} record readers \
                     busy: its record is not read for a limit"
                ));
                return;
            }
            busy.push(key.clone());
        }
        struct Done(String, Arc<std::sync::Mutex<Vec<String>>>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.1
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|k| *k != self.0);
            }
        }
        let done = Done(key, readers);
        let me = Arc::clone(self);
        let run_ref = run_ref.to_string();
        let spawned = std::thread::Builder::new()
            .name("pty-limit".into())
            .spawn(move || {
                let _done = done;
                for ms in LIMIT_READ_DELAYS {
                    std::thread::sleep(Duration::from_millis(ms));
                    match me.pty_limit_once(&run_ref, generation) {
                        Ok(true) => return,
                        Ok(false) => {}
                        Err(e) => {
                            crate::log::log(&format!(
                                "sessions: {run_ref}: the record's limit is not read: {e}"
                            ));
                            return;
                        }
                    }
                }
                crate::log::log(&format!(
                    "sessions: {run_ref}: after StopFailure, the record's last assistant line \
                     is still no API error: no limit recorded"
                ));
            });
        if let Err(e) = spawned {
            crate::log::log(&format!("sessions: cannot read a PTY run's limit: {e}"));
        }
    }

    /// One look at the record: `Ok(true)` when its last assistant line is an API error line
    /// (a limit is recorded if it says one), `Ok(false)` to look again.
    fn pty_limit_once(&self, run_ref: &str, generation: u64) -> Result<bool, SessionError> {
        let (rec, tool, _live, conversation, home, _) =
            self.record_target(run_ref, |t| records::Unsupported(t).to_string())?;
        if tool != Tool::Claude {
            return Ok(true);
        }
        let Some(id) = conversation else {
            return Ok(false);
        };
        let raw = records::raw(
            &records::Target {
                tool,
                home: &home,
                cwd: std::path::Path::new(&rec.workspace),
                conversation_id: Some(&id),
                live: true,
                exporter: None,
            },
            &mut records::Budget::default(),
        )
        .map_err(|e| SessionError::Unprocessable(e.to_string()))?;
        let Some(bytes) = raw.bytes else {
            return match raw.reason {
                Some(why) => Err(SessionError::Unprocessable(why)),
                None => Ok(false),
            };
        };
        let (kind, resets_at) = match records::claude_limit::last_turn(&bytes) {
            Some(records::claude_limit::LastTurn::Limit { kind, resets_at }) => (kind, resets_at),
            Some(records::claude_limit::LastTurn::ApiError) => return Ok(true),
            _ => return Ok(false),
        };
        let mut fields = json!({"generation": generation, "limit": {"kind": kind.as_str()},
                                "source": "record"});
        if let Some(at) = limit_reset(resets_at, chrono::Utc::now()) {
            fields["limit"]["resets_at"] = json!(at);
        }
        let mut inner = self.lock();
        let Some(rec) = inner.records.get(run_ref) else {
            return Ok(true);
        };
        let d = rec.derive();
        if d.generation != generation {
            return Ok(true);
        }
        fields["limit"]["account_ref"] = json!(rec.profile);
        let fact = fields
            .as_object()
            .and_then(super::super::record::Limit::from_fields);
        if fact.is_some() && fact == d.limit {
            return Ok(true);
        }
        self.record(&mut inner, run_ref, kinds::LIMIT_REACHED, fields)?;
        Ok(true)
    }
}
