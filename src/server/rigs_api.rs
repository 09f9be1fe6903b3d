//! Routes under `/v1/m/rigs` (the contract: [`crate::api::rigs`]): open, list, show, close,
//! the actions (exec, input, resize, files in and out, screen, attach), the control lock,
//! suspend and resume, the audit log, fetch, and the engines' availability. Every action goes
//! through the manager's one chokepoint ([`crate::rigs::Rigs::act`]) with the caller as the
//! authorizer established it (the kernel's principal, not the token's word); the blocking
//! work runs off the async workers. Observation needs `read`, everything else `write`
//! ([`rigs_role`]); taking the lock also needs a person principal.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::Shared;
use super::api::{ApiError, Caller, blocking};
use super::runs_api::{attach_from, json_body, next_event};
use crate::api::rigs::{self as wire, AuditQuery, EnginesReport, FilesQuery, ListItems, SizeBody};
use crate::api::runs::AttachQuery;
use crate::auth::Principal;
use crate::rigs::RigError;
use crate::rigs::backend::Availability;
use crate::rigs::model::{Action, ExecRequest, FILE_MAX, OpenRequest, Outcome, TypeRequest};
use crate::runs::TermSize;

/// The largest body of `POST /{rig}/exec` (the argv, the cwd and the stdin's base64).
pub const EXEC_BODY_MAX: usize = 8 << 20;
/// The most arguments of one exec, and the most bytes they hold together (each counted with
/// its terminating NUL, as `execve` counts them).
pub const ARGV_MAX: usize = 4096;
pub const ARGV_BYTES_MAX: usize = 256 << 10;
/// The most bytes of one exec's standard input (decoded).
pub const EXEC_STDIN_MAX: usize = 4 << 20;
/// The longest an exec may run, in seconds.
pub const EXEC_TIMEOUT_MAX: u64 = 3600;
/// The most bytes one `POST /{rig}/input` types (decoded), and its largest body.
pub const INPUT_MAX: usize = 64 << 10;
pub const INPUT_BODY_MAX: usize = 256 << 10;
/// The largest body of the routes that take a small JSON one (resize, open, …).
pub const SMALL_BODY_MAX: usize = 64 << 10;
/// The longest guest path.
pub const GUEST_PATH_MAX: usize = 4096;

/// Reads a request's body, at most `max` bytes: more is refused (413) naming the bound,
/// before anything reaches the rig.
async fn body_within(body: axum::body::Body, max: usize, what: &str) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, max).await.map_err(|_| {
        ApiError::from(RigError::TooLarge(format!(
            "the body of {what} is over its {max}-byte bound ({}); send less",
            human(max)
        )))
    })
}

/// `4 MiB`, `64 KiB`, `512 bytes`.
fn human(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The bounds of an exec: argv non-empty, at most [`ARGV_MAX`] arguments and
/// [`ARGV_BYTES_MAX`] bytes, no NUL in them; the cwd a guest path; the stdin valid base64 of
/// at most [`EXEC_STDIN_MAX`] bytes; the timeout 1 to [`EXEC_TIMEOUT_MAX`] seconds.
fn check_exec(req: &ExecRequest) -> Result<(), ApiError> {
    use base64::Engine;
    if req.argv.is_empty() || req.argv[0].is_empty() {
        return Err(ApiError::bad_request(
            "argv is empty: give the program and its arguments, for example [\"ls\", \"-la\"]",
        ));
    }
    if req.argv.len() > ARGV_MAX {
        return Err(RigError::TooLarge(format!(
            "argv has {} arguments, over the bound of {ARGV_MAX}; pass long lists on stdin",
            req.argv.len()
        ))
        .into());
    }
    let bytes: usize = req.argv.iter().map(|a| a.len() + 1).sum();
    if bytes > ARGV_BYTES_MAX {
        return Err(RigError::TooLarge(format!(
            "argv holds {bytes} bytes, over the {ARGV_BYTES_MAX}-byte bound ({}); pass large \
             data on stdin or copy it in with `proctor rig cp`",
            human(ARGV_BYTES_MAX)
        ))
        .into());
    }
    if let Some(i) = req.argv.iter().position(|a| a.contains('\0')) {
        return Err(ApiError::bad_request(format!(
            "argv[{i}] contains a NUL byte, which no program can receive as an argument"
        )));
    }
    if let Some(cwd) = &req.cwd {
        check_guest_path("cwd", cwd)?;
    }
    if let Some(t) = req.timeout_secs
        && (t == 0 || t > EXEC_TIMEOUT_MAX)
    {
        return Err(ApiError::bad_request(format!(
            "timeout_secs {t}: give 1 to {EXEC_TIMEOUT_MAX} seconds"
        )));
    }
    if let Some(b) = &req.stdin_b64 {
        // Counted before decoding: the base64 of EXEC_STDIN_MAX bytes is at most this long.
        if b.len() > EXEC_STDIN_MAX.div_ceil(3) * 4 {
            return Err(stdin_too_large(b.len() / 4 * 3));
        }
        let n = base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| ApiError::bad_request(format!("stdin_b64 is not base64: {e}")))?
            .len();
        if n > EXEC_STDIN_MAX {
            return Err(stdin_too_large(n));
        }
    }
    Ok(())
}

