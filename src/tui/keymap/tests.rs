use super::*;

fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, mods)
}

fn ch(c: char) -> KeyEvent {
    // As crossterm reports a typed character: upper case comes with SHIFT.
    let mods = if c.is_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    key(KeyCode::Char(c), mods)
}

fn ctrl(c: char) -> KeyEvent {
    key(KeyCode::Char(c), KeyModifiers::CONTROL)
}

const G: &[Context] = &[Context::Global];

#[test]
fn the_builtin_keymap_parses() {
    parse_layer(DEFAULT_KEYMAP, BUILTIN_NAME).expect("assets/keymap.toml is valid");
}

#[test]
fn defaults_hold_the_required_keys() {
    let m = Keymap::defaults();
    let s = &[Context::Pane(Pane::Sessions), Context::Global][..];
    let cases: &[(KeyEvent, Action)] = &[
        (ch('q'), Action::Quit),
        (ch('?'), Action::Help),
        (ch(':'), Action::Palette),
        (ch('/'), Action::Filter),
        (key(KeyCode::Enter, KeyModifiers::NONE), Action::Zoom),
        (ch('a'), Action::Attach),
        (key(KeyCode::Tab, KeyModifiers::NONE), Action::FocusNext),
        (
            key(KeyCode::BackTab, KeyModifiers::SHIFT),
            Action::FocusPrev,
        ),
        (ch('j'), Action::Down),
        (ch('k'), Action::Up),
        (key(KeyCode::Down, KeyModifiers::NONE), Action::Down),
        (key(KeyCode::Up, KeyModifiers::NONE), Action::Up),
        (ch('n'), Action::NewSession),
        (ch('i'), Action::SendInput),
        (ch('I'), Action::Interrupt),
        (ch('s'), Action::Stop),
        (ch('r'), Action::Resume),
        (ch('R'), Action::Rename),
        (ch('p'), Action::Pin),
        (ch('z'), Action::Snooze),
        (ch('d'), Action::Done),
        (ch('A'), Action::Archive),
        (ch('C'), Action::Cleanup),
        (ch('D'), Action::Delete),
        (ch('.'), Action::ToggleArchived),
        (ch(','), Action::ToggleSnoozed),
        (key(KeyCode::Esc, KeyModifiers::NONE), Action::Escape),
    ];
    for (k, a) in cases {
        assert_eq!(m.resolve(s, k), Some(*a), "{}", key_label(k));
    }
    let live = &[Context::Pane(Pane::Live), Context::Global][..];
    for (k, a) in [
        (KeyCode::PageUp, Action::PageUp),
        (KeyCode::PageDown, Action::PageDown),
        (KeyCode::Home, Action::ScrollTop),
        (KeyCode::End, Action::ScrollBottom),
        (KeyCode::Up, Action::ScrollUp),
    ] {
        assert_eq!(m.resolve(live, &key(k, KeyModifiers::NONE)), Some(a));
    }
    // ctrl-c quits the cockpit (sessions keep running) and never interrupts a session.
    assert_eq!(m.resolve(s, &ctrl('c')), Some(Action::Quit));
    assert_eq!(
        m.resolve(&[Context::Modal], &ctrl('c')),
        Some(Action::Escape)
    );
    assert_eq!(m.prefix(), key(KeyCode::Char('\\'), KeyModifiers::CONTROL));
}

#[test]
fn first_context_wins_and_unbound_keys_fall_through() {
    let m = Keymap::defaults();
    let k = ch('k');
    assert_eq!(
        m.resolve(&[Context::Pane(Pane::Sessions), Context::Global], &k),
        Some(Action::Up)
    );
    assert_eq!(
        m.resolve(&[Context::Pane(Pane::Live), Context::Global], &k),
        Some(Action::ScrollUp)
    );
    assert_eq!(m.resolve(G, &k), None);
    // q is bound in global only: from sessions it falls through.
    assert_eq!(
        m.resolve(&[Context::Pane(Pane::Sessions), Context::Global], &ch('q')),
        Some(Action::Quit)
    );
    // A key release resolves to nothing.
    let mut release = ch('q');
    release.kind = KeyEventKind::Release;
    assert_eq!(m.resolve(G, &release), None);
}

