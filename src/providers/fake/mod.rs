//! The faithful fakes behind `proctor demo-agent TOOL [ARGS…]`.
//!
//! Given the argv of a tool's stdio form, a fake speaks that tool's protocol with the same
//! frame shapes as the real tool (see [`super::protocol`] for the sources); given the argv
//! of the interactive form, it runs a minimal line-oriented terminal program. It never
//! claims to be the real tool: the model is `demo`, the agent name is `proctor-demo-agent`,
//! every reply starts with `demo reply`.
//!
//! Behaviour shared by the five fakes:
//! - deterministic replies ([`script::reply`]), driven by the prompt's directives
//!   ([`script`]: sleep, emit, ignore SIGTERM, grandchild, exit, write, env);
//! - in the headless forms, the factory's roles (worker, repair, reviewer) when the prompt
//!   ends with a factory foot ([`factory`]: `!worker …`, `!repair …`, `!review N …`);
//! - interrupt through the tool's own protocol (or Ctrl-C on the PTY form) ends the turn
//!   and keeps the process;
//! - a transcript written where the real tool keeps it, under the account home that the
//!   tool's own variable (or `$HOME`) designates ([`store`]); resume reads it back and an
//!   unknown id is refused the way the tool refuses it.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};

use super::{Tool, check_conversation_id};

mod acp;
mod claude;
mod codex;
pub mod factory;
pub mod headless;
mod hooks;
mod pty;
pub mod script;
pub mod store;

/// The name every fake reports as its agent or client identity.
pub const DEMO_NAME: &str = "proctor-demo-agent";
/// The model name every fake reports.
pub const DEMO_MODEL: &str = "demo";

/// One item read from stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    Line(Vec<u8>),
    Eof,
    /// A signal arrived (the interactive form's SIGINT): its flag says which. It wakes a
    /// reader blocked on the channel, so no wait is sliced to notice a signal.
    Signal,
}

/// Reads stdin on a thread, line by line, into a channel.
/// The next non-blank input line of a stdio fake: what a turn set aside first, then stdin.
/// `None` at end of input.
fn next_line(inbox: &Receiver<Inbound>, deferred: &mut VecDeque<Inbound>) -> Option<Vec<u8>> {
    loop {
        let item = match deferred.pop_front() {
            Some(i) => i,
            None => inbox.recv().unwrap_or(Inbound::Eof),
        };
        match item {
            Inbound::Eof => return None,
            Inbound::Signal => continue,
            Inbound::Line(l) if l.iter().all(u8::is_ascii_whitespace) => continue,
            Inbound::Line(l) => return Some(l),
        }
    }
}

fn spawn_reader() -> Receiver<Inbound> {
    let (tx, rx) = mpsc::channel();
    spawn_reader_into(tx);
    rx
}

/// Reads stdin on a thread, line by line, into `tx`.
fn spawn_reader_into(tx: mpsc::Sender<Inbound>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        loop {
            let mut buf = Vec::new();
            match lock.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Inbound::Eof);
                    return;
                }
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    if tx.send(Inbound::Line(buf)).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// Writes bytes to stdout and flushes: every frame is visible as soon as it is made.
fn write_out(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Writes one JSON value as a line.
fn write_json(v: &serde_json::Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write_out(&bytes)
}

fn flush_stdout() {
    let _ = std::io::stdout().lock().flush();
}

/// A random (version 4) UUID, from the kernel's random source.
pub fn new_uuid() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// The account home the real tool would use in this environment: its home variable, else
/// its default folder under `$HOME`.
pub fn account_home(tool: Tool) -> Result<PathBuf, String> {
    let spec = tool.spec();
    let var = std::env::var_os(spec.home_var).filter(|v| !v.is_empty());
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty());
    match (spec.home_var_target, var, home) {
        (super::HomeVarTarget::Folder, Some(v), _) => Ok(PathBuf::from(v)),
        (super::HomeVarTarget::Parent { folder_name }, Some(v), _) => {
            Ok(PathBuf::from(v).join(folder_name))
        }
        (_, None, Some(h)) => Ok(PathBuf::from(h).join(spec.default_home)),
        (_, None, None) => Err(format!(
            "neither {} nor HOME is set, so there is no account home",
            spec.home_var
        )),
    }
}

/// The working folder, as the real tools take it.
fn current_dir() -> Result<PathBuf, String> {
    std::env::current_dir().map_err(|e| format!("cannot read the working folder: {e}"))
}

/// Runs the fake of `tool` with the tool's own argv `args`; returns the exit status.
/// `answer` scripts the headless forms (`claude -p --output-format json`, `codex exec`,
/// `gemini --prompt`; see [`headless`]).
pub fn run(tool: Tool, args: &[String], answer: headless::Answerer) -> i32 {
    let result = match tool {
        Tool::Claude => claude::main(args, answer),
        Tool::Codex => codex::main(args, answer),
        Tool::Gemini | Tool::Grok | Tool::Opencode => acp::main(tool, args, answer),
    };
    match result {
        Ok(code) => code,
        Err(Failure { message, code }) => {
            flush_stdout();
            eprintln!("{message}");
            code
        }
    }
}

/// A fatal condition of a fake: a message for stderr and an exit status.
#[derive(Debug)]
pub(crate) struct Failure {
    pub message: String,
    pub code: i32,
}

impl Failure {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        // A closed stdout (the reader went away) ends the fake like a real tool: status 1.
        Failure::new(1, format!("{DEMO_NAME}: i/o error: {e}"))
    }
}

/// Checks a conversation id given on the command line or in a request.
fn usable_id(id: &str) -> bool {
    check_conversation_id(id).is_ok()
}

/// Writes, in `dir`, one executable script per tool, named after the tool, that runs
/// `proctor demo-agent <tool> "$@"` with the given proctor binary. Put `dir` first on a
/// child's `PATH` and the child finds the fakes where it would find the real tools.
/// The scripts are 0700. Returns the paths written.
pub fn install_shims(dir: &Path, proctor: &Path) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    let exe = proctor.to_str().ok_or_else(|| {
        std::io::Error::other("the proctor binary's path is not UTF-8; cannot write a shim")
    })?;
    let quoted = format!("'{}'", exe.replace('\'', "'\\''"));
    let mut out = Vec::new();
    crate::files::ensure_private_dir(dir).map_err(std::io::Error::other)?;
    for tool in Tool::ALL {
        let path = dir.join(tool.name());
        let body = format!(
            "#!/bin/sh\n# proctor demo shim: the fake {}, not the real tool.\nexec {quoted} demo-agent {} \"$@\"\n",
            tool.spec().display_name,
            tool.name()
        );
        crate::files::write_atomic(&path, body.as_bytes()).map_err(std::io::Error::other)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        out.push(path);
    }
    Ok(out)
}

/// Whether stdin is a terminal.
fn stdin_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(0) == 1 }
}

/// True when `program` is one of the demo's shims (a short script that runs
/// `proctor demo-agent`): a run it backs is labelled demo.
pub fn is_demo_shim(program: &std::path::Path) -> bool {
    let Ok(bytes) = std::fs::read(program) else {
        return false;
    };
    if bytes.len() > 4096 || !bytes.starts_with(b"#!") {
        return false;
    }
    let s = String::from_utf8_lossy(&bytes);
    s.contains("proctor demo shim") && s.contains("demo-agent")
}
