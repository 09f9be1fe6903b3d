//! Key trust (issue 10, section 2): every key after the first, and every revocation, is a
//! change signed at the terminal by a registered key; wrong passphrases back off, recorded by
//! the server, and a right one resets.
//!
//! The person's side is the real binary in a real pseudo-terminal, typing the passphrase. A
//! script holding the owner token (this test process: not the proctor binary, no terminal)
//! is refused by the kernel's checks before any key or passphrase handler runs (403
//! `authority_refused`). The handlers' own checks behind that gate (an unsigned second key, a
//! key of the script's own signing, a forged or replayed change, the recorded wait, a stale
//! reset proof) are tested on the handlers themselves, in src/server/authority_api/tests.rs.

mod common;

use std::path::{Path, PathBuf};

use common::DemoServer;
use common::pty::Term;
use ed25519_dalek::SigningKey;
use proctor::authority::keychange::{self, Change};
use proctor::authority::keys;
use serde_json::{Value, json};

const OLD_PASS: &str = "the old key's long passphrase";
const NEW_PASS: &str = "the second key's passphrase";
const KEYS: &str = "/v1/m/authority/keys";
const CHANGES: &str = "/v1/m/authority/keys/changes";

/// Copies both keys (each generated once for the whole binary) into the home's
/// config/keys; returns their paths.
fn install(s: &DemoServer) -> (PathBuf, PathBuf) {
    let old = common::keys::generated("publish.p8", OLD_PASS);
    let new = common::keys::generated("second.p8", NEW_PASS);
    (
        common::keys::install(s.home.path(), &old, "publish.p8"),
        common::keys::install(s.home.path(), &new, "second.p8"),
    )
}

fn id_of(path: &Path) -> String {
    keys::public_info(path).unwrap().key_id
}

