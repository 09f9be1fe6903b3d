//! The demo's whole publication path, driven through a real pseudo-terminal as a person would:
//! `proctor demo` opens the cockpit, the intents view, `P`; the demo has no publish key, so
//! the dialog offers a throwaway demo key (its passphrase typed twice, masked); then the full
//! revision and the passphrase. Asserted against real effects: the demo's bare remote holds
//! the branch at the revision, the demo forge (served by the demo's server on the loopback)
//! recorded one pull request, and the receipt verifies with `proctor receipt verify` and with
//! `ssh-keygen -Y verify`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::pty::{Term, WAIT};
use serde_json::Value;
const PASS: &str = "demo horse battery staple";

/// `proctor --home HOME demo` in a PTY of ours (its screen read through vt100).
fn demo(home: &Path, rows: u16, cols: u16) -> Term {
    Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", home.to_str().unwrap(), "demo"],
        rows,
        cols,
        &[("TERM", "xterm-256color")],
        &["NO_COLOR"],
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn receipts(home: &Path) -> Vec<PathBuf> {
    common::receipt_files(home)
}

/// The demo forge's base URL, as the demo wrote it into the forge configuration.
fn api_base(home: &Path) -> String {
    let cfg = std::fs::read_to_string(home.join("config/forge.toml")).unwrap();
    let v: toml::Value = toml::from_str(&cfg).unwrap();
    v["api_base"].as_str().unwrap().to_string()
}

fn get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut resp = agent.get(url).call().unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap())
}

#[test]
fn the_demo_publishes_for_real_with_a_demo_key_and_the_demo_forge() {
    let h = common::TestHome::new();
    let mut c = demo(h.path(), 40, 160);
    // The cockpit opens once the demo is set up (its intent proposed).
    c.wait_screen("the sessions list", |t| t.contains("run-0006"));
    // The forge configuration names the demo forge and a credential file, not `false`.
    let cfg = std::fs::read_to_string(h.path().join("config/forge.toml")).unwrap();
    assert!(!cfg.contains("\"false\""), "{cfg}");
    assert!(cfg.contains("token_file"), "{cfg}");
    let base = api_base(h.path());
    assert!(
        base.starts_with("http://127.0.0.1:") && base.contains("demo-forge"),
        "{base}"
    );
    let token: toml::Value = toml::from_str(&cfg).unwrap();
    let token_file = PathBuf::from(token["token_file"].as_str().unwrap());
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim().to_string();
    assert!(!token.is_empty());
    assert!(!h.path().join("config/keys/publish.p8").exists());

    let owner = h.owner_token();
    let (st, v) = common::call_as(
        &h.socket(),
        Some(&owner),
        "GET",
        "/v1/m/publish/intents",
        None,
    );
    assert_eq!(st, 200, "{v}");
    let intent = &v["items"][0];
    assert_eq!(intent["state"], "awaiting_authority", "{v}");
    let rev = intent["revision"].as_str().unwrap().to_string();
    let branch = intent["branch"].as_str().unwrap().to_string();

    // The intents view, P: the demo offers its throwaway key.
    c.type_keys("3");
    c.wait_screen("the intent", |t| t.contains("AWAITING_AUTHORITY"));
    c.type_keys("P");
    c.wait_screen("the demo key offer", |t| {
        t.contains("no publish key") && t.contains("Create the demo key?")
    });
    c.type_keys("\r");
    c.wait_screen("the new passphrase", |t| t.contains("New passphrase: ▏"));
    c.type_keys(PASS);
    let t = c.wait_screen("masked", |t| t.contains("New passphrase: (hidden)▏"));
    assert!(!t.contains("horse"), "{t}");
    c.type_keys("\r");
    c.wait_screen("the second entry", |t| t.contains("Passphrase again: ▏"));
    c.type_keys(PASS);
    c.type_keys("\r");
    // The key is made and registered; the approval continues.
    c.wait_screen("the revision prompt", |t| {
        t.contains("Authorise publication int-0001") && t.contains("Revision: ▏")
    });
    assert!(h.path().join("config/keys/publish.p8").exists());
    c.type_keys(&rev);
    c.wait_screen("the typed revision", |t| {
        t.contains(&format!("Revision: {rev}▏"))
    });
    c.type_keys("\r");
    c.wait_screen("the passphrase prompt", |t| {
        t.contains("Passphrase for the publish key: ▏")
    });
    c.type_keys(PASS);
    c.type_keys("\r");
    let t = c.wait_screen("the flow's end", |t| {
        t.contains("PUBLISHED") || t.contains("REFUSED (")
    });
    assert!(t.contains("PUBLISHED int-0001"), "{t}");
    assert!(t.contains("demo-forge"), "{t}");

    // The bare remote has the branch at the revision.
    let remote = h.path().join("state/demo-git/lexer-remote.git");
    assert_eq!(
        git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]),
        rev
    );
    // The demo forge recorded one pull request, of that branch at that revision.
    let (st, body) = get(&format!("{base}/repos/demo/lexer/pulls"));
    assert_eq!(st, 200, "{body}");
    let pulls: Value = serde_json::from_str(&body).unwrap();
    let pulls = pulls.as_array().unwrap();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["number"], 1);
    assert_eq!(pulls[0]["head"]["ref"], branch.as_str());
    assert_eq!(pulls[0]["head"]["sha"], rev.as_str());
    assert_eq!(pulls[0]["base"]["ref"], "main");
    // Its page says it is the demo's.
    let url = pulls[0]["html_url"].as_str().unwrap().to_string();
    let (st, page) = get(&url);
    assert_eq!(st, 200);
    assert!(page.contains("proctor demo forge"), "{page}");
    assert!(page.contains("not GitHub"), "{page}");

    // The receipt: published, signed, checked by proctor and by ssh-keygen.
    let path = receipts(h.path()).pop().unwrap();
    let out = h.run(&["receipt", "verify", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("publication.published"), "{text}");
    let pub_line = std::fs::read_to_string(h.path().join("config/keys/publish.pub")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("proctor {}\n", pub_line.trim())).unwrap();
    let out = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(&allowed)
        .args(["-I", "proctor", "-n", "proctor-receipt", "-s"])
        .arg(proctor::authority::statement::sig_path(&path))
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(
        out.status.success(),
        "ssh-keygen -Y verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let receipt = std::fs::read_to_string(&path).unwrap();
    assert!(
        !receipt.contains(&token),
        "the forge token is in the receipt"
    );

    // Neither the forge token nor the passphrase ever reached the terminal.
    let raw = c.text();
    assert!(
        !raw.contains(&token),
        "the forge token reached the terminal"
    );
    assert!(!raw.contains(PASS), "the passphrase reached the terminal");

    // Closing the demo stops its server, and the demo forge with it.
    c.type_keys("\r");
    c.wait_screen("back in the list", |t| t.contains("Publication intents"));
    c.type_keys("q");
    assert_eq!(c.exit_code(), 0, "{}", c.screen());
    let deadline = Instant::now() + WAIT;
    let port = base
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the demo forge outlived the demo"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
