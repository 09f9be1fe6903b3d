use super::*;
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

fn sha_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn lines(path: &Path) -> Vec<Vec<u8>> {
    fs::read(path)
        .unwrap()
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// A valid chained ledger of `n` events written without fsync (test fixture).
fn write_ledger(path: &Path, n: u64) -> Vec<Vec<u8>> {
    let mut prev = EMPTY_SHA256;
    let mut out = Vec::new();
    let mut all = Vec::new();
    for seq in 1..=n {
        let l = encode_line(
            seq,
            "2026-11-30T06:01:02.345Z",
            "test.event",
            &prev,
            &fields(json!({"n": seq, "note": "x"})),
        )
        .unwrap();
        prev = Sha256::digest(&l).into();
        all.extend_from_slice(&l);
        out.push(l);
    }
    fs::write(path, all).unwrap();
    out
}

fn bad(path: &Path) -> BadLine {
    match verify(path) {
        Err(VerifyError::Bad { fault, .. }) => fault,
        other => panic!("expected a bad line, got {other:?}"),
    }
}

#[test]
fn empty_sha256_is_the_hash_of_nothing() {
    assert_eq!(EMPTY_SHA256, <[u8; 32]>::from(Sha256::digest(b"")));
}

/// The worked example in docs/formats.md: these exact bytes and hashes.
#[test]
fn documented_two_line_example() {
    let l1 = encode_line(
        1,
        "2026-11-30T06:01:02.345Z",
        "sessions.run.started",
        &EMPTY_SHA256,
        &fields(json!({"run": "r-0001", "provider": "claude"})),
    )
    .unwrap();
    let h1: [u8; 32] = Sha256::digest(&l1).into();
    let l2 = encode_line(
        2,
        "2026-11-30T06:01:03.000Z",
        "sessions.run.renamed",
        &h1,
        &fields(json!({"run": "r-0001", "name": "fix the parser"})),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(l1.clone()).unwrap(),
        "{\"at\":\"2026-11-30T06:01:02.345Z\",\"kind\":\"sessions.run.started\",\
         \"prev\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\
         \"provider\":\"claude\",\"run\":\"r-0001\",\"seq\":1}\n"
    );
    let file = [l1.clone(), l2.clone()].concat();
    let doc = include_str!("../../docs/formats.md");
    let quoted = |s: &str| assert!(doc.contains(s), "docs/formats.md does not show {s}");
    quoted(std::str::from_utf8(&l1[..l1.len() - 1]).unwrap());
    quoted(std::str::from_utf8(&l2[..l2.len() - 1]).unwrap());
    quoted(&sha_hex(&l1));
    quoted(&sha_hex(&l2));
    quoted(&sha_hex(&file));
    quoted(&format!("bytes={}", file.len()));
}

#[test]
fn open_append_reopen_verify() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("new/data");
    let p = dir.join("ledger.jsonl");
    let (l, opened) = Ledger::open(&p).unwrap();
    assert!(opened.created);
    assert_eq!(opened.events, 0);
    assert!(l.is_empty());
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(
        fs::metadata(t.path().join("new")).unwrap().mode() & 0o777,
        0o700
    );
    assert_eq!(
        l.append(
            "sessions.run.renamed",
            &fields(json!({"name": "a\u{1b}[31m"}))
        )
        .unwrap(),
        1
    );
    assert_eq!(l.append("a.b", &Map::new()).unwrap(), 2);
    assert_eq!(l.last_seq(), 2);
    assert_eq!(l.len(), fs::metadata(&p).unwrap().len());
    drop(l);

    let (l, opened) = Ledger::open(&p).unwrap();
    assert!(!opened.created);
    assert_eq!(opened.events, 2);
    assert!(opened.recovered.is_empty());
    assert_eq!(l.append("a.b", &Map::new()).unwrap(), 3);
    drop(l);

    let ls = lines(&p);
    assert_eq!(ls.len(), 3);
    let first: Value = serde_json::from_slice(&ls[0]).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["kind"], "sessions.run.renamed");
    assert_eq!(first["name"], "a\u{1b}[31m");
    assert_eq!(
        first["prev"],
        format!("sha256:{}", hex::encode(EMPTY_SHA256))
    );
    assert!(valid_at(first["at"].as_str().unwrap()));
    let third: Value = serde_json::from_slice(&ls[2]).unwrap();
    assert_eq!(third["prev"], format!("sha256:{}", sha_hex(&ls[1])));

    let v = verify(&p).unwrap();
    let bytes = fs::read(&p).unwrap();
    assert_eq!(
        v.fixed_point,
        FixedPoint {
            format: "proctor-ledger-fixed-point/1".into(),
            bytes: bytes.len() as u64,
            events: 3,
            sha256: sha_hex(&bytes),
        }
    );
    assert_eq!(fixed_point(&p).unwrap(), v.fixed_point);
    assert_eq!(hex::encode(v.last_line_sha256), sha_hex(&ls[2]));
}

