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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    check: Vec<RawCheck>,
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
        Ok(Policy { checks })
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

    #[test]
    fn digest_is_sha256_of_the_exact_text() {
        assert_eq!(
            digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_ne!(digest("a "), digest("a"));
    }
}
