//! Routes under `/v1/m/sessions/runs`: the session run API of seed 002. Every path, body
//! and frame is the contract's ([`crate::api::runs`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use base64::Engine;
use serde_json::Value;

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use crate::api::runs::{
    self as wire, Accepted, AttachQuery, CastQuery, CleanupBody, DiffFileQuery, EndEvent,
    InputRequest, LagEvent, ListQuery, MoveBody, NoticeEvent, PermitRequest, RenameBody, Resized,
    RunDiff, RunDiffFile, SizeBody, SnoozeBody, StartRequest,
};
use crate::runs::{self, Frame, ReadOutcome, TermSize};
use crate::sessions::SessionError;
use crate::worktrees::{self, WorktreeError};

pub use crate::api::runs::BASE;

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        let (status, code) = match &e {
            SessionError::NotFound(_) | SessionError::Missing(_) => {
                (StatusCode::NOT_FOUND, "not_found")
            }
            SessionError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            SessionError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            SessionError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            SessionError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            SessionError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<WorktreeError> for ApiError {
    fn from(e: WorktreeError) -> Self {
        let (status, code) = match &e {
            WorktreeError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            WorktreeError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            WorktreeError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            WorktreeError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            WorktreeError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            WorktreeError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

type ApiResult = Result<Response, ApiError>;

fn ok(v: impl serde::Serialize) -> ApiResult {
    Ok(axum::Json(v).into_response())
}

/// A route of the contract as this router, nested under [`BASE`], mounts it.
fn r(pattern: &'static str) -> &'static str {
    pattern
        .strip_prefix(BASE)
        .expect("every run route is under the runs base")
}

pub(super) fn json_body<T: serde::de::DeserializeOwned + Default>(
    body: &axum::body::Bytes,
    required: bool,
) -> Result<T, ApiError> {
    if body.is_empty() || body.iter().all(u8::is_ascii_whitespace) {
        if required {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "this route needs a JSON body",
            ));
        }
        return Ok(T::default());
    }
    crate::api::parse_body(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("bad JSON body: {e}"),
        )
    })
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(r(wire::RUNS), get(list).post(start))
        .route(r(wire::RUN), get(show).delete(delete_run))
        .route(r(wire::EVENTS), get(events))
        .route(r(wire::CHANGES), get(changes))
        .route(r(wire::ATTACH), get(attach))
        .route(r(wire::SCREEN), get(screen))
        .route(r(wire::INPUT), post(input))
        .route(r(wire::INTERRUPT), post(interrupt))
        .route(r(wire::STOP), post(stop))
        .route(r(wire::RESUME), post(resume))
        .route(r(wire::RESIZE), post(resize))
        .route(r(wire::MOVE), post(move_run))
        .route(r(wire::HANDOFF), get(handoff_preview).post(handoff))
        .route(r(wire::CAST), get(cast))
        .route(r(wire::PIN), post(pin).delete(unpin))
        .route(r(wire::SNOOZE), post(snooze).delete(unsnooze))
        .route(r(wire::DONE), post(done).delete(undone))
        .route(r(wire::NAME), put(rename))
        .route(r(wire::ARCHIVE), post(archive).delete(unarchive))
        .route(r(wire::CLEANUP), post(cleanup))
        .route(r(wire::DIFF), get(diff))
        .route(r(wire::DIFF_FILE), get(diff_file))
        .route(r(wire::PERMISSIONS), get(permissions))
        .route(r(wire::PERMISSION), post(permit))
        .route(r(wire::MESSAGES), get(messages))
        .route(r(wire::ACTIVITY), get(activity))
        .route(r(wire::ACTIVITY_AGENT), get(activity_agent))
}

/// `GET /runs/{ref}/activity`.
async fn activity(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.activity(&run, &c.token_id)).await?)
}

/// `GET /runs/{ref}/activity/agents/{agent}`.
async fn activity_agent(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path((run, agent)): Path<(String, String)>,
) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.agent_transcript(&run, &agent, &c.token_id)).await?)
}

/// `GET /runs/{ref}/messages`: every parameter arrives as text and is checked by the
/// sessions domain (a wrong one is 400 with the contract's error body, never axum's).
async fn messages(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    Query(q): Query<wire::MessagesQuery>,
) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.messages(&run, &q, &c.token_id)).await?)
}

