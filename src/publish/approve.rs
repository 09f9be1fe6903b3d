//! The approval flow: one library function, [`run`], that `proctor publish approve` drives
//! with a [`TtyPrompter`] and the cockpit's modal drives with its own [`Prompter`].
//!
//! In order, each step refusing on its own (see `docs/publish.md`):
//!
//! 1. Open an approval on the server: it reserves the receipt file (a receipt saying
//!    "incomplete" is there from now on, whatever happens to this process).
//! 2. Ask the server to check: it re-reads the remote branch's tip (the lease), re-derives the
//!    candidate's identity from its worktree, re-evaluates the gate and rebuilds the commit.
//!    If anything moved it refuses, says what, and writes a redacted receipt.
//! 3. Show every field that came from the forge, the remote or the agent, through
//!    [`crate::text`], each on bounded lines.
//! 4. The operator types the full revision; it is compared exactly.
//! 5. The passphrase, masked, from the controlling terminal only.
//! 6. Only then: decrypt the key, mint the authorisation in memory, have the server verify
//!    and append it to the ledger (fsync), spend it once (the server runs the adapter), sign
//!    the receipt's statement (DSSE + SSHSIG) and have the server write it.
//!
//! Every return after step 1 leaves a receipt; every refusal is an [`Outcome::Refused`] that
//! names itself (the CLI exits 1), never a silent success.
//!
//! The flow reaches the server only through a [`Server`] (declared here, in `publish`'s own
//! types; the client implements it), so `publish` does not depend on the faces. [`run`] is
//! synchronous: call it from a plain thread, not from inside an async runtime (the client's
//! implementation makes its own small runtime per call).

use std::path::Path;

use base64::Engine;
use zeroize::Zeroizing;

use super::authorisation::{self, Grant};
use super::forge::PullRequest;
use super::receipt;
pub use super::views::{CheckView, ReceiptRef};
use super::views::{
    EnvelopeRequest, MintedAnswer, OpenedApproval, ReceiptRequest, RefusalAnswer, RefusalRequest,
    SignedReceipt, SpendAnswer,
};
use crate::authority::keys;
use crate::authority::passphrase::RecordView;
use crate::authority::tty::{Tty, TtyError};
use crate::authority::views::RightRequest;
use crate::authority::{dsse, sshsig};
use crate::text;

/// Width of one displayed field.
pub const FIELD_WIDTH: usize = 100;
/// Lines of the body shown before the approval.
pub const BODY_LINES: usize = 12;

/// Why a prompt gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// No controlling terminal, not a terminal, or not its foreground job.
    #[error("{0}")]
    NoTerminal(String),
    /// The operator pressed Ctrl-C (or Ctrl-D) at the prompt.
    #[error("aborted at the prompt (Ctrl-C)")]
    Aborted,
    #[error("the prompt failed: {0}")]
    Failed(String),
    /// Something tried to supply an answer another way (words on the command line). The
    /// offered words are never read, shown or recorded.
    #[error(
        "{0} extra command-line word(s) were given to approve and ignored: the revision and \
         the passphrase are read only from a person at the controlling terminal; no option, \
         argument, variable, file or pipe can supply them. Run `proctor publish approve \
         INTENT` alone, at a terminal"
    )]
    Offered(usize),
}

impl PromptError {
    pub fn code(&self) -> &'static str {
        match self {
            PromptError::NoTerminal(_) => "no_terminal",
            PromptError::Aborted => "aborted",
            PromptError::Failed(_) => "prompt_failed",
            PromptError::Offered(_) => "answer_offered_outside_the_terminal",
        }
    }
}

impl From<TtyError> for PromptError {
    fn from(e: TtyError) -> Self {
        match e {
            TtyError::NoControllingTerminal
            | TtyError::NotATty
            | TtyError::NotForeground { .. } => PromptError::NoTerminal(e.to_string()),
            TtyError::Aborted => PromptError::Aborted,
            other => PromptError::Failed(other.to_string()),
        }
    }
}

/// Why the server gave no usable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServerError {
    /// The server refused, with its code and sentence.
    #[error("the server answered {status}: {message}")]
    Refused {
        status: String,
        code: String,
        message: String,
    },
    /// The answer does not match the contract (a different build).
    #[error("{0}")]
    Answer(String),
    /// The server could not be reached.
    #[error("{0}")]
    Unreachable(String),
}