#[test]
fn an_existing_ledger_keeps_its_folder_mode() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("d");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
    let p = dir.join("l.jsonl");
    write_ledger(&p, 1);
    Ledger::open(&p).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o750);
}

#[test]
fn bad_appends_are_refused_and_consume_no_seq() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    for kind in [
        "",
        "sessions",
        "Sessions.run",
        "sessions..run",
        "sessions.run.",
        ".sessions",
        "sessions.1run",
        "sessions.run-renamed",
        "sessions.rün",
        "a.b\n",
    ] {
        assert!(
            matches!(
                l.append(kind, &Map::new()),
                Err(LedgerError::BadKind { .. })
            ),
            "{kind:?}"
        );
    }
    for name in ["seq", "at", "kind", "prev"] {
        let e = l.append("a.b", &fields(json!({ name: 1 }))).unwrap_err();
        assert!(
            matches!(&e, LedgerError::ReservedField { name: n } if n == name),
            "{e}"
        );
    }
    let e = l
        .append("a.b", &fields(json!({"cost": {"usd": 0.25}})))
        .unwrap_err();
    assert!(e.to_string().contains("the event.cost.usd"), "{e}");
    assert!(matches!(
        e,
        LedgerError::Value(ValueError::NotAnInteger { .. })
    ));
    let mut deep = json!(0);
    for _ in 0..canonical::MAX_DEPTH {
        deep = json!({ "d": deep });
    }
    assert!(matches!(
        l.append("a.b", &fields(json!({ "x": deep }))),
        Err(LedgerError::Value(ValueError::TooDeep { .. }))
    ));
    assert_eq!(fs::metadata(&p).unwrap().len(), 0);
    assert_eq!(
        l.append("a.b_2.c3", &fields(json!({"ok": [1, -2, "s", null, true]})))
            .unwrap(),
        1
    );
    verify(&p).unwrap();
}

#[test]
fn eight_threads_get_contiguous_seqs_and_a_valid_chain() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    let per = 25u64;
    let mut seqs: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u64)
            .map(|th| {
                let l = &l;
                s.spawn(move || {
                    (0..per)
                        .map(|i| {
                            l.append("test.concurrent", &fields(json!({"thread": th, "i": i})))
                                .unwrap()
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=8 * per).collect::<Vec<_>>());
    drop(l);
    let v = verify(&p).unwrap();
    assert_eq!(v.fixed_point.events, 8 * per);
    // Each thread's own events appear in the order it appended them.
    let mut last = [None::<u64>; 8];
    for line in lines(&p) {
        let e: Value = serde_json::from_slice(&line).unwrap();
        let th = e["thread"].as_u64().unwrap() as usize;
        let i = e["i"].as_u64().unwrap();
        assert_eq!(last[th].map_or(0, |x| x + 1), i);
        last[th] = Some(i);
    }
}

#[test]
fn a_second_writer_in_the_same_process_is_refused_until_the_first_closes() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    let e = Ledger::open(&p).unwrap_err();
    assert!(matches!(e, LedgerError::Locked { .. }), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()));
    // Readers are not blocked.
    verify(&p).unwrap();
    tail(&p, 5).unwrap();
    drop(l);
    Ledger::open(&p).unwrap();
}

fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<Vec<u8>>)) {
    let mut ls = lines(path);
    f(&mut ls);
    fs::write(path, ls.concat()).unwrap();
}

