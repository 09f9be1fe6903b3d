use super::*;

fn is_ansi16(c: Color) -> bool {
    c == Color::Reset || ANSI_NAMES.iter().any(|(_, a)| *a == c)
}

fn user_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("themes")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("themes").join(format!("{name}.toml")), text).unwrap();
    }
    dir
}

#[test]
fn every_role_has_a_style_in_default() {
    let (_, text) = BUILTIN[0];
    let parsed = parse(text, "default").unwrap();
    for role in Role::ALL {
        assert!(
            parsed.set[role as usize],
            "default.toml lacks [{}]",
            role.name()
        );
    }
    let theme = Theme::builtin("default").unwrap();
    for role in Role::ALL {
        // Each role's style does something: a colour or a modifier.
        let s = theme.style(role);
        assert!(
            s.fg.is_some() || s.bg.is_some() || !s.add_modifier.is_empty(),
            "{}",
            role.name()
        );
    }
}

#[test]
fn every_builtin_parses_and_ansi_themes_use_only_the_16_colours() {
    for (name, _) in BUILTIN {
        let theme = Theme::builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(theme.name(), name);
        if name == "nord" {
            continue;
        }
        for role in Role::ALL {
            let s = theme.style(role);
            for c in [s.fg, s.bg].into_iter().flatten() {
                assert!(is_ansi16(c), "{name}: {} uses {c:?}", role.name());
            }
        }
    }
}

#[test]
fn default_theme_colours() {
    let t = Theme::builtin("default").unwrap();
    assert_eq!(t.style(Role::Text), Style::default().fg(Color::Reset));
    assert_eq!(t.style(Role::Dim).fg, Some(Color::DarkGray));
    assert_eq!(
        t.style(Role::StateFailed),
        Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
    );
    assert_eq!(t.style(Role::StateRunning).fg, Some(Color::Green));
    assert_eq!(t.style(Role::StateIdle).fg, Some(Color::Yellow));
    assert_eq!(
        t.style(Role::Selected),
        Style::default().add_modifier(Modifier::REVERSED)
    );
    assert_eq!(
        t.style(Role::BorderFocused),
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD)
    );
    assert_eq!(
        t.style(Role::Input),
        Style::default().add_modifier(Modifier::UNDERLINED)
    );
}

#[test]
fn light_theme_colours() {
    let t = Theme::builtin("light").unwrap();
    // Its own.
    assert_eq!(t.style(Role::Key).fg, Some(Color::Blue));
    assert_eq!(t.style(Role::StateIdle).fg, Some(Color::Magenta));
    let lost = t.style(Role::StateLost);
    assert_eq!(lost.fg, Some(Color::Red));
    assert!(
        lost.add_modifier
            .contains(Modifier::BOLD | Modifier::UNDERLINED)
    );
    // Inherited from default.
    assert_eq!(t.style(Role::StateRunning).fg, Some(Color::Green));
    assert_eq!(
        t.style(Role::Selected),
        Style::default().add_modifier(Modifier::REVERSED)
    );
    // No yellow text on a light background.
    for role in Role::ALL {
        assert_ne!(t.style(role).fg, Some(Color::Yellow), "{}", role.name());
    }
}

#[test]
fn high_contrast_theme_colours() {
    let t = Theme::builtin("high-contrast").unwrap();
    assert_eq!(t.style(Role::Text).fg, Some(Color::White));
    assert_eq!(t.style(Role::Dim).fg, Some(Color::Gray));
    let failed = t.style(Role::StateFailed);
    assert_eq!(failed.fg, Some(Color::LightRed));
    assert!(
        failed
            .add_modifier
            .contains(Modifier::BOLD | Modifier::UNDERLINED)
    );
    assert_eq!(t.style(Role::Highlight).bg, Some(Color::LightYellow));
    // Nothing in dark grey.
    for role in Role::ALL {
        assert_ne!(t.style(role).fg, Some(Color::DarkGray), "{}", role.name());
    }
}