fn stdin_too_large(n: usize) -> ApiError {
    RigError::TooLarge(format!(
        "stdin holds about {n} bytes, over the {EXEC_STDIN_MAX}-byte bound ({}); copy large \
         input in with `proctor rig cp` and read it from the file",
        human(EXEC_STDIN_MAX)
    ))
    .into()
}

/// The bounds of typed input: text or data_b64 (one of them), at most [`INPUT_MAX`] bytes.
fn check_input(req: &TypeRequest) -> Result<(), ApiError> {
    use base64::Engine;
    let n = match (&req.text, &req.data_b64) {
        (Some(t), None) => t.len(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| ApiError::bad_request(format!("data_b64 is not base64: {e}")))?
            .len(),
        _ => {
            return Err(ApiError::bad_request(
                "give either text or data_b64 (one of them, not both)",
            ));
        }
    };
    if n > INPUT_MAX {
        return Err(RigError::TooLarge(format!(
            "{n} bytes typed at once, over the {INPUT_MAX}-byte bound ({}) of one input; send \
             it in parts, or copy a file in with `proctor rig cp`",
            human(INPUT_MAX)
        ))
        .into());
    }
    Ok(())
}

/// The engines' availability, probed once per server (the versions of
/// `qemu-system-x86_64` and `bwrap` do not change under a server; `rig list` asks often).
#[derive(Debug, Default)]
pub struct EnginesCache(OnceLock<Vec<Availability>>);

impl EnginesCache {
    fn get(&self) -> Vec<Availability> {
        self.0
            .get_or_init(crate::rigs::backend::availability)
            .clone()
    }
}

impl From<RigError> for ApiError {
    fn from(e: RigError) -> Self {
        let status = match &e {
            RigError::NotFound(_) => StatusCode::NOT_FOUND,
            RigError::BadRequest(_) => StatusCode::BAD_REQUEST,
            RigError::Locked { .. } => StatusCode::LOCKED,
            RigError::Forbidden(_) => StatusCode::FORBIDDEN,
            RigError::Conflict(_) => StatusCode::CONFLICT,
            RigError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            RigError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            RigError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.code(), e.to_string())
    }
}

/// The role each rig route needs (`route` is the full matched path): observation `read`,
/// the rest `write`.
pub fn rigs_role(method: &str, route: &str) -> Option<crate::auth::Role> {
    use crate::auth::Role::*;
    use wire::*;
    Some(match (method, route) {
        ("GET", RIGS | RIG | SCREEN | ATTACH | FILES | AUDIT | ENGINES) => Read,
        ("POST", RIGS | CLOSE | EXEC | INPUT | RESIZE | LOCK | SUSPEND | RESUME | FETCH) => Write,
        ("PUT", FILES) => Write,
        ("DELETE", LOCK) => Write,
        _ => return None,
    })
}

/// The routes, with their full paths.
pub fn routes() -> Router<Arc<Shared>> {
    use wire::*;
    Router::new()
        .route(RIGS, get(list).post(open))
        .route(RIG, get(show))
        .route(CLOSE, post(close))
        .route(EXEC, post(exec))
        .route(INPUT, post(input))
        .route(RESIZE, post(resize))
        .route(SCREEN, get(screen))
        .route(ATTACH, get(attach))
        .route(
            FILES,
            get(get_file)
                .put(put_file)
                .layer(DefaultBodyLimit::disable()),
        )
        .route(LOCK, post(lock).delete(unlock))
        .route(SUSPEND, post(suspend))
        .route(RESUME, post(resume))
        .route(AUDIT, get(self::audit))
        .route(FETCH, post(fetch))
        .route(ENGINES, get(engines))
}

