//! The cockpit's keymap: which key runs which [`Action`], context by context.
//!
//! The defaults live in `assets/keymap.toml` (built in). The operator's
//! `<config>/keymap.toml` overrides only the bindings it sets; `"key" = "none"` removes one.
//! A binding is `"key" = "action-name"` or `"key" = { action = "...", description = "..." }`
//! (the description defaults to [`Action::describe`]). The `[attach]` context holds only
//! `prefix`, the key that returns from an interactive attach to the cockpit.
//!
//! Keys are written `ctrl-x`, `alt-x`, `shift-tab`, `f1`…`f12`, `enter`, `esc`, `tab`,
//! `backspace`, `up`/`down`/`left`/`right`, `pgup`/`pgdn`, `home`/`end`, `insert`,
//! `delete`, `space`, or a single character (an upper-case letter is the shifted key). Keys
//! that terminals cannot tell apart from another key are refused with the reason (`ctrl-i` is
//! tab, `ctrl-m` is enter, `ctrl-[` is esc, `ctrl-?` is backspace, `ctrl-A` is `ctrl-a`).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::action::Action;
use super::config::{MAX_FILE_BYTES, ReadFault, show_value};
use super::views::Pane;

/// The built-in keymap, `assets/keymap.toml`.
pub const DEFAULT_KEYMAP: &str = include_str!("../../assets/keymap.toml");

/// Where the built-in keymap is named in messages.
const BUILTIN_NAME: &str = "built-in keymap (assets/keymap.toml)";

/// A set of bindings that applies in one situation. The cockpit passes the focused ones,
/// most specific first, to [`Keymap::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Context {
    /// Everywhere in the cockpit (not while attached, not in dialogs).
    Global,
    /// A pane of a view has the focus: its context is named and titled by the views'
    /// registry ([`Pane::context_name`], [`Pane::context_title`]).
    Pane(Pane),
    /// Attached: every key goes to the session except the prefix.
    Attach,
    /// Any dialog.
    Modal,
    /// The command palette (then [`Context::Modal`]).
    Palette,
    /// The filter bar of the sessions list.
    Filter,
}

/// The contexts after the panes'.
const AFTER_PANES: [Context; 4] = [
    Context::Attach,
    Context::Modal,
    Context::Palette,
    Context::Filter,
];

impl Context {
    /// Every context: `[global]`, the panes' in [`Pane::ALL`]'s order, then the others.
    pub const ALL: [Context; 1 + Pane::ALL.len() + AFTER_PANES.len()] = {
        let mut all = [Context::Global; 1 + Pane::ALL.len() + AFTER_PANES.len()];
        let mut i = 0;
        while i < Pane::ALL.len() {
            all[1 + i] = Context::Pane(Pane::ALL[i]);
            i += 1;
        }
        let mut j = 0;
        while j < AFTER_PANES.len() {
            all[1 + Pane::ALL.len() + j] = AFTER_PANES[j];
            j += 1;
        }
        all
    };

    /// The table name in keymap files.
    pub fn name(self) -> &'static str {
        match self {
            Context::Global => "global",
            Context::Pane(pane) => pane.context_name(),
            Context::Attach => "attach",
            Context::Modal => "modal",
            Context::Palette => "palette",
            Context::Filter => "filter",
        }
    }

    pub fn from_name(name: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.name() == name)
    }

    /// A heading for help screens.
    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Pane(pane) => pane.context_title(),
            Context::Attach => "Attached",
            Context::Modal => "Dialogs",
            Context::Palette => "Command palette",
            Context::Filter => "Filter",
        }
    }

    /// Its place in [`Context::ALL`].
    fn index(self) -> usize {
        Context::ALL
            .iter()
            .position(|c| *c == self)
            .expect("every context is in Context::ALL")
    }
}

