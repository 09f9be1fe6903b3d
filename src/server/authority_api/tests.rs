//! The key registry's own checks, behind the kernel gate: what a script holding the owner
//! token would post if it got past the gate (it does not: `tests/key_trust.rs` shows the 403
//! `authority_refused` it gets first). The real handlers on a temporary home; the caller is
//! the one the gate would have let through.

use axum::http::Method;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

use super::AuthoritySettings;
use crate::auth::Principal;
use crate::authority::keychange::{self, Change};
use crate::authority::{dsse, keys, passphrase};
use crate::server::testkit::{TestServer, caller, person};

const KEYS: &str = "/v1/m/authority/keys";
const CHANGES: &str = "/v1/m/authority/keys/changes";

fn register_first(s: &TestServer, k: &SigningKey) -> keys::PublicInfo {
    let info = keys::PublicInfo::of(&k.verifying_key());
    s.expect(
        &person(),
        201,
        Method::POST,
        KEYS,
        Some(json!({"public_key_b64": info.public_key_b64})),
    );
    info
}

fn generation(s: &TestServer) -> u64 {
    s.expect(&person(), 200, Method::GET, KEYS, None)["generation"]
        .as_u64()
        .unwrap()
}

fn key_ids(s: &TestServer) -> Vec<String> {
    s.expect(&person(), 200, Method::GET, KEYS, None)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key_id"].as_str().unwrap().to_string())
        .collect()
}

fn add(k: &SigningKey) -> Change {
    Change {
        add: Some(k.verifying_key()),
        revoke: None,
    }
}

/// After the first key, an unsigned registration is refused and recorded; an agent principal
/// registers nothing, not even the first key.
#[test]
fn a_second_key_posted_unsigned_is_refused_and_recorded() {
    let s = TestServer::new();
    let agent = caller("tok-agent", Principal::Agent);
    let first = SigningKey::from_bytes(&[1u8; 32]);
    let info = keys::PublicInfo::of(&first.verifying_key());
    let (code, v) = s.call(
        &agent,
        Method::POST,
        KEYS,
        Some(json!({"public_key_b64": info.public_key_b64})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "agent_refused", "{v}");
    assert!(key_ids(&s).is_empty());

    register_first(&s, &first);
    let agents = keys::PublicInfo::of(&SigningKey::from_bytes(&[7u8; 32]).verifying_key());
    let (code, v) = s.call(
        &person(),
        Method::POST,
        KEYS,
        Some(json!({"public_key_b64": agents.public_key_b64})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "key_change_unsigned", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--signed-by"),
        "the refusal names the remedy: {v}"
    );
    assert_eq!(key_ids(&s), std::slice::from_ref(&info.key_id));
    let refused = s.ledger("authority.key.refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["code"], "key_change_unsigned");
}

/// A change signed by a key the server does not know, a change whose signature is not its
/// claimed signer's, a real change replayed, a change for an older generation: each refused
/// with its code and recorded; only the real change applies, once.
#[test]
fn unknown_signers_forgeries_and_replays_of_key_changes_are_refused() {
    let s = TestServer::new();
    let first = SigningKey::from_bytes(&[1u8; 32]);
    let second = SigningKey::from_bytes(&[2u8; 32]);
    let agents = SigningKey::from_bytes(&[3u8; 32]);
    let info = register_first(&s, &first);
    let g = generation(&s);
    let post = |env: &dsse::Envelope| {
        s.call(
            &person(),
            Method::POST,
            CHANGES,
            Some(json!({"envelope": env})),
        )
    };

    // Signed by a key the server does not know.
    let (_, env) = keychange::sign(&add(&agents), g, &agents).unwrap();
    let (code, v) = post(&env);
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "key_change_signer_unknown", "{v}");

    // Claims the registered signer, signed by another key.
    let (p, _) = keychange::sign(&add(&agents), g, &first).unwrap();
    let forged = dsse::sign(
        keychange::PAYLOAD_TYPE,
        &serde_json::to_vec(&p).unwrap(),
        &agents,
        &p.signer,
    );
    let (code, v) = post(&forged);
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "key_change_bad_signature", "{v}");

    // A real change applies once; the same envelope again is a replay.
    let (_, env) = keychange::sign(&add(&second), g, &first).unwrap();
    let (code, v) = post(&env);
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["signed_by"], info.key_id.as_str());
    let (code, v) = post(&env);
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "key_change_replayed", "{v}");

    // Nothing of the agent's got in; each refusal is recorded.
    assert_eq!(
        key_ids(&s),
        [info.key_id.clone(), keys::key_id(&second.verifying_key())]
    );
    let codes: Vec<Value> = s
        .ledger("authority.key.refused")
        .iter()
        .map(|e| e["code"].clone())
        .collect();
    assert_eq!(
        codes,
        [
            "key_change_signer_unknown",
            "key_change_bad_signature",
            "key_change_replayed"
        ]
    );
    assert_eq!(s.ledger("authority.key.registered").len(), 2);
}

