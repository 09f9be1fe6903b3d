//! Helper for `benches/sessions-vs-tmux.sh`: not part of proctor's CLI, never a test.
//!
//! It speaks the runs API over the home's Unix socket with a plain blocking HTTP/1.1 client
//! (no proctor client code on the measured path), reads the attach stream (server-sent
//! events: JSON frames carrying base64), and drives tmux the same way for the peer figures.
//!
//! Subcommands (the script calls them; see `--help`):
//! - `shims DIR PROCTOR`: writes the demo shims (claude, codex, …) into DIR.
//! - `server-throughput`: one PTY run of the fake claude, `!emit N` typed, timed until the
//!   attached client has decoded every byte up to the fake's final marker.
//! - `tmux-throughput`: the same child in a detached tmux pane, timed until tmux's screen
//!   shows the marker (`--control` instead attaches a control-mode client and times until
//!   that client has read the marker from tmux's `%output` stream).
//! - `start-many`, `input-all`: the 100-run steady-output benchmark's API calls.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use clap::{Parser, Subcommand};
use serde::Deserialize;
use serde_json::{Value, json};

const RUNS: &str = "/v1/m/sessions/runs";

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the demo shims into DIR, running PROCTOR's `demo-agent`.
    Shims { dir: PathBuf, proctor: PathBuf },
    /// Server side of the throughput benchmark (prints one `key=value` line).
    ServerThroughput {
        #[arg(long)]
        home: PathBuf,
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        bytes: u64,
        #[arg(long, default_value_t = 50)]
        rows: u16,
        #[arg(long, default_value_t = 200)]
        cols: u16,
        /// Read the output with `PROCTOR session tail --follow --raw` (the CLI's client)
        /// instead of this helper's own attach client.
        #[arg(long, value_name = "PROCTOR")]
        tail: Option<PathBuf>,
        /// The name printed as `side=`.
        #[arg(long, default_value = "server")]
        side: String,
    },
    /// The same child on a bare pseudo-terminal read by this helper alone (openpty, one
    /// blocking read loop): the floor of the throughput benchmark (one `key=value` line).
    BareThroughput {
        /// The program to run (the claude shim).
        #[arg(long)]
        program: PathBuf,
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        bytes: u64,
        #[arg(long, default_value_t = 50)]
        rows: u16,
        #[arg(long, default_value_t = 200)]
        cols: u16,
    },
    /// tmux side of the throughput benchmark (prints one `key=value` line).
    TmuxThroughput {
        /// tmux server socket (`tmux -S`).
        #[arg(long)]
        socket: PathBuf,
        /// The program the pane runs (the claude shim).
        #[arg(long)]
        program: PathBuf,
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        bytes: u64,
        #[arg(long, default_value_t = 50)]
        rows: u16,
        #[arg(long, default_value_t = 200)]
        cols: u16,
        /// Time until a control-mode client has read the marker, not the screen.
        #[arg(long)]
        control: bool,
        /// Screen polling interval (without --control), in ms.
        #[arg(long, default_value_t = 20)]
        poll_ms: u64,
    },
    /// Start COUNT PTY runs of the fake claude and wait until each shows its prompt;
    /// prints their refs, one a line.
    StartMany {
        #[arg(long)]
        home: PathBuf,
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        count: usize,
        #[arg(long, default_value_t = 24)]
        rows: u16,
        #[arg(long, default_value_t = 80)]
        cols: u16,
    },
    /// Type TEXT (escapes `\r` and `\n` understood) into every run named in REFS_FILE.
    InputAll {
        #[arg(long)]
        home: PathBuf,
        #[arg(long)]
        refs: PathBuf,
        #[arg(long)]
        text: String,
    },
    /// Sums, over the runs in REFS_FILE, the number of the last `demo reply #N` on each
    /// run's screen (the turns each fake has completed); prints the sum.
    Turns {
        #[arg(long)]
        home: PathBuf,
        #[arg(long)]
        refs: PathBuf,
    },
    /// The output bytes the runs named in REFS have printed (`output.bytes` of each run's
    /// view); prints the sum. Reads the runs' records, not their screens (which it would
    /// wake).
    OutputBytes {
        #[arg(long)]
        home: PathBuf,
        #[arg(long)]
        refs: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Shims { dir, proctor } => {
            proctor::providers::fake::install_shims(&dir, &proctor)
                .with_context(|| format!("installing shims in {}", dir.display()))?;
        }
        Cmd::ServerThroughput {
            home,
            workspace,
            bytes,
            rows,
            cols,
            tail,
            side,
        } => {
            let api = Api::new(&home)?;
            match tail {
                None => server_throughput(&api, &home, &workspace, bytes, rows, cols, &side)?,
                Some(p) => tail_throughput(&api, &p, &home, &workspace, bytes, rows, cols, &side)?,
            }
        }
        Cmd::BareThroughput {
            program,
            workspace,
            bytes,
            rows,
            cols,
        } => bare_throughput(&program, &workspace, bytes, rows, cols)?,
        Cmd::TmuxThroughput {
            socket,
            program,
            workspace,
            bytes,
            rows,
            cols,
            control,
            poll_ms,
        } => {
            let t = Tmux { socket };
            t.throughput(&program, &workspace, bytes, rows, cols, control, poll_ms)?
        }
        Cmd::StartMany {
            home,
            workspace,
            count,
            rows,
            cols,
        } => start_many(&Api::new(&home)?, &workspace, count, rows, cols)?,
        Cmd::InputAll { home, refs, text } => {
            let api = Api::new(&home)?;
            let text = text.replace("\\r", "\r").replace("\\n", "\n");
            let refs = std::fs::read_to_string(&refs)
                .with_context(|| format!("reading {}", refs.display()))?;
            for r in refs.lines().filter(|l| !l.is_empty()) {
                api.expect(
                    202,
                    "POST",
                    &format!("{RUNS}/{r}/input"),
                    Some(json!({"text": text})),
                )?;
            }
        }
        Cmd::Turns { home, refs } => {
            let api = Api::new(&home)?;
            let refs = std::fs::read_to_string(&refs)
                .with_context(|| format!("reading {}", refs.display()))?;
            let mut sum = 0u64;
            for r in refs.lines().filter(|l| !l.is_empty()) {
                let v = api.expect(200, "GET", &format!("{RUNS}/{r}/screen"), None)?;
                sum += last_turn(v["text"].as_str().unwrap_or(""));
            }
            println!("{sum}");
        }
        Cmd::OutputBytes { home, refs } => {
            let api = Api::new(&home)?;
            let refs = std::fs::read_to_string(&refs)
                .with_context(|| format!("reading {}", refs.display()))?;
            let mut sum = 0u64;
            for r in refs.lines().filter(|l| !l.is_empty()) {
                let v = api.expect(200, "GET", &format!("{RUNS}/{r}"), None)?;
                sum += v["output"]["bytes"].as_u64().unwrap_or(0);
            }
            println!("{sum}");
        }
    }
    Ok(())
}

