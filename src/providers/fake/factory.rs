//! The fakes' factory roles: when a headless prompt's LAST factory foot line is
//! `{"factory_role": "worker"}`, `{"factory_role": "repair"}` or
//! `{"factory_role": "reviewer", "review": N}` (the foot `factory::prompt` writes), the fake
//! plays that role instead of the tribunal answerer.
//!
//! Directives are prompt lines (leading spaces trimmed), found anywhere in the prompt (a
//! repair prompt quotes the task and the review output, so a `!repair` line may come from
//! either); each role reads only the lines of its own word:
//!
//! | directive | effect |
//! |---|---|
//! | `!worker write PATH TEXT` | writes TEXT + "\n" to PATH, relative to the working folder (parents made) |
//! | `!worker git ARG…` | runs `git ARG…` in the working folder |
//! | `!worker grandchild` | forks a child that sleeps forever in the same process group; the answer says `grandchild pid N` |
//! | `!worker setsid-grandchild` | the same, but the child calls `setsid()` first (it leaves the group) |
//! | `!worker env PATH` | writes the sorted names of the fake's environment variables to PATH |
//! | `!worker sleep MS` | sleeps MS milliseconds |
//! | `!worker read FROM PATH` | copies the bytes of FROM (absolute, or relative to the working folder) to PATH, or writes `missing` when FROM cannot be read |
//! | `!worker link TARGET PATH` | makes PATH a symbolic link to TARGET |
//! | `!worker remove PATH` | deletes the file PATH |
//! | `!worker exit K` | stops there and exits with status K (after answering) |
//! | `!review N WORD [TEXT…]` | reviewer N answers WORD as its first line, then TEXT as the reasons (none for N: `APPROVE`) |
//! | `!review N write PATH TEXT` | reviewer N writes a file (which the factory must refuse) |
//!
//! `!repair …` takes the same forms as `!worker …`. Directives run in prompt order. The
//! worker's and repair's answer is a short summary (`wrote 2 files`, then notes).

use std::path::Path;
use std::time::Duration;

/// The role a factory foot names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Worker,
    Repair,
    Reviewer(u32),
}

impl Role {
    fn word(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Repair => "repair",
            Role::Reviewer(_) => "review",
        }
    }
}

/// The role named by the prompt's LAST factory foot line, if any.
pub fn foot(prompt: &str) -> Option<Role> {
    prompt.lines().rev().find_map(|l| {
        let l = l.trim();
        if !l.starts_with('{') || !l.contains("factory_role") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        match v.get("factory_role")?.as_str()? {
            "worker" => Some(Role::Worker),
            "repair" => Some(Role::Repair),
            "reviewer" => Some(Role::Reviewer(
                u32::try_from(v.get("review")?.as_u64()?).ok()?,
            )),
            _ => None,
        }
    })
}

/// One worker or repair directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Write {
        path: String,
        text: String,
    },
    Git(Vec<String>),
    Grandchild {
        setsid: bool,
    },
    /// SIGTERM is ignored from here on (by the grandchildren forked after it too): only
    /// SIGKILL ends the tree.
    IgnoreTerm,
    Env(String),
    Sleep(u64),
    Exit(i32),
    Read {
        from: String,
        to: String,
    },
    Link {
        target: String,
        path: String,
    },
    Remove(String),
}

/// One reviewer directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewStep {
    Answer { word: String, text: String },
    Write { path: String, text: String },
}

/// Splits off the first space-separated word.
fn word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.split_once(' ') {
        Some((a, b)) => (a, b),
        None => (s, ""),
    }
}

/// The lines of the prompt that start with `!WORD ` (leading spaces trimmed), what follows.
fn directives<'a>(prompt: &'a str, w: &str) -> impl Iterator<Item = &'a str> {
    let mark = format!("!{w} ");
    prompt
        .lines()
        .filter_map(move |l| l.trim_start().strip_prefix(mark.as_str()))
}

/// The worker's (`word` = `worker`) or the repair's (`repair`) directives, in order.
/// Malformed ones are skipped.
pub fn steps(prompt: &str, w: &str) -> Vec<Step> {
    directives(prompt, w)
        .filter_map(|rest| {
            let (verb, arg) = word(rest);
            match verb {
                "write" => {
                    let (path, text) = word(arg);
                    (!path.is_empty()).then(|| Step::Write {
                        path: path.to_string(),
                        text: text.to_string(),
                    })
                }
                "git" => {
                    let args: Vec<String> = arg.split_whitespace().map(String::from).collect();
                    (!args.is_empty()).then_some(Step::Git(args))
                }
                "grandchild" if arg.trim().is_empty() => Some(Step::Grandchild { setsid: false }),
                "setsid-grandchild" if arg.trim().is_empty() => {
                    Some(Step::Grandchild { setsid: true })
                }
                "ignore-term" if arg.trim().is_empty() => Some(Step::IgnoreTerm),
                "env" if !arg.trim().is_empty() => Some(Step::Env(arg.trim().to_string())),
                "sleep" => arg.trim().parse().ok().map(Step::Sleep),
                "read" | "link" => {
                    let (a, b) = word(arg);
                    let b = b.trim();
                    (!a.is_empty() && !b.is_empty()).then(|| {
                        if verb == "read" {
                            Step::Read {
                                from: a.to_string(),
                                to: b.to_string(),
                            }
                        } else {
                            Step::Link {
                                target: a.to_string(),
                                path: b.to_string(),
                            }
                        }
                    })
                }
                "remove" if !arg.trim().is_empty() => Some(Step::Remove(arg.trim().to_string())),
                "exit" => arg
                    .trim()
                    .parse::<i32>()
                    .ok()
                    .filter(|k| (0..=255).contains(k))
                    .map(Step::Exit),
                _ => None,
            }
        })
        .collect()
}

