//! The fakes as processes: the interactive form under a real pseudo-terminal (prompt,
//! deterministic reply, Ctrl-C through the line discipline), and the process-tree
//! directives (`!ignore-term`, `!grandchild`) that stop escalation is tested against.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HANG: Duration = Duration::from_secs(60);

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut m, mut s) = (0, 0);
    // SAFETY: openpty writes two descriptors; null name/termios/winsize are allowed.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here.
    unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
}

/// Accumulates what the terminal shows until it contains `needle`.
fn read_until(rx: &mpsc::Receiver<Vec<u8>>, screen: &mut String, needle: &str) {
    let deadline = Instant::now() + HANG;
    while !screen.contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(b) => screen.push_str(&String::from_utf8_lossy(&b)),
            Err(e) => panic!("`{needle}` never appeared ({e}); screen:\n{screen}"),
        }
    }
}

#[test]
fn interactive_form_under_a_real_pty_honours_ctrl_c() {
    let t = tempfile::tempdir().unwrap();
    let (master, slave) = openpty();
    let slave_fd = slave.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proctor"));
    cmd.args(["demo-agent", "grok"])
        .env_clear()
        .env("HOME", t.path())
        .env("TERM", "xterm-256color")
        .current_dir(t.path())
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe; the child leads a new session whose
    // controlling terminal is the PTY, as a PTY runner does.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 || libc::ioctl(slave_fd, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let mut reader = std::fs::File::from(master.try_clone().unwrap());
    let mut writer = std::fs::File::from(master);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut screen = String::new();
    read_until(&rx, &mut screen, "> ");
    assert!(
        screen.contains("fake Grok Build (interactive form; not the real tool)"),
        "{screen}"
    );

    writer.write_all(b"hello pty\n").unwrap();
    read_until(&rx, &mut screen, "demo reply #1: you said \"hello pty\"");

    // Idle at its prompt, the fake sleeps in the kernel: its threads do not wake to look at
    // a flag (the old 20 ms slice woke it 50 times a second). The count is of wakeups, not
    // of time: 2 s idle, fewer than 10 context switches over all its threads.
    let switches = || -> u64 {
        let mut n = 0;
        for t in std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap() {
            let st = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap_or_default();
            for l in st.lines() {
                if let Some(v) = l
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    n += v.trim().parse::<u64>().unwrap();
                }
            }
        }
        n
    };
    let before = switches();
    std::thread::sleep(Duration::from_secs(2));
    let idle = switches() - before;
    assert!(idle < 10, "an idle fake woke {idle} times in 2 s");
    // Ctrl-C at the prompt still wakes it at once.
    writer.write_all(&[0x03]).unwrap();
    read_until(&rx, &mut screen, "^C (no turn in progress)");

    // A long turn, then Ctrl-C typed at the terminal: the line discipline sends SIGINT.
    writer.write_all(b"!sleep 600000\n").unwrap();
    // The second turn has begun once its "(working)" line shows.
    let deadline = Instant::now() + HANG;
    while screen.matches("(working)").count() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        screen.push_str(&String::from_utf8_lossy(&rx.recv_timeout(left).unwrap()));
    }
    writer.write_all(&[0x03]).unwrap();
    read_until(&rx, &mut screen, "^C interrupted");
    assert!(
        child.try_wait().unwrap().is_none(),
        "Ctrl-C must not end the program"
    );

    writer.write_all(b"still here\n").unwrap();
    read_until(&rx, &mut screen, "demo reply #3: you said \"still here\"");
    // Ctrl-D at an empty line: end of input, exit 0.
    writer.write_all(&[0x04]).unwrap();
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after Ctrl-D");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    // The transcript is where grok keeps its sessions, under the default home.
    assert!(t.path().join(".grok/sessions").is_dir());
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; /proc shows its state as Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn term_ignoring_fake_and_its_grandchild_need_sigkill_on_the_group() {
    let t = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(["demo-agent", "gemini", "--acp"])
        .env_clear()
        .env("HOME", t.path())
        .current_dir(t.path())
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let cwd = t.path().to_str().unwrap();
    for l in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#
            .to_string(),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"session/new","params":{{"cwd":"{cwd}","mcpServers":[]}}}}"#
        ),
    ] {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut line = String::new();
    let mut session = String::new();
    while session.is_empty() {
        line.clear();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if let Some(s) = v.pointer("/result/sessionId").and_then(|s| s.as_str()) {
            session = s.to_string();
        }
    }
    let prompt = serde_json::json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{
        "sessionId": session, "prompt":[{"type":"text","text":"!ignore-term\n!grandchild"}]}});
    writeln!(stdin, "{prompt}").unwrap();
    let mut grandchild = 0;
    loop {
        line.clear();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        if let Some(i) = line.find("grandchild pid ") {
            grandchild = line[i + 15..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap();
        }
        if line.contains("stopReason") {
            break;
        }
    }
    assert!(grandchild > 0);
    assert!(alive(grandchild));
    // SIGTERM to the whole group: both ignore it.
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGTERM was ignored");
    assert!(alive(grandchild));
    // SIGKILL to the group: both are gone.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let deadline = Instant::now() + HANG;
    while alive(grandchild) {
        assert!(
            Instant::now() < deadline,
            "grandchild {grandchild} survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!Path::new(&format!("/proc/{grandchild}/cmdline")).exists() || !alive(grandchild));
}
