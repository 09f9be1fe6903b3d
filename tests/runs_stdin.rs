//! What proctor writes to a pipe run's stdin is part of the run's record: a third stream,
//! `stdin`, in the ring (in order with the child's output) and `stdin.raw` in the transcript.
//! A PTY run's input (keys, which can be secrets) is never recorded.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use proctor::runs::{
    Frame, ReadOutcome, Run, RunSpec, Stream, TermSize, TranscriptSpec, Transport,
};

fn env() -> BTreeMap<OsString, OsString> {
    BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())])
}

fn frames_until_end(run: &Run) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut cursor = 1;
    loop {
        match run.ring().read_from(cursor, 1 << 20) {
            ReadOutcome::Frames(fs) => {
                for f in fs {
                    cursor = f.seq + 1;
                    out.push(f);
                }
            }
            ReadOutcome::Pending { .. } => {
                run.ring().wait_readable(cursor, Duration::from_secs(60));
            }
            ReadOutcome::End(_) => return out,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn bytes(frames: &[Frame], stream: Stream) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.stream == stream)
        .flat_map(|f| f.bytes.iter().copied())
        .collect()
}

#[test]
fn a_pipe_runs_input_is_recorded_as_stream_stdin_before_the_answer() {
    let t = tempfile::tempdir().unwrap();
    // The child answers each line it reads; its answer cannot precede the line.
    let mut spec = RunSpec::new(
        [
            "/bin/sh",
            "-c",
            "read a; echo \"got $a\"; read b; echo \"got $b\"",
        ],
        "/",
        env(),
        Transport::Pipe,
    );
    spec.transcript = Some(TranscriptSpec::new(t.path().join("gen-1")));
    let run = Run::spawn(spec).unwrap();
    run.write_input(b"one\n").unwrap();
    run.write_input(b"two\n").unwrap();
    let frames = frames_until_end(&run);
    assert_eq!(bytes(&frames, Stream::Stdin), b"one\ntwo\n");
    assert_eq!(bytes(&frames, Stream::Stdout), b"got one\ngot two\n");
    let first_in = frames
        .iter()
        .position(|f| f.stream == Stream::Stdin)
        .unwrap();
    let first_out = frames
        .iter()
        .position(|f| f.stream == Stream::Stdout)
        .unwrap();
    assert!(first_in < first_out, "{frames:?}");
    let path = t.path().join("gen-1/stdin.raw");
    assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        serde_json::to_value(Stream::Stdin).unwrap(),
        serde_json::json!("stdin")
    );
}

#[test]
fn a_pty_runs_keys_are_never_recorded() {
    let t = tempfile::tempdir().unwrap();
    let mut spec = RunSpec::new(
        ["/bin/sh", "-c", "stty -echo; read a; echo done"],
        "/",
        env(),
        Transport::Pty(TermSize { rows: 24, cols: 80 }),
    );
    spec.transcript = Some(TranscriptSpec::new(t.path().join("gen-1")));
    let run = Run::spawn(spec).unwrap();
    run.write_input(b"secret\r").unwrap();
    let frames = frames_until_end(&run);
    assert!(frames.iter().all(|f| f.stream == Stream::Stdout));
    assert!(!t.path().join("gen-1/stdin.raw").exists());
}