/// Reviewer `n`'s directives, in order.
pub fn review_steps(prompt: &str, n: u32) -> Vec<ReviewStep> {
    directives(prompt, "review")
        .filter_map(|rest| {
            let (num, rest) = word(rest);
            if num.parse::<u32>().ok()? != n {
                return None;
            }
            let (verb, arg) = word(rest);
            match verb {
                "" => None,
                "write" => {
                    let (path, text) = word(arg);
                    (!path.is_empty()).then(|| ReviewStep::Write {
                        path: path.to_string(),
                        text: text.to_string(),
                    })
                }
                w => Some(ReviewStep::Answer {
                    word: w.to_string(),
                    text: arg.trim().to_string(),
                }),
            }
        })
        .collect()
}

/// What the role came to: the answer and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Played {
    pub text: String,
    pub exit: i32,
}

fn write_file(dir: &Path, path: &str, text: &str) -> Result<(), String> {
    let p = dir.join(path);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(&p, format!("{text}\n")).map_err(|e| format!("cannot write {path}: {e}"))
}

/// Forks a child that sleeps until a signal ends it (after `setsid()` if asked).
fn spawn_sleeper(setsid: bool) -> std::io::Result<i32> {
    super::flush_stdout();
    // SAFETY: after fork the child only calls async-signal-safe functions (setsid, pause),
    // so forking a possibly multi-threaded process is sound here.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            if setsid {
                // SAFETY: setsid has no preconditions.
                unsafe { libc::setsid() };
            }
            loop {
                // SAFETY: pause has no preconditions; the loop never returns to Rust code.
                unsafe { libc::pause() };
            }
        }
        pid => Ok(pid),
    }
}

