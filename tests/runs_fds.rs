//! Ended runs give back every descriptor they opened. One test in this file, so that no other
//! test opens or closes descriptors while it counts.

use std::time::Duration;

use proctor::runs::{Reactor, ReadOutcome, Run, RunSpec, TermSize, Transport};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn finish(run: &Run) {
    let mut cursor = 1;
    loop {
        match run.ring().read_from(cursor, usize::MAX) {
            ReadOutcome::Frames(fs) => cursor = fs.last().unwrap().seq + 1,
            ReadOutcome::End(_) => return,
            ReadOutcome::Pending { .. } => {
                assert!(run.ring().wait_readable(cursor, Duration::from_secs(60)));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn ended_and_dropped_runs_leave_no_descriptor_open() {
    let env = [("PATH".into(), "/usr/bin:/bin".into())]
        .into_iter()
        .collect();
    // Every run on one event loop, as a server's are: its own descriptors (epoll, waker)
    // stay open throughout, so they are in both counts. (A run's private loop closes its
    // descriptors once its thread has ended, after the run: CI once counted the warm run's
    // still open, and then fewer after than before.)
    let reactor = Reactor::start().unwrap();
    // A first run warms up whatever the process opens once (e.g. /dev/ptmx lookups).
    let mut spec = RunSpec::new(["/bin/true"], "/", env, Transport::Pipe);
    spec.reactor = Some(reactor.clone());
    let warm = Run::spawn(spec).unwrap();
    finish(&warm);
    drop(warm);
    let before = open_fds();
    for i in 0..20 {
        let transport = if i % 2 == 0 {
            Transport::Pipe
        } else {
            Transport::Pty(TermSize { rows: 24, cols: 80 })
        };
        let env = [("PATH".into(), "/usr/bin:/bin".into())]
            .into_iter()
            .collect();
        let mut spec = RunSpec::new(["/bin/sh", "-c", "echo hi; cat"], "/", env, transport);
        spec.reactor = Some(reactor.clone());
        let run = Run::spawn(spec).unwrap();
        run.stop(Duration::from_secs(30)).unwrap();
        finish(&run);
    }
    // The waiter closes the run's last descriptors before it writes the end marker; helper
    // threads (the PTY screen) may still be closing theirs on a loaded machine, so give them
    // a moment. A leak stays open for good and still fails.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while open_fds() != before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open_fds(), before);
}