#[test]
fn each_verify_reason_names_the_first_bad_line() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let orig = write_ledger(&p, 4);
    verify(&p).unwrap();

    let case = |name: &str, f: &dyn Fn(&mut Vec<Vec<u8>>), line: u64, reason: Reason| {
        fs::write(&p, orig.concat()).unwrap();
        rewrite(&p, |ls| f(ls));
        let b = bad(&p);
        assert_eq!((b.line, b.reason), (line, reason), "{name}: {b}");
        let offset: usize = orig[..(line - 1) as usize].iter().map(Vec::len).sum();
        assert_eq!(b.offset, offset as u64, "{name}");
        b
    };
    let set = |ls: &mut Vec<Vec<u8>>, i: usize, s: &str| ls[i] = format!("{s}\n").into_bytes();
    let edit = |ls: &mut Vec<Vec<u8>>, i: usize, from: &str, to: &str| {
        let s = String::from_utf8(ls[i].clone()).unwrap();
        assert!(s.contains(from), "{s}");
        ls[i] = s.replacen(from, to, 1).into_bytes();
    };

    // Altering a line breaks the next line's prev.
    let b = case(
        "altered",
        &|ls| edit(ls, 1, "\"x\"", "\"y\""),
        3,
        Reason::HashMismatch,
    );
    assert!(
        b.detail.contains("line 2 hashes to sha256:"),
        "{}",
        b.detail
    );
    case(
        "removed",
        &|ls| {
            ls.remove(1);
        },
        2,
        Reason::SeqGap,
    );
    case("swapped", &|ls| ls.swap(1, 2), 2, Reason::SeqGap);
    case(
        "first prev",
        &|ls| {
            let s = String::from_utf8(ls[0].clone()).unwrap();
            let prev = format!("sha256:{}", hex::encode(EMPTY_SHA256));
            ls[0] = s
                .replace(&prev, &format!("sha256:{}", "0".repeat(64)))
                .into_bytes();
        },
        1,
        Reason::HashMismatch,
    );
    case(
        "not json",
        &|ls| set(ls, 2, "{\"seq\":3,"),
        3,
        Reason::InvalidJson,
    );
    case("empty line", &|ls| set(ls, 1, ""), 2, Reason::InvalidJson);
    case(
        "not utf-8",
        &|ls| ls[1] = b"{\"a\":\"\xff\"}\n".to_vec(),
        2,
        Reason::InvalidJson,
    );
    case("array", &|ls| set(ls, 0, "[1,2]"), 1, Reason::NotAnObject);
    case(
        "float",
        &|ls| edit(ls, 1, "\"n\":2", "\"n\":2.0"),
        2,
        Reason::NonIntegerNumber,
    );
    case(
        "spacing",
        &|ls| edit(ls, 1, "\"n\":2", "\"n\": 2"),
        2,
        Reason::NotCanonical,
    );
    case(
        "crlf",
        &|ls| {
            let n = ls[1].len();
            ls[1].insert(n - 1, b'\r');
        },
        2,
        Reason::NotCanonical,
    );
    case(
        "order",
        &|ls| set(ls, 0, "{\"seq\":1,\"at\":\"2026-11-30T06:01:02.345Z\"}"),
        1,
        Reason::NotCanonical,
    );
    case(
        "needless escape",
        &|ls| edit(ls, 2, "\"x\"", "\"\\u0078\""),
        3,
        Reason::NotCanonical,
    );
    let b = case(
        "no prev",
        &|ls| {
            set(
                ls,
                0,
                "{\"at\":\"2026-11-30T06:01:02.345Z\",\"kind\":\"a.b\",\"seq\":1}",
            )
        },
        1,
        Reason::MissingField,
    );
    assert!(b.detail.contains("prev"), "{}", b.detail);
    case("no seq", &|ls| set(ls, 0, "{}"), 1, Reason::MissingField);
    case(
        "seq zero",
        &|ls| edit(ls, 0, "\"seq\":1", "\"seq\":0"),
        1,
        Reason::BadField,
    );
    case(
        "seq string",
        &|ls| edit(ls, 0, "\"seq\":1", "\"seq\":\"1\""),
        1,
        Reason::BadField,
    );
    case(
        "seq negative",
        &|ls| edit(ls, 0, "\"seq\":1", "\"seq\":-1"),
        1,
        Reason::BadField,
    );
    case(
        "at without ms",
        &|ls| edit(ls, 1, "06:01:02.345Z", "06:01:02Z"),
        2,
        Reason::BadField,
    );
    case(
        "at with offset",
        &|ls| edit(ls, 1, "06:01:02.345Z", "06:01:02.345+0"),
        2,
        Reason::BadField,
    );
    case(
        "at on 30 February",
        &|ls| edit(ls, 1, "2026-11-30", "2026-02-30"),
        2,
        Reason::BadField,
    );
    case(
        "prev uppercase",
        &|ls| {
            let s = String::from_utf8(ls[1].clone()).unwrap();
            let i = s.find("sha256:").unwrap() + 7;
            let up = s[i..i + 64].to_uppercase();
            ls[1] = format!("{}{}{}", &s[..i], up, &s[i + 64..]).into_bytes();
        },
        2,
        Reason::BadField,
    );
    case(
        "prev without algorithm",
        &|ls| edit(ls, 1, "\"sha256:", "\""),
        2,
        Reason::BadField,
    );
    let b = case(
        "kind",
        &|ls| edit(ls, 1, "test.event", "Test.event"),
        2,
        Reason::BadKind,
    );
    assert!(b.detail.contains("\"Test.event\""), "{}", b.detail);
    case(
        "kind one segment",
        &|ls| edit(ls, 1, "test.event", "test"),
        2,
        Reason::BadKind,
    );
    let b = case(
        "missing LF",
        &|ls| {
            ls[3].pop();
        },
        4,
        Reason::MissingFinalLf,
    );
    assert!(b.detail.contains("complete JSON object"), "{}", b.detail);
    case(
        "half a line",
        &|ls| ls[3].truncate(10),
        4,
        Reason::MissingFinalLf,
    );
    // The earliest fault wins.
    case(
        "two faults",
        &|ls| {
            set(ls, 3, "nope");
            edit(ls, 1, "\"n\":2", "\"n\": 2");
        },
        2,
        Reason::NotCanonical,
    );
}