#[test]
fn terminal_quirks_are_normalised() {
    let m = Keymap::defaults();
    // crossterm reports the byte 0x1c (ctrl-\) as ctrl-4.
    let legacy = ctrl('4');
    assert!(m.is_prefix(&legacy));
    assert_eq!(m.resolve(&[Context::Attach], &legacy), Some(Action::Escape));
    assert_eq!(key_label(&legacy), "ctrl-\\");
    // shift-tab arrives as BackTab with or without SHIFT, or as Tab with SHIFT.
    for k in [
        key(KeyCode::BackTab, KeyModifiers::NONE),
        key(KeyCode::BackTab, KeyModifiers::SHIFT),
        key(KeyCode::Tab, KeyModifiers::SHIFT),
    ] {
        assert_eq!(m.resolve(G, &k), Some(Action::FocusPrev));
        assert_eq!(key_label(&k), "shift-tab");
    }
    // Upper case with or without the SHIFT flag.
    assert_eq!(
        m.resolve(G, &key(KeyCode::Char('R'), KeyModifiers::NONE)),
        Some(Action::Rename)
    );
    assert_eq!(m.resolve(G, &ch('R')), Some(Action::Rename));
    // '?' with SHIFT (kitty-style reporting) is still '?'.
    assert_eq!(
        m.resolve(G, &key(KeyCode::Char('?'), KeyModifiers::SHIFT)),
        Some(Action::Help)
    );
    // ctrl with an upper-case letter is the same byte as with the lower-case one.
    assert_eq!(
        m.resolve(
            G,
            &key(
                KeyCode::Char('C'),
                KeyModifiers::CONTROL | KeyModifiers::SHIFT
            )
        ),
        Some(Action::Quit)
    );
}