fn ledger(s: &DemoServer, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(s.home.ledger())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn item(s: &DemoServer, key_id: &str) -> Value {
    let v = s.expect(200, "GET", KEYS, None);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_id"] == key_id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// `proctor key register` of the home's key, the first key: a person at the terminal.
fn register_first(s: &DemoServer) {
    let mut t = Term::proctor(s.home.path(), &["key", "register"]);
    let code = t.exit_code();
    let out = t.text();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("registered with the server"), "{out}");
}

/// Runs `proctor ARGS…` at a terminal, answers the signing key's passphrase prompt with
/// `passphrase`; the exit code and the output.
fn signed(home: &Path, args: &[&str], passphrase: &str) -> (u32, String) {
    let mut t = Term::proctor(home, args);
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{passphrase}\r"));
    let code = t.exit_code();
    (code, t.text())
}

/// The attack: an agent that holds the owner token registers its own key after the person's.
/// Refused unsigned; a second key signed at the terminal by the registered key is accepted and
/// the ledger names its signer; the revocation, signed, works, and the last key cannot be
/// revoked.
#[test]
fn a_second_key_needs_the_registered_keys_signature() {
    let s = DemoServer::start_with_env(&[]);
    let home = s.home.path();
    let (old, new) = install(&s);
    let (old_id, new_id) = (id_of(&old), id_of(&new));
    register_first(&s);

    // The agent's own key, posted with the owner token, unsigned: refused by the kernel's
    // checks before the handler runs (the handler's own refusal, `key_change_unsigned`, is
    // tested in src/server/authority_api/tests.rs); recorded; nothing changed.
    let agents = SigningKey::from_bytes(&[7u8; 32]).verifying_key();
    let info = keys::PublicInfo::of(&agents);
    let (code, v) = s.call(
        "POST",
        KEYS,
        Some(json!({"public_key_b64": info.public_key_b64})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "authority_refused", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("Remedy"),
        "the refusal names the remedy: {v}"
    );
    let items = s.expect(200, "GET", KEYS, None)["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
    let refused = ledger(&s, "authority.peer_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["route"], KEYS);
    assert!(
        ledger(&s, "authority.key.refused").is_empty(),
        "no handler ran"
    );

    // The person registers the second key, signed at the terminal by the first.
    let (code, out) = signed(
        home,
        &[
            "key",
            "register",
            "--path",
            new.to_str().unwrap(),
            "--signed-by",
            old.to_str().unwrap(),
        ],
        OLD_PASS,
    );
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(OLD_PASS), "the passphrase is never echoed");
    assert!(
        out.contains(&format!("signed by keyid=sha256-spki-der/1 {old_id}")),
        "{out}"
    );
    let k = item(&s, &new_id);
    assert_eq!(k["signed_by"], old_id.as_str(), "{k}");
    assert!(k["revoked_at"].is_null(), "{k}");
    let reg = ledger(&s, "authority.key.registered");
    let e = reg.iter().find(|e| e["key_id"] == new_id.as_str()).unwrap();
    assert_eq!(e["signed_by"], old_id.as_str(), "{e}");
    assert_eq!(e["action"], "add", "{e}");

    // The old key revoked, signed by the new one (a prefix of the id names it).
    let (code, out) = signed(
        home,
        &[
            "key",
            "revoke",
            &old_id[..12],
            "--signed-by",
            new.to_str().unwrap(),
        ],
        NEW_PASS,
    );
    assert_eq!(code, 0, "{out}");
    let k = item(&s, &old_id);
    assert!(k["revoked_at"].is_string(), "{k}");
    assert_eq!(k["revoked_signed_by"], new_id.as_str(), "{k}");
    let rev = ledger(&s, "authority.key.revoked");
    assert_eq!(rev.len(), 1);
    assert_eq!(rev[0]["key_id"], old_id.as_str());
    assert_eq!(rev[0]["signed_by"], new_id.as_str());
    let text = s.home.ok(&["key", "show"]);
    assert!(text.contains("REVOKED"), "{text}");

    // The revoked key signs nothing: not even a key change (refused by the server).
    let (code, out) = signed(
        home,
        &[
            "key",
            "revoke",
            &new_id,
            "--signed-by",
            old.to_str().unwrap(),
        ],
        OLD_PASS,
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("revoked"), "{out}");

    // The last key cannot be revoked.
    let (code, out) = signed(
        home,
        &[
            "key",
            "revoke",
            &new_id,
            "--signed-by",
            new.to_str().unwrap(),
        ],
        NEW_PASS,
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would leave no registered key"), "{out}");
    assert!(out.contains("proctor key rotate"), "{out}");
    assert!(item(&s, &new_id)["revoked_at"].is_null());
}

/// What a script holding the owner token would post, straight over the socket: a key of its
/// own unsigned, a change signed by a key of its own, a change whose signature is not its
/// claimed signer's, a change truly signed by the person's key (as if the script had it and
/// its passphrase), wrong-passphrase reports that would make the person wait, and a reset
/// proof. Each is refused by the kernel's checks (403 `authority_refused`, the script is not
/// the proctor binary at a terminal) before any handler runs, and recorded; the registry and
/// the back-off record are unchanged. (What the handlers refuse behind the gate is tested in
/// src/server/authority_api/tests.rs.)
#[test]
fn a_script_holding_the_owner_token_is_refused_at_every_key_and_passphrase_route() {
    let s = DemoServer::start_with_env(&[]);
    let (old, _) = install(&s);
    let old_id = id_of(&old);
    register_first(&s);
    let person = keys::load(&old, OLD_PASS.as_bytes()).unwrap();
    let agents = SigningKey::from_bytes(&[3u8; 32]);
    let generation = s.expect(200, "GET", KEYS, None)["generation"]
        .as_u64()
        .unwrap();
    let before = s.expect(200, "GET", KEYS, None);
    let add = |k: &SigningKey| Change {
        add: Some(k.verifying_key()),
        revoke: None,
    };
    let (_, own) = keychange::sign(&add(&agents), generation, &agents).unwrap();
    let (p, _) = keychange::sign(&add(&agents), generation, &person).unwrap();
    let forged = proctor::authority::dsse::sign(
        keychange::PAYLOAD_TYPE,
        &serde_json::to_vec(&p).unwrap(),
        &agents,
        &p.signer,
    );
    let (_, real) = keychange::sign(&add(&agents), generation, &person).unwrap();
    let passphrase = format!("/v1/m/authority/passphrase/{old_id}");
    let record = s.expect(200, "GET", &passphrase, None);
    let proof = proctor::authority::passphrase::sign_right(
        &person,
        &proctor::authority::passphrase::Record::default(),
    );
    let info = keys::PublicInfo::of(&agents.verifying_key());
    let steps = [
        (
            KEYS.to_string(),
            json!({"public_key_b64": info.public_key_b64}),
        ),
        (CHANGES.to_string(), json!({"envelope": own})),
        (CHANGES.to_string(), json!({"envelope": forged})),
        (CHANGES.to_string(), json!({"envelope": real})),
        (format!("{passphrase}/wrong"), json!({})),
        (format!("{passphrase}/right"), json!({"proof": proof})),
    ];
    for (path, body) in &steps {
        let (code, v) = s.call("POST", path, Some(body.clone()));
        assert_eq!(code, 403, "{path}: {v}");
        assert_eq!(v["error"]["code"], "authority_refused", "{path}: {v}");
    }
    let refused = ledger(&s, "authority.peer_refused");
    assert_eq!(refused.len(), steps.len(), "{refused:?}");
    for e in &refused {
        assert!(
            e["failed"]
                .as_array()
                .unwrap()
                .contains(&json!("not_proctor_binary")),
            "{e}"
        );
    }
    assert_eq!(s.expect(200, "GET", KEYS, None), before, "nothing changed");
    assert_eq!(s.expect(200, "GET", &passphrase, None), record);
    assert!(
        ledger(&s, "authority.key.refused").is_empty(),
        "no handler ran"
    );
    assert!(ledger(&s, "authority.passphrase.wrong").is_empty());
}

/// Wrong passphrases typed at the terminal: after three, each next prompt waits longer (the
/// server's record grows, doubling, bounded by its cap), the prompt is not shown before the
/// recorded time, and a right passphrase resets the record.
#[test]
fn wrong_passphrases_back_off_and_a_right_one_resets() {
    let base = 200u64;
    let s = DemoServer::start(&["--passphrase-backoff-ms", &base.to_string()]);
    let home = s.home.path();
    let (old, new) = install(&s);
    let old_id = id_of(&old);
    register_first(&s);
    let args = [
        "key",
        "register",
        "--path",
        new.to_str().unwrap(),
        "--signed-by",
        old.to_str().unwrap(),
    ];
    let record = || {
        s.expect(
            200,
            "GET",
            &format!("/v1/m/authority/passphrase/{old_id}"),
            None,
        )
    };
    assert_eq!(record()["failures"], 0);

    let mut waits = Vec::new();
    for attempt in 1..=6u64 {
        let before = record();
        let not_before = before["not_before"].as_str().map(|t| {
            chrono::DateTime::parse_from_rfc3339(t)
                .unwrap()
                .with_timezone(&chrono::Utc)
        });
        let mut t = Term::proctor(home, &args);
        t.wait_for("Passphrase of the signing key");
        let shown_at = chrono::Utc::now();
        if let Some(nb) = not_before {
            assert!(
                shown_at >= nb,
                "attempt {attempt}: the prompt came before the recorded wait ended ({nb})"
            );
        }
        t.type_keys("not the passphrase at all\r");
        let code = t.exit_code();
        let out = t.text();
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("wrong passphrase"), "{out}");
        assert!(
            out.contains(&format!("wrong passphrase {attempt} in a row")),
            "{out}"
        );
        let r = record();
        assert_eq!(r["failures"], attempt, "{r}");
        assert!(r["wait_ms"].as_u64().unwrap() <= r["cap_ms"].as_u64().unwrap());
        waits.push(r["wait_ms"].as_u64().unwrap());
    }
    assert_eq!(waits, [0, 0, base, 2 * base, 4 * base, 8 * base]);
    assert_eq!(record()["cap_ms"], base * 60);
    // Each recorded in the ledger with its attempt number and wait.
    let events = ledger(&s, "authority.passphrase.wrong");
    let recorded: Vec<(u64, u64)> = events
        .iter()
        .map(|e| {
            (
                e["attempt"].as_u64().unwrap(),
                e["wait_ms"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        (1..=6).zip(waits.iter().copied()).collect::<Vec<_>>()
    );
    assert!(events.iter().all(|e| e["key_id"] == old_id.as_str()));
    assert!(item(&s, &id_of(&new)).is_null(), "nothing was registered");

    // The right passphrase, after the wait: accepted, and the record reset.
    let nb = chrono::DateTime::parse_from_rfc3339(record()["not_before"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    let mut t = Term::proctor(home, &args);
    t.wait_for("Passphrase of the signing key");
    assert!(
        chrono::Utc::now() >= nb,
        "the prompt came before the recorded wait"
    );
    t.type_keys(&format!("{OLD_PASS}\r"));
    let code = t.exit_code();
    assert_eq!(code, 0, "{}", t.text());
    let r = record();
    assert_eq!(r["failures"], 0, "{r}");
    let resets = ledger(&s, "authority.passphrase.reset");
    assert_eq!(resets.len(), 1);
    assert_eq!(resets[0]["after_failures"], 6);

    // Counting starts again from one, without a wait.
    let mut t = Term::proctor(
        home,
        &[
            "key",
            "revoke",
            &id_of(&new),
            "--signed-by",
            old.to_str().unwrap(),
        ],
    );
    t.wait_for("Passphrase of the signing key");
    t.type_keys("wrong again, once\r");
    assert_eq!(t.exit_code(), 1);
    let r = record();
    assert_eq!(r["failures"], 1, "{r}");
    assert_eq!(r["wait_ms"], 0, "{r}");
}

/// `proctor key rotate`: the current key signs one change that adds its replacement and
/// revokes itself; the files follow (the retired key kept, the new one at publish.p8). Then
/// `proctor key generate --path` makes a further key, signed by the home's key.
#[test]
fn rotate_replaces_the_key_in_one_signed_change_and_generate_signs_new_keys() {
    let s = DemoServer::start_with_env(&[]);
    let home = s.home.path();
    let (old, _) = install(&s);
    let old_id = id_of(&old);
    register_first(&s);
    let rotated_pass = "the rotated key's passphrase";

    let mut t = Term::proctor(home, &["key", "rotate"]);
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{OLD_PASS}\r"));
    t.wait_for_n("Passphrase: ", 1);
    t.type_keys(&format!("{rotated_pass}\r"));
    t.wait_for("Passphrase again: ");
    t.type_keys(&format!("{rotated_pass}\r"));
    let code = t.exit_code();
    let out = t.text();
    assert_eq!(code, 0, "{out}");
    assert!(
        !out.contains(rotated_pass) && !out.contains(OLD_PASS),
        "{out}"
    );
    let new_id = id_of(&old);
    assert_ne!(new_id, old_id, "publish.p8 is the new key");
    let retired = old.with_file_name(format!("publish.{}.retired.p8", &old_id[..16]));
    assert_eq!(id_of(&retired), old_id, "the retired key is kept");
    assert!(!old.with_file_name("publish.next.p8").exists());
    assert!(item(&s, &old_id)["revoked_at"].is_string());
    assert_eq!(item(&s, &new_id)["signed_by"], old_id.as_str());
    let reg = ledger(&s, "authority.key.registered");
    let rev = ledger(&s, "authority.key.revoked");
    assert_eq!(reg.last().unwrap()["action"], "replace");
    assert_eq!(rev.len(), 1);
    assert_eq!(rev[0]["key_id"], old_id.as_str());
    assert_eq!(
        rev[0]["change_sha256"],
        reg.last().unwrap()["change_sha256"]
    );
    // The new key decrypts with the new passphrase.
    keys::load(&old, rotated_pass.as_bytes()).unwrap();

    // A further key: generate at its own path, signed by the home's key (asked first).
    let third = home.join("config/keys/third.p8");
    let mut t = Term::proctor(
        home,
        &[
            "key",
            "generate",
            "--path",
            third.to_str().unwrap(),
            "--json",
        ],
    );
    t.wait_for("Passphrase of the signing key");
    t.type_keys(&format!("{rotated_pass}\r"));
    t.wait_for_n("Passphrase: ", 1);
    t.type_keys("a third long passphrase\r");
    t.wait_for("Passphrase again: ");
    t.type_keys("a third long passphrase\r");
    let code = t.exit_code();
    assert_eq!(code, 0, "{}", t.text());
    let third_id = id_of(&third);
    assert_eq!(item(&s, &third_id)["signed_by"], new_id.as_str());

    // Without a signer available (the home's key moved away), nothing is generated.
    std::fs::rename(&old, home.join("config/keys/elsewhere.p8")).unwrap();
    let fourth = home.join("config/keys/fourth.p8");
    let mut t = Term::proctor(
        home,
        &["key", "generate", "--path", fourth.to_str().unwrap()],
    );
    assert_eq!(t.exit_code(), 1);
    let out = t.text();
    assert!(out.contains("--signed-by"), "{out}");
    assert!(!fourth.exists());
}
