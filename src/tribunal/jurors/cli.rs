//! The CLI jurors: `claude`, `codex` and `gemini` in their headless read-only forms.
//!
//! Each convocation runs the vendor's program without a shell, in the call's private
//! folder (0700: the prompt is written there as `prompt.txt` and given on stdin; nothing of
//! the repository is there), in its own process group, with the provider allowlist's
//! environment only (plus the account-home variable of a named provider profile). At the
//! deadline the whole group is killed and the juror never answered. Its answer is the
//! tool's final message: claude's `result` (`--output-format json`), codex's
//! `--output-last-message` file (written last), gemini's `response` (`--output-format
//! json`). What the tool prints is read, bounded, and never shown: `verdict::judge` reads
//! the answer.
//!
//! The argv (checked against the real tools' `--help`; `tests/tribunal_cli_jurors.rs`
//! runs it against the real tools when `PROCTOR_REAL_TOOLS` names them):
//! - claude: `-p --output-format json --no-session-persistence --tools Read,Grep,Glob
//!   --allowed-tools Read,Grep,Glob --disallowed-tools Bash,Edit,Write,NotebookEdit,
//!   WebFetch,WebSearch --permission-mode dontAsk --strict-mcp-config --model M`;
//! - codex: `exec --sandbox read-only --skip-git-repo-check --ephemeral
//!   --ignore-user-config --ignore-rules -C DIR --output-schema DIR/schema.json
//!   --output-last-message DIR/last-message.txt --color never --model M -`;
//! - gemini: `--approval-mode plan --output-format json --skip-trust --model M
//!   --prompt INSTRUCTION` (the prompt on stdin, the short instruction appended to it).

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::providers::profile::Profile;
use crate::providers::{Tool, Transport};
use crate::tribunal::jurors::{Call, Env, Juror, Reply};
use crate::tribunal::model::{Backend, Probe, Rung};

/// The read-only tools a claude juror may use.
pub const CLAUDE_TOOLS: &str = "Read,Grep,Glob";
/// The tools a claude juror is denied outright (on top of `--tools` and `dontAsk`).
pub const CLAUDE_DENIED: &str = "Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch";
/// What gemini's `--prompt` says after the prompt given on stdin.
pub const GEMINI_INSTRUCTION: &str = "Answer now with the single JSON verdict object that the protocol above asks for, and nothing else.";
/// The files of a convocation's folder.
pub const PROMPT_FILE: &str = "prompt.txt";
pub const SCHEMA_FILE: &str = "schema.json";
pub const LAST_MESSAGE_FILE: &str = "last-message.txt";
pub const STDOUT_FILE: &str = "stdout.txt";
pub const STDERR_FILE: &str = "stderr.txt";
/// A probe's `--version` must answer within this.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this much of a tool's output is read.
pub const MAX_OUTPUT: u64 = 16 * 1024 * 1024;

/// A rung served by a vendor's CLI.
pub struct CliJuror {
    rung: Rung,
    env: Env,
}

fn tool_of(backend: Backend) -> Option<Tool> {
    match backend {
        Backend::Claude => Some(Tool::Claude),
        Backend::Codex => Some(Tool::Codex),
        Backend::Gemini => Some(Tool::Gemini),
        Backend::Openai | Backend::Ollama => None,
    }
}

/// The argv (after the program) of one convocation of `backend` on `model` in `workdir`.
pub fn argv(backend: Backend, model: &str, workdir: &Path) -> Vec<String> {
    let s = |x: &str| x.to_string();
    let dir = workdir.display().to_string();
    match backend {
        Backend::Claude => vec![
            s("-p"),
            s("--output-format"),
            s("json"),
            s("--no-session-persistence"),
            s("--tools"),
            s(CLAUDE_TOOLS),
            s("--allowed-tools"),
            s(CLAUDE_TOOLS),
            s("--disallowed-tools"),
            s(CLAUDE_DENIED),
            s("--permission-mode"),
            s("dontAsk"),
            s("--strict-mcp-config"),
            s("--model"),
            s(model),
        ],
        Backend::Codex => vec![
            s("exec"),
            s("--sandbox"),
            s("read-only"),
            s("--skip-git-repo-check"),
            s("--ephemeral"),
            s("--ignore-user-config"),
            s("--ignore-rules"),
            s("-C"),
            dir.clone(),
            s("--output-schema"),
            workdir.join(SCHEMA_FILE).display().to_string(),
            s("--output-last-message"),
            workdir.join(LAST_MESSAGE_FILE).display().to_string(),
            s("--color"),
            s("never"),
            s("--model"),
            s(model),
            s("-"),
        ],
        Backend::Gemini => vec![
            s("--approval-mode"),
            s("plan"),
            s("--output-format"),
            s("json"),
            s("--skip-trust"),
            s("--model"),
            s(model),
            s("--prompt"),
            s(GEMINI_INSTRUCTION),
        ],
        Backend::Openai | Backend::Ollama => Vec::new(),
    }
}

