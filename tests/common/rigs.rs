//! The shared rig image fixture: ONE image per machine, built with the real
//! `proctor rig image build` into `$XDG_CACHE_HOME|$HOME/.cache/proctor-ci/rig-image/<key>/`
//! (the key: the recipe's own inputs, so a changed guest init builds anew), under a flock so
//! parallel tests wait for the one build; installed into a test home by hard links under
//! `data/rigs/images/<hex>/` and made current there.
#![allow(dead_code)]

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `$XDG_CACHE_HOME/proctor-ci/rig-image` (or `$HOME/.cache/…`).
pub fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache")
        });
    base.join("proctor-ci").join("rig-image")
}

/// The cache's proctor home for this recipe.
fn cache_home() -> PathBuf {
    let key = proctor::rigs::image::recipe_key();
    cache_root().join(&key[..16]).join("home")
}

/// The built image's folder in the cache (built now if it is not there; waits for a
/// parallel build).
pub fn built_image() -> PathBuf {
    let root = cache_root();
    std::fs::create_dir_all(&root).unwrap();
    let key = proctor::rigs::image::recipe_key();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(format!("{}.lock", &key[..16])))
        .unwrap();
    // SAFETY: flock on an open file; released when `lock` is dropped.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock the image cache");
    let home = cache_home();
    let images = home.join("data/rigs/images");
    if let Ok(hex) = std::fs::read_to_string(images.join("current")) {
        let dir = images.join(hex.trim());
        if dir.join("manifest.json").is_file() && dir.join("base.img").is_file() {
            return dir;
        }
    }
    std::fs::create_dir_all(home.parent().unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .env_remove("PROCTOR_HOME")
        .arg("--home")
        .arg(&home)
        .args(["rig", "image", "build", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "proctor rig image build failed ({:?}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = std::fs::read_to_string(images.join("current")).unwrap();
    images.join(hex.trim())
}

/// Installs the machine's image into the home at `home` (hard links; a copy across file
/// systems) and makes it current there. Returns the image's folder in that home.
pub fn install_image(home: &Path) -> PathBuf {
    let src = built_image();
    let hex = src.file_name().unwrap().to_str().unwrap().to_string();
    let images = home.join("data/rigs/images");
    for d in [
        home.to_path_buf(),
        home.join("data"),
        home.join("data/rigs"),
        images.clone(),
    ] {
        if !d.exists() {
            std::fs::create_dir(&d).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let dst = images.join(&hex);
    if !dst.exists() {
        let linked = Command::new("cp")
            .arg("-al")
            .arg(&src)
            .arg(&dst)
            .status()
            .unwrap()
            .success();
        if !linked {
            let _ = std::fs::remove_dir_all(&dst);
            assert!(
                Command::new("cp")
                    .arg("-a")
                    .arg(&src)
                    .arg(&dst)
                    .status()
                    .unwrap()
                    .success(),
                "copy the rig image into {}",
                dst.display()
            );
        }
    }
    std::fs::write(images.join("current"), format!("{hex}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            images.join("current"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    dst
}

/// A rig's route: `/v1/m/rigs/<id><tail>`.
pub fn rig_path(id: &str, tail: &str) -> String {
    format!("/v1/m/rigs/{id}{tail}")
}

/// Opens a rig through the API and waits until it runs (or panics with its record).
pub fn open_running(s: &super::DemoServer, body: serde_json::Value) -> String {
    let v = s.expect(201, "POST", "/v1/m/rigs", Some(body));
    let id = v["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let v = s.expect(200, "GET", &rig_path(&id, ""), None);
        if v["state"] == "running" {
            return id;
        }
        assert!(v["state"] != "closed", "{id} closed while booting: {v}");
        assert!(
            std::time::Instant::now() < deadline,
            "{id} did not start: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A write token with an agent principal, created by the owner; its secret.
pub fn agent_token(s: &super::DemoServer, name: &str) -> String {
    agent_token_in(&s.home, name)
}

/// [`agent_token`] in a test home.
pub fn agent_token_in(h: &super::TestHome, name: &str) -> String {
    h.json(&[
        "token",
        "create",
        "--role",
        "write",
        "--name",
        name,
        "--principal",
        "agent",
        "--json",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string()
}
