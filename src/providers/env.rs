//! The launch environment: an allowlist, never a denylist.
//!
//! A provider child starts from an empty environment (`env_clear`) plus exactly what
//! [`launch_env`] returns. Everything else in the parent — API keys, auth-token overrides,
//! `*_BASE_URL`, `*_PROXY`, cloud-routing switches such as `CLAUDE_CODE_USE_BEDROCK`,
//! `AWS_*`, `GOOGLE_*`, `NODE_OPTIONS`, `LD_PRELOAD`, unrelated host secrets — is not
//! inherited, because it is not on the list (seed 000, "Hygiène des fournisseurs"). The
//! installed subscription logins, in their usual places under the account home, are what
//! the tool then uses.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use super::profile::Profile;
use super::{HomeVarTarget, Transport};

/// Variables copied from the parent when present.
pub const INHERITED: [&str; 6] = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ"];

/// The [`INHERITED`] names this process has, with their values: the base a provider's
/// launch environment starts from.
pub fn inherited_now() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    INHERITED
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (std::ffi::OsString::from(k), v)))
        .collect()
}

/// The locale categories copied from the parent (POSIX and glibc names). A closed list
/// rather than the prefix `LC_`, so that `LC_ANYTHING_API_KEY` is not a way in.
pub const LOCALE_CATEGORIES: [&str; 13] = [
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
];

/// `TERM` for a PTY child when the parent has none (the server is detached and usually
/// has no `TERM`); the server's screen model is an xterm-compatible emulator.
pub const DEFAULT_PTY_TERM: &str = "xterm-256color";

