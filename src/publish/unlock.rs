//! Unlocking the publish key at the terminal, with the server's back-off after wrong
//! passphrases ([`crate::authority::passphrase`]). Every place proctor asks for a publish
//! key's passphrase goes through [`unlock`]: `proctor publish approve`, the cockpit's approval
//! dialog, and `proctor key register|revoke|rotate`.
//!
//! 1. The key id comes from the public line beside the key (no passphrase needed).
//! 2. The server's record for that key says how long to wait: the wait happens before the
//!    prompt is shown (the prompter is told why), so restarting the client gains nothing.
//! 3. The passphrase is read by the [`Prompter`] (the controlling terminal, or the cockpit's
//!    dialog under the same terminal rules) and the key decrypted.
//! 4. A wrong passphrase is reported (`POST …/passphrase/{key_id}/wrong`); a right one after
//!    failures is proved with a signature of the decrypted key and resets the record.

use std::path::Path;
use std::time::Duration;

use ed25519_dalek::SigningKey;

use super::approve::{PromptError, Prompter, Server, ServerError};
use crate::authority::keys::{self, KeyError};
use crate::authority::passphrase::{self, RecordView};
use crate::authority::views::RightRequest;
/// The client never waits longer than this in one go before asking the server again.
const MAX_ONE_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum UnlockError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("{message}")]
    Wrong { message: String },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(
        "the key at {path} decrypts to keyid={} {found}, but its public line names {claimed}: \
         the files were altered. Remedy: restore them from a copy you trust",
        keys::KEY_ID_RECIPE
    )]
    Mismatch {
        path: String,
        found: String,
        claimed: String,
    },
    #[error("the server's back-off record: {0}")]
    Server(#[from] ServerError),
}

impl UnlockError {
    /// The refusal code the approval flow records.
    pub fn code(&self) -> &'static str {
        match self {
            UnlockError::Prompt(p) => p.code(),
            UnlockError::Wrong { .. } => "wrong_passphrase",
            UnlockError::Key(_) | UnlockError::Mismatch { .. } => "key_unavailable",
            UnlockError::Server(_) => "server_answer",
        }
    }
}

/// The server's record for `key_id`.
pub fn server_record(server: &dyn Server, key_id: &str) -> Result<RecordView, ServerError> {
    server.passphrase_record(key_id)
}

fn secs(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.0} s", (ms as f64 / 1000.0).ceil())
    } else {
        format!("{ms} ms")
    }
}

/// Waits as the server's record says, asks for the passphrase of the key at `key_path` with
/// `prompt`, decrypts it and reports the outcome to the server.
pub fn unlock(
    server: &dyn Server,
    key_path: &Path,
    prompter: &mut dyn Prompter,
    prompt: &str,
) -> Result<SigningKey, UnlockError> {
    let claimed = keys::public_info(key_path)?.key_id;
    // Wait until the server's record lets a prompt be shown.
    let mut v = server_record(server, &claimed)?;
    let mut waited = 0u64;
    for _ in 0..8 {
        let left = v.remaining_ms;
        if left == 0 {
            break;
        }
        prompter.notice(&format!(
            "{} wrong passphrases in a row for this key: waiting {} before asking again (the \
             server records each wrong passphrase; a right one resets the count).\n",
            v.failures,
            secs(left)
        ))?;
        let d = Duration::from_millis(left).min(MAX_ONE_WAIT);
        std::thread::sleep(d);
        waited += d.as_millis() as u64;
        v = server_record(server, &claimed)?;
    }
    let record = v.record();
    let shown = if waited > 0 {
        format!(
            "{} (after {} wrong, waited {}): ",
            prompt.trim_end().trim_end_matches(':'),
            record.failures,
            secs(waited)
        )
    } else {
        prompt.to_string()
    };
    let passphrase = prompter.ask_passphrase(&shown)?;
    let key = match keys::load(key_path, passphrase.as_bytes()) {
        Ok(k) => k,
        Err(e @ KeyError::WrongPassphrase { .. }) => {
            drop(passphrase);
            let after = server.passphrase_wrong(&claimed);
            let message = match after {
                Ok(r) => {
                    let next = r.wait_ms;
                    format!(
                        "{e} (wrong passphrase {} in a row for this key; {})",
                        r.failures,
                        if next == 0 {
                            format!(
                                "after {} the next prompt waits, longer each time",
                                passphrase::FREE_ATTEMPTS
                            )
                        } else {
                            format!("the next prompt for it waits {}", secs(next))
                        }
                    )
                }
                Err(err) => format!("{e} (the server did not record it: {err})"),
            };
            return Err(UnlockError::Wrong { message });
        }
        Err(e) => return Err(e.into()),
    };
    drop(passphrase);
    let found = keys::key_id(&key.verifying_key());
    if found != claimed {
        return Err(UnlockError::Mismatch {
            path: key_path.display().to_string(),
            found,
            claimed,
        });
    }
    // The proof names the record it resets; another prompt may have counted a failure since
    // this one began (the server then says `stale_proof`): prove it again for the new record.
    let mut record = record;
    for round in 0..3 {
        if record.failures == 0 {
            break;
        }
        let proof = passphrase::sign_right(&key, &record);
        match server.passphrase_right(&claimed, &RightRequest { proof }) {
            Ok(_) => break,
            Err(ServerError::Refused { code, .. }) if code == "stale_proof" && round < 2 => {
                record = server_record(server, &claimed)?.record();
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(key)
}