#[test]
fn key_syntax() {
    let ok: &[(&str, KeyEvent, &str)] = &[
        ("ctrl-x", ctrl('x'), "ctrl-x"),
        ("CTRL-x", ctrl('x'), "ctrl-x"),
        ("alt-x", key(KeyCode::Char('x'), KeyModifiers::ALT), "alt-x"),
        ("alt-X", key(KeyCode::Char('X'), KeyModifiers::ALT), "alt-X"),
        (
            "shift-tab",
            key(KeyCode::BackTab, KeyModifiers::NONE),
            "shift-tab",
        ),
        ("f1", key(KeyCode::F(1), KeyModifiers::NONE), "f1"),
        ("F12", key(KeyCode::F(12), KeyModifiers::NONE), "f12"),
        (
            "ctrl-f5",
            key(KeyCode::F(5), KeyModifiers::CONTROL),
            "ctrl-f5",
        ),
        ("enter", key(KeyCode::Enter, KeyModifiers::NONE), "enter"),
        ("esc", key(KeyCode::Esc, KeyModifiers::NONE), "esc"),
        ("tab", key(KeyCode::Tab, KeyModifiers::NONE), "tab"),
        (
            "backspace",
            key(KeyCode::Backspace, KeyModifiers::NONE),
            "backspace",
        ),
        ("up", key(KeyCode::Up, KeyModifiers::NONE), "up"),
        (
            "shift-down",
            key(KeyCode::Down, KeyModifiers::SHIFT),
            "shift-down",
        ),
        (
            "ctrl-left",
            key(KeyCode::Left, KeyModifiers::CONTROL),
            "ctrl-left",
        ),
        ("right", key(KeyCode::Right, KeyModifiers::NONE), "right"),
        ("pgup", key(KeyCode::PageUp, KeyModifiers::NONE), "pgup"),
        ("pgdn", key(KeyCode::PageDown, KeyModifiers::NONE), "pgdn"),
        ("home", key(KeyCode::Home, KeyModifiers::NONE), "home"),
        ("end", key(KeyCode::End, KeyModifiers::NONE), "end"),
        ("delete", key(KeyCode::Delete, KeyModifiers::NONE), "delete"),
        (
            "space",
            key(KeyCode::Char(' '), KeyModifiers::NONE),
            "space",
        ),
        ("ctrl-space", ctrl(' '), "ctrl-space"),
        ("R", key(KeyCode::Char('R'), KeyModifiers::NONE), "R"),
        ("shift-r", key(KeyCode::Char('R'), KeyModifiers::NONE), "R"),
        ("-", key(KeyCode::Char('-'), KeyModifiers::NONE), "-"),
        ("alt--", key(KeyCode::Char('-'), KeyModifiers::ALT), "alt--"),
        ("é", key(KeyCode::Char('é'), KeyModifiers::NONE), "é"),
        ("ctrl-\\", ctrl('\\'), "ctrl-\\"),
        ("ctrl-4", ctrl('\\'), "ctrl-\\"),
        (
            "ctrl-alt-d",
            key(
                KeyCode::Char('d'),
                KeyModifiers::CONTROL | KeyModifiers::ALT,
            ),
            "ctrl-alt-d",
        ),
    ];
    for (text, want, label) in ok {
        let got = parse_key(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(&got, want, "{text}");
        assert_eq!(key_label(&got), *label, "{text}");
        // A label parses back to the same key.
        assert_eq!(parse_key(label).as_ref(), Ok(want), "{label}");
    }
    let bad: &[(&str, &str)] = &[
        ("", "empty"),
        ("ctrl-", "unknown key"),
        ("f13", "unknown key"),
        ("f0", "unknown key"),
        ("hyper-x", "unknown key"),
        ("ctrl-ctrl-x", "twice"),
        ("shift-1", "shifted character"),
        ("ctrl-i", "tab"),
        ("ctrl-m", "enter"),
        ("ctrl-[", "esc"),
        ("ctrl-?", "backspace"),
        ("ctrl-A", "bind ctrl-a"),
        ("ctrl-shift-a", "bind ctrl-a"),
        ("ctrl-.", "no distinct code"),
        ("\t", "control character"),
    ];
    for (text, needle) in bad {
        let err = parse_key(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text:?}: {err}");
    }
}

#[test]
fn user_file_overrides_only_what_it_sets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keymap.toml");
    std::fs::write(
        &path,
        r#"
[global]
"x" = "quit"
"q" = "none"
"s" = { action = "stop", description = "halt it" }

[sessions]
"k" = "none"

[attach]
prefix = "ctrl-a"
"#,
    )
    .unwrap();
    let m = Keymap::load(Some(&path)).unwrap();
    let s = &[Context::Pane(Pane::Sessions), Context::Global][..];
    assert_eq!(m.resolve(s, &ch('x')), Some(Action::Quit));
    assert_eq!(m.resolve(s, &ch('q')), None);
    assert_eq!(
        m.resolve(s, &ctrl('c')),
        Some(Action::Quit),
        "untouched default"
    );
    assert_eq!(
        m.resolve(s, &ch('k')),
        None,
        "unbound in sessions, not in global"
    );
    assert_eq!(m.resolve(s, &ch('j')), Some(Action::Down));
    assert_eq!(m.prefix(), ctrl('a'));
    assert!(!m.is_prefix(&ctrl('\\')));
    let stop = m
        .bindings(Context::Global)
        .into_iter()
        .find(|b| b.action == Action::Stop)
        .unwrap();
    assert_eq!(stop.description, "halt it");
    assert_eq!(stop.keys, "s");
    // Absent file: the defaults.
    let m = Keymap::load(Some(&dir.path().join("absent.toml"))).unwrap();
    assert_eq!(m.resolve(G, &ch('q')), Some(Action::Quit));
}

