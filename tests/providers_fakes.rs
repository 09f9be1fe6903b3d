//! The providers' own encodings driving the fakes over real pipes: for each tool, the real
//! proctor binary runs behind a shim named after the tool, found on PATH by
//! `providers::resolve`, launched with `providers::launch` and `env::launch_env` (env_clear,
//! hostile parent), and driven by `protocol::StdioSession`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use proctor::providers::env::launch_env;
use proctor::providers::profile::Profile;
use proctor::providers::protocol::{Event, StdioSession, TurnOutcome, resume_refusal_in_stderr};
use proctor::providers::{Tool, Transport, fake, launch, resolve};

/// A guard against a hung child, not a timing assertion.
const HANG: Duration = Duration::from_secs(60);

struct World {
    _t: tempfile::TempDir,
    root: PathBuf,
    path_var: String,
    user_home: PathBuf,
    cwd: PathBuf,
}

fn world() -> World {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    let bin = root.join("bin");
    let shims = fake::install_shims(&bin, Path::new(env!("CARGO_BIN_EXE_proctor"))).unwrap();
    assert_eq!(shims.len(), 5);
    let user_home = root.join("user");
    let cwd = root.join("work space");
    std::fs::create_dir_all(&user_home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    World {
        path_var: format!("{}:/usr/bin:/bin", bin.display()),
        root,
        user_home,
        cwd,
        _t: t,
    }
}

impl World {
    /// An added profile whose home is shaped as the tool requires.
    fn profile(&self, tool: Tool) -> Profile {
        let home = match tool {
            Tool::Gemini => self.root.join("acct/gemini/.gemini"),
            Tool::Opencode => self.root.join("acct/opencode-data/opencode"),
            t => self.root.join("acct").join(t.name()),
        };
        std::fs::create_dir_all(&home).unwrap();
        Profile {
            name: "work".into(),
            tool,
            home,
            is_default: false,
            permissions: Default::default(),
        }
    }

    /// A hostile parent environment: secrets, endpoints, proxies, preloads, and the tool's
    /// own home variable pointing elsewhere.
    fn parent_env(&self) -> Vec<(String, String)> {
        let elsewhere = self.root.join("elsewhere").display().to_string();
        let mut v: Vec<(String, String)> = [
            ("ANTHROPIC_API_KEY", "sk-ant-leak"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/evil"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("OPENAI_API_KEY", "sk-leak"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/evil"),
            ("GEMINI_API_KEY", "leak"),
            ("GOOGLE_CLOUD_PROJECT", "leak"),
            ("XAI_API_KEY", "leak"),
            ("AWS_SECRET_ACCESS_KEY", "leak"),
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("NODE_OPTIONS", "--require /nonexistent.js"),
            ("LD_PRELOAD", "/nonexistent.so"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for var in [
            "CLAUDE_CONFIG_DIR",
            "CODEX_HOME",
            "GEMINI_CLI_HOME",
            "GROK_HOME",
            "XDG_DATA_HOME",
        ] {
            v.push((var.to_string(), elsewhere.clone()));
        }
        v.push(("PATH".into(), self.path_var.clone()));
        v.push(("HOME".into(), self.user_home.display().to_string()));
        v
    }

    fn spawn(&self, profile: &Profile, resume: Option<&str>) -> Proc {
        let exe = resolve(profile.tool, Some(std::ffi::OsStr::new(&self.path_var))).unwrap();
        assert!(exe.starts_with(self.root.join("bin")), "{exe:?}");
        let l = launch(profile.tool, Transport::Pipe, resume).unwrap();
        let mut child = Command::new(exe)
            .args(&l.args)
            .env_clear()
            .envs(launch_env(profile, self.parent_env(), Transport::Pipe))
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            loop {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                            let line: Vec<u8> = buf.drain(..=i).collect();
                            if tx.send(line).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        });
        let mut session = StdioSession::new(profile.tool, &self.cwd, resume).unwrap();
        let first = session.start();
        let mut p = Proc {
            child,
            stdin: Some(stdin),
            lines: rx,
            session,
            events: Vec::new(),
        };
        for l in first {
            p.write(&l);
        }
        p
    }
}

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    session: StdioSession,
    events: Vec<Event>,
}

impl Proc {
    fn write(&mut self, bytes: &[u8]) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(bytes).unwrap();
        s.flush().unwrap();
    }

    /// Reads and answers output until an event matches `until`; returns the events seen.
    fn drive(&mut self, until: impl Fn(&Event) -> bool) -> Vec<Event> {
        let deadline = Instant::now() + HANG;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no matching event ({e}); saw {seen:?}"));
            let o = self.session.observe(&line);
            for r in &o.replies {
                self.write(r);
            }
            for e in o.events {
                let hit = until(&e);
                seen.push(e.clone());
                self.events.push(e);
                if hit {
                    return seen;
                }
            }
        }
    }

    fn text(events: &[Event]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Event::AgentText(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn turn(&mut self, prompt: &str) -> (TurnOutcome, String) {
        let line = self.session.input(prompt).unwrap();
        self.write(&line);
        let ev = self.drive(|e| matches!(e, Event::TurnEnded { .. }));
        let outcome = match ev.last() {
            Some(Event::TurnEnded { outcome, .. }) => *outcome,
            _ => unreachable!(),
        };
        (outcome, Self::text(&ev))
    }

    fn finish(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + HANG;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                self.child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (st.code().unwrap_or(-1), err);
            }
            assert!(Instant::now() < deadline, "the child did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn full_cycle(tool: Tool) {
    let w = world();
    let profile = w.profile(tool);

    // Handshake, one turn, the conversation id from the tool's own output.
    let mut p = w.spawn(&profile, None);
    if tool != Tool::Claude {
        p.drive(|e| *e == Event::Ready);
    }
    let (outcome, text) = p.turn("hello world\n!env OPENAI_API_KEY\n!env HTTPS_PROXY\n!env LANG");
    assert_eq!(outcome, TurnOutcome::Completed, "{tool}: {text}");
    assert!(
        text.contains("demo reply #1: you said \"hello world\""),
        "{tool}: {text}"
    );
    // The hostile parent's secrets and proxy never reached the child; LANG did.
    assert!(
        text.contains("[env OPENAI_API_KEY unset]"),
        "{tool}: {text}"
    );
    assert!(text.contains("[env HTTPS_PROXY unset]"), "{tool}: {text}");
    assert!(text.contains("[env LANG=C.UTF-8]"), "{tool}: {text}");
    let id = p
        .session
        .conversation_id()
        .expect("conversation id recognised")
        .to_string();
    assert!(p.events.contains(&Event::ConversationId(id.clone())));

    // The transcript is under the profile's account home, not the parent's variable.
    // Gemini CLI names its chat log by the id's first 8 characters (0.61.0:
    // `chats/session-<time>-<id[..8]>.jsonl`) and its first line names the whole id.
    let transcripts = files_under(&profile.home);
    let names_id = |f: &std::path::PathBuf| {
        f.to_string_lossy().contains(&id)
            || tool == Tool::Gemini
                && id.len() >= 8
                && f.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(&id[..8]))
                && std::fs::read_to_string(f).is_ok_and(|t| t.contains(&id))
    };
    assert!(transcripts.iter().any(names_id), "{tool}: {transcripts:?}");
    assert!(!w.root.join("elsewhere").exists());

    // Interrupt through the protocol: the turn ends interrupted, the process stays.
    let line = p.session.input("!sleep 600000").unwrap();
    p.write(&line);
    if tool == Tool::Codex {
        p.drive(|e| matches!(e, Event::TurnStarted { .. }));
    }
    let intr = p.session.interrupt().unwrap();
    p.write(&intr);
    let ev = p.drive(|e| matches!(e, Event::TurnEnded { .. }));
    assert!(
        matches!(
            ev.last(),
            Some(Event::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                ..
            })
        ),
        "{tool}: {ev:?}"
    );
    assert!(p.child.try_wait().unwrap().is_none(), "{tool} exited");
    let (outcome, text) = p.turn("after the interrupt");
    assert_eq!(outcome, TurnOutcome::Completed);
    assert!(text.contains("after the interrupt"), "{text}");
    let (code, stderr) = p.finish();
    assert_eq!(code, 0, "{tool}: {stderr}");

    // Resume with the same id: a new process continues the same conversation.
    let mut p = w.spawn(&profile, Some(&id));
    if tool != Tool::Claude {
        let ev = p.drive(|e| *e == Event::Ready);
        if matches!(tool, Tool::Gemini | Tool::Grok | Tool::Opencode) {
            // session/load replays the stored conversation before answering.
            assert!(
                Proc::text(&ev).contains("you said \"hello world\""),
                "{tool}: {ev:?}"
            );
        }
    }
    let (outcome, text) = p.turn("second process");
    assert_eq!(outcome, TurnOutcome::Completed, "{tool}");
    assert!(text.contains("second process"), "{text}");
    assert_eq!(p.session.conversation_id(), Some(id.as_str()), "{tool}");
    assert!(
        !p.events
            .iter()
            .any(|e| matches!(e, Event::ResumeDiverged { .. })),
        "{tool}"
    );
    let (code, _) = p.finish();
    assert_eq!(code, 0);

    // An unknown id is refused, the way the tool refuses it.
    let unknown = "00000000-0000-4000-8000-00000000beef";
    let mut p = w.spawn(&profile, Some(unknown));
    if tool == Tool::Claude {
        let (code, stderr) = p.finish();
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(
            resume_refusal_in_stderr(tool, &stderr).as_deref(),
            Some(format!("No conversation found with session ID: {unknown}").as_str())
        );
    } else {
        let ev = p.drive(|e| matches!(e, Event::ResumeRefused { .. }));
        let Some(Event::ResumeRefused { message }) = ev.last() else {
            unreachable!()
        };
        assert!(message.contains(unknown), "{tool}: {message}");
        assert!(!p.session.ready());
        assert!(p.session.input("x").is_err(), "no silent new conversation");
        let (code, _) = p.finish();
        assert_eq!(code, 0);
    }
}