/// Why a keymap could not be loaded. Every message names the file, and where it applies the
/// context, the key and the value.
#[derive(Debug, thiserror::Error)]
pub enum KeymapError {
    #[error("cannot read the keymap file {file}: {err}. Remedy: fix its permissions or remove it")]
    Read { file: String, err: std::io::Error },
    #[error("{file}: larger than {MAX_FILE_BYTES} bytes; a keymap is a few kilobytes")]
    TooLarge { file: String },
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    #[error(
        "{file}: unknown context [{context}]; the contexts are: {}",
        Context::ALL.map(Context::name).join(", ")
    )]
    UnknownContext { file: String, context: String },
    #[error("{file}: [{context}] must be a table of bindings, not {value}")]
    NotATable {
        file: String,
        context: String,
        value: String,
    },
    #[error("{file}: [{context}] {key:?}: not a key: {reason}")]
    BadKey {
        file: String,
        context: String,
        key: String,
        reason: String,
    },
    #[error(
        "{file}: [{context}] {key:?} = {value}: unknown action `{action}`; the actions are: {}, \
         and `none` (removes the binding)",
        Action::ALL.map(Action::name).join(", ")
    )]
    UnknownAction {
        file: String,
        context: String,
        key: String,
        value: String,
        action: String,
    },
    #[error("{file}: [{context}] {key:?} = {value}: {reason}")]
    BadValue {
        file: String,
        context: String,
        key: String,
        value: String,
        reason: String,
    },
    #[error("{file}: [{context}] {first:?} and {second:?} are the same key ({label}); keep one")]
    Conflict {
        file: String,
        context: String,
        first: String,
        second: String,
        label: String,
    },
}

/// One line of help: the keys bound to an action in one context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The key labels joined for display, e.g. `k, up`.
    pub keys: String,
    /// The key labels one by one.
    pub labels: Vec<String>,
    pub action: Action,
    pub description: String,
}

/// A key after normalisation: what the terminal can actually tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    code: KeyCode,
    mods: KeyModifiers,
}

impl Key {
    fn event(self) -> KeyEvent {
        KeyEvent::new(self.code, self.mods)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    key: Key,
    action: Action,
    description: String,
}

/// The loaded keymap: built-in defaults with the operator's file laid over them.
#[derive(Debug, Clone)]
pub struct Keymap {
    contexts: [Vec<Entry>; Context::ALL.len()],
    prefix: Key,
    /// [`Keymap::key_for`]'s answers: every frame's hints ask the same few, and each answer
    /// groups and sorts whole contexts.
    hints: HintCache,
}

/// What [`Keymap::key_for`] answered, by (contexts, action). A keymap does not change once
/// loaded; [`Keymap::apply`] empties it anyway, and a clone starts empty.
#[derive(Default)]
struct HintCache(std::sync::Mutex<HashMap<HintKey, Option<String>>>);

/// The contexts asked in, and the action.
type HintKey = (Vec<Context>, Action);

impl Clone for HintCache {
    fn clone(&self) -> HintCache {
        HintCache::default()
    }
}

impl std::fmt::Debug for HintCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HintCache(..)")
    }
}

impl HintCache {
    fn get_or(
        &self,
        contexts: &[Context],
        action: Action,
        f: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get(&(contexts.to_vec(), action)) {
            return v.clone();
        }
        let v = f();
        map.insert((contexts.to_vec(), action), v.clone());
        v
    }

    fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// One parsed file, before layering.
#[derive(Debug, Default)]
struct Layer {
    /// Per context: (key, Some(entry) to bind or None to unbind).
    contexts: [Vec<(Key, Option<Entry>)>; Context::ALL.len()],
    prefix: Option<Key>,
}

impl Keymap {
    /// The built-in keymap.
    pub fn defaults() -> Keymap {
        // The built-in file is checked by the tests; it cannot fail at run time.
        let layer = parse_layer(DEFAULT_KEYMAP, BUILTIN_NAME)
            .unwrap_or_else(|e| panic!("the built-in keymap is invalid: {e}"));
        let mut map = Keymap {
            contexts: Default::default(),
            prefix: Key {
                code: KeyCode::Char('\\'),
                mods: KeyModifiers::CONTROL,
            },
            hints: HintCache::default(),
        };
        map.apply(layer);
        map
    }

    /// The defaults with `user_file` laid over them. A file that does not exist changes
    /// nothing; a file that cannot be read or holds a mistake is an error naming it.
    pub fn load(user_file: Option<&Path>) -> Result<Keymap, KeymapError> {
        let mut map = Keymap::defaults();
        if let Some(path) = user_file
            && let Some(text) = read_user_file(path)?
        {
            map.apply(parse_layer(&text, &path.display().to_string())?);
        }
        Ok(map)
    }

    /// The defaults with a keymap given as text laid over them (`name` is used in errors).
    pub fn from_str_over_defaults(text: &str, name: &str) -> Result<Keymap, KeymapError> {
        let mut map = Keymap::defaults();
        map.apply(parse_layer(text, name)?);
        Ok(map)
    }