impl CliJuror {
    pub fn new(rung: Rung, env: Env) -> CliJuror {
        CliJuror { rung, env }
    }

    fn tool(&self) -> Result<Tool, String> {
        tool_of(self.rung.backend)
            .ok_or_else(|| format!("{} is not a CLI backend", self.rung.backend.as_str()))
    }

    /// The program on the juror's PATH.
    fn program(&self, tool: Tool) -> Result<PathBuf, String> {
        crate::providers::resolve(tool, Some(&self.env.path)).map_err(|e| e.to_string())
    }

    /// The child's environment: the allowlist of `env.base_env`, PATH = `env.path`, and the
    /// account-home variable of the rung's profile when it names one.
    fn child_env(&self, tool: Tool) -> Result<Vec<(OsString, OsString)>, String> {
        let user_home = self
            .env
            .base_env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_default();
        let profile = match &self.rung.profile {
            None => Profile::default_for(tool, &user_home),
            Some(name) => {
                let p = self
                    .env
                    .profiles
                    .iter()
                    .find(|p| &p.name == name)
                    .ok_or_else(|| {
                        format!("the provider profile `{name}` is not known (proctor profile list)")
                    })?;
                if p.tool != tool {
                    return Err(format!(
                        "the provider profile `{name}` is a {} profile, not {}",
                        p.tool.name(),
                        tool.name()
                    ));
                }
                p.clone()
            }
        };
        let mut env = crate::providers::env::launch_env(
            &profile,
            self.env.base_env.iter().cloned(),
            Transport::Pipe,
        );
        env.insert(OsString::from("PATH"), self.env.path.clone());
        Ok(env.into_iter().collect())
    }

    fn spawn(
        &self,
        program: &Path,
        args: &[String],
        dir: &Path,
        env: &[(OsString, OsString)],
        stdin: Stdio,
    ) -> std::io::Result<Child> {
        let out = crate::files::create_private_new(&dir.join(STDOUT_FILE))
            .map_err(std::io::Error::other)?;
        let err = crate::files::create_private_new(&dir.join(STDERR_FILE))
            .map_err(std::io::Error::other)?;
        Command::new(program)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
    }
}

/// What waiting for a child came to.
enum Waited {
    Exited(std::process::ExitStatus),
    TimedOut,
}

