//! The tribunal's routes' contract (see [`crate::api`]): the seats (the registry and what
//! is alive now), the rounds (convened, listed, shown, and the envelope each judged), and
//! the red-first commits the engine judges against. Convening a round and recording a red
//! commit need `write`; everything else `read`.
//!
//! The round's record is the stored document (`data/tribunal/rnd-NNNN.json`), sent as
//! stored; its types are `tribunal::model`'s, re-exported here.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, Items};
pub use crate::tribunal::engine::RedRecord;
pub use crate::tribunal::model::{
    Attempt, AttemptOutcome, Backend, Convergence, Counts, EngineReport, EngineStep, EnvelopeFile,
    EnvelopeRef, Finding, Judged, KeySource, Ladder, LadderProbe, Lens, Mode, Probe, Registry,
    Round, RoundState, Rung, SatOn, Seat, SeatState, SeatsReport, Severity, Tier, Verdict,
    Verification, Word,
};

/// The area's base.
pub const BASE: &str = "/v1/m/tribunal";
/// `GET` the registry and each rung's probe (`?probe=false`: not probed).
pub const SEATS: &str = "/v1/m/tribunal/seats";
/// `GET` (list, `?candidate=&run=`) and `POST` (convene) rounds.
pub const ROUNDS: &str = "/v1/m/tribunal/rounds";
/// `GET` one round.
pub const ROUND: &str = "/v1/m/tribunal/rounds/{id}";
/// `GET` the envelope a round judged.
pub const ROUND_ENVELOPE: &str = "/v1/m/tribunal/rounds/{id}/envelope";
/// `GET` (list, `?workspace=`) and `POST` (record) red-first commits.
pub const RED: &str = "/v1/m/tribunal/red";

/// A route template with its `{id}` filled in (`rnd-0001`).
pub fn path(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

/// `GET /seats?probe=false`: the registry without probing (the default probes every rung,
/// spending no verdict).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SeatsQuery {
    #[serde(default)]
    pub probe: Option<bool>,
}

/// `/seats` with its query.
pub fn seats(probe: bool) -> String {
    format!("{SEATS}?probe={probe}")
}

/// `GET /rounds?candidate=cand-0001&run=run-0001`: only those rounds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoundQuery {
    #[serde(default)]
    pub candidate: Option<String>,
    #[serde(default)]
    pub run: Option<String>,
}

/// `/rounds` with its query (ids are `[a-z0-9-]`: nothing to escape).
pub fn rounds(candidate: Option<&str>, run: Option<&str>) -> String {
    let mut q = Vec::new();
    if let Some(c) = candidate {
        q.push(format!("candidate={c}"));
    }
    if let Some(r) = run {
        q.push(format!("run={r}"));
    }
    if q.is_empty() {
        ROUNDS.to_string()
    } else {
        format!("{ROUNDS}?{}", q.join("&"))
    }
}

/// `POST /rounds`: convene the tribunal on a candidate's current bytes (blocking: the answer
/// comes when every seat decided; `GET /rounds?candidate=` shows it in progress meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConveneRequest {
    /// `cand-0001`.
    pub candidate: String,
    /// The model or family that built the change (`claude-opus-4`, `anthropic`): every rung
    /// of its family is refused on every ladder.
    pub builder: String,
    /// One line: what the change is for.
    pub intent: String,
    /// The success criteria, as text (the CLI reads them from `--criteria FILE`).
    pub criteria: String,
    /// The round's folder (claimed with a stamp); `null`: `data/tribunal/rnd-NNNN/`.
    #[serde(default)]
    pub out: Option<String>,
    /// One family available: graded same-family-blind, not cross-family (never counts for a
    /// gate). `null` is `false`.
    #[serde(default)]
    pub solo: Option<bool>,
}

/// The rounds listing, oldest first.
pub type RoundList = Items<Round>;

/// `GET /rounds/{id}/envelope`: the envelope's text, exactly as the jurors got it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EnvelopeView {
    pub round: String,
    pub envelope: EnvelopeRef,
    pub text: String,
}

/// `POST /red`: the red-first commit of a workspace (its failing test committed before the
/// build).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RedRequest {
    /// `ws-0001`.
    pub workspace: String,
    /// The full commit id.
    pub commit: String,
}

/// `GET /red?workspace=ws-0001`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RedQuery {
    #[serde(default)]
    pub workspace: Option<String>,
}

/// `/red` with its query.
pub fn red(workspace: Option<&str>) -> String {
    match workspace {
        Some(w) => format!("{RED}?workspace={w}"),
        None => RED.to_string(),
    }
}

/// The red-first commits, oldest first.
pub type RedList = Items<RedRecord>;

/// The operations of this area, declared for the OpenAPI document (the server's handlers in
/// `server::tribunal_api` serve them).
#[allow(dead_code)]
mod ops {
    use super::*;