#[test]
fn verify_of_an_empty_file_is_the_empty_fixed_point() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    fs::write(&p, b"").unwrap();
    let v = verify(&p).unwrap();
    assert_eq!(v.fixed_point.bytes, 0);
    assert_eq!(v.fixed_point.events, 0);
    assert_eq!(v.fixed_point.sha256, hex::encode(EMPTY_SHA256));
    let missing = t.path().join("none.jsonl");
    assert!(matches!(
        verify(&missing),
        Err(VerifyError::Read(LedgerError::NotFound { .. }))
    ));
    assert!(matches!(
        tail(&missing, 3),
        Err(LedgerError::NotFound { .. })
    ));
}

fn walks_agree(p: &Path, chunks: &[usize]) {
    let len = fs::metadata(p).unwrap().len();
    let f = File::open(p).unwrap();
    let whole = verify(p).unwrap();
    for &chunk in chunks {
        let w = verify::walk_chunked(&f, p, len, chunk).unwrap();
        assert!(w.fault.is_none(), "chunk {chunk}");
        assert_eq!(
            verify::fixed_point_of(&w),
            whole.fixed_point,
            "chunk {chunk}"
        );
        assert_eq!(w.last_hash, whole.last_line_sha256);
    }
}

#[test]
fn verify_gives_the_same_answer_whatever_the_read_size() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    write_ledger(&p, 40);
    walks_agree(&p, &[1, 2, 7, 100, 4096, 1 << 20]);
    // And the same first fault.
    let mut bytes = fs::read(&p).unwrap();
    let i = bytes.len() - 30;
    bytes[i] = b'#';
    bytes.extend_from_slice(b"{\"to");
    fs::write(&p, &bytes).unwrap();
    let expected = bad(&p);
    assert_eq!(expected.line, 40);
    let f = File::open(&p).unwrap();
    for chunk in [1, 3, 64, 5000] {
        let w = verify::walk_chunked(&f, &p, bytes.len() as u64, chunk).unwrap();
        assert_eq!(w.fault.as_ref(), Some(&expected), "chunk {chunk}");
        assert_eq!(w.events, 39);
    }
}

#[test]
fn verify_handles_lines_longer_than_a_part_or_a_read() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    l.append("a.b", &fields(json!({"s": "1"}))).unwrap();
    l.append("a.b", &fields(json!({"s": "x".repeat(300 << 10)})))
        .unwrap();
    for i in 0..20 {
        l.append("a.b", &fields(json!({ "i": i }))).unwrap();
    }
    drop(l);
    assert_eq!(verify(&p).unwrap().fixed_point.events, 22);
    walks_agree(&p, &[4096, 100 << 10, 1 << 20]);
    let (_, opened) = Ledger::open(&p).unwrap();
    assert_eq!(opened.events, 22);
}