fn err_of(text: &str) -> String {
    Keymap::from_str_over_defaults(text, "/cfg/keymap.toml")
        .expect_err(text)
        .to_string()
}

#[test]
fn errors_name_the_file_the_context_the_key_and_the_value() {
    let e = err_of("[sessions]\n\"m\" = \"merge\"\n");
    for needle in [
        "/cfg/keymap.toml",
        "[sessions]",
        "\"m\"",
        "\"merge\"",
        "unknown action `merge`",
        "quit, help",
        "none",
    ] {
        assert!(e.contains(needle), "{needle} in {e}");
    }
    let e = err_of("[sessions]\n\"ctrl-bogus\" = \"quit\"\n");
    assert!(
        e.contains("/cfg/keymap.toml: [sessions] \"ctrl-bogus\": not a key: unknown key `bogus`"),
        "{e}"
    );
    let e = err_of("[pane]\n\"q\" = \"quit\"\n");
    assert!(
        e.contains("unknown context [pane]") && e.contains("global, sessions"),
        "{e}"
    );
    let e = err_of("[global]\n\"K\" = \"up\"\n\"shift-k\" = \"down\"\n");
    assert!(
        e.contains("\"K\" and \"shift-k\" are the same key (K)"),
        "{e}"
    );
    let e = err_of("[global]\n\"q\" = 3\n");
    assert!(e.contains("\"q\" = 3: a binding is"), "{e}");
    let e = err_of("[global]\n\"q\" = { action = \"quit\", color = \"red\" }\n");
    assert!(e.contains("unknown field `color`"), "{e}");
    let e = err_of("[global]\n\"q\" = { description = \"x\" }\n");
    assert!(e.contains("no `action`"), "{e}");
    let e = err_of("[attach]\nprefix = \"none\"\n");
    assert!(e.contains("cannot be removed"), "{e}");
    let e = err_of("[attach]\nprefix = \"x\"\n");
    assert!(e.contains("plain character"), "{e}");
    let e = err_of("[attach]\n\"ctrl-b\" = \"quit\"\n");
    assert!(e.contains("holds only `prefix`"), "{e}");
    let e = err_of("global = 1\n");
    assert!(e.contains("[global] must be a table"), "{e}");
    let e = err_of("[global\n");
    assert!(e.contains("/cfg/keymap.toml: not valid TOML"), "{e}");
}

#[test]
fn the_same_key_twice_in_one_file_is_an_error_but_the_user_beats_the_defaults() {
    // ctrl-4 and ctrl-\ are one byte.
    let e = err_of("[global]\n\"ctrl-4\" = \"quit\"\n\"ctrl-\\\\\" = \"help\"\n");
    assert!(e.contains("are the same key (ctrl-\\)"), "{e}");
    let m = Keymap::from_str_over_defaults("[global]\n\"q\" = \"help\"\n", "t").unwrap();
    assert_eq!(m.resolve(G, &ch('q')), Some(Action::Help));
    let quits: Vec<_> = m
        .bindings(Context::Global)
        .into_iter()
        .filter(|b| b.action == Action::Quit)
        .collect();
    assert_eq!(quits.len(), 1);
    assert_eq!(quits[0].keys, "ctrl-c");
}

#[test]
fn unreadable_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // A folder where the file should be: reading fails with something other than NotFound.
    let path = dir.path().join("keymap.toml");
    std::fs::create_dir(&path).unwrap();
    let e = Keymap::load(Some(&path)).unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
}

