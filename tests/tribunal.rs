//! The blind tribunal end to end, as an operator drives it: a real server with the provider
//! fakes, a real git repository with a red-first test, a worktree run whose worker fixes the
//! bug, a candidate, a registry whose rungs point at the fake fleet on loopback, and the
//! verbs `tribunal red`, `tribunal convene`, `tribunal show` and `gate`.
//!
//! What it shows (issue 14, "What must show"): the builder's family (and the run's tool's)
//! refused before any send on the live ladder, the seats moved to other families; one lens
//! held for a dead juror; one lens UNVERIFIED; a pass listing a blocker turned refuse; round 2
//! on fresh bytes converging to unanimity; the gate's tribunal node satisfied only for that
//! exact identity, stale when one byte changes.

mod common;

use std::path::{Path, PathBuf};

use common::DemoServer;
use proctor::git::Git;
use proctor::tribunal::fleet::{Fleet, FleetScript};
use serde_json::{Value, json};

const WS: &str = "/v1/m/sessions/workspaces";

fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir)
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .text(args)
        .unwrap()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn sha(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

const BUGGY: &str = "add() { echo $(( $1 - $2 )); }\n";
const FIXED: &str = "add() { echo $(( $1 + $2 )); }\n";
const ALL: &str = "for t in tests/t_*.sh; do sh \"$t\" || exit 1; done\n";
const T_BASE: &str = ". ./src/lib.sh\n[ \"$(add 2 0)\" = 2 ] || exit 1\n";
const T_ADD: &str =
    ". ./src/lib.sh\n[ \"$(add 2 3)\" = 5 ] || { echo \"add 2 3 gave $(add 2 3)\"; exit 1; }\n";
const POLICY: &str = "require = [\"tribunal\"]\n\n[[check]]\nname = \"suite\"\nargv = [\"sh\", \"tests/all.sh\"]\n\n[tribunal]\ntests = [\"tests/\"]\nnew_tests = [\"sh\", \"tests/t_add.sh\"]\nregression = [\"sh\", \"tests/all.sh\"]\ndeadline_secs = 60\n";

/// One rung of a test registry.
fn rung(ladder: &str, backend: &str, model: &str, family: &str, url: &str, extra: &str) -> String {
    format!(
        "[[{ladder}]]\nbackend = \"{backend}\"\nmodel = \"{model}\"\nfamily = \"{family}\"\nbase_url = \"{url}\"\ntimeout_secs = 2\n{extra}\n"
    )
}

const LENSES: &str = "[[lens]]\nname = \"defect\"\ncharter = \"Find code that does not do what the intent says.\"\ntier = \"deep-state\"\n\n[[lens]]\nname = \"contract\"\ncharter = \"Check every signature and format the change touches.\"\ntier = \"fast-structural\"\n\n[[lens]]\nname = \"security\"\ncharter = \"Find what an attacker controls and where it reaches.\"\ntier = \"operator-security\"\n\n[[lens]]\nname = \"generalist\"\ncharter = \"Refuse anything that should not ship.\"\ntier = \"generalist\"\n\n";

/// The registry of round 1 (`mended` false) or round 2 (`mended` true: the dead juror's
/// ladder mended, a verifier of a third family added, the blocker's juror replaced).
fn registry(fleet: &Fleet, mended: bool) -> String {
    let oa = fleet.openai_url();
    let ol = fleet.ollama_url();
    let dead = "http://127.0.0.1:9/v1";
    let dead_ol = "http://127.0.0.1:9";
    let mut t = String::from(LENSES);
    // deep-state: the builder's family first (refused before any send), then xai.
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@a",
        "anthropic",
        &oa,
        "",
    );
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@g",
        "google",
        &oa,
        "",
    );
    t += &rung("ladder.deep-state", "openai", "fake-pass@x", "xai", &oa, "");
    t += &rung(
        "ladder.deep-state",
        "openai",
        "fake-pass@d",
        "deepseek",
        &oa,
        "",
    );
    t += &rung(
        "ladder.deep-state",
        "ollama",
        "fake-pass@l",
        "alibaba",
        &ol,
        "",
    );
    // fast-structural: a local model first (it passes; a verifier must agree).
    t += &rung(
        "ladder.fast-structural",
        "ollama",
        "fake-pass@q",
        "alibaba",
        &ol,
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@x2",
        "xai",
        &oa,
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@d2",
        "deepseek",
        &oa,
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "openai",
        "fake-pass@m2",
        "mistral",
        &oa,
        "",
    );
    t += &rung(
        "ladder.fast-structural",
        "ollama",
        "fake-pass@q2",
        "meta",
        &ol,
        "",
    );
    // operator-security: round 1 every juror is dead or silent; round 2 one is alive.
    if mended {
        t += &rung(
            "ladder.operator-security",
            "openai",
            "fake-pass@s",
            "xai",
            &oa,
            "",
        );
    } else {
        t += &rung(
            "ladder.operator-security",
            "openai",
            "fake-pass@s",
            "xai",
            dead,
            "",
        );
    }
    t += &rung(
        "ladder.operator-security",
        "openai",
        "fake-silent",
        "deepseek",
        &oa,
        "",
    );
    t += &rung(
        "ladder.operator-security",
        "openai",
        "fake-pass@s3",
        "mistral",
        dead,
        "",
    );
    t += &rung(
        "ladder.operator-security",
        "ollama",
        "fake-pass@s4",
        "meta",
        dead_ol,
        "local = true",
    );
    // generalist: round 1 a pass that lists a blocker.
    let first = if mended {
        "fake-pass@g1"
    } else {
        "fake-blocker"
    };
    t += &rung("ladder.generalist", "openai", first, "xai", &oa, "");
    t += &rung(
        "ladder.generalist",
        "openai",
        "fake-pass@g2",
        "deepseek",
        &oa,
        "",
    );
    t += &rung(
        "ladder.generalist",
        "openai",
        "fake-pass@g3",
        "mistral",
        &oa,
        "",
    );
    t += &rung(
        "ladder.generalist",
        "ollama",
        "fake-pass@g4",
        "meta",
        &ol,
        "",
    );
    // The verifier: round 1 only the builder's family and the seat's own are alive.
    t += &rung("verifier", "openai", "fake-pass@v1", "anthropic", &oa, "");
    t += &rung("verifier", "openai", "fake-pass@v2", "alibaba", &oa, "");
    if mended {
        t += &rung("verifier", "openai", "fake-pass@v3", "mistral", &oa, "");
    } else {
        t += &rung("verifier", "openai", "fake-pass@v3", "mistral", dead, "");
    }
    t += &rung("verifier", "openai", "fake-pass@v4", "deepseek", dead, "");
    t += &rung(
        "verifier",
        "ollama",
        "fake-pass@v5",
        "meta",
        dead_ol,
        "local = true",
    );
    t
}

