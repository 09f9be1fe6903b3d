//! The cockpit's side of the publication approval: the same library flow as
//! `proctor publish approve` ([`crate::publish::approve::run`]), run on a thread of its own,
//! with a [`Prompter`] whose answers come from the approval dialog
//! ([`super::widgets::approval`]) instead of `/dev/tty`.
//!
//! Before the flow's text is shown, and again before each answer is asked for, the prompter
//! applies the terminal rules of the CLI's prompt
//! ([`crate::authority::tty::check_input_terminal`]): this process has a controlling terminal,
//! it is a terminal, our process group is its foreground group, and the cockpit's input
//! (stdin) is that terminal; input typed ahead is discarded. Otherwise the flow refuses
//! (`no_terminal`) and writes its redacted receipt, as the CLI does.

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;
use zeroize::Zeroizing;

use super::app::Msg;
use super::widgets::approval::{Field, Reply};
use crate::authority::tty::{self, TtyError};
use crate::client::Client;
use crate::publish::approve::{self, Outcome, PromptError, Prompter};

/// What the flow tells the cockpit.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalEvent {
    /// The text to show (built and sanitised by `approve::display`).
    Show(String),
    /// A notice of the flow's own (the wait after wrong passphrases), shown as the dialog's
    /// note until the next step.
    Notice(String),
    /// An answer is wanted.
    Ask {
        field: Field,
        prompt: String,
        reply: Reply,
    },
    /// The flow ended.
    Done(Outcome),
}

/// How the prompter checks the terminal before each step (replaceable in tests).
pub type TerminalCheck = Box<dyn Fn() -> Result<(), PromptError> + Send>;

/// The real check: [`tty::check_input_terminal`] on `input` (the cockpit's stdin).
pub fn terminal_check(input: RawFd) -> TerminalCheck {
    Box::new(move || {
        tty::check_input_terminal(input).map_err(|e| match e {
            TtyError::InputNotControlling => PromptError::NoTerminal(e.to_string()),
            other => PromptError::from(other),
        })
    })
}

/// The dialog's prompter: each call goes to the cockpit's loop as a message and waits for the
/// dialog's answer.
pub struct ModalPrompter {
    tx: mpsc::Sender<Msg>,
    check: TerminalCheck,
}

impl ModalPrompter {
    pub fn new(tx: mpsc::Sender<Msg>, check: TerminalCheck) -> ModalPrompter {
        ModalPrompter { tx, check }
    }

    fn ask(&mut self, field: Field, prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        (self.check)()?;
        let (reply_tx, reply_rx) = std_mpsc::channel();
        let ev = ApprovalEvent::Ask {
            field,
            prompt: prompt.to_string(),
            reply: Reply::new(reply_tx),
        };
        self.tx
            .blocking_send(Msg::Approval(ev))
            .map_err(|_| PromptError::Aborted)?;
        // The dialog dropped unanswered (closed, the cockpit ending): a refusal.
        reply_rx.recv().map_err(|_| PromptError::Aborted)?
    }
}

impl Prompter for ModalPrompter {
    fn show(&mut self, text: &str) -> Result<(), PromptError> {
        (self.check)()?;
        self.tx
            .blocking_send(Msg::Approval(ApprovalEvent::Show(text.to_string())))
            .map_err(|_| PromptError::Aborted)
    }

    fn ask_revision(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        self.ask(Field::Revision, prompt)
    }

    fn ask_passphrase(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        self.ask(Field::Passphrase, prompt)
    }

    fn notice(&mut self, text: &str) -> Result<(), PromptError> {
        self.tx
            .blocking_send(Msg::Approval(ApprovalEvent::Notice(
                text.trim_end().to_string(),
            )))
            .map_err(|_| PromptError::Aborted)
    }
}

/// Runs the approval of `intent` on a thread of its own (the flow blocks on the server and on
/// the dialog); its end comes back as [`ApprovalEvent::Done`].
pub fn spawn(
    client: Client,
    key_path: PathBuf,
    intent: String,
    tx: mpsc::Sender<Msg>,
    check: TerminalCheck,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut prompter = ModalPrompter::new(tx.clone(), check);
        let outcome = approve::run(&client, &key_path, &intent, &mut prompter);
        let _ = tx.blocking_send(Msg::Approval(ApprovalEvent::Done(outcome)));
    })
}
