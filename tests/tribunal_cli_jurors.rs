//! The CLI jurors (`claude -p`, `codex exec`, `gemini --prompt`) against the fakes on PATH
//! (`proctor demo-agent`, installed as the tools), and, when `PROCTOR_REAL_TOOLS` names
//! them, against the real tools: the exact argv `CliJuror` builds must be accepted (they
//! fail on the login or the network, never on an option).
//!
//! What the fakes' headless output is checked against: the real tools' output recorded in
//! `tests/data/real/tribunal/` (claude 2.1.332 `-p --output-format json` without a login;
//! gemini 0.61.0 `--prompt --output-format json` without auth, whose error object goes to
//! stderr) and, for what a real tool only prints after a model answered (gemini's
//! `response` and `stats`, codex's last-message file), the tools' own documentation
//! (geminicli.com/docs/cli/headless: `response` string, `stats` object, `error` object;
//! `codex exec --help`: `-o, --output-last-message <FILE>` "file where the last message from
//! the agent should be written", observed created empty at start by 0.171.0).

mod common;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor::tribunal::jurors::cli::CliJuror;
use proctor::tribunal::jurors::{Call, Env, Holders, Juror, Reply};
use proctor::tribunal::model::{Backend, Rung};
use serde_json::Value;

const BACKENDS: [Backend; 3] = [Backend::Claude, Backend::Codex, Backend::Gemini];
const FOOT: &str = "Answer with exactly one JSON object:\n{\"verdict\": \"pass\" | \"refuse\", \"lens\": \"defect\", \"findings\": [...]}\n";

struct Fx {
    _shims: tempfile::TempDir,
    shims: PathBuf,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Fx {
    fn new() -> Fx {
        let shims = tempfile::tempdir().unwrap();
        proctor::providers::fake::install_shims(
            shims.path(),
            Path::new(env!("CARGO_BIN_EXE_proctor")),
        )
        .unwrap();
        Fx {
            shims: shims.path().to_path_buf(),
            _shims: shims,
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }
    fn env_with_path(&self, path: OsString) -> Env {
        Env {
            path: path.clone(),
            base_env: vec![
                ("PATH".into(), path),
                ("HOME".into(), self.home.path().into()),
                // Not on the allowlist: must never reach the juror.
                ("ANTHROPIC_API_KEY".into(), "sk-ant-not-for-jurors".into()),
            ],
            holders: Holders::default(),
            profiles: Vec::new(),
        }
    }
    fn env(&self) -> Env {
        let path = format!("{}:/usr/bin:/bin", self.shims.display());
        self.env_with_path(path.into())
    }
    fn dir(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }
}

fn rung(backend: Backend, model: &str) -> Rung {
    Rung {
        backend,
        model: model.into(),
        family: backend.cli_family().unwrap().into(),
        context_tokens: None,
        base_url: None,
        key: None,
        local: false,
        timeout_secs: 600,
        profile: None,
    }
}

fn prompt() -> String {
    format!(
        "You are the juror of the lens \"lens\": \"security\" (an earlier mention).\n\
         === envelope ===\nsrc/lib.rs\nfn f() {{}}\n=== protocol ===\n{FOOT}"
    )
}

fn convene(j: &dyn Juror, workdir: PathBuf, deadline: Duration, tokens: u64) -> Reply {
    let schema = serde_json::json!({"type": "object", "required": ["verdict", "lens", "findings"]});
    let p = prompt();
    j.convene(&Call {
        run_id: "rnd-0001/defect/1",
        lens: "defect",
        prompt: &p,
        prompt_tokens: tokens,
        schema: &schema,
        deadline,
        workdir,
    })
}

fn answered(r: Reply) -> String {
    match r {
        Reply::Answered { text } => text,
        other => panic!("no answer: {other:?}"),
    }
}

#[test]
fn each_cli_juror_answers_its_fakes_verdict_for_the_lens_of_the_foot() {
    let fx = Fx::new();
    for b in BACKENDS {
        let j = CliJuror::new(rung(b, "fake-pass"), fx.env());
        let dir = fx.dir(&format!("{}-pass", b.as_str()));
        let text = answered(convene(&j, dir.clone(), Duration::from_secs(60), 100));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{b:?}: {e}: {text}"));
        assert_eq!(v["verdict"], "pass", "{b:?}");
        // The LAST `"lens": "` of the prompt, not the earlier mention.
        assert_eq!(v["lens"], "defect", "{b:?}");
        assert_eq!(v["findings"][0]["severity"], "info", "{b:?}");
        // The prompt was written in the private folder, 0600 in 0700.
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "{b:?}");
        assert_eq!(mode(&dir.join("prompt.txt")), 0o600, "{b:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join("prompt.txt")).unwrap(),
            prompt()
        );
        if b == Backend::Codex {
            // The answer is codex's last-message file; the schema was written for it.
            assert_eq!(
                std::fs::read_to_string(dir.join("last-message.txt")).unwrap(),
                text
            );
            let schema: Value =
                serde_json::from_slice(&std::fs::read(dir.join("schema.json")).unwrap()).unwrap();
            assert_eq!(schema["required"][1], "lens");
        }
    }
}

#[test]
fn wrong_lens_and_garbage_are_answers_returned_unread() {
    let fx = Fx::new();
    for b in BACKENDS {
        let j = CliJuror::new(rung(b, "fake-wrong-lens"), fx.env());
        let text = answered(convene(
            &j,
            fx.dir(&format!("{}-wl", b.as_str())),
            Duration::from_secs(60),
            1,
        ));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["lens"], "generalist", "{b:?}");
        let j = CliJuror::new(rung(b, "fake-garbage"), fx.env());
        let text = answered(convene(
            &j,
            fx.dir(&format!("{}-g", b.as_str())),
            Duration::from_secs(60),
            1,
        ));
        assert_eq!(text.trim(), "{\"verdict\": pa", "{b:?}");
    }
}

