//! `proctor factory run --reviewer tribunal` end to end: the real binary and server on a
//! temporary home, a real git repository and linked worktree, the stand-in worker (the claude
//! fake's headless form, scripted by `!worker` and `!repair` lines of the task, behind a
//! shim that counts its invocations in a file) and the tribunal's jurors on the fake fleet on
//! loopback (`tribunal::fleet`), routed by a `config/tribunal.toml` written for each test.
//!
//! What each test refutes: a unanimous pass is the only APPROVE, bound to the round's record
//! and the candidate the round judged; a refusal gets exactly one repair that is given the
//! findings, a second round judges the repaired bytes, and a second refusal is exit 3 with no
//! second repair; a round that gives no verdict (held, or never seated) fails the run typed;
//! no juror of the worker's vendor is ever sent the candidate.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::ShimEnv;
use common::factory::{stderr, worktree_repo};
use proctor::tribunal::fleet::{Fleet, FleetScript};
use serde_json::Value;

/// A repository with one commit and a fresh linked worktree of it.
struct Repo {
    dir: tempfile::TempDir,
    wt: PathBuf,
}

fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let (_, wt) = worktree_repo(
        dir.path(),
        ("main", "wt", "factory"),
        &[("src/lib.txt", "one\n")],
    );
    Repo { dir, wt }
}

/// One rung of a test registry.
fn rung(ladder: &str, backend: &str, model: &str, family: &str, url: &str, extra: &str) -> String {
    format!(
        "[[{ladder}]]\nbackend = \"{backend}\"\nmodel = \"{model}\"\nfamily = \"{family}\"\n\
         base_url = \"{url}\"\ntimeout_secs = 2\n{extra}\n"
    )
}

/// A lens's ladder: the rungs given (backend openai), then a local Ollama tail.
fn ladder(tier: &str, rungs: &[(&str, &str, &str)], tail: (&str, &str)) -> String {
    let mut t = String::new();
    for (model, family, url) in rungs {
        t += &rung(&format!("ladder.{tier}"), "openai", model, family, url, "");
    }
    t += &rung(
        &format!("ladder.{tier}"),
        "ollama",
        tail.0,
        "alibaba",
        tail.1,
        "local = true",
    );
    t
}

const DEAD: &str = "http://127.0.0.1:9/v1";
const DEAD_OLLAMA: &str = "http://127.0.0.1:9";

