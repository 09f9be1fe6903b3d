//! Receipts written by real bindings and attempts, verified against the home's files.

use super::*;
use crate::candidate::tests::{Fixture, actor, write};
use crate::evidence::checks::{self, ApprovedPolicy};

fn state(r: &Report, name: &str) -> Holds {
    r.checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {r:?}"))
        .state
}

fn receipt_path(f: &Fixture, id: &str) -> PathBuf {
    receipts_dir(&f.home).join(format!("{id}.json"))
}

#[test]
fn receipts_bind_every_digest_with_its_recipe_and_verify() {
    let f = Fixture::new();
    write(&f.wt.join("src/lib.txt"), b"ok\n");
    let c = f.bind().unwrap();
    let text = "[[check]]\nname = \"t\"\nargv = [\"sh\", \"-c\", \"mkdir -p out; echo r > out/r.txt; echo hi\"]\nartifacts = [\"out/r.txt\"]\n";
    let e = checks::run_with(
        &f.home,
        &f.ledger,
        &Default::default(),
        &c.id,
        Some(ApprovedPolicy {
            workspace: "ws-0001".into(),
            text: text.into(),
            sha256: crate::evidence::policy::digest(text),
        }),
        &actor(),
    )
    .unwrap();
    let items = list(&f.home).unwrap();
    let kinds: Vec<(&str, Option<&str>, Option<&str>)> = items
        .iter()
        .map(|l| (l.id.as_str(), l.kind.as_deref(), l.subject.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("rcpt-0001", Some(KIND_CANDIDATE), Some("cand-0001")),
            ("rcpt-0002", Some(KIND_EVIDENCE), Some("ev-0001"))
        ]
    );
    for l in &items {
        let p = PathBuf::from(&l.file);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let bytes = std::fs::read(&p).unwrap();
        let Form::Plain(r) = classify(&p, &bytes).unwrap() else {
            panic!()
        };
        assert!(
            r.digests
                .iter()
                .all(|d| !d.recipe.is_empty() && !d.digest.is_empty())
        );
        assert_eq!(r.ledger.recipe, LEDGER_PREFIX_RECIPE);
        let report = verify_file(&f.home, &p).unwrap();
        assert!(report.ok, "{report:#?}");
        assert!(
            report.checks.iter().all(|c| c.state == Holds::Holds),
            "{report:#?}"
        );
    }
    let ev = verify_file(&f.home, &receipt_path(&f, "rcpt-0002")).unwrap();
    for name in [
        "identity",
        "worktree",
        "policy",
        "entry",
        "check.t.stdout",
        "check.t.stderr",
        "check.t.artifact.out/r.txt",
        "ledger",
        "receipt",
    ] {
        assert_eq!(state(&ev, name), Holds::Holds, "{name}");
    }
    assert_eq!(e.receipt, "rcpt-0002");
}

