//! The runs core against real children, real pipes and real pseudo-terminals.
//!
//! Timeouts here only keep a broken build from hanging; no test asserts a duration.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use proctor::runs::{
    End, Frame, Liveness, Reactor, ReadOutcome, Run, RunError, RunSpec, ScreenSnapshot, Stream,
    TermSize, TranscriptSpec, Transport, is_same_process, proc_stat, process_exists,
};

const LONG: Duration = Duration::from_secs(60);

/// A run that is killed (group and all) if the test fails while it is live, so a failing
/// test leaves no process behind.
struct Owned(Run);

impl std::ops::Deref for Owned {
    type Target = Run;
    fn deref(&self) -> &Run {
        &self.0
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.stop(Duration::ZERO);
        }
    }
}

fn spawn(spec: RunSpec) -> Owned {
    Owned(Run::spawn(spec).unwrap())
}

fn env() -> BTreeMap<OsString, OsString> {
    BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())])
}

fn pty() -> Transport {
    Transport::Pty(TermSize { rows: 24, cols: 80 })
}

fn sh(script: &str, transport: Transport) -> RunSpec {
    RunSpec::new(["/bin/sh", "-c", script], "/", env(), transport)
}

/// Reads every frame from `cursor` until the end marker; checks seqs are contiguous.
fn read_to_end(run: &Run, mut cursor: u64) -> (Vec<Frame>, End) {
    let mut out = Vec::new();
    loop {
        match run.ring().read_from(cursor, 1 << 20) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    assert_eq!(f.seq, cursor, "seqs must be contiguous");
                    cursor += 1;
                    out.push(f);
                }
            }
            ReadOutcome::End(e) => {
                assert_eq!(e.last_seq, cursor - 1);
                return (out, e);
            }
            ReadOutcome::Pending { .. } => {
                assert!(
                    run.ring().wait_readable(cursor, LONG),
                    "no output and no end"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Reads from `cursor` until the child's accumulated output (not a pipe run's recorded input)
/// contains `needle`; returns the bytes read and the next cursor.
fn read_until(run: &Run, mut cursor: u64, needle: &str, times: usize) -> (Vec<u8>, u64) {
    let mut got = Vec::new();
    loop {
        let text = String::from_utf8_lossy(&got);
        if text.matches(needle).count() >= times {
            return (got, cursor);
        }
        match run.ring().read_from(cursor, 1 << 20) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    assert_eq!(f.seq, cursor);
                    cursor += 1;
                    // The child's output (a pipe run's input is in the ring too).
                    if f.stream != Stream::Stdin {
                        got.extend_from_slice(&f.bytes);
                    }
                }
            }
            ReadOutcome::Pending { .. } => {
                assert!(
                    run.ring().wait_readable(cursor, LONG),
                    "waited for {needle:?}, have {:?}",
                    String::from_utf8_lossy(&got)
                );
            }
            other => panic!("waiting for {needle:?}: {other:?}, have {text:?}"),
        }
    }
}

/// Polls `f` until it holds (true) or a long timeout passes (false).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + LONG;
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn bytes_of(frames: &[Frame], stream: Stream) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.stream == stream)
        .flat_map(|f| f.bytes.iter().copied())
        .collect()
}

fn lines(n: u32, eol: &str) -> String {
    (1..=n).map(|i| format!("line-{i}{eol}")).collect()
}

const LINES_SCRIPT: &str = "i=1; while [ $i -le 3000 ]; do echo line-$i; i=$((i+1)); done";

#[test]
fn pipe_output_arrives_in_order_with_contiguous_seqs() {
    let run = spawn(sh(LINES_SCRIPT, Transport::Pipe));
    let (frames, end) = read_to_end(&run, 1);
    assert_eq!(frames.first().map(|f| f.seq), Some(1));
    assert_eq!(
        String::from_utf8(bytes_of(&frames, Stream::Stdout)).unwrap(),
        lines(3000, "\n")
    );
    assert!(bytes_of(&frames, Stream::Stderr).is_empty());
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
}

#[tokio::test]
async fn pty_output_arrives_in_order_through_the_async_wait() {
    let run = spawn(sh(LINES_SCRIPT, pty()));
    let ring = run.ring().clone();
    let mut cursor = 1;
    let mut got = Vec::new();
    let end = loop {
        tokio::time::timeout(LONG, ring.readable(cursor))
            .await
            .expect("no output and no end");
        match ring.read_from(cursor, 4096) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    assert_eq!(f.seq, cursor);
                    assert_eq!(f.stream, Stream::Stdout);
                    cursor += 1;
                    got.extend_from_slice(&f.bytes);
                }
            }
            ReadOutcome::End(e) => break e,
            ReadOutcome::Pending { .. } => {}
            other => panic!("{other:?}"),
        }
    };
    // The terminal turns each \n into \r\n (onlcr).
    assert_eq!(String::from_utf8(got).unwrap(), lines(3000, "\r\n"));
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
}

/// Once proctor closed a live run's input, writing is refused as closed (a PTY run's
/// program does not see an end of file, so it stays live).
#[test]
fn input_closed_is_refused_while_the_run_lives() {
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), pty()));
    run.close_input();
    assert!(matches!(run.write_input(b"x"), Err(RunError::InputClosed)));
    run.stop(Duration::from_secs(30)).unwrap();
}

#[test]
fn input_echoes_through_cat_on_pipes() {
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), Transport::Pipe));
    run.write_input(b"hello over a pipe\n").unwrap();
    let (got, cursor) = read_until(&run, 1, "hello over a pipe\n", 1);
    assert_eq!(got, b"hello over a pipe\n");
    run.close_input();
    // Refused either way: closed, or (cat having already seen the end of file and exited)
    // no longer live.
    assert!(matches!(
        run.write_input(b"x"),
        Err(RunError::InputClosed | RunError::NotLive { .. })
    ));
    let (rest, end) = read_to_end(&run, cursor);
    assert!(rest.is_empty());
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    assert!(matches!(
        run.write_input(b"x"),
        Err(RunError::NotLive { .. })
    ));
}

