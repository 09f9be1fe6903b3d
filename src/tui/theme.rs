//! Themes: a style for each semantic [`Role`], read from TOML.
//!
//! A theme file maps role names to `{ fg, bg, bold, dim, italic, underline, reversed }`.
//! Colours are the 16 ANSI names (`black`, `red`, `green`, `yellow`, `blue`, `magenta`,
//! `cyan`, `white` and their `bright-` forms), `#rrggbb`, `indexed(N)` (0–255) or `reset`
//! (the terminal's own). `inherits = "name"` takes every role the file does not set, field by
//! field, from another theme; a theme that says nothing inherits `default`, and
//! `inherits = "none"` starts from plain text. Cycles are refused.
//!
//! Built in: `default` (ANSI 16, safe over SSH), `light`, `high-contrast` (ANSI 16) and
//! `nord` (truecolor). A user theme is `<config>/themes/<name>.toml`; it may shadow a
//! built-in of the same name, and may then inherit that built-in by its name.
//!
//! `NO_COLOR` (non-empty) removes every colour whatever the theme; the modifiers stay, and
//! the selected row is always reversed so the selection stays visible.
//!
//! Whatever the theme, `gate_awaiting_human` never looks like `gate_passed`: styled alike (or
//! alike once `NO_COLOR` removed the colours), it is made bold and underlined.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

use super::config::{MAX_FILE_BYTES, ReadFault, show_value};
use super::role::Role;

/// The built-in themes: name and TOML text.
pub const BUILTIN: [(&str, &str); 4] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("nord", include_str!("../../themes/nord.toml")),
];

/// The theme used when none is configured.
pub const DEFAULT_THEME: &str = "default";

/// The longest theme name.
const MAX_NAME_CHARS: usize = 64;

const ROLES: usize = Role::ALL.len();

/// Why a theme could not be loaded. Every message names the file, and where it applies the
/// key and the value.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error(
        "no theme `{name}`: it is not built in ({}) and {} does not exist",
        BUILTIN.map(|b| b.0).join(", "),
        .file.display()
    )]
    NotFound { name: String, file: PathBuf },
    #[error(
        "{file}: bad theme name {name:?}: a name is 1 to {MAX_NAME_CHARS} letters, digits, `-` \
         and `_`"
    )]
    BadName { file: String, name: String },
    #[error("cannot read the theme file {file}: {err}. Remedy: fix its permissions or remove it")]
    Read { file: String, err: std::io::Error },
    #[error("{file}: larger than {MAX_FILE_BYTES} bytes; a theme is a few kilobytes")]
    TooLarge { file: String },
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: {key} = {value}: {reason}")]
    Invalid {
        file: String,
        key: String,
        value: String,
        reason: String,
    },
    #[error("{file}: inheritance cycle: {chain}")]
    Cycle { file: String, chain: String },
}

/// What a theme file says about one role; `None` is "inherited".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Spec {
    fg: Option<Color>,
    bg: Option<Color>,
    bold: Option<bool>,
    dim: Option<bool>,
    italic: Option<bool>,
    underline: Option<bool>,
    reversed: Option<bool>,
}

impl Spec {
    /// `self` over `parent`, field by field.
    fn over(self, parent: Spec) -> Spec {
        Spec {
            fg: self.fg.or(parent.fg),
            bg: self.bg.or(parent.bg),
            bold: self.bold.or(parent.bold),
            dim: self.dim.or(parent.dim),
            italic: self.italic.or(parent.italic),
            underline: self.underline.or(parent.underline),
            reversed: self.reversed.or(parent.reversed),
        }
    }

    fn style(self) -> Style {
        let mut style = Style::default();
        if let Some(c) = self.fg {
            style = style.fg(c);
        }
        if let Some(c) = self.bg {
            style = style.bg(c);
        }
        for (flag, m) in [
            (self.bold, Modifier::BOLD),
            (self.dim, Modifier::DIM),
            (self.italic, Modifier::ITALIC),
            (self.underline, Modifier::UNDERLINED),
            (self.reversed, Modifier::REVERSED),
        ] {
            match flag {
                Some(true) => style = style.add_modifier(m),
                Some(false) => style = style.remove_modifier(m),
                None => {}
            }
        }
        style
    }
}

