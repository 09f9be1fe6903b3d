//! Publish keys for tests: each generated once per test binary (scrypt N=2^17 is slow on
//! purpose), then copied into a home's `config/keys` as the real files (0700 folder, 0600
//! files).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use proctor::authority::keys;

/// The encrypted key named `name` (`publish.p8`, `second.p8`, …) under `passphrase`,
/// generated on first use and kept for the whole test binary.
pub fn generated(name: &str, passphrase: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    static MADE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    let mut made = MADE.get_or_init(Default::default).lock().unwrap();
    made.entry(name.to_string())
        .or_insert_with(|| {
            let path = dir.path().join("keys").join(name);
            keys::generate(&path, passphrase.as_bytes()).unwrap();
            path
        })
        .clone()
}

/// Copies a key and its `.pub` into `home`'s `config/keys` as `as_name`; returns the new
/// key's path.
pub fn install(home: &Path, from: &Path, as_name: &str) -> PathBuf {
    let dir = home.join("config/keys");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let to = dir.join(as_name);
    for (f, t) in [
        (from.to_path_buf(), to.clone()),
        (keys::public_path(from), keys::public_path(&to)),
    ] {
        std::fs::copy(&f, &t).unwrap();
        std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    to
}