#[test]
fn input_echoes_through_cat_on_a_pty() {
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), pty()));
    run.write_input(b"hello over a pty\n").unwrap();
    // Once from the terminal's echo, once from cat.
    let (got, cursor) = read_until(&run, 1, "hello over a pty\r\n", 2);
    assert_eq!(got, b"hello over a pty\r\nhello over a pty\r\n");
    // ^D at the start of a line: cat reads end of file and exits 0.
    run.write_input(b"\x04").unwrap();
    let (_, end) = read_to_end(&run, cursor);
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
}

#[test]
fn stderr_is_its_own_stream_on_pipes() {
    let run = spawn(sh(
        "echo out-1; echo err-1 >&2; echo out-2; echo err-2 >&2",
        Transport::Pipe,
    ));
    let (frames, _) = read_to_end(&run, 1);
    assert_eq!(bytes_of(&frames, Stream::Stdout), b"out-1\nout-2\n");
    assert_eq!(bytes_of(&frames, Stream::Stderr), b"err-1\nerr-2\n");
}

#[test]
fn a_tiny_ring_evicts_and_a_late_reader_gets_lag() {
    let mut spec = sh("head -c 200000 /dev/zero", Transport::Pipe);
    spec.ring_bytes = 1024;
    let run = spawn(spec);
    let end = loop {
        if let Some(e) = run.ring().ended() {
            break e;
        }
        run.ring().wait_readable(run.ring().status().next_seq, LONG);
    };
    let status = run.ring().status();
    assert_eq!(status.total_bytes, 200_000);
    assert!(status.held_bytes <= 1024, "{status:?}");
    let first = match run.ring().read_from(1, usize::MAX) {
        ReadOutcome::Lag { first_available } => first_available,
        other => panic!("expected lag, got {other:?}"),
    };
    assert!(first > 1);
    assert_eq!(first, status.first_available);
    let (frames, end2) = read_to_end(&run, first);
    assert_eq!(end2, end);
    assert_eq!(frames.last().unwrap().seq, end.last_seq);
    assert!(frames.iter().all(|f| f.bytes.iter().all(|&b| b == 0)));
}

fn reconnect_is_exact(transport: Transport) {
    let t = tempfile::tempdir().unwrap();
    // A pause after line-100, so the first connection leaves before the rest is written (a
    // fast child's 3000 lines can otherwise all be in the ring by its first read, and the
    // second connection would have nothing to get).
    let script = "i=1; while [ $i -le 3000 ]; do echo line-$i; \
                  [ $i -eq 100 ] && sleep 1; i=$((i+1)); done";
    let mut spec = sh(script, transport);
    spec.transcript = Some(TranscriptSpec::new(t.path().join("tr")));
    let run = spawn(spec);
    // First connection: read some, then go away mid-stream.
    let (first, cursor) = read_until(&run, 1, "line-100", 1);
    let last = cursor - 1;
    // Second connection, later, from last + 1.
    let (frames, end) = read_to_end(&run, last + 1);
    assert_eq!(frames.first().map(|f| f.seq), Some(last + 1));
    let mut all = first;
    for f in &frames {
        all.extend_from_slice(&f.bytes);
    }
    let eol = if transport == Transport::Pipe {
        "\n"
    } else {
        "\r\n"
    };
    assert_eq!(String::from_utf8(all.clone()).unwrap(), lines(3000, eol));
    // The transcript holds the same bytes.
    let tr = run.transcript().unwrap();
    assert!(!tr.capped);
    assert_eq!(std::fs::read(&tr.files[0]).unwrap(), all);
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    if transport != Transport::Pipe {
        // Once the run has ended, its screen includes the last frame.
        let screen = run.screen().unwrap();
        assert_eq!(screen.seq, end.last_seq);
        assert!(
            screen.text.trim_end().ends_with("line-3000"),
            "{:?}",
            screen.text
        );
    }
}

#[test]
fn reconnect_from_last_plus_one_is_exact_on_pipes() {
    reconnect_is_exact(Transport::Pipe);
}

#[test]
fn reconnect_from_last_plus_one_is_exact_on_a_pty() {
    reconnect_is_exact(pty());
}

const STUBBORN: &str = "trap '' TERM; sleep 1000 & echo grandchild=$!; while :; do sleep 1; done";

/// How a test stops a run: [`Run::stop`] on its own thread, or [`Run::stop_async`] on timers
/// of a single-threaded runtime (what the server's event loop is).
#[derive(Clone, Copy)]
enum How {
    Blocking,
    OnTimers,
}

fn stop_as(how: How, run: &Run, grace: Duration) -> Result<proctor::runs::StopReport, RunError> {
    match how {
        How::Blocking => run.stop(grace),
        How::OnTimers => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run.stop_async(grace)),
    }
}

fn stop_escalates(transport: Transport) {
    stop_escalates_as(transport, How::Blocking);
}

