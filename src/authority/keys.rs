//! The publish key: a dedicated Ed25519 key, encrypted at rest under the operator's
//! passphrase.
//!
//! Format (`config/keys/publish.p8`): PEM `ENCRYPTED PRIVATE KEY` (RFC 7468) holding a PKCS#8
//! `EncryptedPrivateKeyInfo` (RFC 5208/5958). The encryption is PBES2 (RFC 8018) with scrypt
//! (RFC 7914) as the key derivation, N = 2^17, r = 8, p = 1, a random 16-byte salt, and
//! AES-256-CBC with a random 16-byte IV. Inside is a version-2 `OneAsymmetricKey` (RFC 5958):
//! the Ed25519 seed (RFC 8410) and the public key embedded. `openssl asn1parse -in
//! publish.p8` shows the structure and its parameters. (`openssl pkey` refuses to decrypt it
//! by default: OpenSSL caps scrypt at 32 MiB, and N=2^17, r=8 needs 128 MiB.)
//!
//! The parameters are constants here. A file that names any other KDF, cipher or scrypt
//! parameters is refused before anything is derived, so nothing can lower them (and a file
//! with huge parameters cannot make proctor allocate without bound).
//!
//! Beside it, `publish.pub` holds the OpenSSH public line (`ssh-ed25519 AAAA… proctor`), the
//! form an `allowed_signers` file and `ssh-keygen -Y verify` use.
//!
//! File rules: both are created 0600 in a 0700 folder, written to a temporary name, fsync'd
//! and linked into place (a link never replaces an existing file, so an existing key is never
//! overwritten). Loading refuses a key file that another user owns or that group or others
//! may access at all, naming the path and the remedy; it refuses a key whose embedded public
//! key does not match its private key; it says plainly when the passphrase is wrong.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, KeypairBytes};
use ed25519_dalek::{SigningKey, VerifyingKey};
use pkcs8::pkcs5::pbes2;
use pkcs8::{EncryptedPrivateKeyInfo, LineEnding, PrivateKeyInfo};
use serde::Serialize;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::files::{self, FilesError};
use crate::home::Home;

/// log2 of scrypt's cost parameter N (N = 131072).
pub const SCRYPT_LOG_N: u8 = 17;
/// scrypt's block size r.
pub const SCRYPT_R: u32 = 8;
/// scrypt's parallelisation p.
pub const SCRYPT_P: u32 = 1;
/// Salt length in bytes.
pub const SALT_LEN: usize = 16;
/// The shortest passphrase `generate` accepts, in characters.
pub const MIN_PASSPHRASE_CHARS: usize = 12;
/// How the key id is computed: SHA-256 of the DER SubjectPublicKeyInfo, lowercase hex.
pub const KEY_ID_RECIPE: &str = "sha256-spki-der/1";
/// The comment of the OpenSSH public line.
pub const OPENSSH_COMMENT: &str = "proctor";
/// PEM label of the key file.
pub const PEM_LABEL: &str = "ENCRYPTED PRIVATE KEY";
/// The longest key file accepted, in bytes (a real one is about 400).
const MAX_KEY_FILE: u64 = 16 * 1024;

/// The key file of a home: `config/keys/publish.p8` (its public line is `publish.pub`).
pub fn default_key_path(home: &Home) -> PathBuf {
    home.config.join("keys").join("publish.p8")
}

