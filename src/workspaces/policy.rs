//! The check policy of a workspace: named check commands with deadlines, output bounds and
//! required artifacts. It is stored in proctor (never read from the repository at check
//! time) and applies only once a person approved its exact text by SHA-256.
//!
//! Format (TOML, unknown keys refused):
//!
//! ```toml
//! [[check]]
//! name = "test"                      # [a-z0-9._-], 1–64 bytes, unique
//! argv = ["cargo", "test", "--locked"] # run without a shell, in the candidate's worktree
//! deadline_secs = 600                # 1 ..= 86400, default 600
//! max_output_bytes = 1048576         # per stream, 1 KiB ..= 64 MiB, default 1 MiB
//! artifacts = ["target/report.xml"]  # relative paths that must exist afterwards
//! ```
//!
//! The tribunal (issue 14, `docs/tribunal.md`) adds two optional parts:
//!
//! ```toml
//! require = ["tribunal"]             # top level: the gate also needs a unanimous round
//!
//! [tribunal]                         # the checks the tribunal's engine runs itself
//! tests = ["tests/", "*_test.rs"]    # path patterns naming test files (default below)
//! new_tests = ["sh", "tests/new.sh"] # argv: runs the red-first tests
//! regression = ["cargo", "test"]     # argv: the whole suite
//! deadline_secs = 600                # per step, 1 ..= 86400, default 600
//! ```
//!
//! A test pattern ending in `/` names a folder at any depth (`tests/` holds `tests/a.rs` and
//! `crates/x/tests/a.rs`); a pattern without `/` is matched against the file's name
//! (`*_test.rs`); any other pattern is matched against the whole path from the root. `*`
//! matches any run of characters except `/`, `**` any run including `/`, `?` one character.

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The recipe of a policy digest: SHA-256 of the exact UTF-8 bytes of the policy text.
pub const POLICY_DIGEST_RECIPE: &str = "policy-text-sha256/1";
/// The largest policy text accepted.
pub const MAX_POLICY_BYTES: usize = 64 * 1024;
pub const DEFAULT_DEADLINE_SECS: u64 = 600;
pub const MAX_DEADLINE_SECS: u64 = 86_400;
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
pub const MIN_OUTPUT_BYTES: u64 = 1024;
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
pub const MAX_CHECKS: usize = 64;
/// The names `require` accepts.
pub const KNOWN_REQUIREMENTS: &[&str] = &["tribunal"];
/// The test patterns of a `[tribunal]` table that names none.
pub const DEFAULT_TEST_PATTERNS: &[&str] = &[
    "tests/",
    "test/",
    "__tests__/",
    "spec/",
    "tests.*",
    "test.*",
    "test_*",
    "*_test.*",
    "*_tests.*",
    "*-test.*",
    "*.test.*",
    "*.spec.*",
    "*_spec.*",
    "*Test.*",
    "*Tests.*",
];
/// The most test patterns a `[tribunal]` table may name.
pub const MAX_TEST_PATTERNS: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("the policy is {0} bytes; at most {MAX_POLICY_BYTES} are accepted")]
    TooLarge(usize),
    #[error("the policy contains a NUL byte")]
    Nul,
    #[error("the policy is not valid TOML of the expected shape: {0}")]
    Parse(String),
    #[error("the policy names no check; add at least one [[check]] table")]
    Empty,
    #[error("the policy has {0} checks; at most {MAX_CHECKS} are accepted")]
    TooMany(usize),
    #[error("check {index}: {problem}")]
    Check { index: usize, problem: String },
    #[error("require: {0}")]
    Require(String),
    #[error("[tribunal]: {0}")]
    Tribunal(String),
}

/// One named check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub argv: Vec<String>,
    pub deadline_secs: u64,
    pub max_output_bytes: u64,
    pub artifacts: Vec<String>,
}

/// A parsed, validated policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub checks: Vec<Check>,
    /// What the gate requires beyond the checks and a person's decision ([`KNOWN_REQUIREMENTS`]).
    pub require: Vec<String>,
    /// The checks the tribunal's engine runs itself (`None`: the engine does not check).
    pub tribunal: Option<TribunalPolicy>,
}

impl Policy {
    /// Whether the gate requires a unanimous tribunal round on the current bytes.
    pub fn requires_tribunal(&self) -> bool {
        self.require.iter().any(|r| r == "tribunal")
    }
}