/// The calls the approval flow and [`super::unlock`] make to the server (the routes of
/// `docs/api.md`, "Publish" and "Authority"), in `publish`'s and `authority`'s own types. The
/// client (`crate::client::Client`) implements it; a test may too.
pub trait Server {
    /// `POST /v1/m/publish/intents/{intent}/approvals`.
    fn open_approval(&self, intent: &str) -> Result<OpenedApproval, ServerError>;
    /// `POST /v1/m/publish/approvals/{approval}/check`.
    fn check_approval(&self, approval: &str) -> Result<CheckView, ServerError>;
    /// `POST /v1/m/publish/approvals/{approval}/refusal`.
    fn refuse_approval(
        &self,
        approval: &str,
        req: &RefusalRequest,
    ) -> Result<RefusalAnswer, ServerError>;
    /// `POST /v1/m/publish/approvals/{approval}/authorisation`.
    fn authorise(&self, approval: &str, req: &EnvelopeRequest)
    -> Result<MintedAnswer, ServerError>;
    /// `POST /v1/m/publish/approvals/{approval}/spend`.
    fn spend(&self, approval: &str, req: &EnvelopeRequest) -> Result<SpendAnswer, ServerError>;
    /// `POST /v1/m/publish/approvals/{approval}/receipt`.
    fn sign_receipt(
        &self,
        approval: &str,
        req: &ReceiptRequest,
    ) -> Result<SignedReceipt, ServerError>;
    /// `GET /v1/m/authority/passphrase/{key_id}`.
    fn passphrase_record(&self, key_id: &str) -> Result<RecordView, ServerError>;
    /// `POST /v1/m/authority/passphrase/{key_id}/wrong`.
    fn passphrase_wrong(&self, key_id: &str) -> Result<RecordView, ServerError>;
    /// `POST /v1/m/authority/passphrase/{key_id}/right`.
    fn passphrase_right(&self, key_id: &str, req: &RightRequest)
    -> Result<RecordView, ServerError>;
}

/// Where the approval meets a person. Implementations read answers only from a person at
/// the controlling terminal (the CLI's [`TtyPrompter`]) or from key presses in the cockpit's
/// modal; never from an option, a variable, a file or a pipe.
pub trait Prompter {
    /// Shows text that [`display`] built (already sanitised).
    fn show(&mut self, text: &str) -> Result<(), PromptError>;
    /// Reads the revision the operator types (echoed).
    fn ask_revision(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError>;
    /// Reads the passphrase (masked).
    fn ask_passphrase(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError>;
    /// A short notice of proctor's own text (the wait after wrong passphrases): the CLI writes
    /// it to the terminal, the cockpit's dialog shows it as its note. By default, nothing.
    fn notice(&mut self, _text: &str) -> Result<(), PromptError> {
        Ok(())
    }
}

/// The CLI's prompter: `/dev/tty`, opened at the first use (so that its refusal happens
/// after the receipt was reserved, and is recorded in it).
#[derive(Debug, Default)]
pub struct TtyPrompter {
    tty: Option<Tty>,
}

impl TtyPrompter {
    pub fn new() -> TtyPrompter {
        TtyPrompter::default()
    }

    fn tty(&mut self) -> Result<&mut Tty, PromptError> {
        if self.tty.is_none() {
            self.tty = Some(Tty::open()?);
        }
        self.tty
            .as_mut()
            .ok_or_else(|| PromptError::Failed("no terminal".into()))
    }
}

impl Prompter for TtyPrompter {
    fn show(&mut self, text: &str) -> Result<(), PromptError> {
        Ok(self.tty()?.write(&text.replace('\n', "\r\n"))?)
    }
    fn ask_revision(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        Ok(self.tty()?.read_line(prompt)?)
    }
    fn ask_passphrase(&mut self, prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        Ok(self.tty()?.read_secret(prompt)?)
    }
    fn notice(&mut self, text: &str) -> Result<(), PromptError> {
        Ok(self.tty()?.write(&text.replace('\n', "\r\n"))?)
    }
}

/// The prompter of an approval that was offered answers on its command line: it refuses at
/// its first use (after the receipt was reserved, so the refusal is recorded in it).
#[derive(Debug)]
pub struct OfferedPrompter {
    words: usize,
}

impl OfferedPrompter {
    pub fn new(words: usize) -> OfferedPrompter {
        OfferedPrompter { words }
    }
}

impl Prompter for OfferedPrompter {
    fn show(&mut self, _text: &str) -> Result<(), PromptError> {
        Err(PromptError::Offered(self.words))
    }
    fn ask_revision(&mut self, _prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        Err(PromptError::Offered(self.words))
    }
    fn ask_passphrase(&mut self, _prompt: &str) -> Result<Zeroizing<String>, PromptError> {
        Err(PromptError::Offered(self.words))
    }
}

/// How an approval ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Pushed, and the pull request is open.
    Published {
        intent: String,
        revision: String,
        branch: String,
        pull_request: PullRequest,
        receipt: ReceiptRef,
    },
    /// Refused (or failed) and named; `receipt` is absent only when nothing was reserved.
    Refused {
        code: String,
        message: String,
        receipt: Option<ReceiptRef>,
    },
}

impl Outcome {
    /// 0 when published with a signed receipt, 1 otherwise (a publication whose receipt
    /// could not be signed is not a clean success: the CLI says so).
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Published { receipt, .. } if receipt.signed => 0,
            _ => 1,
        }
    }
}