    fn apply(&mut self, layer: Layer) {
        self.hints.clear();
        for (index, changes) in layer.contexts.into_iter().enumerate() {
            let entries = &mut self.contexts[index];
            for (key, change) in changes {
                let at = entries.iter().position(|e| e.key == key);
                match (at, change) {
                    (Some(i), Some(entry)) => entries[i] = entry,
                    (None, Some(entry)) => entries.push(entry),
                    (Some(i), None) => {
                        entries.remove(i);
                    }
                    (None, None) => {}
                }
            }
        }
        if let Some(prefix) = layer.prefix {
            self.prefix = prefix;
        }
    }

    /// The action of `key` in the first of `contexts` that binds it. Key releases resolve to
    /// nothing. [`Context::Attach`] resolves only the prefix (to [`Action::Escape`]).
    pub fn resolve(&self, contexts: &[Context], key: &KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let key = normalize(key.code, key.modifiers);
        contexts.iter().find_map(|&ctx| {
            if ctx == Context::Attach {
                return (key == self.prefix).then_some(Action::Escape);
            }
            self.contexts[ctx.index()]
                .iter()
                .find(|e| e.key == key)
                .map(|e| e.action)
        })
    }

    /// The key that returns from an interactive attach to the cockpit.
    pub fn prefix(&self) -> KeyEvent {
        self.prefix.event()
    }

    /// Whether `key` is the attach prefix.
    pub fn is_prefix(&self, key: &KeyEvent) -> bool {
        key.kind != KeyEventKind::Release && normalize(key.code, key.modifiers) == self.prefix
    }

    /// The bindings of one context, one per action and description, in the order of
    /// [`Action::ALL`].
    pub fn bindings(&self, context: Context) -> Vec<Binding> {
        self.group(context, |_| true)
    }

    /// The bindings in effect for `contexts` (most specific first): per context, the
    /// bindings whose keys an earlier context does not take. Contexts left with nothing are
    /// omitted.
    pub fn effective_bindings(&self, contexts: &[Context]) -> Vec<(Context, Vec<Binding>)> {
        let mut taken: Vec<Key> = Vec::new();
        let mut out = Vec::new();
        for &ctx in contexts {
            let group = self.group(ctx, |k| !taken.contains(&k));
            if ctx == Context::Attach {
                taken.push(self.prefix);
            } else {
                taken.extend(self.contexts[ctx.index()].iter().map(|e| e.key));
            }
            if !group.is_empty() {
                out.push((ctx, group));
            }
        }
        out
    }

    /// The label of the first key that runs `action` in `contexts`, for hints like
    /// "press ? for help". Keys taken by an earlier context are skipped.
    pub fn key_for(&self, contexts: &[Context], action: Action) -> Option<String> {
        self.hints.get_or(contexts, action, || {
            self.effective_bindings(contexts)
                .into_iter()
                .flat_map(|(_, b)| b)
                .find(|b| b.action == action)
                .and_then(|b| b.labels.into_iter().next())
        })
    }