async fn permissions(State(s): State<Arc<Shared>>, Path(run): Path<String>) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.permissions(&run)).await?)
}

/// A person's decision: never an agent's (403 `agent_refused` whatever its token's role).
async fn permit(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path((run, id)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> ApiResult {
    super::api::person_only(
        &c,
        "decide a tool's permission request",
        "a person decides it, with `proctor session permit` at their terminal or the \
         cockpit's permission dialog",
    )?;
    let req: PermitRequest = json_body(&body, true)?;
    let sessions = s.sessions.clone();
    let by = c.actor();
    ok(blocking(move || sessions.decide(&run, &id, &req, &by)).await?)
}

async fn list(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    ok(s.sessions.list(&c.token_id, &q)?)
}

/// Refuses a terminal size beyond the limits (422 naming them) before anything is made: the
/// PTY's emulator allocates every cell (see [`runs::MAX_COLS`]).
fn check_size(rows: Option<u16>, cols: Option<u16>) -> Result<(), ApiError> {
    let too_many = |what: &str, n: u16, max: u16| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable",
            format!(
                "{what} {n} is more than a PTY run's terminal may have: {what} is 1 to {max} \
                 (limits {} rows, {} columns: the emulator allocates every cell). Remedy: \
                 ask for at most {max} {what}",
                runs::MAX_ROWS,
                runs::MAX_COLS
            ),
        )
    };
    match rows {
        Some(0) => return Err(zero_size("rows")),
        Some(n) if n > runs::MAX_ROWS => return Err(too_many("rows", n, runs::MAX_ROWS)),
        _ => {}
    }
    match cols {
        Some(0) => return Err(zero_size("cols")),
        Some(n) if n > runs::MAX_COLS => return Err(too_many("cols", n, runs::MAX_COLS)),
        _ => {}
    }
    Ok(())
}

/// The same refusal for a size too large to be read at all (above 65535): the body is
/// looked at as JSON before its typed parse would call it malformed.
fn check_raw_size(body: &axum::body::Bytes) -> Result<(), ApiError> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Ok(()); // the typed parse names what is wrong
    };
    let big = |k: &str, max: u16| {
        v.get(k)
            .and_then(Value::as_u64)
            .filter(|n| *n > u64::from(u16::MAX))
            .map(|n| (n, max))
    };
    for (what, max) in [("rows", runs::MAX_ROWS), ("cols", runs::MAX_COLS)] {
        if let Some((n, max)) = big(what, max) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unprocessable",
                format!(
                    "{what} {n} is more than a PTY run's terminal may have: {what} is 1 to \
                     {max} (limits {} rows, {} columns). Remedy: ask for at most {max} {what}",
                    runs::MAX_ROWS,
                    runs::MAX_COLS
                ),
            ));
        }
    }
    Ok(())
}

fn zero_size(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable",
        format!("{what} 0 is not a terminal size: {what} is at least 1"),
    )
}

async fn start(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Bytes,
) -> ApiResult {
    check_raw_size(&body)?;
    let req: StartRequest = json_body(&body, true)?;
    check_size(req.rows, req.cols)?;
    let sessions = s.sessions.clone();
    let rigs = s.rigs.clone();
    let by = c.actor();
    let v = blocking(move || -> Result<_, ApiError> {
        let enclosure = match &req.rig {
            None => None,
            Some(rig) => Some(enclosure_of(&rigs, &by, rig)?),
        };
        Ok(sessions.start_in(req, enclosure)?)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(v)).into_response())
}

/// `session start --rig RIG`: the rig's way in, through the rigs' chokepoint rules (a
/// person's lock refuses an agent, 423; a closed rig 409; an unknown one 404; a VM rig 503
/// naming why), as the sessions domain takes it.
fn enclosure_of(
    rigs: &crate::rigs::Rigs,
    by: &crate::auth::Actor,
    rig: &str,
) -> Result<crate::sessions::manager::Enclosure, ApiError> {
    use crate::api::runs::{BoundaryKind, RunBoundary};
    if !crate::files::valid_id(rig, "rig-") {
        return Err(ApiError::bad_request(format!(
            "{} is not a rig id: give one `proctor rig list` shows, for example rig-0001",
            crate::text::one_line(rig, 60)
        )));
    }
    let e = rigs.enter(by, rig)?;
    let kind = match e.boundary.backend {
        crate::rigs::BackendKind::Namespace => BoundaryKind::Namespace,
        crate::rigs::BackendKind::Vm => BoundaryKind::Vm,
    };
    Ok(crate::sessions::manager::Enclosure {
        boundary: RunBoundary {
            kind,
            rig: Some(rig.to_string()),
            detail: e.boundary.summary.clone(),
        },
        prefix: e.prefix,
        root: e.root,
        proctor: e.proctor,
        path: e.path,
        cwd: e.cwd,
        hold: Some(e.hold),
    })
}

