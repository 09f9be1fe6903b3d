//! Issue 18 §3: a PTY run exported as an asciicast (`GET /runs/{ref}/cast`, `proctor
//! session export`), read back by the real `asciinema` 2.4.0 from PyPI (`asciinema cat`
//! prints the `o` events' text: it must be the run's bytes, exactly).
//!
//! Where asciinema is: `PROCTOR_ASCIINEMA` names the folder it was installed into with
//! `pip install --target` (CI sets it, and then a missing or broken asciinema fails the
//! test); without it the test looks in `${XDG_CACHE_HOME:-$HOME/.cache}/proctor-ci/
//! asciinema-2.4.0` and says so when it skips that step.
//!
//! v3 is read back by the real asciinema 3 (the Rust crate `asciinema` 3.2.0 from crates.io;
//! its `convert -f raw FILE -` is what 2.x's `cat` was, its `cat` concatenates recordings):
//! `PROCTOR_ASCIINEMA3` names its binary (CI sets it, and then
//! a missing or broken one fails the test); without it the test looks for
//! `${XDG_CACHE_HOME:-$HOME/.cache}/proctor-ci/asciinema-3.2.0/bin/asciinema` and says so
//! when it skips that step. It runs with HOME and the XDG folders in a temporary folder of
//! its own (it reads no configuration of the person's and writes nowhere else).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::DemoServer;
use serde_json::{Value, json};

/// The stand-in tool of these tests: a `claude` on PATH before the shims (not the real one;
/// nothing claims it is Claude Code). It writes known bytes (colours, a UTF-8 letter), waits
/// for a line, then writes the terminal's size as the kernel reports it and the line.
const STAND_IN: &str = "#!/bin/sh\n\
    PATH=/usr/bin:/bin\n\
    printf 'one \\033[1;32mgreen\\033[0m \\303\\251t\\303\\251\\n'\n\
    read line\n\
    printf 'size %s\\n' \"$(stty size)\"\n\
    printf 'bye %s\\n' \"$line\"\n";

struct Fx {
    s: DemoServer,
    _tool: tempfile::TempDir,
    path: String,
    ws: tempfile::TempDir,
}

/// A stand-in that writes 1.5 MiB of one letter in lines, past a 1 MiB transcript cap.
const FLOOD: &str = "#!/bin/sh\n\
    PATH=/usr/bin:/bin\n\
    head -c 1572864 /dev/zero | tr '\\0' 'a' | fold -w 1023\n";

impl Fx {
    fn new() -> Fx {
        Fx::with(STAND_IN, &[])
    }

    fn with(script: &str, serve_args: &[&str]) -> Fx {
        let s = DemoServer::start(serve_args);
        let tool = tempfile::tempdir().unwrap();
        let p = tool.path().join("claude");
        std::fs::write(&p, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            tool.path().display(),
            s.home.path.as_ref().unwrap().to_string_lossy()
        );
        Fx {
            s,
            _tool: tool,
            path,
            ws: tempfile::tempdir().unwrap(),
        }
    }