fn field(label: &str, value: &str) -> String {
    format!("  {label:<10} {}\n", text::one_line(value, FIELD_WIDTH))
}

fn tip(t: &Option<String>) -> String {
    t.clone()
        .unwrap_or_else(|| "absent (the branch must not exist)".into())
}

/// The text shown before the revision prompt. Every value that came from the agent, the
/// repository, the remote or the forge goes through [`crate::text`] with bounded width.
pub fn display(v: &CheckView) -> String {
    let i = &v.intent;
    let mut s = String::new();
    s.push_str(&format!(
        "\nPublication intent {} — {}\n",
        text::one_line(&i.id, 20),
        i.state.label()
    ));
    s.push_str(&field("run", &i.run));
    s.push_str(&field("candidate", &i.candidate.id));
    // Ids and digests are proctor's own hex: shown whole, never cut.
    s.push_str(&format!(
        "  identity   {}\n",
        text::one_line(
            &crate::candidate::render_digest(&i.candidate.digest),
            usize::MAX
        )
    ));
    s.push_str(&field(
        "gate",
        &format!(
            "{} ({} evidence passed; passing checks are not approval)",
            v.gate_state,
            v.evidence.len()
        ),
    ));
    s.push_str(&format!(
        "  revision   {}\n",
        text::one_line(&i.revision, usize::MAX)
    ));
    s.push_str(&format!(
        "  commit     tree {} on {}\n",
        text::one_line(&i.commit.tree, usize::MAX),
        text::one_line(&i.commit.parent, usize::MAX)
    ));
    s.push_str(&field(
        "author",
        &format!(
            "{} <{}> at {}",
            i.commit.author_name, i.commit.author_email, i.commit.date
        ),
    ));
    s.push_str(&field("title", &i.title));
    s.push_str(&field("branch", &i.branch));
    s.push_str(&field(
        "remote",
        &format!("{} {}", i.remote.name, i.remote.url),
    ));
    s.push_str(&field(
        "lease",
        &format!(
            "expected {}; now {}",
            tip(&i.expected_tip),
            tip(&v.remote_tip)
        ),
    ));
    s.push_str(&field(
        "forge",
        &format!(
            "{} {}/{}: pull request {} -> {}",
            i.forge.api_base, i.forge.owner, i.forge.repo, i.branch, i.forge.base
        ),
    ));
    let body = text::multi_line_capped(&i.body, FIELD_WIDTH);
    let lines: Vec<&str> = body.lines().collect();
    if lines.is_empty() {
        s.push_str("  body       (empty)\n");
    } else {
        s.push_str("  body\n");
        for l in lines.iter().take(BODY_LINES) {
            s.push_str(&format!("    | {l}\n"));
        }
        if lines.len() > BODY_LINES {
            s.push_str(&format!(
                "    ({} more lines not shown)\n",
                lines.len() - BODY_LINES
            ));
        }
    }
    s.push_str(
        "\nIf you authorise, proctor will (1) move the local branch to the revision, (2) push \
         it with the lease above, (3) open the pull request. It cannot merge anything.\n\
         Type the full revision to authorise; Ctrl-C refuses.\n",
    );
    s
}

fn refused_by(e: ServerError, receipt: Option<ReceiptRef>) -> Outcome {
    let (code, message) = match &e {
        ServerError::Refused { code, message, .. } => (
            if code.is_empty() {
                "refused".to_string()
            } else {
                code.clone()
            },
            message.clone(),
        ),
        ServerError::Answer(m) => ("server_answer".to_string(), m.clone()),
        other => ("server_unreachable".to_string(), other.to_string()),
    };
    Outcome::Refused {
        code,
        message,
        receipt,
    }
}

/// Records a refusal that happened here (at the terminal) and returns it.
fn refuse_here(
    server: &dyn Server,
    approval: &str,
    code: &str,
    message: String,
    receipt: ReceiptRef,
) -> Outcome {
    let req = RefusalRequest {
        code: code.to_string(),
        message: message.clone(),
    };
    let receipt = match server.refuse_approval(approval, &req) {
        Ok(answer) => answer.receipt,
        Err(_) => receipt,
    };
    Outcome::Refused {
        code: code.to_string(),
        message,
        receipt: Some(receipt),
    }
}