#[test]
fn claude_stream_json() {
    full_cycle(Tool::Claude);
}

#[test]
fn codex_app_server() {
    full_cycle(Tool::Codex);
}

#[test]
fn gemini_acp() {
    full_cycle(Tool::Gemini);
}

#[test]
fn grok_acp() {
    full_cycle(Tool::Grok);
}

#[test]
fn opencode_acp() {
    full_cycle(Tool::Opencode);
}

#[test]
fn a_default_profile_uses_the_tools_own_default_home() {
    let w = world();
    let profile = Profile::default_for(Tool::Codex, &w.user_home);
    let mut p = w.spawn(&profile, None);
    p.drive(|e| *e == Event::Ready);
    let (outcome, _) = p.turn("hi\n!env CODEX_HOME");
    assert_eq!(outcome, TurnOutcome::Completed);
    assert!(
        p.events
            .iter()
            .any(|e| matches!(e, Event::AgentText(t) if t.contains("[env CODEX_HOME unset]")))
    );
    let id = p.session.conversation_id().unwrap().to_string();
    p.finish();
    let rollouts = files_under(&w.user_home.join(".codex/sessions"));
    assert_eq!(rollouts.len(), 1);
    assert!(
        rollouts[0]
            .to_string_lossy()
            .ends_with(&format!("-{id}.jsonl"))
    );
}