fn stop_escalates_as(transport: Transport, how: How) {
    let run = spawn(sh(STUBBORN, transport));
    let pid = run.pid();
    let start = run.start_time().unwrap();
    let (got, _) = read_until(&run, 1, "\n", 1);
    let text = String::from_utf8(got).unwrap();
    let gc: u32 = text
        .trim()
        .strip_prefix("grandchild=")
        .unwrap()
        .parse()
        .unwrap();
    let gc_stat = proc_stat(gc).unwrap();
    assert_eq!(gc_stat.pgrp as u32, pid, "the grandchild shares the group");
    assert!(process_exists(gc));

    let report = stop_as(how, &run, Duration::from_millis(300)).unwrap();
    assert!(report.was_running);
    assert!(report.sent_term);
    assert!(
        report.sent_kill,
        "SIGTERM was ignored, so SIGKILL must follow"
    );
    let exit = report.exit.unwrap();
    assert_eq!(exit.signal(), Some(libc::SIGKILL));
    assert_eq!(exit.exit_code(), None);
    assert!(report.group_gone);
    assert_eq!(run.liveness(), Liveness::Exited { exit });
    assert!(!is_same_process(pid, start));
    // Dead now (a zombie at most, waiting for init to collect it), and then gone: ESRCH.
    assert!(
        proc_stat(gc).is_none_or(|s| s.state == 'Z'),
        "the grandchild survived"
    );
    assert!(
        eventually(|| !process_exists(gc)),
        "the grandchild was never collected"
    );
    // The ring ends with the same observed status.
    let (_, end) = read_to_end(&run, 1);
    assert_eq!(end.exit, Some(exit));
    // Stopping again is a no-op that reports the same exit.
    let again = stop_as(how, &run, Duration::from_millis(300)).unwrap();
    assert!(!again.was_running && !again.sent_term && !again.sent_kill);
    assert_eq!(again.exit, Some(exit));
}

#[test]
fn stop_on_timers_escalates_the_same_on_pipes() {
    stop_escalates_as(Transport::Pipe, How::OnTimers);
}

#[test]
fn stop_on_timers_escalates_the_same_on_a_pty() {
    stop_escalates_as(pty(), How::OnTimers);
}

#[test]
fn stop_on_timers_does_not_kill_a_child_that_honours_sigterm() {
    let run = spawn(RunSpec::new(
        ["/usr/bin/sleep", "1000"],
        "/",
        env(),
        Transport::Pipe,
    ));
    let report = stop_as(How::OnTimers, &run, Duration::from_secs(30)).unwrap();
    assert!(report.was_running && report.sent_term && !report.sent_kill);
    assert!(report.group_gone);
    assert_eq!(report.exit.unwrap().signal(), Some(libc::SIGTERM));
}

#[test]
fn stop_escalates_to_sigkill_for_the_whole_group_on_pipes() {
    stop_escalates(Transport::Pipe);
}

#[test]
fn stop_escalates_to_sigkill_for_the_whole_group_on_a_pty() {
    stop_escalates(pty());
}

#[test]
fn a_child_that_honours_sigterm_is_not_killed() {
    let run = spawn(RunSpec::new(
        ["/usr/bin/sleep", "1000"],
        "/",
        env(),
        Transport::Pipe,
    ));
    let report = run.stop(Duration::from_secs(30)).unwrap();
    assert!(report.sent_term && !report.sent_kill);
    assert_eq!(report.exit.unwrap().signal(), Some(libc::SIGTERM));
}

#[test]
fn a_stopped_child_is_continued_so_it_can_honour_sigterm() {
    let run = spawn(sh("echo up; kill -STOP $$; sleep 1000", Transport::Pipe));
    read_until(&run, 1, "up", 1);
    // Wait until the kernel shows it stopped (state T).
    assert!(
        eventually(|| proc_stat(run.pid()).map(|s| s.state) == Some('T')),
        "the child never stopped"
    );
    let report = run.stop(Duration::from_secs(30)).unwrap();
    assert!(!report.sent_kill);
    assert_eq!(report.exit.unwrap().signal(), Some(libc::SIGTERM));
}

#[test]
fn exit_codes_and_signals_are_observed_on_both_transports() {
    for transport in [Transport::Pipe, pty()] {
        let run = spawn(sh("echo bye; exit 7", transport));
        let (_, end) = read_to_end(&run, 1);
        let exit = end.exit.unwrap();
        assert_eq!((exit.exit_code(), exit.signal()), (Some(7), None));
        assert_eq!(run.exit(), Some(exit));

        let run = spawn(sh("kill -USR1 $$", transport));
        let (_, end) = read_to_end(&run, 1);
        let exit = end.exit.unwrap();
        assert_eq!(
            (exit.exit_code(), exit.signal()),
            (None, Some(libc::SIGUSR1))
        );
    }
}

#[test]
fn a_pty_child_leads_its_own_session_and_a_pipe_child_its_own_group() {
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), pty()));
    let pid = run.pid() as i32;
    let s = proc_stat(run.pid()).unwrap();
    assert_eq!(s.session, pid, "session leader");
    assert_eq!(s.pgrp, pid, "process group leader");
    assert_ne!(s.tty_nr, 0, "has a controlling terminal");
    assert_eq!(s.tpgid, pid, "is the terminal's foreground group");
    assert_eq!(run.start_time(), Some(s.start_time));
    run.stop(Duration::from_secs(30)).unwrap();

    let me = proc_stat(std::process::id()).unwrap();
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), Transport::Pipe));
    let s = proc_stat(run.pid()).unwrap();
    assert_eq!(s.pgrp, run.pid() as i32, "process group leader");
    assert_eq!(s.session, me.session, "stays in our session");
    assert_eq!(s.tty_nr, 0, "no controlling terminal");
    run.stop(Duration::from_secs(30)).unwrap();
}

#[test]
fn resize_changes_what_the_child_sees_and_the_screen() {
    let run = spawn(sh(
        "stty size; read x; stty size; read y",
        Transport::Pty(TermSize { rows: 24, cols: 80 }),
    ));
    let (_, cursor) = read_until(&run, 1, "24 80\r\n", 1);
    let size = TermSize {
        rows: 40,
        cols: 100,
    };
    run.resize(size).unwrap();
    run.write_input(b"\n").unwrap();
    let (_, cursor) = read_until(&run, cursor, "40 100\r\n", 1);
    let screen = run.screen().unwrap();
    assert_eq!(screen.size, size);
    assert!(screen.text.contains("40 100"), "{:?}", screen.text);
    assert!(matches!(
        run.resize(TermSize { rows: 0, cols: 10 }),
        Err(RunError::BadSize { .. })
    ));
    run.write_input(b"\n").unwrap();
    let (_, end) = read_to_end(&run, cursor);
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    assert!(matches!(run.resize(size), Err(RunError::NotLive { .. })));
}