#[test]
fn damage_before_the_tail_is_refused_and_left_untouched() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    write_ledger(&p, 5);
    rewrite(&p, |ls| ls[2] = b"garbage\n".to_vec());
    let before = fs::read(&p).unwrap();
    let e = Ledger::open(&p).unwrap_err();
    match &e {
        LedgerError::Damaged { fault, .. } => {
            assert_eq!((fault.line, fault.reason), (3, Reason::InvalidJson));
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("line 3"), "{e}");
    assert_eq!(fs::read(&p).unwrap(), before);
    assert_eq!(
        fs::read_dir(t.path()).unwrap().count(),
        1,
        "no file was added"
    );
}

#[test]
fn a_complete_final_line_that_breaks_the_chain_is_damage_not_a_torn_tail() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let orig = write_ledger(&p, 3);
    // The last line with a wrong prev.
    let forged = encode_line(
        3,
        "2026-11-30T06:01:02.345Z",
        "test.event",
        &EMPTY_SHA256,
        &Map::new(),
    )
    .unwrap();
    fs::write(&p, [orig[0].clone(), orig[1].clone(), forged].concat()).unwrap();
    let e = Ledger::open(&p).unwrap_err();
    assert!(
        matches!(&e, LedgerError::Damaged { fault, .. } if fault.line == 3 && fault.reason == Reason::HashMismatch),
        "{e}"
    );
    // A non-canonical final line with its LF is damage too.
    fs::write(
        &p,
        [orig[0].clone(), b"{\"b\":1, \"a\":2}\n".to_vec()].concat(),
    )
    .unwrap();
    assert!(matches!(
        Ledger::open(&p).unwrap_err(),
        LedgerError::Damaged { fault, .. } if fault.reason == Reason::NotCanonical
    ));
}

fn torn_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".torn"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_torn_tail_is_moved_aside_and_recorded() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let orig = write_ledger(&p, 3);
    let mut bytes = orig.concat();
    let torn = b"{\"at\":\"2026-11-30T06:0".to_vec();
    bytes.extend_from_slice(&torn);
    fs::write(&p, &bytes).unwrap();

    let (l, opened) = Ledger::open(&p).unwrap();
    assert_eq!(opened.events, 3);
    assert_eq!(opened.recovered.len(), 1);
    let r = &opened.recovered[0];
    assert_eq!(r.seq, 4);
    assert_eq!(r.bytes, torn.len() as u64);
    assert_eq!(r.sha256, format!("sha256:{}", sha_hex(&torn)));
    assert_eq!(r.offset, Some(orig.concat().len() as u64));
    assert_eq!(r.reason, Some(Reason::MissingFinalLf));
    assert!(!r.recorded_after_restart);
    assert!(
        r.moved_to.starts_with("ledger.jsonl.torn.4."),
        "{}",
        r.moved_to
    );
    let moved = t.path().join(&r.moved_to);
    assert_eq!(fs::read(&moved).unwrap(), torn);
    assert_eq!(fs::metadata(&moved).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        torn_files(t.path()),
        vec![r.moved_to.clone()],
        "no temp left"
    );
    assert_eq!(l.append("a.b", &Map::new()).unwrap(), 5);
    drop(l);

    let ls = lines(&p);
    assert_eq!(&ls[..3], &orig[..]);
    let ev: Value = serde_json::from_slice(&ls[3]).unwrap();
    assert_eq!(ev["kind"], RECOVERY_KIND);
    assert_eq!(ev["seq"], 4);
    assert_eq!(ev["bytes"], torn.len());
    assert_eq!(ev["sha256"], r.sha256);
    assert_eq!(ev["moved_to"], r.moved_to);
    assert_eq!(ev["reason"], "missing_final_lf");
    assert_eq!(verify(&p).unwrap().fixed_point.events, 5);

    // Reopening finds nothing more to do.
    let (_, opened) = Ledger::open(&p).unwrap();
    assert!(opened.recovered.is_empty());
}

#[test]
fn an_invalid_final_line_with_its_lf_is_a_torn_tail() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let orig = write_ledger(&p, 2);
    let torn = b"{\"at\":\"2026\0\0\0\0\n".to_vec();
    fs::write(&p, [orig.concat(), torn.clone()].concat()).unwrap();
    let (_, opened) = Ledger::open(&p).unwrap();
    let r = &opened.recovered[0];
    assert_eq!(r.reason, Some(Reason::InvalidJson));
    assert_eq!(fs::read(t.path().join(&r.moved_to)).unwrap(), torn);
    verify(&p).unwrap();
}

