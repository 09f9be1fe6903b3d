//! The rigs' routes' contract (see [`crate::api`]): open, list, show, close; the actions
//! (exec, input, resize, files in and out, screen, attach); the control lock; suspend and
//! resume; the audit log; fetch. Observation needs `read` (list, show, screen, files out,
//! audit, attach), every other route `write`; taking the lock needs a person principal too
//! (the kernel's, not the token's word). Helper D completes this file.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ErrorBody;
pub use crate::rigs::backend::Availability;
pub use crate::rigs::image::Manifest;
pub use crate::rigs::model::{
    Accel, Allow, AuditEvent, AuditPage, BackendKind, Boundary, CloseReason, EXEC_OUTPUT_MAX,
    Egress, ExecRequest, ExecResult, FILE_MAX, FetchReport, FetchedRef, ImageRef, Kind, Lock,
    OpenRequest, RigRecord, RigState, RigView, Settings, TypeRequest,
};

/// The area's base.
pub const BASE: &str = "/v1/m/rigs";
/// `GET` (list) and `POST` (open).
pub const RIGS: &str = "/v1/m/rigs";
/// `GET` one rig.
pub const RIG: &str = "/v1/m/rigs/{rig}";
/// `POST`: close it.
pub const CLOSE: &str = "/v1/m/rigs/{rig}/close";
/// `POST` [`ExecRequest`] → [`ExecResult`].
pub const EXEC: &str = "/v1/m/rigs/{rig}/exec";
/// `POST` [`TypeRequest`]: keys or a paste into the console.
pub const INPUT: &str = "/v1/m/rigs/{rig}/input";
/// `POST {rows, cols}`.
pub const RESIZE: &str = "/v1/m/rigs/{rig}/resize";
/// `GET` the console's screen (`runs::ScreenSnapshot`).
pub const SCREEN: &str = "/v1/m/rigs/{rig}/screen";
/// `GET` SSE of the console's output, the frames of the runs' attach (`?from=`).
pub const ATTACH: &str = "/v1/m/rigs/{rig}/attach";
/// `GET ?path=` (out, raw bytes) and `PUT ?path=&mode=` (in, raw body).
pub const FILES: &str = "/v1/m/rigs/{rig}/files";
/// `POST` take, `DELETE` release the control lock.
pub const LOCK: &str = "/v1/m/rigs/{rig}/lock";
pub const SUSPEND: &str = "/v1/m/rigs/{rig}/suspend";
pub const RESUME: &str = "/v1/m/rigs/{rig}/resume";
/// `GET ?after=&limit=` → [`AuditPage`].
pub const AUDIT: &str = "/v1/m/rigs/{rig}/audit";
/// `POST` → [`FetchReport`].
pub const FETCH: &str = "/v1/m/rigs/{rig}/fetch";
/// `GET`: the backends' availability and the images built.
pub const ENGINES: &str = "/v1/m/rigs-engines";

/// A route template with its `{rig}` filled in.
pub fn path(template: &str, rig: &str) -> String {
    template.replace("{rig}", rig)
}

/// `GET /{rig}/audit?after=&limit=`: the events after seq `after` (default 0), at most
/// `limit` (default 100, at most 1000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditQuery {
    #[serde(default)]
    pub after: Option<u64>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The longest audit page.
pub const AUDIT_LIMIT_MAX: usize = 1000;
/// The default audit page.
pub const AUDIT_LIMIT_DEFAULT: usize = 100;

/// `/{rig}/audit` with its query.
pub fn audit(rig: &str, after: u64, limit: usize) -> String {
    format!("{}?after={after}&limit={limit}", path(AUDIT, rig))
}

/// `GET|PUT /{rig}/files?path=&mode=`: the guest's absolute path; `mode` (octal text, `644`
/// default) for a file copied in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FilesQuery {
    pub path: String,
    #[serde(default)]
    pub mode: Option<String>,
}

impl FilesQuery {
    /// The mode as a number: octal digits, at most `7777`. The error names the remedy.
    pub fn mode_bits(&self) -> Result<u32, String> {
        match self.mode.as_deref() {
            None | Some("") => Ok(0o644),
            Some(m) => u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|v| *v <= 0o7777)
                .ok_or_else(|| {
                    format!(
                        "mode {}: give octal permission digits, for example 644 or 755",
                        crate::text::one_line(m, 20)
                    )
                }),
        }
    }
}

/// `/{rig}/files` with its query (the path percent-encoded).
pub fn files(rig: &str, guest_path: &str, mode: Option<u32>) -> String {
    let mut s = format!("{}?path={}", path(FILES, rig), encode(guest_path));
    if let Some(m) = mode {
        s.push_str(&format!("&mode={m:o}"));
    }
    s
}