#[test]
fn screen_then_attach_from_seq_plus_one_reproduces_the_terminal() {
    let run = spawn(RunSpec::new(["/bin/cat"], "/", env(), pty()));
    run.write_input(b"\x1b[1mone\x1b[0m\n").unwrap();
    // The terminal echoes the escape as `^[` (echoctl); cat writes it raw, so the raw
    // sequence followed by the line end marks the end of cat's line.
    let (_, cursor) = read_until(&run, 1, "\x1b[0m\r\n", 1);
    let snap = run.screen().unwrap();
    assert_eq!(snap.seq, cursor - 1, "the screen includes every frame read");
    assert_eq!(snap.text, "^[[1mone^[[0m\none");
    assert_eq!(snap.cursor, (2, 0));

    run.write_input(b"two\n").unwrap();
    let (after, _) = read_until(&run, snap.seq + 1, "two\r\n", 2);
    assert!(!String::from_utf8_lossy(&after).contains("one"));
    // A client that draws the snapshot, then applies frames from seq + 1, has the screen.
    let mut client = vt100::Parser::new(
        std::num::NonZeroU16::new(snap.size.rows).unwrap(),
        std::num::NonZeroU16::new(snap.size.cols).unwrap(),
        0,
    );
    client.process(snap.formatted.as_bytes());
    client.process(&after);
    let now = run.screen().unwrap();
    assert_eq!(client.screen().contents(), now.text);
    assert_eq!(client.screen().cursor_position(), now.cursor);
    assert!(client.screen().cell(1, 0).unwrap().bold());
    assert!(!client.screen().cell(0, 0).unwrap().bold());
    run.stop(Duration::from_secs(30)).unwrap();
}

#[test]
fn interrupt_signals_the_foreground_group_and_the_process_stays() {
    let run = spawn(sh(
        "trap 'echo got-int' INT; echo ready; while :; do sleep 1; done",
        pty(),
    ));
    let (_, cursor) = read_until(&run, 1, "ready", 1);
    // A cooked terminal (ISIG on): SIGINT to its foreground group, as the line discipline
    // would send for ^C.
    match run.interrupt().unwrap() {
        proctor::runs::Interrupt::Signal { group } => assert_eq!(group, run.pid()),
        other => panic!("a cooked terminal gets SIGINT: {other:?}"),
    }
    let (_, _) = read_until(&run, cursor, "got-int", 1);
    assert_eq!(run.liveness(), Liveness::Running);
    assert!(process_exists(run.pid()));
    let report = run.stop(Duration::from_secs(30)).unwrap();
    assert!(report.was_running);

    let pipe = spawn(RunSpec::new(["/bin/cat"], "/", env(), Transport::Pipe));
    assert!(matches!(pipe.interrupt(), Err(RunError::NotAPty { .. })));
    assert!(matches!(pipe.screen(), Err(RunError::NotAPty { .. })));
    pipe.stop(Duration::from_secs(30)).unwrap();
}

/// A full-screen tool puts its terminal in raw mode (no ISIG): a person's Ctrl-C reaches it
/// as a key, and it decides (codex, gemini and opencode interrupt or ask "again to quit").
/// A SIGINT sent past the line discipline would end such a tool; the interrupt types the
/// terminal's interrupt character instead, as the person's key would.
#[test]
fn interrupt_types_ctrl_c_to_a_raw_mode_terminal_and_the_tool_reads_it() {
    let run = spawn(sh(
        "stty raw -isig -echo; echo ready; head -c1 | od -An -tx1; echo read-done; sleep 30",
        pty(),
    ));
    let (_, cursor) = read_until(&run, 1, "ready", 1);
    // stty has run before `ready`: the terminal is raw now.
    match run.interrupt().unwrap() {
        proctor::runs::Interrupt::Key { byte } => assert_eq!(byte, 0x03),
        other => panic!("a raw-mode terminal gets the key, not a signal: {other:?}"),
    }
    let (got, _) = read_until(&run, cursor, "read-done", 1);
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(text.contains("03"), "the tool read the ^C byte: {text}");
    assert_eq!(run.liveness(), Liveness::Running, "the tool lives on");
    run.stop(Duration::from_secs(30)).unwrap();
}

