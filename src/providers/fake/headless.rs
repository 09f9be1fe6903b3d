//! The fakes' headless forms, the ones the tribunal's CLI jurors use: `claude -p
//! --output-format json`, `codex exec`, `gemini --prompt … --output-format json`.
//!
//! Each reads the whole prompt from stdin, finds the lens as the LAST `"lens": "` in it
//! (the protocol foot names it literally), and answers what the [`Answerer`] scripts for the
//! model given with `--model` (the tribunal's `Behaviour::from_model(model).answer(lens,
//! true)`, handed in by `proctor demo-agent`, so that this module needs nothing of the
//! tribunal), in the real tool's output shape:
//! - claude: one `result` object on stdout (the fields of the real one, `result` the answer);
//! - codex: the answer on stdout and in the `--output-last-message` file, written last (the
//!   file is created empty at start, as the real tool does);
//! - gemini: one pretty-printed object `{session_id, response, stats}` on stdout (an error
//!   object `{session_id, error}` on stderr, as the real tool prints it).
//!
//! A model the answerer does not script is refused in the tool's own error shape (claude
//! `is_error: true`, gemini `error`, codex a message on stderr), exit 1. A silent model
//! sleeps until it is killed. The argv is parsed as strictly as the real tools: an unknown
//! option is the tool's own unknown-option error.
//!
//! A prompt whose last factory foot names a factory role (worker, repair, reviewer) is
//! played by [`super::factory`] instead, in the working folder (codex: its `-C` folder).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use super::{DEMO_NAME, Failure};

/// What a scripted model answers for a lens: `Ok(Some(text))`, `Ok(None)` (it never
/// answers: the fake sleeps until killed), or `Err` (the model is not scripted).
pub type Answerer = fn(model: &str, lens: &str) -> Result<Option<String>, String>;

/// The version line each fake prints for `--version` (never the real tool's).
pub fn version_line(tool: &str) -> String {
    format!("0.0.0-demo ({DEMO_NAME}, the fake {tool}, not the real tool)")
}