/// The world of one test: the home with the shims (the claude shim counts its calls), the
/// fake fleet, and a registry.
struct World {
    e: ShimEnv,
    fleet: Fleet,
    calls: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let e = {
            let mut e = ShimEnv::new();
            e.h.path = Some(e.path_var.clone().into());
            e
        };
        // The claude shim (the worker and the repair) appends a line per invocation to a
        // file outside every worktree, then runs the fake as before (still a demo shim).
        let calls = tempfile::tempdir().unwrap();
        let shim = e._shims.path().join("claude");
        let body = std::fs::read_to_string(&shim).unwrap();
        let log = calls.path().join("claude-calls");
        let counted = body.replacen(
            "\nexec ",
            &format!("\necho invoked >> '{}'\nexec ", log.display()),
            1,
        );
        assert_ne!(counted, body, "the shim has the shape install_shims writes");
        std::fs::write(&shim, counted).unwrap();
        // The home exists once the server has answered once.
        e.h.ok(&["factory", "list"]);
        let fleet = Fleet::start(FleetScript::default()).unwrap();
        World { e, fleet, calls }
    }

    /// Writes `config/tribunal.toml`: one lens on `deep-state` and one on `generalist`,
    /// each ladder given as (model, family, url) rungs before a local tail that passes (on
    /// the fleet) or is not there (`live_tails` false for the generalist's).
    fn registry(
        &self,
        deep: &[(&str, &str, &str)],
        general: &[(&str, &str, &str)],
        general_tail_live: bool,
    ) {
        let ol = self.fleet.ollama_url();
        let general_tail = if general_tail_live {
            ol.clone()
        } else {
            DEAD_OLLAMA.to_string()
        };
        let mut t = String::from(
            "[[lens]]\nname = \"defect\"\ncharter = \"Find code that does not do what the intent says.\"\ntier = \"deep-state\"\n\n\
             [[lens]]\nname = \"generalist\"\ncharter = \"Refuse anything that should not ship.\"\ntier = \"generalist\"\n\n",
        );
        t += &ladder("deep-state", deep, ("fake-pass@local1", &ol));
        t += &ladder("generalist", general, ("fake-pass@local2", &general_tail));
        self.write_registry(&t);
    }

    fn write_registry(&self, text: &str) {
        let path = self.e.h.path().join("config/tribunal.toml");
        std::fs::write(&path, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn oa(&self) -> String {
        self.fleet.openai_url()
    }

    /// `factory run --reviewer tribunal` on `r`'s worktree; asserts the exit code.
    fn run(&self, r: &Repo, task: &str, extra: &[&str], code: i32) -> (Value, Output) {
        let mut c = self.e.h.cmd();
        c.args(["factory", "run", "--workspace"])
            .arg(&r.wt)
            .args(["--task", task, "--reviewer", "tribunal", "--out"])
            .arg(r.dir.path().join("r.json"))
            .args(["--timeout", "60s"])
            .args(extra);
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not the receipt ({e}):\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                stderr(&out)
            )
        });
        (rec, out)
    }

    /// How many times the worker's tool (the claude shim) was started.
    fn claude_calls(&self) -> usize {
        std::fs::read_to_string(self.calls.path().join("claude-calls"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// The models the fleet was sent a chat by (the convocations that reached a juror).
    fn asked(&self) -> Vec<String> {
        self.fleet
            .requests()
            .iter()
            .filter(|r| r.path.contains("chat"))
            .filter_map(|r| r.model.clone())
            .collect()
    }
}

/// The evidence entry of `role`'s `file`.
fn evidence<'a>(rec: &'a Value, role: &str, file: &str) -> &'a Value {
    rec["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == role && e["file"] == file)
        .unwrap_or_else(|| panic!("no evidence {role}/{file} in {}", rec["evidence"]))
}

/// The bytes of an evidence entry, checked against its bound size and SHA-256.
fn bound_bytes(ev: &Value) -> Vec<u8> {
    use sha2::Digest;
    let b = std::fs::read(ev["path"].as_str().unwrap()).unwrap();
    assert_eq!(ev["bytes"], b.len());
    assert_eq!(ev["sha256"], hex::encode(sha2::Sha256::digest(&b)));
    b
}

/// The round a review's evidence binds (its `round.json`).
fn round_of(rec: &Value, review: u32) -> Value {
    let ev = evidence(rec, &format!("review-{review}"), "round.json");
    serde_json::from_slice(&bound_bytes(ev)).unwrap()
}

fn ledger_events(w: &World, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(w.e.h.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn roles(rec: &Value) -> Vec<String> {
    rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_unanimous_tribunal_approves_and_the_receipt_binds_its_round_and_candidate() {
    let w = World::new();
    let oa = w.oa();
    w.registry(
        &[
            ("fake-pass@d1", "xai", &oa),
            ("fake-pass@d2", "deepseek", &oa),
            ("fake-pass@d3", "mistral", &oa),
        ],
        &[
            ("fake-pass@g1", "deepseek", &oa),
            ("fake-pass@g2", "xai", &oa),
            ("fake-pass@g3", "mistral", &oa),
        ],
        true,
    );
    let r = repo();
    let (rec, out) = w.run(&r, "Say two\n!worker write src/lib.txt two", &[], 0);
    assert_eq!(rec["status"], "completed");
    assert_eq!(rec["ok"], true);
    assert_eq!(rec["reviewer"]["tool"], "tribunal");
    assert_eq!(rec["repairs"], 0);
    assert!(
        rec["publicationAuthority"]
            .as_str()
            .unwrap()
            .starts_with("none")
    );
    let reviews = rec["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0]["verdict"], "APPROVE");
    assert_eq!(reviews[0]["identity"], rec["candidate"]["digest"]);
    assert_eq!(roles(&rec), ["worker", "review-1"]);
    assert_eq!(w.claude_calls(), 1, "one worker, no repair");
    assert!(
        stderr(&out).contains("completed (approved"),
        "{}",
        stderr(&out)
    );

    // The review names the round and the candidate it judged.
    let round_id = reviews[0]["round"]
        .as_str()
        .expect("the review names its round");
    let cand_id = reviews[0]["candidate"]
        .as_str()
        .expect("the review names the candidate bound");
    // The round's record is the step's evidence: the very bytes the ledger recorded.
    let round = round_of(&rec, 1);
    assert_eq!(round["id"], round_id);
    assert_eq!(round["state"], "unanimous_pass", "{}", round["causes"]);
    assert_eq!(round["candidate"], cand_id);
    assert_eq!(round["run_ref"], rec["run"]);
    assert_eq!(round["identity"]["digest"], rec["candidate"]["digest"]);
    assert_eq!(round["builder_family"], "anthropic");
    let ev = evidence(&rec, "review-1", "round.json");
    let recorded = ledger_events(&w, "tribunal.round.recorded");
    let recorded = recorded
        .iter()
        .find(|v| v["round"] == round_id)
        .expect("the ledger records the round");
    assert_eq!(recorded["unanimous"], true);
    assert_eq!(
        recorded["round_sha256"], ev["sha256"],
        "the evidence is the record the ledger bound"
    );
    let stored = w.e.h.json(&["tribunal", "show", round_id, "--json"]);
    assert_eq!(stored["state"], "unanimous_pass");
    assert_eq!(stored["identity"], round["identity"]);
    // The candidate is bound, for this factory run, on the bytes the receipt names.
    let cand = w.e.h.json(&["candidate", "show", cand_id, "--json"]);
    assert_eq!(cand["run_ref"], rec["run"], "{cand}");
    assert_eq!(cand["identity"]["digest"], rec["candidate"]["digest"]);
    // Every seat was really asked: a juror of each lens answered.
    let asked = w.asked();
    assert!(asked.iter().any(|m| m == "fake-pass@d1"), "{asked:?}");
    assert!(asked.iter().any(|m| m == "fake-pass@g1"), "{asked:?}");
    // The receipt binds the ledger, which verifies.
    w.e.h.ok(&["ledger", "verify"]);
}

#[test]
fn a_refusal_gets_one_repair_with_the_findings_and_a_second_refusal_exits_3() {
    let w = World::new();
    let oa = w.oa();
    // One lens refuses with findings, the other answers garbage (which counts as refuse).
    w.registry(
        &[
            ("fake-refuse@d1", "xai", &oa),
            ("fake-refuse@d2", "deepseek", &oa),
            ("fake-refuse@d3", "mistral", &oa),
        ],
        &[
            ("fake-garbage@g1", "deepseek", &oa),
            ("fake-garbage@g2", "xai", &oa),
            ("fake-garbage@g3", "mistral", &oa),
        ],
        true,
    );
    let r = repo();
    let task = "!worker write src/lib.txt two\n!repair write src/lib.txt three";
    let (rec, out) = w.run(&r, task, &[], 3);
    assert_eq!(rec["status"], "rejected");
    assert_eq!(rec["ok"], false);
    assert!(stderr(&out).contains("rejected"), "{}", stderr(&out));
    // Exactly one repair, counted by the worker tool's real starts: worker + repair.
    assert_eq!(w.claude_calls(), 2, "the worker and one repair, never more");
    assert_eq!(rec["repairs"], 1);
    assert_eq!(roles(&rec), ["worker", "review-1", "repair", "review-2"]);
    assert_eq!(
        std::fs::read_to_string(r.wt.join("src/lib.txt")).unwrap(),
        "three\n"
    );
    let reviews = rec["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0]["verdict"], "REQUEST_CHANGES");
    assert_eq!(reviews[1]["verdict"], "REQUEST_CHANGES");
    assert_eq!(reviews[0]["identity"], rec["candidate"]["digest"]);
    assert_eq!(reviews[1]["identity"], rec["repairedCandidate"]["digest"]);
    assert_ne!(
        rec["candidate"]["digest"],
        rec["repairedCandidate"]["digest"]
    );

    // Each review is its own round on its own candidate; the second judged the repaired bytes.
    let (r1, r2) = (round_of(&rec, 1), round_of(&rec, 2));
    assert_eq!(r1["state"], "refused");
    assert_eq!(r2["state"], "refused");
    assert_eq!(reviews[0]["round"], r1["id"]);
    assert_eq!(reviews[1]["round"], r2["id"]);
    assert_ne!(r1["id"], r2["id"]);
    assert_ne!(reviews[0]["candidate"], reviews[1]["candidate"]);
    assert_eq!(r1["identity"]["digest"], rec["candidate"]["digest"]);
    assert_eq!(r2["identity"]["digest"], rec["repairedCandidate"]["digest"]);
    assert_eq!(r2["number"], 2, "the second round of the same factory run");

    // The repair was given the findings: its prompt (the bytes the repair read) holds the
    // refusing juror's claims and names the seat that answered garbage.
    let prompt = String::from_utf8(bound_bytes(evidence(&rec, "repair", "prompt.txt"))).unwrap();
    assert!(prompt.contains("REQUEST_CHANGES"), "{prompt}");
    assert!(prompt.contains("an error path returns success"), "{prompt}");
    assert!(
        prompt.contains("a message does not name the remedy"),
        "{prompt}"
    );
    assert!(prompt.contains("[generalist]"), "{prompt}");
    assert!(prompt.contains(r1["id"].as_str().unwrap()), "{prompt}");
    let worker_prompt =
        String::from_utf8(bound_bytes(evidence(&rec, "worker", "prompt.txt"))).unwrap();
    assert!(!worker_prompt.contains("an error path returns success"));
}

#[test]
fn a_held_round_gives_no_verdict_and_the_run_fails_typed_without_approval() {
    let w = World::new();
    let oa = w.oa();
    // The generalist's only live juror never answers (a 2 s deadline); the rest are not there.
    w.registry(
        &[
            ("fake-pass@d1", "xai", &oa),
            ("fake-pass@d2", "deepseek", &oa),
            ("fake-pass@d3", "mistral", &oa),
        ],
        &[
            ("fake-silent", "deepseek", &oa),
            ("fake-pass@g2", "xai", DEAD),
            ("fake-pass@g3", "mistral", DEAD),
        ],
        false,
    );
    let r = repo();
    // A repair line is there: it must never run, a held round is not a refusal.
    let task = "!worker write src/lib.txt two\n!repair write src/lib.txt three";
    let (rec, out) = w.run(&r, task, &[], 1);
    assert_eq!(rec["status"], "failed");
    assert_ne!(rec["ok"], true);
    assert!(
        stderr(&out).contains("failed: tribunal_no_verdict"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        rec["error"]["code"], "tribunal_no_verdict",
        "{}",
        rec["error"]
    );
    let msg = rec["error"]["message"].as_str().unwrap();
    assert!(msg.contains("held"), "{msg}");
    assert!(msg.contains("Remedy"), "{msg}");
    assert!(
        rec["reviews"].as_array().unwrap().is_empty(),
        "no verdict is recorded: {}",
        rec["reviews"]
    );
    assert!(
        rec["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["verdict"].is_null()),
        "no step has a verdict: {}",
        rec["steps"]
    );
    assert_eq!(roles(&rec), ["worker", "review-1"]);
    assert_eq!(rec["steps"][1]["state"], "failed");
    assert_eq!(w.claude_calls(), 1, "no repair after a held round");
    assert_eq!(
        std::fs::read_to_string(r.wt.join("src/lib.txt")).unwrap(),
        "two\n"
    );
    // The held round is still the step's evidence, and the silent juror was really asked.
    let round = round_of(&rec, 1);
    assert_eq!(round["state"], "held", "{}", round["causes"]);
    assert!(msg.contains(round["id"].as_str().unwrap()), "{msg}");
    assert!(w.asked().iter().any(|m| m == "fake-silent"));
}

#[test]
fn a_tribunal_that_cannot_be_seated_fails_the_run_typed_before_any_juror() {
    let w = World::new();
    // A registry that breaks a rule (a ladder without a local tail) is refused whole.
    let oa = w.oa();
    w.write_registry(&format!(
        "[[lens]]\nname = \"generalist\"\ncharter = \"Refuse anything.\"\ntier = \"generalist\"\n\n{}",
        rung("ladder.generalist", "openai", "fake-pass@g1", "xai", &oa, "")
    ));
    let r = repo();
    let (rec, _) = w.run(&r, "!worker write src/lib.txt two", &[], 1);
    assert_eq!(rec["status"], "failed");
    assert_eq!(
        rec["error"]["code"], "tribunal_no_verdict",
        "{}",
        rec["error"]
    );
    let msg = rec["error"]["message"].as_str().unwrap();
    assert!(msg.contains("tribunal.toml"), "{msg}");
    assert!(rec["reviews"].as_array().unwrap().is_empty());
    assert!(w.asked().is_empty(), "no juror was asked: {:?}", w.asked());
}

#[test]
fn no_juror_of_the_workers_vendor_is_ever_sent_the_candidate() {
    let w = World::new();
    let oa = w.oa();
    // Each ladder starts on an anthropic rung, then an openai one: the first juror of
    // another vendor than the worker's sits.
    let rungs = [
        ("fake-pass@anthropic", "anthropic", oa.as_str()),
        ("fake-pass@openai", "openai", oa.as_str()),
        ("fake-pass@xai", "xai", oa.as_str()),
        ("fake-pass@deepseek", "deepseek", oa.as_str()),
    ];
    w.registry(&rungs, &rungs, true);

    // A claude worker: anthropic is excluded, refused before any send; openai sits.
    let r = repo();
    let (rec, _) = w.run(&r, "!worker write src/lib.txt two", &[], 0);
    let round = round_of(&rec, 1);
    assert_eq!(round["builder_family"], "anthropic");
    assert_eq!(round["excluded_families"], serde_json::json!(["anthropic"]));
    for seat in round["seats"].as_array().unwrap() {
        let first = &seat["routing"][0];
        assert_eq!(first["family"], "anthropic");
        assert_eq!(first["outcome"], "builder_family", "{seat}");
        assert!(first["run_id"].is_null(), "nothing was sent to it");
        assert_eq!(seat["sat"]["family"], "openai", "{seat}");
    }
    let asked = w.asked();
    assert!(
        !asked.iter().any(|m| m == "fake-pass@anthropic"),
        "{asked:?}"
    );
    assert!(asked.iter().any(|m| m == "fake-pass@openai"), "{asked:?}");

    // A codex worker: openai is excluded; the anthropic juror may judge it.
    let before = w.asked().len();
    let r = repo();
    let (rec, _) = w.run(
        &r,
        "!worker write src/lib.txt two",
        &["--worker", "codex"],
        0,
    );
    assert_eq!(rec["worker"]["tool"], "codex");
    let round = round_of(&rec, 1);
    assert_eq!(round["builder_family"], "openai");
    for seat in round["seats"].as_array().unwrap() {
        let routing = seat["routing"].as_array().unwrap();
        assert_eq!(seat["sat"]["family"], "anthropic", "{seat}");
        assert!(
            routing
                .iter()
                .all(|a| a["family"] != "openai" || a["outcome"] == "builder_family"),
            "{seat}"
        );
    }
    let asked = w.asked()[before..].to_vec();
    assert!(!asked.iter().any(|m| m == "fake-pass@openai"), "{asked:?}");
    assert!(
        asked.iter().any(|m| m == "fake-pass@anthropic"),
        "{asked:?}"
    );
}