#[test]
fn the_transcript_stops_at_its_cap_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let mut spec = sh(
        "i=0; while [ $i -lt 500 ]; do echo 123456789; i=$((i+1)); done",
        Transport::Pipe,
    );
    spec.transcript = Some(TranscriptSpec {
        dir: t.path().join("run-0001"),
        cap_bytes: 1000,
        spill_max: 0,
    });
    let run = spawn(spec);
    let (frames, _) = read_to_end(&run, 1);
    let all = bytes_of(&frames, Stream::Stdout);
    assert_eq!(all.len(), 5000);
    let tr = run.transcript().unwrap();
    assert!(tr.capped);
    assert_eq!(tr.bytes_written, 1000);
    assert_eq!(tr.error, None);
    let on_disk = std::fs::read(t.path().join("run-0001/stdout.raw")).unwrap();
    assert_eq!(on_disk, all[..1000]);
    assert!(
        std::fs::read(t.path().join("run-0001/stderr.raw"))
            .unwrap()
            .is_empty()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(t.path().join("run-0001/stdout.raw"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_grandchild_holding_the_output_does_not_keep_the_run_open() {
    let mut spec = sh("sleep 1000 & echo parent-done", Transport::Pipe);
    spec.drain_after_exit = Duration::from_millis(300);
    let run = spawn(spec);
    let (frames, end) = read_to_end(&run, 1);
    assert_eq!(bytes_of(&frames, Stream::Stdout), b"parent-done\n");
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    // The leader is gone but its group is not: stop ends the rest.
    assert!(proctor::runs::group_has_live_members(run.pid()));
    let report = run.stop(Duration::from_secs(30)).unwrap();
    assert!(!report.was_running && report.sent_term);
    assert!(report.group_gone);
}

#[test]
fn bad_specs_are_refused_before_anything_starts() {
    let e = Run::spawn(RunSpec::new(["cat"], "/", env(), Transport::Pipe)).unwrap_err();
    assert!(matches!(e, RunError::ProgramNotAbsolute { .. }), "{e}");
    let e = Run::spawn(RunSpec::new(["/bin/cat"], "/no/such/folder", env(), pty())).unwrap_err();
    assert!(matches!(e, RunError::BadCwd { .. }), "{e}");
    let e = Run::spawn(RunSpec::new(Vec::<OsString>::new(), "/", env(), pty())).unwrap_err();
    assert!(matches!(e, RunError::EmptyArgv));
    let mut bad = env();
    bad.insert("A=B".into(), "x".into());
    let e = Run::spawn(RunSpec::new(["/bin/cat"], "/", bad, Transport::Pipe)).unwrap_err();
    assert!(matches!(e, RunError::BadEnv { .. }), "{e}");
    let e = Run::spawn(RunSpec::new(
        ["/no/such/program"],
        "/",
        env(),
        Transport::Pipe,
    ))
    .unwrap_err();
    assert!(matches!(e, RunError::Spawn { .. }), "{e}");
    let e = Run::spawn(RunSpec::new(["/no/such/program"], "/", env(), pty())).unwrap_err();
    assert!(matches!(e, RunError::Spawn { .. }), "{e}");
}

#[test]
fn the_child_inherits_only_its_three_standard_descriptors() {
    // Other tests start PTYs concurrently: none of their descriptors may leak in here.
    for _ in 0..10 {
        for transport in [Transport::Pipe, pty()] {
            let run = spawn(RunSpec::new(
                ["/usr/bin/ls", "/proc/self/fd"],
                "/",
                env(),
                transport,
            ));
            let (frames, end) = read_to_end(&run, 1);
            assert_eq!(end.exit.unwrap().exit_code(), Some(0));
            let out = String::from_utf8(bytes_of(&frames, Stream::Stdout)).unwrap();
            let fds: Vec<&str> = out.split_whitespace().collect();
            // 3 is the folder ls opened to list itself.
            assert_eq!(fds, ["0", "1", "2", "3"], "{transport:?}");
        }
    }
}

#[test]
fn the_working_folder_is_the_one_given() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().canonicalize().unwrap();
    for transport in [Transport::Pipe, pty()] {
        let run = spawn(RunSpec::new(["/bin/pwd"], &dir, env(), transport));
        let (frames, _) = read_to_end(&run, 1);
        let out = String::from_utf8(bytes_of(&frames, Stream::Stdout)).unwrap();
        assert_eq!(out.trim_end(), dir.to_str().unwrap());
    }
}

#[test]
fn terminal_sizes_beyond_the_limits_are_refused_at_start_and_resize() {
    use proctor::runs::{MAX_COLS, MAX_ROWS};
    for (rows, cols) in [
        (u16::MAX, u16::MAX),
        (MAX_ROWS + 1, 80),
        (24, MAX_COLS + 1),
        (0, 80),
    ] {
        let e = Run::spawn(RunSpec::new(
            ["/bin/cat"],
            "/",
            env(),
            Transport::Pty(TermSize { rows, cols }),
        ))
        .unwrap_err();
        assert!(matches!(e, RunError::BadSize { .. }), "{rows}x{cols}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&MAX_ROWS.to_string()) && msg.contains(&MAX_COLS.to_string()),
            "the refusal names the limits: {msg}"
        );
    }
    let run = spawn(RunSpec::new(
        ["/bin/cat"],
        "/",
        env(),
        Transport::Pty(TermSize {
            rows: MAX_ROWS,
            cols: MAX_COLS,
        }),
    ));
    assert_eq!(
        run.screen().unwrap().size,
        TermSize {
            rows: MAX_ROWS,
            cols: MAX_COLS
        }
    );
    for (rows, cols) in [(u16::MAX, u16::MAX), (MAX_ROWS + 1, 80), (24, MAX_COLS + 1)] {
        assert!(matches!(
            run.resize(TermSize { rows, cols }),
            Err(RunError::BadSize { .. })
        ));
    }
    assert_eq!(run.screen().unwrap().size.cols, MAX_COLS);
    run.stop(LONG).unwrap();
}

#[test]
fn the_emulator_is_released_when_the_output_ends_and_the_final_screen_stays() {
    let run = spawn(sh(
        "printf '\\033[1mlast words\\033[0m\\n'; read x",
        Transport::Pty(TermSize {
            rows: 100,
            cols: 300,
        }),
    ));
    let (_, cursor) = read_until(&run, 1, "last words", 1);
    // A screen is born asleep and its emulator made by the screen thread once output
    // comes (docs/runs.md): the output can be read from the ring before that. Once it was
    // asked for, a live run holds it. (CI on 423e391 read `holds_emulator` first and lost
    // that race.)
    let live = run.screen().unwrap();
    assert_eq!(
        run.holds_emulator(),
        Some(true),
        "a live run whose screen was asked for holds it"
    );
    run.write_input(b"\n").unwrap();
    let (_, end) = read_to_end(&run, cursor);
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    assert!(
        eventually(|| run.holds_emulator() == Some(false)),
        "the emulator (rows x cols cells) is dropped once the output has ended"
    );
    let last = run.screen().unwrap();
    assert!(last.text.contains("last words"), "{:?}", last.text);
    assert_eq!(last.size, live.size);
    assert!(last.seq >= live.seq);
    assert!(last.formatted.contains("last words"));
    assert!(matches!(
        run.resize(TermSize { rows: 24, cols: 80 }),
        Err(RunError::NotLive { .. })
    ));
    let pipe = spawn(sh("true", Transport::Pipe));
    assert_eq!(pipe.holds_emulator(), None);
}

// --- The screen is off the output's way (issue 17, section 1) --------------------------------

/// Lines of text in colours, bold, wide characters and a cursor jump now and then: about 60
/// bytes a line, `n` lines.
fn busy_awk(n: u32) -> String {
    format!(
        "awk 'BEGIN {{ for (i = 0; i < {n}; i++) printf \"\\033[3%dm%06d \\033[1m日本\\033[0m \
         abcdefghijklmnopqrstuvwxyz%s\\n\", i % 8, i, (i % 97 == 0 ? \"\\033[2;5H*\" : \"\") }}'"
    )
}

fn small_ring_pty(script: &str, transcript: Option<&std::path::Path>) -> RunSpec {
    let mut spec = sh(script, pty());
    spec.ring_bytes = 64 * 1024;
    if let Some(dir) = transcript {
        let mut t = TranscriptSpec::new(dir);
        t.cap_bytes = 1 << 30;
        spec.transcript = Some(t);
    }
    spec
}

/// A fresh emulator fed `bytes` at `size`, then (when given) resized at byte `at` and fed
/// the rest: what the run's screen must equal.
fn fresh_screen(bytes: &[u8], size: TermSize, resize: Option<(usize, TermSize)>) -> vt100::Parser {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap();
    let mut p = vt100::Parser::new(nz(size.rows), nz(size.cols), 0);
    match resize {
        Some((at, to)) => {
            p.process(&bytes[..at]);
            p.set_size(nz(to.rows), nz(to.cols));
            p.process(&bytes[at..]);
        }
        None => p.process(bytes),
    }
    p
}

fn assert_same_screen(snap: &proctor::runs::ScreenSnapshot, want: &vt100::Parser) {
    let sc = want.screen();
    assert_eq!(snap.text, sc.contents());
    assert_eq!(snap.formatted, sc.state_formatted());
    assert_eq!(snap.cursor, sc.cursor_position());
    let (rows, cols) = sc.size();
    assert_eq!((snap.size.rows, snap.size.cols), (rows.get(), cols.get()));
}

/// Waits until the newest frames the ring holds contain `needle` (the ring may have
/// evicted everything before them).
fn wait_tail(run: &Run, needle: &str) {
    loop {
        let st = run.ring().status();
        if let ReadOutcome::Frames(fs) = run.ring().read_from(st.first_available, usize::MAX) {
            let bytes: Vec<u8> = fs.iter().flat_map(|f| f.bytes.iter().copied()).collect();
            if String::from_utf8_lossy(&bytes).contains(needle) {
                return;
            }
        }
        assert!(
            run.ring().ended().is_none(),
            "the run ended without writing {needle:?}"
        );
        assert!(run.ring().wait_readable(st.next_seq, LONG), "no output");
    }
}

#[test]
fn a_child_writing_far_more_than_the_ring_is_never_held_by_a_screen_nobody_reads() {
    let t = tempfile::tempdir().unwrap();
    // 70,000 lines, about 4 MiB: 64 times the ring.
    let run = spawn(small_ring_pty(
        &busy_awk(70_000),
        Some(&t.path().join("tr")),
    ));
    {
        // Nothing parses the output while this is held: with a reader that waited for the
        // emulator, the child would never get to the end of its output and exit.
        let _still = run.hold_screen().unwrap();
        let end = run
            .ring()
            .wait_end(LONG)
            .expect("the child ran to its end and exited");
        assert_eq!(end.exit.unwrap().exit_code(), Some(0));
        let st = run.ring().status();
        assert!(st.total_bytes > 50 * st.capacity as u64, "{st:?}");
        assert!(st.first_available > 1, "the ring wrapped");
    }
    // The final screen, once asked for, is what an emulator fed every byte shows, and is
    // tagged with the last frame.
    let tr = run.transcript().unwrap();
    assert!(!tr.capped && tr.error.is_none(), "{tr:?}");
    let all = std::fs::read(&tr.files[0]).unwrap();
    assert_eq!(all.len() as u64, run.ring().status().total_bytes);
    let snap = run.screen().unwrap();
    assert_eq!(snap.seq, run.ring().ended().unwrap().last_seq);
    assert_same_screen(
        &snap,
        &fresh_screen(&all, TermSize { rows: 24, cols: 80 }, None),
    );
    assert!(snap.text.contains("069999"), "{:?}", snap.text);
    assert!(
        eventually(|| run.holds_emulator() == Some(false)),
        "the emulator is released once the last frame is parsed"
    );
    assert_eq!(run.screen().unwrap(), snap, "the final screen stays");
}

/// The same past the transcript's cap (issue 17 §1 at the default settings, where a burst
/// passes the 64 MiB cap): the output past the cap spills for the screen, so a reader
/// never waits for an emulator nobody reads, and the final screen is still exact. With
/// the spill's bound at 0 (no spill) the child would not get to its end while the screen
/// is held.
#[test]
fn a_child_writing_far_past_the_transcripts_cap_is_never_held_by_a_screen_nobody_reads() {
    let t = tempfile::tempdir().unwrap();
    let script = busy_awk(70_000);
    let mut spec = small_ring_pty(&script, Some(&t.path().join("tr")));
    if let Some(tr) = spec.transcript.as_mut() {
        tr.cap_bytes = 256 * 1024;
    }
    let run = spawn(spec);
    {
        let _still = run.hold_screen().unwrap();
        let end = run
            .ring()
            .wait_end(LONG)
            .expect("the child ran to its end and exited");
        assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    }
    let tr = run.transcript().unwrap();
    assert!(tr.capped, "{tr:?}");
    assert_eq!(tr.bytes_written, 256 * 1024);
    // What the child wrote, through a pipe, with the terminal's newline translation.
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let mut want = Vec::new();
    for &b in &out.stdout {
        if b == b'\n' {
            want.push(b'\r');
        }
        want.push(b);
    }
    assert_eq!(want.len() as u64, run.ring().status().total_bytes);
    assert!(want.len() > 10 * 256 * 1024, "far past the cap");
    let snap = run.screen().unwrap();
    assert_eq!(snap.seq, run.ring().ended().unwrap().last_seq);
    assert_same_screen(
        &snap,
        &fresh_screen(&want, TermSize { rows: 24, cols: 80 }, None),
    );
    assert!(snap.text.contains("069999"), "{:?}", snap.text);
}

#[test]
fn a_screen_fetched_after_the_ring_wrapped_is_exact_then_the_final_one_too() {
    let t = tempfile::tempdir().unwrap();
    let script = format!(
        "{}; printf 'READY'; read x; printf '\\033[2J\\033[3;3Hafter \\033[7mthe end\\033[0m'",
        busy_awk(50_000)
    );
    let run = spawn(small_ring_pty(&script, Some(&t.path().join("tr"))));
    {
        let _still = run.hold_screen().unwrap();
        wait_tail(&run, "READY");
    }
    // The child waits for a line: nothing more comes until it gets one.
    let head = run.ring().status();
    assert!(head.first_available > 1, "the ring wrapped: {head:?}");
    let live = run.screen().unwrap();
    assert_eq!(
        live.seq,
        head.next_seq - 1,
        "tagged with the last frame, exactly"
    );
    let so_far = std::fs::read(&run.transcript().unwrap().files[0]).unwrap();
    assert_eq!(so_far.len() as u64, head.total_bytes);
    assert_same_screen(
        &live,
        &fresh_screen(&so_far, TermSize { rows: 24, cols: 80 }, None),
    );
    assert!(live.text.ends_with("READY"), "{:?}", live.text);

    run.write_input(b"\n").unwrap();
    let end = run.ring().wait_end(LONG).unwrap();
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    assert!(eventually(|| run.holds_emulator() == Some(false)));
    let last = run.screen().unwrap();
    assert_eq!(last.seq, end.last_seq);
    let all = std::fs::read(&run.transcript().unwrap().files[0]).unwrap();
    assert_same_screen(
        &last,
        &fresh_screen(&all, TermSize { rows: 24, cols: 80 }, None),
    );
    assert!(last.text.contains("after the end"), "{:?}", last.text);
}

#[test]
fn a_resize_while_the_screen_is_behind_applies_at_its_point_in_the_output() {
    let t = tempfile::tempdir().unwrap();
    let script = format!("{}; stty size; read x; stty size", busy_awk(30_000));
    let run = spawn(small_ring_pty(&script, Some(&t.path().join("tr"))));
    let to = TermSize {
        rows: 30,
        cols: 100,
    };
    let at;
    {
        let _still = run.hold_screen().unwrap();
        wait_tail(&run, "24 80\r\n");
        at = run.ring().status().total_bytes as usize;
        // The resize does not wait for the screen (it is held still).
        run.resize(to).unwrap();
        run.write_input(b"\n").unwrap();
        run.ring().wait_end(LONG).unwrap();
    }
    let all = std::fs::read(&run.transcript().unwrap().files[0]).unwrap();
    let snap = run.screen().unwrap();
    assert_eq!(snap.seq, run.ring().ended().unwrap().last_seq);
    assert_same_screen(
        &snap,
        &fresh_screen(&all, TermSize { rows: 24, cols: 80 }, Some((at, to))),
    );
    assert!(snap.text.contains("30 100"), "{:?}", snap.text);
    assert_eq!(snap.size, to);
}

#[test]
fn without_a_transcript_the_screen_still_includes_every_byte_past_the_ring() {
    // No transcript to take evicted bytes from: the screen keeps up with the ring instead.
    let script = busy_awk(30_000);
    let run = spawn(small_ring_pty(&script, None));
    let end = run.ring().wait_end(LONG).unwrap();
    assert_eq!(end.exit.unwrap().exit_code(), Some(0));
    assert!(run.ring().status().first_available > 1, "the ring wrapped");
    // The same output, through a pipe, with the terminal's newline translation.
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut want = Vec::new();
    for &b in &out.stdout {
        if b == b'\n' {
            want.push(b'\r');
        }
        want.push(b);
    }
    assert_eq!(want.len() as u64, run.ring().status().total_bytes);
    let snap = run.screen().unwrap();
    assert_eq!(snap.seq, end.last_seq);
    assert_same_screen(
        &snap,
        &fresh_screen(&want, TermSize { rows: 24, cols: 80 }, None),
    );
}

// --- An idle screen gives its emulator back (issue 17, section 2: memory per idle run) ------
//
// The reference for "exactly" is a second run of the same program, driven the same way, on a
// reactor whose screens never sleep: both screens must be equal field by field, before and
// after output that depends on the state the rebuild has to restore and that a rendering of
// the visible screen does not carry (a scroll region, a saved cursor, the primary screen
// behind the alternate one, the current colour).

/// How long a screen goes unasked before it sleeps, on the sleeping side.
const NAP: Duration = Duration::from_millis(150);

fn spawn_on(script: &str, reactor: &Reactor, transcript: Option<std::path::PathBuf>) -> Owned {
    let mut spec = sh(script, pty());
    spec.reactor = Some(reactor.clone());
    spec.transcript = transcript.map(TranscriptSpec::new);
    spawn(spec)
}

/// The output the ring holds.
fn held_output(run: &Run) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cursor = 1;
    loop {
        match run.ring().read_from(cursor, 1 << 20) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    cursor = f.seq + 1;
                    out.extend_from_slice(&f.bytes);
                }
            }
            ReadOutcome::Lag { first_available } => cursor = first_available,
            _ => return out,
        }
    }
}

