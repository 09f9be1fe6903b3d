//! The approval flow's own checks, behind the kernel gate. The gate stops a script before
//! these handlers, and the real binary at a terminal never replays a spend, spends before its
//! authorisation is recorded or signs for another revision; so these checks are tested here,
//! on the real handlers: a temporary home with a real git repository, a linked worktree, a
//! bare remote, a workspace with an approved policy, a bound candidate whose checks passed,
//! a proposed intent, and the caller the gate would have let through.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use axum::http::Method;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::authority::dsse::Envelope;
use crate::authority::keychange::{self, Change};
use crate::authority::keys;
use crate::evidence::Actor;
use crate::git::Git;
use crate::publish::authorisation::{self, Grant, LedgerHead};
use crate::server::testkit::{TestServer, caller, person};
use crate::sessions::record::WorktreeInfo;

const PUB: &str = "/v1/m/publish";
const POLICY: &str = "[[check]]\nname = \"present\"\nargv = [\"test\", \"-f\", \"b.txt\"]\n";

fn git(dir: &Path, args: &[&str]) -> String {
    Git::new(dir).text(args).unwrap()
}

fn ws_actor() -> crate::workspaces::Actor {
    crate::workspaces::Actor {
        token_id: "tok-person".into(),
        name: "tok-person".into(),
        principal: Principal::Person,
    }
}

fn actor() -> Actor {
    Actor {
        token_id: "tok-person".into(),
        name: "tok-person".into(),
        principal: crate::auth::Principal::Person,
    }
}

/// A proposed intent, AWAITING_AUTHORITY, on the real state of a temporary home.
struct World {
    s: TestServer,
    remote: PathBuf,
    intent: Value,
    key: SigningKey,
}