type ApiResult = Result<Response, ApiError>;

fn ok(v: impl serde::Serialize) -> ApiResult {
    Ok(axum::Json(v).into_response())
}

/// A rig id is `rig-` and digits; anything else is refused before the manager reads a path.
fn check_rig(id: &str) -> Result<(), ApiError> {
    if crate::files::valid_id(id, "rig-") {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "{} is not a rig id: give one `proctor rig list` shows, for example rig-0001",
        crate::text::one_line(id, 60)
    )))
}

/// Runs one action through the chokepoint, off the async workers.
async fn act(s: &Shared, c: &Caller, rig: String, action: Action) -> Result<Outcome, ApiError> {
    check_rig(&rig)?;
    let rigs = s.rigs.clone();
    let by = c.actor();
    blocking(move || rigs.act(&by, &rig, action)).await
}

/// The answer of an action that returns the rig.
fn rig_answer(o: Outcome) -> ApiResult {
    match o {
        Outcome::Rig(v) => ok(*v),
        Outcome::Exec(r) => ok(r),
        Outcome::Screen(sc) => ok(sc),
        Outcome::Fetched(f) => ok(f),
        Outcome::File(bytes) => {
            Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
        }
    }
}

async fn list(State(s): State<Arc<Shared>>) -> ApiResult {
    let st = s.clone();
    let (items, engines) =
        blocking(move || Ok::<_, RigError>((st.rigs.list(), st.rig_engines.get()))).await?;
    ok(ListItems { items, engines })
}

async fn engines(State(s): State<Arc<Shared>>) -> ApiResult {
    let st = s.clone();
    let report = blocking(move || {
        let image = match crate::rigs::image::current(&st.home)? {
            Some(img) => crate::rigs::image::manifest(&img.dir).ok(),
            None => None,
        };
        Ok::<_, RigError>(EnginesReport {
            engines: st.rig_engines.get(),
            image,
        })
    })
    .await?;
    ok(report)
}

async fn open(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    body: axum::body::Body,
) -> ApiResult {
    let body = body_within(body, SMALL_BODY_MAX, "POST /v1/m/rigs").await?;
    let req: OpenRequest = json_body(&body, false)?;
    let rigs = s.rigs.clone();
    let by = c.actor();
    let view = blocking(move || rigs.open(&by, req)).await?;
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

async fn show(State(s): State<Arc<Shared>>, Path(rig): Path<String>) -> ApiResult {
    check_rig(&rig)?;
    let rigs = s.rigs.clone();
    ok(blocking(move || rigs.show(&rig)).await?)
}

async fn close(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Close).await?)
}

async fn exec(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    body: axum::body::Body,
) -> ApiResult {
    let body = body_within(body, EXEC_BODY_MAX, "POST /{rig}/exec").await?;
    let req: ExecRequest = json_body(&body, true)?;
    check_exec(&req)?;
    rig_answer(act(&s, &c, rig, Action::Exec(req)).await?)
}

async fn input(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    body: axum::body::Body,
) -> ApiResult {
    let body = body_within(body, INPUT_BODY_MAX, "POST /{rig}/input").await?;
    let req: TypeRequest = json_body(&body, true)?;
    check_input(&req)?;
    rig_answer(act(&s, &c, rig, Action::Type(req)).await?)
}

async fn resize(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    body: axum::body::Body,
) -> ApiResult {
    let body = body_within(body, SMALL_BODY_MAX, "POST /{rig}/resize").await?;
    let b: SizeBody = json_body(&body, true)?;
    let size = TermSize {
        rows: b.rows,
        cols: b.cols,
    };
    if !size.is_allowed() {
        return Err(ApiError::bad_request(format!(
            "{}x{} is not a terminal size: rows 1 to {}, cols 1 to {}",
            b.rows,
            b.cols,
            crate::runs::MAX_ROWS,
            crate::runs::MAX_COLS
        )));
    }
    rig_answer(act(&s, &c, rig, Action::Resize(size)).await?)
}