fn wait_for(run: &Run, needle: &str) {
    assert!(
        eventually(|| String::from_utf8_lossy(&held_output(run)).contains(needle)),
        "{needle:?} never came; output: {:?}",
        String::from_utf8_lossy(&held_output(run))
    );
}

/// The parts of a screen that do not depend on the run's own seq numbering.
fn face(s: &ScreenSnapshot) -> (TermSize, (u16, u16), String, String, bool) {
    (
        s.size,
        s.cursor,
        s.formatted.clone(),
        s.text.clone(),
        s.alternate_screen,
    )
}

/// Stage one sets state that the visible screen does not show: a scroll region (rows 5-10),
/// a saved cursor (row 7, column 3), the alternate screen over a written primary one, and a
/// colour in effect; then it waits. Stage two depends on all of it.
const SCRIPT: &str = r#"stty -echo
printf '\033[2J\033[Hheader line\r\n'
i=0; while [ $i -lt 30 ]; do printf 'primary %s\r\n' $i; i=$((i+1)); done
printf '\033[5;10r\033[7;3H\0337\033[32mgreen-saved'
printf '\033[?1049h\033[Halt one\r\nalt two'
printf '\033[34mSTAGE-ONE'
read x
printf 'blue-after-wake\033[?1049l\0338X-restored'
printf '\033[10;1H'
j=0; while [ $j -lt 2 ]; do printf '\r\nscrolled in region %s' $j; j=$((j+1)); done
printf '\033[mSTAGE-TWO'
read y
"#;