/// The whole environment of a provider child.
///
/// - `PATH`, `HOME`, `USER`, `LOGNAME`, `LANG`, `TZ` and the locale categories are copied
///   from `parent_env` when present;
/// - `TERM` only for [`Transport::Pty`] (the parent's, else [`DEFAULT_PTY_TERM`]);
/// - the tool's account-home variable for a profile that was added (not for a default
///   profile: the tool then resolves its own default from `HOME`, exactly as in the
///   operator's shell; this keeps, e.g., a login that the tool keys by its config path).
///   For gemini and opencode the variable names the *parent* of the home (see
///   [`HomeVarTarget::Parent`]).
///
/// The tool's home variable is never taken from the parent, even for a default profile.
pub fn launch_env<I, K, V>(
    profile: &Profile,
    parent_env: I,
    transport: Transport,
) -> BTreeMap<OsString, OsString>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut out = BTreeMap::new();
    for (k, v) in parent_env {
        let (k, v) = (k.as_ref(), v.as_ref());
        let Some(name) = k.to_str() else { continue };
        let allowed = INHERITED.contains(&name)
            || LOCALE_CATEGORIES.contains(&name)
            || (name == "TERM" && transport == Transport::Pty);
        if allowed {
            out.insert(k.to_os_string(), v.to_os_string());
        }
    }
    if transport == Transport::Pty {
        out.entry(OsString::from("TERM"))
            .or_insert_with(|| OsString::from(DEFAULT_PTY_TERM));
    }
    if !profile.is_default {
        let spec = profile.tool.spec();
        let value = match spec.home_var_target {
            HomeVarTarget::Folder => profile.home.clone().into_os_string(),
            // Profile validation guarantees the home ends with the fixed folder name, so it
            // has a parent.
            HomeVarTarget::Parent { .. } => crate::files::parent_of(&profile.home).into_os_string(),
        };
        out.insert(OsString::from(spec.home_var), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Tool;
    use std::path::PathBuf;

    fn hostile_parent() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/op"),
            ("USER", "op"),
            ("LOGNAME", "op"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "en_GB.UTF-8"),
            ("TZ", "UTC"),
            ("TERM", "screen-256color"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("ANTHROPIC_BASE_URL", "https://evil.example"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("CLAUDE_CODE_USE_VERTEX", "1"),
            ("CLAUDE_CONFIG_DIR", "/somewhere/else"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("OPENAI_BASE_URL", "https://evil.example"),
            ("OPENAI_API_BASE", "https://evil.example"),
            ("CODEX_HOME", "/somewhere/else"),
            ("CODEX_API_KEY", "sk-codex"),
            ("CODEX_SANDBOX", "seatbelt"),
            ("CODEX_SANDBOX_NETWORK_DISABLED", "0"),
            ("OPENAI_ORG_ID", "org-evil"),
            ("ANTHROPIC_MODEL", "evil-model"),
            ("ANTHROPIC_VERTEX_PROJECT_ID", "evil-project"),
            ("CLOUD_ML_REGION", "evil-region"),
            ("HTTP_PROXY", "http://proxy:3128"),
            ("http_proxy", "http://proxy:3128"),
            ("GEMINI_API_KEY", "g"),
            ("GOOGLE_API_KEY", "g"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/creds.json"),
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GEMINI_CLI_HOME", "/somewhere/else"),
            ("XAI_API_KEY", "x"),
            ("GROK_HOME", "/somewhere/else"),
            ("GROK_CONFIG", "[x]"),
            ("XDG_DATA_HOME", "/somewhere/else"),
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_PROFILE", "prod"),
            ("AZURE_OPENAI_ENDPOINT", "https://evil.example"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("https_proxy", "http://proxy:3128"),
            ("ALL_PROXY", "socks5://proxy"),
            ("NO_PROXY", "*"),
            ("NODE_OPTIONS", "--require /tmp/evil.js"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("LD_LIBRARY_PATH", "/tmp"),
            ("DYLD_INSERT_LIBRARIES", "/tmp/evil.dylib"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("PROCTOR_HOME", "/p"),
            ("LC_ANTHROPIC_API_KEY", "sneaky"),
            ("SHELL", "/bin/bash"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn keys(m: &BTreeMap<OsString, OsString>) -> Vec<String> {
        m.keys().map(|k| k.to_string_lossy().into_owned()).collect()
    }

    fn get<'a>(m: &'a BTreeMap<OsString, OsString>, k: &str) -> Option<&'a str> {
        m.get(OsStr::new(k)).and_then(|v| v.to_str())
    }

    #[test]
    fn a_hostile_parent_passes_only_the_allowlist() {
        for tool in Tool::ALL {
            let p = Profile::default_for(tool, std::path::Path::new("/home/op"));
            let pipe = launch_env(&p, hostile_parent(), Transport::Pipe);
            assert_eq!(
                keys(&pipe),
                [
                    "HOME", "LANG", "LC_ALL", "LC_TIME", "LOGNAME", "PATH", "TZ", "USER"
                ],
                "{tool}"
            );
            let pty = launch_env(&p, hostile_parent(), Transport::Pty);
            assert_eq!(get(&pty, "TERM"), Some("screen-256color"));
            assert_eq!(pty.len(), pipe.len() + 1);
            // No value of the parent's secrets appears anywhere, under any name.
            for v in pty.values() {
                let v = v.to_string_lossy();
                for secret in [
                    "sk-",
                    "evil",
                    "AKIA",
                    "proxy",
                    "ghp_",
                    "sneaky",
                    "somewhere",
                ] {
                    assert!(!v.contains(secret), "{tool}: {v}");
                }
            }
        }
    }

    #[test]
    fn an_added_profile_points_the_tool_at_its_home() {
        let home = |p: &str| PathBuf::from(p);
        let cases = [
            (
                Tool::Claude,
                "/acct/claude-work",
                "CLAUDE_CONFIG_DIR",
                "/acct/claude-work",
            ),
            (Tool::Codex, "/acct/codex-2", "CODEX_HOME", "/acct/codex-2"),
            (
                Tool::Gemini,
                "/acct/g/.gemini",
                "GEMINI_CLI_HOME",
                "/acct/g",
            ),
            (Tool::Grok, "/acct/grok", "GROK_HOME", "/acct/grok"),
            (
                Tool::Opencode,
                "/acct/o/opencode",
                "XDG_DATA_HOME",
                "/acct/o",
            ),
        ];
        for (tool, h, var, want) in cases {
            let p = Profile {
                name: "work".into(),
                tool,
                home: home(h),
                is_default: false,
                permissions: Default::default(),
            };
            let env = launch_env(&p, hostile_parent(), Transport::Pipe);
            assert_eq!(get(&env, var), Some(want), "{tool}");
            assert!(!env.contains_key(OsStr::new("TERM")));
        }
    }

    #[test]
    fn pty_without_a_parent_term_gets_the_default_and_missing_vars_stay_missing() {
        let p = Profile::default_for(Tool::Codex, std::path::Path::new("/h"));
        let env = launch_env(&p, [("PATH", "/bin")], Transport::Pty);
        assert_eq!(keys(&env), ["PATH", "TERM"]);
        assert_eq!(get(&env, "TERM"), Some(DEFAULT_PTY_TERM));
        let env = launch_env(&p, Vec::<(String, String)>::new(), Transport::Pipe);
        assert!(env.is_empty());
    }
}
