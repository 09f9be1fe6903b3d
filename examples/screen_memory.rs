//! The memory a PTY run's terminal emulator costs, and that it is given back when the run
//! ends: this process's resident size (VmRSS) before a run, while it is live with its
//! screen and alternate screen filled, and after it ended.
//!
//! `cargo run --example screen_memory [ROWS COLS]` (default: the limits, 500 × 1000).
//! A measurement, not a test: no number here is asserted anywhere.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proctor::runs::{MAX_COLS, MAX_ROWS, Run, RunSpec, TermSize, Transport};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows = args.next().and_then(|a| a.parse().ok()).unwrap_or(MAX_ROWS);
    let cols = args.next().and_then(|a| a.parse().ok()).unwrap_or(MAX_COLS);
    let env = BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]);
    let before = rss_kib();
    // Fill the primary screen, then the alternate one, then wait for a line of input.
    let script = format!(
        "i=0; while [ $i -lt {rows} ]; do printf '%{cols}s\\r\\n' x; i=$((i+1)); done; \
         printf '\\033[?1049h'; i=0; while [ $i -lt {rows} ]; do printf '%{cols}s\\r\\n' y; \
         i=$((i+1)); done; printf 'filled\\n'; read x"
    );
    let run = Run::spawn(RunSpec::new(
        ["/bin/sh", "-c", &script],
        "/",
        env,
        Transport::Pty(TermSize { rows, cols }),
    ))
    .expect("a run within the limits");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !run.screen().unwrap().text.contains("filled") {
        assert!(Instant::now() < deadline, "the screen never filled");
        std::thread::sleep(Duration::from_millis(50));
    }
    let live = rss_kib();
    run.write_input(b"\n").unwrap();
    run.wait_exit(Duration::from_secs(60));
    while run.holds_emulator() == Some(true) {
        assert!(Instant::now() < deadline, "the emulator was never released");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The screen thread hands the freed pages back right after it drops the emulator.
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib();
    let screen = run.screen().unwrap();
    println!(
        "{rows} x {cols}: VmRSS {before} KiB before, {live} KiB live (screen and alternate \
         screen filled), {after} KiB after the end (final screen kept: {} bytes of text, {} \
         formatted)",
        screen.text.len(),
        screen.formatted.len()
    );
}