/// The OpenSSH public line beside a key file (`publish.p8` → `publish.pub`).
pub fn public_path(key_path: &Path) -> PathBuf {
    key_path.with_extension("pub")
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{path} already exists; proctor never overwrites a key. Remedy: keep using it \
         (`proctor key show`), or move it aside yourself if you really mean to replace it"
    )]
    Exists { path: PathBuf },
    #[error("no key at {path}. Remedy: `proctor key generate`")]
    NotFound { path: PathBuf },
    #[error(
        "{path} can be accessed by group or others (mode {mode:04o}); a key file must be \
         private to you. Remedy: `chmod 600 {path}` (and consider the key exposed if others \
         could have copied it)"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error(
        "{path} is owned by uid {uid}, not by you (uid {me}); proctor loads only a key you own. \
         Remedy: `chown {me} {path}` if it is yours, or generate your own key"
    )]
    Foreign { path: PathBuf, uid: u32, me: u32 },
    #[error("wrong passphrase for {path}")]
    WrongPassphrase { path: PathBuf },
    #[error(
        "{path} is protected with {found}; proctor accepts only PBES2 with scrypt \
         (N=2^{SCRYPT_LOG_N}, r={SCRYPT_R}, p={SCRYPT_P}) and AES-256-CBC. Remedy: generate a \
         new key with `proctor key generate`"
    )]
    WeakParameters { path: PathBuf, found: String },
    #[error(
        "{path}: the public key embedded in the key file does not match its private key; the \
         file was altered. Remedy: restore it from a copy you trust, or generate a new key"
    )]
    PublicKeyMismatch { path: PathBuf },
    #[error("{path} is not a proctor key file ({reason})")]
    Malformed { path: PathBuf, reason: String },
    #[error("the passphrase is too short: at least {min} characters")]
    ShortPassphrase { min: usize },
    #[error("cannot {op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("random bytes: {0}")]
    Random(String),
    #[error("encoding the key: {0}")]
    Encode(String),
}

/// The public half of a key, as proctor shows and registers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublicInfo {
    /// SHA-256 of the DER SubjectPublicKeyInfo, lowercase hex.
    pub key_id: String,
    /// [`KEY_ID_RECIPE`].
    pub recipe: &'static str,
    /// The raw 32-byte Ed25519 public key, standard base64.
    pub public_key_b64: String,
    /// `ssh-ed25519 AAAA… proctor`.
    pub openssh: String,
}

impl PublicInfo {
    pub fn of(key: &VerifyingKey) -> PublicInfo {
        PublicInfo {
            key_id: key_id(key),
            recipe: KEY_ID_RECIPE,
            public_key_b64: base64::engine::general_purpose::STANDARD.encode(key.as_bytes()),
            openssh: openssh_line(key),
        }
    }

    /// The key back from `public_key_b64`.
    pub fn verifying_key(&self) -> Result<VerifyingKey, KeyError> {
        verifying_key_from_b64(&self.public_key_b64).map_err(|reason| KeyError::Malformed {
            path: PathBuf::from("<public key>"),
            reason,
        })
    }

    /// `keyid=sha256-spki-der/1 <hex>`: the id with its recipe.
    pub fn key_id_line(&self) -> String {
        format!("keyid={} {}", self.recipe, self.key_id)
    }
}

/// A public key from its standard-base64 raw 32 bytes.
pub fn verifying_key_from_b64(b64: &str) -> Result<VerifyingKey, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("bad base64: {e}"))?;
    let bytes: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| format!("an Ed25519 public key is 32 bytes, not {}", raw.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an Ed25519 point: {e}"))
}

/// The DER SubjectPublicKeyInfo of an Ed25519 key (RFC 8410).
pub fn spki_der(key: &VerifyingKey) -> Vec<u8> {
    match key.to_public_key_der() {
        Ok(doc) => doc.as_bytes().to_vec(),
        // Encoding a fixed-size key cannot fail; keep the fixed prefix as the fallback.
        Err(_) => {
            let mut v = vec![
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
            ];
            v.extend_from_slice(key.as_bytes());
            v
        }
    }
}

/// SHA-256 of the SPKI DER, lowercase hex (recipe [`KEY_ID_RECIPE`]).
pub fn key_id(key: &VerifyingKey) -> String {
    hex::encode(Sha256::digest(spki_der(key)))
}

/// The SSH wire blob of an Ed25519 public key: string "ssh-ed25519", string key.
pub fn ssh_public_blob(key: &VerifyingKey) -> Vec<u8> {
    let mut v = Vec::with_capacity(51);
    put_ssh_string(&mut v, b"ssh-ed25519");
    put_ssh_string(&mut v, key.as_bytes());
    v
}

pub(crate) fn put_ssh_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s);
}

/// `ssh-ed25519 <base64 blob> proctor`.
pub fn openssh_line(key: &VerifyingKey) -> String {
    format!(
        "ssh-ed25519 {} {OPENSSH_COMMENT}",
        base64::engine::general_purpose::STANDARD.encode(ssh_public_blob(key))
    )
}