/// Plays `role` for `prompt` in the working folder `dir`.
pub fn play(role: Role, prompt: &str, dir: &Path) -> Result<Played, String> {
    match role {
        Role::Reviewer(n) => {
            let mut answer: Option<(String, String)> = None;
            for s in review_steps(prompt, n) {
                match s {
                    ReviewStep::Write { path, text } => write_file(dir, &path, &text)?,
                    ReviewStep::Answer { word, text } => {
                        answer.get_or_insert((word, text));
                    }
                }
            }
            let (word, text) = answer.unwrap_or(("APPROVE".into(), String::new()));
            let text = if text.is_empty() {
                word
            } else {
                format!("{word}\n{text}")
            };
            Ok(Played { text, exit: 0 })
        }
        Role::Worker | Role::Repair => {
            let mut wrote = 0u32;
            let mut notes = Vec::new();
            let mut exit = 0;
            for s in steps(prompt, role.word()) {
                match s {
                    Step::Write { path, text } => {
                        write_file(dir, &path, &text)?;
                        wrote += 1;
                    }
                    Step::Git(args) => {
                        let st = std::process::Command::new("git")
                            .args(&args)
                            .current_dir(dir)
                            .stdin(std::process::Stdio::null())
                            .stdout(std::process::Stdio::null())
                            .status()
                            .map_err(|e| format!("cannot run git: {e}"))?;
                        notes.push(format!("git {} exited {st}", args[0]));
                    }
                    Step::Grandchild { setsid } => {
                        let pid = spawn_sleeper(setsid)
                            .map_err(|e| format!("cannot fork a grandchild: {e}"))?;
                        notes.push(format!("grandchild pid {pid}"));
                    }
                    Step::IgnoreTerm => {
                        // SAFETY: setting a signal's disposition to SIG_IGN has no
                        // preconditions.
                        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
                        notes.push("SIGTERM ignored".into());
                    }
                    Step::Env(path) => {
                        let mut names: Vec<String> = std::env::vars_os()
                            .map(|(k, _)| k.to_string_lossy().into_owned())
                            .collect();
                        names.sort();
                        let mut body = names.join("\n");
                        body.push('\n');
                        let p = dir.join(&path);
                        std::fs::write(&p, body)
                            .map_err(|e| format!("cannot write {path}: {e}"))?;
                    }
                    Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
                    Step::Read { from, to } => {
                        let bytes = std::fs::read(dir.join(&from))
                            .unwrap_or_else(|_| b"missing\n".to_vec());
                        std::fs::write(dir.join(&to), bytes)
                            .map_err(|e| format!("cannot write {to}: {e}"))?;
                        wrote += 1;
                    }
                    Step::Link { target, path } => {
                        std::os::unix::fs::symlink(&target, dir.join(&path))
                            .map_err(|e| format!("cannot link {path}: {e}"))?;
                    }
                    Step::Remove(path) => {
                        std::fs::remove_file(dir.join(&path))
                            .map_err(|e| format!("cannot remove {path}: {e}"))?;
                    }
                    Step::Exit(k) => {
                        exit = k;
                        break;
                    }
                }
            }
            let mut text = format!(
                "{} ({}): wrote {wrote} file{}",
                super::DEMO_NAME,
                role.word(),
                if wrote == 1 { "" } else { "s" }
            );
            for n in notes {
                text.push('\n');
                text.push_str(&n);
            }
            Ok(Played { text, exit })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_foot_names_the_role() {
        assert_eq!(
            foot("x\n{\"factory_role\": \"worker\"}\n"),
            Some(Role::Worker)
        );
        assert_eq!(
            foot(
                "{\"factory_role\": \"worker\"}\nquoted\n  {\"factory_role\":\"reviewer\",\"review\":2}"
            ),
            Some(Role::Reviewer(2))
        );
        assert_eq!(
            foot(
                "{\"factory_role\": \"reviewer\", \"review\": 1}\n{\"factory_role\": \"repair\"}\ntail"
            ),
            Some(Role::Repair)
        );
        assert_eq!(foot("{\"verdict\": \"pass\", \"lens\": \"defect\"}"), None);
        assert_eq!(foot("{\"factory_role\": \"boss\"}"), None);
        assert_eq!(foot("{\"factory_role\": \"reviewer\"}"), None);
        assert_eq!(foot(""), None);
    }

    #[test]
    fn worker_and_repair_directives_parse() {
        let p = "task\n  !worker write src/a.txt hello there\n!worker git add -A\n\
                 !worker grandchild\n!worker setsid-grandchild\n!worker env env.txt\n\
                 !worker sleep 50\n!worker sleep x\n!worker exit 3\n!worker exit 300\n\
                 !worker write\n!worker nope\n!workerx write a b\n!repair write b.txt fixed\n";
        assert_eq!(
            steps(p, "worker"),
            [
                Step::Write {
                    path: "src/a.txt".into(),
                    text: "hello there".into()
                },
                Step::Git(vec!["add".into(), "-A".into()]),
                Step::Grandchild { setsid: false },
                Step::Grandchild { setsid: true },
                Step::Env("env.txt".into()),
                Step::Sleep(50),
                Step::Exit(3),
            ]
        );
        assert_eq!(
            steps(p, "repair"),
            [Step::Write {
                path: "b.txt".into(),
                text: "fixed".into()
            }]
        );
    }

    #[test]
    fn review_directives_parse_per_review() {
        let p = "!review 1 REQUEST_CHANGES add a test please\n!review 2 APPROVE\n\
                 !review 1 write node_modules/x.js hi\n!review 3 maybe so\n!review x APPROVE\n!review 2\n";
        assert_eq!(
            review_steps(p, 1),
            [
                ReviewStep::Answer {
                    word: "REQUEST_CHANGES".into(),
                    text: "add a test please".into()
                },
                ReviewStep::Write {
                    path: "node_modules/x.js".into(),
                    text: "hi".into()
                }
            ]
        );
        assert_eq!(
            review_steps(p, 2),
            [ReviewStep::Answer {
                word: "APPROVE".into(),
                text: String::new()
            }]
        );
        assert_eq!(
            review_steps(p, 3),
            [ReviewStep::Answer {
                word: "maybe".into(),
                text: "so".into()
            }]
        );
        assert!(review_steps(p, 4).is_empty());
    }

    #[test]
    fn playing_the_roles_writes_and_answers() {
        let dir = tempfile::tempdir().unwrap();
        let p = "!worker write d/a.txt one\n!worker write b.txt\n!review 1 REQUEST_CHANGES no test\n!repair write c.txt x\n";
        let w = play(Role::Worker, p, dir.path()).unwrap();
        assert_eq!(w.exit, 0);
        assert!(w.text.contains("wrote 2 files"), "{}", w.text);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("d/a.txt")).unwrap(),
            "one\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
            "\n"
        );
        assert!(!dir.path().join("c.txt").exists());
        let r = play(Role::Reviewer(1), p, dir.path()).unwrap();
        assert_eq!(r.text, "REQUEST_CHANGES\nno test");
        let r = play(Role::Reviewer(2), p, dir.path()).unwrap();
        assert_eq!(r.text, "APPROVE");
        let e = play(
            Role::Repair,
            "!repair exit 4\n!repair write c.txt x",
            dir.path(),
        )
        .unwrap();
        assert_eq!(e.exit, 4);
        assert!(!dir.path().join("c.txt").exists());
    }
}
