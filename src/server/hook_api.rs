//! `POST /v1/m/sessions/hook`: a tool's own hook reports to the server (claude's
//! `SessionStart`, `Notification`, `Stop`, `StopFailure` and `UserPromptSubmit` on a PTY run,
//! sent by `proctor session hook`, which claude runs with the hook's JSON on its stdin).
//! Its `session_id` (a UUID, or 400) becomes the run's conversation id when it is new for
//! the run's generation; a `StopFailure` makes the server read the run's record for a
//! limit (`sessions::Sessions::record_hook`).
//!
//! No token authorises it: the process claude runs for a hook has none (an agent must never
//! hold one for this). The kernel does: the caller's pid, as `SO_PEERCRED` gave it at accept
//! (with its start time), must be held by a live run ([`Sessions::run_holding`]: the run's
//! cgroup, or its leader's descendants), and the hook is recorded for THAT run only. So what
//! an agent can do with this route is say that its own run waits; nothing about another run,
//! nothing for a process outside every run (403, with or without a token).
//!
//! [`Sessions::run_holding`]: crate::sessions::Sessions::run_holding

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::api::{ApiError, blocking};
use crate::api::runs::{HOOK_BODY_MAX, HookRecorded, HookReport};
use crate::peer::Peer;
use crate::providers::CLAUDE_HOOK_EVENTS;

/// Records a hook for the run that holds the caller.
pub async fn hook(State(s): State<Arc<Shared>>, req: Request) -> Result<Response, ApiError> {
    let peer = req
        .extensions()
        .get::<Peer>()
        .cloned()
        .unwrap_or_else(Peer::unknown);
    let body = axum::body::to_bytes(req.into_body(), HOOK_BODY_MAX)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("a hook report is at most {HOOK_BODY_MAX} bytes"),
            )
        })?;
    let report: HookReport = crate::api::parse_body(&body)
        .map_err(|e| ApiError::bad_request(format!("bad JSON body: {e}")))?;
    if !CLAUDE_HOOK_EVENTS.contains(&report.event.as_str()) {
        return Err(ApiError::bad_request(format!(
            "unknown hook event {:?}; this route takes {}",
            crate::text::one_line(&report.event, 60),
            CLAUDE_HOOK_EVENTS.join(", ")
        )));
    }
    if let Some(id) = &report.session_id
        && !crate::providers::is_claude_session_id(id)
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_session_id",
            format!(
                "session_id {:?} is not a session id as claude makes them (a lowercase UUID, \
                 8-4-4-4-12 hex digits); nothing was recorded",
                crate::text::one_line(id, 60)
            ),
        ));
    }
    if report.source.as_ref().is_some_and(|s| s.len() > 32) {
        return Err(ApiError::bad_request(
            "source is at most 32 bytes (claude's are words such as `startup`)",
        ));
    }
    let refused = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "not_a_run",
            "this route takes no token: it accepts only a process of a live run, as the kernel \
             attributes the caller's pid (it is how claude's own hooks on a PTY run report, \
             through `proctor session hook`); no live run holds this caller",
        )
    };
    let Some(start_time) = peer.start_time.filter(|_| peer.pid > 1) else {
        return Err(refused());
    };
    let sessions = Arc::clone(&s.sessions);
    let event = report.event.clone();
    let recorded = blocking(move || {
        sessions.record_hook(
            peer.pid,
            start_time,
            &crate::sessions::HookSaid {
                event: &event,
                message: report.message.as_deref(),
                session_id: report.session_id.as_deref(),
                source: report.source.as_deref(),
            },
        )
    })
    .await?;
    match recorded {
        Some(run_ref) => Ok(axum::Json(HookRecorded {
            run_ref,
            event: report.event,
        })
        .into_response()),
        None => {
            super::log(&format!(
                "sessions: hook refused: pid {} is held by no live run",
                peer.pid
            ));
            Err(refused())
        }
    }
}
