//! A child's environment is exactly the map it was given. This file holds one test because
//! it sets variables in its own process environment, which must happen before any other
//! thread runs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use proctor::runs::{ReadOutcome, Run, RunSpec, Stream, TermSize, Transport};

fn output(run: &Run) -> Vec<u8> {
    let mut cursor = 1;
    let mut out = Vec::new();
    loop {
        match run.ring().read_from(cursor, 1 << 20) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    assert_eq!(f.stream, Stream::Stdout);
                    cursor = f.seq + 1;
                    out.extend_from_slice(&f.bytes);
                }
            }
            ReadOutcome::End(_) => return out,
            ReadOutcome::Pending { .. } => {
                assert!(run.ring().wait_readable(cursor, Duration::from_secs(60)));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_child_environment_is_exactly_the_map_given() {
    // SAFETY: the test harness runs this file's single test; no other thread reads the
    // environment yet.
    unsafe {
        std::env::set_var("ANTHROPIC_API_KEY", "sk-parent-secret");
        std::env::set_var("HTTPS_PROXY", "http://proxy.invalid:3128");
        std::env::set_var("SHELL", "/bin/sh");
    }
    let map: BTreeMap<OsString, OsString> = BTreeMap::from([
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("HOME".into(), "/nonexistent-home".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("PROCTOR_RUN".into(), "run-0001 gen 1".into()),
    ]);
    for transport in [
        Transport::Pipe,
        Transport::Pty(TermSize { rows: 24, cols: 80 }),
    ] {
        let run = Run::spawn(RunSpec::new(
            ["/usr/bin/env", "-0"],
            "/",
            map.clone(),
            transport,
        ))
        .unwrap();
        let out = output(&run);
        let mut got = BTreeMap::new();
        for entry in out.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let s = String::from_utf8(entry.to_vec()).unwrap();
            let (k, v) = s.split_once('=').unwrap();
            got.insert(OsString::from(k), OsString::from(v));
        }
        assert_eq!(got, map, "{transport:?}");
    }
}
