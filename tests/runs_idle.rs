//! An idle PTY run gives its terminal emulator back, and its screen is rebuilt exactly when
//! it is next asked for (issue 17, section 2: memory per idle run).
//!
//! The reference for "exactly" is a second run of the same program, driven the same way, on a
//! reactor whose screens never sleep: both screens must be equal field by field, before and
//! after output that depends on the state the rebuild has to restore and that a rendering of
//! the visible screen does not carry (a scroll region, a saved cursor, the primary screen
//! behind the alternate one, the current colour).
//!
//! Timeouts here only keep a broken build from hanging; no test asserts a duration.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use proctor::runs::{
    Reactor, ReadOutcome, Run, RunSpec, ScreenSnapshot, TermSize, TranscriptSpec, Transport,
};

const LONG: Duration = Duration::from_secs(60);
/// How long a screen goes unasked before it sleeps, on the sleeping side.
const NAP: Duration = Duration::from_millis(150);

struct Owned(Run);

impl std::ops::Deref for Owned {
    type Target = Run;
    fn deref(&self) -> &Run {
        &self.0
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.stop(Duration::ZERO);
    }
}

fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn spawn(script: &str, reactor: &Reactor, transcript: Option<std::path::PathBuf>) -> Owned {
    let env = BTreeMap::from([(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))]);
    let mut spec = RunSpec::new(
        ["/bin/sh", "-c", script],
        "/",
        env,
        Transport::Pty(TermSize { rows: 24, cols: 80 }),
    );
    spec.reactor = Some(reactor.clone());
    spec.transcript = transcript.map(TranscriptSpec::new);
    Owned(Run::spawn(spec).unwrap())
}

/// The output the ring holds.
fn output(run: &Run) -> Vec<u8> {
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
        eventually(|| String::from_utf8_lossy(&output(run)).contains(needle)),
        "{needle:?} never came; output: {:?}",
        String::from_utf8_lossy(&output(run))
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
    let a = spawn(SCRIPT, &sleepy, Some(dir.path().join("a")));
    let b = spawn(SCRIPT, &awake, Some(dir.path().join("b")));
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
    assert_eq!(a.liveness(), proctor::runs::Liveness::Running);
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
        assert!(!matches!(
            r.wait_exit(LONG),
            proctor::runs::Liveness::Running
        ));
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
    let bare = spawn("printf 'ready\\n'; read x", &sleepy, None);
    // More output than a rebuild may take.
    let big = spawn(
        "head -c 6000000 /dev/zero | tr '\\0' 'x'; printf 'ready\\n'; read x",
        &sleepy,
        Some(dir.path().join("big")),
    );
    // The control: a small one with a transcript does sleep.
    let small = spawn(
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
}
