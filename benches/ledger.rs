//! Ledger benchmark (not a test): durable appends against SQLite, and verify speed.
//!
//! Run: `cargo bench --bench ledger` (release profile). Optional environment:
//! - `BENCH_DIR`: folder for the files (default: the system temp folder); put it on the
//!   filesystem you care about, since fsync cost is a property of the storage.
//! - `BENCH_APPENDS`: durable appends per measurement (default 2000).
//! - `BENCH_VERIFY_EVENTS`: size of the verify ledger (default 1,000,000).
//!
//! Append: proctor's ledger (one `write` + `fdatasync` per append when alone; group commit
//! when concurrent) against SQLite in WAL mode with `synchronous=FULL`, one transaction per
//! row, inserting the same rows (seq, at, kind, prev, fields as canonical JSON) taken from
//! the ledger just written. Both run in the same folder, alternately, twice.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proctor::ledger::{self, EMPTY_SHA256, Ledger};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

const KIND: &str = "sessions.run.renamed";

fn event_fields(i: u64) -> Map<String, Value> {
    match json!({
        "run": format!("run-{:06}", i % 100_000),
        "name": format!("fix the flaky parser test #{i}"),
        "previous_name": "untitled",
        "by": {"principal": "person", "token": "owner"},
        "attempt": i % 7,
    }) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench_dir() -> PathBuf {
    std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

struct Row {
    seq: i64,
    at: String,
    kind: String,
    prev: String,
    fields: String,
}

/// The rows of a ledger file: the envelope columns and the kind's fields as canonical JSON.
fn rows_of(path: &Path) -> Vec<Row> {
    let text = fs::read_to_string(path).expect("read ledger");
    text.lines()
        .map(|l| {
            let mut m: Map<String, Value> = serde_json::from_str(l).expect("line");
            let mut take = |k: &str| m.remove(k).expect("envelope field");
            let seq = take("seq").as_i64().expect("seq");
            let at = take("at").as_str().expect("at").to_string();
            let kind = take("kind").as_str().expect("kind").to_string();
            let prev = take("prev").as_str().expect("prev").to_string();
            let fields =
                String::from_utf8(ledger::canonical::to_vec(&Value::Object(m)).expect("canonical"))
                    .expect("utf-8");
            Row {
                seq,
                at,
                kind,
                prev,
                fields,
            }
        })
        .collect()
}

fn ledger_appends(dir: &Path, n: u64, threads: u64) -> (Duration, PathBuf) {
    let p = dir.join(format!("ledger-{threads}t-{}.jsonl", unique()));
    let (l, _) = Ledger::open(&p).expect("open ledger");
    let per = n / threads;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let l = &l;
            s.spawn(move || {
                for i in 0..per {
                    l.append(KIND, &event_fields(t * per + i)).expect("append");
                }
            });
        }
    });
    let d = start.elapsed();
    assert_eq!(l.last_seq(), per * threads);
    (d, p)
}

fn sqlite_open(path: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(path).expect("open sqlite");
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    c.execute_batch("PRAGMA synchronous=FULL; PRAGMA busy_timeout=60000;")
        .expect("pragmas");
    let sync: i64 = c
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .expect("read synchronous");
    assert_eq!(sync, 2, "synchronous=FULL");
    c
}

fn sqlite_inserts(dir: &Path, rows: &[Row], threads: usize) -> Duration {
    let p = dir.join(format!("sqlite-{threads}t-{}.db", unique()));
    {
        let c = sqlite_open(&p);
        c.execute_batch(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, \
             kind TEXT NOT NULL, prev TEXT NOT NULL, fields TEXT NOT NULL)",
        )
        .expect("create table");
    }
    let per = rows.len() / threads;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let mine = &rows[t * per..(t + 1) * per];
            let p = &p;
            s.spawn(move || {
                let c = sqlite_open(p);
                let mut st = c
                    .prepare(
                        "INSERT INTO events (seq, at, kind, prev, fields) VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .expect("prepare");
                // Autocommit: each INSERT is its own transaction, committed (and, with
                // synchronous=FULL, synced) before execute returns.
                for r in mine {
                    st.execute(rusqlite::params![r.seq, r.at, r.kind, r.prev, r.fields])
                        .expect("insert");
                }
            });
        }
    });
    let d = start.elapsed();
    let c = sqlite_open(&p);
    let count: i64 = c
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .expect("count");
    assert_eq!(count as usize, per * threads);
    d
}

