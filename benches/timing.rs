//! The cost of a PTY run's timing on the output's path (issue 18 §3): not a test.
//!
//! Run: `cargo bench --bench timing` (release profile). It writes the same chunks through a
//! transcript without timing (a pipe run's: `pty.raw`-like writes only) and with it (a PTY
//! run's: each chunk also adds a `pty.timing` line to the buffer, flushed 8 KiB at a time),
//! alternately, several rounds, in the same folder, and prints the time per chunk and the
//! `write(2)` calls each made. Optional environment:
//! - `BENCH_DIR`: folder for the files (default: the system temp folder).
//! - `BENCH_CHUNKS`: chunks per measurement (default 200,000).
//! - `BENCH_CHUNK`: bytes per chunk (default 64: a small terminal update, where the timing's
//!   share is the largest; a burst reads 64 KiB at a time).
//!
//! Results and their reading: docs/performance.md, "PTY timing".

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proctor::runs::{Stream, TermSize, Transcript, TranscriptSpec};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn once(dir: &std::path::Path, timing: bool, chunks: u64, chunk: &[u8], n: u32) -> Duration {
    let spec = TranscriptSpec {
        dir: dir.join(format!("r{n}-{timing}")),
        cap_bytes: u64::MAX / 8,
        spill_max: 0,
    };
    let size = timing.then_some(TermSize {
        rows: 50,
        cols: 200,
    });
    let t = Transcript::create(&spec, size).unwrap();
    let start = Instant::now();
    for _ in 0..chunks {
        t.write(Stream::Stdout, chunk);
    }
    t.flush_timing();
    let took = start.elapsed();
    drop(t);
    let _ = std::fs::remove_dir_all(&spec.dir);
    took
}

fn main() {
    let base: PathBuf = std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let chunks = env_u64("BENCH_CHUNKS", 200_000);
    let chunk = vec![b'x'; env_u64("BENCH_CHUNK", 64) as usize];
    println!(
        "timing bench: {chunks} chunks of {} bytes, in {}",
        chunk.len(),
        dir.path().display()
    );
    let mut without = Vec::new();
    let mut with = Vec::new();
    for n in 0..5 {
        // Alternate the order, so neither side always runs on a warmer cache.
        if n % 2 == 0 {
            without.push(once(dir.path(), false, chunks, &chunk, n));
            with.push(once(dir.path(), true, chunks, &chunk, n));
        } else {
            with.push(once(dir.path(), true, chunks, &chunk, n));
            without.push(once(dir.path(), false, chunks, &chunk, n));
        }
    }
    without.sort();
    with.sort();
    let per = |d: Duration| d.as_nanos() as f64 / chunks as f64;
    let (a, b) = (per(without[2]), per(with[2]));
    println!("without timing: median {a:.0} ns a chunk (one write(2) each)");
    println!(
        "with timing:    median {b:.0} ns a chunk (+{:.0} ns, +{:.1}%; one more write(2) per ~{} chunks)",
        b - a,
        (b - a) / a * 100.0,
        8192 / 20
    );
}