async fn screen(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Screen).await?)
}

/// A guest path (`what` names the field): absolute, at most [`GUEST_PATH_MAX`] bytes, no
/// NUL, no `..` component (the path is the one meant, never one climbed out of).
fn check_guest_path(what: &str, p: &str) -> Result<(), ApiError> {
    let shown = crate::text::one_line(p, 80);
    let why = if !p.starts_with('/') {
        "it is not absolute".to_string()
    } else if p.len() > GUEST_PATH_MAX {
        format!(
            "it is {} bytes, over the {GUEST_PATH_MAX}-byte bound",
            p.len()
        )
    } else if p.contains('\0') {
        "it contains a NUL byte".to_string()
    } else if p.split('/').any(|c| c == "..") {
        "it has a `..` component".to_string()
    } else {
        return Ok(());
    };
    Err(ApiError::bad_request(format!(
        "{what} {shown}: {why}; give the guest's absolute path, for example /work/notes.txt"
    )))
}

async fn get_file(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    Query(q): Query<FilesQuery>,
) -> ApiResult {
    check_guest_path("path", &q.path)?;
    rig_answer(act(&s, &c, rig, Action::GetFile { path: q.path }).await?)
}

async fn put_file(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    Query(q): Query<FilesQuery>,
    body: axum::body::Body,
) -> ApiResult {
    check_guest_path("path", &q.path)?;
    let mode = q.mode_bits().map_err(ApiError::bad_request)?;
    let bytes = axum::body::to_bytes(body, FILE_MAX).await.map_err(|_| {
        ApiError::from(RigError::TooLarge(format!(
            "a file copied into a rig is at most {FILE_MAX} bytes ({}); copy a smaller file, \
             or split it",
            human(FILE_MAX)
        )))
    })?;
    let action = Action::PutFile {
        path: q.path,
        bytes: bytes.to_vec(),
        mode,
    };
    rig_answer(act(&s, &c, rig, action).await?)
}

async fn lock(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    check_rig(&rig)?;
    if c.principal == Principal::Agent {
        return Err(RigError::Forbidden(format!(
            "an agent identity cannot take the control lock of {rig}: a person takes it with \
             `proctor rig lock {rig}` or `l` in the cockpit's Rigs view"
        ))
        .into());
    }
    rig_answer(act(&s, &c, rig, Action::Lock).await?)
}

async fn unlock(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Unlock).await?)
}

async fn suspend(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Suspend).await?)
}

async fn resume(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Resume).await?)
}

async fn fetch(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
) -> ApiResult {
    rig_answer(act(&s, &c, rig, Action::Fetch).await?)
}

async fn audit(
    State(s): State<Arc<Shared>>,
    Path(rig): Path<String>,
    Query(q): Query<AuditQuery>,
) -> ApiResult {
    check_rig(&rig)?;
    let limit = q.limit.unwrap_or(wire::AUDIT_LIMIT_DEFAULT);
    if limit == 0 || limit > wire::AUDIT_LIMIT_MAX {
        return Err(ApiError::bad_request(format!(
            "limit {limit}: give 1 to {}",
            wire::AUDIT_LIMIT_MAX
        )));
    }
    let after = q.after.unwrap_or(0);
    let rigs = s.rigs.clone();
    ok(blocking(move || rigs.audit(&rig, after, limit)).await?)
}

/// The console's output as the runs' attach frames; the watcher (which counts as use and is
/// audited) lives exactly as long as the stream.
async fn attach(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(rig): Path<String>,
    Query(q): Query<AttachQuery>,
    headers: HeaderMap,
) -> ApiResult {
    check_rig(&rig)?;
    let rigs = s.rigs.clone();
    let by = c.actor();
    let watch = blocking(move || rigs.watch(&by, &rig)).await?;
    let from = attach_from(q.from, &headers);
    let stream = futures_util::stream::unfold(
        (Arc::new(watch), from, false),
        |(watch, cursor, done)| async move {
            if done {
                return None;
            }
            let (ev, next, done) = next_event(&watch.console, cursor).await;
            Some((Ok::<_, Infallible>(ev), (watch, next, done)))
        },
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