    fn group(&self, context: Context, keep: impl Fn(Key) -> bool) -> Vec<Binding> {
        if context == Context::Attach {
            if !keep(self.prefix) {
                return Vec::new();
            }
            let label = key_label(&self.prefix.event());
            return vec![Binding {
                keys: label.clone(),
                labels: vec![label],
                action: Action::Escape,
                description: "return to the cockpit (the session keeps running)".to_owned(),
            }];
        }
        let mut out: Vec<Binding> = Vec::new();
        for e in self.contexts[context.index()]
            .iter()
            .filter(|e| keep(e.key))
        {
            let label = key_label(&e.key.event());
            match out
                .iter_mut()
                .find(|b| b.action == e.action && b.description == e.description)
            {
                Some(b) => b.labels.push(label),
                None => out.push(Binding {
                    keys: String::new(),
                    labels: vec![label],
                    action: e.action,
                    description: e.description.clone(),
                }),
            }
        }
        for b in &mut out {
            // Plain characters first, then named keys, then keys with modifiers.
            b.labels.sort_by_key(|l| {
                let modified = ["ctrl-", "alt-", "super-", "hyper-", "meta-"]
                    .iter()
                    .any(|p| l.starts_with(p));
                (modified, l.chars().count() > 1, l.clone())
            });
            b.keys = b.labels.join(", ");
        }
        let rank = |a: Action| {
            Action::ALL
                .iter()
                .position(|x| *x == a)
                .unwrap_or(usize::MAX)
        };
        out.sort_by_key(|b| rank(b.action));
        out
    }
}

fn read_user_file(path: &Path) -> Result<Option<String>, KeymapError> {
    let file = path.display().to_string();
    super::config::read_capped(path).map_err(|fault| match fault {
        ReadFault::Io(err) => KeymapError::Read { file, err },
        ReadFault::TooLarge => KeymapError::TooLarge { file },
    })
}

fn parse_layer(text: &str, file: &str) -> Result<Layer, KeymapError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| KeymapError::Syntax {
            file: file.to_owned(),
            message: e.message().to_owned()
                + &e.span()
                    .map(|s| format!(" (at byte {})", s.start))
                    .unwrap_or_default(),
        })?;
    let mut layer = Layer::default();
    for (ctx_name, value) in &table {
        let Some(ctx) = Context::from_name(ctx_name) else {
            return Err(KeymapError::UnknownContext {
                file: file.to_owned(),
                context: ctx_name.clone(),
            });
        };
        let toml::Value::Table(bindings) = value else {
            return Err(KeymapError::NotATable {
                file: file.to_owned(),
                context: ctx_name.clone(),
                value: show_value(value),
            });
        };
        if ctx == Context::Attach {
            layer.prefix = parse_attach(bindings, file)?;
            continue;
        }
        let mut seen: HashMap<Key, String> = HashMap::new();
        for (key_text, v) in bindings {
            let err_value = |reason: String| KeymapError::BadValue {
                file: file.to_owned(),
                context: ctx_name.clone(),
                key: key_text.clone(),
                value: show_value(v),
                reason,
            };
            let key = parse_key_inner(key_text).map_err(|reason| KeymapError::BadKey {
                file: file.to_owned(),
                context: ctx_name.clone(),
                key: key_text.clone(),
                reason,
            })?;
            if let Some(first) = seen.insert(key, key_text.clone()) {
                return Err(KeymapError::Conflict {
                    file: file.to_owned(),
                    context: ctx_name.clone(),
                    first,
                    second: key_text.clone(),
                    label: key_label(&key.event()),
                });
            }
            let (action_name, description) = match v {
                toml::Value::String(s) => (s.as_str(), None),
                toml::Value::Table(t) => {
                    let mut action = None;
                    let mut description = None;
                    for (field, fv) in t {
                        match (field.as_str(), fv) {
                            ("action", toml::Value::String(s)) => action = Some(s.as_str()),
                            ("description", toml::Value::String(s)) => {
                                if s.trim().is_empty() {
                                    return Err(err_value(
                                        "the description is empty; leave it out to use the \
                                         action's own"
                                            .to_owned(),
                                    ));
                                }
                                description = Some(s.clone());
                            }
                            ("action" | "description", _) => {
                                return Err(err_value(format!("`{field}` must be a string")));
                            }
                            _ => {
                                return Err(err_value(format!(
                                    "unknown field `{field}`; a binding has `action` and \
                                     optionally `description`"
                                )));
                            }
                        }
                    }
                    let Some(action) = action else {
                        return Err(err_value("the binding has no `action`".to_owned()));
                    };
                    (action, description)
                }
                _ => {
                    return Err(err_value(
                        "a binding is an action name, `none`, or { action = \"...\", \
                         description = \"...\" }"
                            .to_owned(),
                    ));
                }
            };
            let change = if action_name == "none" {
                None
            } else {
                let Some(action) = Action::from_name(action_name) else {
                    return Err(KeymapError::UnknownAction {
                        file: file.to_owned(),
                        context: ctx_name.clone(),
                        key: key_text.clone(),
                        value: show_value(v),
                        action: action_name.to_owned(),
                    });
                };
                Some(Entry {
                    key,
                    action,
                    description: description.unwrap_or_else(|| action.describe().to_owned()),
                })
            };
            layer.contexts[ctx.index()].push((key, change));
        }
    }
    Ok(layer)
}

fn parse_attach(bindings: &toml::Table, file: &str) -> Result<Option<Key>, KeymapError> {
    let mut prefix = None;
    for (name, v) in bindings {
        let bad = |reason: &str| KeymapError::BadValue {
            file: file.to_owned(),
            context: "attach".to_owned(),
            key: name.clone(),
            value: show_value(v),
            reason: reason.to_owned(),
        };
        if name != "prefix" {
            return Err(bad(
                "[attach] holds only `prefix`: while attached every other key goes to the session",
            ));
        }
        let toml::Value::String(s) = v else {
            return Err(bad(
                "the prefix is a key, written as a string, e.g. \"ctrl-\\\\\"",
            ));
        };
        if s == "none" {
            return Err(bad(
                "the prefix cannot be removed: it is the only way back from an attach",
            ));
        }
        let key = parse_key_inner(s).map_err(|reason| bad(&reason))?;
        if key.mods.is_empty() && matches!(key.code, KeyCode::Char(_)) {
            return Err(bad(
                "a plain character cannot be the prefix: it could never be typed into the \
                 session; use a ctrl- or alt- key",
            ));
        }
        prefix = Some(key);
    }
    Ok(prefix)
}