struct World {
    s: DemoServer,
    _repo: tempfile::TempDir,
    ws: String,
    fleet: Fleet,
}

impl World {
    fn new() -> World {
        let s = DemoServer::start(&[]);
        let repo = tempfile::Builder::new()
            .prefix("trrepo")
            .tempdir_in("/tmp")
            .unwrap();
        let r = repo.path();
        git(r, &["init", "-q", "-b", "main"]);
        write(&r.join("src/lib.sh"), BUGGY);
        write(&r.join("tests/all.sh"), ALL);
        write(&r.join("tests/t_base.sh"), T_BASE);
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "base"]);
        write(&r.join("tests/t_add.sh"), T_ADD);
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "red"]);
        let path = std::fs::canonicalize(r).unwrap();
        let (code, v) = s.call("POST", WS, Some(json!({"path": path.to_str().unwrap()})));
        assert!(code == 200 || code == 201, "{code} {v}");
        let ws = v["ref"].as_str().unwrap().to_string();
        s.expect(
            200,
            "PUT",
            &format!("{WS}/{ws}/policy"),
            Some(json!({"policy": POLICY})),
        );
        s.expect(
            200,
            "POST",
            &format!("{WS}/{ws}/policy/approve"),
            Some(json!({"sha256": sha(POLICY)})),
        );
        let fleet = Fleet::start(FleetScript::default()).unwrap();
        World {
            s,
            _repo: repo,
            ws,
            fleet,
        }
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        self.s.home.run(args)
    }

    fn cli_json(&self, args: &[&str]) -> Value {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "proctor {args:?}: {:?}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn set_registry(&self, mended: bool) {
        let path = self.s.home.path().join("config/tribunal.toml");
        std::fs::write(&path, registry(&self.fleet, mended)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// `tribunal convene --json`: exit 0 only for a unanimous pass, 1 for a recorded round
    /// that is not (its JSON on stdout either way).
    fn convene(&self, cand: &str, criteria: &Path) -> Value {
        let out = self.cli(&[
            "tribunal",
            "convene",
            "--candidate",
            cand,
            "--builder",
            "claude-opus-4-1",
            "--intent",
            "add returns the sum of its two arguments",
            "--criteria",
            criteria.to_str().unwrap(),
            "--json",
        ]);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let unanimous = v["state"] == "unanimous_pass";
        assert_eq!(
            out.status.code(),
            Some(if unanimous { 0 } else { 1 }),
            "{v}"
        );
        v
    }
}

fn seat<'a>(round: &'a Value, lens: &str) -> &'a Value {
    round["seats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["lens"] == lens)
        .unwrap_or_else(|| panic!("no seat {lens} in {round}"))
}