/// The number of the last `demo reply #N` in a screen's text (0 if none).
fn last_turn(screen: &str) -> u64 {
    screen
        .rsplit("demo reply #")
        .next()
        .filter(|_| screen.contains("demo reply #"))
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// A minimal blocking HTTP/1.1 client over the Unix socket.

struct Api {
    socket: PathBuf,
    token: String,
}

impl Api {
    fn new(home: &Path) -> Result<Api> {
        let token_path = home.join("config/owner.token");
        let token = std::fs::read_to_string(&token_path)
            .with_context(|| format!("reading {}", token_path.display()))?
            .trim()
            .to_string();
        Ok(Api {
            socket: home.join("run/server.sock"),
            token,
        })
    }

    /// Sends a request; returns the response head's status and a reader of the body.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Box<dyn BufRead>)> {
        let mut s = UnixStream::connect(&self.socket)
            .with_context(|| format!("connecting to {}", self.socket.display()))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: proctor\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.token,
            body.len()
        )?;
        let mut r = BufReader::with_capacity(256 * 1024, s);
        let mut line = String::new();
        r.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("bad status line {line:?}"))?;
        let mut chunked = false;
        let mut length: Option<u64> = None;
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if k == "content-length" {
                    length = v.parse().ok();
                }
            }
        }
        let body: Box<dyn BufRead> = if chunked {
            Box::new(BufReader::with_capacity(
                256 * 1024,
                Chunked {
                    inner: r,
                    left: 0,
                    done: false,
                },
            ))
        } else if let Some(n) = length {
            Box::new(r.take(n))
        } else {
            Box::new(r)
        };
        Ok((status, body))
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value)> {
        let (status, mut r) = self.send(method, path, body.as_ref())?;
        let mut buf = Vec::new();
        r.read_to_end(&mut buf)?;
        let v = if buf.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&buf).with_context(|| format!("{method} {path}: body"))?
        };
        Ok((status, v))
    }

    fn expect(&self, want: u16, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let (status, v) = self.call(method, path, body)?;
        if status != want {
            bail!("{method} {path}: answered {status}, expected {want}: {v}");
        }
        Ok(v)
    }

    fn start_pty(&self, workspace: &Path, rows: u16, cols: u16) -> Result<String> {
        let v = self.expect(
            201,
            "POST",
            RUNS,
            Some(json!({"tool": "claude", "transport": "pty",
                "workspace": workspace, "rows": rows, "cols": cols})),
        )?;
        v["ref"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("no ref in {v}"))
    }
}

