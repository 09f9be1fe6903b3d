//! `proctor home`: resolution order, privacy checks and exit codes, through the real binary.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn proctor() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_proctor"));
    c.env_remove("PROCTOR_HOME");
    c
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

#[test]
fn flag_beats_env_and_env_beats_xdg() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");

    let v = json(
        &proctor()
            .args(["home", "--json"])
            .env("PROCTOR_HOME", &b)
            .output()
            .unwrap(),
    );
    assert_eq!(v["source"], "env");
    assert_eq!(v["root"], b.to_str().unwrap());

    let v = json(
        &proctor()
            .args(["--home", a.to_str().unwrap(), "home", "--json"])
            .env("PROCTOR_HOME", &b)
            .output()
            .unwrap(),
    );
    assert_eq!(v["source"], "flag");
    assert_eq!(v["ledger"], a.join("data/ledger.jsonl").to_str().unwrap());

    let xdg = t.path().join("xdg");
    let v = json(
        &proctor()
            .args(["home", "--json"])
            .env("HOME", t.path())
            .env("XDG_DATA_HOME", xdg.join("data"))
            .env("XDG_STATE_HOME", xdg.join("state"))
            .env("XDG_CONFIG_HOME", xdg.join("config"))
            .env("XDG_RUNTIME_DIR", xdg.join("run"))
            .output()
            .unwrap(),
    );
    assert_eq!(v["source"], "xdg");
    let parts = v["parts"].as_array().unwrap();
    let path_of = |name: &str| {
        parts.iter().find(|p| p["name"] == name).unwrap()["path"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(path_of("data"), xdg.join("data/proctor").to_str().unwrap());
    assert_eq!(
        path_of("config"),
        xdg.join("config/proctor").to_str().unwrap()
    );
    assert_eq!(
        path_of("state"),
        xdg.join("state/proctor").to_str().unwrap()
    );
    // The runtime folder derives from the home, never from XDG_RUNTIME_DIR (a per-login
    // variable): in the state folder.
    assert_eq!(
        path_of("runtime"),
        xdg.join("state/proctor/run").to_str().unwrap()
    );
    assert_eq!(
        v["socket"],
        xdg.join("state/proctor/run/server.sock").to_str().unwrap()
    );
    // `home` only reports: nothing was created.
    assert!(!xdg.exists());
    assert!(!a.exists());
}

#[test]
fn empty_env_is_unset() {
    let t = tempfile::tempdir().unwrap();
    let v = json(
        &proctor()
            .args(["home", "--json"])
            .env("PROCTOR_HOME", "")
            .env("HOME", t.path())
            .output()
            .unwrap(),
    );
    assert_eq!(v["source"], "xdg");
}

#[test]
fn unsafe_home_exits_2_naming_the_path_and_remedy() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("shared");
    std::fs::create_dir(&h).unwrap();
    std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o770)).unwrap();
    let out = proctor()
        .args(["home"])
        .env("PROCTOR_HOME", &h)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(h.to_str().unwrap()), "{err}");
    assert!(err.contains("PROCTOR_HOME"), "{err}");
    assert!(err.contains("chmod 700"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing printed on stdout for a refused home"
    );
}

#[test]
fn a_data_folder_writable_by_others_is_refused_too() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("h");
    std::fs::create_dir_all(h.join("data")).unwrap();
    std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(h.join("data"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = proctor()
        .args(["--home", h.to_str().unwrap(), "home"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(h.join("data").to_str().unwrap()), "{err}");
}

#[test]
fn help_teaches_and_version_prints() {
    let out = proctor().args(["home", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("PROCTOR_HOME"), "{help}");
    assert!(help.contains("exit 2"), "{help}");
    let out = proctor().arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("proctor "));
    let out = proctor().arg("no-such-verb").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