async fn show(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    ok(s.sessions.get(&run, &c.token_id)?)
}

/// A caller's mark changed: said on the change stream.
fn marked(s: &Shared) {
    s.marks_changed.send_modify(|n| *n += 1);
}

/// Server-sent events: a `changes` event when the stream opens, then one whenever the
/// ledger's head, the factory runs in progress or the callers' marks moved, at most one
/// every [`CHANGES_COALESCE`] (what a burst changed is in the event that follows it).
async fn changes(State(s): State<Arc<Shared>>) -> ApiResult {
    let counts = Counts {
        ledger: s.ledger.subscribe(),
        factory: s.factory.subscribe(),
        marks: s.marks_changed.subscribe(),
    };
    let stream = futures_util::stream::unfold((counts, true), |(mut c, first)| async move {
        if !first {
            let changed = tokio::select! {
                r = c.ledger.changed() => r,
                r = c.factory.changed() => r,
                r = c.marks.changed() => r,
            };
            // A sender gone is a server stopping: the stream ends.
            changed.ok()?;
            tokio::time::sleep(CHANGES_COALESCE).await;
        }
        let now = wire::ChangesEvent {
            ledger: *c.ledger.borrow_and_update(),
            factory: *c.factory.borrow_and_update(),
            marks: *c.marks.borrow_and_update(),
        };
        let ev = SseEvent::default()
            .event(wire::CHANGES_EVENT)
            .json_data(now)
            .unwrap_or_default();
        Some((Ok::<_, Infallible>(ev), (c, false)))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// What the change stream waits on.
struct Counts {
    ledger: tokio::sync::watch::Receiver<u64>,
    factory: tokio::sync::watch::Receiver<u64>,
    marks: tokio::sync::watch::Receiver<u64>,
}

/// The shortest gap between two events of the change stream.
const CHANGES_COALESCE: std::time::Duration = std::time::Duration::from_millis(100);

async fn events(State(s): State<Arc<Shared>>, Path(run): Path<String>) -> ApiResult {
    ok(s.sessions.events(&run)?)
}

/// Server-sent events: `output` frames from the cursor, `lag` when the ring evicted what the
/// cursor asks for, `end` with the observed exit, or one `notice` for a run that is not live.
async fn attach(
    State(s): State<Arc<Shared>>,
    Path(run): Path<String>,
    Query(q): Query<AttachQuery>,
    headers: HeaderMap,
) -> ApiResult {
    let (handle, state) = s.sessions.handle(&run)?;
    let from = attach_from(q.from, &headers);
    let stream = futures_util::stream::unfold(
        (handle, from, false, state),
        |(handle, cursor, done, state)| async move {
            if done {
                return None;
            }
            let Some(run) = handle else {
                let ev = SseEvent::default()
                    .event(wire::sse::NOTICE)
                    .json_data(NoticeEvent::NotLive {
                        state,
                        message: "this server holds no output for the run: it is not live \
                                  here (resume starts a new generation)"
                            .into(),
                    })
                    .unwrap_or_default();
                return Some((Ok::<_, Infallible>(ev), (None, cursor, true, state)));
            };
            let (ev, next, done) = next_event(&run, cursor).await;
            Some((Ok(ev), (Some(run), next, done, state)))
        },
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The next event of a console's ring from `cursor`, the one stream of the runs' attach and
/// the rigs' attach (`server::rigs_api`): an `output` batch, a `lag` when the ring evicted
/// what the cursor asks for, a `notice` when the cursor is ahead, or the `end` (then `done`).
/// Returns the event, the next cursor, and whether the stream ends after it.
pub(super) async fn next_event(run: &runs::Run, mut cursor: u64) -> (SseEvent, u64, bool) {
    loop {
        match run.ring().read_from(cursor, 64 * 1024) {
            ReadOutcome::Frames(frames) => {
                let last = frames[frames.len() - 1].seq;
                let data = output_data(&frames);
                let ev = SseEvent::default()
                    .event(wire::sse::OUTPUT)
                    .id(last.to_string())
                    .data(data);
                cursor = last + 1;
                return (ev, cursor, false);
            }
            ReadOutcome::Lag { first_available } => {
                let ev = SseEvent::default()
                    .event(wire::sse::LAG)
                    .json_data(LagEvent {
                        requested: cursor,
                        first_available,
                    })
                    .unwrap_or_default();
                return (ev, first_available, false);
            }
            ReadOutcome::End(end) => {
                let v = match end.exit {
                    Some(exit) => EndEvent {
                        last_seq: end.last_seq,
                        exit_code: exit.exit_code(),
                        signal: exit.signal().map(crate::runs::signal_name),
                        unobserved: false,
                    },
                    None => EndEvent {
                        last_seq: end.last_seq,
                        exit_code: None,
                        signal: None,
                        unobserved: true,
                    },
                };
                let ev = SseEvent::default()
                    .event(wire::sse::END)
                    .json_data(v)
                    .unwrap_or_default();
                return (ev, cursor, true);
            }
            ReadOutcome::Pending { .. } => run.ring().readable(cursor).await,
            ReadOutcome::Ahead { next } => {
                let ev = SseEvent::default()
                    .event(wire::sse::NOTICE)
                    .json_data(NoticeEvent::CursorAhead {
                        requested: cursor,
                        next,
                    })
                    .unwrap_or_default();
                return (ev, next, false);
            }
        }
    }
}

/// The cursor an attach starts from: `?from=`, else the `Last-Event-ID` header's next, else 1.
pub(super) fn attach_from(from: Option<u64>, headers: &HeaderMap) -> u64 {
    from.or_else(|| {
        headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|id| id + 1)
    })
    .unwrap_or(1)
    .max(1)
}

/// The data of an `output` event ([`wire::OutputEvent`]):
/// `{"first","last","frames":[{"seq","stream","b64"}]}`.
/// Written directly rather than through `serde_json::Value`: each payload is base64-encoded
/// once, straight into the event, and nothing needs escaping (numbers, the stream names
/// and the base64 alphabet).
fn output_data(frames: &[Frame]) -> String {
    use std::fmt::Write;
    let (Some(first), Some(last)) = (frames.first(), frames.last()) else {
        return r#"{"first":null,"last":null,"frames":[]}"#.to_string();
    };
    let size: usize = frames
        .iter()
        .map(|f| f.bytes.len().div_ceil(3) * 4 + 48)
        .sum();
    let mut s = String::with_capacity(size + 64);
    // Writing to a String cannot fail.
    let _ = write!(
        s,
        r#"{{"first":{},"last":{},"frames":["#,
        first.seq, last.seq
    );
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let stream = f.stream.as_str();
        let _ = write!(s, r#"{{"seq":{},"stream":"{stream}","b64":""#, f.seq);
        base64::engine::general_purpose::STANDARD.encode_string(&f.bytes, &mut s);
        s.push_str("\"}");
    }
    s.push_str("]}");
    s
}

async fn screen(State(s): State<Arc<Shared>>, Path(run): Path<String>) -> ApiResult {
    let (handle, state) = s.sessions.handle(&run)?;
    let Some(run_h) = handle else {
        return Err(SessionError::Conflict(format!(
            "run {run} is not live here (state={})",
            state.as_str()
        ))
        .into());
    };
    // Bringing the screen up to date parses what it is behind (after a burst, megabytes):
    // off the runtime's threads.
    let snap = blocking(move || {
        run_h
            .screen()
            .map_err(|e| ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()))
    })
    .await?;
    ok(snap)
}

/// A PTY run's output as an asciicast, streamed: the manager opens and checks the
/// transcript and its timing (every refusal comes before the answer starts), then a blocking
/// thread writes the cast into the body 64 KiB at a time. A client that goes away stops it.
async fn cast(
    State(s): State<Arc<Shared>>,
    Path(run): Path<String>,
    Query(q): Query<CastQuery>,
) -> ApiResult {
    use runs::cast::Version;
    let version = match q.version {
        None | Some(2) => Version::V2,
        Some(3) => Version::V3,
        Some(v) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unprocessable",
                format!("asciicast version {v} is not one proctor writes: ask for 2 or 3"),
            ));
        }
    };
    let sessions = s.sessions.clone();
    let (src, meta) = blocking(move || sessions.cast(&run, q.generation)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, ChannelWriter(tx.clone()));
        let res = src.write(&meta, version, &mut w).and_then(|_| {
            use std::io::Write;
            w.flush()
        });
        if let Err(e) = res {
            // The answer is under way: the error cuts the body short, so the client
            // sees a broken transfer rather than a short cast.
            let _ = tx.blocking_send(Err(e));
        }
    });
    let body = axum::body::Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async {
        rx.recv().await.map(|item| (item, rx))
    }));
    Ok((
        [(axum::http::header::CONTENT_TYPE, wire::CAST_MEDIA_TYPE)],
        body,
    )
        .into_response())
}