#[test]
fn a_ledger_that_is_only_a_torn_line_recovers_to_one_event() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    fs::write(&p, b"{\"at\"").unwrap();
    let (l, opened) = Ledger::open(&p).unwrap();
    assert_eq!(opened.events, 0);
    assert_eq!(opened.recovered[0].seq, 1);
    assert!(
        opened.recovered[0]
            .moved_to
            .starts_with("ledger.jsonl.torn.1.")
    );
    assert_eq!(l.last_seq(), 1);
}

/// Crash after the tail was moved aside and the ledger truncated, before the event was
/// written: the next open records the moved file.
#[test]
fn a_moved_tail_left_unrecorded_by_a_crash_is_recorded_at_the_next_open() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    write_ledger(&p, 2);
    let name = "ledger.jsonl.torn.3.20261130T060102.345Z";
    fs::write(t.path().join(name), b"{\"par").unwrap();
    let (_, opened) = Ledger::open(&p).unwrap();
    assert_eq!(
        opened.recovered,
        vec![Recovery {
            seq: 3,
            bytes: 5,
            sha256: format!("sha256:{}", sha_hex(b"{\"par")),
            moved_to: name.into(),
            offset: None,
            reason: None,
            recorded_after_restart: true,
        }]
    );
    let ev: Value = serde_json::from_slice(&lines(&p)[2]).unwrap();
    assert_eq!(ev["recorded_after_restart"], true);
    assert_eq!(ev["moved_to"], name);
    let (_, opened) = Ledger::open(&p).unwrap();
    assert!(opened.recovered.is_empty(), "recorded once only");
}

/// Crash after the copy was made durable, before the ledger was truncated: the next open
/// finds the same torn bytes and reuses the copy instead of making a second one.
#[test]
fn a_copy_made_before_a_crash_is_reused_for_the_same_tail() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let orig = write_ledger(&p, 2);
    let torn = b"{\"at\":\"20".to_vec();
    fs::write(&p, [orig.concat(), torn.clone()].concat()).unwrap();
    let name = "ledger.jsonl.torn.3.20261130T060102.345Z";
    fs::write(t.path().join(name), &torn).unwrap();
    // A temp copy left by a crash mid-copy is ignored.
    fs::write(t.path().join(".ledger.jsonl.torn-tmp.1.2"), b"{").unwrap();
    let (_, opened) = Ledger::open(&p).unwrap();
    assert_eq!(opened.recovered.len(), 1);
    assert_eq!(opened.recovered[0].moved_to, name);
    assert!(!opened.recovered[0].recorded_after_restart);
    assert_eq!(
        torn_files(t.path()),
        vec![".ledger.jsonl.torn-tmp.1.2".to_string(), name.to_string()]
    );
    verify(&p).unwrap();
}

#[test]
fn tail_reads_the_last_lines_from_the_end() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    write_ledger(&p, 50);
    let tl = tail(&p, 3).unwrap();
    let seqs: Vec<u64> = tl
        .lines
        .iter()
        .map(|l| match l {
            TailLine::Event(m) => m["seq"].as_u64().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(seqs, vec![48, 49, 50]);
    assert_eq!(tl.torn_tail_bytes, 0);
    assert_eq!(tail(&p, 500).unwrap().lines.len(), 50);
    assert!(tail(&p, 0).unwrap().lines.is_empty());

    let mut bytes = fs::read(&p).unwrap();
    bytes.extend_from_slice(b"[1]\n{\"torn");
    fs::write(&p, &bytes).unwrap();
    let tl = tail(&p, 2).unwrap();
    assert_eq!(tl.torn_tail_bytes, 6);
    assert!(matches!(&tl.lines[0], TailLine::Event(m) if m["seq"] == 50));
    assert!(matches!(&tl.lines[1], TailLine::Unreadable { text, .. } if text == "[1]"));
}

#[test]
fn tail_handles_lines_longer_than_its_first_block() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    l.append("a.b", &fields(json!({"s": "1"}))).unwrap();
    l.append("a.b", &fields(json!({"s": "x".repeat(200 << 10)})))
        .unwrap();
    l.append("a.b", &fields(json!({"s": "y".repeat(100 << 10)})))
        .unwrap();
    drop(l);
    let tl = tail(&p, 2).unwrap();
    assert_eq!(tl.lines.len(), 2);
    assert!(matches!(&tl.lines[0], TailLine::Event(m) if m["seq"] == 2));
}
