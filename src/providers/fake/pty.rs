//! The fakes' interactive form: a minimal line-oriented terminal program.
//!
//! It prints a banner (naming itself a demo) with its session id, then a `> ` prompt;
//! the fake claude runs its hooks as the real one does (`SessionStart` at startup or on a
//! resume, and after `/clear`, which starts a new session; `UserPromptSubmit`, `Stop`, and
//! `StopFailure` after a turn that ended on a limit, whose API error line it writes in its
//! transcript as claude 2.1.332 does);
//! each line typed is a prompt (directives included): the fake prints `(working)`, then
//! the deterministic reply; Ctrl-C (SIGINT, as the terminal sends it to the foreground group) interrupts
//! the turn in progress and the program stays; end of input (Ctrl-D) exits 0. It is not
//! a TUI: no alternate screen, no cursor addressing.

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Sender};

use super::script::{self, Ended, Turn};
use super::store::{self, Transcript};
use super::{Failure, Inbound};
use crate::providers::Tool;
use crate::providers::protocol::CLAUDE_NO_CONVERSATION;

static SIGINT: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe the SIGINT handler wakes the relay thread through (-1: none).
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigint(_: libc::c_int) {
    SIGINT.store(true, Ordering::SeqCst);
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking, so a full pipe
        // (a wake already pending) drops this byte instead of blocking the handler.
        unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
    }
}

/// Installs the SIGINT handler, and a thread that turns each signal into an
/// [`Inbound::Signal`] on `tx`: a wait for input also notices a signal at once, so an idle
/// fake sleeps in the kernel instead of waking every few milliseconds to look at a flag.
fn install_sigint(tx: Sender<Inbound>) -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fds[0]` was just opened and is owned here alone.
    let read_end = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    // The read end blocks (only the write end must not).
    // SAFETY: F_SETFL on a descriptor this function owns.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, 0) };
    WAKE.store(fds[1], Ordering::SeqCst);
    std::thread::spawn(move || {
        let mut read_end = read_end;
        let mut buf = [0u8; 64];
        while let Ok(n) = read_end.read(&mut buf) {
            if n == 0 || tx.send(Inbound::Signal).is_err() {
                return;
            }
        }
    });
    // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic and writes
    // to a pipe, both async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn refuse(tool: Tool, id: &str) -> Failure {
    match tool {
        Tool::Claude => Failure::new(1, format!("{CLAUDE_NO_CONVERSATION} {id}")),
        _ => Failure::new(
            1,
            format!("{}: no saved session {id} to resume (demo)", tool.name()),
        ),
    }
}

pub(super) fn main(tool: Tool, resume: Option<&str>) -> Result<i32, Failure> {
    let home = super::account_home(tool).map_err(|m| Failure::new(1, m))?;
    let cwd = super::current_dir().map_err(|m| Failure::new(1, m))?;
    let (mut id, mut transcript) = match resume {
        Some(id) => {
            if !super::usable_id(id) {
                return Err(refuse(tool, id));
            }
            let found = store::find(tool, &home, &cwd, id);
            (id.to_string(), found.ok_or_else(|| refuse(tool, id))?)
        }
        None => {
            let u = super::new_uuid()?;
            let id = match tool {
                Tool::Opencode => format!("ses_{}", u.replace('-', "")),
                _ => u,
            };
            let path = store::path_for(tool, &home, &cwd, &id);
            // claude writes its transcript with the first message, not at startup.
            let t = if tool == Tool::Claude {
                Transcript::lazy(path)
            } else {
                Transcript::open(path)?
            };
            t.head(tool, &id, &cwd)?;
            (id, t)
        }
    };
    super::hooks::session(&id, &cwd, &transcript.path);
    // claude's SessionStart hook: its session began (its JSON names the session id).
    let source = if resume.is_some() {
        "resume"
    } else {
        "startup"
    };
    super::hooks::fire(
        "SessionStart",
        serde_json::json!({"source": source, "model": super::DEMO_MODEL}),
    );
    let (tx, inbox) = mpsc::channel();
    install_sigint(tx.clone())?;
    let mut turns = 0u64;
    super::write_out(
        format!(
            "proctor demo-agent: fake {} (interactive form; not the real tool)\nsession {id}\n",
            tool.spec().display_name
        )
        .as_bytes(),
    )?;
    if resume.is_some() {
        let n = transcript.messages()?.len();
        super::write_out(format!("resumed: {n} earlier messages\n").as_bytes())?;
    }
    super::write_out(b"> ")?;
    super::spawn_reader_into(tx);
    let mut deferred: VecDeque<Inbound> = VecDeque::new();
    let classify = |_: &[u8]| None;
    let answer = |b: &[u8]| super::write_out(b);
    loop {
        let item = match deferred.pop_front() {
            Some(i) => Some(i),
            // Blocks until a line, the end of input or a signal.
            None => Some(inbox.recv().unwrap_or(Inbound::Eof)),
        };
        if SIGINT.swap(false, Ordering::SeqCst) {
            super::write_out(b"^C (no turn in progress)\n> ")?;
        }
        let line = match item {
            None | Some(Inbound::Signal) => continue,
            Some(Inbound::Eof) => {
                super::write_out(b"\n")?;
                return Ok(0);
            }
            Some(Inbound::Line(l)) => l,
        };
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_string();
        if tool == Tool::Claude && text.trim() == "/clear" {
            // claude's /clear: a new session (a new id, a new transcript), announced by its
            // SessionStart hook with `source: "clear"`; nothing is sent to the model.
            id = super::new_uuid()?;
            transcript = Transcript::lazy(store::path_for(tool, &home, &cwd, &id));
            super::hooks::session(&id, &cwd, &transcript.path);
            super::hooks::fire(
                "SessionStart",
                serde_json::json!({"source": "clear", "model": super::DEMO_MODEL}),
            );
            super::write_out(format!("(cleared) session {id}\n> ").as_bytes())?;
            continue;
        }
        turns += 1;
        // claude's own hooks (with `--settings`): the person submitted a prompt.
        super::hooks::fire("UserPromptSubmit", serde_json::json!({"prompt": text}));
        transcript.message(tool, &id, &cwd, "user", &text)?;
        super::write_out(b"(working)\n")?;
        let steps = script::parse(&text);
        let mut turn = Turn {
            inbox: &inbox,
            deferred: &mut deferred,
            classify: &classify,
            sigint: Some(&SIGINT),
            answer: &answer,
            ask: None,
        };
        let mut emit = |e: script::Emit<'_>| super::write_out(e.as_text().as_bytes());
        match turn.run(&steps, &mut emit)? {
            Ended::Completed { text, notes } => {
                let r = script::reply(turns, &text, &notes);
                super::write_out(format!("{r}\n> ").as_bytes())?;
                transcript.message(tool, &id, &cwd, "assistant", &r)?;
                // The turn ended: claude's Stop hook.
                super::hooks::fire("Stop", serde_json::json!({"stop_hook_active": false}));
            }
            Ended::Interrupted => super::write_out(b"^C interrupted\n> ")?,
            Ended::Limited(l) => {
                super::write_out(format!("{}> ", l.as_text()).as_bytes())?;
                if tool == Tool::Claude {
                    // claude records the API error as a synthetic assistant line of its
                    // transcript, then its turn ends with StopFailure (not Stop).
                    let words = l.as_text().trim_end().to_string();
                    transcript.claude_limit(&id, &cwd, &l, &words)?;
                    super::hooks::fire(
                        "StopFailure",
                        serde_json::json!({"error": "rate_limit", "error_details": words,
                                           "last_assistant_message": words}),
                    );
                }
            }
        }
    }
}
