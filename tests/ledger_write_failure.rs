//! A write that fails half way (the file-size limit, RLIMIT_FSIZE, cuts it) leaves a partial
//! line; the ledger then refuses every append until it is reopened, and reopening moves the
//! partial line aside. This file holds one test on purpose: the limit applies to the whole
//! test process.

use std::fs;

use proctor::ledger::{self, Ledger, LedgerError, Reason};
use serde_json::{Map, Value, json};

fn set_fsize_limit(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain system calls with valid arguments.
    unsafe {
        // Without this, crossing the limit kills the process with SIGXFSZ.
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

#[test]
fn a_failed_write_stops_the_writer_and_the_partial_line_is_recovered_on_reopen() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("ledger.jsonl");
    let (l, _) = Ledger::open(&p).unwrap();
    let fields = |i: u64| -> Map<String, Value> {
        match json!({"i": i, "pad": "x".repeat(100)}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    };
    let limit = 1000;
    set_fsize_limit(limit);
    let mut acknowledged = 0;
    let err = loop {
        match l.append("test.event", &fields(acknowledged)) {
            Ok(seq) => acknowledged = seq,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, LedgerError::Failed { .. }), "{err}");
    // Every later append is refused, without touching the file.
    let len = fs::metadata(&p).unwrap().len();
    assert_eq!(len, limit, "the write was cut at the limit");
    let again = l.append("test.event", &fields(99)).unwrap_err();
    assert!(matches!(again, LedgerError::Failed { .. }), "{again}");
    assert!(again.to_string().contains("reopen"), "{again}");
    assert_eq!(fs::metadata(&p).unwrap().len(), len);
    drop(l);

    set_fsize_limit(libc::RLIM_INFINITY);
    let (l, opened) = Ledger::open(&p).unwrap();
    assert_eq!(
        opened.events, acknowledged,
        "every acknowledged event survives"
    );
    assert_eq!(opened.recovered.len(), 1);
    let r = &opened.recovered[0];
    assert_eq!(r.reason, Some(Reason::MissingFinalLf));
    assert_eq!(r.offset.unwrap() + r.bytes, limit);
    assert_eq!(
        fs::read(t.path().join(&r.moved_to)).unwrap().len() as u64,
        r.bytes
    );
    assert_eq!(r.seq, acknowledged + 1);
    assert_eq!(
        l.append("test.event", &fields(0)).unwrap(),
        acknowledged + 2
    );
    drop(l);
    assert_eq!(
        ledger::verify(&p).unwrap().fixed_point.events,
        acknowledged + 2
    );
}