/// Bytes written to it go to a body's channel (from a blocking thread).
struct ChannelWriter(tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>);

impl std::io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(bytes::Bytes::copy_from_slice(buf)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client gone"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn input(
    State(s): State<Arc<Shared>>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let req: InputRequest = json_body(&body, true)?;
    let sessions = s.sessions.clone();
    blocking(move || sessions.input(&run, &req)).await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(Accepted { accepted: true }),
    )
        .into_response())
}

async fn interrupt(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.interrupt(&run, &c.token_id)).await?)
}

async fn stop(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    // On the reactor's timers: a stop that waits out its grace holds no thread.
    ok(s.sessions.stop_async(&run, &c.token_id).await?)
}

async fn resume(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    check_raw_size(&body)?;
    let b: SizeBody = json_body(&body, false)?;
    check_size(b.rows, b.cols)?;
    let size = match (b.rows, b.cols) {
        (Some(rows), Some(cols)) => Some(TermSize { rows, cols }),
        _ => None,
    };
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.resume(&run, size, &c.token_id)).await?)
}

async fn move_run(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    check_raw_size(&body)?;
    let needs = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "move needs {\"provider_profile_ref\": string}, the target profile's name",
        )
    };
    let v: Value = json_body(&body, true)?;
    let b: MoveBody = serde_json::from_value(v).map_err(|_| needs())?;
    let target = b
        .provider_profile_ref
        .filter(|t| !t.is_empty())
        .ok_or_else(needs)?;
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.move_run(&run, &target, &c.token_id)).await?)
}