/// A revoked key signs no key change.
#[test]
fn a_revoked_key_signs_no_key_change() {
    let s = TestServer::new();
    let first = SigningKey::from_bytes(&[11u8; 32]);
    let second = SigningKey::from_bytes(&[12u8; 32]);
    let third = SigningKey::from_bytes(&[13u8; 32]);
    let first_info = register_first(&s, &first);
    let (_, env) = keychange::sign(
        &Change {
            add: Some(second.verifying_key()),
            revoke: Some(first_info.key_id.clone()),
        },
        generation(&s),
        &first,
    )
    .unwrap();
    s.expect(
        &person(),
        201,
        Method::POST,
        CHANGES,
        Some(json!({"envelope": env})),
    );
    let (_, env) = keychange::sign(&add(&third), generation(&s), &first).unwrap();
    let (code, v) = s.call(
        &person(),
        Method::POST,
        CHANGES,
        Some(json!({"envelope": env})),
    );
    assert_eq!(code, 403, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("revoked"),
        "{v}"
    );
    assert!(!key_ids(&s).contains(&keys::key_id(&third.verifying_key())));
}

fn record(v: &Value) -> passphrase::Record {
    passphrase::Record {
        failures: v["failures"].as_u64().unwrap() as u32,
        last_wrong_at: v["last_wrong_at"].as_str().map(str::to_string),
        wait_ms: v["wait_ms"].as_u64().unwrap(),
        not_before: v["not_before"].as_str().map(str::to_string),
    }
}

/// While a key's recorded wait runs, nothing it signs is accepted (429); a proof of the right
/// passphrase for an older record, or by another key, is refused; the proof for the current
/// record resets it, and the change then applies.
#[test]
fn the_recorded_wait_is_enforced_and_the_reset_proof_checked() {
    // A base of ten minutes: the wait outlasts the test.
    let s = TestServer::with(AuthoritySettings {
        passphrase_backoff_ms: 600_000,
    });
    let first = SigningKey::from_bytes(&[21u8; 32]);
    let second = SigningKey::from_bytes(&[22u8; 32]);
    let info = register_first(&s, &first);
    let route = format!("/v1/m/authority/passphrase/{}", info.key_id);
    let mut last = Value::Null;
    for _ in 0..4 {
        last = s.expect(
            &person(),
            200,
            Method::POST,
            &format!("{route}/wrong"),
            None,
        );
    }
    assert_eq!(last["failures"], 4);
    assert_eq!(
        last["wait_ms"], 1_200_000,
        "doubled once after the first wait"
    );
    assert!(last["remaining_ms"].as_u64().unwrap() > 0);
    // A wrong report for a key the server does not know: refused, not counted.
    let stranger = keys::key_id(&second.verifying_key());
    let (code, v) = s.call(
        &person(),
        Method::POST,
        &format!("/v1/m/authority/passphrase/{stranger}/wrong"),
        None,
    );
    assert_eq!(code, 404, "{v}");
    // An agent reports nothing.
    let (code, v) = s.call(
        &caller("tok-agent", Principal::Agent),
        Method::POST,
        &format!("{route}/wrong"),
        None,
    );
    assert_eq!(code, 403, "{v}");

    let (_, env) = keychange::sign(&add(&second), generation(&s), &first).unwrap();
    let (code, v) = s.call(
        &person(),
        Method::POST,
        CHANGES,
        Some(json!({"envelope": env.clone()})),
    );
    assert_eq!(code, 429, "{v}");
    assert_eq!(v["error"]["code"], "passphrase_backoff", "{v}");

    // A proof for the record as it was after three failures: stale.
    let mut older = record(&last);
    older.failures = 3;
    let proof = passphrase::sign_right(&first, &older);
    let (code, v) = s.call(
        &person(),
        Method::POST,
        &format!("{route}/right"),
        Some(json!({"proof": proof})),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "stale_proof", "{v}");
    // A proof signed by another key: refused.
    let proof = passphrase::sign_right(&second, &record(&last));
    let (code, v) = s.call(
        &person(),
        Method::POST,
        &format!("{route}/right"),
        Some(json!({"proof": proof})),
    );
    assert_eq!(code, 403, "{v}");
    // The right proof resets; the change then applies.
    let proof = passphrase::sign_right(&first, &record(&last));
    let v = s.expect(
        &person(),
        200,
        Method::POST,
        &format!("{route}/right"),
        Some(json!({"proof": proof})),
    );
    assert_eq!(v["failures"], 0);
    s.expect(
        &person(),
        201,
        Method::POST,
        CHANGES,
        Some(json!({"envelope": env})),
    );
    assert_eq!(s.ledger("authority.passphrase.wrong").len(), 4);
    assert_eq!(
        s.ledger("authority.passphrase.reset")[0]["after_failures"],
        4
    );
}

/// The null rule (docs/api.md, "Changes"): a key carries `signed_by`, `revoked_at` and
/// `revoked_signed_by`, `null` while absent.
#[test]
fn a_key_carries_every_field_null_when_absent() {
    let s = TestServer::new();
    let first = SigningKey::from_bytes(&[9u8; 32]);
    register_first(&s, &first);
    let listed = s.expect(&person(), 200, Method::GET, KEYS, None);
    let key = &listed["items"][0];
    for field in ["signed_by", "revoked_at", "revoked_signed_by"] {
        assert!(
            key.as_object().unwrap().contains_key(field),
            "{field} missing: {key}"
        );
        assert!(key[field].is_null(), "{key}");
    }
}