/// Percent-encodes a query value (everything but the unreserved characters and `/`).
pub fn encode(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// `POST /{rig}/resize`: the console's new size (both required, each 1..=1000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = RigSizeBody)]
pub struct SizeBody {
    pub rows: u16,
    pub cols: u16,
}

/// `GET /v1/m/rigs`: every rig (open ones first), and the engines' availability beside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ListItems {
    pub items: Vec<RigView>,
    pub engines: Vec<Availability>,
}

/// `GET /v1/m/rigs-engines`: whether each backend can run here, and the image built (the
/// current one's manifest, `null` when none is built: `proctor rig image build`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EnginesReport {
    pub engines: Vec<Availability>,
    #[schema(required = true)]
    pub image: Option<Manifest>,
}

/// The operations of this area, declared for the OpenAPI document (the server's handlers in
/// `server::rigs_api` serve them).
#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(get, path = RIGS, tag = "rigs",
        responses((status = 200, description = "every rig, open ones first, and the engines' availability", body = ListItems)))]
    pub fn list() {}

    #[utoipa::path(post, path = RIGS, tag = "rigs", request_body = OpenRequest,
        responses((status = 201, description = "the rig, booting: poll GET /{rig} until running", body = RigView),
                  (status = 400, description = "a bad field (ttl, idle, allow, backend): the remedy named", body = ErrorBody),
                  (status = 503, description = "the engine is not installed, no image is built, or the memory budget cannot be met", body = ErrorBody)))]
    pub fn open() {}

    #[utoipa::path(get, path = RIG, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the rig", body = RigView),
                  (status = 404, description = "no such rig", body = ErrorBody)))]
    pub fn show() {}

    #[utoipa::path(post, path = CLOSE, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the rig, closed", body = RigView),
                  (status = 404, description = "no such rig", body = ErrorBody),
                  (status = 423, description = "a person holds the lock and the caller is an agent", body = ErrorBody)))]
    pub fn close() {}

    #[utoipa::path(post, path = EXEC, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        request_body = ExecRequest,
        responses((status = 200, description = "what the guest's program returned (untrusted)", body = ExecResult),
                  (status = 409, description = "the rig is not running", body = ErrorBody),
                  (status = 423, description = "locked by a person", body = ErrorBody)))]
    pub fn exec() {}

    #[utoipa::path(post, path = INPUT, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        request_body = TypeRequest,
        responses((status = 200, description = "typed; the rig after it", body = RigView),
                  (status = 423, description = "locked by a person", body = ErrorBody)))]
    pub fn input() {}

    #[utoipa::path(post, path = RESIZE, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        request_body = SizeBody,
        responses((status = 200, description = "resized; the rig after it", body = RigView),
                  (status = 400, description = "rows or cols missing or out of range", body = ErrorBody)))]
    pub fn resize() {}

    #[utoipa::path(get, path = SCREEN, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the console's screen (guest text: sanitise before printing)", body = crate::runs::ScreenSnapshot),
                  (status = 409, description = "the rig is not live", body = ErrorBody)))]
    pub fn screen() {}

    #[utoipa::path(get, path = ATTACH, tag = "rigs",
        params(("rig" = String, Path, description = "rig-0001"),
               ("from" = Option<u64>, Query, description = "the first frame's seq (default 1, or Last-Event-ID + 1)")),
        responses((status = 200, description = "text/event-stream: the runs' attach frames (output, lag, end, notice) over the console", content_type = "text/event-stream", body = String),
                  (status = 409, description = "the rig is not live", body = ErrorBody)))]
    pub fn attach() {}

    #[utoipa::path(get, path = FILES, tag = "rigs",
        params(("rig" = String, Path, description = "rig-0001"),
               ("path" = String, Query, description = "the guest's absolute path")),
        responses((status = 200, description = "the file's bytes (untrusted)", content_type = "application/octet-stream", body = Vec<u8>),
                  (status = 404, description = "no such file in the guest", body = ErrorBody),
                  (status = 413, description = "larger than 16 MiB", body = ErrorBody)))]
    pub fn get_file() {}

    #[utoipa::path(put, path = FILES, tag = "rigs",
        params(("rig" = String, Path, description = "rig-0001"),
               ("path" = String, Query, description = "the guest's absolute path"),
               ("mode" = Option<String>, Query, description = "octal, default 644")),
        request_body(content = Vec<u8>, content_type = "application/octet-stream"),
        responses((status = 200, description = "written; the rig after it", body = RigView),
                  (status = 400, description = "not an absolute path, or a bad mode", body = ErrorBody),
                  (status = 413, description = "larger than 16 MiB", body = ErrorBody),
                  (status = 423, description = "locked by a person", body = ErrorBody)))]
    pub fn put_file() {}

    #[utoipa::path(post, path = LOCK, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the lock taken; the rig after it", body = RigView),
                  (status = 403, description = "an agent cannot take the lock", body = ErrorBody),
                  (status = 423, description = "another person holds it", body = ErrorBody)))]
    pub fn lock() {}

    #[utoipa::path(delete, path = LOCK, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the lock released; the rig after it", body = RigView),
                  (status = 403, description = "another's lock", body = ErrorBody)))]
    pub fn unlock() {}

    #[utoipa::path(post, path = SUSPEND, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "suspended; the rig after it", body = RigView),
                  (status = 409, description = "not running", body = ErrorBody)))]
    pub fn suspend() {}

    #[utoipa::path(post, path = RESUME, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "resumed; the rig after it", body = RigView),
                  (status = 409, description = "not suspended", body = ErrorBody)))]
    pub fn resume() {}

    #[utoipa::path(get, path = AUDIT, tag = "rigs",
        params(("rig" = String, Path, description = "rig-0001"),
               ("after" = Option<u64>, Query, description = "events after this seq (default 0)"),
               ("limit" = Option<usize>, Query, description = "at most this many (default 100, at most 1000)")),
        responses((status = 200, description = "the audit page", body = AuditPage),
                  (status = 404, description = "no such rig", body = ErrorBody)))]
    pub fn audit() {}

    #[utoipa::path(post, path = FETCH, tag = "rigs", params(("rig" = String, Path, description = "rig-0001")),
        responses((status = 200, description = "the guest repository's commits, into refs/rigs/<id>/*", body = FetchReport),
                  (status = 409, description = "no workspace, or not running", body = ErrorBody)))]
    pub fn fetch() {}

    #[utoipa::path(get, path = ENGINES, tag = "rigs",
        responses((status = 200, description = "each backend's availability and the current image", body = EnginesReport)))]
    pub fn engines() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::list,
        ops::open,
        ops::show,
        ops::close,
        ops::exec,
        ops::input,
        ops::resize,
        ops::screen,
        ops::attach,
        ops::get_file,
        ops::put_file,
        ops::lock,
        ops::unlock,
        ops::suspend,
        ops::resume,
        ops::audit,
        ops::fetch,
        ops::engines,
    ),
    components(schemas(
        ListItems,
        EnginesReport,
        Availability,
        Manifest,
        RigView,
        RigRecord,
        Kind,
        BackendKind,
        Boundary,
        Accel,
        Egress,
        Allow,
        RigState,
        CloseReason,
        Lock,
        ImageRef,
        OpenRequest,
        ExecRequest,
        ExecResult,
        TypeRequest,
        SizeBody,
        FetchReport,
        FetchedRef,
        AuditEvent,
        AuditPage,
        AuditQuery,
        FilesQuery,
        crate::runs::ScreenSnapshot,
        ErrorBody,
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route of the area is in the merged document, with its methods.
    #[test]
    fn every_rig_route_is_in_the_document() {
        let doc: serde_json::Value = serde_json::from_str(&crate::api::openapi_json()).unwrap();
        let ops = |p: &str| doc["paths"][p].as_object().map(|m| m.len()).unwrap_or(0);
        assert_eq!(ops(RIGS), 2);
        assert_eq!(ops(FILES), 2);
        assert_eq!(ops(LOCK), 2);
        for p in [
            RIG, CLOSE, EXEC, INPUT, RESIZE, SCREEN, ATTACH, SUSPEND, RESUME, AUDIT, FETCH, ENGINES,
        ] {
            assert_eq!(ops(p), 1, "{p}");
        }
    }

    #[test]
    fn the_queries_and_the_mode() {
        assert_eq!(
            files("rig-0001", "/work/a b", Some(0o755)),
            "/v1/m/rigs/rig-0001/files?path=/work/a%20b&mode=755"
        );
        assert_eq!(
            audit("rig-0002", 3, 10),
            "/v1/m/rigs/rig-0002/audit?after=3&limit=10"
        );
        let q = |m: &str| FilesQuery {
            path: "/x".into(),
            mode: Some(m.into()),
        };
        assert_eq!(q("755").mode_bits(), Ok(0o755));
        assert!(q("9").mode_bits().unwrap_err().contains("octal"));
        assert!(q("17777").mode_bits().is_err());
    }
}
