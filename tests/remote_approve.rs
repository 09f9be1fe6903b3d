//! A publication approved on another host (issue 19 §2; docs/remote.md, "Publication
//! approvals"): `proctor --host box publish approve ID` runs `ssh -t` to a real sshd on
//! 127.0.0.1 (tests/common/sshd.rs), and the approval runs in the second home ("box", reached
//! through a wrapper that plays that machine's installed proctor) at the PTY sshd allocated,
//! with box's key. The person's revision and passphrase are typed into the local PTY of the
//! test. A non-terminal is refused before any ssh runs; a plain relay (`ssh box proctor
//! publish approve ID`, no `-t`, as a script would do it) is refused by box's server, whose
//! kernel check sees no controlling terminal. Skipped, with a message, only when
//! `/usr/sbin/sshd` is absent.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::TestHome;
use common::pty::Term;
use common::sshd::{SSHD, Sshd, sh_quote, text};
use serde_json::Value;

const PASSPHRASE: &str = "correct horse battery staple";

/// The local home (with `hosts.toml` naming `box`) and box's home: a demo set up there (its
/// intent awaiting authority, the demo forge and remote), with a registered publish key.
struct Two {
    sshd: Sshd,
    local: TestHome,
    remote: TestHome,
    wrapper: PathBuf,
}

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
}

