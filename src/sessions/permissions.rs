//! Permission requests held open for a person (issue 13, point 4).
//!
//! A stdio tool asks for a permission ([`crate::providers::protocol::Event::PermissionRequested`]);
//! the manager gives the request proctor's own id (`"1"`, `"2"`…, unique in the run), keeps
//! the tool's request id in memory only ([`Table`], one per live generation), and records
//! `permission_requested`. A person answers through the API (`permission_decided`, naming
//! who); a request still open when the process ends is recorded `permission_expired`; a
//! profile set to deny every request refuses it without asking (`permission_refused`,
//! `by: "profile"`). Nothing allows a request on its own.
//!
//! What the API lists ([`list`]) is folded from the run's recorded events, never from
//! memory, so it says only what was observed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::record::{RunEvent, kinds};

/// The open requests of one live generation: proctor's id → the tool's request id.
#[derive(Debug, Default)]
pub struct Table {
    next: u64,
    open: BTreeMap<String, Value>,
}

impl Table {
    /// A table whose ids continue after the `already` requests the run recorded before.
    pub fn starting_after(already: u64) -> Table {
        Table {
            next: already,
            open: BTreeMap::new(),
        }
    }

    /// Holds the tool's request `tool_id` open; returns proctor's id for it.
    pub fn open(&mut self, tool_id: Value) -> String {
        self.next += 1;
        let id = self.next.to_string();
        self.open.insert(id.clone(), tool_id);
        id
    }

    /// The tool's request id of the open request `id`.
    pub fn tool_id(&self, id: &str) -> Option<&Value> {
        self.open.get(id)
    }

    /// Forgets `id` (answered).
    pub fn close(&mut self, id: &str) {
        self.open.remove(id);
    }

    /// proctor's id of the open request whose tool id is `tool_id`.
    pub fn proctor_id(&self, tool_id: &Value) -> Option<String> {
        self.open
            .iter()
            .find(|(_, t)| *t == tool_id)
            .map(|(id, _)| id.clone())
    }

    /// Every open request (proctor's id, the tool's), forgotten.
    pub fn drain_with_tool_ids(&mut self) -> Vec<(String, Value)> {
        std::mem::take(&mut self.open).into_iter().collect()
    }

    /// Every id still open, forgotten (the process ended).
    pub fn drain(&mut self) -> Vec<String> {
        std::mem::take(&mut self.open).into_keys().collect()
    }
}

/// How many `permission_requested` events the run recorded (all generations).
pub fn requested_count(events: &[RunEvent]) -> u64 {
    events
        .iter()
        .filter(|e| e.kind == kinds::PERMISSION_REQUESTED)
        .count() as u64
}

/// Where a permission request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionState {
    /// Waiting for a person.
    Open,
    /// A person allowed it (`for_session` says whether for the rest of the session).
    Allowed,
    /// A person denied it.
    Denied,
    /// Still open when its process ended: the tool never got an answer.
    Expired,
    /// Refused without asking: the run's profile denies every request.
    Refused,
}

impl PermissionState {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionState::Open => "open",
            PermissionState::Allowed => "allowed",
            PermissionState::Denied => "denied",
            PermissionState::Expired => "expired",
            PermissionState::Refused => "refused",
        }
    }
}

/// Who decided: the token that called and the principal the server established.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DecidedBy {
    pub token_id: String,
    pub name: String,
    /// `person` (an agent is refused before it can decide).
    pub principal: String,
}

/// One permission request of a run's current generation, as `GET …/permissions` lists it.
/// Every string came from the tool: sanitised and bounded when recorded, to be displayed
/// through the sanitiser all the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PermissionView {
    /// proctor's id for the request (null for one refused by the profile, which nobody
    /// can answer).
    #[schema(required = true)]
    pub id: Option<String>,
    pub state: PermissionState,
    /// The protocol's method or subtype (`can_use_tool`, `item/commandExecution/requestApproval`,
    /// `session/request_permission`…).
    pub method: String,
    /// The tool call's kind or name (`Bash`, `commandExecution`, `execute`…).
    #[schema(required = true)]
    pub tool_name: Option<String>,
    /// The command or the file(s) it concerns.
    #[schema(required = true)]
    pub what: Option<String>,
    /// The tool's own reason, when it gave one.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// The decisions the tool offered: `allow`, `allow_for_session`, `deny`.
    pub options: Vec<String>,
    /// When it was asked (RFC 3339).
    pub since: String,
    /// When it was decided, expired or refused.
    #[schema(required = true)]
    pub decided_at: Option<String>,
    /// Allowed for the rest of the session (only with `allowed`).
    pub for_session: bool,
    /// Who decided (a person's token), for `allowed` and `denied`.
    #[schema(required = true)]
    pub by: Option<DecidedBy>,
}

/// `GET /runs/{ref}/permissions`: the current generation's requests, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PermissionList {
    #[serde(rename = "ref")]
    pub run_ref: String,
    pub generation: u64,
    pub items: Vec<PermissionView>,
}

/// A person's answer: allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermitDecision {
    Allow,
    Deny,
}

/// The body of `POST /runs/{ref}/permissions/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermitRequest {
    /// `allow` or `deny` (required).
    pub decision: Option<PermitDecision>,
    /// With `allow`: allow it for the rest of the session, where the tool offered that.
    pub for_session: Option<bool>,
}