/// A resolved theme: one style per role.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    name: String,
    styles: [Style; ROLES],
    colors: bool,
}

/// Whether the `NO_COLOR` value asks for no colours: present and not empty
/// (<https://no-color.org>). The caller passes `std::env::var_os("NO_COLOR")`.
pub fn no_color_requested(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

impl Theme {
    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Result<Theme, ThemeError> {
        Theme::resolve_named(name, None)
    }

    /// The theme `name`: `<config_dir>/themes/<name>.toml` if it exists, else the built-in of
    /// that name.
    pub fn load(name: &str, config_dir: &Path) -> Result<Theme, ThemeError> {
        Theme::resolve_named(name, Some(config_dir))
    }

    /// [`Theme::load`], then [`Theme::no_color`] when `no_color_env` (the value of
    /// `NO_COLOR`) is non-empty.
    pub fn for_cockpit(
        name: &str,
        config_dir: &Path,
        no_color_env: Option<&OsStr>,
    ) -> Result<Theme, ThemeError> {
        let theme = Theme::load(name, config_dir)?;
        Ok(if no_color_requested(no_color_env) {
            theme.no_color()
        } else {
            theme
        })
    }

    /// The built-in default theme.
    pub fn default_theme() -> Theme {
        // The built-in default is checked by the tests; it cannot fail at run time.
        Theme::builtin(DEFAULT_THEME)
            .unwrap_or_else(|e| panic!("the built-in default theme is invalid: {e}"))
    }

    fn resolve_named(name: &str, config_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        check_name(name, "the theme setting")?;
        let mut chain = Vec::new();
        let specs = resolve(name, config_dir, None, &mut chain)?;
        let mut styles = specs.map(Spec::style);
        keep_awaiting_apart(&mut styles);
        Ok(Theme {
            name: name.to_owned(),
            styles,
            colors: true,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The style of `role`.
    pub fn style(&self, role: Role) -> Style {
        self.styles[role as usize]
    }

    /// Whether colours are on (false after [`Theme::no_color`]).
    pub fn has_colors(&self) -> bool {
        self.colors
    }

    /// The same theme without any colour: modifiers stay; the selected row is reversed if
    /// it was not already, so it stays visible.
    pub fn no_color(mut self) -> Theme {
        for s in &mut self.styles {
            s.fg = None;
            s.bg = None;
            s.underline_color = None;
        }
        let selected = &mut self.styles[Role::Selected as usize];
        selected.add_modifier |= Modifier::REVERSED;
        selected.sub_modifier -= Modifier::REVERSED;
        // Without colours, awaiting a decision must still not look like passed.
        keep_awaiting_apart(&mut self.styles);
        self.colors = false;
        self
    }
}

/// Awaiting a person's decision never looks like passed: when a theme (or the loss of its
/// colours under `NO_COLOR`) styles `gate_awaiting_human` exactly like `gate_passed`, the
/// former is made bold and underlined.
fn keep_awaiting_apart(styles: &mut [Style; ROLES]) {
    let (awaiting, passed) = (Role::GateAwaitingHuman as usize, Role::GatePassed as usize);
    // What shows on the screen (a modifier removed is simply not shown).
    let look = |s: &Style| (s.fg, s.bg, s.add_modifier);
    if look(&styles[awaiting]) == look(&styles[passed]) {
        let a = &mut styles[awaiting];
        a.add_modifier |= Modifier::BOLD | Modifier::UNDERLINED;
        a.sub_modifier -= Modifier::BOLD | Modifier::UNDERLINED;
    }
}

impl Default for Theme {
    fn default() -> Theme {
        Theme::default_theme()
    }
}

/// Where a theme came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Builtin(&'static str, &'static str),
    User(PathBuf),
}

impl Source {
    fn label(&self) -> String {
        match self {
            Source::Builtin(name, _) => format!("built-in theme `{name}` (themes/{name}.toml)"),
            Source::User(p) => p.display().to_string(),
        }
    }
}

/// Whether `name` can name a theme: 1 to 64 ASCII letters, digits, `-` and `_` (so it is
/// one file name in the themes folder, never a path).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn check_name(name: &str, file: &str) -> Result<(), ThemeError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(ThemeError::BadName {
            file: file.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// Finds `name`: the user's file first (unless it is `skip_user`, the file asking for its
/// own name as its parent), then the built-ins.
fn find(
    name: &str,
    config_dir: Option<&Path>,
    skip_user: Option<&Path>,
) -> Result<Source, ThemeError> {
    if let Some(dir) = config_dir {
        let path = dir.join("themes").join(format!("{name}.toml"));
        if skip_user != Some(path.as_path()) {
            match std::fs::symlink_metadata(&path) {
                Ok(_) => return Ok(Source::User(path)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(ThemeError::Read {
                        file: path.display().to_string(),
                        err,
                    });
                }
            }
        }
    }
    if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
        return Ok(Source::Builtin(n, text));
    }
    let file = config_dir
        .map(|d| d.join("themes").join(format!("{name}.toml")))
        .unwrap_or_else(|| PathBuf::from(format!("themes/{name}.toml")));
    Err(ThemeError::NotFound {
        name: name.to_owned(),
        file,
    })
}

fn resolve(
    name: &str,
    config_dir: Option<&Path>,
    skip_user: Option<&Path>,
    chain: &mut Vec<Source>,
) -> Result<[Spec; ROLES], ThemeError> {
    let source = find(name, config_dir, skip_user)?;
    if chain.contains(&source) {
        let mut names: Vec<String> = chain.iter().map(Source::label).collect();
        names.push(source.label());
        return Err(ThemeError::Cycle {
            file: chain.last().map(Source::label).unwrap_or_default(),
            chain: names.join(" → "),
        });
    }
    let file = source.label();
    let text = match &source {
        Source::Builtin(_, text) => (*text).to_owned(),
        Source::User(path) => read_file(path)?,
    };
    let parsed = parse(&text, &file)?;
    chain.push(source.clone());
    // The implicit parent of every theme but the built-in default is `default`.
    let parent_name = match (&parsed.inherits, &source) {
        (Some(p), _) => Some(p.clone()),
        (None, Source::Builtin("default", _)) => None,
        (None, _) => Some(DEFAULT_THEME.to_owned()),
    };
    let parent = match parent_name.as_deref() {
        None | Some("none") => [Spec::default(); ROLES],
        Some(p) => {
            let skip = match &source {
                Source::User(path) if p == name => {
                    if !BUILTIN.iter().any(|(n, _)| *n == p) {
                        return Err(ThemeError::Cycle {
                            file: file.clone(),
                            chain: format!("{file} → {file}"),
                        });
                    }
                    Some(path.as_path())
                }
                _ => None,
            };
            resolve(p, config_dir, skip, chain)?
        }
    };
    chain.pop();
    let mut out = parent;
    for (i, spec) in parsed.specs.iter().enumerate() {
        out[i] = spec.over(parent[i]);
    }
    Ok(out)
}

fn read_file(path: &Path) -> Result<String, ThemeError> {
    let file = path.display().to_string();
    match super::config::read_capped(path) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(ThemeError::Read {
            file,
            err: std::io::Error::from(std::io::ErrorKind::NotFound),
        }),
        Err(ReadFault::Io(err)) => Err(ThemeError::Read { file, err }),
        Err(ReadFault::TooLarge) => Err(ThemeError::TooLarge { file }),
    }
}

struct Parsed {
    inherits: Option<String>,
    specs: [Spec; ROLES],
    /// Which roles the file sets (for the built-in default's completeness test).
    #[cfg_attr(not(test), allow(dead_code))]
    set: [bool; ROLES],
}

fn parse(text: &str, file: &str) -> Result<Parsed, ThemeError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ThemeError::Syntax {
            file: file.to_owned(),
            message: e.message().to_owned()
                + &e.span()
                    .map(|s| format!(" (at byte {})", s.start))
                    .unwrap_or_default(),
        })?;
    let mut parsed = Parsed {
        inherits: None,
        specs: [Spec::default(); ROLES],
        set: [false; ROLES],
    };
    let invalid = |key: String, value: &toml::Value, reason: String| ThemeError::Invalid {
        file: file.to_owned(),
        key,
        value: show_value(value),
        reason,
    };
    for (key, value) in &table {
        if key == "inherits" {
            let toml::Value::String(parent) = value else {
                return Err(invalid(
                    key.clone(),
                    value,
                    "the parent is a theme name, e.g. \"default\"".to_owned(),
                ));
            };
            if parent != "none" {
                check_name(parent, file).map_err(|_| {
                    invalid(
                        key.clone(),
                        value,
                        format!(
                            "not a theme name: a name is 1 to {MAX_NAME_CHARS} letters, digits, \
                             `-` and `_` (or `none`)"
                        ),
                    )
                })?;
            }
            parsed.inherits = Some(parent.clone());
            continue;
        }
        let Some(role) = Role::from_name(key) else {
            return Err(invalid(
                key.clone(),
                value,
                format!(
                    "unknown role `{key}`; the roles are: {}, and `inherits`",
                    Role::ALL.map(Role::name).join(", ")
                ),
            ));
        };
        let toml::Value::Table(fields) = value else {
            return Err(invalid(
                key.clone(),
                value,
                "a role is a table: { fg = \"...\", bg = \"...\", bold = true, ... }".to_owned(),
            ));
        };
        let mut spec = Spec::default();
        for (field, fv) in fields {
            let full = format!("{key}.{field}");
            match field.as_str() {
                "fg" | "bg" => {
                    let toml::Value::String(s) = fv else {
                        return Err(invalid(full, fv, "a colour is a string".to_owned()));
                    };
                    let c = parse_color(s).map_err(|reason| invalid(full.clone(), fv, reason))?;
                    if field == "fg" {
                        spec.fg = Some(c);
                    } else {
                        spec.bg = Some(c);
                    }
                }
                "bold" | "dim" | "italic" | "underline" | "reversed" => {
                    let toml::Value::Boolean(b) = fv else {
                        return Err(invalid(full, fv, "must be true or false".to_owned()));
                    };
                    let slot = match field.as_str() {
                        "bold" => &mut spec.bold,
                        "dim" => &mut spec.dim,
                        "italic" => &mut spec.italic,
                        "underline" => &mut spec.underline,
                        _ => &mut spec.reversed,
                    };
                    *slot = Some(*b);
                }
                _ => {
                    return Err(invalid(
                        full,
                        fv,
                        format!(
                            "unknown field `{field}`; a role has fg, bg, bold, dim, italic, \
                             underline, reversed"
                        ),
                    ));
                }
            }
        }
        parsed.specs[role as usize] = spec;
        parsed.set[role as usize] = true;
    }
    Ok(parsed)
}