fn unique() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// Writes a valid ledger of `n` events quickly (buffered, one fsync at the end).
fn build_ledger(path: &Path, n: u64) {
    let f = fs::File::create(path).expect("create");
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut prev = EMPTY_SHA256;
    let base = chrono::Utc::now();
    for seq in 1..=n {
        let at = (base + chrono::Duration::milliseconds(seq as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let line = ledger::encode_line(seq, &at, KIND, &prev, &event_fields(seq)).expect("encode");
        prev = Sha256::digest(&line).into();
        w.write_all(&line).expect("write");
    }
    let f = w.into_inner().expect("flush");
    f.sync_all().expect("fsync");
}

/// CPU time (user + system) used by this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we pass; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn machine() -> Vec<(String, String)> {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "?".into());
    let dir = bench_dir();
    let dir = fs::canonicalize(&dir).unwrap_or(dir);
    let mount = fs::read_to_string("/proc/mounts")
        .ok()
        .and_then(|m| {
            m.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() >= 4 && dir.starts_with(f[1])).then(|| {
                        (
                            f[1].len(),
                            format!("{} on {} ({}, {})", f[0], f[1], f[2], f[3]),
                        )
                    })
                })
                .max_by_key(|(len, _)| *len)
                .map(|(_, s)| s)
        })
        .unwrap_or_else(|| "?".into());
    vec![
        ("cpu".into(), cpu),
        ("cores".into(), cores),
        ("memory".into(), mem),
        ("kernel".into(), kernel),
        ("folder".into(), dir.display().to_string()),
        ("filesystem".into(), mount),
        ("sqlite".into(), rusqlite::version().to_string()),
    ]
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n = env_u64("BENCH_APPENDS", 2000);
    let verify_n = env_u64("BENCH_VERIFY_EVENTS", 1_000_000);
    let base = bench_dir();
    let tmp = tempfile::tempdir_in(&base).expect("temp folder");
    let dir = tmp.path();

    println!("## machine");
    for (k, v) in machine() {
        println!("{k:<11} {v}");
    }
    println!(
        "{:<11} {} (1, 5, 15 min; other work shares these cores)",
        "load",
        loadavg()
    );

    println!("\n## durable appends ({n} per run, same rows, same folder)");
    println!(
        "| run | writers | proctor ledger (appends/s) | SQLite WAL synchronous=FULL (inserts/s) | ratio |"
    );
    println!("|---|---|---|---|---|");
    for threads in [1u64, 4] {
        for round in 1..=2 {
            let (dl, p) = ledger_appends(dir, n, threads);
            let rows = rows_of(&p);
            let ds = sqlite_inserts(dir, &rows, threads as usize);
            let (a, b) = (per_sec(n, dl), per_sec(n, ds));
            println!(
                "| {round} | {threads} | {a:.0} ({:.3} ms each) | {b:.0} ({:.3} ms each) | {:.2} |",
                1000.0 / a,
                1000.0 / b,
                a / b
            );
        }
    }

    println!("\n## verify ({verify_n} events)");
    let p = dir.join("verify.jsonl");
    let t = Instant::now();
    build_ledger(&p, verify_n);
    let bytes = fs::metadata(&p).expect("stat").len();
    println!(
        "built in {:.1} s: {bytes} bytes, {:.0} bytes per line",
        t.elapsed().as_secs_f64(),
        bytes as f64 / verify_n as f64
    );
    // Warm the page cache once so the figures measure verify, not the disk.
    let _ = fs::read(&p).map(|b| b.len());
    println!("| threads | run | wall (s) | events/s | MB/s | CPU (s) | events per CPU-second |");
    println!("|---|---|---|---|---|---|---|");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1usize];
    if cores > 1 {
        counts.push(cores);
    }
    for threads in counts {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for run in 1..=3 {
            let (t, c) = (Instant::now(), cpu_time());
            let v = pool.install(|| ledger::verify(&p)).expect("verify");
            let (d, cpu) = (t.elapsed(), cpu_time() - c);
            assert_eq!(v.fixed_point.events, verify_n);
            println!(
                "| {threads} | {run} | {:.3} | {:.0} | {:.0} | {:.3} | {:.0} |",
                d.as_secs_f64(),
                per_sec(verify_n, d),
                bytes as f64 / 1e6 / d.as_secs_f64(),
                cpu.as_secs_f64(),
                per_sec(verify_n, cpu)
            );
        }
    }
    let t = Instant::now();
    let (l, opened) = Ledger::open(&p).expect("open");
    let d = t.elapsed();
    assert_eq!(opened.events, verify_n);
    drop(l);
    println!(
        "\nLedger::open (lock + full verify) of the same file, {cores} threads: {:.3} s ({:.0} events/s)",
        d.as_secs_f64(),
        per_sec(verify_n, d)
    );
    println!("load at the end: {}", loadavg());
}
