//! Signed receipts: every DSSE test vector (rejects included), SSHSIG checked by the real
//! `ssh-keygen -Y verify`, and the receipt-file verifier on a real git repository.

use std::path::Path;
use std::process::{Command, Stdio};

use ed25519_dalek::{SigningKey, VerifyingKey};
use proctor::authority::dsse::{self, Envelope, TrustedKey};
use proctor::authority::keys;
use proctor::authority::sshsig;
use proctor::authority::statement::{self, Outcome, Subject};
use serde_json::{Value, json};

fn vectors() -> Value {
    let text = include_str!("data/dsse/vectors.json");
    serde_json::from_str(text).unwrap()
}

fn key_of(v: &Value, name: &str) -> VerifyingKey {
    let k = &v["keys"][name];
    let seed: [u8; 32] = hex::decode(k["seed"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let sk = SigningKey::from_bytes(&seed);
    let public = hex::decode(k["public"].as_str().unwrap()).unwrap();
    assert_eq!(sk.verifying_key().as_bytes().as_slice(), public, "{name}");
    sk.verifying_key()
}

#[test]
fn every_dsse_vector_accepts_or_rejects_as_the_spec_says() {
    let v = vectors();
    let list = v["vectors"].as_array().unwrap();
    assert!(list.len() >= 9, "the vector file shrank");
    let mut rejects = 0;
    for vector in list {
        let id = vector["id"].as_str().unwrap();
        let envelope: Envelope = serde_json::from_value(vector["envelope"].clone()).unwrap();
        let payload = envelope.payload_bytes().unwrap();
        let expect = vector["expect"].as_str().unwrap();
        // `pae` is the message the vector's signatures were made over. For an accepted
        // envelope it is the PAE of its own type and payload, byte for byte.
        let signed = hex::decode(vector["pae"].as_str().unwrap()).unwrap();
        if expect == "accept" {
            assert_eq!(
                dsse::pae(&envelope.payload_type, &payload),
                signed,
                "{id}: PAE"
            );
        }
        let trusted: Vec<TrustedKey> = vector["trustedKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let name = n.as_str().unwrap();
                TrustedKey {
                    keyid: name.to_string(),
                    key: key_of(&v, name),
                }
            })
            .collect();
        let types: Vec<&str> = vector["supportedPayloadTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let threshold = vector["threshold"].as_u64().unwrap() as usize;
        // Every signature is genuine over that message (a reject is rejected for what the
        // envelope claims, not for a broken signature).
        for s in &envelope.signatures {
            let sig =
                ed25519_dalek::Signature::from_slice(&dsse::decode_b64(&s.sig).unwrap()).unwrap();
            assert!(
                trusted
                    .iter()
                    .any(|t| ed25519_dalek::Verifier::verify(&t.key, &signed, &sig).is_ok()),
                "{id}: a signature does not verify over the vector's PAE"
            );
        }
        let result = dsse::verify_with(&envelope, &types, &trusted, threshold);
        match expect {
            "accept" => assert_eq!(result.unwrap(), payload, "{id} must be accepted"),
            "reject" => {
                rejects += 1;
                assert!(result.is_err(), "{id} must be rejected")
            }
            other => panic!("{id}: unknown expectation {other}"),
        }
    }
    assert!(rejects >= 3, "the rejects must be exercised");
}

/// proctor's own envelopes round-trip through the general verifier with the key id as keyid.
#[test]
fn proctor_envelopes_name_the_spki_key_id() {
    let sk = SigningKey::from_bytes(&[11u8; 32]);
    let vk = sk.verifying_key();
    let id = keys::key_id(&vk);
    let env = dsse::sign(dsse::PAYLOAD_TYPE, b"{}", &sk, &id);
    assert_eq!(env.signatures[0].keyid.as_deref(), Some(id.as_str()));
    let trusted = [TrustedKey { keyid: id, key: vk }];
    assert_eq!(
        dsse::verify_with(&env, &[dsse::PAYLOAD_TYPE], &trusted, 1).unwrap(),
        b"{}"
    );
}

fn ssh_keygen_verify(dir: &Path, public_line: &str, message: &[u8], sig: &str) -> (bool, String) {
    let allowed = dir.join("allowed_signers");
    std::fs::write(&allowed, format!("{} {public_line}\n", sshsig::PRINCIPAL)).unwrap();
    let sig_file = dir.join("message.sig");
    std::fs::write(&sig_file, sig).unwrap();
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(&allowed)
        .args(["-I", sshsig::PRINCIPAL, "-n", sshsig::NAMESPACE, "-s"])
        .arg(&sig_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ssh-keygen must be installed (openssh-client; .ci/run installs it)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(message).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn ssh_keygen_accepts_our_sshsig_and_rejects_a_modified_message() {
    let dir = tempfile::tempdir().unwrap();
    let sk = SigningKey::from_bytes(&[21u8; 32]);
    let vk = sk.verifying_key();
    let env = dsse::sign(dsse::PAYLOAD_TYPE, b"{\"x\":1}", &sk, &keys::key_id(&vk));
    let message = format!("{}\n", env.to_json());
    let sig = sshsig::sign(message.as_bytes(), &sk);
    let line = keys::openssh_line(&vk);

    let (ok, text) = ssh_keygen_verify(dir.path(), &line, message.as_bytes(), &sig);
    assert!(ok, "ssh-keygen refused a good signature: {text}");
    assert!(
        text.contains("Good \"proctor-receipt\" signature"),
        "{text}"
    );
    sshsig::verify(&sig, message.as_bytes(), &vk).unwrap();

    let modified = message.replace("\"x\"", "\"y\"");
    let modified = modified.replacen(&env.payload, "eyJ4IjoyfQ==", 1);
    let (ok, text) = ssh_keygen_verify(dir.path(), &line, modified.as_bytes(), &sig);
    assert!(!ok, "ssh-keygen accepted a modified message: {text}");
    assert!(sshsig::verify(&sig, modified.as_bytes(), &vk).is_err());

    // Another key in allowed_signers: refused too.
    let other = keys::openssh_line(&SigningKey::from_bytes(&[22u8; 32]).verifying_key());
    let (ok, text) = ssh_keygen_verify(dir.path(), &other, message.as_bytes(), &sig);
    assert!(
        !ok,
        "ssh-keygen accepted a signature by an untrusted key: {text}"
    );
}

/// And the other way round: a signature made by ssh-keygen itself, with a key proctor's
/// OpenSSH line describes, verifies with our `verify`.
#[test]
fn our_verify_accepts_a_signature_made_by_ssh_keygen() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "t", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    let msg = dir.path().join("msg");
    std::fs::write(&msg, b"signed by openssh\n").unwrap();
    let st = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", sshsig::NAMESPACE, "-f"])
        .arg(&key)
        .arg(&msg)
        .status()
        .unwrap();
    assert!(st.success());
    let sig = std::fs::read_to_string(dir.path().join("msg.sig")).unwrap();
    let public = std::fs::read_to_string(dir.path().join("id.pub")).unwrap();
    let vk = keys::parse_openssh_line(&public).unwrap();
    sshsig::verify(&sig, b"signed by openssh\n", &vk).unwrap();
    assert_eq!(
        sshsig::verify(&sig, b"signed by openssh!\n", &vk),
        Err(sshsig::SshsigError::BadSignature)
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {:?}", out);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn outcome(r: &statement::VerifyReport, check: &str) -> Outcome {
    r.checks
        .iter()
        .find(|c| c.check == check)
        .unwrap_or_else(|| panic!("no check {check} in {:#?}", r.checks))
        .outcome
}

#[test]
fn receipt_file_verification_reports_each_check() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), b"alpha\n").unwrap();
    std::fs::create_dir(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/b.rs"), b"fn b() {}\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "c"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);

    let sk = SigningKey::from_bytes(&[31u8; 32]);
    let vk = sk.verifying_key();
    let subjects = vec![
        Subject::git_commit("revision", &head),
        Subject::of_bytes("a.txt", b"alpha\n"),
        Subject::of_bytes("src/b.rs", b"fn b() {}\n"),
        Subject::of_bytes("gone.txt", b"never written"),
    ];
    let st = statement::statement(
        subjects,
        "https://proctor.invalid/publish/v1",
        json!({"subject_root": repo, "not_proven": ["the worker ran as the host user"]}),
    );
    assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(st["subject"][0]["digest"]["gitCommit"], head.as_str());
    let payload = serde_json::to_vec(&st).unwrap();
    let env = dsse::sign(dsse::PAYLOAD_TYPE, &payload, &sk, &keys::key_id(&vk));
    let receipt = dir.path().join("rcpt-0001.json");
    let bytes = format!("{}\n", env.to_json());
    std::fs::write(&receipt, &bytes).unwrap();
    let sig_path = statement::sig_path(&receipt);
    assert_eq!(sig_path, dir.path().join("rcpt-0001.json.sig"));

    // Without the .sig: the SSHSIG is unreachable, so the receipt does not verify.
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "sshsig"), Outcome::Unreachable);
    assert!(!r.ok());

    std::fs::write(&sig_path, sshsig::sign(bytes.as_bytes(), &sk)).unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    for c in [
        "envelope",
        "payload_type",
        "signature",
        "sshsig",
        "statement",
    ] {
        assert_eq!(outcome(&r, c), Outcome::Holds, "{c}: {:#?}", r.checks);
    }
    assert_eq!(outcome(&r, "subject revision"), Outcome::Holds);
    assert_eq!(outcome(&r, "subject a.txt"), Outcome::Holds);
    assert_eq!(outcome(&r, "subject src/b.rs"), Outcome::Holds);
    assert_eq!(outcome(&r, "subject gone.txt"), Outcome::Unreachable);
    assert!(r.ok(), "{:#?}", r.checks);
    assert_eq!(r.key_id.as_deref(), Some(keys::key_id(&vk).as_str()));

    // The same receipt checked by ssh-keygen, as a reader would.
    let (ok, text) = ssh_keygen_verify(
        dir.path(),
        &keys::openssh_line(&vk),
        bytes.as_bytes(),
        &std::fs::read_to_string(&sig_path).unwrap(),
    );
    assert!(ok, "{text}");

    // A changed file: its subject fails, and the receipt no longer verifies.
    std::fs::write(repo.join("a.txt"), b"alpha, edited\n").unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "subject a.txt"), Outcome::Fails);
    assert!(!r.ok());
    std::fs::write(repo.join("a.txt"), b"alpha\n").unwrap();

    // An untrusted key: the signature fails and nothing in the payload is believed.
    let stranger = SigningKey::from_bytes(&[32u8; 32]).verifying_key();
    let r = statement::verify_receipt_file(&receipt, &[stranger]).unwrap();
    assert_eq!(outcome(&r, "signature"), Outcome::Fails);
    assert_eq!(outcome(&r, "statement"), Outcome::Unreachable);
    assert!(r.statement.is_none());
    assert!(!r.ok());

    // One byte of the envelope changed (its JSON still valid): the SSHSIG fails.
    let tampered = bytes.replacen("\"payloadType\"", "\"payloadType\" ", 1);
    std::fs::write(&receipt, &tampered).unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "signature"), Outcome::Holds);
    assert_eq!(outcome(&r, "sshsig"), Outcome::Fails);
    assert!(!r.ok());

    // Another payload type: reported as failing.
    let mut other = env.clone();
    other.payload_type = "application/json".into();
    std::fs::write(&receipt, other.to_json()).unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "payload_type"), Outcome::Fails);
    assert!(!r.ok());

    // Not an envelope at all.
    std::fs::write(&receipt, b"not json").unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "envelope"), Outcome::Fails);
}

#[test]
fn subject_names_cannot_leave_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(dir.path().join("outside"), b"x").unwrap();
    let sk = SigningKey::from_bytes(&[41u8; 32]);
    let vk = sk.verifying_key();
    let st = statement::statement(
        vec![Subject::of_bytes("../outside", b"x")],
        "t",
        json!({"subject_root": root}),
    );
    let env = dsse::sign(
        dsse::PAYLOAD_TYPE,
        &serde_json::to_vec(&st).unwrap(),
        &sk,
        &keys::key_id(&vk),
    );
    let receipt = dir.path().join("r.json");
    let bytes = env.to_json();
    std::fs::write(&receipt, &bytes).unwrap();
    std::fs::write(
        statement::sig_path(&receipt),
        sshsig::sign(bytes.as_bytes(), &sk),
    )
    .unwrap();
    let r = statement::verify_receipt_file(&receipt, &[vk]).unwrap();
    assert_eq!(outcome(&r, "subject ../outside"), Outcome::Fails);
}
