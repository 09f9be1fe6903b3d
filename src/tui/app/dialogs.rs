//! The dialogs over the cockpit: which one is open, what it is for, and what its answer
//! does. Every dialog is a [`Dialog`] (the publication approval too): the cockpit hands the
//! open one every key and paste, draws it over the screen, and acts on its
//! [`Outcome`]. A dialog whose answer went to the server stays open, busy, until the server
//! answers (only Esc closes it then).

use hyper::Method;
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;

use super::{App, Call, CallTag, Effect, Mode, action_call};
use crate::api::runs::{
    self as wire, InputRequest, PermissionList, PermissionState, PermissionView, PermitDecision,
    PermitRequest, RenameBody, SnoozeBody, StartRequest,
};
use crate::text;
use crate::tui::action::Action;
use crate::tui::approval::ApprovalEvent;
use crate::tui::data::RunView;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::theme::Theme;
use crate::tui::widgets::approval::Approval;
use crate::tui::widgets::confirm::Confirm;
use crate::tui::widgets::duration::SnoozePicker;
use crate::tui::widgets::help::Help;
use crate::tui::widgets::new_session::NewSessionForm;
use crate::tui::widgets::palette::Palette;
use crate::tui::widgets::permission::{Choice, PermissionDialog};
use crate::tui::widgets::prompt::Prompt;
use crate::tui::widgets::{Dialog, Outcome};

/// What a prompt is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptFor {
    Rename(String),
    SendInput(String),
    Snooze(String),
    /// A new session; whether it has a first prompt (on a PTY session the server types it
    /// once the tool is up, then Enter).
    NewSession(bool),
    /// A search of a run's messages (the Activity view).
    SearchMessages(String),
}

/// A dialog over the cockpit.
pub enum Modal {
    Help(Help),
    /// The command palette: every action by name.
    Palette(Palette),
    /// Until when a session is snoozed.
    Snooze {
        run: String,
        picker: SnoozePicker<chrono::Local>,
        busy: bool,
    },
    /// A new session: profile, workspace, transport, first prompt.
    NewSession {
        form: NewSessionForm,
        busy: bool,
    },
    /// A question whose answer goes to the server; it stays open (with the server's error
    /// under the field) until the server accepts it.
    Prompt {
        purpose: PromptFor,
        dialog: Prompt,
        busy: bool,
    },
    /// A yes/no question before an action that cannot be taken back.
    Confirm {
        action: Action,
        run: String,
        dialog: Confirm,
    },
    /// The publication approval: the flow's text, the typed revision, the masked
    /// passphrase, the outcome.
    Approval(Box<Approval>),
    /// What a session's tool asks permission for, and the person's answer.
    Permission(PermissionDialog),
    /// A tribunal seat: its routing and its findings (read only).
    Seat(Box<crate::tui::widgets::seat::SeatDialog>),
    /// A message of a session's transcript, found by a search (read only).
    Message(Box<crate::tui::widgets::message::MessageDialog>),
}

impl Modal {
    /// Draws the dialog over `screen`.
    pub fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        match self {
            Modal::Help(h) => h.render(frame, screen, theme, keymap),
            Modal::Palette(p) => p.render(frame, screen, theme, keymap),
            Modal::Snooze { picker, .. } => picker.render(frame, screen, theme, keymap),
            Modal::NewSession { form, .. } => form.render(frame, screen, theme, keymap),
            Modal::Prompt { dialog, .. } => dialog.render(frame, screen, theme, keymap),
            Modal::Confirm { dialog, .. } => dialog.render(frame, screen, theme, keymap),
            Modal::Approval(a) => a.render(frame, screen, theme, keymap),
            Modal::Permission(p) => p.render(frame, screen, theme, keymap),
            Modal::Seat(s) => s.render(frame, screen, theme, keymap),
            Modal::Message(s) => s.render(frame, screen, theme, keymap),
        }
    }

    /// Lays the dialog out on `screen` (see [`Dialog::lay_out`]).
    pub fn lay_out(&mut self, screen: Rect) {
        match self {
            Modal::Help(h) => h.lay_out(screen),
            Modal::Palette(p) => p.lay_out(screen),
            Modal::Snooze { picker, .. } => picker.lay_out(screen),
            Modal::NewSession { form, .. } => form.lay_out(screen),
            Modal::Prompt { dialog, .. } => dialog.lay_out(screen),
            Modal::Confirm { dialog, .. } => dialog.lay_out(screen),
            Modal::Approval(a) => a.lay_out(screen),
            Modal::Permission(p) => p.lay_out(screen),
            Modal::Seat(s) => s.lay_out(screen),
            Modal::Message(s) => s.lay_out(screen),
        }
    }

    /// Pasted text, for the dialog (the approval never takes it into a field).
    pub fn handle_paste(&mut self, text: &str) {
        match self {
            Modal::Help(h) => h.handle_paste(text),
            Modal::Palette(p) => p.handle_paste(text),
            Modal::Snooze { picker, .. } => picker.handle_paste(text),
            Modal::NewSession { form, .. } => form.handle_paste(text),
            Modal::Prompt { dialog, .. } => dialog.handle_paste(text),
            Modal::Confirm { dialog, .. } => dialog.handle_paste(text),
            Modal::Approval(a) => a.handle_paste(text),
            Modal::Permission(p) => p.handle_paste(text),
            Modal::Seat(s) => s.handle_paste(text),
            Modal::Message(s) => s.handle_paste(text),
        }
    }

    /// The keymap contexts of the dialog's keys, most specific first.
    pub fn contexts(&self) -> &'static [Context] {
        match self {
            Modal::Help(h) => h.contexts(),
            Modal::Palette(p) => p.contexts(),
            Modal::Snooze { picker, .. } => picker.contexts(),
            Modal::NewSession { form, .. } => form.contexts(),
            Modal::Prompt { dialog, .. } => dialog.contexts(),
            Modal::Confirm { dialog, .. } => dialog.contexts(),
            Modal::Approval(a) => a.contexts(),
            Modal::Permission(p) => p.contexts(),
            Modal::Seat(s) => s.contexts(),
            Modal::Message(s) => s.contexts(),
        }
    }
}

