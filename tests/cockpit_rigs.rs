//! The Rigs view in a real terminal, on `proctor demo`'s home (it opens a real namespace rig
//! under bubblewrap): `6` lists it with its weaker boundary and the server's state; `l`
//! takes the control lock through the server (the audit tail shows it), `s` suspends and
//! `r` resumes the rig's real processes, `u` releases the lock.

mod common;

use common::pty::Term;

#[test]
fn the_rigs_view_drives_the_demo_rig_in_a_real_terminal() {
    let h = common::TestHome::new();
    let out = h.run(&["demo", "--no-cockpit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("opened rig-0001"),
        "the demo opens a rig: {err}"
    );
    let home = h.path().to_str().unwrap().to_string();
    for (rows, cols) in [(24u16, 80u16), (48, 160)] {
        let mut t = Term::spawn(
            env!("CARGO_BIN_EXE_proctor"),
            &["--home", &home],
            rows,
            cols,
        );
        t.wait_screen("the cockpit", |s| s.contains("6 Rigs"));
        t.send(b"6");
        let s = t.wait_screen("the demo rig", |s| {
            s.contains("rig-0001") && s.contains("running") && s.contains("Audit rig-0001")
        });
        if cols >= 160 {
            assert!(s.contains("namespace: weaker than a VM"), "{s}");
        } else {
            assert!(s.contains("ns: weaker than VM"), "{s}");
        }
        assert!(
            s.contains("namespace boundary: weaker than a VM"),
            "the measured boundary: {s}"
        );
        assert!(s.contains("MiB"), "a live rig's memory is measured: {s}");
        t.send(b"l");
        t.wait_screen("the lock taken", |s| {
            s.contains("rig-0001 locked") && s.contains("lock done") && s.contains("1 locked")
        });
        t.send(b"s");
        t.wait_screen("suspended", |s| s.contains("rig-0001 suspended"));
        t.send(b"r");
        t.wait_screen("resumed", |s| s.contains("rig-0001 resumed: running"));
        t.send(b"u");
        t.wait_screen("the lock released", |s| s.contains("rig-0001 unlocked"));
        t.send(b"q");
        assert_eq!(t.exit_code(), 0);
    }
}