#[test]
fn nord_theme_colours() {
    let t = Theme::builtin("nord").unwrap();
    assert_eq!(t.style(Role::Text).fg, Some(Color::Rgb(0xd8, 0xde, 0xe9)));
    assert_eq!(
        t.style(Role::StateFailed).fg,
        Some(Color::Rgb(0xbf, 0x61, 0x6a))
    );
    assert_eq!(
        t.style(Role::StateRunning).fg,
        Some(Color::Rgb(0xa3, 0xbe, 0x8c))
    );
    let sel = t.style(Role::Selected);
    assert_eq!(sel.fg, Some(Color::Rgb(0x88, 0xc0, 0xd0)));
    assert!(sel.add_modifier.contains(Modifier::REVERSED));
    assert_eq!(
        t.style(Role::StatusBar).bg,
        Some(Color::Rgb(0x3b, 0x42, 0x52))
    );
}

#[test]
fn no_color_drops_colours_and_keeps_modifiers() {
    for (name, _) in BUILTIN {
        let t = Theme::builtin(name).unwrap().no_color();
        assert!(!t.has_colors());
        for role in Role::ALL {
            let s = t.style(role);
            assert_eq!(
                (s.fg, s.bg, s.underline_color),
                (None, None, None),
                "{name} {role:?}"
            );
        }
        assert!(
            t.style(Role::Selected)
                .add_modifier
                .contains(Modifier::REVERSED),
            "{name}: selection visible without colour"
        );
        assert!(
            t.style(Role::StateFailed)
                .add_modifier
                .contains(Modifier::BOLD)
        );
    }
    // A user theme whose selection is only a colour still shows it reversed.
    let dir = user_dir(&[("flat", "[selected]\nbg = \"blue\"\nreversed = false\n")]);
    let t = Theme::load("flat", dir.path()).unwrap();
    assert!(
        !t.style(Role::Selected)
            .add_modifier
            .contains(Modifier::REVERSED)
    );
    let t = t.no_color();
    let sel = t.style(Role::Selected);
    assert!(sel.add_modifier.contains(Modifier::REVERSED));
    assert!(!sel.sub_modifier.contains(Modifier::REVERSED));
}

#[test]
fn no_color_environment_value() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!no_color_requested(None));
    assert!(!no_color_requested(Some(OsStr::new(""))));
    assert!(no_color_requested(Some(OsStr::new("1"))));
    let coloured = Theme::for_cockpit("default", dir.path(), None).unwrap();
    assert_eq!(coloured.style(Role::StateFailed).fg, Some(Color::Red));
    let empty = Theme::for_cockpit("nord", dir.path(), Some(OsStr::new(""))).unwrap();
    assert!(empty.has_colors());
    let plain = Theme::for_cockpit("nord", dir.path(), Some(OsStr::new("1"))).unwrap();
    assert!(!plain.has_colors());
    assert_eq!(plain.style(Role::StateFailed).fg, None);
    assert!(
        plain
            .style(Role::StateFailed)
            .add_modifier
            .contains(Modifier::BOLD)
    );
}

#[test]
fn user_theme_inherits_field_by_field() {
    let dir = user_dir(&[(
        "mine",
        "inherits = \"light\"\n[state_failed]\nfg = \"#ff0000\"\n[selected]\nfg = \"indexed(33)\"\n",
    )]);
    let t = Theme::load("mine", dir.path()).unwrap();
    let failed = t.style(Role::StateFailed);
    assert_eq!(failed.fg, Some(Color::Rgb(255, 0, 0)));
    assert!(
        failed.add_modifier.contains(Modifier::BOLD),
        "bold from default"
    );
    let sel = t.style(Role::Selected);
    assert_eq!(sel.fg, Some(Color::Indexed(33)));
    assert!(
        sel.add_modifier.contains(Modifier::REVERSED),
        "reversed from default"
    );
    assert_eq!(t.style(Role::Key).fg, Some(Color::Blue), "from light");
    // Without `inherits`, a user theme inherits default; with "none", nothing.
    let dir = user_dir(&[
        ("bare", "[text]\nbold = true\n"),
        ("blank", "inherits = \"none\"\n[text]\nbold = true\n"),
    ]);
    let bare = Theme::load("bare", dir.path()).unwrap();
    assert_eq!(bare.style(Role::StateFailed).fg, Some(Color::Red));
    assert_eq!(
        bare.style(Role::Text),
        Style::default()
            .fg(Color::Reset)
            .add_modifier(Modifier::BOLD)
    );
    let blank = Theme::load("blank", dir.path()).unwrap();
    assert_eq!(blank.style(Role::StateFailed), Style::default());
}