/// `GET /runs/{ref}/handoff`.
async fn handoff_preview(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.handoff_preview(&run, &c.token_id)).await?)
}

/// `POST /runs/{ref}/handoff`: 201 with the new run.
async fn handoff(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    if body.len() > HANDOFF_BODY_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "a handoff body is at most {HANDOFF_BODY_MAX} bytes (a summary of at most {} \
                 bytes, JSON-escaped)",
                crate::sessions::handoff::MAX_SUMMARY
            ),
        ));
    }
    let b: wire::HandoffBody = json_body(&body, true)?;
    // The stop's grace and the wait for delivery are on timers: a handoff holds no thread.
    let h = s.sessions.handoff(&run, &b, &c.token_id).await?;
    Ok((StatusCode::CREATED, axum::Json(h)).into_response())
}

/// The largest `POST /runs/{ref}/handoff` body read: the summary's bound, escaped (at most
/// six bytes per byte), and room for the rest.
const HANDOFF_BODY_MAX: usize = crate::sessions::handoff::MAX_SUMMARY * 6 + 64 * 1024;

async fn resize(
    State(s): State<Arc<Shared>>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    check_raw_size(&body)?;
    let b: SizeBody = json_body(&body, true)?;
    let (Some(rows), Some(cols)) = (b.rows, b.cols) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "give rows and cols",
        ));
    };
    check_size(Some(rows), Some(cols))?;
    s.sessions.resize(&run, TermSize { rows, cols })?;
    ok(Resized {
        run_ref: run,
        rows,
        cols,
    })
}

async fn pin(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let v = s.sessions.pin(&run, &c.token_id, true)?;
    marked(&s);
    ok(v)
}

async fn unpin(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let v = s.sessions.pin(&run, &c.token_id, false)?;
    marked(&s);
    ok(v)
}

