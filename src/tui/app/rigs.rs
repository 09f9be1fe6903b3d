//! The Rigs view's state: every rig the server holds (open ones first, then the newest),
//! the engines' availability, the selected rig, and the selected rig's audit tail. The list
//! is fetched while the view is shown (its [`Feed`]); the audit tail of the selected rig is
//! asked for after each list and when the selection moves (`GET /v1/m/rigs/{rig}/audit`).
//! The actions on the selected rig (lock, unlock, suspend, resume, close) are calls of the
//! rigs' routes; attach hands the terminal to `proctor rig attach RIG`.

use hyper::Method;
use ratatui::layout::Rect;

use crate::api::rigs::{self as wire, AuditPage, Availability, ListItems, RigState, RigView};
use crate::client::{Client, ClientError};
use crate::tui::action::Action;
use crate::tui::views::{Feed, Pace, Pane};

use super::listing::{Keyed, Listing};
use super::{App, Call, CallTag, Effect, Modal};
use crate::tui::widgets::confirm::Confirm;

/// How many of the newest audit events the view asks for.
pub const AUDIT_TAIL: usize = 50;

impl Keyed for RigView {
    fn key(&self) -> &str {
        &self.record.id
    }
}

/// The rigs pane's state.
#[derive(Default)]
pub struct RigsPane {
    /// The rigs, open ones first, newest first within each.
    pub listing: Listing<RigView>,
    /// Whether each backend can run here (from the list's answer).
    pub engines: Vec<Availability>,
    /// The audit tail last heard of, and whose.
    pub audit: Option<(String, Result<AuditPage, String>)>,
    /// The audit asked for last (the rig, its `audit_next` then): asked again only when
    /// either changes, or after the next list.
    audit_asked: Option<(String, u64)>,
}

/// The rigs are fetched while the view is shown (every round of the evidence task, at once
/// when it opens and after an action).
impl Feed for RigsPane {
    const PANE: Pane = Pane::Rigs;
    const PACE: Pace = Pace::WhileShown;
    type Answer = ListItems;

    fn fetch(client: &Client) -> impl Future<Output = Result<Self::Answer, ClientError>> + Send {
        client.rigs()
    }

    fn take(app: &mut App, answer: Result<Self::Answer, String>) {
        app.rigs.on_list(answer);
        app.rigs.audit_asked = None;
        app.ask_rig_audit();
    }
}

impl RigsPane {
    /// A new list: open rigs first, newest first within each; the selection stays on its
    /// rig.
    pub fn on_list(&mut self, answer: Result<ListItems, String>) {
        let (rigs, engines) = match answer {
            Ok(l) => (Ok(l.items), Some(l.engines)),
            Err(e) => (Err(e), None),
        };
        self.listing.on_list(rigs);
        if let Some(Ok(v)) = &mut self.listing.list {
            // Stable: the newest-first order of `on_list` stays within each group.
            v.sort_by_key(|r| !r.record.state.is_open());
        }
        if let Some(e) = engines {
            self.engines = e;
        }
    }

    /// The rig as an action's answer left it (the server answers with the rig after it):
    /// its row changes at once, before the next list.
    pub fn on_rig(&mut self, answer: &serde_json::Value) {
        let Ok(view) = serde_json::from_value::<RigView>(answer.clone()) else {
            return;
        };
        if let Some(Ok(v)) = &mut self.listing.list
            && let Some(r) = v.iter_mut().find(|r| r.record.id == view.record.id)
        {
            *r = view;
        }
    }

    pub fn items(&self) -> &[RigView] {
        self.listing.items()
    }

    /// The selected rig.
    pub fn current(&self) -> Option<&RigView> {
        self.listing.current()
    }

    /// The selected rig's audit tail, when it is the one heard of.
    pub fn current_audit(&self) -> Option<&Result<AuditPage, String>> {
        let id = &self.current()?.record.id;
        match &self.audit {
            Some((rig, a)) if rig == id => Some(a),
            _ => None,
        }
    }

    pub fn navigate(&mut self, action: Action) {
        self.listing.navigate(action);
    }

    /// Its layout at the current size: the list over the audit tail keeps the selected rig
    /// in view.
    pub fn lay_out(&mut self, main: Rect) {
        let n = self.items().len();
        if let Some(rows) = self.listing.rows_in(main, n) {
            let sel = self.listing.position().unwrap_or(0);
            self.listing.follow(rows, sel, sel);
        }
    }
}

impl App {
    /// The rig the Rigs view's actions act on.
    pub fn selected_rig(&self) -> Option<&RigView> {
        self.rigs.current()
    }