/// Parses an OpenSSH `ssh-ed25519 AAAA… [comment]` line.
pub fn parse_openssh_line(line: &str) -> Result<VerifyingKey, String> {
    let mut parts = line.split_ascii_whitespace();
    if parts.next() != Some("ssh-ed25519") {
        return Err("not an ssh-ed25519 public line".into());
    }
    let blob = base64::engine::general_purpose::STANDARD
        .decode(parts.next().ok_or("the key blob is missing")?)
        .map_err(|e| format!("bad base64: {e}"))?;
    let mut expected = Vec::new();
    put_ssh_string(&mut expected, b"ssh-ed25519");
    let key = blob
        .strip_prefix(expected.as_slice())
        .and_then(|rest| rest.strip_prefix(&32u32.to_be_bytes()[..]))
        .ok_or("the blob is not an ssh-ed25519 key")?;
    let bytes: [u8; 32] = key
        .try_into()
        .map_err(|_| "the blob has trailing bytes".to_string())?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an Ed25519 point: {e}"))
}

fn scrypt_params() -> Result<pkcs8::pkcs5::scrypt::Params, KeyError> {
    pkcs8::pkcs5::scrypt::Params::new(SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P, 32)
        .map_err(|e| KeyError::Encode(e.to_string()))
}

fn random<const N: usize>() -> Result<Zeroizing<[u8; N]>, KeyError> {
    let mut b = Zeroizing::new([0u8; N]);
    getrandom::fill(b.as_mut()).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(b)
}

/// Checks a passphrase against the minimum length.
pub fn check_passphrase(passphrase: &[u8]) -> Result<(), KeyError> {
    let chars = String::from_utf8_lossy(passphrase).chars().count();
    if chars < MIN_PASSPHRASE_CHARS {
        return Err(KeyError::ShortPassphrase {
            min: MIN_PASSPHRASE_CHARS,
        });
    }
    Ok(())
}

/// The encrypted PEM of `key` under `passphrase`, with the fixed parameters.
pub fn encrypt_pem(key: &SigningKey, passphrase: &[u8]) -> Result<Zeroizing<String>, KeyError> {
    let enc = |e: pkcs8::Error| KeyError::Encode(e.to_string());
    // KeypairBytes from a SigningKey carries the public key: a v2 OneAsymmetricKey.
    let mut pair = KeypairBytes::from(key);
    let plain = pair.to_pkcs8_der();
    // KeypairBytes does not wipe itself (the ed25519 crate's zeroize feature is off).
    zeroize::Zeroize::zeroize(&mut pair.secret_key);
    let plain = plain.map_err(enc)?;
    let info = PrivateKeyInfo::try_from(plain.as_bytes()).map_err(enc)?;
    if info.public_key.is_none() {
        return Err(KeyError::Encode("the public key was not embedded".into()));
    }
    let salt = random::<SALT_LEN>()?;
    let iv = random::<16>()?;
    let params = pbes2::Parameters::scrypt_aes256cbc(scrypt_params()?, salt.as_ref(), &iv)
        .map_err(|e| KeyError::Encode(e.to_string()))?;
    let doc = info.encrypt_with_params(params, passphrase).map_err(enc)?;
    let pem = doc
        .to_pem(PEM_LABEL, LineEnding::LF)
        .map_err(|e| KeyError::Encode(e.to_string()))?;
    Ok(pem)
}

/// Generates a new key at `path` (and its public line beside it) under `passphrase`.
/// Refuses if either file exists. The folder is created 0700.
pub fn generate(path: &Path, passphrase: &[u8]) -> Result<PublicInfo, KeyError> {
    check_passphrase(passphrase)?;
    let pub_path = public_path(path);
    for p in [path, pub_path.as_path()] {
        if fs::symlink_metadata(p).is_ok() {
            return Err(KeyError::Exists {
                path: p.to_path_buf(),
            });
        }
    }
    files::ensure_private_dir(&files::parent_of(path))?;
    let seed = random::<32>()?;
    let key = SigningKey::from_bytes(&seed);
    let pem = encrypt_pem(&key, passphrase)?;
    let info = PublicInfo::of(&key.verifying_key());
    write_new(path, pem.as_bytes())?;
    write_new(&pub_path, format!("{}\n", info.openssh).as_bytes())?;
    Ok(info)
}

