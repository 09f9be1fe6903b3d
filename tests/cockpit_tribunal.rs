//! The Tribunal view in a real terminal, on `proctor demo`'s home (its candidate has a round
//! in progress): `5` shows the focused run's candidate's seats; Enter opens a seat's routing.

mod common;

use common::pty::Term;

#[test]
fn the_tribunal_view_in_a_real_terminal_on_the_demo() {
    let h = common::TestHome::new();
    let out = h.run(&["demo", "--no-cockpit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home = h.path().to_str().unwrap().to_string();
    for (rows, cols) in [(24u16, 80u16), (48, 160)] {
        let mut t = Term::spawn(
            env!("CARGO_BIN_EXE_proctor"),
            &["--home", &home],
            rows,
            cols,
        );
        t.wait_screen("the cockpit", |s| s.contains("Sessions 6"));
        t.send(b"5");
        t.wait_screen("the Tribunal view", |s| {
            s.contains("Tribunal ·") || s.contains("Tribunal cand-")
        });
        // The sessions list has the focus after Tab: move until the worktree run (the one
        // with a candidate) is focused.
        t.send(b"\t");
        let mut found = false;
        for _ in 0..8 {
            std::thread::sleep(std::time::Duration::from_millis(300));
            if t.screen().contains("Tribunal cand-0001") {
                found = true;
                break;
            }
            t.send(b"j");
        }
        assert!(found, "no run showed the candidate's seats: {}", t.screen());
        let s = t.wait_screen("the seats", |s| {
            s.contains("round 1 of 1") && s.contains("generalist") && s.contains("pending")
        });
        for state in ["pass", "refuse", "unverified"] {
            assert!(s.contains(state), "{state}: {s}");
        }
        // Back to the seats (Esc focuses the view's first pane), then open the first seat.
        t.send(b"\x1b");
        std::thread::sleep(std::time::Duration::from_millis(300));
        t.send(b"\r");
        let s = t.wait_screen("the seat dialog", |s| s.contains("Seat defect"));
        assert!(s.contains("builder_family"), "{s}");
        assert!(s.contains("Routing"), "{s}");
        t.send(b"q");
        t.wait_screen("the dialog closed", |s| !s.contains("Seat defect"));
        t.send(b"q");
        assert_eq!(t.exit_code(), 0);
    }
}
