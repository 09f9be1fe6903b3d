//! The terminal emulator's cost (not a test): what vt100 takes per MiB of output, for the
//! output shapes a PTY run's screen parses, and what a screen snapshot costs. Issue 17, §1:
//! the reader no longer waits for the emulator, but a screen fetched after a burst parses
//! what it is behind, so this is the price of that fetch.
//!
//! Run: `cargo bench --bench vt100` (release profile). Environment: `BENCH_MIB` (default 32,
//! the MiB parsed per shape). It prints, for a 50×200 screen with no scrollback (what the
//! server keeps):
//!
//! 1. **Parsing, per shape**: MiB/s and ms per MiB of `Parser::process` over the whole
//!    input, fed in 64 KiB chunks (the ring's largest frame):
//!    - `emit`: the demo fake's `!emit` pattern (letters, a newline every 64th byte, as a
//!      PTY turns it into `\r\n`): plain text that scrolls, the throughput benchmark's child;
//!    - `sgr-lines`: lines in colours and bold with wide characters and a cursor jump now and
//!      then (the shape of the runs tests);
//!    - `redraw`: a full-screen tool redrawing: cursor home, 50 rows each positioned and
//!      coloured per word (256-colour SGR), what a TUI agent writes.
//! 2. **A snapshot**: `state_formatted` + `contents` of the 50×200 screen (what `GET /screen`
//!    renders), microseconds per call.

use std::num::NonZeroU16;
use std::time::Instant;

const ROWS: u16 = 50;
const COLS: u16 = 200;
const CHUNK: usize = 64 * 1024;

fn parser() -> vt100::Parser {
    vt100::Parser::new(
        NonZeroU16::new(ROWS).unwrap(),
        NonZeroU16::new(COLS).unwrap(),
        0,
    )
}

fn emit(bytes: usize) -> Vec<u8> {
    let text = proctor::providers::fake::script::pattern(0, bytes);
    text.replace('\n', "\r\n").into_bytes()
}

fn sgr_lines(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 128);
    let mut i = 0u64;
    while out.len() < bytes {
        out.extend_from_slice(
            format!(
                "\x1b[3{}m{i:06} \x1b[1m日本\x1b[0m abcdefghijklmnopqrstuvwxyz{}\r\n",
                i % 8,
                if i.is_multiple_of(97) {
                    "\x1b[2;5H*"
                } else {
                    ""
                }
            )
            .as_bytes(),
        );
        i += 1;
    }
    out
}

fn redraw(bytes: usize) -> Vec<u8> {
    let words = [
        "proctor", "reads", "the", "terminal", "of", "an", "agent", "─", "│",
    ];
    let mut out = Vec::with_capacity(bytes + 16 * 1024);
    let mut frame = 0usize;
    while out.len() < bytes {
        out.extend_from_slice(b"\x1b[?2026h\x1b[H");
        for row in 1..=ROWS as usize {
            out.extend_from_slice(format!("\x1b[{row};1H").as_bytes());
            let mut col = 0;
            let mut w = row + frame;
            while col + 10 < COLS as usize {
                let word = words[w % words.len()];
                out.extend_from_slice(
                    format!("\x1b[38;5;{}m{word} ", (w * 7 + frame) % 256).as_bytes(),
                );
                col += word.chars().count() + 1;
                w += 1;
            }
            out.extend_from_slice(b"\x1b[0m\x1b[K");
        }
        out.extend_from_slice(b"\x1b[?2026l");
        frame += 1;
    }
    out
}

fn parse(name: &str, input: &[u8]) {
    let mut p = parser();
    let t = Instant::now();
    for c in input.chunks(CHUNK) {
        p.process(c);
    }
    let secs = t.elapsed().as_secs_f64();
    let mib = input.len() as f64 / 1048576.0;
    println!(
        "parse {name:<10} {mib:6.1} MiB in {secs:6.3} s: {:7.1} MiB/s, {:6.1} ms per MiB",
        mib / secs,
        secs * 1000.0 / mib
    );
    std::hint::black_box(p.screen().cursor_position());
}

fn main() {
    let mib: usize = std::env::var("BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let bytes = mib * 1024 * 1024;
    println!("vt100 0.18, {ROWS}x{COLS}, no scrollback, {CHUNK}-byte chunks");
    parse("emit", &emit(bytes));
    parse("sgr-lines", &sgr_lines(bytes));
    parse("redraw", &redraw(bytes));

    let mut p = parser();
    p.process(&redraw(256 * 1024));
    let n = 2000;
    let t = Instant::now();
    for _ in 0..n {
        let sc = p.screen();
        std::hint::black_box((sc.state_formatted(), sc.contents()));
    }
    println!(
        "snapshot   state_formatted + contents of a {ROWS}x{COLS} redrawn screen: {:.0} us per call",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