impl Two {
    fn new(with_intent: bool) -> Option<Two> {
        if !Path::new(SSHD).exists() {
            eprintln!("SKIPPED: {SSHD} is absent (install openssh-server to run the remote test)");
            return None;
        }
        let sshd = Sshd::start();
        let local = TestHome::new();
        let remote = TestHome::new();
        let bin = Path::new(env!("CARGO_BIN_EXE_proctor"));
        // box's installed proctor: its own home; every invocation logged.
        let wrapper = remote.path().join("rproctor");
        write_exec(
            &wrapper,
            &format!(
                "#!/bin/sh\necho \"$*\" >> {}\nexec env -u PROCTOR_HOST -u PROCTOR_TOKEN PROCTOR_HOME={} {} \"$@\"\n",
                sh_quote(&remote.path().join("invocations").display().to_string()),
                sh_quote(&remote.path().display().to_string()),
                sh_quote(&bin.display().to_string()),
            ),
        );
        let config = local.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        for d in [local.path(), &config] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let f = config.join("hosts.toml");
        std::fs::write(
            &f,
            format!(
                "[hosts.box]\nurl = \"ssh://127.0.0.1:{port}\"\nproctor = \"{w}\"\n\
                 ssh_args = [\"-F\", \"{cfg}\"]\n",
                port = sshd.port,
                w = wrapper.display(),
                cfg = sshd.client_config().display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let two = Two {
            sshd,
            local,
            remote,
            wrapper,
        };
        if with_intent {
            let out = two.remote.run(&["demo", "--no-cockpit"]);
            assert!(out.status.success(), "demo: {}", text(&out));
            let key = common::keys::generated("publish.p8", PASSPHRASE);
            common::keys::install(two.remote.path(), &key, "publish.p8");
            // Registration is an authority route: box's proctor at a terminal there.
            let mut t = Term::proctor(two.remote.path(), &["key", "register"]);
            assert_eq!(t.exit_code(), 0, "{}", t.text());
            let it = two.intent();
            assert_eq!(it["state"], "awaiting_authority", "{it}");
        }
        Some(two)
    }

    /// box's intent int-0001, read over box's own API.
    fn intent(&self) -> Value {
        let (st, v) = common::call_as(
            &self.remote.socket(),
            Some(&self.remote.owner_token()),
            "GET",
            "/v1/m/publish/intents/int-0001",
            None,
        );
        assert_eq!(st, 200, "{v}");
        v.get("intent").cloned().unwrap_or(v)
    }

    /// What box's proctor was asked to do.
    fn invocations(&self) -> String {
        std::fs::read_to_string(self.remote.path().join("invocations")).unwrap_or_default()
    }

    /// `proctor --host box publish approve ARGS…` from the local home, in a PTY of ours.
    fn approve_at_a_terminal(&self, args: &[&str]) -> Term {
        let home = self.local.path().to_str().unwrap().to_string();
        let mut all = vec!["--home", &home, "--host", "box", "publish", "approve"];
        all.extend_from_slice(args);
        Term::spawn_env(
            env!("CARGO_BIN_EXE_proctor"),
            &all,
            40,
            160,
            &[("TERM", "xterm-256color")],
            &[],
        )
    }
}

/// The revision typed wrong is refused there and nothing is approved; then the full revision
/// and box's passphrase, typed into this terminal, publish box's intent with box's key: the
/// intent is read back `published` over box's API, the exit status is the remote
/// approval's, and the summary line names the host.
#[test]
fn an_approval_over_ssh_t_runs_on_the_host_and_a_wrong_revision_approves_nothing() {
    let Some(h) = Two::new(true) else { return };
    let rev = h.intent()["revision"].as_str().unwrap().to_string();

    let mut t = h.approve_at_a_terminal(&["int-0001"]);
    t.wait_for("Revision: ");
    let wrong = format!("{}0", &rev[..rev.len() - 1]);
    t.type_keys(&format!("{wrong}\r"));
    let code = t.exit_code();
    let out = t.text();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused (wrong_revision)"), "{out}");
    assert!(
        out.contains("proctor: on box: refused (wrong_revision)"),
        "{out}"
    );
    assert!(!out.contains("Passphrase for the publish key"), "{out}");
    assert_eq!(h.intent()["state"], "awaiting_authority");
    assert!(
        h.invocations()
            .lines()
            .any(|l| l == "--host local publish approve int-0001"),
        "{}",
        h.invocations()
    );

    let mut t = h.approve_at_a_terminal(&["1"]);
    t.wait_for("Revision: ");
    t.type_keys(&format!("{rev}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys(&format!("{PASSPHRASE}\r"));
    let code = t.exit_code();
    let out = t.text();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("proctor: on box: published int-0001"), "{out}");
    assert!(
        !out.contains(PASSPHRASE),
        "the passphrase was echoed: {out}"
    );
    let it = h.intent();
    assert_eq!(it["state"], "published", "{it}");
    // Box's key signed (it is the only key there); nothing was made on this machine.
    assert!(!h.local.path().join("config/keys").exists());
    assert!(common::receipt_files(h.local.path()).is_empty());
    assert!(!common::receipt_files(h.remote.path()).is_empty());
}

/// Without a terminal (stdin not one), with words offered after INTENT, or with an id that
/// is not an intent's, the approval refuses here, and no ssh runs: box's proctor is never
/// invoked.
#[test]
fn a_remote_approval_without_a_terminal_runs_no_ssh() {
    let Some(h) = Two::new(false) else { return };
    let run = |args: &[&str]| {
        h.local
            .cmd()
            .args(["--host", "box", "publish", "approve"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["int-0001"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused (no_terminal)"), "{err}");
    assert!(err.contains("no ssh was started"), "{err}");
    let out = run(&["int-0001", "--passphrase", "hunter2hunter2"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused (answer_offered_outside_the_terminal)"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    for bad in [
        "int-1;touch /tmp/x",
        "$(id)",
        "int-0001 x",
        "-oProxyCommand=x",
    ] {
        let out = run(&[bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
    }
    assert_eq!(h.invocations(), "", "box's proctor was invoked");
}

/// A plain relay, as a script would do it (`ssh box proctor publish approve ID`, no `-t`):
/// sshd gives the remote proctor no terminal, and box's server refuses the approval at its
/// first step (`authority_refused`, recorded in box's ledger); nothing is approved.
#[test]
fn a_plain_relay_without_t_is_refused_by_the_remote_server() {
    let Some(h) = Two::new(true) else { return };
    let out = Command::new("ssh")
        .args(h.sshd.args(&[]))
        .arg(format!(
            "{} publish approve int-0001",
            sh_quote(&h.wrapper.display().to_string())
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("authority_refused"), "{err}");
    assert!(err.contains("no controlling terminal"), "{err}");
    let ledger = std::fs::read_to_string(h.remote.ledger()).unwrap();
    assert!(ledger.contains("\"authority.peer_refused\""), "{ledger}");
    assert_eq!(h.intent()["state"], "awaiting_authority");
}

/// The cockpit following `local` first and `box` second (issue 19 §2): box's intent is in
/// the Intents view under its HOST, counted as awaiting authority; `P` opens the dialog
/// naming box, whose key and remote are used; `y` hands this terminal to `ssh -t` box, where
/// the revision and box's passphrase typed here publish it with box's key; the cockpit comes
/// back and says so; nothing of the key or the receipt is on this machine.
#[test]
fn the_cockpit_approves_a_second_hosts_intent_on_that_host_through_ssh_t() {
    let Some(h) = Two::new(true) else { return };
    let rev = h.intent()["revision"].as_str().unwrap().to_string();
    let home = h.local.path().to_str().unwrap().to_string();
    let mut t = Term::spawn_env(
        env!("CARGO_BIN_EXE_proctor"),
        &["--home", &home, "--host", "local", "--host", "box"],
        48,
        160,
        &[("TERM", "xterm-256color")],
        &["PROCTOR_HOST"],
    );
    t.wait_screen("both hosts reachable", |s| {
        s.contains("box    reachable · proctor ") && s.contains("local  reachable · proctor ")
    });
    t.send(b"3");
    let s = t.wait_screen("box's intent under its host", |s| {
        s.lines().any(|l| {
            l.contains("box") && l.contains("int-0001") && l.contains("AWAITING_AUTHORITY")
        }) && s.contains("awaiting authority 1")
    });
    assert!(s.contains("HOST"), "{s}");
    assert!(s.contains("approved on box by `ssh -t box`"), "{s}");
    t.send(b"P");
    t.wait_screen("the dialog naming box", |s| {
        s.contains("Approve int-0001 on host box?")
    });
    t.send(b"y");
    t.wait_for("Revision: ");
    t.type_keys(&format!("{rev}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys(&format!("{PASSPHRASE}\r"));
    let s = t.wait_screen("the cockpit back, saying box published it", |s| {
        s.contains("on box: published int-0001")
    });
    assert!(!t.text().contains(PASSPHRASE), "the passphrase was echoed");
    assert_eq!(h.intent()["state"], "published");
    t.wait_screen("box's intent read again, published", |s| {
        s.lines()
            .any(|l| l.contains("box") && l.contains("int-0001") && l.contains("PUBLISHED"))
            && s.contains("awaiting authority 0")
    });
    assert!(
        h.invocations()
            .lines()
            .any(|l| l == "--host local publish approve int-0001"),
        "{}\n{s}",
        h.invocations()
    );
    assert!(!h.local.path().join("config/keys").exists());
    assert!(common::receipt_files(h.local.path()).is_empty());
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
}