/// Waits for `child` until `deadline`; at the deadline kills its whole group. Either way the
/// group is swept after (a tool's own children die with it).
fn wait_bounded(child: &mut Child, deadline: Duration) -> std::io::Result<Waited> {
    let pgid = child.id();
    let end = Instant::now() + deadline;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(status) = child.try_wait()? {
            // The leader is gone; what it left in its group goes too.
            let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
            return Ok(Waited::Exited(status));
        }
        let now = Instant::now();
        if now >= end {
            let _ = crate::process_group::signal_group(pgid, libc::SIGKILL);
            child.wait()?;
            return Ok(Waited::TimedOut);
        }
        std::thread::sleep(pause.min(end - now));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Reads at most 16 MiB of a tool's output file, lossily as UTF-8 ("" when absent); the
/// factory's invocations read theirs with it too.
pub fn read_bounded(path: &Path) -> String {
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(MAX_OUTPUT).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last line of a tool's stderr that says something, for a reason.
pub fn stderr_tail(dir: &Path) -> String {
    let text = read_bounded(&dir.join(STDERR_FILE));
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    crate::text::one_line(line, 200)
}

/// The final message in a claude `--output-format json` output, or why there is none.
pub fn claude_answer(stdout: &str) -> Result<String, String> {
    let v = last_json_object(stdout).ok_or("claude printed no result object")?;
    if v["type"] != "result" {
        return Err("claude's output is not a result object".into());
    }
    let text = v["result"].as_str().unwrap_or("");
    if v["is_error"] == true {
        return Err(format!(
            "claude answered with an error ({}): {}",
            v["terminal_reason"]
                .as_str()
                .or(v["subtype"].as_str())
                .unwrap_or("error"),
            crate::text::one_line(text, 200)
        ));
    }
    if text.trim().is_empty() {
        return Err("claude's result is empty".into());
    }
    Ok(text.to_string())
}

/// The final message in a gemini `--output-format json` output, or why there is none.
pub fn gemini_answer(stdout: &str) -> Result<String, String> {
    let v = last_json_object(stdout).ok_or("gemini printed no JSON object")?;
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        return Err(format!(
            "gemini answered with an error: {}",
            crate::text::one_line(e["message"].as_str().unwrap_or(&e.to_string()), 200)
        ));
    }
    match v["response"].as_str() {
        Some(t) if !t.trim().is_empty() => Ok(t.to_string()),
        _ => Err("gemini's response is empty".into()),
    }
}

/// The whole output as one JSON object, else its last line that is one.
fn last_json_object(s: &str) -> Option<serde_json::Value> {
    if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str(s.trim()) {
        return Some(v);
    }
    s.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .find(|v| v.is_object())
}

impl Juror for CliJuror {
    fn probe(&self) -> Probe {
        let dead = |detail: String| Probe {
            state: "dead".into(),
            detail,
            context_max: None,
        };
        let tool = match self.tool() {
            Ok(t) => t,
            Err(e) => return dead(e),
        };
        let program = match self.program(tool) {
            Ok(p) => p,
            Err(e) => return dead(e),
        };
        let env = match self.child_env(tool) {
            Ok(e) => e,
            Err(e) => return dead(e),
        };
        let dir = match tempfile::Builder::new().prefix("proctor-probe-").tempdir() {
            Ok(d) => d,
            Err(e) => return dead(format!("cannot make a folder for the probe: {e}")),
        };
        let mut child = match self.spawn(
            &program,
            &["--version".to_string()],
            dir.path(),
            &env,
            Stdio::null(),
        ) {
            Ok(c) => c,
            Err(e) => return dead(format!("cannot start {}: {e}", program.display())),
        };
        match wait_bounded(&mut child, PROBE_TIMEOUT) {
            Ok(Waited::Exited(st)) if st.success() => {
                let out = read_bounded(&dir.path().join(STDOUT_FILE));
                let version = out
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim();
                Probe {
                    state: "alive".into(),
                    detail: format!(
                        "{} {}",
                        program.display(),
                        crate::text::one_line(version, 120)
                    ),
                    context_max: None,
                }
            }
            Ok(Waited::Exited(st)) => dead(format!(
                "{} --version exited with {st}: {}",
                program.display(),
                stderr_tail(dir.path())
            )),
            Ok(Waited::TimedOut) => dead(format!(
                "{} --version did not answer within {} s",
                program.display(),
                PROBE_TIMEOUT.as_secs()
            )),
            Err(e) => dead(format!("cannot wait for {}: {e}", program.display())),
        }
    }

    fn convene(&self, call: &Call<'_>) -> Reply {
        if let Some(max) = self.rung.context_tokens
            && call.prompt_tokens > max
        {
            return Reply::Capacity {
                needed: call.prompt_tokens,
                max,
            };
        }
        let dead = |reason: String| Reply::NoAnswer { reason, dead: true };
        let broken = |reason: String| Reply::NoAnswer {
            reason,
            dead: false,
        };
        let tool = match self.tool() {
            Ok(t) => t,
            Err(e) => return dead(e),
        };
        let program = match self.program(tool) {
            Ok(p) => p,
            Err(e) => return dead(e),
        };
        let env = match self.child_env(tool) {
            Ok(e) => e,
            Err(e) => return dead(e),
        };
        let dir = call.workdir.as_path();
        if let Err(e) = crate::files::ensure_private_dir(dir) {
            return broken(format!("the convocation's folder: {e}"));
        }
        let prompt = dir.join(PROMPT_FILE);
        if let Err(e) = crate::files::write_atomic(&prompt, call.prompt.as_bytes()) {
            return broken(format!("cannot write the prompt: {e}"));
        }
        if self.rung.backend == Backend::Codex {
            let schema = serde_json::to_vec_pretty(call.schema).unwrap_or_default();
            if let Err(e) = crate::files::write_atomic(&dir.join(SCHEMA_FILE), &schema) {
                return broken(format!("cannot write the output schema: {e}"));
            }
        }
        for stale in [STDOUT_FILE, STDERR_FILE, LAST_MESSAGE_FILE] {
            let _ = std::fs::remove_file(dir.join(stale));
        }
        let stdin = match crate::files::open_private_read(&prompt) {
            Ok(f) => Stdio::from(f),
            Err(e) => return broken(format!("cannot reopen the prompt: {e}")),
        };
        let args = argv(self.rung.backend, &self.rung.model, dir);
        let mut child = match self.spawn(&program, &args, dir, &env, stdin) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return dead(format!("{} is not there: {e}", program.display()));
            }
            Err(e) => return broken(format!("cannot start {}: {e}", program.display())),
        };
        let deadline = call
            .deadline
            .min(Duration::from_secs(self.rung.timeout_secs));
        let status = match wait_bounded(&mut child, deadline) {
            Ok(Waited::Exited(st)) => st,
            Ok(Waited::TimedOut) => {
                return broken(format!(
                    "timeout: {} did not answer within {} s (its process group was killed)",
                    tool.name(),
                    deadline.as_secs_f64()
                ));
            }
            Err(e) => return broken(format!("cannot wait for {}: {e}", tool.name())),
        };
        let answer = match self.rung.backend {
            Backend::Claude => claude_answer(&read_bounded(&dir.join(STDOUT_FILE))),
            // gemini prints its answer object on stdout, its error object on stderr.
            Backend::Gemini => {
                gemini_answer(&read_bounded(&dir.join(STDOUT_FILE))).map_err(|why| {
                    gemini_answer(&read_bounded(&dir.join(STDERR_FILE)))
                        .err()
                        .filter(|e| e.starts_with("gemini answered with an error"))
                        .unwrap_or(why)
                })
            }
            _ => {
                let text = read_bounded(&dir.join(LAST_MESSAGE_FILE));
                if text.trim().is_empty() {
                    Err("codex wrote no last message".to_string())
                } else {
                    Ok(text)
                }
            }
        };
        match answer {
            Ok(text) => Reply::Answered { text },
            Err(why) => broken(format!(
                "{why} (exit: {status}; stderr: {})",
                stderr_tail(dir)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_output_shapes() {
        let real = include_str!(
            "../../../tests/data/real/tribunal/claude-2.1.332-print-json-no-login.json"
        );
        let e = claude_answer(real).unwrap_err();
        assert!(e.contains("Not logged in"), "{e}");
        assert!(e.contains("api_error"), "{e}");
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"{\"verdict\":\"pass\"}"}"#;
        assert_eq!(claude_answer(ok).unwrap(), "{\"verdict\":\"pass\"}");
        assert!(claude_answer("").is_err());
        assert!(claude_answer("{\"type\":\"assistant\"}").is_err());
    }

    #[test]
    fn gemini_output_shapes() {
        let real = include_str!(
            "../../../tests/data/real/tribunal/gemini-0.61.0-prompt-json-no-auth.stderr.json"
        );
        let e = gemini_answer(real).unwrap_err();
        assert!(e.contains("Auth method"), "{e}");
        let ok = "{\n  \"session_id\": \"x\",\n  \"response\": \"{}\",\n  \"stats\": {}\n}";
        assert_eq!(gemini_answer(ok).unwrap(), "{}");
        assert!(gemini_answer("{\"response\": \"\"}").is_err());
    }
}
