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
use crate::api::authority::{RegisterKeyAnswer, RegisterKeyRequest};
use crate::authority::keys;
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
/// the dialog); its end comes back as [`ApprovalEvent::Done`]. With `offer_demo_key` (a home
/// `proctor demo` prepared) and no key at `key_path`, the dialog first offers to create a
/// throwaway demo key ([`demo_key`]) and the approval continues with it.
pub fn spawn(
    client: Client,
    key_path: PathBuf,
    intent: String,
    offer_demo_key: bool,
    tx: mpsc::Sender<Msg>,
    check: TerminalCheck,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut prompter = ModalPrompter::new(tx.clone(), check);
        let made = if offer_demo_key && !key_path.exists() {
            demo_key(&client, &key_path, &mut prompter)
        } else {
            Ok(())
        };
        let outcome = match made {
            Ok(()) => approve::run(&client, &key_path, &intent, &mut prompter),
            Err(refused) => *refused,
        };
        let _ = tx.blocking_send(Msg::Approval(ApprovalEvent::Done(outcome)));
    })
}

/// How many times a passphrase may be chosen (as `proctor key generate`).
const ATTEMPTS: usize = 3;

/// The text of the demo key's offer (proctor's own words; the path is sanitised).
fn offer_text(key_path: &std::path::Path) -> String {
    format!(
        "\nA demo publish key — proctor demo\n\n\
         This is the demo's throwaway home, and it has no publish key yet: authorising the \
         publication needs one. proctor can create a demo key now:\n\
         \x20 key        {}\n\
         \x20 kind       Ed25519, encrypted (scrypt, AES-256) under a passphrase you choose now\n\
         \x20 passphrase at least {} characters, typed twice below, read only from this \
         terminal; nothing shows it, nothing else can supply it\n\
         \x20 server     registered with the demo's server as its first key\n\
         It lives in the throwaway home and goes away with it. Outside the demo, `proctor key \
         generate` makes a publish key.\n\n\
         Enter creates it and goes on to the approval; Esc refuses (nothing is made).\n",
        crate::text::one_line(&key_path.to_string_lossy(), 200),
        keys::MIN_PASSPHRASE_CHARS
    )
}

/// The demo's throwaway publish key: offered, its passphrase chosen in the dialog as
/// `proctor key generate` chooses it at the terminal (twice, at least 12 characters, three
/// attempts, the terminal rules checked before each answer), written at `key_path` (0600)
/// and registered with the server as its first key (an authority route: this process is the
/// proctor binary at its controlling terminal). A refusal says why; no receipt was reserved.
pub fn demo_key(
    client: &Client,
    key_path: &std::path::Path,
    prompter: &mut ModalPrompter,
) -> Result<(), Box<Outcome>> {
    let refused = |code: &str, message: String| {
        Box::new(Outcome::Refused {
            code: code.to_string(),
            message,
            receipt: None,
        })
    };
    let declined = |e: PromptError| match e {
        PromptError::Aborted => refused(
            "aborted",
            "no demo key was made, and no approval was opened. Outside the demo, `proctor key \
             generate` makes a publish key"
                .into(),
        ),
        other => refused(other.code(), other.to_string()),
    };
    prompter.show(&offer_text(key_path)).map_err(declined)?;
    prompter
        .ask(Field::Offer, "Create the demo key? ")
        .map_err(declined)?;
    let mut prompt = "New passphrase: ".to_string();
    let mut chosen = None;
    for _ in 0..ATTEMPTS {
        let first = prompter
            .ask(Field::NewPassphrase, &prompt)
            .map_err(declined)?;
        if keys::check_passphrase(first.as_bytes()).is_err() {
            prompt = format!(
                "(at least {} characters) New passphrase: ",
                keys::MIN_PASSPHRASE_CHARS
            );
            continue;
        }
        let second = prompter
            .ask(Field::NewPassphrase, "Passphrase again: ")
            .map_err(declined)?;
        if *first == *second {
            chosen = Some(first);
            break;
        }
        prompt = "(the two differed) New passphrase: ".to_string();
    }
    let Some(passphrase) = chosen else {
        return Err(refused(
            "no_passphrase",
            format!(
                "no passphrase chosen after {ATTEMPTS} attempts (too short, or the two entries \
                 differed); no demo key was made"
            ),
        ));
    };
    let _ = prompter.notice("deriving the key's encryption key (scrypt, about a second)…");
    let info = keys::generate(key_path, passphrase.as_bytes())
        .map_err(|e| refused("demo_key", format!("the demo key was not made: {e}")))?;
    drop(passphrase);
    let body = RegisterKeyRequest {
        public_key_b64: Some(info.public_key_b64.clone()),
        openssh: None,
        key_id: Some(info.key_id.clone()),
    };
    client
        .request_blocking::<_, RegisterKeyAnswer>(
            hyper::Method::POST,
            &crate::api::authority::keys(),
            Some(&body),
        )
        .map_err(|e| {
            refused(
                "demo_key_not_registered",
                format!(
                    "the demo key was made at {} but the server did not register it: {e}. \
                     Remedy: `proctor key register`, then approve again",
                    key_path.display()
                ),
            )
        })?;
    let _ = prompter.notice(&format!(
        "demo key registered: keyid={} {}",
        keys::KEY_ID_RECIPE,
        info.key_id
    ));
    Ok(())
}