fn node<'a>(gate: &'a Value, id: &str) -> Option<&'a Value> {
    fn find<'a>(n: &'a Value, id: &str) -> Option<&'a Value> {
        if n["id"] == id {
            return Some(n);
        }
        n["children"].as_array()?.iter().find_map(|c| find(c, id))
    }
    gate["nodes"].as_array()?.iter().find_map(|n| find(n, id))
}

#[test]
fn a_scripted_tribunal_excludes_the_builder_holds_the_dead_refuses_a_blocker_and_converges() {
    let w = World::new();
    let red = git(&PathBuf::from(w._repo.path()), &["rev-parse", "HEAD"]);
    // Red first: the failing test's commit is recorded before the build.
    let rec = w.cli_json(&["tribunal", "red", "--workspace", &w.ws, &red, "--json"]);
    assert_eq!(rec["commit"], red.as_str());

    let started = w.cli_json(&[
        "session",
        "start",
        "--transport",
        "pipe",
        "--tool",
        "gemini",
        "--workspace",
        &w.ws,
        "--worktree",
        "--json",
    ]);
    let run = started["ref"].as_str().unwrap().to_string();
    let wt = PathBuf::from(started["worktree"]["path"].as_str().unwrap());
    assert!(w.cli(&["session", "stop", &run]).status.success());
    write(&wt.join("src/lib.sh"), FIXED);
    let c1 = w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    let c1 = c1["id"].as_str().unwrap().to_string();
    let criteria = w._repo.path().join("criteria.md");
    std::fs::write(&criteria, "- add 2 3 is 5\n- the old tests still pass\n").unwrap();

    // Round 1.
    w.set_registry(false);
    let r1 = w.convene(&c1, &criteria);
    assert_eq!(r1["builder_family"], "anthropic");
    assert_eq!(r1["excluded_families"], json!(["anthropic", "google"]));
    assert_eq!(r1["engine"]["state"], "ok", "{}", r1["engine"]);
    // The builder's family and the run's tool's are refused before any send; the seat moved.
    let defect = seat(&r1, "defect");
    assert_eq!(defect["state"], "pass");
    assert_eq!(defect["sat"]["family"], "xai");
    let routing = defect["routing"].as_array().unwrap();
    assert_eq!(routing[0]["outcome"], "builder_family");
    assert_eq!(routing[0]["family"], "anthropic");
    assert!(
        routing[0]["run_id"].is_null(),
        "nothing was sent to the builder's family"
    );
    assert_eq!(routing[1]["outcome"], "builder_family");
    assert_eq!(routing[2]["outcome"], "sat");
    let sent: Vec<String> = w
        .fleet
        .requests()
        .iter()
        .filter_map(|r| r.model.clone())
        .collect();
    assert!(
        !sent
            .iter()
            .any(|m| m == "fake-pass@a" || m == "fake-pass@g" || m == "fake-pass@v1"),
        "a rung of an excluded family was sent to: {sent:?}"
    );
    // One lens held for dead (and silent) jurors, never a pass.
    let security = seat(&r1, "security");
    assert_eq!(security["state"], "hold", "{security}");
    let outcomes: Vec<&str> = security["routing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["dead", "no_answer", "dead", "dead"],
        "{security}"
    );
    // The local fast-structural pass has no verifier of another family: UNVERIFIED.
    let contract = seat(&r1, "contract");
    assert_eq!(contract["state"], "unverified", "{contract}");
    assert_eq!(contract["sat"]["local"], true);
    let v: Vec<&str> = contract["routing"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ladder"] == "verifier")
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        v,
        [
            "builder_family",
            "same_family_as_primary",
            "dead",
            "dead",
            "dead"
        ],
        "{contract}"
    );
    // A pass listing a blocker counts as refuse.
    let generalist = seat(&r1, "generalist");
    assert_eq!(generalist["state"], "refuse");
    assert_eq!(generalist["judged"]["verdict"]["verdict"], "pass");
    assert_eq!(generalist["judged"]["counted"], "refuse");
    assert!(
        generalist["cause"].as_str().unwrap().contains("blocker"),
        "{generalist}"
    );
    assert_eq!(r1["state"], "refused");
    assert_eq!(
        r1["new_findings"], 1,
        "the blocker (info findings are not defects): {r1}"
    );

    // Every verdict file is written, 0600, and names the identity and envelope digest.
    let out = PathBuf::from(r1["out_dir"].as_str().unwrap());
    use std::os::unix::fs::PermissionsExt;
    for lens in ["defect", "contract", "security", "generalist"] {
        let p = out.join(format!("verdict-{lens}.json"));
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{}", p.display());
        let doc: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(doc["identity"]["digest"], r1["identity"]["digest"]);
        assert_eq!(doc["envelope"]["digest"], r1["envelope"]["digest"]);
    }
    assert!(out.join(".proctor-tribunal").exists());

    // The gate: the tribunal is not satisfied by a refused round.
    let gate = w.cli_json(&["gate", &c1, "--json"]);
    assert_ne!(gate["state"], "awaiting_human", "{gate}");
    assert_ne!(node(&gate, "tribunal").unwrap()["state"], "satisfied");

    // The same bytes cannot be convened again.
    let again = w.cli(&[
        "tribunal",
        "convene",
        "--candidate",
        &c1,
        "--builder",
        "claude-opus-4-1",
        "--intent",
        "x",
        "--criteria",
        criteria.to_str().unwrap(),
        "--json",
    ]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already judged"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // Round 2 on fresh bytes: the finding fixed (a comment), the registry mended.
    write(&wt.join("src/lib.sh"), &format!("# add: the sum\n{FIXED}"));
    let c2 = w.cli_json(&["candidate", "bind", "--run", &run, "--json"]);
    let c2 = c2["id"].as_str().unwrap().to_string();
    w.set_registry(true);
    let r2 = w.convene(&c2, &criteria);
    assert_eq!(r2["number"], 2);
    assert_ne!(r2["envelope"]["digest"], r1["envelope"]["digest"]);
    for lens in ["defect", "contract", "security", "generalist"] {
        assert_eq!(seat(&r2, lens)["state"], "pass", "{}", seat(&r2, lens));
    }
    assert_eq!(seat(&r2, "contract")["verification"]["state"], "pass");
    assert_eq!(
        seat(&r2, "contract")["verification"]["sat"]["family"],
        "mistral"
    );
    assert_eq!(r2["state"], "unanimous_pass", "{}", r2["causes"]);
    assert_eq!(r2["convergence"]["state"], "unanimous");
    let trend = r2["convergence"]["trend"].as_array().unwrap();
    assert_eq!(trend.len(), 2);
    assert!(trend[1].as_u64() < trend[0].as_u64(), "{trend:?}");

    // The gate: the tribunal is satisfied for exactly these bytes; the person decides after.
    let gate = w.cli_json(&["gate", &c2, "--json"]);
    assert_eq!(
        node(&gate, "tribunal").unwrap()["state"],
        "satisfied",
        "{gate}"
    );
    // One byte changes: the unanimous round is stale.
    write(&wt.join("src/lib.sh"), &format!("# add: the sum.\n{FIXED}"));
    let gate = w.cli_json(&["gate", &c2, "--json"]);
    assert_eq!(gate["state"], "evidence_stale", "{gate}");
    assert_ne!(
        node(&gate, "tribunal").unwrap()["state"],
        "satisfied",
        "{gate}"
    );

    // The human views.
    let shown = w.cli(&["tribunal", "show", r1["id"].as_str().unwrap()]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("builder_family") || text.contains("builder's"),
        "{text}"
    );
}