#[test]
fn bindings_group_keys_and_hide_shadowed_ones() {
    let m = Keymap::defaults();
    let b = m.bindings(Context::Pane(Pane::Sessions));
    let up = b.iter().find(|b| b.action == Action::Up).unwrap();
    assert_eq!(up.keys, "k, up");
    assert_eq!(up.description, Action::Up.describe());
    let live = m.bindings(Context::Pane(Pane::Live));
    let page = live.iter().find(|b| b.action == Action::PageUp).unwrap();
    assert_eq!(page.description, "scroll back one page");
    // In the palette, enter confirms; the modal's enter is shadowed and not listed twice.
    let eff = m.effective_bindings(&[Context::Palette, Context::Modal]);
    let modal = &eff.iter().find(|(c, _)| *c == Context::Modal).unwrap().1;
    assert!(
        modal
            .iter()
            .all(|b| !b.labels.contains(&"enter".to_owned()))
    );
    assert!(modal.iter().any(|b| b.action == Action::Escape));
    assert_eq!(
        m.key_for(
            &[Context::Pane(Pane::Sessions), Context::Global],
            Action::Help
        )
        .as_deref(),
        Some("?")
    );
    assert_eq!(
        m.key_for(&[Context::Attach], Action::Escape).as_deref(),
        Some("ctrl-\\")
    );
    assert_eq!(m.bindings(Context::Attach)[0].keys, "ctrl-\\");
}

/// docs/cockpit.md's "Keys" table is generated from assets/keymap.toml; this fails when they
/// disagree (set PROCTOR_UPDATE_DOCS=1 to rewrite the table).
#[test]
fn docs_key_table_matches_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cockpit.md");
    let doc = std::fs::read_to_string(path).expect("docs/cockpit.md");
    let begin = "<!-- keymap-table: begin (generated from assets/keymap.toml by a test) -->\n";
    let end = "<!-- keymap-table: end -->";
    let (Some(b), Some(e)) = (doc.find(begin), doc.find(end)) else {
        panic!("docs/cockpit.md lacks the keymap-table markers");
    };
    let table = markdown_table(&Keymap::defaults());
    let current = &doc[b + begin.len()..e];
    if current != table {
        if std::env::var_os("PROCTOR_UPDATE_DOCS").is_some() {
            let updated = format!("{}{table}{}", &doc[..b + begin.len()], &doc[e..]);
            std::fs::write(path, updated).expect("write docs/cockpit.md");
        } else {
            panic!(
                "docs/cockpit.md's key table differs from assets/keymap.toml; rerun with \
                 PROCTOR_UPDATE_DOCS=1. Expected:\n{table}"
            );
        }
    }
}

/// The Activity pane's keys: `/` searches the focused session's messages there (elsewhere it
/// still filters the list), `n`/`N` move among the matches (elsewhere `n` is still a new
/// session), Enter shows one; `7` shows the view from anywhere.
#[test]
fn the_activity_pane_searches_with_slash_and_moves_with_n() {
    use crate::tui::views::Tab;
    let m = Keymap::defaults();
    let a = &[Context::Pane(Pane::Activity), Context::Global][..];
    let s = &[Context::Pane(Pane::Sessions), Context::Global][..];
    assert_eq!(m.resolve(a, &ch('/')), Some(Action::SearchMessages));
    assert_eq!(m.resolve(a, &ch('n')), Some(Action::NextMatch));
    assert_eq!(m.resolve(a, &ch('N')), Some(Action::PrevMatch));
    assert_eq!(
        m.resolve(a, &key(KeyCode::Enter, KeyModifiers::NONE)),
        Some(Action::OpenMessage)
    );
    assert_eq!(m.resolve(a, &ch('j')), Some(Action::Down));
    assert_eq!(m.resolve(a, &ch('q')), Some(Action::Quit));
    assert_eq!(m.resolve(s, &ch('/')), Some(Action::Filter));
    assert_eq!(m.resolve(s, &ch('n')), Some(Action::NewSession));
    assert_eq!(m.resolve(s, &ch('7')), Some(Action::View(Tab::Activity)));
    assert_eq!(m.resolve(a, &ch('7')), Some(Action::View(Tab::Activity)));
}
