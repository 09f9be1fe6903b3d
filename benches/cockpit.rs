//! Cockpit benchmark (not a test): the cost of a frame, the cost of a key, and the CPU an
//! idle cockpit uses.
//!
//! Run: `cargo bench --bench cockpit` (release profile). It prints:
//!
//! 1. **Frames, timed**: 200 sessions listed, 8 of them streaming; each frame feeds the
//!    focused session's terminal one chunk of coloured output (what a busy agent writes in a
//!    thirtieth of a second), updates the list as a poll would (once every 30 frames), and
//!    draws the 160×48 screen through the cockpit's own screen writer (`tui::ansi::Painter`,
//!    into a sink): the live pane alone when only its output changed, the whole screen
//!    after a list update.
//! 2. **A key, timed**: `j` moves the selection (a new session is focused: its terminal is
//!    made, its stream requested) and the next frame is drawn.
//! 3. **Instructions per frame and per key under callgrind** (when `valgrind` is on PATH): the
//!    bench runs itself under `valgrind --tool=callgrind` twice with different frame counts
//!    and divides the difference, so set-up cost cancels out. Instruction counts are stable
//!    where wall time is not.
//! 4. **Idle CPU**: a real server on a temporary home with the demo fakes (20 live sessions,
//!    none writing; then 200 listed, the other 180 stopped), the real cockpit in a real PTY,
//!    settled for 3 s, then its CPU time (user + system, from `/proc/<pid>/stat`) over 10 s;
//!    the server's over the same 10 s.
//!
//! Environment: `BENCH_FRAMES` (default 600), `BENCH_IDLE_SECS` (default 10).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use proctor::auth::{Principal, Role as TokenRole};
use proctor::tui::ansi::Painter;
use proctor::tui::app::{App, LiveEvent, Msg};
use proctor::tui::data::{Counts, RunView, RunsPage, WhoAmI};
use proctor::tui::keymap::Keymap;
use proctor::tui::theme::Theme;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