/// Runs the approval of `intent` (see the module doc). `key_path` is the operator's
/// encrypted publish key.
pub fn run(
    server: &dyn Server,
    key_path: &Path,
    intent: &str,
    prompter: &mut dyn Prompter,
) -> Outcome {
    // 1. Open: the receipt is reserved from here on.
    let opened = match server.open_approval(intent) {
        Ok(v) => v,
        Err(e) => return refused_by(e, None),
    };
    let approval = opened.approval;
    let receipt = opened.receipt;

    // 2. The server re-reads the remote and re-derives the candidate.
    let view = match server.check_approval(&approval) {
        Ok(v) => v,
        Err(ServerError::Answer(e)) => {
            return refuse_here(
                server,
                &approval,
                "server_answer",
                format!("the server's check cannot be read: {e}"),
                receipt,
            );
        }
        Err(e) => return refused_by(e, Some(receipt)),
    };

    // 3. Show what came from the agent, the remote and the forge, sanitised.
    if let Err(e) = prompter.show(&display(&view)) {
        return refuse_here(server, &approval, e.code(), e.to_string(), receipt);
    }

    // 4. The full revision, typed, compared exactly.
    let typed = match prompter.ask_revision("Revision: ") {
        Ok(t) => t,
        Err(e) => return refuse_here(server, &approval, e.code(), e.to_string(), receipt),
    };
    let revision = view.intent.revision.clone();
    if typed.as_str() != revision {
        return refuse_here(
            server,
            &approval,
            "wrong_revision",
            "the revision typed is not the intent's revision (compared exactly, all of it); \
             nothing was done"
                .into(),
            receipt,
        );
    }
    drop(typed);

    // 5. The passphrase, masked, from the terminal only (after the wait the server's record
    //    of wrong passphrases asks for), and 6. only now the key.
    let key = match super::unlock::unlock(
        server,
        key_path,
        prompter,
        "Passphrase for the publish key: ",
    ) {
        Ok(k) => k,
        Err(e) => return refuse_here(server, &approval, e.code(), e.to_string(), receipt),
    };
    let key_id = keys::key_id(&key.verifying_key());
    if !view.key_ids.iter().any(|k| k == &key_id) {
        return refuse_here(
            server,
            &approval,
            "key_not_registered",
            format!(
                "the server does not trust this key (keyid={} {key_id}): it is not \
                 registered, or a signed change revoked it. Remedy: `proctor key show` says \
                 which; register it (`proctor key register`), or use a key that is registered",
                keys::KEY_ID_RECIPE
            ),
            receipt,
        );
    }
    let grant = Grant {
        approval: approval.clone(),
        intent: view.intent.id.clone(),
        revision: revision.clone(),
        identity: view.intent.candidate.digest.clone(),
        ledger_head: view.ledger_head.clone(),
    };
    let envelope = match authorisation::mint(&grant, &key) {
        Ok((_, env)) => env,
        Err(e) => return refuse_here(server, &approval, "mint_failed", e.to_string(), receipt),
    };
    let req = EnvelopeRequest { envelope };
    if let Err(e) = server.authorise(&approval, &req) {
        return refused_by(e, Some(receipt));
    }
    let spent = match server.spend(&approval, &req) {
        Ok(v) => v,
        Err(e) => return refused_by(e, Some(receipt)),
    };

    // The receipt: the server's statement, signed here with the person's key.
    let receipt = sign_receipt(server, &approval, &spent, &key, &key_id).unwrap_or(receipt);
    if spent.outcome == receipt::Outcome::Published
        && let Some(pr) = spent.effects.pull_request.clone()
    {
        return Outcome::Published {
            intent: view.intent.id.clone(),
            revision,
            branch: view.intent.branch.clone(),
            pull_request: pr,
            receipt,
        };
    }
    let (code, message) = match spent.error {
        Some(f) => (f.code, f.message),
        None => (
            "failed".to_string(),
            "the adapter did not finish".to_string(),
        ),
    };
    Outcome::Refused {
        code,
        message,
        receipt: Some(receipt),
    }
}

/// Signs the statement the server wrote (DSSE over the PAE, SSHSIG over the file bytes) and
/// has the server replace the unsigned receipt with it.
fn sign_receipt(
    server: &dyn Server,
    approval: &str,
    answer: &SpendAnswer,
    key: &ed25519_dalek::SigningKey,
    key_id: &str,
) -> Option<ReceiptRef> {
    let payload = base64::engine::general_purpose::STANDARD
        .decode(answer.statement_b64.as_deref()?)
        .ok()?;
    let envelope = dsse::sign(dsse::PAYLOAD_TYPE, &payload, key, key_id);
    let bytes = receipt::file_bytes(&envelope);
    let sig = sshsig::sign(&bytes, key);
    let req = ReceiptRequest {
        envelope_json: String::from_utf8(bytes).ok()?,
        sshsig: sig,
    };
    server
        .sign_receipt(approval, &req)
        .ok()
        .map(|signed| signed.receipt)
}