/// A de-chunking reader for `Transfer-Encoding: chunked`.
struct Chunked<R> {
    inner: R,
    left: u64,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let size = line.trim_end().split(';').next().unwrap_or("");
            self.left = u64::from_str_radix(size.trim(), 16).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{line:?}: {e}"))
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n as u64;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// One server-sent event.
#[derive(Default)]
struct Event {
    event: String,
    data: String,
}

fn next_event(r: &mut dyn BufRead) -> Result<Option<Event>> {
    let mut ev = Event::default();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let l = line.trim_end_matches(['\n', '\r']);
        if l.is_empty() {
            if !ev.event.is_empty() || !ev.data.is_empty() {
                return Ok(Some(ev));
            }
            continue;
        }
        if l.starts_with(':') {
            continue;
        }
        let (field, value) = l.split_once(':').unwrap_or((l, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => ev.event = value.to_string(),
            "data" => {
                if !ev.data.is_empty() {
                    ev.data.push('\n');
                }
                ev.data.push_str(value);
            }
            _ => {}
        }
    }
}

#[derive(Deserialize)]
struct OutputData {
    frames: Vec<FrameData>,
}

#[derive(Deserialize)]
struct FrameData {
    b64: String,
}

/// Finds a marker in a stream read piece by piece (it may straddle two pieces).
struct Tail {
    buf: Vec<u8>,
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    hay.iter()
        .enumerate()
        .filter(|(_, b)| **b == first)
        .any(|(i, _)| hay[i..].starts_with(needle))
}

impl Tail {
    fn push_and_find(&mut self, bytes: &[u8], marker: &[u8]) -> bool {
        let mut joined = self.buf.clone();
        joined.extend_from_slice(&bytes[..bytes.len().min(marker.len())]);
        let found = contains(&joined, marker) || contains(bytes, marker);
        self.buf
            .extend_from_slice(&bytes[bytes.len().saturating_sub(marker.len())..]);
        let cut = self.buf.len().saturating_sub(marker.len());
        self.buf.drain(..cut);
        found
    }
}

/// CPU seconds (user + system) of a process, from /proc/<pid>/stat.
fn cpu_secs(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("bad stat for {pid}"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name.
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks as f64 / hz)
}

/// CPU seconds of this process (user + system).
fn self_cpu_secs() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().next().unwrap_or("?").to_string())
        .unwrap_or_else(|_| "?".into())
}

fn marker(bytes: u64) -> Vec<u8> {
    format!("[emitted {bytes} bytes]").into_bytes()
}

// ---------------------------------------------------------------------------------------