    fn cli(&self, args: &[&str]) -> Output {
        let mut c = self.s.home.cmd();
        c.env("PATH", &self.path)
            .current_dir(self.ws.path())
            .args(args)
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "proctor {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.cli(args);
        assert_eq!(out.status.code(), Some(code), "proctor {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn start(&self, tool: &str, transport: &str) -> String {
        let v: Value = serde_json::from_str(&self.ok(&[
            "session",
            "start",
            "--json",
            "--tool",
            tool,
            "--transport",
            transport,
        ]))
        .unwrap();
        v["ref"].as_str().unwrap().to_string()
    }

    /// The run's `gen-N` folder under the home.
    fn gen_dir(&self, run: &str, generation: u64) -> PathBuf {
        fn find(dir: &Path, run: &str, g: &str) -> Option<PathBuf> {
            for e in std::fs::read_dir(dir).ok()?.flatten() {
                let p = e.path();
                if !e.file_type().ok()?.is_dir() {
                    continue;
                }
                if p.ends_with(Path::new("runs").join(run).join(g)) {
                    return Some(p);
                }
                if let Some(x) = find(&p, run, g) {
                    return Some(x);
                }
            }
            None
        }
        find(self.s.home.path(), run, &format!("gen-{generation}"))
            .unwrap_or_else(|| panic!("no gen-{generation} folder for {run}"))
    }

    fn wait_output(&self, run: &str, needle: &[u8]) {
        let raw = self.gen_dir(run, 1).join("pty.raw");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read(&raw)
            .unwrap_or_default()
            .windows(needle.len())
            .any(|w| w == needle)
        {
            assert!(Instant::now() < deadline, "{run} never wrote {needle:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A run of the stand-in through its whole script: known bytes, a resize to 100x30,
    /// a line typed, its end observed. Returns the run's ref.
    fn finished_run(&self) -> String {
        let run = self.start("claude", "pty");
        self.wait_output(&run, "été".as_bytes());
        self.s.expect(
            200,
            "POST",
            &self.s.run_path(&run, "/resize"),
            Some(json!({"rows": 30, "cols": 100})),
        );
        self.s.expect(
            202,
            "POST",
            &self.s.run_path(&run, "/input"),
            Some(json!({"text": "now\r"})),
        );
        self.s
            .wait_run(&run, "its end", |v| !v["exit_code"].is_null());
        // The timing's end line is written once the output is drained, after the exit.
        let timing = self.gen_dir(&run, 1).join("pty.timing");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&timing)
            .unwrap_or_default()
            .contains("\ne ")
        {
            assert!(Instant::now() < deadline, "{run}'s timing never ended");
            std::thread::sleep(Duration::from_millis(20));
        }
        run
    }
}

/// The folder asciinema 2.4.0 was installed into, or None (said) when it is not required.
fn asciinema() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PROCTOR_ASCIINEMA") {
        return Some(PathBuf::from(dir));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let dir = cache.join("proctor-ci/asciinema-2.4.0");
    if dir.join("asciinema").is_dir() {
        return Some(dir);
    }
    eprintln!(
        "cast export: asciinema 2.4.0 is not installed at {} and PROCTOR_ASCIINEMA is unset: \
         the real-player step is skipped (CI sets it and requires it)",
        dir.display()
    );
    None
}

/// The asciinema 3.2.0 binary, or None (said) when it is not required.
fn asciinema3() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("PROCTOR_ASCIINEMA3") {
        return Some(PathBuf::from(bin));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let bin = cache.join("proctor-ci/asciinema-3.2.0/bin/asciinema");
    if bin.is_file() {
        return Some(bin);
    }
    eprintln!(
        "cast export: asciinema 3.2.0 is not installed at {} and PROCTOR_ASCIINEMA3 is unset: \
         the v3 real-player step is skipped (CI sets it and requires it)",
        bin.display()
    );
    None
}

/// asciinema 3 with a home of its own (`home`: HOME, XDG_CONFIG_HOME, XDG_DATA_HOME,
/// XDG_STATE_HOME, XDG_CACHE_HOME all inside it), no terminal, no inherited environment but
/// PATH and the locale.
fn asciinema3_cmd(bin: &Path, home: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C.UTF-8")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .stdin(Stdio::null());
    unsafe_setsid(&mut c);
    c
}

fn asciinema_cmd(dir: &Path) -> Command {
    let mut c = Command::new("python3");
    c.args(["-m", "asciinema"])
        .env("PYTHONPATH", dir)
        .env("PYTHONIOENCODING", "utf-8")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null());
    // No controlling terminal: `asciinema cat` would put one in raw mode.
    unsafe_setsid(&mut c);
    c
}

fn unsafe_setsid(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent's.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

fn lines(cast: &[u8]) -> Vec<Value> {
    std::str::from_utf8(cast)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn a_pty_run_exported_as_a_cast_plays_back_byte_for_byte_in_the_real_asciinema() {
    let fx = Fx::new();
    let run = fx.finished_run();
    let dir = fx.gen_dir(&run, 1);
    let raw = std::fs::read(dir.join("pty.raw")).unwrap();
    let text = String::from_utf8(raw.clone()).unwrap();
    // The tool's bytes, the terminal's echo of the typed line (the tty turns LF into CRLF).
    assert_eq!(
        text, "one \u{1b}[1;32mgreen\u{1b}[0m été\r\nnow\r\nsize 30 100\r\nbye now\r\n",
        "the resize reached the tty between the two"
    );
    // The timing file: 0600 beside the transcript, a format line first.
    use std::os::unix::fs::PermissionsExt;
    let timing = dir.join("pty.timing");
    let mode = std::fs::metadata(&timing).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let t = std::fs::read_to_string(&timing).unwrap();
    assert!(t.starts_with("proctor-pty-timing/1 "), "{t}");
    assert!(t.contains(" cols=80 rows=24\n"), "{t}");

    let ws = fx.ws.path();
    let file = ws.join("run.cast");
    let v: Value = serde_json::from_str(&fx.ok(&[
        "session",
        "export",
        &run,
        "--cast",
        file.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let cast = std::fs::read(&file).unwrap();
    assert_eq!(v["version"], 2, "{v}");
    assert_eq!(v["bytes"], cast.len() as u64, "{v}");
    assert_eq!(v["file"], file.to_str().unwrap(), "{v}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the cast is private");
    let ls = lines(&cast);
    assert_eq!(v["events"], (ls.len() - 1) as u64, "{v}");

    // The header: the initial size, the run's ref and tool, nothing of a name.
    let h = &ls[0];
    assert_eq!(h["version"], 2);
    assert_eq!(
        (h["width"].as_u64(), h["height"].as_u64()),
        (Some(80), Some(24))
    );
    assert_eq!(h["title"], format!("{run} claude"));
    assert_eq!(h["proctor"]["run"], run.as_str());
    assert_eq!(h["proctor"]["tool"], "claude");
    assert_eq!(h["proctor"]["transcript_capped"], false);
    assert_eq!(h["proctor"]["untimed_bytes"], 0);
    assert_eq!(h["proctor"]["output_bytes"], raw.len() as u64);
    // The events: times never go back; the output's text is the run's bytes; the resize
    // sits between the first line and what the tool wrote for the new size.
    let mut last = 0.0;
    let mut out = String::new();
    let mut resize_at = None;
    for e in &ls[1..] {
        let t = e[0].as_f64().unwrap();
        assert!(t >= last, "{e}");
        last = t;
        match e[1].as_str().unwrap() {
            "o" => out.push_str(e[2].as_str().unwrap()),
            "r" => {
                assert_eq!(e[2], "100x30");
                resize_at = Some(out.len());
            }
            other => panic!("unexpected event {other}: {e}"),
        }
    }
    assert_eq!(out.as_bytes(), raw.as_slice());
    let at = resize_at.expect("an r event");
    assert!(
        at >= "one ".len() && at <= out.find("size 30 100").unwrap(),
        "{at} in {out:?}"
    );

    // The real asciinema reads it back: its `cat` prints the run's bytes exactly.
    if let Some(dir) = asciinema() {
        let version = asciinema_cmd(&dir).arg("--version").output().unwrap();
        assert!(
            version.status.success(),
            "asciinema at {}: {version:?}",
            dir.display()
        );
        eprintln!(
            "cast export: {} from {}",
            String::from_utf8_lossy(&version.stdout).trim(),
            dir.display()
        );
        let played = asciinema_cmd(&dir).arg("cat").arg(&file).output().unwrap();
        assert!(played.status.success(), "{played:?}");
        assert_eq!(
            played.stdout,
            raw,
            "asciinema cat: {:?}",
            String::from_utf8_lossy(&played.stdout)
        );
    }

    // v3: a header with `term`, intervals that add up to v2's times, the exit code.
    let file3 = ws.join("run3.cast");
    let v3: Value = serde_json::from_str(&fx.ok(&[
        "session",
        "export",
        &run,
        "--cast",
        file3.to_str().unwrap(),
        "--v3",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v3["version"], 3);
    let l3 = lines(&std::fs::read(&file3).unwrap());
    assert_eq!(l3[0]["version"], 3);
    assert_eq!(l3[0]["term"], json!({"cols": 80, "rows": 24}));
    assert_eq!(l3[0]["title"], format!("{run} claude"));
    let mut clock = 0u64;
    let mut out3 = String::new();
    let mut v2_times = ls[1..]
        .iter()
        .map(|e| (e[0].as_f64().unwrap() * 1e6).round() as u64);
    for e in &l3[1..] {
        clock += (e[0].as_f64().unwrap() * 1e6).round() as u64;
        match e[1].as_str().unwrap() {
            "o" | "r" => {
                let v2t = v2_times.next().unwrap();
                assert!(clock.abs_diff(v2t) <= 1, "{clock} vs {v2t}");
                if e[1] == "o" {
                    out3.push_str(e[2].as_str().unwrap());
                }
            }
            "x" => assert_eq!(e[2], "0", "the exit code the OS reported"),
            other => panic!("unexpected v3 event {other}: {e}"),
        }
    }
    assert_eq!(out3.as_bytes(), raw.as_slice());
    assert_eq!(l3.last().unwrap()[1], "x");

    // The real asciinema 3 reads the v3 file back. Its `cat` concatenates recordings (2.x's
    // `cat` is its `convert -f raw FILE -`), which prints xterm's size sequence for the
    // header's size (`ESC [ 8 ; rows ; cols t`) then the output events' bytes: the run's
    // bytes exactly. Its conversion to v2 gives back every event, the resize and the exit
    // included, at the times proctor's own v2 export has.
    if let Some(bin) = asciinema3() {
        let home = tempfile::tempdir().unwrap();
        let version = asciinema3_cmd(&bin, home.path())
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("asciinema 3 at {}: {e}", bin.display()));
        assert!(
            version.status.success(),
            "asciinema 3 at {}: {version:?}",
            bin.display()
        );
        let said = String::from_utf8_lossy(&version.stdout).trim().to_string();
        assert!(said.starts_with("asciinema 3."), "not asciinema 3: {said}");
        eprintln!("cast export: {said} from {}", bin.display());
        let mut expected = b"\x1b[8;24;80t".to_vec();
        expected.extend_from_slice(&raw);
        for (what, f) in [("v3", &file3), ("v2", &file)] {
            let played = asciinema3_cmd(&bin, home.path())
                .args(["convert", "-f", "raw"])
                .arg(f)
                .arg("-")
                .output()
                .unwrap();
            assert!(played.status.success(), "{what}: {played:?}");
            assert_eq!(
                played.stdout,
                expected,
                "asciinema 3 convert -f raw of the {what} file: {:?}",
                String::from_utf8_lossy(&played.stdout)
            );
        }
        let v2 = asciinema3_cmd(&bin, home.path())
            .args(["convert", "-f", "asciicast-v2"])
            .arg(&file3)
            .arg("-")
            .output()
            .unwrap();
        assert!(v2.status.success(), "{v2:?}");
        let theirs = lines(&v2.stdout);
        assert_eq!(
            (theirs[0]["width"].as_u64(), theirs[0]["height"].as_u64()),
            (Some(80), Some(24))
        );
        assert_eq!(theirs[0]["title"], format!("{run} claude"));
        // Theirs is ours plus the exit event v3 carries.
        assert_eq!(theirs.len(), ls.len() + 1, "{theirs:?}");
        for (a, b) in theirs[1..].iter().zip(&ls[1..]) {
            assert_eq!((&a[1], &a[2]), (&b[1], &b[2]), "{a} vs {b}");
            let (ta, tb) = (a[0].as_f64().unwrap(), b[0].as_f64().unwrap());
            assert!((ta - tb).abs() < 1e-3, "{a} vs {b}");
        }
        assert_eq!(theirs.last().unwrap()[1], "x");
        assert_eq!(theirs.last().unwrap()[2], "0");
        // It wrote nothing in the home it was given (no configuration, no state).
        let left: Vec<_> = std::fs::read_dir(home.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn an_export_refuses_what_it_cannot_make_and_never_writes_through_a_file() {
    let fx = Fx::new();
    let run = fx.finished_run();
    let ws = fx.ws.path();

    // A ref of another kind never reaches the server.
    let err = fx.fails(&["session", "export", "rig-0001", "--cast", "x.cast"], 2);
    assert!(err.contains("not a run ref"), "{err}");
    assert!(!ws.join("x.cast").exists());
    // An unknown run, a generation it does not have, a version proctor does not write.
    let err = fx.fails(&["session", "export", "run-0999", "--cast", "x.cast"], 1);
    assert!(err.contains("no run run-0999"), "{err}");
    let err = fx.fails(
        &[
            "session",
            "export",
            &run,
            "--cast",
            "x.cast",
            "--generation",
            "2",
        ],
        1,
    );
    assert!(err.contains("no generation 2"), "{err}");
    let (st, v) =
        fx.s.call("GET", &fx.s.run_path(&run, "/cast?version=4"), None);
    assert_eq!(st, 422, "{v}");
    assert!(!ws.join("x.cast").exists());
    let leftovers: Vec<_> = std::fs::read_dir(ws).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "no temp file is left: {leftovers:?}");

    // An existing file, and a symlink to one, are refused unless --force; --force replaces
    // the link itself, never its target.
    let existing = ws.join("old.cast");
    std::fs::write(&existing, "keep me").unwrap();
    let err = fx.fails(
        &[
            "session",
            "export",
            &run,
            "--cast",
            existing.to_str().unwrap(),
        ],
        2,
    );
    assert!(
        err.contains("exists (a file)") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
    let link = ws.join("link.cast");
    std::os::unix::fs::symlink(&existing, &link).unwrap();
    let err = fx.fails(
        &["session", "export", &run, "--cast", link.to_str().unwrap()],
        2,
    );
    assert!(err.contains("exists (a symbolic link)"), "{err}");
    let dangling = ws.join("dangling.cast");
    std::os::unix::fs::symlink(ws.join("nowhere"), &dangling).unwrap();
    fx.fails(
        &[
            "session",
            "export",
            &run,
            "--cast",
            dangling.to_str().unwrap(),
        ],
        2,
    );
    assert!(
        !ws.join("nowhere").exists(),
        "nothing written through the link"
    );
    fx.ok(&[
        "session",
        "export",
        &run,
        "--cast",
        link.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
    let m = std::fs::symlink_metadata(&link).unwrap();
    assert!(m.is_file(), "the link was replaced by the cast");
    assert!(
        std::fs::read_to_string(&link)
            .unwrap()
            .starts_with("{\"version\":2")
    );

    // A run recorded before the timing file existed: refused, naming why; no times made up.
    std::fs::remove_file(fx.gen_dir(&run, 1).join("pty.timing")).unwrap();
    let err = fx.fails(&["session", "export", &run, "--cast", "old-run.cast"], 1);
    assert!(err.contains("422"), "{err}");
    assert!(
        err.contains("no pty.timing") && err.contains("never invents times"),
        "{err}"
    );
    assert!(!ws.join("old-run.cast").exists());

    // A pipe run (the codex fake's) has no terminal to export.
    let pipe = fx.start("codex", "pipe");
    let (st, v) = fx.s.call("GET", &fx.s.run_path(&pipe, "/cast"), None);
    assert_eq!(st, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("pipe run"),
        "{v}"
    );
    fx.ok(&["session", "stop", &pipe]);
}

#[test]
fn export_help_teaches_the_verb() {
    let fx = Fx::new();
    let help = fx.ok(&["session", "export", "--help"]);
    for needle in [
        "--cast <FILE>",
        "--v3",
        "--force",
        "asciinema play",
        "0600",
        "422",
    ] {
        assert!(help.contains(needle), "{needle} in:\n{help}");
    }
}

#[test]
fn a_capped_transcript_makes_a_cast_that_says_so_where_it_stops() {
    let fx = Fx::with(FLOOD, &["--transcript-mib", "1"]);
    let run = fx.start("claude", "pty");
    fx.s.wait_run(&run, "its end", |v| !v["exit_code"].is_null());
    let dir = fx.gen_dir(&run, 1);
    let timing = dir.join("pty.timing");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&timing)
        .unwrap_or_default()
        .contains("\ne ")
    {
        assert!(Instant::now() < deadline, "{run}'s timing never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let raw = std::fs::read(dir.join("pty.raw")).unwrap();
    assert_eq!(raw.len(), 1 << 20, "the transcript stopped at its cap");
    let file = fx.ws.path().join("capped.cast");
    fx.ok(&["session", "export", &run, "--cast", file.to_str().unwrap()]);
    let cast = std::fs::read(&file).unwrap();
    let ls = lines(&cast);
    assert_eq!(ls[0]["proctor"]["transcript_capped"], true, "{}", ls[0]);
    assert_eq!(ls[0]["proctor"]["output_bytes"], 1 << 20);
    // The marker comes after the last output the transcript kept.
    let last = ls.last().unwrap();
    assert_eq!(last[1], "m", "{last}");
    assert!(
        last[2]
            .as_str()
            .unwrap()
            .contains("transcript's cap was reached"),
        "{last}"
    );
    let out: String = ls[1..]
        .iter()
        .filter(|e| e[1] == "o")
        .map(|e| e[2].as_str().unwrap())
        .collect();
    assert_eq!(
        out.as_bytes(),
        raw.as_slice(),
        "never silently short: all it kept"
    );
    if let Some(dir) = asciinema() {
        let played = asciinema_cmd(&dir).arg("cat").arg(&file).output().unwrap();
        assert!(played.status.success(), "{played:?}");
        assert!(
            played.stdout == raw,
            "asciinema cat prints what the transcript kept"
        );
    }
}