const W: u16 = 160;
const H: u16 = 48;
const SESSIONS: usize = 200;
const STREAMING: usize = 8;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn at(secs: i64) -> String {
    let t = chrono::DateTime::from_timestamp(1_796_000_000 + secs, 0).unwrap_or_default();
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// 200 runs: 8 running and writing, the rest in every other state.
fn runs(tick: i64) -> Vec<RunView> {
    let states = ["idle", "stopped", "failed", "lost", "running"];
    (0..SESSIONS)
        .map(|i| {
            let streaming = i < STREAMING;
            let state = if streaming {
                "running"
            } else {
                states[i % states.len()]
            };
            let tool = ["claude", "codex", "gemini", "grok", "opencode"][i % 5];
            let mut v = json!({
                "ref": format!("run-{:04}", i + 1),
                "tool": tool,
                "profile": tool,
                "transport": if i % 3 == 0 { "pipe" } else { "pty" },
                "workspace": "/home/op/src/app",
                "demo": true,
                "created_at": at(-(i as i64) * 60),
                "state": state,
                "generation": 1,
                "name": format!("task {i}: fix the flaky parser test"),
                "pinned": i % 40 == 0,
                "done": false,
            });
            if streaming {
                v["output"] = json!({"first_seq": 1, "next_seq": 100 + tick, "bytes": 5000 + tick,
                    "last_at": at(tick)});
            } else if state == "failed" {
                v["exit_code"] = json!(1);
            } else if state == "stopped" {
                v["exit_code"] = json!(0);
            }
            serde_json::from_value(v).unwrap()
        })
        .collect()
}

fn page(tick: i64) -> Msg {
    let items = runs(tick);
    let counts = Counts::of(&items);
    Msg::Runs(Ok(RunsPage {
        total: items.len(),
        items,
        counts,
    }))
}

/// One chunk of a busy agent's terminal output: coloured test lines.
fn chunk(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for k in 0..12 {
        let i = n * 12 + k;
        let status = if i.is_multiple_of(17) {
            "\x1b[31mFAILED\x1b[0m"
        } else {
            "\x1b[32mok\x1b[0m"
        };
        out.extend_from_slice(
            format!(
                "test parser::tests::case_{i:05} ... {status} \x1b[2m({} ms)\x1b[0m\r\n",
                i % 97
            )
            .as_bytes(),
        );
    }
    out
}

fn app() -> App {
    let mut app = App::new(
        "benchhost".into(),
        "~/proctor".into(),
        Keymap::defaults(),
        Theme::default_theme(),
    );
    app.who = Some(WhoAmI {
        token_id: "t".into(),
        name: "owner".into(),
        role: TokenRole::Admin,
        principal: Principal::Person,
    });
    app.now = chrono::DateTime::parse_from_rfc3339(&at(0))
        .unwrap()
        .with_timezone(&chrono::Utc);
    app.on_msg(page(0));
    // Focus a streaming PTY session.
    app.sessions.selected = Some("run-0002".into());
    app.sync_focus();
    app.take_effects();
    app
}

type Term = Painter<std::io::Sink>;

/// The cockpit's own screen writer, writing into a sink.
fn terminal() -> Term {
    Painter::new(std::io::sink(), W, H, None).unwrap()
}

/// One frame, as the event loop draws it: the painter decides whether the live pane alone
/// changed (the streaming frames) or the whole frame did (a list poll, a key).
fn frame(app: &mut App, t: &mut Term) {
    t.paint(app).unwrap();
    app.dirty = false;
    app.live_dirty = false;
}

/// `frames` streaming frames; returns the time per frame.
fn run_frames(frames: u64) -> Duration {
    let mut app = app();
    let mut t = terminal();
    frame(&mut app, &mut t);
    let epoch = app.live.slot.as_ref().map_or(0, |s| s.epoch);
    let start = Instant::now();
    for n in 0..frames {
        if n % 30 == 0 {
            app.on_msg(page(n as i64 / 30));
        }
        app.on_msg(Msg::Live {
            epoch,
            ev: LiveEvent::Output(vec![(n + 2, proctor::runs::Stream::Stdout, chunk(n))]),
        });
        app.take_effects();
        frame(&mut app, &mut t);
    }
    start.elapsed() / frames.max(1) as u32
}

/// `keys` presses of `j`/`k` (alternating blocks), each followed by a frame.
fn run_keys(keys: u64) -> Duration {
    let mut app = app();
    let mut t = terminal();
    frame(&mut app, &mut t);
    let start = Instant::now();
    for n in 0..keys {
        let c = if (n / 50) % 2 == 0 { 'j' } else { 'k' };
        app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        app.take_effects();
        frame(&mut app, &mut t);
    }
    start.elapsed() / keys.max(1) as u32
}

/// Instructions callgrind counts for `bench <mode> <n>`.
fn callgrind(mode: &str, n: u64) -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(&exe)
        .args(["--only", mode, &n.to_string()])
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
}

