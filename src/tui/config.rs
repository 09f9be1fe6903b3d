//! The cockpit's settings: `<config>/cockpit.toml` (`proctor home` prints the config
//! folder).
//!
//! ```toml
//! theme = "default"   # a built-in theme or <config>/themes/<name>.toml
//! fps = 30            # the most frames drawn per second, 1 to 120
//! mouse = false       # mouse scrolling and clicks; off keeps the terminal's text selection
//! notify = true       # a bell and a desktop notification when a run starts waiting for you
//! notify_command = ["notify-send", "proctor"]  # also run this (argv, no shell; JSON on stdin)
//!
//! [attach]            # `proctor session attach` (docs/session-cli.md)
//! clipboard = "drop"  # "allow" passes a PTY child's OSC 52 clipboard writes to the terminal
//! ```
//!
//! Every setting is optional; an absent file gives the defaults. Unknown settings are
//! refused, so a typo never passes silently.

use std::path::{Path, PathBuf};

/// The settings file's name in the config folder.
pub const CONFIG_FILE: &str = "cockpit.toml";
/// The keymap file's name in the config folder.
pub const KEYMAP_FILE: &str = "keymap.toml";
/// The folder of user themes in the config folder.
pub const THEMES_DIR: &str = "themes";

pub const DEFAULT_FPS: u32 = 30;
pub const MIN_FPS: u32 = 1;
pub const MAX_FPS: u32 = 120;

/// The largest settings file read.
/// The largest settings, keymap or theme file read (they are a few kilobytes).
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a user's file could not be read.
pub(crate) enum ReadFault {
    Io(std::io::Error),
    TooLarge,
}

/// Reads a user's settings file, keymap or theme, at most [`MAX_FILE_BYTES`]. `Ok(None)`
/// when it does not exist.
pub(crate) fn read_capped(path: &Path) -> Result<Option<String>, ReadFault> {
    use std::io::Read as _;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadFault::Io(e)),
    };
    let mut text = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(ReadFault::Io)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadFault::TooLarge);
    }
    Ok(Some(text))
}

/// A TOML value as it was written, for messages.
pub(crate) fn show_value(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let inner: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k} = {}", show_value(v)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
        other => other.to_string(),
    }
}

const SETTINGS: [&str; 6] = [
    "theme",
    "fps",
    "mouse",
    "notify",
    "notify_command",
    "attach.clipboard",
];

/// The most words `notify_command` may have.
pub const MAX_NOTIFY_ARGS: usize = 64;

/// The cockpit's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CockpitConfig {
    /// The theme's name.
    pub theme: String,
    /// The most frames drawn per second.
    pub fps: u32,
    /// Whether the cockpit captures the mouse.
    pub mouse: bool,
    /// `[attach] clipboard`: whether `proctor session attach` passes a PTY child's OSC 52
    /// clipboard writes to the operator's terminal (default: dropped).
    pub attach_clipboard: crate::text::attach::Clipboard,
    /// `notify`: tell the person when a run starts waiting for them (default on).
    pub notify: bool,
    /// `notify_command`: an argv run (no shell) with the waiting run's JSON on stdin.
    pub notify_command: Option<Vec<String>>,
}

impl Default for CockpitConfig {
    fn default() -> CockpitConfig {
        CockpitConfig {
            theme: super::theme::DEFAULT_THEME.to_owned(),
            fps: DEFAULT_FPS,
            mouse: false,
            attach_clipboard: crate::text::attach::Clipboard::Drop,
            notify: true,
            notify_command: None,
        }
    }
}

/// Why the settings could not be loaded: each message names the file, the key and the
/// value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read the settings file {file}: {err}. Remedy: fix its permissions or remove it"
    )]
    Read { file: String, err: std::io::Error },
    #[error("{file}: larger than {MAX_FILE_BYTES} bytes; the settings are a few lines")]
    TooLarge { file: String },
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    #[error(
        "{file}: unknown setting `{key}` (= {value}); the settings are {}",
        SETTINGS.join(", ")
    )]
    Unknown {
        file: String,
        key: String,
        value: String,
    },
    #[error("{file}: {key} = {value}: {reason}")]
    Invalid {
        file: String,
        key: String,
        value: String,
        reason: String,
    },
}

/// `<config_dir>/cockpit.toml`.
pub fn config_path(config_dir: &Path) -> PathBuf {
    config_dir.join(CONFIG_FILE)
}

/// `<config_dir>/keymap.toml`.
pub fn keymap_path(config_dir: &Path) -> PathBuf {
    config_dir.join(KEYMAP_FILE)
}

/// `<config_dir>/themes`.
pub fn themes_dir(config_dir: &Path) -> PathBuf {
    config_dir.join(THEMES_DIR)
}

