//! A private tmux server (its own socket name), driven as a person would: keys in, the
//! pane's text out. Killed on drop.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long any wait lasts before the test fails.
const WAIT: Duration = Duration::from_secs(60);

pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A `cols`×`rows` session `t` running `cmd` (through tmux's shell); the pane stays
    /// after `cmd` exits, so what it left can be read. `None` when tmux is not installed.
    pub fn start(cols: u16, rows: u16, cmd: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            return None;
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let t = Tmux {
            socket: format!("proctor-test-{}-{n}", std::process::id()),
        };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let out = t
            .tmux(&[
                "new-session",
                "-d",
                "-x",
                &cols,
                "-y",
                &rows,
                "-s",
                "t",
                cmd,
            ])
            .unwrap();
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = t.tmux(&["set-option", "-t", "t", "remain-on-exit", "on"]);
        Some(t)
    }

    pub fn tmux(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
    }

    /// `send-keys` to the pane (tmux key names: `Enter`, `C-\\`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).unwrap().status.success());
    }

    /// The pane's text, wrapped lines joined.
    pub fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-J", "-t", "t"]).unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Waits until the pane shows `needle`.
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "`{needle}` never appeared on the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The pid of the pane's first process.
    pub fn pane_pid(&self) -> i32 {
        let out = self
            .tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
