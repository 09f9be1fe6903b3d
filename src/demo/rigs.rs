//! The demo's rig: once the demo's server is up, `proctor demo` opens one namespace rig (no
//! image needed: a namespace rig without one binds the host's system folders read-only), so
//! the cockpit's Rigs view shows a live rig. Its failure is a notice, never the demo's end.

use crate::api::rigs::{BackendKind, OpenRequest, RigView};
use crate::client::{self, Client};
use crate::home::Home;

/// The demo rig's request: a namespace rig, egress denied, a short TTL (the demo's home is
/// thrown away anyway).
pub fn request() -> OpenRequest {
    OpenRequest {
        backend: Some(BackendKind::Namespace),
        ttl: Some("2h".into()),
        ..Default::default()
    }
}

/// Opens the demo rig through the home's running server with the owner token; returns the
/// booting view, or the sentence the demo prints as its notice.
pub fn open(home: &Home) -> Result<RigView, String> {
    let c = Client::new(home)
        .and_then(|c| c.with_token(home))
        .map_err(|e| e.to_string())?;
    client::block_on(c.rig_open(&request()))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Sample rigs for the cockpit's snapshot tests, as `GET /v1/m/rigs` shows them at
/// 2026-11-30T12:00:00Z: a running namespace rig locked by a person (`alice`), a suspended
/// VM whose memory the server could not measure, a booting VM not measured yet, and a rig
/// the TTL closed. `hostile` goes into the lock holder's name (untrusted text).
pub fn samples(hostile: &str) -> Vec<RigView> {
    use crate::api::rigs::{
        Accel, Boundary, CloseReason, Egress, ImageRef, Kind, Lock, RigRecord, RigState,
    };
    use crate::auth::{Actor, Principal};
    let actor = |name: &str, principal: Principal| Actor {
        token_id: "tok-1".into(),
        name: name.into(),
        principal,
    };
    let namespace = Boundary {
        backend: BackendKind::Namespace,
        summary: "namespace boundary: weaker than a VM (shares the host kernel)".into(),
        shares_host_kernel: true,
        accel: None,
        egress: Egress::Denied,
        residuals: vec!["a kernel exploit reaches the host".into()],
    };
    let vm = Boundary {
        backend: BackendKind::Vm,
        summary: "vm boundary: own kernel, disk and network stack (QEMU microvm, TCG)".into(),
        shares_host_kernel: false,
        accel: Some(Accel::Tcg),
        egress: Egress::Allowlist,
        residuals: vec![],
    };
    let rig =
        |id: &str, backend: BackendKind, boundary: Option<Boundary>, state: RigState| RigView {
            record: RigRecord {
                id: id.into(),
                kind: Kind::Terminal,
                backend,
                boundary,
                state,
                opened_by: actor("owner", Principal::Person),
                opened_at: "2026-11-30T11:00:00Z".into(),
                ttl_secs: 7200,
                expires_at: "2026-11-30T13:00:00Z".into(),
                idle_secs: 1800,
                last_used_at: "2026-11-30T11:58:00Z".into(),
                allow: vec![],
                workspace: None,
                image: Some(ImageRef {
                    digest: format!("sha256:{}", "ab".repeat(32)),
                    recipe: "debian-bookworm-minbase/1".into(),
                }),
                reserved_mb: 32,
                pid: Some(4242),
                pid_start: Some(1),
                closed_at: None,
                close_reason: None,
                error: None,
            },
            lock: None,
            ttl_left_secs: 3600,
            idle_secs_now: 120,
            resident_bytes: Some(5 * 1024 * 1024 + 400 * 1024),
            watchers: 0,
            audit_next: 1,
        };
    let mut locked = rig(
        "rig-0004",
        BackendKind::Namespace,
        Some(namespace),
        RigState::Running,
    );
    locked.lock = Some(Lock {
        holder: actor(&format!("alice {hostile}"), Principal::Person),
        since: "2026-11-30T11:56:00Z".into(),
    });
    locked.watchers = 1;
    locked.audit_next = 6;
    locked.record.workspace = Some("app".into());
    let mut suspended = rig("rig-0003", BackendKind::Vm, Some(vm), RigState::Suspended);
    suspended.resident_bytes = None;
    suspended.ttl_left_secs = 5340;
    suspended.idle_secs_now = 1900;
    suspended.record.reserved_mb = 256;
    let mut booting = rig("rig-0005", BackendKind::Vm, None, RigState::Booting);
    booting.ttl_left_secs = 7195;
    booting.idle_secs_now = 5;
    booting.resident_bytes = Some(250 * 1024 * 1024);
    let mut closed = rig("rig-0001", BackendKind::Namespace, None, RigState::Closed);
    closed.record.closed_at = Some("2026-11-30T11:30:00Z".into());
    closed.record.close_reason = Some(CloseReason::TtlExpired);
    closed.ttl_left_secs = 0;
    closed.resident_bytes = None;
    vec![closed, suspended, locked, booting]
}

/// A sample audit page of `rig` (the locked sample's): an agent's exec, the person's lock,
/// the agent's refused exec, a paste recorded by its size only, a hostile argv.
pub fn sample_audit(rig: &str, hostile: &str) -> crate::api::rigs::AuditPage {
    use crate::api::rigs::{AuditEvent, AuditPage};
    use crate::auth::{Actor, Principal};
    let ev = |seq: u64, who: &str, p: Principal, action: &str, outcome: &str, detail| AuditEvent {
        seq,
        at: format!("2026-11-30T11:5{seq}:00Z"),
        by: Actor {
            token_id: format!("tok-{seq}"),
            name: who.into(),
            principal: p,
        },
        action: action.into(),
        outcome: outcome.into(),
        detail,
    };
    AuditPage {
        rig: rig.into(),
        events: vec![
            ev(
                1,
                "claude",
                Principal::Agent,
                "exec",
                "done",
                serde_json::json!({"argv": ["make", "test"]}),
            ),
            ev(
                2,
                "alice",
                Principal::Person,
                "lock",
                "done",
                serde_json::json!({}),
            ),
            ev(
                3,
                "claude",
                Principal::Agent,
                "exec",
                "refused",
                serde_json::json!({"argv": ["rm", "-rf", "/work"]}),
            ),
            ev(
                4,
                "alice",
                Principal::Person,
                "type",
                "done",
                serde_json::json!({"bytes": 12, "paste": true}),
            ),
            ev(
                5,
                "claude",
                Principal::Agent,
                "exec",
                "refused",
                serde_json::json!({"argv": [hostile]}),
            ),
        ],
        next: 6,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_rig_is_a_namespace_rig() {
        let r = super::request();
        assert_eq!(r.backend, Some(crate::api::rigs::BackendKind::Namespace));
        assert!(r.allow.is_empty());
    }
}
