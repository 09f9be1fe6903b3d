//! The terminal prompt itself, through a real pseudo-terminal: this test binary re-runs
//! itself as the child (`prompt_child`, active only with PROCTOR_TTY_CHILD=1) inside a PTY
//! whose controlling terminal it becomes, and the driver types at it.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use proctor::authority::tty::{Tty, TtyError};

const CHILD_ENV: &str = "PROCTOR_TTY_CHILD";
/// Set for a child that checks which input descriptors count as its controlling terminal.
const CHILD_INPUT_ENV: &str = "PROCTOR_TTY_CHILD_INPUT";
/// Set for a child that must find typed-ahead input pending before it opens the terminal.
const CHILD_WAIT_ENV: &str = "PROCTOR_TTY_CHILD_WAIT";
/// Set for a child that reads its secret with the `rpassword` crate (after proctor's own
/// terminal checks), to show what that reader does not keep (docs/security.md).
const CHILD_RPASSWORD_ENV: &str = "PROCTOR_TTY_CHILD_RPASSWORD";
const WAIT: Duration = Duration::from_secs(30);

/// The child: a revision line, then a secret; reports what it read as hex, or the error.
#[test]
fn prompt_child() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("1") {
        return;
    }
    if std::env::var(CHILD_INPUT_ENV).as_deref() == Ok("1") {
        // The cockpit's rule: keys must come from the controlling terminal. Our stdin is it;
        // a second pseudo-terminal opened here is not.
        let ours = proctor::authority::tty::check_input_terminal(0);
        let (mut master, mut slave) = (-1, -1);
        let made = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(made, 0);
        let other = proctor::authority::tty::check_input_terminal(slave);
        println!("INPUT stdin={ours:?} other={other:?}");
        return;
    }
    if std::env::var(CHILD_WAIT_ENV).as_deref() == Ok("1") {
        // Wait until a line typed ahead is pending on the terminal, so that the flush
        // Tty::open does is certain to meet it (no race with the test's write).
        let mut fds = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut fds, 1, 30_000) };
    }
    let mut tty = match Tty::open() {
        Ok(t) => t,
        Err(e) => {
            println!("OPEN-ERROR {e:?}");
            return;
        }
    };
    if std::env::var(CHILD_RPASSWORD_ENV).as_deref() == Ok("1") {
        // proctor's checks passed (controlling terminal, foreground, flushed); the secret is
        // read by rpassword from /dev/tty, as a wrapper around it would.
        match rpassword::prompt_password("Secret: ") {
            Ok(answer) => {
                let answer = zeroize::Zeroizing::new(answer);
                tty.write(&format!("RESULT {}\r\n", hex::encode(answer.as_bytes())))
                    .unwrap()
            }
            Err(e) => tty.write(&format!("ERROR {e:?}\r\n")).unwrap(),
        }
        return;
    }
    for (prompt, secret) in [("Revision: ", false), ("Secret: ", true)] {
        let r = if secret {
            tty.read_secret(prompt)
        } else {
            tty.read_line(prompt)
        };
        match r {
            Ok(answer) => tty
                .write(&format!("RESULT {}\r\n", hex::encode(answer.as_bytes())))
                .unwrap(),
            Err(TtyError::Aborted) => {
                tty.write("ABORTED\r\n").unwrap();
                return;
            }
            Err(e) => {
                tty.write(&format!("ERROR {e:?}\r\n")).unwrap();
                return;
            }
        }
    }
}

struct Child {
    writer: Box<dyn Write + Send>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    out: Arc<Mutex<Vec<u8>>>,
    /// Set by the reader thread at end of output (every slave side closed).
    eof: Arc<std::sync::atomic::AtomicBool>,
}

impl Child {
    fn start() -> Child {
        Child::spawn(false)
    }

    /// A child that reports `check_input_terminal` for its stdin and for another terminal.
    fn start_input_check() -> Child {
        let mut c = Child::spawn_with(false, Some(CHILD_INPUT_ENV));
        c.finish();
        c
    }

    /// A child that opens the terminal only once input is pending.
    fn start_after_typed_ahead() -> Child {
        Child::spawn(true)
    }

    /// A child whose secret is read by the `rpassword` crate.
    fn start_rpassword() -> Child {
        Child::spawn_with(false, Some(CHILD_RPASSWORD_ENV))
    }

    fn spawn(wait_for_input: bool) -> Child {
        Child::spawn_with(wait_for_input, None)
    }

    fn spawn_with(wait_for_input: bool, extra_env: Option<&str>) -> Child {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "prompt_child", "--nocapture", "--test-threads=1"]);
        cmd.env(CHILD_ENV, "1");
        if wait_for_input {
            cmd.env(CHILD_WAIT_ENV, "1");
        }
        if let Some(var) = extra_env {
            cmd.env(var, "1");
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let sink = out.clone();
        let eof = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = eof.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let writer = pair.master.take_writer().unwrap();
        Child {
            writer,
            master: pair.master,
            child,
            out,
            eof,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.text();
            if t.contains(needle) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?}; output:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn send(&mut self, b: &[u8]) {
        self.writer.write_all(b).unwrap();
        self.writer.flush().unwrap();
    }

    fn finish(&mut self) -> String {
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "child did not exit:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // The child's last bytes may still be on their way to our reader thread.
        while !self.eof.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.text()
    }

    fn status(&mut self) -> portable_pty::ExitStatus {
        self.child.wait().unwrap()
    }

    fn lflag(&self) -> libc::tcflag_t {
        let fd = self.master.as_raw_fd().unwrap();
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0);
        t.c_lflag
    }
}

