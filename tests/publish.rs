//! Publication end to end, with real git (a workspace repository, a worktree run, a local
//! bare remote), a real server, a loopback fake forge, and the approval typed through a real
//! pseudo-terminal the way a person types it.
//!
//! - approve through a PTY: the branch is pushed to the bare remote, the pull request is
//!   opened on the fake forge (its hostile answer is shown sanitised), the receipt verifies
//!   (proctor's verifier and `ssh-keygen -Y verify`), the gate passes;
//! - refused with exit 1, a redacted receipt and nothing pushed: a pipe under setsid (no
//!   controlling terminal), the passphrase in an environment variable or in a file on stdin,
//!   a wrong revision, Ctrl-C at the prompt, a wrong passphrase, a stale candidate, the
//!   passphrase offered in argv (the words are never read);
//! - a lease that moved; a script that plays the terminal's part with the person's key and
//!   token, refused at every approval step (the kernel's checks);
//! - the scripted attack from inside a run, refused at its first authority step.
//! - a key revoked by `proctor key rotate`: `approve` with it refuses itself at the terminal
//!   (`key_not_registered`), the replacement publishes and signs the receipt; the person's own
//!   `allowed_signers` pin, and the receipt checkable after its key is revoked in turn.
//!
//! What the server's handlers refuse behind the kernel gate (a replayed spend, another
//! revision, a spend before its authorisation) no client reaches: src/server/publish_api/tests.rs.
//!
//! One key per test binary (scrypt N=2^17 is slow on purpose).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::pty::Term;
use common::{DemoServer, call_as, http_status};
use proctor::authority::keys;
use proctor::authority::statement::{sig_path as statement_sig, verify_receipt_file};
use proctor::git::Git;
use serde_json::{Value, json};

const PASSPHRASE: &str = "correct horse battery staple";
const WS: &str = "/v1/m/sessions/workspaces";
const RUNS: &str = "/v1/m/sessions/runs";
const EV: &str = "/v1/m/evidence";
const PUB: &str = "/v1/m/publish";
const FORGE_TOKEN: &str = "ghp_fake_forge_token_0123456789";
/// What the fake forge answers in `html_url`: an OSC title change and a bidi override.
const HOSTILE_URL: &str = "https://forge.test/acme/widget/pull/1\u{1b}]0;pwned\u{7}\u{202e}gpj.exe";

// ---------------------------------------------------------------------------------------------
// The key: generated once for the whole binary.
// ---------------------------------------------------------------------------------------------

fn key() -> PathBuf {
    common::keys::generated("publish.p8", PASSPHRASE)
}

/// Copies the key into a home (0700 folder, 0600 files) and registers it with the server.
fn install_key(s: &DemoServer) {
    common::keys::install(s.home.path(), &key(), "publish.p8");
    // Registration is an authority route: the proctor binary, at a terminal, as a person.
    let mut t = Term::proctor(s.home.path(), &["key", "register"]);
    let code = t.exit_code();
    assert_eq!(code, 0, "{}", t.text());
}

// ---------------------------------------------------------------------------------------------
// The fake forge: a loopback HTTP server that records requests.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct ForgeRequest {
    line: String,
    authorization: Option<String>,
    body: Value,
}

struct Forge {
    base: String,
    requests: Arc<Mutex<Vec<ForgeRequest>>>,
}