/// Why a key string is not a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyParseError(pub String);

/// Parses a key as written in keymap files (`ctrl-x`, `shift-tab`, `f5`, `R`...). The event
/// is normalised as [`Keymap::resolve`] normalises what the terminal sends.
pub fn parse_key(text: &str) -> Result<KeyEvent, KeyParseError> {
    parse_key_inner(text).map(Key::event).map_err(KeyParseError)
}

fn parse_key_inner(text: &str) -> Result<Key, String> {
    if text.is_empty() {
        return Err("empty".to_owned());
    }
    let mut mods = KeyModifiers::NONE;
    let mut rest = text;
    loop {
        let lower = rest.to_ascii_lowercase();
        let found = [
            ("ctrl-", KeyModifiers::CONTROL),
            ("alt-", KeyModifiers::ALT),
            ("shift-", KeyModifiers::SHIFT),
        ]
        .into_iter()
        .find(|(p, _)| lower.starts_with(p) && rest.len() > p.len());
        let Some((p, m)) = found else { break };
        if mods.contains(m) {
            return Err(format!("`{p}` appears twice"));
        }
        mods |= m;
        rest = &rest[p.len()..];
    }
    let mut chars = rest.chars();
    let code = match (chars.next(), chars.next()) {
        (Some(c), None) => {
            if c.is_control() {
                return Err("a control character; write the key by name (e.g. `tab`)".to_owned());
            }
            KeyCode::Char(c)
        }
        _ => named_key(&rest.to_ascii_lowercase()).ok_or_else(|| {
            format!(
                "unknown key `{rest}`; write a single character, or one of enter, esc, tab, \
                 backspace, up, down, left, right, pgup, pgdn, home, end, insert, delete, \
                 space, f1…f12, with any of the prefixes ctrl-, alt-, shift-"
            )
        })?,
    };
    let mut code = code;
    if let KeyCode::Char(c) = code {
        if mods.contains(KeyModifiers::SHIFT) {
            if c.is_alphabetic() && c.to_uppercase().count() == 1 {
                code = KeyCode::Char(c.to_uppercase().next().unwrap_or(c));
                mods -= KeyModifiers::SHIFT;
            } else {
                return Err(format!(
                    "`shift-` goes with letters and named keys; write the shifted character \
                     itself instead of shift-{c}"
                ));
            }
        }
        // The character after shift- was applied.
        let c = match code {
            KeyCode::Char(shifted) => shifted,
            _ => c,
        };
        if mods.contains(KeyModifiers::CONTROL) {
            if c.is_ascii_uppercase() {
                let lower = c.to_ascii_lowercase();
                return Err(format!(
                    "terminals send ctrl-{c} (ctrl-shift-{lower}) as ctrl-{lower}; bind \
                     ctrl-{lower}"
                ));
            }
            match c {
                'i' => return Err("ctrl-i is the same byte as tab; bind `tab`".to_owned()),
                'm' => return Err("ctrl-m is the same byte as enter; bind `enter`".to_owned()),
                '[' | '3' => {
                    return Err(format!("ctrl-{c} is the same byte as esc; bind `esc`"));
                }
                '?' | '8' => {
                    return Err(format!(
                        "ctrl-{c} is the same byte as backspace; bind `backspace`"
                    ));
                }
                'a'..='z' | ' ' | '@' | '2' | '\\' | ']' | '^' | '_' | '4'..='7' => {}
                _ => {
                    return Err(format!(
                        "terminals send no distinct code for ctrl-{c}; use ctrl- with a letter, \
                         or an alt- key"
                    ));
                }
            }
        }
    }
    Ok(normalize(code, mods))
}