impl App {
    pub(super) fn open(&mut self, m: Modal) {
        self.mode = Mode::Modal(Box::new(m));
    }

    /// A key for the open dialog (the mode is `Normal` while this runs; the dialog is put
    /// back unless it closed).
    pub(super) fn on_modal_key(&mut self, m: Modal, key: &KeyEvent, contexts: &[Context]) {
        match m {
            Modal::Approval(mut a) => {
                if a.handle_key(key, &self.keymap) == Outcome::Continue {
                    self.open(Modal::Approval(a));
                }
            }
            Modal::Help(mut h) => {
                if h.handle_key(key, &self.keymap) == Outcome::Continue {
                    self.open(Modal::Help(h));
                }
            }
            Modal::Seat(mut s) => {
                if s.handle_key(key, &self.keymap) == Outcome::Continue {
                    self.open(Modal::Seat(s));
                }
            }
            Modal::Message(mut s) => {
                if s.handle_key(key, &self.keymap) == Outcome::Continue {
                    self.open(Modal::Message(s));
                }
            }
            Modal::Permission(mut p) => match p.handle_key(key, &self.keymap) {
                Outcome::Continue => self.open(Modal::Permission(p)),
                Outcome::Cancel => {}
                Outcome::Submit(choice) => {
                    let (decision, for_session) = match choice {
                        Choice::Allow => (PermitDecision::Allow, false),
                        Choice::AllowForSession => (PermitDecision::Allow, true),
                        Choice::Deny => (PermitDecision::Deny, false),
                    };
                    self.push(Effect::Call(Call::to(
                        CallTag::Permit {
                            run: p.run().to_string(),
                            id: p.id().to_string(),
                        },
                        Method::POST,
                        wire::permission(p.run(), p.id()),
                        Some(&PermitRequest {
                            decision: Some(decision),
                            for_session: Some(for_session),
                        }),
                    )));
                    p.set_busy(true);
                    self.open(Modal::Permission(p));
                }
            },
            Modal::Palette(mut p) => match p.handle_key(key, &self.keymap) {
                Outcome::Continue => self.open(Modal::Palette(p)),
                Outcome::Cancel => {}
                Outcome::Submit(a) => self.dispatch(a),
            },
            Modal::Snooze {
                run,
                mut picker,
                busy,
            } => {
                if busy {
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::Snooze { run, picker, busy });
                    }
                    return;
                }
                match picker.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::Snooze { run, picker, busy }),
                    Outcome::Cancel => {}
                    Outcome::Submit(until) => {
                        self.push(Effect::Call(Call::to(
                            CallTag::Prompt(PromptFor::Snooze(run.clone())),
                            Method::POST,
                            wire::at(wire::SNOOZE, &run),
                            Some(&SnoozeBody { until: Some(until) }),
                        )));
                        self.open(Modal::Snooze {
                            run,
                            picker,
                            busy: true,
                        });
                    }
                }
            }
            Modal::NewSession { mut form, busy } => {
                if busy {
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::NewSession { form, busy });
                    }
                    return;
                }
                match form.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::NewSession { form, busy }),
                    Outcome::Cancel => {}
                    Outcome::Submit(ns) => {
                        let mut body = StartRequest {
                            profile: Some(ns.profile.clone()),
                            workspace: Some(ns.workspace.clone()),
                            transport: Some(ns.transport.name().to_string()),
                            path: self.client_path.clone(),
                            ..StartRequest::default()
                        };
                        let pty = ns.transport == crate::providers::Transport::Pty;
                        // On a PTY session the server types it once the tool is up, then
                        // Enter; on a pipe session it is the protocol's first turn.
                        let first = ns.prompt.is_some();
                        body.prompt = ns.prompt;
                        if pty {
                            let (r, c) = self.pane_size();
                            body.rows = Some(r);
                            body.cols = Some(c);
                        }
                        self.push(Effect::Call(Call::to(
                            CallTag::Prompt(PromptFor::NewSession(first)),
                            Method::POST,
                            wire::RUNS.to_string(),
                            Some(&body),
                        )));
                        self.open(Modal::NewSession { form, busy: true });
                    }
                }
            }
            Modal::Prompt {
                purpose,
                mut dialog,
                busy,
            } => {
                if busy {
                    // Waiting for the server: only Esc (close; the request still completes).
                    if self.keymap.resolve(contexts, key) != Some(Action::Escape) {
                        self.open(Modal::Prompt {
                            purpose,
                            dialog,
                            busy,
                        });
                    }
                    return;
                }
                match dialog.handle_key(key, &self.keymap) {
                    Outcome::Continue => self.open(Modal::Prompt {
                        purpose,
                        dialog,
                        busy,
                    }),
                    Outcome::Cancel => {}
                    Outcome::Submit(value) => self.submit_prompt(purpose, dialog, value),
                }
            }
            Modal::Confirm {
                action,
                run,
                mut dialog,
            } => match dialog.handle_key(key, &self.keymap) {
                Outcome::Continue => self.open(Modal::Confirm {
                    action,
                    run,
                    dialog,
                }),
                Outcome::Cancel => {}
                // A remote host's intent (`run` holds its id): the approval runs there.
                Outcome::Submit(()) if action == Action::Approve => {
                    if let (Some(host), own) = self.approval_host(&run) {
                        self.info(format!(
                            "approving {} on {}: the terminal is ssh's until it ends…",
                            text::one_line(&own, 24),
                            text::one_line(&host, 24)
                        ));
                        self.push(Effect::ApproveRemote { host, intent: own });
                    }
                }
                Outcome::Submit(()) => {
                    if let Some(call) = action_call(action, &run, None) {
                        self.info(format!("{} {run}…", action.name()));
                        self.push(Effect::Call(call));
                    }
                }
            },
        }
    }

    pub(super) fn open_prompt(&mut self, purpose: PromptFor, dialog: Prompt) {
        self.open(Modal::Prompt {
            purpose,
            dialog,
            busy: false,
        });
    }

    fn submit_prompt(&mut self, purpose: PromptFor, mut dialog: Prompt, text_in: String) {
        if let PromptFor::SearchMessages(run) = &purpose {
            // Checked again here: a query the server would refuse is never sent.
            match super::activity::check_query(&text_in) {
                Ok(()) => self.search_messages(run.clone(), text_in),
                Err(e) => {
                    dialog.set_error(e);
                    self.open_prompt(purpose, dialog);
                }
            }
            return;
        }
        let call = match &purpose {
            PromptFor::Rename(run) => Ok(Call::to(
                CallTag::Prompt(purpose.clone()),
                Method::PUT,
                wire::at(wire::NAME, run),
                Some(&RenameBody {
                    name: Some(text_in),
                }),
            )),
            PromptFor::SendInput(run) => {
                if text_in.is_empty() {
                    Err("type the line to send, or esc to cancel".to_string())
                } else {
                    let run_pty = self
                        .sessions
                        .runs
                        .iter()
                        .any(|r| r.run_ref == *run && r.is_pty());
                    // A PTY takes typed bytes: the line ends with Enter.
                    let text_out = if run_pty {
                        format!("{text_in}\r")
                    } else {
                        text_in.clone()
                    };
                    Ok(Call::to(
                        CallTag::Prompt(purpose.clone()),
                        Method::POST,
                        wire::at(wire::INPUT, run),
                        Some(&InputRequest {
                            text: Some(text_out),
                            ..InputRequest::default()
                        }),
                    ))
                }
            }
            PromptFor::Snooze(_) | PromptFor::NewSession(_) | PromptFor::SearchMessages(_) => {
                Err("this dialog has its own form".to_string())
            }
        };
        match call {
            Ok(call) => {
                self.push(Effect::Call(call));
                self.open(Modal::Prompt {
                    purpose,
                    dialog,
                    busy: true,
                });
            }
            Err(e) => {
                dialog.set_error(e);
                self.open(Modal::Prompt {
                    purpose,
                    dialog,
                    busy: false,
                });
            }
        }
    }

    /// The permission dialog's key: asks the server for the requests of the focused run if
    /// it has open ones, else of the first run that has.
    pub(super) fn ask_permissions(&mut self, focused: Option<&RunView>) {
        let target = focused
            .filter(|r| r.permissions_open > 0)
            .or_else(|| self.sessions.runs.iter().find(|r| r.permissions_open > 0))
            .map(|r| r.run_ref.clone());
        let Some(run) = target else {
            self.info("no session asks for a permission");
            return;
        };
        self.push(Effect::Call(Call::to::<()>(
            CallTag::Permissions {
                run: run.clone(),
                quiet: false,
            },
            Method::GET,
            wire::at(wire::PERMISSIONS, &run),
            None,
        )));
    }

    /// The run's requests came: the dialog asks the oldest open one.
    pub(super) fn on_permissions(
        &mut self,
        run: String,
        quiet: bool,
        result: Result<serde_json::Value, String>,
    ) {
        let list = match result.map(serde_json::from_value::<PermissionList>) {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                return self.error(format!("the permissions of {run}: {e}"));
            }
            Err(e) => return self.error(format!("the permissions of {run}: {e}")),
        };
        let open: Vec<PermissionView> = list
            .items
            .into_iter()
            .filter(|p| p.state == PermissionState::Open && p.id.is_some())
            .collect();
        let Some(first) = open.first().cloned() else {
            if !quiet {
                self.info(format!("{run} asks for nothing now"));
            }
            self.push(Effect::Refresh);
            return;
        };
        // A dialog already open (typed into) is not replaced.
        if self.mode.is_modal() {
            return;
        }
        self.open(Modal::Permission(PermissionDialog::new(
            &run,
            first,
            open.len() - 1,
        )));
    }

    /// The server's answer to a decision: the dialog closes (and asks the next open
    /// request, if any), or shows the refusal.
    pub(super) fn on_permit(
        &mut self,
        run: String,
        id: String,
        result: Result<serde_json::Value, String>,
    ) {
        let open = matches!(&self.mode, Mode::Modal(m)
            if matches!(&**m, Modal::Permission(p) if p.run() == run && p.id() == id));
        match result {
            Ok(v) => {
                if open {
                    self.mode = Mode::Normal;
                }
                let word = match serde_json::from_value::<PermissionView>(v) {
                    Ok(p) if p.state == PermissionState::Allowed && p.for_session => {
                        "allowed for the session"
                    }
                    Ok(p) if p.state == PermissionState::Allowed => "allowed",
                    Ok(_) => "denied",
                    Err(_) => "answered",
                };
                self.success(format!("{run}: permission {id} {word}"));
                self.push(Effect::Refresh);
                // The next open request of the same run, if there is one.
                self.push(Effect::Call(Call::to::<()>(
                    CallTag::Permissions {
                        run: run.clone(),
                        quiet: true,
                    },
                    Method::GET,
                    wire::at(wire::PERMISSIONS, &run),
                    None,
                )));
            }
            Err(e) => {
                let e = text::one_line(&e, 400);
                match &mut self.mode {
                    Mode::Modal(m) if open => {
                        if let Modal::Permission(p) = &mut **m {
                            p.set_error(e);
                        }
                    }
                    _ => self.error(e),
                }
            }
        }
    }

    /// What the approval flow says, for its dialog.
    pub(super) fn on_approval(&mut self, event: ApprovalEvent) {
        let dialog = match &mut self.mode {
            Mode::Modal(m) => match &mut **m {
                Modal::Approval(a) => Some(a),
                _ => None,
            },
            _ => None,
        };
        match event {
            ApprovalEvent::Show(t) => {
                if let Some(a) = dialog {
                    a.show(t);
                }
            }
            ApprovalEvent::Notice(t) => {
                if let Some(a) = dialog {
                    a.notice(t);
                }
            }
            ApprovalEvent::Ask {
                field,
                prompt,
                reply,
            } => match dialog {
                Some(a) => a.ask(field, prompt, reply),
                None => {
                    reply.send(Err(crate::publish::approve::PromptError::Aborted));
                }
            },
            ApprovalEvent::Done(outcome) => {
                match dialog {
                    Some(a) => a.done(outcome),
                    None => match outcome {
                        crate::publish::approve::Outcome::Published { intent, .. } => {
                            self.success(format!("{} published", text::one_line(&intent, 20)))
                        }
                        crate::publish::approve::Outcome::Refused { code, message, .. } => {
                            self.error(format!("approval refused ({code}): {message}"))
                        }
                    },
                }
                self.push(Effect::Refresh);
            }
        }
    }
}