    /// Asks for the selected rig's audit tail, unless it was asked for at this length
    /// already.
    pub fn ask_rig_audit(&mut self) {
        let Some(r) = self.rigs.current() else {
            return;
        };
        let want = (r.record.id.clone(), r.audit_next);
        if self.rigs.audit_asked.as_ref() == Some(&want) {
            return;
        }
        let after = want.1.saturating_sub(AUDIT_TAIL as u64 + 1);
        self.rigs.audit_asked = Some(want.clone());
        self.push(Effect::Call(Call::to::<()>(
            CallTag::RigAudit {
                rig: want.0.clone(),
            },
            Method::GET,
            wire::audit(&want.0, after, AUDIT_TAIL),
            None,
        )));
    }

    /// An audit page came back (kept only while its rig is the selected one).
    pub(super) fn on_rig_audit(&mut self, rig: String, result: Result<serde_json::Value, String>) {
        let page = result.and_then(|v| {
            serde_json::from_value::<AuditPage>(v)
                .map_err(|e| format!("the audit page did not read: {e}"))
        });
        if self.rigs.current().is_some_and(|r| r.record.id == rig) {
            self.rigs.audit = Some((rig, page));
        }
    }

    /// A rig action from a key or the palette: on the selected rig, through the rigs'
    /// routes; close asks first; attach hands the terminal over.
    pub(super) fn rig_action(&mut self, action: Action) {
        let Some(r) = self.selected_rig().cloned() else {
            self.info(
                "no rig selected (6 lists them; `proctor rig open --kind terminal` opens one)",
            );
            return;
        };
        let id = r.record.id.clone();
        let state = r.record.state;
        let refuse = |app: &mut App, what: &str| {
            app.info(format!("{id} is {}: {what}", state.as_str()));
        };
        match action {
            Action::RigAttach => {
                if !matches!(state, RigState::Running | RigState::Suspended) {
                    refuse(self, "nothing to attach to");
                    return;
                }
                self.push(Effect::RigAttach { rig: id });
            }
            Action::RigSuspend if state != RigState::Running => {
                refuse(self, "only a running rig is suspended")
            }
            Action::RigResume if state != RigState::Suspended => {
                refuse(self, "only a suspended rig is resumed")
            }
            Action::RigClose if !state.is_open() => refuse(self, "already closed"),
            Action::RigClose => {
                let holder = r
                    .lock
                    .as_ref()
                    .map(|l| {
                        format!(
                            " {} holds its lock.",
                            crate::text::one_line(&l.holder.name, 40)
                        )
                    })
                    .unwrap_or_default();
                self.open(Modal::Confirm {
                    action,
                    run: id.clone(),
                    dialog: Confirm::new(
                        format!("Close {id}?"),
                        format!(
                            "Its engine is stopped and its disk changes are dropped (the base \
                             image never changes); its audit log stays.{holder}"
                        ),
                        "Close",
                    ),
                });
            }
            Action::RigLock | Action::RigUnlock | Action::RigSuspend | Action::RigResume => {
                if let Some(call) = super::action_call(action, &id, None) {
                    self.info(format!("{} {id}…", action.name()));
                    self.push(Effect::Call(call));
                }
            }
            _ => {}
        }
    }
}

impl App {
    /// The command that attaches to `rig`: this proctor, on this home, `rig attach RIG`.
    pub fn rig_attach_argv(&self, rig: &str) -> Vec<String> {
        let mut argv = if self.proctor_argv.is_empty() {
            vec!["proctor".to_string()]
        } else {
            self.proctor_argv.clone()
        };
        argv.extend(["rig".into(), "attach".into(), rig.to_string()]);
        argv
    }

    /// Back from `proctor rig attach`: what it said (empty when it ended well), and the
    /// rigs fetched again (the attach counted as use).
    pub fn rig_attached(&mut self, rig: &str, said: String) {
        self.dirty = true;
        if said.is_empty() {
            self.info(format!("detached from {rig}: back in the cockpit"));
        } else {
            self.error(said);
        }
        self.push(Effect::Refresh);
    }
}

/// The route of a rig action: (method, route template).
pub(super) fn rig_route(action: Action) -> Option<(Method, &'static str)> {
    Some(match action {
        Action::RigLock => (Method::POST, wire::LOCK),
        Action::RigUnlock => (Method::DELETE, wire::LOCK),
        Action::RigSuspend => (Method::POST, wire::SUSPEND),
        Action::RigResume => (Method::POST, wire::RESUME),
        Action::RigClose => (Method::POST, wire::CLOSE),
        _ => return None,
    })
}

/// What the status line says after a rig action the server accepted.
pub(super) fn rig_done(action: Action, rig: &str, v: &serde_json::Value) -> Option<String> {
    let view = serde_json::from_value::<RigView>(v.clone()).ok();
    let state = view
        .as_ref()
        .map_or("?", |v| v.record.state.as_str())
        .to_string();
    Some(match action {
        Action::RigLock => {
            format!("{rig} locked: agents' actions on it are refused until you release it")
        }
        Action::RigUnlock => format!("{rig} unlocked"),
        Action::RigSuspend => format!("{rig} {state}"),
        Action::RigResume => format!("{rig} resumed: {state}"),
        Action::RigClose => format!("{rig} {state}"),
        _ => return None,
    })
}
