//! A program running in a pseudo-terminal of ours, driven as a person would: everything it
//! writes is collected by a reader thread; keys are sent as bytes.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

/// How long any wait lasts before the test fails.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Term {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    out: Arc<Mutex<Vec<u8>>>,
    /// Set by the reader at the end of the output (every slave side closed).
    eof: Arc<AtomicBool>,
    size: (u16, u16),
}

impl Term {
    /// Starts `program args…` in a `rows`×`cols` terminal, without the caller's
    /// PROCTOR_HOME and PROCTOR_TOKEN.
    pub fn spawn(program: &str, args: &[&str], rows: u16, cols: u16) -> Term {
        Term::spawn_env(program, args, rows, cols, &[], &[])
    }

    /// [`Term::spawn`], with `set` added to the environment and `unset` removed from it.
    pub fn spawn_env(
        program: &str,
        args: &[&str],
        rows: u16,
        cols: u16,
        set: &[(&str, &str)],
        unset: &[&str],
    ) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.env_remove("PROCTOR_HOME");
        cmd.env_remove("PROCTOR_TOKEN");
        for v in unset {
            cmd.env_remove(v);
        }
        for (k, v) in set {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let out = Arc::new(Mutex::new(Vec::new()));
        let eof = Arc::new(AtomicBool::new(false));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let (sink, done) = (out.clone(), eof.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        let writer = pair.master.take_writer().unwrap();
        Term {
            master: pair.master,
            writer,
            child,
            out,
            eof,
            size: (rows, cols),
        }
    }

    /// `proctor --home HOME args…` in a 50×160 terminal.
    pub fn proctor(home: &Path, args: &[&str]) -> Term {
        let mut all = vec!["--home", home.to_str().unwrap()];
        all.extend_from_slice(args);
        Term::spawn(env!("CARGO_BIN_EXE_proctor"), &all, 50, 160)
    }

    /// The program's process id.
    pub fn pid(&self) -> u32 {
        self.child.process_id().unwrap()
    }

    /// Everything written so far, lossily decoded.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// What the terminal shows now: everything written so far, through a vt100 emulator of
    /// the terminal's size.
    pub fn screen(&self) -> String {
        let rows = std::num::NonZeroU16::new(self.size.0).unwrap();
        let cols = std::num::NonZeroU16::new(self.size.1).unwrap();
        let mut p = vt100::Parser::new(rows, cols, 0);
        p.process(&self.out.lock().unwrap());
        p.screen().contents()
    }

    /// Waits until what the terminal shows satisfies `pred` (`what` names it on failure).
    pub fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.screen();
            if pred(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the output contains `needle`.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_for_n(needle, 1)
    }

    /// Waits until the output contains `needle` `count` times.
    pub fn wait_for_n(&self, needle: &str, count: usize) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.text();
            if t.matches(needle).count() >= count {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?} x{count}; output:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends bytes at once.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types like a person: one key at a time.
    pub fn type_keys(&mut self, text: &str) {
        for b in text.bytes() {
            self.send(&[b]);
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits for the program to exit and for its last bytes to reach us; its exit code.
    pub fn exit_code(&mut self) -> u32 {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "did not exit; output:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // A descendant may keep the terminal open (no end of output then): wait a little.
        let drained = Instant::now() + Duration::from_secs(5);
        while !self.eof.load(Ordering::SeqCst) && Instant::now() < drained {
            std::thread::sleep(Duration::from_millis(10));
        }
        status.exit_code()
    }

    /// The terminal's local modes now (on Linux the master reports the slave's termios).
    pub fn lflag(&self) -> libc::tcflag_t {
        let fd = self.master.as_raw_fd().unwrap();
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0);
        t.c_lflag
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