async fn snooze(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let b: SnoozeBody = json_body(&body, true)?;
    let until = b.until.ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "snooze needs {\"until\": RFC 3339 instant in the future}",
        )
    })?;
    let v = s.sessions.snooze(&run, &c.token_id, Some(&until))?;
    marked(&s);
    ok(v)
}

async fn unsnooze(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let v = s.sessions.snooze(&run, &c.token_id, None)?;
    marked(&s);
    ok(v)
}

async fn done(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let v = s.sessions.done(&run, &c.token_id, true)?;
    marked(&s);
    ok(v)
}

async fn undone(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    let v = s.sessions.done(&run, &c.token_id, false)?;
    marked(&s);
    ok(v)
}

async fn rename(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let needs = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "rename needs {\"name\": string} (empty clears the name)",
        )
    };
    // A body that is JSON but not of this shape (a number for the name, no name) gets the
    // same answer as one without a name.
    // (`json_body` takes only a JSON object: an array never reads as the fields.)
    let v: Value = json_body(&body, true)?;
    let b: RenameBody = serde_json::from_value(v).map_err(|_| needs())?;
    let name = b.name.ok_or_else(needs)?;
    ok(s.sessions.rename(&run, &name, &c.token_id)?)
}

async fn archive(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    ok(s.sessions.archive(&run, true, &c.token_id)?)
}

async fn unarchive(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    ok(s.sessions.archive(&run, false, &c.token_id)?)
}

/// `POST /runs/{ref}/cleanup`: any body is accepted; only `{"discard_worktree": true}`
/// (an explicit JSON true) confirms a discard.
async fn cleanup(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let discard = crate::api::parse_body::<CleanupBody>(&body)
        .ok()
        .is_some_and(|b| b.discard_worktree == Some(true));
    let sessions = s.sessions.clone();
    ok(blocking(move || sessions.cleanup(&run, &c.token_id, discard)).await?)
}

/// The worktree of a run; 404 for a run without one.
fn worktree_of(s: &Shared, run: &str) -> Result<crate::sessions::record::WorktreeInfo, ApiError> {
    s.sessions.worktree_info(run)?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("run {run} has no worktree (it was not started with worktree: true)"),
        )
    })
}

/// `GET /runs/{ref}/diff`: the paths the run's branch changed since it left the
/// workspace's current commit (committed objects only).
async fn diff(State(s): State<Arc<Shared>>, Path(run): Path<String>) -> ApiResult {
    let info = worktree_of(&s, &run)?;
    let diff = blocking(move || worktrees::diff(&info)).await?;
    ok(RunDiff { run_ref: run, diff })
}

/// `GET /runs/{ref}/diff/file?path=`: one changed path's text at base and at head.
async fn diff_file(
    State(s): State<Arc<Shared>>,
    Path(run): Path<String>,
    Query(q): Query<DiffFileQuery>,
) -> ApiResult {
    let path = q.path.filter(|p| !p.is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "give the path: GET …/diff/file?path=<a path GET …/diff lists>",
        )
    })?;
    let info = worktree_of(&s, &run)?;
    let file = blocking(move || worktrees::diff_file(&info, &path)).await?;
    ok(RunDiffFile { run_ref: run, file })
}

async fn delete_run(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(run): Path<String>,
) -> ApiResult {
    ok(s.sessions.delete(&run, &c.token_id)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::Stream;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn output_data_is_the_json_of_the_frames() {
        let frames = vec![
            Frame {
                seq: 7,
                stream: Stream::Stdout,
                bytes: Arc::from(&b"a\"\\\n\x1b[0m\xff\x00"[..]),
            },
            Frame {
                seq: 8,
                stream: Stream::Stderr,
                bytes: Arc::from(&b""[..]),
            },
            Frame {
                seq: 9,
                stream: Stream::Stdout,
                bytes: Arc::from((0..=255u8).collect::<Vec<u8>>()),
            },
        ];
        let b64 = base64::engine::general_purpose::STANDARD;
        let want = json!({"first": 7, "last": 9, "frames": frames.iter().map(|f| json!({
            "seq": f.seq, "stream": f.stream, "b64": b64.encode(&f.bytes)})).collect::<Vec<_>>()});
        let got: Value = serde_json::from_str(&output_data(&frames)).unwrap();
        assert_eq!(got, want);
    }
}