#[test]
fn a_user_theme_may_shadow_and_inherit_a_builtin() {
    let dir = user_dir(&[(
        "default",
        "inherits = \"default\"\n[error]\nfg = \"magenta\"\n",
    )]);
    let t = Theme::load("default", dir.path()).unwrap();
    assert_eq!(t.style(Role::Error).fg, Some(Color::Magenta));
    assert_eq!(t.style(Role::StateFailed).fg, Some(Color::Red));
    // Without `inherits` it also lays itself over the built-in default.
    let dir = user_dir(&[("default", "[error]\nfg = \"magenta\"\n")]);
    let t = Theme::load("default", dir.path()).unwrap();
    assert_eq!(t.style(Role::StateFailed).fg, Some(Color::Red));
    // And other user themes inherit the user's default.
    let dir = user_dir(&[
        ("default", "[error]\nfg = \"magenta\"\n"),
        ("other", "[text]\nbold = true\n"),
    ]);
    let t = Theme::load("other", dir.path()).unwrap();
    assert_eq!(t.style(Role::Error).fg, Some(Color::Magenta));
}

#[test]
fn cycles_are_refused() {
    let dir = user_dir(&[("a", "inherits = \"b\"\n"), ("b", "inherits = \"a\"\n")]);
    let e = Theme::load("a", dir.path()).unwrap_err().to_string();
    assert!(e.contains("inheritance cycle"), "{e}");
    assert!(e.contains("a.toml → ") && e.contains("b.toml → "), "{e}");
    let dir = user_dir(&[("me", "inherits = \"me\"\n")]);
    let e = Theme::load("me", dir.path()).unwrap_err().to_string();
    assert!(e.contains("inheritance cycle"), "{e}");
}

#[test]
fn invalid_themes_name_the_file_the_key_and_the_value() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[state_failed]\nfg = \"teal\"\n",
            &[
                "state_failed.fg = \"teal\"",
                "unknown colour",
                "bright-white",
            ],
        ),
        (
            "[text]\nfg = \"#12345\"\n",
            &["text.fg = \"#12345\"", "#rrggbb"],
        ),
        (
            "[text]\nbg = \"indexed(256)\"\n",
            &["text.bg = \"indexed(256)\"", "0 to 255"],
        ),
        (
            "[text]\nbold = \"yes\"\n",
            &["text.bold = \"yes\"", "true or false"],
        ),
        (
            "[text]\nblink = true\n",
            &["text.blink = true", "unknown field `blink`"],
        ),
        (
            "[txet]\nbold = true\n",
            &["txet = { bold = true }", "unknown role `txet`", "highlight"],
        ),
        ("text = \"red\"\n", &["text = \"red\"", "a role is a table"]),
        (
            "inherits = \"../x\"\n",
            &["inherits = \"../x\"", "not a theme name"],
        ),
        ("inherits = 3\n", &["inherits = 3"]),
        ("[text\n", &["not valid TOML"]),
    ];
    for (text, needles) in cases {
        let dir = user_dir(&[("bad", text)]);
        let e = Theme::load("bad", dir.path()).unwrap_err().to_string();
        let file = dir.path().join("themes/bad.toml").display().to_string();
        assert!(e.starts_with(&file), "{e}");
        for n in *needles {
            assert!(e.contains(n), "{n:?} in {e}");
        }
    }
    // A broken parent is reported with the parent's file.
    let dir = user_dir(&[
        ("child", "inherits = \"parent\"\n"),
        ("parent", "[text]\nfg = \"nope\"\n"),
    ]);
    let e = Theme::load("child", dir.path()).unwrap_err().to_string();
    assert!(e.contains("parent.toml: text.fg = \"nope\""), "{e}");
}

