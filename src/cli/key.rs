//! `proctor key generate|show|register`: the operator's publish key.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::Method;
use serde_json::{Value, json};

use super::{Ctx, print_json, show_path};
use crate::authority::keys::{self, PublicInfo};
use crate::authority::sshsig;
use crate::authority::tty::Tty;
use crate::client::{self, Client};
use crate::text;

const KEYS_ROUTE: &str = "/v1/m/authority/keys";
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
/// key.
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Generate the publish key and register its public half with the server.
    ///
    /// Asks for a passphrase (at least 12 characters) twice on the controlling terminal,
    /// with nothing echoed; Ctrl-C aborts. Writes publish.p8 and publish.pub under
    /// <home config>/keys/ and never overwrites an existing key. Then prints the key id and
    /// the OpenSSH public line, and registers the key with the server
    /// (POST /v1/m/authority/keys; needs an admin token held by a person).
    ///
    /// Exit codes: 0 generated (and registered); 1 refused (no controlling terminal, not
    /// the foreground job, aborted, passphrases that do not match, a key already there) or
    /// registration failed (the key is kept: run `proctor key register`).
    ///
    /// Example: proctor key generate
    Generate,
    /// Print the public key, its key id and whether the server knows it.
    ///
    /// No passphrase needed. The key id is the SHA-256 of the key's DER
    /// SubjectPublicKeyInfo, printed with its recipe: `keyid=sha256-spki-der/1 <hex>`. The
    /// allowed_signers line is what `ssh-keygen -Y verify -I proctor -n proctor-receipt`
    /// needs to check a receipt's signature.
    ///
    /// Exit codes: 0 shown; 1 no key, or the key file breaks the file rules.
    ///
    /// Example: proctor key show --json
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Register the existing key's public half with the server.
    ///
    /// For when registration failed at generation, or the server's data was reset. Reads
    /// publish.pub (no passphrase needed) and posts it to POST /v1/m/authority/keys (admin,
    /// person). Prints the key id and whether it was new.
    ///
    /// Exit codes: 0 registered or already known; 1 refused or failed.
    ///
    /// Example: proctor key register
    Register,
}

pub fn run(ctx: &Ctx, args: KeyArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let path = keys::default_key_path(&home);
    match args.command {
        KeyCommand::Generate => generate(&home, &path),
        KeyCommand::Show { json } => show(&home, &path, json),
        KeyCommand::Register => {
            let info = keys::public_info(&path)?;
            let client = connect(&home)?;
            let v = register(&client, &info)?;
            println!("{}", info.key_id_line());
            println!("{}", registration_line(&v));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn connect(home: &crate::home::Home) -> anyhow::Result<Client> {
    let client = Client::new(home)?;
    client::block_on(client.ensure_server(home))??;
    Ok(client.with_token(home)?)
}

fn register(client: &Client, info: &PublicInfo) -> anyhow::Result<Value> {
    let body = json!({"public_key_b64": info.public_key_b64, "key_id": info.key_id});
    let v = client::block_on(client.call(Method::POST, KEYS_ROUTE, Some(body)))?
        .context("registering the public key with the server")?;
    Ok(v)
}

fn registration_line(v: &Value) -> &'static str {
    if v["registered"] == json!(true) {
        "registered with the server"
    } else {
        "already registered with the server"
    }
}

fn generate(home: &crate::home::Home, path: &Path) -> anyhow::Result<ExitCode> {
    for p in [path.to_path_buf(), keys::public_path(path)] {
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(keys::KeyError::Exists { path: p }.into());
        }
    }
    // The terminal first: without one, nothing else happens.
    let mut tty = Tty::open()?;
    let client = connect(home)?;
    tty.write(&format!(
        "Generating the publish key at {}.\r\nIts passphrase (at least {} characters) is read \
         only from this terminal; nothing is echoed. Ctrl-C aborts.\r\n",
        show_path(path),
        keys::MIN_PASSPHRASE_CHARS
    ))?;
    let passphrase = ask_new_passphrase(&mut tty)?;
    tty.write("Deriving the key encryption key (scrypt, about a second)…\r\n")?;
    drop(tty);
    let info = keys::generate(path, passphrase.as_bytes())?;
    drop(passphrase);
    println!("generated {}", show_path(path));
    println!("{}", info.key_id_line());
    println!("{}", info.openssh);
    let v = register(&client, &info).with_context(|| {
        format!(
            "the key was generated and kept at {}; register it with `proctor key register`",
            show_path(path)
        )
    })?;
    println!("{}", registration_line(&v));
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
    let known = match connect(home).and_then(|c| {
        let v = client::block_on(c.call(Method::GET, KEYS_ROUTE, None))??;
        Ok(v)
    }) {
        Ok(v) => Ok(v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|k| k["key_id"].as_str() == Some(info.key_id.as_str()))),
        Err(e) => Err(format!("{e:#}")),
    };
    let allowed = format!("{} {}", sshsig::PRINCIPAL, info.openssh);
    if json_out {
        print_json(&json!({
            "path": path,
            "public_path": keys::public_path(path),
            "key_id": info.key_id,
            "recipe": info.recipe,
            "keyid": info.key_id_line(),
            "public_key_b64": info.public_key_b64,
            "openssh": info.openssh,
            "allowed_signers": allowed,
            "namespace": sshsig::NAMESPACE,
            "protection": {
                "format": "PKCS#8 v2 EncryptedPrivateKeyInfo, PEM",
                "kdf": format!("scrypt N=2^{} r={} p={}", keys::SCRYPT_LOG_N, keys::SCRYPT_R, keys::SCRYPT_P),
                "cipher": "AES-256-CBC",
            },
            "registered": known.as_ref().ok(),
            "registration_error": known.as_ref().err(),
        }))?;
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
            Ok(false) => println!("server   NOT registered; run `proctor key register`"),
            Err(e) => println!(
                "server   unknown (cannot ask it: {})",
                text::one_line(e, 200)
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