#[test]
fn tampering_with_captured_bytes_the_ledger_or_the_receipt_is_detected() {
    let f = Fixture::new();
    write(&f.wt.join("a.txt"), b"a\n");
    let c = f.bind().unwrap();
    let rp = receipt_path(&f, c.receipt.as_deref().unwrap());

    // One byte of the bound status.
    let status = c.dir(&f.home).join("status.bin");
    let mut b = std::fs::read(&status).unwrap();
    b[0] ^= 1;
    std::fs::write(&status, &b).unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "status"), Holds::Differs);
    assert!(!r.ok);
    b[0] ^= 1;
    std::fs::write(&status, &b).unwrap();
    assert!(verify_file(&f.home, &rp).unwrap().ok);

    // The patch removed: unreachable, not holding, not differing.
    let patch = c.dir(&f.home).join("patch.bin");
    let saved = std::fs::read(&patch).unwrap();
    std::fs::remove_file(&patch).unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "patch"), Holds::Unreachable);
    assert!(r.ok);
    std::fs::write(&patch, &saved).unwrap();

    // One byte of the ledger prefix (history rewritten).
    let ledger_path = f.home.ledger_path();
    let original = std::fs::read(&ledger_path).unwrap();
    let mut l = original.clone();
    let at = l.windows(7).position(|w| w == b"\"kind\":").unwrap() + 8;
    l[at] = b'X';
    std::fs::write(&ledger_path, &l).unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "ledger"), Holds::Differs);
    std::fs::write(&ledger_path, &original[..original.len() / 2]).unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "ledger"), Holds::Differs);
    assert!(
        r.checks
            .iter()
            .find(|c| c.name == "ledger")
            .unwrap()
            .detail
            .contains("truncated")
    );
    std::fs::write(&ledger_path, &original).unwrap();

    // The receipt itself: a digest edited (and the file re-canonicalised), or reformatted.
    let text = std::fs::read_to_string(&rp).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let d = v["digests"][0]["digest"]
        .as_str()
        .unwrap()
        .replace('0', "1")
        .replace('a', "b");
    v["digests"][0]["digest"] = d.into();
    let mut edited = crate::ledger::canonical::to_vec(&v).unwrap();
    edited.push(b'\n');
    std::fs::write(&rp, &edited).unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "identity"), Holds::Differs);
    std::fs::write(
        &rp,
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(&text).unwrap())
            .unwrap(),
    )
    .unwrap();
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "receipt"), Holds::Differs);
    std::fs::write(&rp, &text).unwrap();
    assert!(verify_file(&f.home, &rp).unwrap().ok);

    // The worktree moved on: the receipt's candidate is no longer what is on disk.
    write(&f.wt.join("node_modules/x.js"), b"1");
    let r = verify_file(&f.home, &rp).unwrap();
    assert_eq!(state(&r, "worktree"), Holds::Differs);
    assert_eq!(state(&r, "identity"), Holds::Holds);
}

#[test]
fn envelopes_are_dispatched_and_bad_files_refused() {
    let f = Fixture::new();
    let (id, path) = reserve(&f.home, "publish.authorised").unwrap();
    assert_eq!(id, "rcpt-0001");
    assert!(matches!(
        verify_file(&f.home, &path),
        Err(ReceiptError::NotAReceipt { .. })
    ));
    std::fs::write(
        &path,
        br#"{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}"#,
    )
    .unwrap();
    // An envelope goes to the signature verifier: unsigned, it does not verify.
    let r = verify_file(&f.home, &path).unwrap();
    assert!(!r.ok, "{r:?}");
    assert!(
        r.checks
            .iter()
            .any(|c| c.name == "signature" && c.state != Holds::Holds),
        "{r:?}"
    );
    assert_eq!(list(&f.home).unwrap()[0].kind.as_deref(), Some("signed"));
    assert!(reserve(&f.home, "Bad Kind").is_err());
    assert!(data_path(&f.home, "../etc/passwd").is_none());
    assert!(data_path(&f.home, "/etc/passwd").is_none());
}

#[test]
fn a_receipt_names_the_boundary_its_run_ran_behind() {
    // No run record (or one without a boundary): the host user, not confined.
    let f = Fixture::new();
    write(&f.wt.join("src/lib.txt"), b"ok\n");
    let c = f.bind().unwrap();
    let r: Value = serde_json::from_slice(
        &std::fs::read(receipt_path(&f, c.receipt.as_ref().unwrap())).unwrap(),
    )
    .unwrap();
    assert_eq!(r["facts"]["boundary"]["kind"], "host", "{r}");
    assert!(r["facts"]["boundary"]["rig"].is_null());
    assert!(
        r["facts"]["boundary"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("host user: not confined")
    );
    assert_eq!(r["facts"]["boundary"]["detail"], HOST_BOUNDARY);

    // A run whose record names a namespace rig: its receipts say so.
    let g = Fixture::new();
    write(&g.wt.join("src/lib.txt"), b"ok\n");
    let dir = g.home.data.join("runs/run-0001");
    std::fs::create_dir_all(&dir).unwrap();
    let boundary = serde_json::json!({"kind": "namespace", "rig": "rig-0003",
        "detail": "namespace boundary: weaker than a VM (shares the host kernel)"});
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_vec(&serde_json::json!({"ref": "run-0001", "boundary": boundary})).unwrap(),
    )
    .unwrap();
    let c = g.bind().unwrap();
    let r: Value = serde_json::from_slice(
        &std::fs::read(receipt_path(&g, c.receipt.as_ref().unwrap())).unwrap(),
    )
    .unwrap();
    assert_eq!(r["facts"]["boundary"], boundary, "{r}");
}