fn per_unit(mode: &str, a: u64, b: u64) -> Option<u64> {
    let ia = callgrind(mode, a)?;
    let ib = callgrind(mode, b)?;
    Some((ib.saturating_sub(ia)) / (b - a))
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn idle(secs: u64, runs: usize) {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let exe = env!("CARGO_BIN_EXE_proctor");
    let dir = tempfile::Builder::new()
        .prefix("pb")
        .tempdir_in("/tmp")
        .unwrap();
    let home = dir.path();
    let shims = home.join("shims");
    proctor::providers::fake::install_shims(&shims, std::path::Path::new(exe)).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", shims.display());
    let run = |args: &[&str]| {
        std::process::Command::new(exe)
            .arg("--home")
            .arg(home)
            .args(args)
            .env("PATH", &path)
            .env_remove("PROCTOR_HOME")
            .env_remove("PROCTOR_TOKEN")
            .output()
            .unwrap()
    };
    assert!(run(&["serve"]).status.success());
    let token = std::fs::read_to_string(home.join("config/owner.token")).unwrap();
    let ws = home.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let call = |method: &str, path: &str, body: &str| -> String {
        let mut s = std::os::unix::net::UnixStream::connect(home.join("run/server.sock")).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            token.trim(),
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp
    };
    // `runs` sessions listed: 20 live (10 PTY, 10 pipe, none writing), the rest stopped.
    for i in 0..runs {
        let tool = ["claude", "codex"][i % 2];
        let body = json!({"tool": tool,
            "transport": if i % 2 == 0 { "pty" } else { "pipe" },
            "workspace": ws, "name": format!("idle {i}")});
        let resp = call("POST", "/v1/m/sessions/runs", &body.to_string());
        assert!(resp.starts_with("HTTP/1.1 201"), "{resp}");
        if i >= 20 {
            let r = format!("run-{:04}", i + 1);
            let resp = call("POST", &format!("/v1/m/sessions/runs/{r}/stop"), "");
            assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        }
    }
    let server_pid: u32 = std::fs::read_to_string(home.join("run/server.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: H,
            cols: W,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(exe);
    cmd.arg("--home");
    cmd.arg(home);
    cmd.env("TERM", "xterm-256color");
    cmd.env("PATH", &path);
    cmd.env_remove("PROCTOR_HOME");
    cmd.env_remove("PROCTOR_TOKEN");
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = bytes.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                return;
            }
            counted.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let pid = child.process_id().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (c0, s0) = (cpu_ticks(pid).unwrap(), cpu_ticks(server_pid).unwrap());
    let b0 = bytes.load(std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let wall = t0.elapsed().as_secs_f64();
    let (c1, s1) = (cpu_ticks(pid).unwrap(), cpu_ticks(server_pid).unwrap());
    let b1 = bytes.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "idle cockpit, {secs} s, {runs} sessions listed (20 live): cockpit CPU {:.3} s ({:.2}% of one core), \
         {} bytes written to the terminal; server CPU {:.3} s ({:.2}%); clock tick {} ms",
        (c1 - c0) as f64 / hz,
        100.0 * (c1 - c0) as f64 / hz / wall,
        b1 - b0,
        (s1 - s0) as f64 / hz,
        100.0 * (s1 - s0) as f64 / hz / wall,
        1000.0 / hz,
    );
    let mut w = pair.master.take_writer().unwrap();
    let _ = w.write_all(b"q");
    let _ = child.wait();
    let _ = run(&["server", "stop"]);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let mode = args.get(i + 1).map(String::as_str).unwrap_or("frames");
        let n: u64 = args.get(i + 2).and_then(|v| v.parse().ok()).unwrap_or(10);
        match mode {
            "keys" => {
                run_keys(n);
            }
            _ => {
                run_frames(n);
            }
        }
        return;
    }
    let frames = env_u64("BENCH_FRAMES", 600);
    println!(
        "cockpit frames: {W}x{H}, {SESSIONS} sessions listed, {STREAMING} streaming, \
         the focused one fed {} bytes per frame",
        chunk(0).len()
    );
    for round in 1..=2 {
        let f = run_frames(frames);
        let k = run_keys(frames);
        println!(
            "  round {round}: {:.3} ms per streaming frame; {:.3} ms per key + frame ({frames} each)",
            f.as_secs_f64() * 1000.0,
            k.as_secs_f64() * 1000.0
        );
    }
    match (per_unit("frames", 10, 110), per_unit("keys", 10, 110)) {
        (Some(f), Some(k)) => {
            println!("  callgrind: {f} instructions per streaming frame; {k} per key + frame")
        }
        _ => println!("  callgrind: valgrind not available, instruction counts skipped"),
    }
    for runs in [20, SESSIONS] {
        idle(env_u64("BENCH_IDLE_SECS", 10), runs);
    }
}