fn named_key(name: &str) -> Option<KeyCode> {
    Some(match name {
        "enter" | "return" => KeyCode::Enter,
        "esc" | "escape" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "backspace" => KeyCode::Backspace,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "pgup" | "pageup" => KeyCode::PageUp,
        "pgdn" | "pagedown" => KeyCode::PageDown,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "insert" | "ins" => KeyCode::Insert,
        "delete" | "del" => KeyCode::Delete,
        "space" => KeyCode::Char(' '),
        f if f.starts_with('f') => {
            let n: u8 = f[1..].parse().ok()?;
            if !(1..=12).contains(&n) || f[1..].starts_with('0') {
                return None;
            }
            KeyCode::F(n)
        }
        _ => return None,
    })
}

/// What a terminal can tell apart: shift is part of a character, ctrl with a letter has no
/// case, ctrl-4…ctrl-7 are the bytes of ctrl-\ ctrl-] ctrl-^ ctrl-_ (crossterm reports them
/// as digits), ctrl-@ and ctrl-2 are ctrl-space, shift-tab is back-tab.
fn normalize(code: KeyCode, mods: KeyModifiers) -> Key {
    let mut mods = mods;
    let code = match code {
        KeyCode::Char(c) => {
            mods -= KeyModifiers::SHIFT;
            if mods.contains(KeyModifiers::CONTROL) {
                KeyCode::Char(match c {
                    '4' => '\\',
                    '5' => ']',
                    '6' => '^',
                    '7' => '_',
                    '@' | '2' => ' ',
                    c if c.is_ascii_uppercase() => c.to_ascii_lowercase(),
                    c => c,
                })
            } else {
                KeyCode::Char(c)
            }
        }
        KeyCode::BackTab => {
            mods -= KeyModifiers::SHIFT;
            KeyCode::BackTab
        }
        KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => {
            mods -= KeyModifiers::SHIFT;
            KeyCode::BackTab
        }
        other => other,
    };
    Key { code, mods }
}

/// A key as written in keymap files, for display: `ctrl-x`, `shift-tab`, `R`, `pgup`.
pub fn key_label(key: &KeyEvent) -> String {
    let k = normalize(key.code, key.modifiers);
    let mut out = String::new();
    for (m, p) in [
        (KeyModifiers::CONTROL, "ctrl-"),
        (KeyModifiers::ALT, "alt-"),
        (KeyModifiers::SUPER, "super-"),
        (KeyModifiers::HYPER, "hyper-"),
        (KeyModifiers::META, "meta-"),
    ] {
        if k.mods.contains(m) {
            out.push_str(p);
        }
    }
    if k.mods.contains(KeyModifiers::SHIFT) || k.code == KeyCode::BackTab {
        out.push_str("shift-");
    }
    match k.code {
        KeyCode::Char(' ') => out.push_str("space"),
        KeyCode::Char(c) => out.push(c),
        KeyCode::F(n) => out.push_str(&format!("f{n}")),
        other => out.push_str(match other {
            KeyCode::Enter => "enter",
            KeyCode::Esc => "esc",
            KeyCode::Tab | KeyCode::BackTab => "tab",
            KeyCode::Backspace => "backspace",
            KeyCode::Up => "up",
            KeyCode::Down => "down",
            KeyCode::Left => "left",
            KeyCode::Right => "right",
            KeyCode::PageUp => "pgup",
            KeyCode::PageDown => "pgdn",
            KeyCode::Home => "home",
            KeyCode::End => "end",
            KeyCode::Insert => "insert",
            KeyCode::Delete => "delete",
            KeyCode::Null => "null",
            KeyCode::CapsLock => "capslock",
            KeyCode::ScrollLock => "scrolllock",
            KeyCode::NumLock => "numlock",
            KeyCode::PrintScreen => "printscreen",
            KeyCode::Pause => "pause",
            KeyCode::Menu => "menu",
            KeyCode::KeypadBegin => "begin",
            KeyCode::Media(_) => "media",
            KeyCode::Modifier(_) => "modifier",
            KeyCode::Char(_) | KeyCode::F(_) => "",
        }),
    }
    out
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The default keymap as a Markdown table (the "Keys" section of `docs/cockpit.md`).
pub fn markdown_table(map: &Keymap) -> String {
    let mut out = String::from("| Context | Keys | Action | What it does |\n|---|---|---|---|\n");
    for ctx in Context::ALL {
        for b in map.bindings(ctx) {
            let keys: Vec<String> = b
                .labels
                .iter()
                .map(|l| format!("`{}`", l.replace('|', "\\|")))
                .collect();
            let action = if ctx == Context::Attach {
                "(prefix)".to_owned()
            } else {
                format!("`{}`", b.action.name())
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                ctx.name(),
                keys.join(" "),
                action,
                b.description.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