impl World {
    fn new(key_seed: u8) -> World {
        let s = TestServer::new();
        let root = s.dir.path().to_path_buf();
        let (repo, remote, wt) = (root.join("repo"), root.join("remote.git"), root.join("wt"));
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "-q", "--bare"]);
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["config", "user.name", "Ada Operator"]);
        git(&repo, &["config", "user.email", "ada@example.invalid"]);
        std::fs::write(repo.join("a.txt"), "one\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        git(
            &repo,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git(&repo, &["push", "-q", "origin", "main"]);
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "proctor/run-0001",
                wt.to_str().unwrap(),
            ],
        );

        // The workspace and its approved policy; the run's work; the candidate and its checks.
        let (home, ledger) = (&s.state.home, &s.state.ledger);
        let store = &s.state.workspaces;
        let ws =
            crate::workspaces::add(store, ledger, &ws_actor(), repo.to_str().unwrap()).unwrap();
        crate::workspaces::set_policy(store, ledger, &ws_actor(), &ws.ws_ref, POLICY).unwrap();
        crate::workspaces::approve_policy(
            store,
            ledger,
            &ws_actor(),
            &ws.ws_ref,
            &crate::evidence::policy::digest(POLICY),
        )
        .unwrap();
        let info = WorktreeInfo {
            path: wt.to_string_lossy().into_owned(),
            branch: "proctor/run-0001".into(),
            repo: std::fs::canonicalize(&repo)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            base: git(&wt, &["rev-parse", "HEAD"]),
            index_tree: git(&wt, &["write-tree"]),
            clean_at_start: true,
            workspace_ref: Some(ws.ws_ref.clone()),
        };
        std::fs::write(wt.join("a.txt"), "two\n").unwrap();
        std::fs::write(wt.join("b.txt"), "bee\n").unwrap();
        let cand = crate::candidate::bind(home, ledger, "run-0001", Some(&info), &actor()).unwrap();
        let entry = crate::evidence::checks::run(home, ledger, &s.state.checks, &cand.id, &actor())
            .unwrap();
        assert!(entry.passed(), "{entry:?}");

        // The forge: configured, unreachable (the pull request fails after the push).
        let token = home.config.join("forge.token");
        std::fs::write(&token, "ghp_unused\n").unwrap();
        let cfg = home.config.join("forge.toml");
        std::fs::write(
            &cfg,
            format!(
                "api_base = \"http://127.0.0.1:9/api/v3\"\nrepo = \"acme/widget\"\nbase = \
                 \"main\"\ntoken_file = \"{}\"\n",
                token.display()
            ),
        )
        .unwrap();
        for f in [&token, &cfg] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }

        // The first key (unsigned: the registry is empty).
        let key = SigningKey::from_bytes(&[key_seed; 32]);
        let info = keys::PublicInfo::of(&key.verifying_key());
        s.expect(
            &person(),
            201,
            Method::POST,
            "/v1/m/authority/keys",
            Some(json!({"public_key_b64": info.public_key_b64})),
        );

        let intent = s.expect(
            &person(),
            201,
            Method::POST,
            &format!("{PUB}/intents"),
            Some(
                json!({"run": "run-0001", "remote": "origin", "branch": "feature/x",
                        "title": "Change a, add b"}),
            ),
        );
        assert_eq!(intent["state"], "awaiting_authority", "{intent}");
        World {
            s,
            remote,
            intent,
            key,
        }
    }

    fn id(&self) -> String {
        self.intent["id"].as_str().unwrap().to_string()
    }

    fn revision(&self) -> String {
        self.intent["revision"].as_str().unwrap().to_string()
    }

    /// Opens and checks an approval, as the binary does first; its id and the check view.
    fn checked(&self) -> (String, Value) {
        let v = self.s.expect(
            &person(),
            201,
            Method::POST,
            &format!("{PUB}/intents/{}/approvals", self.id()),
            None,
        );
        let apr = v["approval"].as_str().unwrap().to_string();
        let view = self.s.expect(
            &person(),
            200,
            Method::POST,
            &format!("{PUB}/approvals/{apr}/check"),
            None,
        );
        (apr, view)
    }

    /// The grant the check view binds (what the binary signs).
    fn grant(&self, apr: &str, view: &Value) -> Grant {
        Grant {
            approval: apr.to_string(),
            intent: self.id(),
            revision: self.revision(),
            identity: self.intent["candidate"]["digest"]
                .as_str()
                .unwrap()
                .to_string(),
            ledger_head: serde_json::from_value::<LedgerHead>(view["ledger_head"].clone()).unwrap(),
        }
    }

    fn post(&self, apr: &str, step: &str, env: &Envelope) -> (u16, Value) {
        self.s.call(
            &person(),
            Method::POST,
            &format!("{PUB}/approvals/{apr}/{step}"),
            Some(json!({"envelope": env})),
        )
    }

    fn remote_tip(&self) -> String {
        git(
            &self.remote,
            &[
                "for-each-ref",
                "--format=%(objectname)",
                "refs/heads/feature/x",
            ],
        )
    }

    fn refusal_codes(&self) -> Vec<String> {
        self.s
            .ledger("publish.approval.refused")
            .iter()
            .map(|e| e["code"].as_str().unwrap().to_string())
            .collect()
    }
}

/// One authorisation, spent: the second spend of the same envelope is a replay, refused
/// before anything else and recorded; the adapter ran once.
#[test]
fn a_second_spend_of_the_same_authorisation_is_a_replay_refused_and_recorded() {
    let w = World::new(31);
    let (apr, view) = w.checked();
    let (_, env) = authorisation::mint(&w.grant(&apr, &view), &w.key).unwrap();
    let (code, v) = w.post(&apr, "authorisation", &env);
    assert_eq!(code, 201, "{v}");
    let (code, first) = w.post(&apr, "spend", &env);
    assert_eq!(code, 200, "{first}");
    // The push happened (the unreachable forge makes the pull request fail afterwards).
    assert_eq!(w.remote_tip(), w.revision());
    assert_eq!(first["error"]["code"], "pull_request_failed", "{first}");

    let (code, v) = w.post(&apr, "spend", &env);
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "replay", "{v}");
    let replays = w.s.ledger("publish.authorisation.replay_refused");
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert_eq!(replays[0]["nonce_sha256"], v_nonce(&env));
    assert_eq!(w.s.ledger("publish.authorisation.spent").len(), 1);
    assert_eq!(w.s.ledger("publish.adapter.finished").len(), 1);
}

/// A change to one field of a grant (given a way to alter a hex string).
type Bend = fn(&mut Grant, &dyn Fn(&str) -> String);

fn v_nonce(env: &Envelope) -> String {
    let p: authorisation::Payload = serde_json::from_slice(&env.payload_bytes().unwrap()).unwrap();
    p.nonce_sha256()
}