#[test]
fn emit_streams_exactly_n_bytes_of_reply_text() {
    let w = world();
    let profile = w.profile(Tool::Gemini);
    let mut p = w.spawn(&profile, None);
    p.drive(|e| *e == Event::Ready);
    let (_, text) = p.turn("!emit 100000");
    let emitted = text.split("demo reply").next().unwrap();
    assert_eq!(emitted.len(), 100_000);
    assert_eq!(emitted, fake::script::pattern(0, 100_000));
    p.finish();
}

#[test]
fn exit_k_is_the_exit_status_and_write_writes_in_the_workspace() {
    let w = world();
    let profile = w.profile(Tool::Claude);
    let mut p = w.spawn(&profile, None);
    let l = p
        .session
        .input("!write note.txt made by the fake\n!exit 7")
        .unwrap();
    p.write(&l);
    let (code, _) = p.finish();
    assert_eq!(code, 7);
    assert_eq!(
        std::fs::read_to_string(w.cwd.join("note.txt")).unwrap(),
        "made by the fake\n"
    );
}

#[test]
fn claude_refuses_a_terminal_less_misuse_like_the_tool() {
    // stream-json output without --verbose: the real tool's message and status.
    let out = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args([
            "demo-agent",
            "claude",
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("requires --verbose"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_proctor"))
        .args(["demo-agent", "bash", "-c", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("claude, codex, gemini, grok, opencode"));
}
