//! `proctor key generate|show|register|revoke|rotate`: the operator's publish keys.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::Method;
use serde::Serialize;

use super::{Ctx, print_json, show_path};
use ed25519_dalek::SigningKey;

use crate::api::authority::{
    self as wire, ChangeAnswer, ChangeRequest, RegisterKeyAnswer, RegisterKeyRequest, Registry,
};
use crate::authority::keychange::{self, Change};
use crate::authority::keys::{self, PublicInfo};
use crate::authority::sshsig;
use crate::authority::tty::Tty;
use crate::client::{self, Client};
use crate::publish::approve::{Prompter, TtyPrompter};
use crate::publish::unlock;
use crate::text;

/// What the server answered a registration: the first key's answer, or a signed change's.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum Registered {
    First(Box<RegisterKeyAnswer>),
    Change(Box<ChangeAnswer>),
}

impl Registered {
    /// The line for a first-key registration (`None` for a signed change).
    fn first_line(&self) -> Option<&'static str> {
        match self {
            Registered::First(v) => Some(registration_line(v)),
            Registered::Change(_) => None,
        }
    }
}

/// `key generate --json`.
#[derive(Serialize)]
struct GeneratedOut<'a> {
    path: &'a Path,
    public_path: PathBuf,
    key_id: &'a str,
    keyid: String,
    openssh: &'a str,
    server: Registered,
}

/// `key register --json`.
#[derive(Serialize)]
struct RegisteredOut<'a> {
    key_id: &'a str,
    keyid: String,
    signed_by: Option<String>,
    server: Registered,
}

/// `key revoke --json`.
#[derive(Serialize)]
struct RevokedOut {
    revoked: String,
    server: ChangeAnswer,
}

/// `key rotate --json`.
#[derive(Serialize)]
struct RotatedOut<'a> {
    key_id: &'a str,
    keyid: String,
    openssh: &'a str,
    path: &'a Path,
    revoked: &'a str,
    retired_path: PathBuf,
    server: ChangeAnswer,
}

/// How the key file is protected (`key show --json`).
#[derive(Serialize)]
struct Protection {
    format: &'static str,
    kdf: String,
    cipher: &'static str,
}

/// `key show --json`.
#[derive(Serialize)]
struct ShowOut<'a> {
    path: &'a Path,
    public_path: PathBuf,
    key_id: &'a str,
    recipe: &'a str,
    keyid: String,
    public_key_b64: &'a str,
    openssh: &'a str,
    allowed_signers: String,
    namespace: &'static str,
    protection: Protection,
    registered: Option<bool>,
    revoked_at: Option<String>,
    registration_error: Option<String>,
}

/// How many times a passphrase may be chosen before `generate` gives up.
const ATTEMPTS: usize = 3;