/// Writes a new private file without ever replacing one: temp file (O_EXCL, 0600), fsync,
/// hard link to the final name (fails if it exists), unlink the temp, fsync the folder.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), KeyError> {
    let dir = files::parent_of(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let nonce = random::<8>()?;
    let tmp = dir.join(format!(
        ".{}.new.{}.{}",
        name.unwrap_or_default(),
        std::process::id(),
        hex::encode(nonce.as_ref())
    ));
    let result = (|| {
        let mut f = files::create_private_new(&tmp)?;
        f.write_all(bytes).map_err(|err| KeyError::Io {
            op: "write",
            path: tmp.clone(),
            err,
        })?;
        f.sync_all().map_err(|err| KeyError::Io {
            op: "fsync",
            path: tmp.clone(),
            err,
        })?;
        drop(f);
        fs::hard_link(&tmp, path).map_err(|err| {
            if err.kind() == std::io::ErrorKind::AlreadyExists {
                KeyError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                KeyError::Io {
                    op: "link into place",
                    path: path.to_path_buf(),
                    err,
                }
            }
        })
    })();
    let _ = fs::remove_file(&tmp);
    result?;
    files::fsync_dir(&dir)?;
    Ok(())
}

/// After a rotation: keeps the retired key pair under `<stem>.<first 16 hex of its id>.retired.p8`
/// (and `.pub`), linked without replacing anything, then moves the new pair into the retired
/// pair's names. Returns where the retired key now is.
pub fn retire_and_promote(
    current: &Path,
    next: &Path,
    retired_id: &str,
) -> Result<PathBuf, KeyError> {
    let stem = current
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "publish".into());
    let short: String = retired_id.chars().take(16).collect();
    let archive = current.with_file_name(format!("{stem}.{short}.retired.p8"));
    let link = |from: &Path, to: &Path| {
        fs::hard_link(from, to).map_err(|err| {
            if err.kind() == std::io::ErrorKind::AlreadyExists {
                KeyError::Exists {
                    path: to.to_path_buf(),
                }
            } else {
                KeyError::Io {
                    op: "link",
                    path: to.to_path_buf(),
                    err,
                }
            }
        })
    };
    link(current, &archive)?;
    link(&public_path(current), &public_path(&archive))?;
    let rename = |from: &Path, to: &Path| {
        fs::rename(from, to).map_err(|err| KeyError::Io {
            op: "move into place",
            path: to.to_path_buf(),
            err,
        })
    };
    // The retired pair is kept under its archive name: replacing its old names loses nothing.
    rename(&public_path(next), &public_path(current))?;
    rename(next, current)?;
    files::fsync_dir(&files::parent_of(current))?;
    Ok(archive)
}