/// An authorisation signed by a registered key but bound to anything other than what the
/// check bound (another revision, candidate identity, ledger head, approval or intent) is
/// refused at `…/authorisation` (422 `bad_authorisation`, the field named), recorded, with a
/// redacted receipt; nothing is appended or spent.
#[test]
fn an_authorisation_for_another_revision_or_binding_is_refused() {
    let w = World::new(32);
    let other = |s: &str| {
        let mut c: Vec<char> = s.chars().collect();
        c[0] = if c[0] == 'a' { 'b' } else { 'a' };
        c.into_iter().collect::<String>()
    };
    let cases: [(&str, Bend); 5] = [
        ("revision", |g, o| g.revision = o(&g.revision)),
        ("identity", |g, o| g.identity = o(&g.identity)),
        ("ledger head", |g, _| g.ledger_head.seq -= 1),
        ("approval", |g, _| {
            g.approval = "apr-000000000000000000000000".into()
        }),
        ("intent", |g, _| g.intent = "int-9999".into()),
    ];
    for (i, (field, change)) in cases.iter().enumerate() {
        let (apr, view) = w.checked();
        let mut grant = w.grant(&apr, &view);
        change(&mut grant, &other);
        let (_, env) = authorisation::mint(&grant, &w.key).unwrap();
        let (code, v) = w.post(&apr, "authorisation", &env);
        assert_eq!(code, 422, "{field}: {v}");
        assert_eq!(v["error"]["code"], "bad_authorisation", "{field}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "{field}: {v}"
        );
        assert_eq!(w.refusal_codes().len(), i + 1);
        // The approval is closed: not even the right authorisation is taken now.
        let (_, good) = authorisation::mint(&w.grant(&apr, &view), &w.key).unwrap();
        let (code, v) = w.post(&apr, "authorisation", &good);
        assert_eq!(code, 409, "{field}: {v}");
        assert_eq!(v["error"]["code"], "closed", "{field}: {v}");
    }
    assert!(w.refusal_codes().iter().all(|c| c == "bad_authorisation"));
    assert!(w.s.ledger("publish.authorisation.minted").is_empty());
    assert!(w.s.ledger("publish.authorisation.spent").is_empty());
    assert_eq!(w.remote_tip(), "");
    // The receipts say so, redacted.
    let last = w.s.ledger("publish.receipt.written");
    assert_eq!(last.last().unwrap()["outcome"], "refused");
}

/// A spend before its authorisation is recorded is refused (409 `not_authorised`) and spends
/// nothing; once one is recorded, a spend of another authorisation for the same grant (a
/// valid signature, another nonce) is refused too. An agent opens no approval.
#[test]
fn spending_before_the_authorisation_is_recorded_is_refused() {
    let w = World::new(33);
    let (code, v) = w.s.call(
        &caller("tok-agent", Principal::Agent),
        Method::POST,
        &format!("{PUB}/intents/{}/approvals", w.id()),
        None,
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "agent_refused", "{v}");

    let (apr, view) = w.checked();
    let grant = w.grant(&apr, &view);
    let (_, env) = authorisation::mint(&grant, &w.key).unwrap();
    let (code, v) = w.post(&apr, "spend", &env);
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "not_authorised", "{v}");
    assert!(w.s.ledger("publish.authorisation.spent").is_empty());
    assert!(w.s.ledger("publish.adapter.finished").is_empty());
    assert_eq!(w.remote_tip(), "");

    let (code, v) = w.post(&apr, "authorisation", &env);
    assert_eq!(code, 201, "{v}");
    let (_, twin) = authorisation::mint(&grant, &w.key).unwrap();
    let (code, v) = w.post(&apr, "spend", &twin);
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["error"]["code"], "bad_authorisation", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the authorisation appended"),
        "{v}"
    );
    assert!(w.s.ledger("publish.authorisation.spent").is_empty());
    assert_eq!(w.remote_tip(), "");
}