fn s(f: &serde_json::Map<String, Value>, k: &str) -> Option<String> {
    f.get(k).and_then(Value::as_str).map(str::to_string)
}

fn generation_of(e: &RunEvent) -> Option<u64> {
    e.fields.get("generation").and_then(Value::as_u64)
}

/// The permission requests of `generation`, folded from the run's events.
pub fn list(events: &[RunEvent], generation: u64) -> Vec<PermissionView> {
    let mut items: Vec<PermissionView> = Vec::new();
    for e in events {
        if generation_of(e) != Some(generation) {
            continue;
        }
        let f = &e.fields;
        let find = |items: &mut Vec<PermissionView>| -> Option<usize> {
            let id = s(f, "id")?;
            items
                .iter()
                .position(|p| p.id.as_deref() == Some(&id) && p.state == PermissionState::Open)
        };
        match e.kind.as_str() {
            kinds::PERMISSION_REQUESTED | kinds::PERMISSION_REFUSED => {
                let refused = e.kind == kinds::PERMISSION_REFUSED;
                items.push(PermissionView {
                    id: if refused { None } else { s(f, "id") },
                    state: if refused {
                        PermissionState::Refused
                    } else {
                        PermissionState::Open
                    },
                    method: s(f, "method").unwrap_or_default(),
                    tool_name: s(f, "tool_name"),
                    what: s(f, "what"),
                    reason: s(f, "reason"),
                    options: f
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                    since: e.at.clone(),
                    decided_at: refused.then(|| e.at.clone()),
                    for_session: false,
                    by: None,
                });
            }
            kinds::PERMISSION_DECIDED => {
                if let Some(i) = find(&mut items) {
                    let p = &mut items[i];
                    p.state = match s(f, "decision").as_deref() {
                        Some("allow") => PermissionState::Allowed,
                        _ => PermissionState::Denied,
                    };
                    p.for_session = f.get("for_session").and_then(Value::as_bool) == Some(true);
                    p.decided_at = Some(e.at.clone());
                    p.by = f
                        .get("by")
                        .and_then(|b| serde_json::from_value(b.clone()).ok());
                }
            }
            kinds::PERMISSION_EXPIRED => {
                if let Some(i) = find(&mut items) {
                    items[i].state = PermissionState::Expired;
                    items[i].decided_at = Some(e.at.clone());
                }
            }
            _ => {}
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, at: &str, fields: Value) -> RunEvent {
        RunEvent {
            seq: 0,
            at: at.into(),
            kind: kind.into(),
            fields: fields.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn the_list_follows_the_recorded_events_of_the_generation() {
        let asked = |id: &str, g: u64| {
            ev(
                kinds::PERMISSION_REQUESTED,
                "t1",
                json!({"generation": g, "id": id, "method": "can_use_tool", "tool_name": "Bash",
                       "what": "ls", "reason": null, "options": ["allow", "deny"]}),
            )
        };
        let events = vec![
            asked("1", 1),
            asked("2", 2),
            asked("3", 2),
            asked("4", 2),
            ev(
                kinds::PERMISSION_DECIDED,
                "t2",
                json!({"generation": 2, "id": "2", "decision": "allow", "for_session": true,
                       "by": {"token_id": "tok-1", "name": "ann", "principal": "person"}}),
            ),
            ev(
                kinds::PERMISSION_DECIDED,
                "t3",
                json!({"generation": 2, "id": "3", "decision": "deny", "for_session": false,
                       "by": {"token_id": "tok-1", "name": "ann", "principal": "person"}}),
            ),
            ev(
                kinds::PERMISSION_REFUSED,
                "t4",
                json!({"generation": 2, "method": "can_use_tool", "by": "profile"}),
            ),
            ev(
                kinds::PERMISSION_EXPIRED,
                "t5",
                json!({"generation": 2, "id": "4"}),
            ),
        ];
        let l = list(&events, 2);
        let states: Vec<_> = l.iter().map(|p| (p.id.clone(), p.state)).collect();
        assert_eq!(
            states,
            [
                (Some("2".into()), PermissionState::Allowed),
                (Some("3".into()), PermissionState::Denied),
                (Some("4".into()), PermissionState::Expired),
                (None, PermissionState::Refused),
            ]
        );
        assert!(l[0].for_session);
        assert_eq!(l[0].by.as_ref().unwrap().name, "ann");
        assert_eq!(l[0].decided_at.as_deref(), Some("t2"));
        assert_eq!(l[2].decided_at.as_deref(), Some("t5"));
        assert_eq!(list(&events, 1)[0].state, PermissionState::Open);
        assert_eq!(requested_count(&events), 4);
    }

    #[test]
    fn ids_continue_across_generations_and_drain_forgets() {
        let mut t = Table::starting_after(3);
        assert_eq!(t.open(json!(7)), "4");
        assert_eq!(t.open(json!("x")), "5");
        assert_eq!(t.tool_id("4"), Some(&json!(7)));
        t.close("4");
        assert_eq!(t.tool_id("4"), None);
        assert_eq!(t.proctor_id(&json!("x")).as_deref(), Some("5"));
        assert_eq!(t.proctor_id(&json!(7)), None);
        assert_eq!(t.drain(), ["5"]);
        assert!(t.drain().is_empty());
    }
}