/// Opens a file of the key pair after the ownership and mode checks, and reads it (bounded).
fn read_checked(path: &Path) -> Result<Vec<u8>, KeyError> {
    let mut f = match files::open_private_read(path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(KeyError::NotFound {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let meta = f.metadata().map_err(|err| KeyError::Io {
        op: "inspect",
        path: path.to_path_buf(),
        err,
    })?;
    let me = files::my_uid();
    if meta.uid() != me {
        return Err(KeyError::Foreign {
            path: path.to_path_buf(),
            uid: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut f)
        .take(MAX_KEY_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| KeyError::Io {
            op: "read",
            path: path.to_path_buf(),
            err,
        })?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(KeyError::Malformed {
            path: path.to_path_buf(),
            reason: format!("larger than {MAX_KEY_FILE} bytes"),
        });
    }
    Ok(bytes)
}

/// Describes PBES2 parameters, and whether they are exactly proctor's.
fn judge_parameters(scheme: &pkcs8::pkcs5::EncryptionScheme<'_>) -> Result<(), String> {
    let pbes2::Parameters { kdf, encryption } = match scheme {
        pkcs8::pkcs5::EncryptionScheme::Pbes2(p) => p,
        _ => return Err("PBES1 (a legacy scheme)".into()),
    };
    let cipher = match encryption {
        pbes2::EncryptionScheme::Aes256Cbc { .. } => "AES-256-CBC",
        pbes2::EncryptionScheme::Aes192Cbc { .. } => "AES-192-CBC",
        pbes2::EncryptionScheme::Aes128Cbc { .. } => "AES-128-CBC",
        _ => "another cipher",
    };
    let Some(s) = kdf.scrypt() else {
        return Err(format!("PBKDF2 and {cipher}"));
    };
    let found = format!(
        "scrypt (N={}, r={}, p={}, salt {} bytes) and {cipher}",
        s.cost_parameter,
        s.block_size,
        s.parallelization,
        s.salt.len()
    );
    let exact = s.cost_parameter == 1u64 << SCRYPT_LOG_N
        && u32::from(s.block_size) == SCRYPT_R
        && u32::from(s.parallelization) == SCRYPT_P
        && s.salt.len() >= SALT_LEN
        && s.key_length.is_none_or(|l| l == 32)
        && cipher == "AES-256-CBC";
    if exact { Ok(()) } else { Err(found) }
}

fn parse_pem(path: &Path, bytes: &[u8]) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let malformed = |reason: String| KeyError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let (label, der) = pkcs8::der::pem::decode_vec(bytes).map_err(|e| malformed(e.to_string()))?;
    if label != PEM_LABEL {
        return Err(malformed(format!(
            "PEM label {label:?}, expected {PEM_LABEL:?}"
        )));
    }
    Ok(Zeroizing::new(der))
}

/// Loads and decrypts the key at `path`. Refuses a file another user owns or that group or
/// others may access, a file whose protection is not exactly proctor's, a wrong passphrase,
/// and an embedded public key that does not match.
pub fn load(path: &Path, passphrase: &[u8]) -> Result<SigningKey, KeyError> {
    files::check_dir_is_private(&files::parent_of(path))?;
    let bytes = read_checked(path)?;
    let der = parse_pem(path, &bytes)?;
    let malformed = |reason: String| KeyError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let info =
        EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| malformed(e.to_string()))?;
    judge_parameters(&info.encryption_algorithm).map_err(|found| KeyError::WeakParameters {
        path: path.to_path_buf(),
        found,
    })?;
    // A wrong passphrase yields a bad CBC padding, or (rarely) garbage that is not DER.
    let wrong = || KeyError::WrongPassphrase {
        path: path.to_path_buf(),
    };
    let plain = info.decrypt(passphrase).map_err(|_| wrong())?;
    let mut pair = KeypairBytes::from_pkcs8_der(plain.as_bytes()).map_err(|_| wrong())?;
    let key = SigningKey::from_bytes(&pair.secret_key);
    zeroize::Zeroize::zeroize(&mut pair.secret_key);
    let Some(embedded) = pair.public_key.as_ref() else {
        return Err(malformed(
            "no embedded public key (PKCS#8 v1); proctor writes v2".into(),
        ));
    };
    if key.verifying_key().as_bytes() != embedded.as_ref() {
        return Err(KeyError::PublicKeyMismatch {
            path: path.to_path_buf(),
        });
    }
    Ok(key)
}

/// The public half, read from the `.pub` line beside the key (no passphrase needed). The key
/// file itself must exist and pass the file rules; the line is checked against the private
/// key when the key is loaded, not here.
pub fn public_info(path: &Path) -> Result<PublicInfo, KeyError> {
    read_checked(path)?;
    let pub_path = public_path(path);
    let line = read_checked(&pub_path)?;
    let line = String::from_utf8(line).map_err(|_| KeyError::Malformed {
        path: pub_path.clone(),
        reason: "not UTF-8".into(),
    })?;
    let key = parse_openssh_line(line.trim()).map_err(|reason| KeyError::Malformed {
        path: pub_path.clone(),
        reason,
    })?;
    Ok(PublicInfo::of(&key))
}

/// The server's registry of publish keys it trusts: `data/keys.json` (0600, replaced
/// atomically, written only by the server).
pub fn registry_path(home: &Home) -> PathBuf {
    home.data.join("keys.json")
}

/// One registered key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RegisteredKey {
    pub key_id: String,
    pub recipe: String,
    pub public_key_b64: String,
    pub openssh: String,
    pub registered_at: String,
    /// The token id that registered it.
    pub by: String,
    /// The key id whose signed change registered it (`null` for the first key).
    #[serde(default)]
    pub signed_by: Option<String>,
    /// When a signed change revoked it: it no longer verifies new authorisations (`null`
    /// while active).
    #[serde(default)]
    pub revoked_at: Option<String>,
    /// The key id whose signed change revoked it.
    #[serde(default)]
    pub revoked_signed_by: Option<String>,
}

impl RegisteredKey {
    pub fn verifying_key(&self) -> Result<VerifyingKey, KeyError> {
        verifying_key_from_b64(&self.public_key_b64).map_err(|reason| KeyError::Malformed {
            path: PathBuf::from("keys.json"),
            reason,
        })
    }

    /// True while no signed change has revoked it.
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// The registry: every key ever registered (revoked ones stay, marked), and its generation,
/// which every change advances (a signed change names the generation it applies to, so it
/// applies once).
#[derive(Debug, Default, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Registry {
    #[serde(default)]
    pub generation: u64,
    pub items: Vec<RegisteredKey>,
}

impl Registry {
    /// The keys no change has revoked.
    pub fn active(&self) -> impl Iterator<Item = &RegisteredKey> {
        self.items.iter().filter(|k| k.is_active())
    }

    pub fn find(&self, key_id: &str) -> Option<&RegisteredKey> {
        self.items.iter().find(|k| k.key_id == key_id)
    }

    /// A new record for `key`.
    pub fn record_for(key: &VerifyingKey, by: &str, at: &str) -> RegisteredKey {
        let info = PublicInfo::of(key);
        RegisteredKey {
            key_id: info.key_id,
            recipe: info.recipe.to_string(),
            public_key_b64: info.public_key_b64,
            openssh: info.openssh,
            registered_at: at.to_string(),
            by: by.to_string(),
            signed_by: None,
            revoked_at: None,
            revoked_signed_by: None,
        }
    }
}

/// Runs `f` on the registry under `lock` (the server's registry lock, held in its state, which
/// serialises every read-modify-write); writes it back when `f` says it changed.
pub(crate) fn with_registry<T, E: From<KeyError>>(
    home: &Home,
    lock: &std::sync::Mutex<()>,
    f: impl FnOnce(&mut Registry) -> Result<(T, bool), E>,
) -> Result<T, E> {
    let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
    let mut reg = read_registry(home)?;
    let (out, changed) = f(&mut reg)?;
    if changed {
        let path = registry_path(home);
        files::ensure_private_dir(&files::parent_of(&path)).map_err(KeyError::from)?;
        let bytes = serde_json::to_vec_pretty(&reg).map_err(|e| KeyError::Encode(e.to_string()))?;
        files::write_atomic(&path, &bytes).map_err(KeyError::from)?;
    }
    Ok(out)
}

/// The registry as it is on disk (empty when there is none).
pub fn read_registry(home: &Home) -> Result<Registry, KeyError> {
    let path = registry_path(home);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Registry::default()),
        Err(err) => {
            return Err(KeyError::Io {
                op: "read",
                path,
                err,
            });
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| KeyError::Malformed {
        path,
        reason: e.to_string(),
    })
}