    #[utoipa::path(get, path = SEATS, tag = "tribunal",
        params(("probe" = Option<bool>, Query, description = "probe each rung (default true; no verdict spent)")),
        responses((status = 200, description = "the registry and each rung's probe", body = SeatsReport),
                  (status = 422, description = "config/tribunal.toml is malformed (config_invalid): the file, key and remedy named", body = ErrorBody)))]
    pub fn seats() {}

    #[utoipa::path(post, path = ROUNDS, tag = "tribunal", request_body = ConveneRequest,
        responses((status = 201, description = "the round, every seat decided", body = Round),
                  (status = 400, description = "not a candidate id, an empty builder or intent", body = ErrorBody),
                  (status = 404, description = "no such candidate (unknown_candidate)", body = ErrorBody),
                  (status = 409, description = "refused (stale, in_progress, already_judged, leak, out_dir_refused)", body = ErrorBody),
                  (status = 422, description = "refused (unknown_builder, config_invalid)", body = ErrorBody)))]
    pub fn convene() {}

    #[utoipa::path(get, path = ROUNDS, tag = "tribunal",
        params(("candidate" = Option<String>, Query, description = "only this candidate's rounds"),
               ("run" = Option<String>, Query, description = "only this run's rounds")),
        responses((status = 200, description = "the rounds, oldest first (one in progress included)", body = Items<Round>)))]
    pub fn list() {}

    #[utoipa::path(get, path = ROUND, tag = "tribunal", params(("id" = String, Path, description = "rnd-0001")),
        responses((status = 200, description = "the round", body = Round),
                  (status = 404, description = "no such round", body = ErrorBody)))]
    pub fn show() {}

    #[utoipa::path(get, path = ROUND_ENVELOPE, tag = "tribunal", params(("id" = String, Path, description = "rnd-0001")),
        responses((status = 200, description = "the envelope the round judged", body = EnvelopeView),
                  (status = 404, description = "no such round", body = ErrorBody)))]
    pub fn envelope() {}

    #[utoipa::path(post, path = RED, tag = "tribunal", request_body = RedRequest,
        responses((status = 201, description = "recorded", body = RedRecord),
                  (status = 400, description = "not a workspace id or a commit", body = ErrorBody),
                  (status = 409, description = "refused", body = ErrorBody)))]
    pub fn record_red() {}

    #[utoipa::path(get, path = RED, tag = "tribunal",
        params(("workspace" = Option<String>, Query, description = "only this workspace's")),
        responses((status = 200, description = "the red-first commits, oldest first", body = Items<RedRecord>)))]
    pub fn reds() {}
}

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        ops::seats,
        ops::convene,
        ops::list,
        ops::show,
        ops::envelope,
        ops::record_red,
        ops::reds,
    ),
    components(schemas(
        SeatsReport,
        Registry,
        Lens,
        Tier,
        Ladder,
        Rung,
        Backend,
        KeySource,
        LadderProbe,
        Probe,
        ConveneRequest,
        Items<Round>,
        Round,
        RoundState,
        Mode,
        Seat,
        SeatState,
        SatOn,
        Attempt,
        AttemptOutcome,
        Judged,
        Verdict,
        Word,
        Finding,
        Severity,
        Verification,
        Counts,
        EnvelopeRef,
        EnvelopeFile,
        EngineReport,
        EngineStep,
        Convergence,
        EnvelopeView,
        RedRequest,
        RedRecord,
        Items<RedRecord>,
        crate::evidence::store::DigestRef,
        ErrorBody,
    ))
)]
pub struct Doc;

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every operation of the tribunal is in the document, each listing names its own item
    /// type, and every `$ref` under the tribunal's paths names a schema the document holds
    /// (no name is shared with another area's type: the registry and the verification are
    /// `TribunalRegistry` and `TribunalVerification`).
    #[test]
    fn the_tribunals_operations_and_their_schemas_resolve() {
        let doc: Value = serde_json::from_str(&crate::api::openapi_json()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        use super::*;
        let ops = |p: &str| doc["paths"][p].as_object().map(|m| m.len()).unwrap_or(0);
        assert_eq!(ops(ROUNDS), 2);
        assert_eq!(ops(RED), 2);
        for p in [SEATS, ROUND, ROUND_ENVELOPE] {
            assert_eq!(ops(p), 1, "{p}");
        }
        let listed = |p: &str| {
            doc["paths"][p]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"]
                .as_str()
                .unwrap_or("")
                .to_string()
        };
        assert!(
            listed(ROUNDS).ends_with("/Items_TribunalRound"),
            "{}",
            listed(ROUNDS)
        );
        assert!(
            listed(RED).ends_with("/Items_TribunalRedRecord"),
            "{}",
            listed(RED)
        );
        // The key registry and the receipts' verification keep their own names.
        assert!(schemas.contains_key("TribunalRegistry"));
        assert!(schemas.contains_key("TribunalVerification"));
        assert!(schemas["Registry"]["properties"].get("lenses").is_none());
        let text = doc["paths"].to_string() + &doc["components"].to_string();
        for part in text.split("\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(schemas.contains_key(name), "{name} names no schema");
        }
    }

    /// The query helpers build the paths the routes read.
    #[test]
    fn the_paths_with_their_queries() {
        use super::*;
        assert_eq!(rounds(None, None), ROUNDS);
        assert_eq!(
            rounds(Some("cand-0001"), Some("run-0002")),
            "/v1/m/tribunal/rounds?candidate=cand-0001&run=run-0002"
        );
        assert_eq!(
            path(ROUND_ENVELOPE, "rnd-0003"),
            "/v1/m/tribunal/rounds/rnd-0003/envelope"
        );
        assert_eq!(seats(false), "/v1/m/tribunal/seats?probe=false");
        assert_eq!(red(Some("ws-0001")), "/v1/m/tribunal/red?workspace=ws-0001");
    }
}