#[test]
fn unknown_and_badly_named_themes() {
    let dir = tempfile::tempdir().unwrap();
    let e = Theme::load("solarized", dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no theme `solarized`"), "{e}");
    assert!(e.contains("default, light, high-contrast, nord"), "{e}");
    assert!(e.contains("themes/solarized.toml"), "{e}");
    let e = Theme::load("../../etc/passwd", dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad theme name"), "{e}");
    assert!(Theme::builtin("").is_err());
}

#[test]
fn colour_syntax() {
    assert_eq!(parse_color("reset"), Ok(Color::Reset));
    assert_eq!(parse_color("white"), Ok(Color::Gray));
    assert_eq!(parse_color("bright-white"), Ok(Color::White));
    assert_eq!(parse_color("bright-black"), Ok(Color::DarkGray));
    assert_eq!(parse_color("#0A0b0C"), Ok(Color::Rgb(10, 11, 12)));
    assert_eq!(parse_color("indexed(0)"), Ok(Color::Indexed(0)));
    assert_eq!(parse_color("indexed(255)"), Ok(Color::Indexed(255)));
    for bad in [
        "Red",
        "#gggggg",
        "#1234567",
        "indexed(-1)",
        "indexed()",
        "rgb(1,2,3)",
        "",
    ] {
        assert!(parse_color(bad).is_err(), "{bad}");
    }
}

#[test]
fn docs_list_every_role() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cockpit.md"))
        .expect("docs/cockpit.md");
    let section = &doc[doc.find("## Themes").expect("a Themes section")..];
    for role in Role::ALL {
        assert!(
            section.contains(&format!("`{}`", role.name())),
            "docs/cockpit.md lacks `{}`",
            role.name()
        );
    }
    for (name, _) in BUILTIN {
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/cockpit.md lacks theme `{name}`"
        );
    }
}

#[test]
fn awaiting_a_person_never_looks_like_passed() {
    // A theme that styles them alike, and one that styles nothing: awaiting is made bold and
    // underlined; passed keeps its look.
    let dir = user_dir(&[
        (
            "alike",
            "[gate_awaiting_human]\nfg = \"green\"\nbold = false\nunderline = false\n\
             [gate_passed]\nfg = \"green\"\n",
        ),
        ("plain", "inherits = \"none\"\n"),
    ]);
    for name in ["alike", "plain"] {
        let t = Theme::load(name, dir.path()).unwrap();
        let (a, p) = (t.style(Role::GateAwaitingHuman), t.style(Role::GatePassed));
        assert_ne!((a.fg, a.add_modifier), (p.fg, p.add_modifier), "{name}");
        assert!(
            a.add_modifier
                .contains(Modifier::BOLD | Modifier::UNDERLINED),
            "{name}"
        );
    }
    let t = Theme::load("alike", dir.path()).unwrap();
    assert_eq!(t.style(Role::GatePassed).fg, Some(Color::Green));
    // The built-ins differ by colour and by modifiers, so NO_COLOR keeps them apart too.
    for (name, _) in BUILTIN {
        let t = Theme::builtin(name).unwrap();
        let (a, p) = (t.style(Role::GateAwaitingHuman), t.style(Role::GatePassed));
        assert_ne!(a.fg, p.fg, "{name}");
        assert_ne!(a.add_modifier, p.add_modifier, "{name}");
    }
}