/// The lens named by the prompt's foot: the text after the LAST `"lens": "`, up to the next
/// `"`.
pub fn lens_of(prompt: &str) -> Option<String> {
    const MARK: &str = "\"lens\": \"";
    let at = prompt.rfind(MARK)? + MARK.len();
    let rest = &prompt[at..];
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

fn read_stdin() -> Result<String, Failure> {
    if super::stdin_is_tty() {
        return Err(Failure::new(
            1,
            "Error: Input must be provided either through stdin or as a prompt argument",
        ));
    }
    let mut buf = String::new();
    std::io::stdin()
        .read_to_string(&mut buf)
        .map_err(|e| Failure::new(1, format!("{DEMO_NAME}: cannot read stdin: {e}")))?;
    Ok(buf)
}

/// A silent model: it never answers; the caller's deadline kills it.
fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// The answer and the exit status: the factory role the prompt's foot names
/// ([`super::factory`], played in `dir`), else the tribunal answerer's (status 0).
fn scripted(
    answer: Answerer,
    model: Option<&str>,
    prompt: &str,
    dir: &Path,
) -> Result<(String, i32), String> {
    if let Some(role) = super::factory::foot(prompt) {
        return super::factory::play(role, prompt, dir).map(|p| (p.text, p.exit));
    }
    let model = model.unwrap_or("demo");
    let lens = lens_of(prompt).unwrap_or_default();
    match answer(model, &lens)? {
        Some(text) => Ok((text, 0)),
        None => sleep_forever(),
    }
}

/// The fake `claude -p --output-format json …`: called by the claude fake once its argv
/// is parsed (`model`: its `--model`).
pub(super) fn claude(answer: Answerer, model: Option<&str>) -> Result<i32, Failure> {
    let started = Instant::now();
    let prompt = read_stdin()?;
    let dir = super::current_dir().map_err(|m| Failure::new(1, m))?;
    let (text, is_error, code) = match scripted(answer, model, &prompt, &dir) {
        Ok((t, code)) => (t, false, code),
        Err(e) => (format!("{DEMO_NAME}: {e}"), true, 1),
    };
    let ms = started.elapsed().as_millis() as u64;
    let v = json!({
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "duration_ms": ms,
        "duration_api_ms": 0,
        "num_turns": 1,
        "result": text,
        "stop_reason": "end_turn",
        "session_id": super::new_uuid()?,
        "total_cost_usd": 0,
        "usage": {
            "input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
            "service_tier": "standard"
        },
        "modelUsage": {},
        "permission_denials": [],
        "terminal_reason": if is_error { "api_error" } else { "completed" },
        "uuid": super::new_uuid()?,
    });
    super::write_json(&v)?;
    Ok(code)
}

/// The fake `codex exec [OPTIONS] [PROMPT|-]`.
pub(super) fn codex_exec(answer: Answerer, args: &[String]) -> Result<i32, Failure> {
    let mut model = None;
    let mut cd: Option<PathBuf> = None;
    let mut schema: Option<PathBuf> = None;
    let mut last: Option<PathBuf> = None;
    let mut skip_git = false;
    let mut prompt_arg: Option<String> = None;
    let mut it = args.iter();
    let unexpected = |a: &str| {
        Failure::new(
            2,
            format!(
                "error: unexpected argument '{a}' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\nFor more information, try '--help'."
            ),
        )
    };
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next().cloned().ok_or_else(|| {
                Failure::new(
                    2,
                    format!("error: a value is required for '{name}' but none was supplied"),
                )
            })
        };
        match a.as_str() {
            "-m" | "--model" => model = Some(value("--model <MODEL>")?),
            "-C" | "--cd" => cd = Some(PathBuf::from(value("--cd <DIR>")?)),
            "--output-schema" => schema = Some(PathBuf::from(value("--output-schema <FILE>")?)),
            "-o" | "--output-last-message" => {
                last = Some(PathBuf::from(value("--output-last-message <FILE>")?))
            }
            "-s" | "--sandbox" => {
                let v = value("--sandbox <SANDBOX_MODE>")?;
                if !matches!(
                    v.as_str(),
                    "read-only" | "workspace-write" | "danger-full-access"
                ) {
                    return Err(Failure::new(
                        2,
                        format!("error: invalid value '{v}' for '--sandbox <SANDBOX_MODE>'"),
                    ));
                }
            }
            "--color" => {
                value("--color <COLOR>")?;
            }
            "-c" | "--config" => {
                value("--config <key=value>")?;
            }
            "--skip-git-repo-check" => skip_git = true,
            "--ephemeral" | "--ignore-user-config" | "--ignore-rules" | "--json" => {}
            s if s.starts_with('-') && s != "-" => return Err(unexpected(s)),
            s => {
                if prompt_arg.is_some() {
                    return Err(unexpected(s));
                }
                prompt_arg = Some(s.to_string())
            }
        }
    }
    let dir = match cd {
        Some(d) => d,
        None => super::current_dir().map_err(|m| Failure::new(1, m))?,
    };
    if !skip_git && !in_git_repo(&dir) {
        return Err(Failure::new(
            1,
            "Not inside a trusted directory and --skip-git-repo-check was not specified.",
        ));
    }
    let resolve = |p: PathBuf| if p.is_absolute() { p } else { dir.join(p) };
    if let Some(s) = schema.map(resolve) {
        let text = std::fs::read(&s).map_err(|e| {
            Failure::new(
                1,
                format!(
                    "Error: failed to read output schema file {}: {e}",
                    s.display()
                ),
            )
        })?;
        serde_json::from_slice::<serde_json::Value>(&text).map_err(|e| {
            Failure::new(
                1,
                format!(
                    "Error: output schema file {} is not valid JSON: {e}",
                    s.display()
                ),
            )
        })?;
    }
    let last = last.map(resolve);
    if let Some(l) = &last {
        // The real tool creates the file at start; it holds the message only at the end.
        std::fs::write(l, b"")
            .map_err(|e| Failure::new(1, format!("Error: {}: {e}", l.display())))?;
    }
    let prompt = match prompt_arg.as_deref() {
        None | Some("-") => read_stdin()?,
        Some(p) => p.to_string(),
    };
    eprintln!(
        "{DEMO_NAME}: the fake codex exec (demo), model {}",
        model.as_deref().unwrap_or("demo")
    );
    match scripted(answer, model.as_deref(), &prompt, &dir) {
        Ok((text, code)) => {
            super::write_out(format!("{text}\n").as_bytes())?;
            if let Some(l) = &last {
                write_last(l, &text)?;
            }
            Ok(code)
        }
        Err(e) => Err(Failure::new(1, format!("ERROR: {DEMO_NAME}: {e}"))),
    }
}