#[test]
fn an_idle_screen_gives_its_emulator_back_and_is_rebuilt_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let sleepy = Reactor::start_with_screen_sleep(NAP).unwrap();
    let awake = Reactor::start_with_screen_sleep(Duration::from_secs(3600)).unwrap();
    let a = spawn_on(SCRIPT, &sleepy, Some(dir.path().join("a")));
    let b = spawn_on(SCRIPT, &awake, Some(dir.path().join("b")));
    for r in [&a, &b] {
        wait_for(r, "STAGE-ONE");
    }
    // A resize the rebuild must replay at its byte.
    for r in [&a, &b] {
        r.resize(TermSize {
            rows: 30,
            cols: 100,
        })
        .unwrap();
    }
    assert_eq!(face(&a.screen().unwrap()), face(&b.screen().unwrap()));

    assert!(
        eventually(|| a.holds_emulator() == Some(false)),
        "an up-to-date screen nobody asks for gives its emulator back while the run lives"
    );
    assert_eq!(a.liveness(), Liveness::Running);
    assert_eq!(b.holds_emulator(), Some(true), "the reference never sleeps");

    let woken = a.screen().unwrap();
    assert_eq!(
        a.holds_emulator(),
        Some(true),
        "asking for the screen rebuilds it"
    );
    assert_eq!(face(&woken), face(&b.screen().unwrap()));

    // It sleeps again; output comes while it sleeps; then it is asked for.
    assert!(eventually(|| a.holds_emulator() == Some(false)));
    for r in [&a, &b] {
        r.write_input(b"go\n").unwrap();
        wait_for(r, "STAGE-TWO");
    }
    std::thread::sleep(NAP * 3);
    assert_eq!(
        a.holds_emulator(),
        Some(false),
        "output alone does not wake a sleeping screen"
    );
    let after = a.screen().unwrap();
    let reference = b.screen().unwrap();
    assert!(
        after.text.contains("X-restored") && after.text.contains("scrolled in region 1"),
        "{}",
        after.text
    );
    assert_eq!(face(&after), face(&reference));
    assert_eq!(
        after.seq,
        a.ring().status().next_seq - 1,
        "the rebuilt screen is tagged with the last frame it holds"
    );

    // Ended while asleep: the final screen is the same as the reference's.
    assert!(eventually(|| a.holds_emulator() == Some(false)));
    for r in [&a, &b] {
        r.write_input(b"\n").unwrap();
        assert!(!matches!(r.wait_exit(LONG), Liveness::Running));
    }
    assert!(eventually(|| {
        a.ring().ended().is_some() && a.screen().unwrap().seq == a.ring().ended().unwrap().last_seq
    }));
    assert_eq!(face(&a.screen().unwrap()), face(&b.screen().unwrap()));
}