/// Every key ever registered, revoked ones included (anyone may read them).
pub fn registered(home: &Home) -> Result<Vec<RegisteredKey>, KeyError> {
    Ok(read_registry(home)?.items)
}

/// The keys a new authorisation, key change or receipt signature may be made with: the
/// registered keys no signed change has revoked.
pub fn trusted_keys(home: &Home) -> Result<Vec<VerifyingKey>, KeyError> {
    read_registry(home)?
        .active()
        .map(RegisteredKey::verifying_key)
        .collect()
}

/// The keys a receipt written in the past may be checked against: every key ever registered,
/// revoked ones included (with their record, so the verifier can say when one was revoked).
pub fn receipt_keys(home: &Home) -> Result<Vec<(VerifyingKey, RegisteredKey)>, KeyError> {
    read_registry(home)?
        .items
        .into_iter()
        .map(|k| Ok((k.verifying_key()?, k)))
        .collect()
}

/// Why an unsigned registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum FirstKeyError {
    #[error(
        "a publish key is already registered ({registered}); every later key must be signed \
         at the terminal by a registered key. Remedy: `proctor key register --path NEW \
         --signed-by OLD` (or `proctor key rotate` to replace the current key)"
    )]
    SignatureNeeded { registered: String },
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// Registers `key` as the registry's first key (server side), unsigned. Returns the record
/// and whether it is new; a key already registered and active changes nothing. Refused once
/// the registry holds any key (active or revoked): later keys come through a signed change
/// ([`crate::authority::keychange`]). `lock` serialises the registry's read-modify-write.
pub fn register_first(
    home: &Home,
    lock: &std::sync::Mutex<()>,
    key: &VerifyingKey,
    by: &str,
    at: &str,
) -> Result<(RegisteredKey, bool), FirstKeyError> {
    with_registry(home, lock, |reg| {
        let id = key_id(key);
        if let Some(existing) = reg.find(&id).filter(|k| k.is_active()) {
            return Ok(((existing.clone(), false), false));
        }
        if !reg.items.is_empty() {
            let ids: Vec<String> = reg
                .active()
                .map(|k| format!("keyid={} {}", k.recipe, k.key_id))
                .collect();
            return Err(FirstKeyError::SignatureNeeded {
                registered: if ids.is_empty() {
                    "every registered key is revoked".into()
                } else {
                    ids.join(", ")
                },
            });
        }
        let record = Registry::record_for(key, by, at);
        reg.items.push(record.clone());
        reg.generation += 1;
        Ok(((record, true), true))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const PASS: &[u8] = b"correct horse battery staple";

    fn key_dir() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("keys").join("publish.p8");
        (t, p)
    }

    /// One generation, then every load-side rule on copies of that file (each decryption
    /// costs one scrypt derivation, so the test keeps their number small: three).
    #[test]
    fn generate_then_load_with_every_refusal() {
        let (t, path) = key_dir();
        let info = generate(&path, PASS).unwrap();
        assert_eq!(info.recipe, KEY_ID_RECIPE);
        assert_eq!(info.key_id.len(), 64);
        let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&public_path(&path)), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let pem = fs::read_to_string(&path).unwrap();
        assert!(
            pem.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"),
            "{pem}"
        );

        // The public line needs no passphrase and agrees with the key.
        assert_eq!(public_info(&path).unwrap(), info);

        // Never overwritten.
        assert!(matches!(
            generate(&path, PASS).unwrap_err(),
            KeyError::Exists { .. }
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), pem);

        // Derivation 1: the right passphrase.
        let key = load(&path, PASS).unwrap();
        assert_eq!(PublicInfo::of(&key.verifying_key()), info);

        // Derivation 2: a wrong passphrase, said plainly.
        let e = load(&path, b"not the passphrase at all").unwrap_err();
        assert!(matches!(e, KeyError::WrongPassphrase { .. }), "{e}");
        assert!(e.to_string().contains("wrong passphrase"), "{e}");

        // Group- or other-readable: refused by name with the remedy, before any derivation.
        for m in [0o640, 0o604, 0o660] {
            fs::set_permissions(&path, fs::Permissions::from_mode(m)).unwrap();
            let e = load(&path, PASS).unwrap_err();
            assert!(matches!(e, KeyError::Exposed { .. }), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("chmod 600 {}", path.display())),
                "{msg}"
            );
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();

        // Owned by another user (only root can arrange that).
        if files::my_uid() == 0 {
            let other = t.path().join("keys").join("other.p8");
            fs::copy(&path, &other).unwrap();
            fs::set_permissions(&other, fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&other, Some(65534), None).unwrap();
            let e = load(&other, PASS).unwrap_err();
            assert!(matches!(e, KeyError::Foreign { uid: 65534, .. }), "{e}");
            assert!(e.to_string().contains(&other.display().to_string()));
        }

        // Derivation 3: a valid encryption of a v2 key whose embedded public key is another
        // key's: refused as altered.
        let victim = SigningKey::from_bytes(&[7u8; 32]);
        let other = SigningKey::from_bytes(&[9u8; 32]);
        let pair = KeypairBytes {
            secret_key: victim.to_bytes(),
            public_key: Some(ed25519_dalek::pkcs8::PublicKeyBytes(
                other.verifying_key().to_bytes(),
            )),
        };
        let plain = pair.to_pkcs8_der().unwrap();
        let pki = PrivateKeyInfo::try_from(plain.as_bytes()).unwrap();
        let (salt, iv) = ([1u8; 16], [2u8; 16]);
        let params =
            pbes2::Parameters::scrypt_aes256cbc(scrypt_params().unwrap(), &salt, &iv).unwrap();
        let doc = pki.encrypt_with_params(params, PASS).unwrap();
        let altered = t.path().join("keys").join("altered.p8");
        write_new(
            &altered,
            doc.to_pem(PEM_LABEL, LineEnding::LF).unwrap().as_bytes(),
        )
        .unwrap();
        let e = load(&altered, PASS).unwrap_err();
        assert!(matches!(e, KeyError::PublicKeyMismatch { .. }), "{e}");
    }

    /// Files protected with weaker (or merely different) parameters are refused before any
    /// derivation: cheap parameters here, so this test costs nothing.
    #[test]
    fn weaker_parameters_are_refused() {
        let (_t, path) = key_dir();
        files::ensure_private_dir(path.parent().unwrap()).unwrap();
        let key = SigningKey::from_bytes(&[5u8; 32]);
        let plain = KeypairBytes::from(&key).to_pkcs8_der().unwrap();
        let pki = PrivateKeyInfo::try_from(plain.as_bytes()).unwrap();
        let (salt, iv) = ([1u8; 16], [2u8; 16]);
        let cases: Vec<(&str, pbes2::Parameters<'_>)> = vec![
            (
                "N=1024",
                pbes2::Parameters::scrypt_aes256cbc(
                    pkcs8::pkcs5::scrypt::Params::new(10, 8, 1, 32).unwrap(),
                    &salt,
                    &iv,
                )
                .unwrap(),
            ),
            (
                "r=4",
                pbes2::Parameters::scrypt_aes256cbc(
                    pkcs8::pkcs5::scrypt::Params::new(17, 4, 1, 32).unwrap(),
                    &salt,
                    &iv,
                )
                .unwrap(),
            ),
            (
                "AES-128-CBC",
                pbes2::Parameters::scrypt_aes128cbc(scrypt_params().unwrap(), &salt, &iv).unwrap(),
            ),
            (
                "PBKDF2",
                pbes2::Parameters::pbkdf2_sha256_aes256cbc(1000, &salt, &iv).unwrap(),
            ),
        ];
        for (i, (what, params)) in cases.into_iter().enumerate() {
            let doc = pki.encrypt_with_params(params, PASS).unwrap();
            let p = path.with_file_name(format!("weak{i}.p8"));
            write_new(
                &p,
                doc.to_pem(PEM_LABEL, LineEnding::LF).unwrap().as_bytes(),
            )
            .unwrap();
            let e = load(&p, PASS).unwrap_err();
            assert!(matches!(e, KeyError::WeakParameters { .. }), "{what}: {e}");
            assert!(e.to_string().contains(what), "{what}: {e}");
        }
    }

    #[test]
    fn short_passphrase_is_refused_and_nothing_written() {
        let (_t, path) = key_dir();
        let e = generate(&path, b"short").unwrap_err();
        assert!(matches!(e, KeyError::ShortPassphrase { min: 12 }), "{e}");
        assert!(!path.exists());
    }

    #[test]
    fn key_id_is_sha256_of_spki_der_and_openssh_line_round_trips() {
        // RFC 8032 test 1 public key.
        let pk: [u8; 32] =
            hex::decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
                .unwrap()
                .try_into()
                .unwrap();
        let vk = VerifyingKey::from_bytes(&pk).unwrap();
        let spki = spki_der(&vk);
        assert_eq!(
            hex::encode(&spki[..12]),
            "302a300506032b6570032100",
            "RFC 8410 SPKI prefix"
        );
        assert_eq!(key_id(&vk), hex::encode(Sha256::digest(&spki)));
        let line = openssh_line(&vk);
        assert!(
            line.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"),
            "{line}"
        );
        assert!(line.ends_with(" proctor"));
        assert_eq!(parse_openssh_line(&line).unwrap(), vk);
        let info = PublicInfo::of(&vk);
        assert_eq!(info.verifying_key().unwrap(), vk);
        assert!(info.key_id_line().starts_with("keyid=sha256-spki-der/1 "));
    }
}