/// A key revoked by a signed change: the check offers only the key that replaced it, an
/// authorisation the revoked key signs is refused by the server (422 `bad_authorisation`),
/// and the replacement's is accepted. (The binary refuses itself before posting one:
/// `key_not_registered`, see tests/publish.rs.)
#[test]
fn a_revoked_keys_authorisation_is_refused_by_the_server() {
    let w = World::new(34);
    let old_id = keys::key_id(&w.key.verifying_key());
    let new = SigningKey::from_bytes(&[35u8; 32]);
    let new_id = keys::key_id(&new.verifying_key());
    let g =
        w.s.expect(&person(), 200, Method::GET, "/v1/m/authority/keys", None)["generation"]
            .as_u64()
            .unwrap();
    let (_, change) = keychange::sign(
        &Change {
            add: Some(new.verifying_key()),
            revoke: Some(old_id.clone()),
        },
        g,
        &w.key,
    )
    .unwrap();
    w.s.expect(
        &person(),
        201,
        Method::POST,
        "/v1/m/authority/keys/changes",
        Some(json!({"envelope": change})),
    );

    let (apr, view) = w.checked();
    assert_eq!(view["key_ids"], json!([new_id]), "{view}");
    let (_, env) = authorisation::mint(&w.grant(&apr, &view), &w.key).unwrap();
    let (code, v) = w.post(&apr, "authorisation", &env);
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["error"]["code"], "bad_authorisation", "{v}");
    assert!(w.s.ledger("publish.authorisation.minted").is_empty());
    assert_eq!(w.refusal_codes(), ["bad_authorisation"]);

    let (apr, view) = w.checked();
    let (_, env) = authorisation::mint(&w.grant(&apr, &view), &new).unwrap();
    let (code, v) = w.post(&apr, "authorisation", &env);
    assert_eq!(code, 201, "{v}");
    let minted = w.s.ledger("publish.authorisation.minted");
    assert_eq!(minted[0]["key_id"], new_id.as_str());
}

/// The null rule (docs/api.md, "Changes"): every field an intent declares is on the wire,
/// `null` when absent: `outcome` before a spend, `recorded_state` while not judged blocked,
/// `state_evaluated_at` for a state that is a fact; after the spend, `outcome` is typed.
#[test]
fn an_intent_carries_every_field_null_when_absent() {
    let w = World::new(37);
    assert!(w.intent["outcome"].is_null(), "{}", w.intent);
    assert!(
        w.intent.as_object().unwrap().contains_key("outcome"),
        "{}",
        w.intent
    );
    let listed =
        w.s.expect(&person(), 200, Method::GET, &format!("{PUB}/intents"), None);
    let item = &listed["items"][0];
    for key in ["outcome", "recorded_state", "state_evaluated_at"] {
        assert!(
            item.as_object().unwrap().contains_key(key),
            "{key} missing: {item}"
        );
    }
    assert!(item["recorded_state"].is_null(), "{item}");
    assert!(item["state_evaluated_at"].is_string(), "{item}");

    let (apr, view) = w.checked();
    let (_, env) = authorisation::mint(&w.grant(&apr, &view), &w.key).unwrap();
    assert_eq!(w.post(&apr, "authorisation", &env).0, 201);
    let (code, spent) = w.post(&apr, "spend", &env);
    assert_eq!(code, 200, "{spent}");
    let shown = w.s.expect(
        &person(),
        200,
        Method::GET,
        &format!("{PUB}/intents/{}", w.id()),
        None,
    );
    // A state that is a fact: not judged again.
    assert!(shown["state_evaluated_at"].is_null(), "{shown}");
    assert!(shown["recorded_state"].is_null(), "{shown}");
    let outcome: crate::api::publish::IntentOutcome =
        serde_json::from_value(shown["outcome"].clone()).unwrap();
    assert_eq!(outcome.approval, apr);
    assert_eq!(
        outcome.effects,
        serde_json::from_value(spent["effects"].clone()).unwrap()
    );
}

/// The publication machine is part of one server's state: an approval opened on one server
/// is unknown to another server (another home) in the same process.
#[test]
fn two_servers_share_no_approval() {
    let w = World::new(41);
    let (apr, _) = w.checked();
    let other = TestServer::new();
    let (code, v) = other.call(
        &person(),
        Method::POST,
        &format!("{PUB}/approvals/{apr}/check"),
        None,
    );
    assert_eq!(code, 404, "{v}");
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    let (code, v) = other.call(&person(), Method::GET, &format!("{PUB}/intents"), None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["items"], json!([]), "{v}");
}