fn server_throughput(
    api: &Api,
    home: &Path,
    workspace: &Path,
    bytes: u64,
    rows: u16,
    cols: u16,
    side: &str,
) -> Result<()> {
    let server_pid: u32 = std::fs::read_to_string(home.join("run/server.lock"))?
        .trim()
        .parse()?;
    let run = api.start_pty(workspace, rows, cols)?;
    let (status, mut stream) = api.send("GET", &format!("{RUNS}/{run}/attach?from=1"), None)?;
    if status != 200 {
        bail!("attach answered {status}");
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut decoded = Vec::with_capacity(128 * 1024);
    // The banner ends with the prompt.
    let mut seen = Vec::new();
    while !seen.windows(3).any(|w| w == b"\n> ") {
        let ev = next_event(stream.as_mut())?.ok_or_else(|| anyhow!("stream ended early"))?;
        if ev.event != "output" {
            bail!("before the prompt: {} {}", ev.event, ev.data);
        }
        let d: OutputData = serde_json::from_str(&ev.data)?;
        for f in d.frames {
            seen.extend(b64.decode(f.b64.as_bytes())?);
        }
    }
    let mark = marker(bytes);
    let mut tail = Tail { buf: Vec::new() };
    let (mut got, mut events, mut frames, mut lags, mut lost) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let cpu0 = cpu_secs(server_pid)?;
    let self0 = self_cpu_secs();
    let load = loadavg();
    let t0 = Instant::now();
    let mut prev = t0;
    let mut max_gap = Duration::ZERO;
    api.expect(
        202,
        "POST",
        &format!("{RUNS}/{run}/input"),
        Some(json!({"text": format!("!emit {bytes}\r")})),
    )?;
    loop {
        let ev = next_event(stream.as_mut())?
            .ok_or_else(|| anyhow!("stream ended before the marker"))?;
        events += 1;
        let now = Instant::now();
        max_gap = max_gap.max(now - prev);
        prev = now;
        match ev.event.as_str() {
            "output" => {
                let d: OutputData = serde_json::from_str(&ev.data)?;
                let mut found = false;
                for f in d.frames {
                    frames += 1;
                    decoded.clear();
                    b64.decode_vec(f.b64.as_bytes(), &mut decoded)?;
                    got += decoded.len() as u64;
                    found |= tail.push_and_find(&decoded, &mark);
                }
                if found {
                    break;
                }
            }
            "lag" => {
                let v: Value = serde_json::from_str(&ev.data)?;
                lags += 1;
                lost += v["first_available"].as_u64().unwrap_or(0)
                    - v["requested"].as_u64().unwrap_or(0);
            }
            other => bail!("unexpected {other} event: {}", ev.data),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs(server_pid)? - cpu0;
    let client_cpu = self_cpu_secs() - self0;
    drop(stream);
    let screen_ms = screen_after_burst(api, &run)?;
    api.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None)?;
    println!(
        "side={side} secs={secs:.3} mib_s={:.1} received={got} events={events} frames={frames} \
         lag_events={lags} lost_frames={lost} max_gap_ms={} server_cpu={cpu:.2} client_cpu={client_cpu:.2} \
         screen_ms={screen_ms} load1={load}",
        got as f64 / secs / 1048576.0,
        max_gap.as_millis()
    );
    Ok(())
}

/// After the clock has stopped: how long `GET /screen` takes once the burst is over (the
/// server parses what its screen is behind), in ms. It also leaves the run's screen up to
/// date, so its parse does not run on into the next side's figures.
fn screen_after_burst(api: &Api, run: &str) -> Result<u128> {
    let t = Instant::now();
    let v = api.expect(200, "GET", &format!("{RUNS}/{run}/screen"), None)?;
    if !v["text"].as_str().unwrap_or("").contains("[emitted") {
        bail!("the screen after the burst does not show the marker: {v}");
    }
    Ok(t.elapsed().as_millis())
}

fn server_pid(home: &Path) -> Result<u32> {
    Ok(std::fs::read_to_string(home.join("run/server.lock"))?
        .trim()
        .parse()?)
}

/// Reads `r` until `needle` has gone by; returns the bytes read.
fn read_past(r: &mut dyn Read, needle: &[u8], buf: &mut [u8]) -> Result<u64> {
    let mut tail = Tail { buf: Vec::new() };
    let mut got = 0u64;
    loop {
        let n = match r.read(buf) {
            Ok(0) => bail!(
                "the output ended before {:?}",
                String::from_utf8_lossy(needle)
            ),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        got += n as u64;
        if tail.push_and_find(&buf[..n], needle) {
            return Ok(got);
        }
    }
}

/// The server side with the CLI's own client: `proctor session tail --follow --raw`,
/// timed until the marker has come out of it.
#[allow(clippy::too_many_arguments)]
fn tail_throughput(
    api: &Api,
    proctor: &Path,
    home: &Path,
    workspace: &Path,
    bytes: u64,
    rows: u16,
    cols: u16,
    side: &str,
) -> Result<()> {
    let server_pid = server_pid(home)?;
    let run = api.start_pty(workspace, rows, cols)?;
    let mut child = Command::new(proctor)
        .arg("--home")
        .arg(home)
        .args(["session", "tail", "--follow", "--raw", &run])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting proctor session tail")?;
    let mut out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut buf = vec![0u8; 256 * 1024];
    read_past(&mut out, b"\n> ", &mut buf)?;
    let load = loadavg();
    let cpu0 = cpu_secs(server_pid)?;
    let tail0 = cpu_secs(child.id())?;
    let t0 = Instant::now();
    api.expect(
        202,
        "POST",
        &format!("{RUNS}/{run}/input"),
        Some(json!({"text": format!("!emit {bytes}\r")})),
    )?;
    let got = read_past(&mut out, &marker(bytes), &mut buf)?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs(server_pid)? - cpu0;
    let client_cpu = cpu_secs(child.id())? - tail0;
    let _ = child.kill();
    let _ = child.wait();
    let screen_ms = screen_after_burst(api, &run)?;
    api.expect(200, "POST", &format!("{RUNS}/{run}/stop"), None)?;
    println!(
        "side={side} secs={secs:.3} mib_s={:.1} received={got} server_cpu={cpu:.2} \
         client_cpu={client_cpu:.2} screen_ms={screen_ms} load1={load}",
        got as f64 / secs / 1048576.0
    );
    Ok(())
}

/// The floor: the same child on a pseudo-terminal of our own, read in one blocking loop
/// (what a bare `forkpty` reader does), timed until the marker has been read.
fn bare_throughput(
    program: &Path,
    workspace: &Path,
    bytes: u64,
    rows: u16,
    cols: u16,
) -> Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let (mut master, mut slave) = (-1, -1);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors; the name buffer and termios are not used.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    if r != 0 {
        bail!("openpty: {}", std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("starting the child on a bare PTY")?;
    drop(cmd);
    drop(slave);
    let mut m = std::fs::File::from(master);
    // The buffer proctor's reader uses (the ring's largest frame).
    let mut buf = vec![0u8; 64 * 1024];
    read_past(&mut m, b"\n> ", &mut buf)?;
    let load = loadavg();
    let self0 = self_cpu_secs();
    let t0 = Instant::now();
    m.write_all(format!("!emit {bytes}\r").as_bytes())?;
    let got = read_past(&mut m, &marker(bytes), &mut buf)?;
    let secs = t0.elapsed().as_secs_f64();
    let client_cpu = self_cpu_secs() - self0;
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "side=bare secs={secs:.3} mib_s={:.1} received={got} client_cpu={client_cpu:.2} load1={load}",
        got as f64 / secs / 1048576.0
    );
    Ok(())
}

fn start_many(api: &Api, workspace: &Path, count: usize, rows: u16, cols: u16) -> Result<()> {
    let mut refs = Vec::with_capacity(count);
    for _ in 0..count {
        refs.push(api.start_pty(workspace, rows, cols)?);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for r in &refs {
        loop {
            let v = api.expect(200, "GET", &format!("{RUNS}/{r}/screen"), None)?;
            if v["text"].as_str().is_some_and(|t| t.contains("\n> ")) {
                break;
            }
            if Instant::now() > deadline {
                bail!("{r} shows no prompt after 60 s: {v}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        println!("{r}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------

struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).arg("-f").arg("/dev/null");
        c
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        let out = self.cmd().args(args).output().context("running tmux")?;
        if !out.status.success() {
            bail!(
                "tmux {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn screen(&self, target: &str) -> Result<String> {
        self.run(&["capture-pane", "-p", "-t", target])
    }

    #[allow(clippy::too_many_arguments)]
    fn throughput(
        &self,
        program: &Path,
        workspace: &Path,
        bytes: u64,
        rows: u16,
        cols: u16,
        control: bool,
        poll_ms: u64,
    ) -> Result<()> {
        let name = format!("tp{}", std::process::id());
        let prog = program
            .to_str()
            .ok_or_else(|| anyhow!("program path is not UTF-8"))?;
        let ws = workspace
            .to_str()
            .ok_or_else(|| anyhow!("workspace is not UTF-8"))?;
        self.run(&[
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "-c",
            ws,
            prog,
        ])?;
        let pid = self
            .run(&["display", "-p", "#{pid}"])?
            .trim()
            .parse::<i32>()?;
        let result = self.throughput_in(&name, pid as u32, bytes, rows, cols, control, poll_ms);
        let _ = self.run(&["kill-session", "-t", &name]);
        // The server exits with its last session; wait, so the next `tmux -S` does not
        // connect to a server that is going away.
        let deadline = Instant::now() + Duration::from_secs(10);
        // SAFETY: kill with signal 0 only checks that the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn throughput_in(
        &self,
        name: &str,
        pid: u32,
        bytes: u64,
        rows: u16,
        cols: u16,
        control: bool,
        poll_ms: u64,
    ) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        // capture-pane drops trailing spaces: the prompt line reads `>`.
        while !self.screen(name)?.lines().any(|l| l.trim_end() == ">") {
            if Instant::now() > deadline {
                bail!("tmux pane shows no prompt: {}", self.screen(name)?);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let size = self.run(&["display", "-p", "-t", name, "#{pane_height}x#{pane_width}"])?;
        if size.trim() != format!("{rows}x{cols}") {
            bail!("tmux pane is {} not {rows}x{cols}", size.trim());
        }
        let mark = marker(bytes);
        let typed = format!("!emit {bytes}");
        let load = loadavg();
        if !control {
            let cpu0 = cpu_secs(pid)?;
            let t0 = Instant::now();
            self.run(&[
                "send-keys",
                "-t",
                name,
                "-l",
                &typed,
                ";",
                "send-keys",
                "-t",
                name,
                "Enter",
            ])?;
            let mark = String::from_utf8_lossy(&mark).into_owned();
            let mut polls = 0u64;
            while !self.screen(name)?.contains(&mark) {
                polls += 1;
                std::thread::sleep(Duration::from_millis(poll_ms));
            }
            let secs = t0.elapsed().as_secs_f64();
            let cpu = cpu_secs(pid)? - cpu0;
            println!(
                "side=tmux secs={secs:.3} mib_s={:.1} polls={polls} poll_ms={poll_ms} tmux_cpu={cpu:.2} load1={load}",
                bytes as f64 / secs / 1048576.0
            );
            return Ok(());
        }
        // A control-mode client: tmux sends it every byte the pane writes as `%output`.
        let mut child = self
            .cmd()
            .args(["-C", "attach", "-t", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting a tmux control client")?;
        let mut stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut out = BufReader::with_capacity(256 * 1024, stdout);
        // Wait until the client is attached (the first command's %end).
        writeln!(stdin, "display -p attached")?;
        let mut line = Vec::new();
        loop {
            line.clear();
            if out.read_until(b'\n', &mut line)? == 0 {
                bail!("control client ended");
            }
            if line.starts_with(b"%end") {
                break;
            }
        }
        let cpu0 = cpu_secs(pid)?;
        let self0 = self_cpu_secs();
        let t0 = Instant::now();
        writeln!(stdin, "send-keys -t {name} -l '{typed}'")?;
        writeln!(stdin, "send-keys -t {name} Enter")?;
        stdin.flush()?;
        let mut tail = Tail { buf: Vec::new() };
        let mut got = 0u64;
        let mut decoded = Vec::with_capacity(64 * 1024);
        loop {
            line.clear();
            if out.read_until(b'\n', &mut line)? == 0 {
                bail!("control client ended before the marker");
            }
            let Some(rest) = line.strip_prefix(b"%output ") else {
                if line.starts_with(b"%exit") {
                    bail!("control client exited: {}", String::from_utf8_lossy(&line));
                }
                continue;
            };
            // `%output %<pane> <escaped bytes>`: bytes below 32 and `\` are octal `\ooo`.
            let start = rest
                .iter()
                .position(|b| *b == b' ')
                .map(|p| p + 1)
                .unwrap_or(rest.len());
            let body = rest[start..].strip_suffix(b"\n").unwrap_or(&rest[start..]);
            decoded.clear();
            let mut i = 0;
            while i < body.len() {
                if body[i] == b'\\' && i + 4 <= body.len() {
                    let oct = &body[i + 1..i + 4];
                    let v = oct.iter().try_fold(0u32, |a, d| {
                        (b'0'..=b'7')
                            .contains(d)
                            .then(|| a * 8 + u32::from(d - b'0'))
                    });
                    if let Some(v) = v {
                        decoded.push(v as u8);
                        i += 4;
                        continue;
                    }
                }
                decoded.push(body[i]);
                i += 1;
            }
            got += decoded.len() as u64;
            if tail.push_and_find(&decoded, &mark) {
                break;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_secs(pid)? - cpu0;
        let client_cpu = self_cpu_secs() - self0;
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        println!(
            "side=tmux-control secs={secs:.3} mib_s={:.1} received={got} tmux_cpu={cpu:.2} client_cpu={client_cpu:.2} load1={load}",
            got as f64 / secs / 1048576.0
        );
        Ok(())
    }
}