/// The 16 ANSI colour names, in SGR order (30–37, then 90–97).
pub const ANSI_NAMES: [(&str, Color); 16] = [
    ("black", Color::Black),
    ("red", Color::Red),
    ("green", Color::Green),
    ("yellow", Color::Yellow),
    ("blue", Color::Blue),
    ("magenta", Color::Magenta),
    ("cyan", Color::Cyan),
    ("white", Color::Gray),
    ("bright-black", Color::DarkGray),
    ("bright-red", Color::LightRed),
    ("bright-green", Color::LightGreen),
    ("bright-yellow", Color::LightYellow),
    ("bright-blue", Color::LightBlue),
    ("bright-magenta", Color::LightMagenta),
    ("bright-cyan", Color::LightCyan),
    ("bright-white", Color::White),
];

/// Parses a colour as written in theme files.
pub fn parse_color(text: &str) -> Result<Color, String> {
    if text == "reset" {
        return Ok(Color::Reset);
    }
    if let Some((_, c)) = ANSI_NAMES.iter().find(|(n, _)| *n == text) {
        return Ok(*c);
    }
    if let Some(hex) = text.strip_prefix('#') {
        if hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            let v = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
            return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
        }
        return Err("a truecolor is #rrggbb, six hex digits".to_owned());
    }
    if let Some(n) = text
        .strip_prefix("indexed(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return n
            .parse::<u8>()
            .map(Color::Indexed)
            .map_err(|_| "indexed(N) takes N from 0 to 255".to_owned());
    }
    Err(format!(
        "unknown colour; use one of {}, `#rrggbb`, `indexed(N)` or `reset`",
        ANSI_NAMES.map(|n| n.0).join(", ")
    ))
}

#[cfg(test)]
mod tests;