fn result_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("RESULT ").map(str::to_string))
        .map(|h| String::from_utf8(hex::decode(h.trim()).unwrap()).unwrap())
        .collect()
}

#[test]
fn typed_input_is_edited_filtered_and_early_input_is_flushed() {
    let mut c = Child::start_after_typed_ahead();
    // Typed before the prompt exists: discarded by the flush, never an answer.
    c.send(b"typed-ahead\r");
    c.wait_for("Revision: ");
    // Arrow keys, an SS3 key, Alt-x, bracketed-paste markers, a control byte and a
    // backspace: only the characters remain, the backspace erasing the last one.
    c.send("ab\x1b[A\x1b[1;5Cc\x1bOB\x1bx\x1b[200~dé\x1b[201~\x01Z\x7f\r".as_bytes());
    c.wait_for("Secret: ");
    c.send(b"s3cret-passphrase\x1b[D\r");
    let out = c.finish();
    assert_eq!(
        result_lines(&out),
        vec!["abcdé".to_string(), "s3cret-passphrase".to_string()],
        "{out}"
    );
    // (The kernel echoed "typed-ahead" as it arrived, before proctor's prompt took the
    // terminal; what matters is that it is not the answer above.)
    // The revision is echoed as typed; the secret is not shown at all.
    assert!(out.contains("abcd"), "{out}");
    assert!(!out.contains("s3cret"), "the secret was echoed:\n{out}");
    assert_ne!(c.lflag() & libc::ECHO, 0, "echo restored");
    assert_ne!(c.lflag() & libc::ICANON, 0, "canonical mode restored");
}

#[test]
fn ctrl_d_on_an_empty_line_aborts() {
    let mut c = Child::start();
    c.wait_for("Revision: ");
    c.send(b"x\x7f\x04");
    let out = c.finish();
    assert!(out.contains("ABORTED"), "{out}");
    assert!(result_lines(&out).is_empty(), "{out}");
    assert_ne!(c.lflag() & libc::ECHO, 0, "echo restored");
}

/// Keys read from a terminal other than the controlling one are refused (the cockpit's
/// approval dialog reads its keys itself and checks this before every prompt).
#[test]
fn only_the_controlling_terminal_counts_as_input() {
    let c = Child::start_input_check();
    let out = c.text();
    assert!(
        out.contains("INPUT stdin=Ok(()) other=Err(InputNotControlling)"),
        "{out}"
    );
}

/// Ctrl-C at proctor's prompt is a refusal the caller sees (`Aborted`: the approval flow
/// records it in a redacted receipt), with the terminal's modes restored.
#[test]
fn ctrl_c_at_the_prompt_aborts_and_restores_the_terminal() {
    let mut c = Child::start();
    c.wait_for("Revision: ");
    c.send(b"abc\x03");
    let out = c.finish();
    assert!(out.contains("ABORTED"), "{out}");
    assert!(c.status().success(), "{out}");
    assert_ne!(c.lflag() & libc::ECHO, 0, "echo restored");
    assert_ne!(c.lflag() & libc::ICANON, 0, "canonical mode restored");
}

/// Why the passphrase is not read with the `rpassword` crate (docs/security.md, "The masked
/// passphrase read"): given the same terminal, after the same checks, its reader does not keep
/// two guarantees proctor's keeps. (1) Ctrl-C: it raises SIGINT while the terminal is still in
/// its no-echo mode, so the process dies there (no refusal is returned, so no redacted receipt
/// names it) and the terminal is left without echo. (2) The bound: it accepts an answer of
/// any length (proctor's stops at 1024 bytes).
#[test]
fn rpassword_does_not_keep_the_ctrl_c_and_bound_guarantees() {
    // (1) Ctrl-C kills the process with the terminal left in no-echo mode.
    let mut c = Child::start_rpassword();
    c.wait_for("Secret: ");
    c.send(b"sec\x03");
    let out = c.finish();
    let status = c.status();
    assert!(
        !out.contains("RESULT") && !out.contains("ERROR"),
        "rpassword returned to its caller:\n{out}"
    );
    assert!(
        status.signal().is_some(),
        "the child was not killed by a signal: {status:?}\n{out}"
    );
    assert_eq!(
        c.lflag() & libc::ECHO,
        0,
        "rpassword left the terminal with echo on (it restored it)"
    );

    // (2) No bound on the answer.
    let mut c = Child::start_rpassword();
    c.wait_for("Secret: ");
    let long = "a".repeat(2000);
    c.send(long.as_bytes());
    c.send(b"\r");
    let out = c.finish();
    assert_eq!(result_lines(&out), vec![long], "{out}");
}