impl CockpitConfig {
    /// Reads `<config_dir>/cockpit.toml`; an absent file gives the defaults.
    pub fn load(config_dir: &Path) -> Result<CockpitConfig, ConfigError> {
        let path = config_path(config_dir);
        let file = path.display().to_string();
        match read_capped(&path) {
            Ok(None) => Ok(CockpitConfig::default()),
            Ok(Some(text)) => CockpitConfig::parse(&text, &file),
            Err(ReadFault::Io(err)) => Err(ConfigError::Read { file, err }),
            Err(ReadFault::TooLarge) => Err(ConfigError::TooLarge { file }),
        }
    }

    /// Parses settings given as text (`file` names them in errors).
    pub fn parse(text: &str, file: &str) -> Result<CockpitConfig, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    file: file.to_owned(),
                    message: e.message().to_owned()
                        + &e.span()
                            .map(|s| format!(" (at byte {})", s.start))
                            .unwrap_or_default(),
                })?;
        let mut config = CockpitConfig::default();
        for (key, value) in &table {
            let invalid = |reason: String| ConfigError::Invalid {
                file: file.to_owned(),
                key: key.clone(),
                value: value.to_string(),
                reason,
            };
            match (key.as_str(), value) {
                ("theme", toml::Value::String(name)) => {
                    if !super::theme::is_valid_name(name) {
                        return Err(invalid(
                            "a theme name is 1 to 64 letters, digits, `-` and `_` (a built-in, \
                             or <config>/themes/<name>.toml)"
                                .to_owned(),
                        ));
                    }
                    config.theme = name.clone();
                }
                ("theme", _) => {
                    return Err(invalid("the theme is a name, e.g. \"default\"".to_owned()));
                }
                ("fps", toml::Value::Integer(n)) => {
                    let fps = u32::try_from(*n)
                        .ok()
                        .filter(|f| (MIN_FPS..=MAX_FPS).contains(f))
                        .ok_or_else(|| {
                            invalid(format!(
                                "the frame cap is a whole number from {MIN_FPS} to {MAX_FPS}"
                            ))
                        })?;
                    config.fps = fps;
                }
                ("fps", _) => {
                    return Err(invalid(format!(
                        "the frame cap is a whole number from {MIN_FPS} to {MAX_FPS}"
                    )));
                }
                ("mouse", toml::Value::Boolean(b)) => config.mouse = *b,
                ("mouse", _) => return Err(invalid("must be true or false".to_owned())),
                ("notify", toml::Value::Boolean(b)) => config.notify = *b,
                ("notify", _) => return Err(invalid("must be true or false".to_owned())),
                ("notify_command", toml::Value::Array(words)) => {
                    let argv: Option<Vec<String>> = words
                        .iter()
                        .map(|w| w.as_str().map(str::to_owned))
                        .collect();
                    match argv {
                        Some(argv)
                            if !argv.is_empty()
                                && argv.len() <= MAX_NOTIFY_ARGS
                                && !argv[0].is_empty()
                                && argv.iter().all(|w| !w.contains('\0')) =>
                        {
                            config.notify_command = Some(argv)
                        }
                        _ => {
                            return Err(invalid(format!(
                                "the notify command is an argv: 1 to {MAX_NOTIFY_ARGS} strings, \
                                 the program first (no shell), e.g. [\"notify-send\", \"proctor\"]"
                            )));
                        }
                    }
                }
                ("notify_command", _) => {
                    return Err(invalid(
                        "the notify command is an argv: an array of strings, the program first \
                         (no shell), e.g. [\"notify-send\", \"proctor\"]"
                            .to_owned(),
                    ));
                }
                ("attach", toml::Value::Table(t)) => {
                    for (k, v) in t {
                        let name = format!("attach.{k}");
                        let invalid = |reason: &str| ConfigError::Invalid {
                            file: file.to_owned(),
                            key: name.clone(),
                            value: v.to_string(),
                            reason: reason.to_owned(),
                        };
                        match (k.as_str(), v.as_str()) {
                            ("clipboard", Some("drop")) => {
                                config.attach_clipboard = crate::text::attach::Clipboard::Drop
                            }
                            ("clipboard", Some("allow")) => {
                                config.attach_clipboard = crate::text::attach::Clipboard::Allow
                            }
                            ("clipboard", _) => {
                                return Err(invalid(
                                    "the clipboard setting is \"drop\" (the default) or \"allow\"",
                                ));
                            }
                            _ => {
                                return Err(ConfigError::Unknown {
                                    file: file.to_owned(),
                                    key: name.clone(),
                                    value: v.to_string(),
                                });
                            }
                        }
                    }
                }
                ("attach", _) => {
                    return Err(invalid(
                        "attach is a table: [attach] then clipboard = \"drop\" or \"allow\""
                            .to_owned(),
                    ));
                }
                _ => {
                    return Err(ConfigError::Unknown {
                        file: file.to_owned(),
                        key: key.clone(),
                        value: value.to_string(),
                    });
                }
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_file_gives_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let c = CockpitConfig::load(dir.path()).unwrap();
        assert_eq!(
            c,
            CockpitConfig {
                theme: "default".to_owned(),
                fps: 30,
                mouse: false,
                attach_clipboard: crate::text::attach::Clipboard::Drop,
                notify: true,
                notify_command: None,
            }
        );
    }

    #[test]
    fn the_notify_settings() {
        let c = CockpitConfig::parse(
            "notify = false\nnotify_command = [\"/usr/bin/logger\", \"-t\", \"proctor\"]\n",
            "f",
        )
        .unwrap();
        assert!(!c.notify);
        assert_eq!(
            c.notify_command,
            Some(vec![
                "/usr/bin/logger".into(),
                "-t".into(),
                "proctor".into()
            ])
        );
        for bad in [
            "notify = \"yes\"\n",
            "notify_command = \"notify-send proctor\"\n",
            "notify_command = []\n",
            "notify_command = [\"\"]\n",
            "notify_command = [\"a\", 1]\n",
        ] {
            let e = CockpitConfig::parse(bad, "f").unwrap_err().to_string();
            assert!(e.starts_with("f: notify"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_file_sets_what_it_says() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cockpit.toml"),
            "theme = \"nord\"\nfps = 120\nmouse = true\n",
        )
        .unwrap();
        let c = CockpitConfig::load(dir.path()).unwrap();
        assert_eq!((c.theme.as_str(), c.fps, c.mouse), ("nord", 120, true));
        std::fs::write(dir.path().join("cockpit.toml"), "fps = 1\n").unwrap();
        let c = CockpitConfig::load(dir.path()).unwrap();
        assert_eq!((c.theme.as_str(), c.fps, c.mouse), ("default", 1, false));
    }

    #[test]
    fn mistakes_are_refused_naming_the_file_the_key_and_the_value() {
        let cases: &[(&str, &[&str])] = &[
            (
                "colour = \"red\"\n",
                &[
                    "unknown setting `colour` (= \"red\")",
                    "theme, fps, mouse, notify, notify_command, attach.clipboard",
                ],
            ),
            ("fps = 0\n", &["fps = 0", "1 to 120"]),
            ("fps = 121\n", &["fps = 121", "1 to 120"]),
            ("fps = -5\n", &["fps = -5"]),
            ("fps = 30.5\n", &["fps = 30.5"]),
            ("fps = \"30\"\n", &["fps = \"30\""]),
            ("mouse = \"yes\"\n", &["mouse = \"yes\"", "true or false"]),
            ("theme = \"../x\"\n", &["theme = \"../x\"", "theme name"]),
            ("theme = 1\n", &["theme = 1"]),
            ("[theme]\nname = \"x\"\n", &["theme = "]),
            ("fps = \n", &["not valid TOML"]),
            (
                "[attach]\nclipboard = \"yes\"\n",
                &["attach.clipboard = \"yes\"", "\"drop\"", "\"allow\""],
            ),
            (
                "[attach]\ntitle = true\n",
                &["unknown setting `attach.title`"],
            ),
            ("attach = 1\n", &["attach = 1", "table"]),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cockpit.toml");
        for (text, needles) in cases {
            std::fs::write(&path, text).unwrap();
            let e = CockpitConfig::load(dir.path()).unwrap_err().to_string();
            assert!(e.starts_with(&path.display().to_string()), "{e}");
            for n in *needles {
                assert!(e.contains(n), "{n:?} in {e}");
            }
        }
    }

    #[test]
    fn the_attach_clipboard_setting() {
        use crate::text::attach::Clipboard;
        let c = CockpitConfig::parse("[attach]\nclipboard = \"allow\"\n", "f").unwrap();
        assert_eq!(c.attach_clipboard, Clipboard::Allow);
        let c = CockpitConfig::parse("[attach]\nclipboard = \"drop\"\n", "f").unwrap();
        assert_eq!(c.attach_clipboard, Clipboard::Drop);
        let c = CockpitConfig::parse("[attach]\n", "f").unwrap();
        assert_eq!(c.attach_clipboard, Clipboard::Drop);
    }

    #[test]
    fn unreadable_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cockpit.toml")).unwrap();
        let e = CockpitConfig::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("cockpit.toml"), "{e}");
    }

    #[test]
    fn paths() {
        let d = Path::new("/c");
        assert_eq!(config_path(d), Path::new("/c/cockpit.toml"));
        assert_eq!(keymap_path(d), Path::new("/c/keymap.toml"));
        assert_eq!(themes_dir(d), Path::new("/c/themes"));
    }
}