impl Forge {
    fn start() -> Forge {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}/api/v3", l.local_addr().unwrap().port());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in l.incoming() {
                let Ok(stream) = stream else { return };
                let seen = seen.clone();
                std::thread::spawn(move || serve_one(stream, &seen));
            }
        });
        Forge { base, requests }
    }

    fn requests(&self) -> Vec<ForgeRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_one(stream: std::net::TcpStream, seen: &Mutex<Vec<ForgeRequest>>) {
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let (mut len, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h == "\r\n" || h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => len = value.trim().parse().unwrap(),
            "authorization" => authorization = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    let n = {
        let mut all = seen.lock().unwrap();
        all.push(ForgeRequest {
            line: line.trim_end().to_string(),
            authorization: authorization.clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        all.len()
    };
    let (status, answer) = if authorization.as_deref() != Some(&format!("Bearer {FORGE_TOKEN}")) {
        ("401 Unauthorized", json!({"message": "Bad credentials"}))
    } else {
        (
            "201 Created",
            json!({"number": n, "html_url": HOSTILE_URL.replace("/1", &format!("/{n}"))}),
        )
    };
    let answer = answer.to_string();
    let mut s = stream;
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{answer}",
        answer.len()
    );
}

// ---------------------------------------------------------------------------------------------
// The world: a server, a workspace repository with a bare remote, a worktree run whose
// candidate passed its checks.
// ---------------------------------------------------------------------------------------------

struct World {
    s: DemoServer,
    repo: tempfile::TempDir,
    remote: tempfile::TempDir,
    forge: Forge,
    run: String,
    worktree: PathBuf,
    candidate: String,
}

fn git(dir: &Path) -> Git {
    Git::new(dir)
}

impl World {
    fn new() -> World {
        let s = DemoServer::start(&[]);
        install_key(&s);
        let forge = Forge::start();

        let repo = tempfile::Builder::new()
            .prefix("pubrepo")
            .tempdir_in("/tmp")
            .unwrap();
        let remote = tempfile::Builder::new()
            .prefix("pubremote")
            .tempdir_in("/tmp")
            .unwrap();
        git(remote.path()).run(&["init", "-q", "--bare"]).unwrap();
        let g = git(repo.path());
        g.run(&["init", "-q", "-b", "main"]).unwrap();
        g.run(&["config", "user.name", "Ada Operator"]).unwrap();
        g.run(&["config", "user.email", "ada@example.invalid"])
            .unwrap();
        std::fs::write(repo.path().join("a.txt"), "one\n").unwrap();
        g.run(&["add", "-A"]).unwrap();
        g.run(&["commit", "-q", "-m", "first"]).unwrap();
        g.run(&["remote", "add", "origin", remote.path().to_str().unwrap()])
            .unwrap();
        g.run(&["push", "-q", "origin", "main"]).unwrap();

        // The forge's configuration and the token file (0600).
        let token = s.home.path().join("config/forge.token");
        std::fs::write(&token, format!("{FORGE_TOKEN}\n")).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let cfg = s.home.path().join("config/forge.toml");
        std::fs::write(
            &cfg,
            format!(
                "api_base = \"{}\"\nrepo = \"acme/widget\"\nbase = \"main\"\ntoken_file = \"{}\"\n",
                forge.base,
                token.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();

        // A workspace with an approved policy, a worktree run, a change, a bound candidate
        // and its passing checks.
        let path = std::fs::canonicalize(repo.path()).unwrap();
        let (code, v) = s.call("POST", WS, Some(json!({"path": path.to_str().unwrap()})));
        assert!(code == 200 || code == 201, "{code} {v}");
        let ws = v["ref"].as_str().unwrap().to_string();
        let policy = "[[check]]\nname = \"present\"\nargv = [\"test\", \"-f\", \"b.txt\"]\n";
        let v = s.expect(
            200,
            "PUT",
            &format!("{WS}/{ws}/policy"),
            Some(json!({"policy": policy})),
        );
        let sha = v["policy_sha256"]
            .as_str()
            .or_else(|| v["policy"]["sha256"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| proctor::evidence::policy::digest(policy));
        s.expect(
            200,
            "POST",
            &format!("{WS}/{ws}/policy/approve"),
            Some(json!({"sha256": sha})),
        );
        let v = s.expect(
            201,
            "POST",
            RUNS,
            Some(json!({"transport": "pipe", "tool": "gemini", "workspace": ws, "worktree": true})),
        );
        let run = v["ref"].as_str().unwrap().to_string();
        let worktree = PathBuf::from(v["workspace"].as_str().unwrap());
        s.expect(200, "POST", &s.run_path(&run, "/stop"), None);
        // The "agent's" work: one file changed, one added.
        std::fs::write(worktree.join("a.txt"), "two\n").unwrap();
        std::fs::write(worktree.join("b.txt"), "bee\n").unwrap();
        let v = s.expect(
            201,
            "POST",
            &format!("{EV}/candidates"),
            Some(json!({"run": run})),
        );
        let candidate = v["id"].as_str().unwrap().to_string();
        s.expect(
            201,
            "POST",
            &format!("{EV}/candidates/{candidate}/checks"),
            None,
        );
        let g = s.expect(
            200,
            "GET",
            &format!("{EV}/candidates/{candidate}/gate"),
            None,
        );
        assert_eq!(g["state"], "awaiting_human", "{g}");
        World {
            s,
            repo,
            remote,
            forge,
            run,
            worktree,
            candidate,
        }
    }

    fn home(&self) -> &Path {
        self.s.home.path()
    }

    /// `proctor publish propose …` for `branch`; returns the intent.
    fn propose(&self, branch: &str, body: &str) -> Value {
        let body_file = self
            .home()
            .join(format!("body-{}.md", branch.replace('/', "-")));
        std::fs::write(&body_file, body).unwrap();
        self.s.home.json(&[
            "publish",
            "propose",
            "--run",
            &self.run,
            "--remote",
            "origin",
            "--branch",
            branch,
            "--title",
            "Change a, add b",
            "--body-file",
            body_file.to_str().unwrap(),
            "--json",
        ])
    }

    /// The remote branch's tip (None when absent).
    fn remote_tip(&self, branch: &str) -> Option<String> {
        let out = git(self.remote.path())
            .text(&[
                "for-each-ref",
                "--format=%(objectname)",
                &format!("refs/heads/{branch}"),
            ])
            .unwrap();
        (!out.is_empty()).then_some(out)
    }

    fn receipts(&self) -> Vec<PathBuf> {
        common::receipt_files(self.home())
    }

    /// The statement inside a receipt file (signed or not).
    fn statement(path: &Path) -> Value {
        let env: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        use base64::Engine;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap();
        serde_json::from_slice(&payload).unwrap()
    }

    fn ledger(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(self.s.home.ledger())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    /// Asserts the newest receipt is a redacted refusal naming `code`, with no secret.
    fn assert_refused_receipt(&self, code: &str) {
        let path = self.receipts().pop().unwrap();
        let raw = std::fs::read_to_string(&path).unwrap();
        assert!(!raw.contains(PASSPHRASE), "no passphrase in a receipt");
        assert!(!raw.contains(FORGE_TOKEN), "no token in a receipt");
        let st = World::statement(&path);
        let p = &st["predicate"];
        assert_eq!(p["outcome"], "refused", "{p}");
        assert_eq!(p["redacted"], true);
        assert_eq!(p["refusal"]["code"], code, "{p}");
        assert_eq!(
            p["intent"]["body"],
            Value::Null,
            "a redacted receipt keeps no body"
        );
        assert!(p["not_proven"].as_array().unwrap().len() >= 4);
        assert!(!raw.contains("\"nonce\""), "never the nonce itself");
    }
}

// ---------------------------------------------------------------------------------------------
// A program in a PTY of ours.
// ---------------------------------------------------------------------------------------------

/// Runs `proctor publish approve ID [extra…]` in a new session (no controlling terminal),
/// with pipes.
fn approve_without_tty(
    w: &World,
    id: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    stdin: Stdio,
) -> std::process::Output {
    let mut cmd = w.s.home.cmd();
    cmd.args(["publish", "approve", id])
        .args(extra)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: setsid in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap().wait_with_output().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Every refusal at the terminal, then the publication through a real PTY.
#[test]
fn approve_through_a_pty_publishes_after_every_refusal_refuses() {
    let w = World::new();
    let hostile_body = "Why:\n\u{1b}[2J\u{1b}]0;owned\u{7}cleared your screen\n\u{202e}txt.exe\n";
    let it = w.propose("feature/change-a", hostile_body);
    assert_eq!(it["state"], "awaiting_authority", "{it}");
    let id = it["id"].as_str().unwrap().to_string();
    let revision = it["revision"].as_str().unwrap().to_string();
    assert_eq!(revision.len(), 40);
    assert_eq!(it["expected_tip"], Value::Null);
    // The revision is reproducible from what the intent stores, and no ref moved.
    let c = &it["commit"];
    let rebuilt = Git::new(w.repo.path())
        .with_env("GIT_AUTHOR_NAME", c["author_name"].as_str().unwrap())
        .with_env("GIT_AUTHOR_EMAIL", c["author_email"].as_str().unwrap())
        .with_env("GIT_AUTHOR_DATE", c["date"].as_str().unwrap())
        .with_env("GIT_COMMITTER_NAME", c["author_name"].as_str().unwrap())
        .with_env("GIT_COMMITTER_EMAIL", c["author_email"].as_str().unwrap())
        .with_env("GIT_COMMITTER_DATE", c["date"].as_str().unwrap())
        .run_with_input(
            &[
                "commit-tree".as_ref(),
                c["tree"].as_str().unwrap().as_ref(),
                "-p".as_ref(),
                c["parent"].as_str().unwrap().as_ref(),
            ],
            Some(c["message"].as_str().unwrap().as_bytes()),
        )
        .unwrap();
    assert_eq!(String::from_utf8(rebuilt).unwrap().trim(), revision);
    assert!(
        Git::new(w.repo.path())
            .run(&["rev-parse", "--verify", "-q", "refs/heads/feature/change-a"])
            .is_err(),
        "propose moves no ref"
    );
    let list = w.s.home.ok(&["publish", "list"]);
    assert!(
        list.contains("AWAITING_AUTHORITY") && list.contains("1 awaiting authority"),
        "{list}"
    );

    // Without a controlling terminal the server refuses the first authority step (opening
    // the approval): the kernel says the caller has no terminal, whatever it offers. No
    // approval is opened, so no receipt is reserved; the ledger names each refusal.
    let receipts_before = w.receipts();
    let no_terminal = |out: &std::process::Output| {
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("authority_refused") && err.contains("no controlling terminal"),
            "{err}"
        );
        assert!(!err.contains(PASSPHRASE), "{err}");
        assert_eq!(w.receipts(), receipts_before, "no approval was opened");
    };
    // The passphrase offered in argv (the words are never read).
    no_terminal(&approve_without_tty(
        &w,
        &id,
        &["--passphrase", PASSPHRASE],
        &[],
        Stdio::null(),
    ));
    // Through a pipe under setsid.
    no_terminal(&approve_without_tty(&w, &id, &[], &[], Stdio::piped()));
    // The passphrase in the environment (and the answers on stdin).
    no_terminal(&approve_without_tty(
        &w,
        &id,
        &[],
        &[
            ("PROCTOR_PASSPHRASE", PASSPHRASE),
            ("PASSPHRASE", PASSPHRASE),
        ],
        Stdio::piped(),
    ));
    // The revision and passphrase in a file on stdin.
    let answers = w.home().join("answers.txt");
    std::fs::write(&answers, format!("{revision}\n{PASSPHRASE}\n")).unwrap();
    no_terminal(&approve_without_tty(
        &w,
        &id,
        &[],
        &[],
        Stdio::from(std::fs::File::open(&answers).unwrap()),
    ));
    let refused = w.ledger("authority.peer_refused");
    assert_eq!(refused.len(), 4, "{refused:?}");
    for e in &refused {
        assert_eq!(
            e["route"], "/v1/m/publish/intents/{intent}/approvals",
            "{e}"
        );
        assert_eq!(e["failed"], json!(["no_controlling_terminal"]), "{e}");
    }

    // At a real terminal: a wrong revision (one character off).
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    t.wait_for("Revision: ");
    let mut wrong = revision.clone();
    wrong.replace_range(39.., if revision.ends_with('0') { "1" } else { "0" });
    t.type_keys(&format!("{wrong}\r"));
    assert_eq!(t.exit_code(), 1);
    assert!(t.text().contains("wrong_revision"), "{}", t.text());
    w.assert_refused_receipt("wrong_revision");

    // Ctrl-C at the revision prompt.
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    t.wait_for("Revision: ");
    t.type_keys("\u{3}");
    assert_eq!(t.exit_code(), 1);
    assert!(t.text().contains("aborted"), "{}", t.text());
    w.assert_refused_receipt("aborted");

    // Ctrl-C at the passphrase prompt.
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    t.wait_for("Revision: ");
    t.type_keys(&format!("{revision}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys("\u{3}");
    assert_eq!(t.exit_code(), 1);
    w.assert_refused_receipt("aborted");

    // A wrong passphrase.
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    t.wait_for("Revision: ");
    t.type_keys(&format!("{revision}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys("not the passphrase\r");
    assert_eq!(t.exit_code(), 1);
    assert!(t.text().contains("wrong_passphrase"), "{}", t.text());
    w.assert_refused_receipt("wrong_passphrase");
    // The server counted it (the back-off of docs/security.md): attempt 1, no wait yet.
    let wrong = w.ledger("authority.passphrase.wrong");
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert_eq!(wrong[0]["attempt"], 1);
    assert_eq!(wrong[0]["wait_ms"], 0);
    assert!(
        t.text().contains("wrong passphrase 1 in a row"),
        "{}",
        t.text()
    );

    // Nothing of the above pushed, opened a pull request or spent anything.
    assert_eq!(w.remote_tip("feature/change-a"), None);
    assert!(w.forge.requests().is_empty());
    assert!(w.ledger("publish.authorisation.spent").is_empty());
    let refusals = w.ledger("publish.approval.refused");
    let codes: Vec<&str> = refusals
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["wrong_revision", "aborted", "aborted", "wrong_passphrase"]
    );

    // The person, at the terminal: the fields shown sanitised, the revision and passphrase
    // typed.
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    let shown = t.wait_for("Revision: ");
    assert!(
        shown.contains("AWAITING_AUTHORITY") && shown.contains(&revision),
        "{shown}"
    );
    assert!(
        shown.contains("\u{27e8}U+202E\u{27e9}txt.exe"),
        "bidi shown as a marker: {shown}"
    );
    assert!(
        !shown.contains("\u{1b}[2J") && !shown.contains("\u{1b}]0;owned"),
        "{shown:?}"
    );
    assert!(shown.contains("cannot merge"), "{shown}");
    t.type_keys(&format!("{revision}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys(&format!("{PASSPHRASE}\r"));
    let code = t.exit_code();
    let out = t.text();
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(PASSPHRASE), "the passphrase is never echoed");
    // The forge's hostile answer is shown sanitised.
    assert!(out.contains("pull request #1 "), "{out}");
    assert!(!out.contains("\u{1b}]0;pwned"), "{out:?}");
    assert!(out.contains("\u{27e8}U+202E\u{27e9}gpj.exe"), "{out}");

    // The right passphrase reset the count, proved by the decrypted key.
    let resets = w.ledger("authority.passphrase.reset");
    assert_eq!(resets.len(), 1, "{resets:?}");
    assert_eq!(resets[0]["after_failures"], 1);

    // Pushed exactly the revision; the local branch moved; main untouched (no merge).
    assert_eq!(
        w.remote_tip("feature/change-a").as_deref(),
        Some(revision.as_str())
    );
    assert_eq!(
        Git::new(w.repo.path())
            .text(&["rev-parse", "refs/heads/feature/change-a"])
            .unwrap(),
        revision
    );
    let main_tip = Git::new(w.repo.path())
        .text(&["rev-parse", "main"])
        .unwrap();
    assert_eq!(w.remote_tip("main").as_deref(), Some(main_tip.as_str()));
    // One pull request, with the token in the header only and the intent's fields.
    let reqs = w.forge.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(
        reqs[0].line,
        "POST /api/v3/repos/acme/widget/pulls HTTP/1.1"
    );
    assert_eq!(
        reqs[0].authorization.as_deref(),
        Some(&*format!("Bearer {FORGE_TOKEN}"))
    );
    assert_eq!(reqs[0].body["head"], "feature/change-a");
    assert_eq!(reqs[0].body["base"], "main");
    assert_eq!(reqs[0].body["title"], "Change a, add b");
    assert_eq!(reqs[0].body["body"], hostile_body);

    // The receipt: signed, verified by proctor's verifier and by ssh-keygen.
    let path = w.receipts().pop().unwrap();
    assert!(out.contains(&path.display().to_string()), "{out}");
    let vk = keys::public_info(&key()).unwrap().verifying_key().unwrap();
    let report = verify_receipt_file(&path, &[vk]).unwrap();
    assert!(report.ok(), "{report:#?}");
    let st = report.statement.unwrap();
    let p = &st["predicate"];
    assert_eq!(p["outcome"], "published");
    assert_eq!(p["done"]["push"]["observed"], revision.as_str());
    assert_eq!(p["done"]["pull_request"]["number"], 1);
    assert_eq!(p["candidate"]["id"], w.candidate.as_str());
    assert_eq!(
        p["authorisation"]["nonce_sha256"].as_str().unwrap().len(),
        64
    );
    assert!(p["authorisation"]["spent_at"].is_string());
    assert_eq!(p["ledger"]["format"], "proctor-ledger-fixed-point/1");
    assert!(p["not_proven"][0].as_str().unwrap().contains("host user"));
    let subjects = st["subject"].as_array().unwrap();
    assert_eq!(subjects[0]["digest"]["gitCommit"], revision.as_str());
    let names: Vec<&str> = subjects
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"a.txt") && names.contains(&"b.txt"),
        "{names:?}"
    );
    for check in &report.checks {
        assert_ne!(
            check.outcome,
            proctor::authority::statement::Outcome::Fails,
            "{check:?}"
        );
    }
    ssh_keygen_verifies(&path);
    // `proctor receipt verify` checks it with the keys the home trusts, and the ledger prefix.
    let out =
        w.s.home
            .run(&["receipt", "verify", &path.display().to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("publication.published"), "{text}");
    for name in ["signature", "sshsig", "ledger"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("holds") && l.contains(name)),
            "{name}: {text}"
        );
    }
    // One byte of the envelope changed: the signatures no longer hold, exit 1.
    let tampered = w.home().join("tampered.json");
    let mut bytes = std::fs::read(&path).unwrap();
    let i = bytes.iter().position(|&b| b == b'"').unwrap() + 1;
    bytes[i] ^= 0x20;
    std::fs::write(&tampered, &bytes).unwrap();
    std::fs::copy(statement_sig(&path), statement_sig(&tampered)).unwrap();
    let out =
        w.s.home
            .run(&["receipt", "verify", &tampered.display().to_string()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The gate passed; the intent is published; the ledger tells the story in order.
    let g = w.s.expect(
        200,
        "GET",
        &format!("{EV}/candidates/{}/gate", w.candidate),
        None,
    );
    assert_eq!(g["state"], "passed", "{g}");
    let it = w.s.expect(200, "GET", &format!("{PUB}/intents/{id}"), None);
    assert_eq!(it["state"], "published");
    let kinds: Vec<String> = std::fs::read_to_string(w.s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .filter(|k| k.starts_with("publish.") && !k.starts_with("publish.receipt"))
        .collect();
    let tail = &kinds[kinds.len() - 5..];
    assert_eq!(
        tail,
        [
            "publish.approval.opened",
            "publish.approval.checked",
            "publish.authorisation.minted",
            "publish.authorisation.spent",
            "publish.adapter.finished"
        ]
    );
    // A published intent cannot be approved again.
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    assert_eq!(t.exit_code(), 1);
    assert!(t.text().contains("PUBLISHED"), "{}", t.text());
}

fn ssh_keygen_verifies(receipt: &Path) {
    let info = keys::public_info(&key()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("proctor {}\n", info.openssh)).unwrap();
    let sig = proctor::authority::statement::sig_path(receipt);
    let out = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(&allowed)
        .args(["-I", "proctor", "-n", "proctor-receipt", "-s"])
        .arg(&sig)
        .stdin(std::fs::File::open(receipt).unwrap())
        .output()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(
        out.status.success(),
        "ssh-keygen -Y verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The candidate changed after the proposal: the approval refuses before any prompt.
#[test]
fn a_candidate_changed_after_propose_is_stale() {
    let w = World::new();
    let it = w.propose("stale-branch", "");
    let id = it["id"].as_str().unwrap().to_string();
    let before = w.s.expect(200, "GET", &format!("{PUB}/intents/{id}"), None);
    assert_eq!(before["state"], "awaiting_authority", "{before}");
    std::fs::write(w.worktree.join("b.txt"), "bee, edited later\n").unwrap();
    // Shown as it stands now: blocked, with the causes; the recorded state is kept.
    let now = w.s.expect(200, "GET", &format!("{PUB}/intents/{id}"), None);
    assert_eq!(now["state"], "blocked", "{now}");
    assert_eq!(now["recorded_state"], "awaiting_authority", "{now}");
    assert!(!now["causes"].as_array().unwrap().is_empty(), "{now}");
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    assert_eq!(t.exit_code(), 1);
    let out = t.text();
    assert!(
        out.contains("stale") && out.contains("changed after the proposal"),
        "{out}"
    );
    assert!(
        !out.contains("Revision: "),
        "no prompt for a stale candidate: {out}"
    );
    w.assert_refused_receipt("stale");
    assert_eq!(w.remote_tip("stale-branch"), None);
    assert!(w.forge.requests().is_empty());
}

/// `proctor publish approve ID` at a real terminal, the revision and the passphrase typed;
/// its exit code and output.
fn approve_typed(w: &World, id: &str, revision: &str) -> (u32, String) {
    let mut t = Term::proctor(w.home(), &["publish", "approve", id]);
    t.wait_for("Revision: ");
    t.type_keys(&format!("{revision}\r"));
    t.wait_for("Passphrase for the publish key: ");
    t.type_keys(&format!("{PASSPHRASE}\r"));
    let code = t.exit_code();
    (code, t.text())
}

/// A lease that moved is refused naming the tip; a script playing the terminal's part
/// with the person's key and token is refused at every approval step; once the remote is
/// back, the same intent publishes at the terminal; a forge that refuses the token makes a
/// failure, never a silent success.
#[test]
fn a_moved_lease_is_refused_and_a_script_cannot_play_the_terminal() {
    use proctor::publish::authorisation::{self, Grant, LedgerHead};
    let w = World::new();
    let it = w.propose("lease-branch", "Body.\n");
    let id = it["id"].as_str().unwrap().to_string();
    let revision = it["revision"].as_str().unwrap().to_string();

    // Someone pushes the branch after the proposal.
    let base = Git::new(w.repo.path())
        .text(&["rev-parse", "main"])
        .unwrap();
    Git::new(w.repo.path())
        .run(&[
            "push",
            "-q",
            "origin",
            &format!("{base}:refs/heads/lease-branch"),
        ])
        .unwrap();
    let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
    assert_eq!(t.exit_code(), 1);
    let out = t.text();
    assert!(out.contains("lease_moved") && out.contains(&base), "{out}");
    assert!(
        !out.contains("Revision: "),
        "no prompt for a moved lease: {out}"
    );
    w.assert_refused_receipt("lease_moved");
    assert_eq!(w.remote_tip("lease-branch").as_deref(), Some(base.as_str()));

    // The remote branch is gone again: the lease holds. This test process now plays the
    // terminal's part with the person's key and the owner token, straight over the socket:
    // it is not the proctor binary and has no terminal, and each step is refused (403
    // `authority_refused`, recorded) before any handler runs.
    Git::new(w.repo.path())
        .run(&["push", "-q", "origin", ":refs/heads/lease-branch"])
        .unwrap();
    let signing = keys::load(&key(), PASSPHRASE.as_bytes()).unwrap();
    let grant = Grant {
        approval: "apr-0001".into(),
        intent: id.clone(),
        revision: revision.clone(),
        identity: it["candidate"]["digest"].as_str().unwrap().to_string(),
        ledger_head: LedgerHead {
            seq: 1,
            line_sha256: "0".repeat(64),
        },
    };
    let (_, env) = authorisation::mint(&grant, &signing).unwrap();
    let before = w.ledger("authority.peer_refused").len();
    let steps = [
        (format!("{PUB}/intents/{id}/approvals"), None),
        (format!("{PUB}/approvals/apr-0001/check"), None),
        (
            format!("{PUB}/approvals/apr-0001/authorisation"),
            Some(json!({"envelope": env})),
        ),
        (
            format!("{PUB}/approvals/apr-0001/spend"),
            Some(json!({"envelope": env})),
        ),
        (format!("{PUB}/approvals/apr-0001/receipt"), Some(json!({}))),
        (format!("{PUB}/approvals/apr-0001/refusal"), Some(json!({}))),
    ];
    for (path, body) in &steps {
        let (code, v) = w.s.call("POST", path, body.clone());
        assert_eq!(code, 403, "{path}: {v}");
        assert_eq!(v["error"]["code"], "authority_refused", "{path}: {v}");
    }
    let refused = w.ledger("authority.peer_refused");
    assert_eq!(refused.len(), before + steps.len(), "{refused:?}");
    for e in &refused[before..] {
        assert!(
            e["failed"]
                .as_array()
                .unwrap()
                .contains(&json!("not_proctor_binary")),
            "{e}"
        );
    }
    assert_eq!(w.remote_tip("lease-branch"), None);
    assert!(w.forge.requests().is_empty());

    // The person at the terminal: published.
    let (code, out) = approve_typed(&w, &id, &revision);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        w.remote_tip("lease-branch").as_deref(),
        Some(revision.as_str())
    );
    assert_eq!(w.forge.requests().len(), 1);
    assert_eq!(w.ledger("publish.authorisation.spent").len(), 1);

    // The same bytes, proposed again for another branch, need (and get) their own
    // authorisation. The forge now refuses the token: the push happened, the pull request
    // did not, and the outcome says so — a failure, never a silent success.
    let it2 = w.propose("second-branch", "");
    assert_eq!(it2["state"], "awaiting_authority", "{it2}");
    let id2 = it2["id"].as_str().unwrap().to_string();
    std::fs::write(w.home().join("config/forge.token"), "ghp_revoked\n").unwrap();
    let (code, out) = approve_typed(&w, &id2, it2["revision"].as_str().unwrap());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("pull_request_failed"), "{out}");
    assert!(!out.contains("ghp_revoked"), "the token never comes back");
    assert_eq!(
        w.remote_tip("second-branch").as_deref(),
        it2["revision"].as_str()
    );
    let path = w.receipts().pop().unwrap();
    let st = World::statement(&path);
    assert_eq!(st["predicate"]["outcome"], "failed");
    assert_eq!(st["predicate"]["refusal"]["code"], "pull_request_failed");
    assert_eq!(st["predicate"]["done"]["push"]["observed"], it2["revision"]);
    let it2 =
        w.s.expect(200, "GET", &format!("{PUB}/intents/{id2}"), None);
    assert_eq!(it2["state"], "failed");
}

/// The attack of issue 10, as a script inside an agent's run (a `claude` on PATH that is
/// ours): it finds the server's home from its ancestors' command lines, reads the owner
/// token, and calls the socket itself: registers its own key, opens an approval, checks,
/// posts an authorisation it signed, spends. It is refused at the first authority step and
/// at every later one; the ledger names each refusal; nothing is pushed. From the same run:
/// the token says person, the kernel says agent (also for a setsid + double-fork
/// grandchild); the owner token cannot be revoked; only agent tokens are listed; and the
/// proctor binary itself, under a pseudo-terminal the script made, is refused as a
/// descendant of the server (the one check it fails).
#[test]
fn the_scripted_attack_from_inside_a_run_is_refused_at_its_first_authority_step() {
    use base64::Engine;
    let w = World::new();
    let it = w.propose("attack-branch", "Body.\n");
    let id = it["id"].as_str().unwrap().to_string();
    let own = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    let own_b64 = base64::engine::general_purpose::STANDARD.encode(own.verifying_key().as_bytes());
    let script = ATTACK
        .replace("@PROCTOR@", env!("CARGO_BIN_EXE_proctor"))
        .replace("@INTENT@", &id)
        .replace("@KEY@", &own_b64);
    let shim = w.s.shims.join("claude");
    std::fs::write(&shim, script).unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o700)).unwrap();
    let ws = w.home().join("attack-ws");
    std::fs::create_dir_all(&ws).unwrap();
    w.s.expect(
        201,
        "POST",
        RUNS,
        Some(json!({"tool": "claude", "transport": "pty", "workspace": ws})),
    );
    let report = ws.join("attack.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !report.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the attack wrote no report; ledger:\n{}",
            std::fs::read_to_string(w.s.home.ledger()).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(r["home"].as_str().is_some(), "{r}");
    // The first authority step, and every later one: 403 authority_refused.
    for step in ["keys", "approvals", "check", "authorisation", "spend"] {
        assert_eq!(r[step][0], 403, "{step}: {r}");
        assert_eq!(
            r[step][1]["error"]["code"], "authority_refused",
            "{step}: {r}"
        );
    }
    let msg = r["keys"][1]["error"]["message"].as_str().unwrap();
    assert!(msg.contains("descends from the server"), "{msg}");
    // The token says person; the kernel says agent, the grandchild too.
    assert_eq!(r["whoami"][1]["token_principal"], "person", "{r}");
    assert_eq!(r["whoami"][1]["principal"], "agent", "{r}");
    assert_eq!(r["grandchild"][1]["principal"], "agent", "{r}");
    assert_eq!(r["grandchild"][1]["peer"]["ancestry"], "descendant", "{r}");
    // Reparented to the server (a child subreaper), not to init.
    let server_pid = w.s.expect(200, "GET", "/v1/server", None)["pid"].clone();
    assert_eq!(r["grandchild"][2], server_pid, "{r}");
    // The owner token stays; an agent creates no token and lists only agent tokens.
    assert_eq!(r["revoke_owner"][0], 403, "{r}");
    assert_eq!(r["revoke_owner"][1]["error"]["code"], "owner_token", "{r}");
    assert_eq!(r["create"][0], 403, "{r}");
    assert_eq!(r["list"][1]["only"], "agent", "{r}");
    assert_eq!(r["list"][1]["items"], json!([]), "{r}");
    // The proctor binary at a terminal of the agent's own making: refused, as in the tree.
    assert_eq!(r["proctor_in_pty"]["code"], 1, "{r}");
    let out = r["proctor_in_pty"]["output"].as_str().unwrap();
    assert!(out.contains("authority_refused"), "{out}");
    // The ledger names each refusal; the one from the proctor binary failed only (c).
    let refused = w.ledger("authority.peer_refused");
    let routes: Vec<&str> = refused
        .iter()
        .map(|e| e["route"].as_str().unwrap())
        .collect();
    assert_eq!(routes[0], "/v1/m/authority/keys", "{refused:?}");
    assert_eq!(refused.len(), 6, "{refused:?}");
    for e in &refused[..5] {
        assert_eq!(e["ancestry"], "descendant", "{e}");
        assert_eq!(
            e["failed"],
            json!(["not_proctor_binary", "in_server_tree"]),
            "a PTY run has a terminal it is the foreground of: {e}"
        );
    }
    assert_eq!(
        refused[5]["failed"],
        json!(["in_server_tree"]),
        "{refused:?}"
    );
    assert_eq!(
        refused[5]["route"], "/v1/m/publish/intents/{intent}/approvals",
        "{refused:?}"
    );
    // Nothing registered, opened, spent or pushed; the owner token still works.
    let keys = w.s.expect(200, "GET", "/v1/m/authority/keys", None);
    assert_eq!(keys["items"].as_array().unwrap().len(), 1, "{keys}");
    assert!(w.ledger("publish.approval.opened").is_empty());
    assert!(w.ledger("publish.authorisation.spent").is_empty());
    assert_eq!(w.remote_tip("attack-branch"), None);
    assert!(w.forge.requests().is_empty());
    assert_eq!(
        w.ledger("auth.token.revoked").len(),
        0,
        "the owner token was not revoked"
    );
}

/// The attack script (python3): a `claude` that is the attacker.
const ATTACK: &str = r#"#!/usr/bin/python3
import json, os, pty, socket, sys

def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()

# 1. The server's home, from an ancestor's command line.
home, pid = None, os.getppid()
while pid > 1 and home is None:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    if b"--home" in args:
        home = args[args.index(b"--home") + 1].decode()
    pid = int(stat(pid)[1])
if home is None:
    home = os.environ.get("PROCTOR_HOME")
token = open(os.path.join(home, "config/owner.token")).read().strip()
sock = os.path.join(home, "run/server.sock")

def call(method, path, body=None):
    data = b"" if body is None else json.dumps(body).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        f"Connection: close\r\n\r\n".encode() + data)
    raw = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        raw += b
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"chunked" in head.lower():
        out, rest = b"", payload
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        payload = out
    try:
        return [status, json.loads(payload)]
    except Exception:
        return [status, payload.decode(errors="replace")]

P = "/v1/m/publish"
r = {"home": home}
r["keys"] = call("POST", "/v1/m/authority/keys", {"public_key_b64": "@KEY@"})
r["approvals"] = call("POST", f"{P}/intents/@INTENT@/approvals")
r["check"] = call("POST", f"{P}/approvals/apr-0001/check")
r["authorisation"] = call("POST", f"{P}/approvals/apr-0001/authorisation", {"envelope": {}})
r["spend"] = call("POST", f"{P}/approvals/apr-0001/spend", {"envelope": {}})
r["whoami"] = call("GET", "/v1/whoami")
r["revoke_owner"] = call("DELETE", "/v1/tokens/owner")
r["create"] = call("POST", "/v1/tokens", {"name": "mine", "role": "admin"})
r["list"] = call("GET", "/v1/tokens")

# 2. setsid + double fork, the environment cleared: once its parent is gone and it has
#    been reparented, the grandchild asks who it is.
rd, wr = os.pipe()
if os.fork() == 0:
    os.setsid()
    middle = os.getpid()
    if os.fork() == 0:
        os.close(rd)
        os.environ.clear()
        import time
        for _ in range(1000):
            if os.getppid() != middle:
                break
            time.sleep(0.01)
        answer = call("GET", "/v1/whoami")
        answer.append(os.getppid())
        os.write(wr, json.dumps(answer).encode())
        os._exit(0)
    os._exit(0)
os.close(wr)
got = b""
while True:
    b = os.read(rd, 65536)
    if not b:
        break
    got += b
r["grandchild"] = json.loads(got)

# 3. The proctor binary itself, at a terminal the script made (session leader, foreground).
child, fd = pty.fork()
if child == 0:
    os.execv("@PROCTOR@", ["@PROCTOR@", "--home", home, "publish", "approve", "@INTENT@"])
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(child, 0)
r["proctor_in_pty"] = {"code": os.waitstatus_to_exitcode(st), "output": out.decode(errors="replace")}

tmp = "attack.json.tmp"
with open(tmp, "w") as f:
    json.dump(r, f)
os.rename(tmp, "attack.json")
"#;

/// A key replaced at the terminal (`proctor key rotate`) authorises nothing new. Put back at
/// publish.p8 (an old copy restored), `proctor publish approve` with it refuses itself at the
/// terminal, after the passphrase and before anything is signed: the server's check offers
/// only the keys that may sign, and the revoked key is not one (`key_not_registered`, a
/// redacted receipt; the server never sees an authorisation from it, and would refuse one:
/// `bad_authorisation`, tested at the handler in src/server/publish_api/tests.rs). With the
/// replacement key it publishes, and the receipt is signed with it. The person's own pin
/// (docs/security.md) shows the key they did not pin; pinned, it verifies. Revoked in turn
/// (`key generate --path`, then `key revoke --signed-by`), the receipt stays checkable and
/// the report says when its key was revoked.
#[test]
fn a_revoked_keys_authorisation_is_refused() {
    const NEW_PASS: &str = "the replacement key's passphrase";
    const THIRD_PASS: &str = "the third key's long passphrase";
    let w = World::new();
    let it = w.propose("revoked-branch", "Body.\n");
    let id = it["id"].as_str().unwrap().to_string();
    let revision = it["revision"].as_str().unwrap().to_string();
    let keys_dir = w.home().join("config/keys");
    let home_key = keys_dir.join("publish.p8");
    let old_id = keys::public_info(&home_key).unwrap().key_id;

    // The person pins their key in their own allowed_signers, outside the proctor home: the
    // commands as docs/security.md gives them.
    let person = tempfile::tempdir().unwrap();
    let bin = person.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_proctor"), bin.join("proctor")).unwrap();
    let script = |body: &str, receipt: &Path| {
        Command::new("bash")
            .args(["--norc", "--noprofile", "-c", body])
            .env("HOME", person.path())
            .env("PROCTOR_HOME", w.home())
            .env_remove("PROCTOR_TOKEN")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("R", receipt)
            .output()
            .unwrap()
    };
    let pin_home_key = "set -e; umask 077; mkdir -p ~/.ssh
         proctor key show --json | jq -r .allowed_signers >> ~/.ssh/proctor_allowed_signers
         cat ~/.ssh/proctor_allowed_signers";
    let pin = script(pin_home_key, Path::new("/dev/null"));
    assert!(
        pin.status.success(),
        "{}",
        String::from_utf8_lossy(&pin.stderr)
    );

    // `proctor key rotate` at the terminal: the current key signs one change that adds its
    // replacement and revokes itself.
    let mut t = Term::proctor(w.home(), &["key", "rotate"]);
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{PASSPHRASE}\r"));
    t.wait_for_n("Passphrase: ", 1);
    t.type_keys(&format!("{NEW_PASS}\r"));
    t.wait_for("Passphrase again: ");
    t.type_keys(&format!("{NEW_PASS}\r"));
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    let new = keys::public_info(&home_key).unwrap();
    let new_id = new.key_id.clone();
    assert_ne!(new_id, old_id, "publish.p8 is the replacement");
    let revoked = w.ledger("authority.key.revoked");
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0]["key_id"], old_id.as_str());
    assert_eq!(revoked[0]["signed_by"], old_id.as_str());

    // The revoked key put back at publish.p8 (the replacement moved aside).
    let retired = keys_dir.join(format!("publish.{}.retired.p8", &old_id[..16]));
    let aside = keys_dir.join("replacement.p8");
    let swap = |from: &Path, to: &Path| {
        std::fs::rename(from, to).unwrap();
        std::fs::rename(keys::public_path(from), keys::public_path(to)).unwrap();
    };
    swap(&home_key, &aside);
    std::fs::copy(&retired, &home_key).unwrap();
    std::fs::copy(keys::public_path(&retired), keys::public_path(&home_key)).unwrap();
    for f in [home_key.clone(), keys::public_path(&home_key)] {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    assert_eq!(keys::public_info(&home_key).unwrap().key_id, old_id);
    let approve = |passphrase: &str| {
        let mut t = Term::proctor(w.home(), &["publish", "approve", &id]);
        t.wait_for("Revision: ");
        t.type_keys(&format!("{revision}\r"));
        t.wait_for("Passphrase for the publish key: ");
        t.type_keys(&format!("{passphrase}\r"));
        let code = t.exit_code();
        (code, t.text())
    };
    let (code, out) = approve(PASSPHRASE);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("key_not_registered") && out.contains(&old_id),
        "{out}"
    );
    assert!(!out.contains(PASSPHRASE), "{out}");
    w.assert_refused_receipt("key_not_registered");
    assert!(
        w.ledger("publish.authorisation.minted").is_empty(),
        "no authorisation reached the server"
    );
    let codes: Vec<Value> = w
        .ledger("publish.approval.refused")
        .iter()
        .map(|e| e["code"].clone())
        .collect();
    assert_eq!(codes, [json!("key_not_registered")]);
    assert_eq!(w.remote_tip("revoked-branch"), None);
    assert!(w.forge.requests().is_empty());

    // The replacement back at publish.p8: it publishes, and the receipt is signed with it.
    std::fs::remove_file(&home_key).unwrap();
    std::fs::remove_file(keys::public_path(&home_key)).unwrap();
    swap(&aside, &home_key);
    let (code, out) = approve(NEW_PASS);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        w.remote_tip("revoked-branch").as_deref(),
        Some(revision.as_str())
    );
    let minted = w.ledger("publish.authorisation.minted");
    assert_eq!(minted.len(), 1);
    assert_eq!(minted[0]["key_id"], new_id.as_str());
    let receipt = w.receipts().pop().unwrap();
    assert!(out.contains(&receipt.display().to_string()), "{out}");
    let new_vk = new.verifying_key().unwrap();
    let old_vk = keys::public_info(&retired)
        .unwrap()
        .verifying_key()
        .unwrap();
    assert!(verify_receipt_file(&receipt, &[new_vk]).unwrap().ok());
    assert!(
        !verify_receipt_file(&receipt, &[old_vk]).unwrap().ok(),
        "the revoked key did not sign it"
    );
    let verify = || -> Value {
        let out =
            w.s.home
                .run(&["receipt", "verify", receipt.to_str().unwrap(), "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(verify()["ok"], true, "{}", verify());

    // The person's pin holds the revoked key only: ssh-keygen refuses the receipt, signed by
    // a key they did not pin (the home's registry trusts it, the pin does not).
    let check = "ssh-keygen -Y verify -f ~/.ssh/proctor_allowed_signers -I proctor \
                 -n proctor-receipt -s \"$R.sig\" < \"$R\"";
    let out = script(check, &receipt);
    assert!(!out.status.success(), "an unpinned key must not verify");
    assert!(
        String::from_utf8_lossy(&[out.stdout.as_slice(), out.stderr.as_slice()].concat())
            .contains("Could not verify signature"),
        "{out:?}"
    );
    let who = script(
        "ssh-keygen -Y check-novalidate -n proctor-receipt -s \"$R.sig\" < \"$R\"",
        &receipt,
    );
    assert!(who.status.success(), "{who:?}");
    // Pinned (the same documented commands, now that publish.p8 is the replacement), it
    // verifies.
    let pin = script(pin_home_key, &receipt);
    assert!(
        String::from_utf8_lossy(&pin.stdout).contains(&new.openssh),
        "{pin:?}"
    );
    let out = script(check, &receipt);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&[out.stdout.as_slice(), out.stderr.as_slice()].concat())
            .contains("Good \"proctor-receipt\" signature for proctor"),
        "{out:?}"
    );

    // That key is revoked in turn: a third key generated at its own path, signed by the
    // home's key, then the revocation signed by the third. The receipt stays checkable, and
    // the report says when its key was revoked.
    let third = keys_dir.join("third.p8");
    let mut t = Term::proctor(
        w.home(),
        &["key", "generate", "--path", third.to_str().unwrap()],
    );
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{NEW_PASS}\r"));
    t.wait_for_n("Passphrase: ", 1);
    t.type_keys(&format!("{THIRD_PASS}\r"));
    t.wait_for("Passphrase again: ");
    t.type_keys(&format!("{THIRD_PASS}\r"));
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    let mut t = Term::proctor(
        w.home(),
        &[
            "key",
            "revoke",
            &new_id,
            "--signed-by",
            third.to_str().unwrap(),
        ],
    );
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{THIRD_PASS}\r"));
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    let revoked = w.ledger("authority.key.revoked");
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    assert_eq!(revoked[1]["key_id"], new_id.as_str());
    let r = verify();
    assert_eq!(r["ok"], true, "{r}");
    let standing = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "key standing")
        .cloned()
        .unwrap_or_else(|| panic!("no key standing check: {r}"));
    assert_eq!(standing["state"], "holds", "{standing}");
    assert!(
        standing["detail"].as_str().unwrap().contains("revoked at"),
        "{standing}"
    );
}

/// Every publish route needs a token and its role; approval routes refuse agents.
#[test]
fn publish_routes_need_their_role_and_a_person() {
    let s = DemoServer::start(&[]);
    let sock = s.home.socket();
    let read = s.json_token("read", "viewer");
    let agent = s.home.json(&[
        "token",
        "create",
        "--role",
        "write",
        "--name",
        "bot",
        "--principal",
        "agent",
        "--json",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let routes = [
        ("GET", format!("{PUB}/intents")),
        ("GET", format!("{PUB}/intents/int-0001")),
        ("POST", format!("{PUB}/intents")),
        ("POST", format!("{PUB}/intents/int-0001/approvals")),
        ("POST", format!("{PUB}/approvals/apr-x/check")),
        ("POST", format!("{PUB}/approvals/apr-x/refusal")),
        ("POST", format!("{PUB}/approvals/apr-x/authorisation")),
        ("POST", format!("{PUB}/approvals/apr-x/spend")),
        ("POST", format!("{PUB}/approvals/apr-x/receipt")),
    ];
    for (m, p) in &routes {
        assert_eq!(http_status(&sock, m, p, None), 401, "{m} {p}");
        if *m == "POST" {
            assert_eq!(http_status(&sock, m, p, Some(&read)), 403, "{m} {p}");
        }
    }
    // The approval routes need a person at a terminal as the kernel sees it: this test
    // process is neither the proctor binary nor at one, whatever token it holds.
    for (m, p) in &routes[3..] {
        for token in [&agent, &s.token] {
            let (code, v) = call_as(&sock, Some(token), m, p, Some(json!({})));
            assert_eq!(code, 403, "{m} {p}: {v}");
            assert_eq!(v["error"]["code"], "authority_refused", "{m} {p}");
            let msg = v["error"]["message"].as_str().unwrap();
            assert!(
                msg.contains("not this server's proctor binary") && msg.contains("Remedy"),
                "{msg}"
            );
        }
    }
    // Anything else under the base is refused by default.
    assert_eq!(
        http_status(
            &sock,
            "DELETE",
            &format!("{PUB}/intents/int-0001"),
            Some(&s.token)
        ),
        403
    );
    // Proposing without a bound candidate says what to do.
    let (code, v) = s.call(
        "POST",
        &format!("{PUB}/intents"),
        Some(json!({"run": "run-0001", "remote": "origin", "branch": "b", "title": "t"})),
    );
    assert_eq!(code, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no bound candidate")
    );
}