#[test]
fn a_screen_that_cannot_be_rebuilt_exactly_keeps_its_emulator() {
    let dir = tempfile::tempdir().unwrap();
    let sleepy = Reactor::start_with_screen_sleep(NAP).unwrap();
    // No transcript: the bytes the ring evicts could not be parsed again.
    let bare = spawn_on("printf 'ready\\n'; read x", &sleepy, None);
    // More output than a rebuild may take.
    let big = spawn_on(
        "head -c 6000000 /dev/zero | tr '\\0' 'x'; printf 'ready\\n'; read x",
        &sleepy,
        Some(dir.path().join("big")),
    );
    // The control: a small one with a transcript does sleep.
    let small = spawn_on(
        "printf 'ready\\n'; read x",
        &sleepy,
        Some(dir.path().join("s")),
    );
    for r in [&bare, &big, &small] {
        wait_for(r, "ready");
    }
    assert!(eventually(|| small.holds_emulator() == Some(false)));
    // The big one's screen is brought up to date in the background; once it is, it has
    // had many naps' time to sleep.
    assert!(eventually(|| {
        big.screen().unwrap().seq == big.ring().status().next_seq - 1
    }));
    std::thread::sleep(NAP * 6);
    assert_eq!(bare.holds_emulator(), Some(true));
    assert_eq!(big.holds_emulator(), Some(true));
    assert!(big.screen().unwrap().text.contains("ready"));
    for r in [&bare, &big, &small] {
        r.stop(LONG).unwrap();
    }
}