/// The pids whose working folder is `dir` (the juror runs its tool there).
fn pids_in(dir: &Path) -> Vec<u32> {
    let dir = std::fs::canonicalize(dir).unwrap_or(dir.to_path_buf());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("cwd")).ok().as_deref() == Some(dir.as_path()) {
            // A zombie keeps no cwd link; a live process does.
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_silent_juror_is_no_answer_at_the_deadline_and_its_group_is_gone() {
    let fx = Fx::new();
    for b in BACKENDS {
        let dir = fx.dir(&format!("{}-silent", b.as_str()));
        let j = CliJuror::new(rung(b, "fake-silent"), fx.env());
        let seen = std::thread::scope(|s| {
            let d = dir.clone();
            let h = s.spawn(move || convene(&j, d, Duration::from_secs(4), 1));
            // While it waits, its tool runs in the folder.
            let mut seen = Vec::new();
            while seen.is_empty() && !h.is_finished() {
                seen = pids_in(&dir);
                std::thread::sleep(Duration::from_millis(20));
            }
            let r = h.join().unwrap();
            match r {
                Reply::NoAnswer { reason, dead } => {
                    assert!(!dead, "{b:?}");
                    assert!(reason.starts_with("timeout"), "{b:?}: {reason}");
                }
                other => panic!("{b:?}: {other:?}"),
            }
            seen
        });
        assert!(
            !seen.is_empty(),
            "{b:?}: the silent tool was never seen running"
        );
        // After the reply nothing of it is left: the whole group was killed and reaped.
        let left: Vec<u32> = seen
            .iter()
            .copied()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists() && !is_zombie(*p))
            .collect();
        assert!(left.is_empty(), "{b:?}: still running {left:?}");
        assert!(pids_in(&dir).is_empty(), "{b:?}");
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

#[test]
fn a_missing_program_is_dead() {
    let fx = Fx::new();
    let empty = tempfile::tempdir().unwrap();
    for b in BACKENDS {
        let j = CliJuror::new(rung(b, "fake-pass"), fx.env_with_path(empty.path().into()));
        match convene(
            &j,
            fx.dir(&format!("{}-missing", b.as_str())),
            Duration::from_secs(60),
            1,
        ) {
            Reply::NoAnswer { reason, dead } => {
                assert!(dead, "{b:?}");
                assert!(reason.contains(b.as_str()), "{b:?}: {reason}");
            }
            other => panic!("{b:?}: {other:?}"),
        }
        let p = j.probe();
        assert_eq!(p.state, "dead", "{b:?}");
        assert!(p.detail.contains(b.as_str()), "{b:?}: {}", p.detail);
    }
}

#[test]
fn an_exit_without_an_answer_is_no_answer() {
    // A model the fakes do not script: each fake refuses it in its tool's error shape.
    let fx = Fx::new();
    for b in BACKENDS {
        let j = CliJuror::new(rung(b, "not-a-fake-model"), fx.env());
        match convene(
            &j,
            fx.dir(&format!("{}-noans", b.as_str())),
            Duration::from_secs(60),
            1,
        ) {
            Reply::NoAnswer { reason, dead } => {
                assert!(!dead, "{b:?}");
                assert!(reason.contains("not-a-fake-model"), "{b:?}: {reason}");
            }
            other => panic!("{b:?}: {other:?}"),
        }
    }
}

#[test]
fn a_prompt_larger_than_the_declared_context_is_refused_before_anything_is_spawned() {
    let fx = Fx::new();
    // A PATH whose tools only leave a mark: if one ran, the mark would be there.
    let traps = tempfile::tempdir().unwrap();
    let mark = traps.path().join("spawned");
    for b in BACKENDS {
        let p = traps.path().join(b.as_str());
        std::fs::write(&p, format!("#!/bin/sh\n: > '{}'\n", mark.display())).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // The trap works: a juror that spawns leaves the mark.
    let j = CliJuror::new(
        rung(Backend::Claude, "fake-pass"),
        fx.env_with_path(traps.path().into()),
    );
    assert!(matches!(
        convene(&j, fx.dir("trap"), Duration::from_secs(60), 1),
        Reply::NoAnswer { .. }
    ));
    assert!(mark.exists(), "the trap did not fire");
    std::fs::remove_file(&mark).unwrap();
    for b in BACKENDS {
        let mut r = rung(b, "fake-pass");
        r.context_tokens = Some(1000);
        let j = CliJuror::new(r, fx.env_with_path(traps.path().into()));
        let dir = fx.dir(&format!("{}-cap", b.as_str()));
        assert_eq!(
            convene(&j, dir.clone(), Duration::from_secs(60), 1001),
            Reply::Capacity {
                needed: 1001,
                max: 1000
            },
            "{b:?}"
        );
        assert!(!mark.exists(), "{b:?} spawned");
        assert!(!dir.exists(), "{b:?} wrote its folder");
        // At the limit it fits (and runs: the trap fires, no answer).
        let mut r = rung(b, "fake-pass");
        r.context_tokens = Some(1000);
        let j = CliJuror::new(r, fx.env());
        answered(convene(
            &j,
            fx.dir(&format!("{}-fit", b.as_str())),
            Duration::from_secs(60),
            1000,
        ));
    }
}

#[test]
fn a_rung_naming_an_unknown_profile_is_dead() {
    let fx = Fx::new();
    let mut r = rung(Backend::Claude, "fake-pass");
    r.profile = Some("work".into());
    let j = CliJuror::new(r, fx.env());
    match convene(&j, fx.dir("profile"), Duration::from_secs(60), 1) {
        Reply::NoAnswer { reason, dead } => {
            assert!(dead);
            assert!(reason.contains("`work`"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_probe_finds_the_program_and_its_version_without_a_verdict() {
    let fx = Fx::new();
    for b in BACKENDS {
        let j = CliJuror::new(rung(b, "fake-pass"), fx.env());
        let p = j.probe();
        assert_eq!(p.state, "alive", "{b:?}: {}", p.detail);
        assert!(p.detail.contains("0.0.0-demo"), "{b:?}: {}", p.detail);
        assert!(
            p.detail
                .contains(&fx.shims.join(b.as_str()).display().to_string()),
            "{}",
            p.detail
        );
    }
}

/// The fake's output object for `args` with `stdin`, from stdout (or stderr).
fn fake_json(tool: &str, args: &[&str], stdin: &str, from_stderr: bool) -> Value {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
        .arg("demo-agent")
        .arg(tool)
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .current_dir(home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let bytes = if from_stderr { out.stderr } else { out.stdout };
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{tool} {args:?}: {e}: {}", String::from_utf8_lossy(&bytes)))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every field of `fake` (recursively through objects) exists in `real` with the same type.
fn fields_within(fake: &Value, real: &Value, path: &str) {
    if let (Value::Object(f), Value::Object(r)) = (fake, real) {
        for (k, v) in f {
            let p = format!("{path}/{k}");
            let rv = r
                .get(k)
                .unwrap_or_else(|| panic!("{p}: the real tool has no such field"));
            assert_eq!(json_type(v), json_type(rv), "{p}");
            fields_within(v, rv, &p);
        }
    }
}

#[test]
fn the_fakes_headless_shapes_match_the_recorded_real_tools() {
    let real_claude: Value = serde_json::from_str(include_str!(
        "data/real/tribunal/claude-2.1.332-print-json-no-login.json"
    ))
    .unwrap();
    let real_gemini_err: Value = serde_json::from_str(include_str!(
        "data/real/tribunal/gemini-0.61.0-prompt-json-no-auth.stderr.json"
    ))
    .unwrap();
    let argv = |b: Backend, model: &str| -> Vec<String> {
        proctor::tribunal::jurors::cli::argv(b, model, Path::new("/tmp"))
    };
    // claude, answered and refused: within the real result object's fields and types.
    for model in ["fake-pass", "not-a-fake"] {
        let a = argv(Backend::Claude, model);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let v = fake_json("claude", &a, FOOT, false);
        assert_eq!(v["type"], "result");
        assert_eq!(v["is_error"], model != "fake-pass");
        fields_within(&v, &real_claude, "");
    }
    // gemini, refused: the error object on stderr, as the real one.
    let a = argv(Backend::Gemini, "not-a-fake");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let v = fake_json("gemini", &a, FOOT, true);
    fields_within(&v, &real_gemini_err, "");
    // gemini, answered: the documented fields (`response` string, `stats` object) plus the
    // recorded `session_id`.
    let a = argv(Backend::Gemini, "fake-pass");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let v = fake_json("gemini", &a, FOOT, false);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["response", "session_id", "stats"]);
    assert!(v["response"].is_string() && v["stats"].is_object());
    assert_eq!(
        json_type(&v["session_id"]),
        json_type(&real_gemini_err["session_id"])
    );
}

/// The fakes refuse an option as their tool does (so a juror's argv with a typo fails).
#[test]
fn the_fakes_refuse_unknown_options_like_the_real_tools() {
    let run = |tool: &str, args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_proctor"))
            .arg("demo-agent")
            .arg(tool)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (c, e) = run("claude", &["-p", "--output-format", "json", "--bogus"]);
    assert_eq!(c, Some(1));
    assert!(e.contains("error: unknown option '--bogus'"), "{e}");
    let (c, e) = run("codex", &["exec", "--bogus"]);
    assert_eq!(c, Some(2));
    assert!(
        e.contains("error: unexpected argument '--bogus' found"),
        "{e}"
    );
    let (c, e) = run("gemini", &["--prompt", "x", "--bogus"]);
    assert_eq!(c, Some(1));
    assert!(e.contains("Unknown argument: bogus"), "{e}");
}

/// The real tools accept the exact argv the jurors build: without a login (a fresh HOME)
/// they fail on authentication or the network, never on an option. Runs for each tool
/// `PROCTOR_REAL_TOOLS` names (then it must be on PATH).
#[test]
fn the_real_tools_accept_the_jurors_argv() {
    let required = std::env::var("PROCTOR_REAL_TOOLS").unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let models = [
        (Backend::Claude, "claude-sonnet-4-5"),
        (Backend::Codex, "gpt-5-codex"),
        (Backend::Gemini, "gemini-2.5-pro"),
    ];
    for (b, model) in models {
        let wanted = required.split(',').any(|t| t.trim() == b.as_str());
        if !wanted {
            eprintln!("skip: {} (not named by PROCTOR_REAL_TOOLS)", b.as_str());
            continue;
        }
        let fx = Fx::new();
        let j = CliJuror::new(rung(b, model), fx.env_with_path(path.clone()));
        // Required: then it must be on PATH (the probe's 5 s bound is not asserted here: a
        // loaded machine may start node slower than that).
        assert!(
            proctor::providers::resolve(
                proctor::providers::Tool::parse(b.as_str()).unwrap(),
                Some(&path)
            )
            .is_ok(),
            "{} is required (PROCTOR_REAL_TOOLS={required}) but not on PATH",
            b.as_str()
        );
        eprintln!("{} probe: {:?}", b.as_str(), j.probe());
        let dir = fx.dir(b.as_str());
        let r = convene(&j, dir.clone(), Duration::from_secs(20), 1);
        let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
        let stdout = std::fs::read_to_string(dir.join("stdout.txt")).unwrap_or_default();
        eprintln!("{}: {r:?}", b.as_str());
        for bad in [
            "unknown option",
            "unexpected argument",
            "Unknown argument",
            "Invalid values",
        ] {
            assert!(
                !stderr.contains(bad) && !stdout.contains(bad),
                "{}: {stderr}{stdout}",
                b.as_str()
            );
        }
        assert!(
            matches!(r, Reply::NoAnswer { dead: false, .. }),
            "{}: {r:?}",
            b.as_str()
        );
    }
}

#[test]
fn the_juror_runs_with_the_allowlist_only_and_its_profiles_account_home() {
    let fx = Fx::new();
    // A `claude` that records its environment and its working folder.
    let tools = tempfile::tempdir().unwrap();
    let seen = tools.path().join("env.txt");
    let p = tools.path().join("claude");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\n/usr/bin/env > '{0}'\necho \"cwd=$(pwd)\" >> '{0}'\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut env = fx.env_with_path(tools.path().into());
    let acct = tempfile::tempdir().unwrap();
    env.profiles.push(proctor::providers::profile::Profile {
        name: "work".into(),
        tool: proctor::providers::Tool::Claude,
        home: acct.path().to_path_buf(),
        is_default: false,
        permissions: Default::default(),
    });
    let read = || std::fs::read_to_string(&seen).unwrap();
    let names = |t: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .filter(|k| k != "PWD" && k != "SHLVL" && k != "_" && k != "cwd")
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let dir = fx.dir("env-default");
    let j = CliJuror::new(rung(Backend::Claude, "fake-pass"), env.clone());
    assert!(matches!(
        convene(&j, dir.clone(), Duration::from_secs(60), 1),
        Reply::NoAnswer { .. }
    ));
    let t = read();
    assert_eq!(names(&t), ["HOME", "PATH"], "{t}");
    assert!(!t.contains("sk-ant"), "{t}");
    assert!(t.contains(&format!("cwd={}", dir.display())), "{t}");
    // With the profile: its account home, and nothing else more.
    let mut r = rung(Backend::Claude, "fake-pass");
    r.profile = Some("work".into());
    let j = CliJuror::new(r, env);
    assert!(matches!(
        convene(&j, fx.dir("env-work"), Duration::from_secs(60), 1),
        Reply::NoAnswer { .. }
    ));
    let t = read();
    assert!(
        t.contains(&format!("CLAUDE_CONFIG_DIR={}", acct.path().display())),
        "{t}"
    );
    assert_eq!(names(&t), ["CLAUDE_CONFIG_DIR", "HOME", "PATH"], "{t}");
}