/// The `[tribunal]` table: what the engine runs (without a shell, in private copies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TribunalPolicy {
    /// Path patterns naming test files ([`DEFAULT_TEST_PATTERNS`] when the table names none).
    pub tests: Vec<String>,
    /// Runs the red-first tests: must fail on the red commit, pass on the candidate.
    pub new_tests: Vec<String>,
    /// The whole suite: must pass on the red commit's parent and on the candidate.
    pub regression: Vec<String>,
    /// The deadline of each step.
    pub deadline_secs: u64,
}

impl TribunalPolicy {
    /// Whether `path` (relative, `/`-separated) names a test file by these patterns.
    pub fn is_test(&self, path: &str) -> bool {
        is_test_path(&self.tests, path)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    require: Vec<String>,
    #[serde(default)]
    check: Vec<RawCheck>,
    tribunal: Option<RawTribunal>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTribunal {
    tests: Option<Vec<String>>,
    new_tests: Option<Vec<String>>,
    regression: Option<Vec<String>>,
    deadline_secs: Option<u64>,
}

/// Whether `path` (relative, `/`-separated) matches one of `patterns` (see the module's doc).
pub fn is_test_path<S: AsRef<str>>(patterns: &[S], path: &str) -> bool {
    patterns.iter().any(|p| pattern_matches(p.as_ref(), path))
}

fn pattern_matches(pattern: &str, path: &str) -> bool {
    if let Some(folder) = pattern.strip_suffix('/') {
        // A folder at any depth: some run of the path's folders is this one.
        let segs: Vec<&str> = path.split('/').collect();
        let want: Vec<&str> = folder.split('/').collect();
        let dirs = &segs[..segs.len() - 1];
        if want.len() > dirs.len() {
            return false;
        }
        return (0..=dirs.len() - want.len()).any(|i| {
            dirs[i..i + want.len()]
                .iter()
                .zip(&want)
                .all(|(s, w)| glob(w.as_bytes(), s.as_bytes()))
        });
    }
    if !pattern.contains('/') {
        let name = path.rsplit('/').next().unwrap_or(path);
        return glob(pattern.as_bytes(), name.as_bytes());
    }
    glob(pattern.as_bytes(), path.as_bytes())
}

/// `*` any run without `/`, `**` any run (`**/` also no folder at all), `?` one byte other
/// than `/`; every other byte literally.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p {
        [] => s.is_empty(),
        [b'*', b'*', rest @ ..] => {
            if let [b'/', after @ ..] = rest
                && glob(after, s)
            {
                return true;
            }
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        [b'*', rest @ ..] => {
            let mut i = 0;
            loop {
                if glob(rest, &s[i..]) {
                    return true;
                }
                if i == s.len() || s[i] == b'/' {
                    return false;
                }
                i += 1;
            }
        }
        [b'?', rest @ ..] => !s.is_empty() && s[0] != b'/' && glob(rest, &s[1..]),
        [c, rest @ ..] => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// A test pattern proctor accepts: relative, no `.`/`..` segment, no empty segment.
pub fn valid_pattern(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 256
        && !p.starts_with('/')
        && !p.contains('\0')
        && !p.contains("//")
        && p.split('/').all(|seg| seg != "." && seg != "..")
}

fn argv_problem(what: &str, argv: &Option<Vec<String>>) -> Option<String> {
    match argv.as_deref() {
        None => Some(format!(
            "{what} is missing; name the argv that runs it (no shell), e.g. {what} = [\"sh\", \"tests/run.sh\"]"
        )),
        Some([]) => Some(format!("{what} is empty; name the program to run")),
        Some([first, ..]) if first.is_empty() => Some(format!("{what}[0] is empty")),
        Some(a) if a.iter().any(|x| x.contains('\0')) => {
            Some(format!("{what} contains a NUL byte"))
        }
        Some(_) => None,
    }
}

fn parse_tribunal(t: RawTribunal) -> Result<TribunalPolicy, PolicyError> {
    let bad = |m: String| PolicyError::Tribunal(m);
    if let Some(p) = argv_problem("new_tests", &t.new_tests) {
        return Err(bad(p));
    }
    if let Some(p) = argv_problem("regression", &t.regression) {
        return Err(bad(p));
    }
    let tests = match t.tests {
        None => DEFAULT_TEST_PATTERNS
            .iter()
            .map(|s| s.to_string())
            .collect(),
        Some(v) if v.is_empty() => {
            return Err(bad(
                "tests is empty; name the path patterns of the test files (e.g. \"tests/\"), \
                 or leave the key out for the defaults"
                    .into(),
            ));
        }
        Some(v) => v,
    };
    if tests.len() > MAX_TEST_PATTERNS {
        return Err(bad(format!(
            "tests names {} patterns; at most {MAX_TEST_PATTERNS} are accepted",
            tests.len()
        )));
    }
    for (i, p) in tests.iter().enumerate() {
        if !valid_pattern(p) {
            return Err(bad(format!(
                "tests[{i}] {p:?} must be a relative path pattern (no leading '/', no '.' or \
                 '..' segment, no empty segment, at most 256 bytes)"
            )));
        }
    }
    let deadline_secs = t.deadline_secs.unwrap_or(DEFAULT_DEADLINE_SECS);
    if !(1..=MAX_DEADLINE_SECS).contains(&deadline_secs) {
        return Err(bad(format!(
            "deadline_secs {deadline_secs} is outside 1..={MAX_DEADLINE_SECS}"
        )));
    }
    Ok(TribunalPolicy {
        tests,
        new_tests: t.new_tests.unwrap_or_default(),
        regression: t.regression.unwrap_or_default(),
        deadline_secs,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: String,
    argv: Vec<String>,
    deadline_secs: Option<u64>,
    max_output_bytes: Option<u64>,
    #[serde(default)]
    artifacts: Vec<String>,
}

/// The digest of a policy text, as lowercase hex (recipe [`POLICY_DIGEST_RECIPE`]).
pub fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A check name is also a file name under the evidence folder (`<name>.stdout`,
/// `artifacts/<name>/`), so it may not start with a dot (`.`, `..`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// A relative path inside the worktree: no absolute path, no `..`, no empty segment.
fn valid_artifact(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 4096
        && !path.starts_with('/')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

impl Policy {
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(PolicyError::TooLarge(text.len()));
        }
        if text.contains('\0') {
            return Err(PolicyError::Nul);
        }
        let raw: RawPolicy = toml::from_str(text).map_err(|e| PolicyError::Parse(e.to_string()))?;
        if raw.check.is_empty() {
            return Err(PolicyError::Empty);
        }
        if raw.check.len() > MAX_CHECKS {
            return Err(PolicyError::TooMany(raw.check.len()));
        }
        let mut checks: Vec<Check> = Vec::with_capacity(raw.check.len());
        for (i, c) in raw.check.into_iter().enumerate() {
            let index = i + 1;
            let bad = |problem: String| PolicyError::Check { index, problem };
            if !valid_name(&c.name) {
                return Err(bad(format!(
                    "name {:?} must be 1–64 bytes of a-z, 0-9, '.', '_' or '-', not starting with '.'",
                    c.name
                )));
            }
            if checks.iter().any(|k| k.name == c.name) {
                return Err(bad(format!("name {:?} is used twice", c.name)));
            }
            match c.argv.first() {
                None => return Err(bad("argv is empty; name the program to run".into())),
                Some(p) if p.is_empty() => return Err(bad("argv[0] is empty".into())),
                _ => {}
            }
            if c.argv.iter().any(|a| a.contains('\0')) {
                return Err(bad("argv contains a NUL byte".into()));
            }
            let deadline_secs = c.deadline_secs.unwrap_or(DEFAULT_DEADLINE_SECS);
            if !(1..=MAX_DEADLINE_SECS).contains(&deadline_secs) {
                return Err(bad(format!(
                    "deadline_secs {deadline_secs} is outside 1..={MAX_DEADLINE_SECS}"
                )));
            }
            let max_output_bytes = c.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
            if !(MIN_OUTPUT_BYTES..=MAX_OUTPUT_BYTES).contains(&max_output_bytes) {
                return Err(bad(format!(
                    "max_output_bytes {max_output_bytes} is outside {MIN_OUTPUT_BYTES}..={MAX_OUTPUT_BYTES}"
                )));
            }
            for a in &c.artifacts {
                if !valid_artifact(a) {
                    return Err(bad(format!(
                        "artifact {a:?} must be a relative path inside the worktree (no '..', no leading '/')"
                    )));
                }
            }
            checks.push(Check {
                name: c.name,
                argv: c.argv,
                deadline_secs,
                max_output_bytes,
                artifacts: c.artifacts,
            });
        }
        let mut require: Vec<String> = Vec::with_capacity(raw.require.len());
        for r in raw.require {
            if !KNOWN_REQUIREMENTS.contains(&r.as_str()) {
                return Err(PolicyError::Require(format!(
                    "unknown name {r:?}; the known names are: {}",
                    KNOWN_REQUIREMENTS.join(", ")
                )));
            }
            if require.contains(&r) {
                return Err(PolicyError::Require(format!("{r:?} is named twice")));
            }
            require.push(r);
        }
        let tribunal = raw.tribunal.map(parse_tribunal).transpose()?;
        if require.iter().any(|r| r == "tribunal") && tribunal.is_none() {
            return Err(PolicyError::Require(
                "\"tribunal\" needs a [tribunal] table: a unanimous round stands on the \
                 engine's own checks (new_tests, regression); add [tribunal] with new_tests \
                 and regression"
                    .into(),
            ));
        }
        Ok(Policy {
            checks,
            require,
            tribunal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_policy_with_defaults() {
        let p = Policy::parse(
            "[[check]]\nname = \"test\"\nargv = [\"cargo\", \"test\"]\n\n[[check]]\nname = \"lint\"\nargv = [\"true\"]\ndeadline_secs = 5\nartifacts = [\"out/report.txt\"]\n",
        )
        .unwrap();
        assert_eq!(p.checks.len(), 2);
        assert_eq!(p.checks[0].deadline_secs, DEFAULT_DEADLINE_SECS);
        assert_eq!(p.checks[0].max_output_bytes, DEFAULT_MAX_OUTPUT_BYTES);
        assert_eq!(p.checks[1].artifacts, vec!["out/report.txt".to_string()]);
    }

    #[test]
    fn refuses_bad_policies_by_name() {
        let cases = [
            ("", PolicyError::Empty),
            (
                "[[check]]\nname = \"a\"\nargv = []\n",
                PolicyError::Check {
                    index: 1,
                    problem: "argv is empty; name the program to run".into(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Policy::parse(text).unwrap_err(), want, "{text:?}");
        }
        let dup =
            "[[check]]\nname = \"a\"\nargv = [\"x\"]\n[[check]]\nname = \"a\"\nargv = [\"y\"]\n";
        assert!(
            Policy::parse(dup)
                .unwrap_err()
                .to_string()
                .contains("used twice")
        );
        for name in [".", "..", ".hidden"] {
            let text = format!("[[check]]\nname = \"{name}\"\nargv = [\"x\"]\n");
            assert!(Policy::parse(&text).is_err(), "{name}");
        }
        let escape = "[[check]]\nname = \"a\"\nargv = [\"x\"]\nartifacts = [\"../etc/passwd\"]\n";
        assert!(
            Policy::parse(escape)
                .unwrap_err()
                .to_string()
                .contains("relative path")
        );
        let abs = "[[check]]\nname = \"a\"\nargv = [\"x\"]\nartifacts = [\"/etc/passwd\"]\n";
        assert!(Policy::parse(abs).is_err());
        let unknown = "[[check]]\nname = \"a\"\nargv = [\"x\"]\nshell = true\n";
        assert!(matches!(Policy::parse(unknown), Err(PolicyError::Parse(_))));
        let slow = "[[check]]\nname = \"a\"\nargv = [\"x\"]\ndeadline_secs = 0\n";
        assert!(
            Policy::parse(slow)
                .unwrap_err()
                .to_string()
                .contains("deadline_secs")
        );
        assert!(matches!(Policy::parse("a\0"), Err(PolicyError::Nul)));
    }

    const CHECK: &str = "[[check]]\nname = \"a\"\nargv = [\"true\"]\n";

    #[test]
    fn parses_require_and_a_tribunal_table() {
        let text = format!(
            "require = [\"tribunal\"]\n{CHECK}\n[tribunal]\ntests = [\"tests/\", \"*_test.rs\"]\nnew_tests = [\"sh\", \"tests/new.sh\"]\nregression = [\"sh\", \"tests/all.sh\"]\ndeadline_secs = 30\n"
        );
        let p = Policy::parse(&text).unwrap();
        assert_eq!(p.require, vec!["tribunal".to_string()]);
        assert!(p.requires_tribunal());
        let t = p.tribunal.unwrap();
        assert_eq!(t.tests, vec!["tests/".to_string(), "*_test.rs".to_string()]);
        assert_eq!(
            t.new_tests,
            vec!["sh".to_string(), "tests/new.sh".to_string()]
        );
        assert_eq!(t.regression[1], "tests/all.sh");
        assert_eq!(t.deadline_secs, 30);

        // Defaults: the test patterns and the deadline; no require.
        let p = Policy::parse(&format!(
            "{CHECK}[tribunal]\nnew_tests = [\"x\"]\nregression = [\"y\"]\n"
        ))
        .unwrap();
        assert!(!p.requires_tribunal());
        let t = p.tribunal.unwrap();
        assert_eq!(t.deadline_secs, DEFAULT_DEADLINE_SECS);
        assert_eq!(t.tests.len(), DEFAULT_TEST_PATTERNS.len());
        // A policy without either is what it was.
        let p = Policy::parse(CHECK).unwrap();
        assert!(p.require.is_empty() && p.tribunal.is_none());
    }

    #[test]
    fn refuses_bad_require_and_tribunal_tables_by_name() {
        let tribunal = "[tribunal]\nnew_tests = [\"x\"]\nregression = [\"y\"]\n";
        let cases: Vec<(String, &str)> = vec![
            (
                format!("require = [\"tribunall\"]\n{CHECK}{tribunal}"),
                "require: unknown name \"tribunall\"; the known names are: tribunal",
            ),
            (
                format!("require = [\"tribunal\", \"tribunal\"]\n{CHECK}{tribunal}"),
                "named twice",
            ),
            (
                format!("require = [\"tribunal\"]\n{CHECK}"),
                "\"tribunal\" needs a [tribunal] table",
            ),
            (
                format!("{CHECK}[tribunal]\nregression = [\"y\"]\n"),
                "[tribunal]: new_tests is missing",
            ),
            (
                format!("{CHECK}[tribunal]\nnew_tests = []\nregression = [\"y\"]\n"),
                "[tribunal]: new_tests is empty",
            ),
            (
                format!("{CHECK}[tribunal]\nnew_tests = [\"x\"]\n"),
                "[tribunal]: regression is missing",
            ),
            (
                format!("{CHECK}[tribunal]\nnew_tests = [\"x\"]\nregression = [\"\"]\n"),
                "[tribunal]: regression[0] is empty",
            ),
            (
                format!("{CHECK}{tribunal}deadline_secs = 0\n"),
                "[tribunal]: deadline_secs 0 is outside 1..=86400",
            ),
            (
                format!("{CHECK}{tribunal}tests = []\n"),
                "[tribunal]: tests is empty",
            ),
            (
                format!("{CHECK}{tribunal}tests = [\"../x/\"]\n"),
                "[tribunal]: tests[0] \"../x/\" must be a relative path pattern",
            ),
            (
                format!("{CHECK}{tribunal}tests = [\"/abs\"]\n"),
                "must be a relative path pattern",
            ),
        ];
        for (text, want) in cases {
            let got = Policy::parse(&text).unwrap_err().to_string();
            assert!(got.contains(want), "{text:?}: {got}");
        }
        // Unknown keys in the table are refused by the parser, naming the key.
        let got = Policy::parse(&format!("{CHECK}{tribunal}shell = true\n"))
            .unwrap_err()
            .to_string();
        assert!(got.contains("shell"), "{got}");
    }

    #[test]
    fn test_patterns_match_folders_names_and_paths() {
        let pats = ["tests/", "*_test.rs", "src/**/fixtures/*.json", "spec?.rb"];
        for yes in [
            "tests/a.rs",
            "tests/deep/b.rs",
            "crates/x/tests/a.rs",
            "src/lib_test.rs",
            "lib_test.rs",
            "src/fixtures/a.json",
            "src/a/b/fixtures/c.json",
            "spec1.rb",
        ] {
            assert!(is_test_path(&pats, yes), "{yes}");
        }
        for no in [
            "tests",
            "src/tests.rs",
            "mytests/a.rs",
            "src/lib.rs",
            "src/lib_test.rs.orig",
            "src/fixtures/a/b.json",
            "spec12.rb",
        ] {
            assert!(!is_test_path(&pats, no), "{no}");
        }
        assert!(is_test_path(&["a/b/"], "x/a/b/c.rs"));
        assert!(!is_test_path(&["a/b/"], "a/c/b/d.rs"));
    }

    #[test]
    fn digest_is_sha256_of_the_exact_text() {
        assert_eq!(
            digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_ne!(digest("a "), digest("a"));
    }
}