/// The publish key: the Ed25519 key that signs publication receipts, held by a person.
///
/// The key lives in <home config>/keys/publish.p8, an encrypted PKCS#8 v2 file (PEM
/// "ENCRYPTED PRIVATE KEY"): PBES2 with scrypt (N=2^17, r=8, p=1, random salt) and
/// AES-256-CBC (random IV), parameters fixed in proctor's code. Its OpenSSH public line is
/// beside it, in publish.pub. Both are 0600 in a 0700 folder; proctor refuses to load a key
/// file that group or others can access or that another user owns.
///
/// The passphrase is the only protection of the key. It is read from the controlling
/// terminal (/dev/tty) and from nowhere else: no option, environment variable, file, pipe or
/// askpass helper can supply it, so a process driving proctor through pipes cannot use the
/// key. After three wrong passphrases for a key, each next prompt waits longer (1 s doubling
/// to a minute), as the server records; a right one resets the count.
///
/// The server trusts the first key registered. Every later key, and every revocation, is a
/// change signed at the terminal by a registered key with its passphrase (`generate --path
/// NEW`, `register --signed-by`, `revoke`, `rotate`); the last key cannot be revoked, only
/// replaced. Pin your key in an allowed_signers file of your own, outside the proctor home,
/// to check receipts without trusting the home (docs/security.md).
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Generate a publish key and register its public half with the server.
    ///
    /// Asks for a passphrase (at least 12 characters) twice on the controlling terminal,
    /// with nothing echoed; Ctrl-C aborts. Writes the key (default <home config>/keys/
    /// publish.p8, with publish.pub beside it) and never overwrites an existing key. Then
    /// prints the key id and the OpenSSH public line, and registers the key with the server
    /// (needs an admin token held by a person).
    ///
    /// The server's FIRST key is registered as is. Once a key is registered, every new key
    /// must be signed by a registered key: give the new key its own --path and name the
    /// signing key with --signed-by (default: the home's publish.p8); its passphrase is asked
    /// first, and nothing is written when it is wrong. To replace the current key, use
    /// `proctor key rotate`.
    ///
    /// Exit codes: 0 generated (and registered); 1 refused (no controlling terminal, not
    /// the foreground job, aborted, passphrases that do not match, a key already there, a
    /// signature needed) or registration failed (the key is kept: run `proctor key register`).
    ///
    /// Examples:
    ///   proctor key generate                      (the first key)
    ///   proctor key generate --path ~/.config/proctor/keys/laptop.p8   (a second key, signed
    ///                                             by publish.p8)
    Generate {
        /// Where to write the new key (its .pub goes beside it).
        #[arg(long, value_name = "NEW")]
        path: Option<PathBuf>,
        /// The registered key that signs the new key's registration.
        #[arg(long, value_name = "OLD")]
        signed_by: Option<PathBuf>,
        /// Print JSON (the prompts still go to the terminal).
        #[arg(long)]
        json: bool,
    },
    /// Print the public key, its key id and whether the server trusts it.
    ///
    /// No passphrase needed. The key id is the SHA-256 of the key's DER
    /// SubjectPublicKeyInfo, printed with its recipe: `keyid=sha256-spki-der/1 <hex>`. The
    /// allowed_signers line is what `ssh-keygen -Y verify -I proctor -n proctor-receipt`
    /// needs to check a receipt's signature: pin it in a file of your own, outside the
    /// proctor home (see docs/security.md).
    ///
    /// Exit codes: 0 shown; 1 no key, or the key file breaks the file rules.
    ///
    /// Example: proctor key show --json
    Show {
        /// The key to show (default: the home's publish.p8).
        #[arg(long, value_name = "KEY")]
        path: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Register an existing key's public half with the server.
    ///
    /// Reads the key's .pub (default: the home's publish.pub). When the server has no key
    /// yet, it is registered as the first key, no passphrase needed. Otherwise the
    /// registration is a change signed at the terminal by a registered key (--signed-by,
    /// default: the home's publish.p8), whose passphrase is asked for. A key already
    /// registered is reported as such; a revoked key is never registered again.
    ///
    /// Exit codes: 0 registered or already known; 1 refused or failed.
    ///
    /// Examples: proctor key register
    ///           proctor key register --path NEW.p8 --signed-by OLD.p8
    Register {
        /// The key to register (default: the home's publish.p8).
        #[arg(long, value_name = "NEW")]
        path: Option<PathBuf>,
        /// The registered key that signs the registration.
        #[arg(long, value_name = "OLD")]
        signed_by: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a registered key: it then verifies no new authorisation or key change.
    ///
    /// KEY_ID is the key's id (64 hex digits, or a prefix of at least 8 that names one key;
    /// `GET /v1/m/authority/keys` or `proctor key show` lists them). The revocation is signed
    /// at the terminal by a registered key (--signed-by, default: the home's publish.p8);
    /// a key may sign its own revocation. The last registered key cannot be revoked: use
    /// `proctor key rotate`, which adds its replacement in the same signed change. Receipts
    /// the revoked key signed before stay checkable (`proctor receipt verify` says when the
    /// key was revoked).
    ///
    /// Exit codes: 0 revoked; 1 refused (unknown key, the last key, wrong passphrase…).
    ///
    /// Example: proctor key revoke 3f2a9c01
    Revoke {
        /// The key to revoke.
        key_id: String,
        /// The registered key that signs the revocation.
        #[arg(long, value_name = "OLD")]
        signed_by: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replace the home's publish key with a new one, in one signed change.
    ///
    /// Asks the current key's passphrase (to sign), then the new key's passphrase twice.
    /// Generates the new key, has the server add it and revoke the current key in one change
    /// signed by the current key, then keeps the current key as
    /// publish.<id>.retired.p8 (never deleted) and moves the new key to publish.p8. Nothing
    /// is changed on the server when a passphrase is wrong or the new one is refused.
    ///
    /// Exit codes: 0 rotated; 1 refused or failed (what was done is said).
    ///
    /// Example: proctor key rotate
    Rotate {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(ctx: &Ctx, args: KeyArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let default = keys::default_key_path(&home);
    match args.command {
        KeyCommand::Generate {
            path,
            signed_by,
            json,
        } => generate(&home, &default, path, signed_by, json),
        KeyCommand::Show { path, json } => show(&home, &path.unwrap_or(default), json),
        KeyCommand::Register {
            path,
            signed_by,
            json,
        } => register_cmd(&home, &default, path, signed_by, json),
        KeyCommand::Revoke {
            key_id,
            signed_by,
            json,
        } => revoke(&home, &default, &key_id, signed_by, json),
        KeyCommand::Rotate { json } => rotate(&home, &default, json),
    }
}

fn connect(home: &crate::home::Home) -> anyhow::Result<Client> {
    let client = Client::new(home)?;
    client::block_on(client.ensure_server(home))??;
    Ok(client.with_token(home)?)
}

fn registry(client: &Client) -> anyhow::Result<Registry> {
    client
        .get_blocking(&wire::keys())
        .context("reading the server's registered keys")
}

fn is_active(reg: &Registry, key_id: &str) -> bool {
    reg.active().any(|k| k.key_id == key_id)
}

fn register_first(client: &Client, info: &PublicInfo) -> anyhow::Result<RegisterKeyAnswer> {
    let body = RegisterKeyRequest {
        public_key_b64: Some(info.public_key_b64.clone()),
        openssh: None,
        key_id: Some(info.key_id.clone()),
    };
    client
        .request_blocking(Method::POST, &wire::keys(), Some(&body))
        .context("registering the public key with the server")
}

fn registration_line(v: &RegisterKeyAnswer) -> &'static str {
    if v.registered {
        "registered with the server"
    } else {
        "already registered with the server"
    }
}

/// Unlocks the signing key at the terminal (with the server's back-off).
fn unlock_signer(client: &Client, signer: &Path) -> anyhow::Result<SigningKey> {
    let mut prompter = TtyPrompter::new();
    prompter.notice(&format!(
        "The change is signed by the registered key at {}.\n",
        show_path(signer)
    ))?;
    let key = unlock::unlock(
        client,
        signer,
        &mut prompter,
        "Passphrase of the signing key: ",
    )?;
    Ok(key)
}

/// Signs `change` with `signer` for the registry's current generation and posts it.
fn post_change(
    client: &Client,
    change: &Change,
    signer: &SigningKey,
) -> anyhow::Result<ChangeAnswer> {
    let reg = registry(client)?;
    let (_, envelope) = keychange::sign(change, reg.generation, signer)?;
    client
        .request_blocking(
            Method::POST,
            &wire::changes(),
            Some(&ChangeRequest { envelope }),
        )
        .context("the server refused the signed key change")
}

/// The signing key: `--signed-by`, else the home's key unless it is the subject itself.
fn signer_path(signed_by: Option<PathBuf>, default: &Path, subject: &Path) -> Option<PathBuf> {
    signed_by.or_else(|| (subject != default && default.exists()).then(|| default.to_path_buf()))
}

fn need_signature(registered: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "{registered} publish key(s) are registered; a new key must be signed at the terminal by \
         one of them. Remedy: `proctor key generate --path NEW --signed-by OLD` (or `proctor \
         key register --path NEW --signed-by OLD` for a key that exists), or `proctor key \
         rotate` to replace the home's key; nothing was written"
    )
}

fn generate(
    home: &crate::home::Home,
    default: &Path,
    path: Option<PathBuf>,
    signed_by: Option<PathBuf>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let path = path.unwrap_or_else(|| default.to_path_buf());
    for p in [path.clone(), keys::public_path(&path)] {
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(keys::KeyError::Exists { path: p }.into());
        }
    }
    // The terminal first: without one, nothing else happens.
    let mut tty = Tty::open()?;
    let client = connect(home)?;
    let reg = registry(&client)?;
    let known = reg.items.len();
    let signer = if known == 0 {
        if signed_by.is_some() {
            anyhow::bail!(
                "no key is registered yet: the first key needs no signature. Remedy: run \
                 `proctor key generate` without --signed-by; nothing was written"
            );
        }
        None
    } else {
        let Some(sp) = signer_path(signed_by, default, &path) else {
            return Err(need_signature(reg.active().count()));
        };
        let signing = unlock_signer(&client, &sp)?;
        if !is_active(&reg, &keys::key_id(&signing.verifying_key())) {
            anyhow::bail!(
                "the key at {} is not a registered key (or it was revoked); it cannot sign. \
                 Nothing was written",
                show_path(&sp)
            );
        }
        Some(signing)
    };
    tty.write(&format!(
        "Generating the publish key at {}.\r\nIts passphrase (at least {} characters) is read \
         only from this terminal; nothing is echoed. Ctrl-C aborts.\r\n",
        show_path(&path),
        keys::MIN_PASSPHRASE_CHARS
    ))?;
    let passphrase = ask_new_passphrase(&mut tty)?;
    tty.write("Deriving the key encryption key (scrypt, about a second)…\r\n")?;
    drop(tty);
    let info = keys::generate(&path, passphrase.as_bytes())?;
    drop(passphrase);
    let kept = || {
        format!(
            "the key was generated and kept at {}; register it with `proctor key register \
             --path {}{}`",
            show_path(&path),
            show_path(&path),
            if known > 0 { " --signed-by OLD" } else { "" }
        )
    };
    let v = match &signer {
        None => Registered::First(Box::new(register_first(&client, &info).with_context(kept)?)),
        Some(k) => Registered::Change(Box::new(
            post_change(
                &client,
                &Change {
                    add: Some(info.verifying_key()?),
                    revoke: None,
                },
                k,
            )
            .with_context(kept)?,
        )),
    };
    if json_out {
        print_json(&GeneratedOut {
            path: &path,
            public_path: keys::public_path(&path),
            key_id: &info.key_id,
            keyid: info.key_id_line(),
            openssh: &info.openssh,
            server: v,
        })?;
    } else {
        println!("generated {}", show_path(&path));
        println!("{}", info.key_id_line());
        println!("{}", info.openssh);
        match &signer {
            None => println!("{}", v.first_line().unwrap_or_default()),
            Some(k) => println!(
                "registered with the server, signed by keyid={} {}",
                keys::KEY_ID_RECIPE,
                keys::key_id(&k.verifying_key())
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn register_cmd(
    home: &crate::home::Home,
    default: &Path,
    path: Option<PathBuf>,
    signed_by: Option<PathBuf>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let path = path.unwrap_or_else(|| default.to_path_buf());
    let info = keys::public_info(&path)?;
    let client = connect(home)?;
    let reg = registry(&client)?;
    let known = reg.items.len();
    let (v, signer) = if known == 0 || is_active(&reg, &info.key_id) {
        (
            Registered::First(Box::new(register_first(&client, &info)?)),
            None,
        )
    } else {
        let Some(sp) = signer_path(signed_by, default, &path) else {
            return Err(need_signature(reg.active().count()));
        };
        let signing = unlock_signer(&client, &sp)?;
        let v = post_change(
            &client,
            &Change {
                add: Some(info.verifying_key()?),
                revoke: None,
            },
            &signing,
        )?;
        (
            Registered::Change(Box::new(v)),
            Some(keys::key_id(&signing.verifying_key())),
        )
    };
    if json_out {
        print_json(&RegisteredOut {
            key_id: &info.key_id,
            keyid: info.key_id_line(),
            signed_by: signer,
            server: v,
        })?;
    } else {
        println!("{}", info.key_id_line());
        match &signer {
            None => println!("{}", v.first_line().unwrap_or_default()),
            Some(id) => println!(
                "registered with the server, signed by keyid={} {id}",
                keys::KEY_ID_RECIPE
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The one registered key `given` names (its id, or a prefix of at least 8 hex digits).
fn resolve_key_id(reg: &Registry, given: &str) -> anyhow::Result<String> {
    let given = given
        .trim()
        .strip_prefix(&format!("keyid={} ", keys::KEY_ID_RECIPE))
        .unwrap_or(given.trim())
        .to_ascii_lowercase();
    if given.len() < 8 || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!(
            "{:?} is not a key id: give its 64 hex digits, or a prefix of at least 8",
            text::one_line(&given, 80)
        );
    }
    let found: Vec<String> = reg
        .items
        .iter()
        .map(|k| k.key_id.as_str())
        .filter(|id| id.starts_with(&given))
        .map(str::to_string)
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!("no registered key has an id starting with {given}"),
        _ => anyhow::bail!(
            "{} registered keys have ids starting with {given}; give more digits",
            found.len()
        ),
    }
}

fn revoke(
    home: &crate::home::Home,
    default: &Path,
    key_id: &str,
    signed_by: Option<PathBuf>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let client = connect(home)?;
    let reg = registry(&client)?;
    let target = resolve_key_id(&reg, key_id)?;
    let signer = signed_by.unwrap_or_else(|| default.to_path_buf());
    let signing = unlock_signer(&client, &signer)?;
    let v = post_change(
        &client,
        &Change {
            add: None,
            revoke: Some(target.clone()),
        },
        &signing,
    )?;
    if json_out {
        print_json(&RevokedOut {
            revoked: target.clone(),
            server: v,
        })?;
    } else {
        println!(
            "revoked keyid={} {target}, signed by keyid={} {}",
            keys::KEY_ID_RECIPE,
            keys::KEY_ID_RECIPE,
            keys::key_id(&signing.verifying_key())
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn rotate(home: &crate::home::Home, current: &Path, json_out: bool) -> anyhow::Result<ExitCode> {
    let old = keys::public_info(current)?;
    let next = current.with_file_name(format!(
        "{}.next.p8",
        current
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "publish".into())
    ));
    for p in [next.clone(), keys::public_path(&next)] {
        if std::fs::symlink_metadata(&p).is_ok() {
            anyhow::bail!(
                "{} is there from an earlier rotation that did not finish. Remedy: `proctor key \
                 show --path {}` to see whether the server knows it; register it, or move it \
                 aside, then rotate again",
                show_path(&p),
                show_path(&next)
            );
        }
    }
    let mut tty = Tty::open()?;
    let client = connect(home)?;
    let reg = registry(&client)?;
    if !is_active(&reg, &old.key_id) {
        anyhow::bail!(
            "the key at {} ({}) is not registered with the server (or it was revoked); it \
             cannot sign its replacement. Remedy: `proctor key show`",
            show_path(current),
            old.key_id_line()
        );
    }
    let signing = unlock_signer(&client, current)?;
    tty.write(&format!(
        "The new key's passphrase (at least {} characters); nothing is echoed. Ctrl-C \
         aborts.\r\n",
        keys::MIN_PASSPHRASE_CHARS
    ))?;
    let passphrase = ask_new_passphrase(&mut tty)?;
    tty.write("Deriving the key encryption key (scrypt, about a second)…\r\n")?;
    drop(tty);
    let info = keys::generate(&next, passphrase.as_bytes())?;
    drop(passphrase);
    let v = post_change(
        &client,
        &Change {
            add: Some(info.verifying_key()?),
            revoke: Some(old.key_id.clone()),
        },
        &signing,
    )
    .with_context(|| {
        format!(
            "nothing changed on the server; the new key was kept at {} (move it aside, then \
             rotate again)",
            show_path(&next)
        )
    })?;
    let retired = keys::retire_and_promote(current, &next, &old.key_id).with_context(|| {
        format!(
            "the server now trusts {} and revoked {}, but the key files were not all moved: \
             the new key is at {} or {}",
            info.key_id_line(),
            old.key_id_line(),
            show_path(&next),
            show_path(current)
        )
    })?;
    if json_out {
        print_json(&RotatedOut {
            key_id: &info.key_id,
            keyid: info.key_id_line(),
            openssh: &info.openssh,
            path: current,
            revoked: &old.key_id,
            retired_path: retired.clone(),
            server: v,
        })?;
    } else {
        println!("rotated: {} is now the publish key", show_path(current));
        println!("{}", info.key_id_line());
        println!("{}", info.openssh);
        println!(
            "revoked {} (kept at {})",
            old.key_id_line(),
            show_path(&retired)
        );
        println!(
            "update the line in your own allowed_signers: {} {}",
            sshsig::PRINCIPAL,
            info.openssh
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn ask_new_passphrase(tty: &mut Tty) -> Result<zeroize::Zeroizing<String>, anyhow::Error> {
    for attempt in 1..=ATTEMPTS {
        let first = tty.read_secret("Passphrase: ")?;
        if first.is_empty() {
            tty.write("An empty passphrase is refused.\r\n")?;
            continue;
        }
        if let Err(e) = keys::check_passphrase(first.as_bytes()) {
            tty.write(&format!("{e}.\r\n"))?;
            continue;
        }
        let second = tty.read_secret("Passphrase again: ")?;
        if *first == *second {
            return Ok(first);
        }
        if attempt < ATTEMPTS {
            tty.write("The two passphrases differ; once more.\r\n")?;
        }
    }
    Err(anyhow::anyhow!(
        "no passphrase chosen after {ATTEMPTS} attempts (empty, too short, or the two entries \
         differed); nothing was written"
    ))
}

fn show(home: &crate::home::Home, path: &Path, json_out: bool) -> anyhow::Result<ExitCode> {
    let info = keys::public_info(path)?;
    let known = match connect(home).and_then(|c| Ok(c.get_blocking::<Registry>(&wire::keys())?)) {
        Ok(v) => Ok((
            is_active(&v, &info.key_id),
            v.find(&info.key_id).and_then(|k| k.revoked_at.clone()),
        )),
        Err(e) => Err(format!("{e:#}")),
    };
    let revoked_at = known.as_ref().ok().and_then(|(_, r)| r.clone());
    let known = known.map(|(a, _)| a);
    let allowed = format!("{} {}", sshsig::PRINCIPAL, info.openssh);
    if json_out {
        print_json(&ShowOut {
            path,
            public_path: keys::public_path(path),
            key_id: &info.key_id,
            recipe: info.recipe,
            keyid: info.key_id_line(),
            public_key_b64: &info.public_key_b64,
            openssh: &info.openssh,
            allowed_signers: allowed.clone(),
            namespace: sshsig::NAMESPACE,
            protection: Protection {
                format: "PKCS#8 v2 EncryptedPrivateKeyInfo, PEM",
                kdf: format!(
                    "scrypt N=2^{} r={} p={}",
                    keys::SCRYPT_LOG_N,
                    keys::SCRYPT_R,
                    keys::SCRYPT_P
                ),
                cipher: "AES-256-CBC",
            },
            registered: known.as_ref().ok().copied(),
            revoked_at: revoked_at.clone(),
            registration_error: known.as_ref().err().cloned(),
        })?;
    } else {
        println!(
            "key      {} (encrypted PKCS#8 v2; scrypt N=2^{} r={} p={}, AES-256-CBC)",
            show_path(path),
            keys::SCRYPT_LOG_N,
            keys::SCRYPT_R,
            keys::SCRYPT_P
        );
        println!("{}", info.key_id_line());
        println!("openssh  {}", info.openssh);
        println!(
            "allowed_signers line (for ssh-keygen -Y verify -I {} -n {}):",
            sshsig::PRINCIPAL,
            sshsig::NAMESPACE
        );
        println!("  {allowed}");
        match &known {
            Ok(true) => println!("server   registered"),
            Ok(false) => match &revoked_at {
                Some(at) => println!(
                    "server   REVOKED at {}; it signs nothing new",
                    text::one_line(at, 40)
                ),
                None => println!("server   NOT registered; run `proctor key register`"),
            },
            Err(e) => println!(
                "server   unknown (cannot ask it: {})",
                text::one_line(e, 200)
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