fn write_last(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text.as_bytes())
        .map_err(|e| Failure::new(1, format!("Error: {}: {e}", path.display())))
}

fn in_git_repo(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// The fake `gemini … --prompt TEXT --output-format json`: `args` is the whole argv.
pub(super) fn gemini(answer: Answerer, args: &[String]) -> Result<i32, Failure> {
    let mut model = None;
    let mut prompt = None;
    let mut format = String::from("text");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Failure::new(42, format!("Not enough arguments following: {name}")))
        };
        match a.as_str() {
            "-m" | "--model" => model = Some(value("model")?),
            "-p" | "--prompt" => prompt = Some(value("prompt")?),
            "-o" | "--output-format" => format = value("output-format")?,
            "--approval-mode" => {
                let v = value("approval-mode")?;
                if !matches!(v.as_str(), "default" | "auto_edit" | "yolo" | "plan") {
                    return Err(Failure::new(
                        1,
                        format!(
                            "Invalid values:\n  Argument: approval-mode, Given: \"{v}\", Choices: \"default\", \"auto_edit\", \"yolo\", \"plan\""
                        ),
                    ));
                }
            }
            "--skip-trust" | "-d" | "--debug" => {}
            s => {
                let name = s.trim_start_matches('-');
                return Err(Failure::new(1, format!("Unknown argument: {name}")));
            }
        }
    }
    let Some(p) = prompt else {
        return Err(Failure::new(
            1,
            "Unknown arguments: the fake gemini's headless form needs --prompt",
        ));
    };
    let stdin = read_stdin()?;
    let whole = if stdin.is_empty() {
        p
    } else {
        format!("{stdin}\n\n{p}")
    };
    let session = super::new_uuid()?;
    let dir = super::current_dir().map_err(|m| Failure::new(1, m))?;
    // gemini plays only the factory's reviewer, which always exits 0.
    let result = scripted(answer, model.as_deref(), &whole, &dir).map(|(t, _)| t);
    if format != "json" {
        return match result {
            Ok(t) => {
                super::write_out(format!("{t}\n").as_bytes())?;
                Ok(0)
            }
            Err(e) => Err(Failure::new(1, format!("{DEMO_NAME}: {e}"))),
        };
    }
    let (v, code) = match result {
        Ok(t) => (
            json!({
                "session_id": session,
                "response": t,
                "stats": {"models": {}, "tools": {"totalCalls": 0}, "files": {"totalLinesAdded": 0, "totalLinesRemoved": 0}}
            }),
            0,
        ),
        Err(e) => (
            json!({
                "session_id": session,
                "error": {"type": "Error", "message": format!("{DEMO_NAME}: {e}"), "code": 1}
            }),
            1,
        ),
    };
    let mut text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?;
    text.push('\n');
    if code == 0 {
        super::write_out(text.as_bytes())?;
    } else {
        // The real tool prints its error object on stderr (recorded: tests/data/real/tribunal).
        eprint!("{text}");
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lens_is_the_last_mark() {
        let p = "charter names \"lens\": \"security\" early\n...\n{\"verdict\": \"pass\" | \"refuse\", \"lens\": \"defect\", \"findings\": [...]}";
        assert_eq!(lens_of(p).as_deref(), Some("defect"));
        assert_eq!(lens_of("no foot"), None);
    }
}
