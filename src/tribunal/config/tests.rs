use super::*;

/// A small valid registry, edited by each refusal test with one `replace`.
const SMALL: &str = r#"
[[lens]]
name = "defect"
charter = "Find defects."
tier = "deep-state"

[[ladder.deep-state]]
backend = "claude"
model = "claude-opus-4-1"
family = "anthropic"

[[ladder.deep-state]]
backend = "codex"
model = "gpt-5-codex"
family = "openai"

[[ladder.deep-state]]
backend = "openai"
model = "grok-4"
family = "xai"
base_url = "https://api.x.ai/v1"
key = {kind = "env", name = "XAI_API_KEY"}
timeout_secs = 600

[[ladder.deep-state]]
backend = "ollama"
model = "llama3.1:8b"
family = "meta"
base_url = "http://127.0.0.1:11434"
"#;

fn refused(text: &str) -> ConfigError {
    match parse(text, "/h/config/tribunal.toml") {
        Ok(r) => panic!("accepted: {r:?}"),
        Err(e) => e,
    }
}

fn assert_refused(text: &str, kind: &str, names: &[&str]) {
    let e = refused(text);
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.code(), "config_invalid");
    let msg = e.to_string();
    assert!(msg.starts_with("/h/config/tribunal.toml"), "{msg}");
    assert!(msg.contains("Remedy:"), "{msg}");
    for n in names {
        assert!(msg.contains(n), "`{n}` not in: {msg}");
    }
}

#[test]
fn the_small_registry_parses_with_its_defaults() {
    let r = parse(SMALL, "x").unwrap();
    assert_eq!(r.source, "x");
    let l = r.ladder(Tier::DeepState);
    assert_eq!(l.len(), 4);
    assert_eq!(l[0].timeout_secs, DEFAULT_TIMEOUT_SECS);
    assert!(!l[0].local && l[3].local, "ollama is local by itself");
    assert_eq!(
        l[2].key,
        Some(KeySource::Env {
            name: "XAI_API_KEY".into()
        })
    );
    assert!(
        r.verifier.is_empty(),
        "no fast-structural lens, no verifier needed"
    );
}

#[test]
fn the_default_registry_is_valid_and_holds_the_seeds_shape() {
    let r = default_registry();
    assert_eq!(r.source, "default");
    let names: Vec<&str> = r.lenses.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "defect",
            "contract",
            "state",
            "concurrency",
            "security",
            "tests",
            "operator-safety",
            "generalist"
        ]
    );
    for tier in Tier::ALL {
        let l = r.ladder(tier);
        assert!(l.last().unwrap().local, "{tier:?}");
        assert_eq!(l.last().unwrap().backend, Backend::Ollama);
        let families: BTreeSet<&str> = l.iter().map(|r| r.family.as_str()).collect();
        assert!(families.len() >= 4, "{tier:?}: {families:?}");
    }
    assert!(r.verifier.last().unwrap().local);
    // Excluding any one family still leaves three carriers on every ladder.
    for fam in r.families() {
        for lad in r.ladders.iter().map(|l| &l.rungs).chain([&r.verifier]) {
            let left = lad
                .iter()
                .filter(|x| x.family != fam && !x.local && x.context_tokens.is_none())
                .count();
            assert!(left >= FLOOR, "{fam}: {left}");
        }
    }
    // The deep-state and operator-security ladders start on harnesses that read.
    assert!(
        r.ladder(Tier::DeepState)[..3]
            .iter()
            .all(|x| x.backend.is_cli())
    );
    assert!(
        r.ladder(Tier::OperatorSecurity)[..3]
            .iter()
            .all(|x| x.backend.is_cli())
    );
    // The fast-structural ladder starts on a free local GPU.
    assert_eq!(r.ladder(Tier::FastStructural)[0].backend, Backend::Ollama);
    assert_eq!(default_text(), DEFAULT_TEXT);
}

#[test]
fn a_syntax_error_names_the_file_and_the_line() {
    let e = refused(&SMALL.replace("tier = \"deep-state\"", "tier = deep-state"));
    assert_eq!(e.kind(), "syntax");
    let ConfigError::Syntax { line, .. } = &e else {
        unreachable!()
    };
    assert_eq!(*line, Some(5), "{e}");
    assert!(e.to_string().contains("line 5"), "{e}");
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let e = refused(&SMALL.replace(
        "charter = \"Find defects.\"",
        "charter = \"Find defects.\"\ncolour = \"red\"",
    ));
    assert_eq!(e.kind(), "syntax");
    assert!(e.to_string().contains("colour"), "{e}");
    let e = refused(&format!("{SMALL}\n[judges]\nx = 1\n"));
    assert!(e.to_string().contains("judges"), "{e}");
}

#[test]
fn three_rung_floor() {
    // Remove the xai rung: two carriers before the tail.
    let two = SMALL.replace(
        "[[ladder.deep-state]]\nbackend = \"openai\"\nmodel = \"grok-4\"",
        "[[ladder.deep-state]]\nbackend = \"openai\"\ncontext_tokens = 32000\nmodel = \"grok-4\"",
    );
    assert_refused(
        &two,
        "floor",
        &["ladder deep-state", "2 rung(s)", "at least 3"],
    );
    // A local rung in the head does not count toward the floor.
    let local_head = SMALL.replace(
        "key = {kind = \"env\", name = \"XAI_API_KEY\"}",
        "key = {kind = \"env\", name = \"XAI_API_KEY\"}\nlocal = true",
    );
    // Now the tail is two rungs (the grok rung is local and last-but-one), the head two.
    assert_refused(&local_head, "floor", &["2 rung(s)"]);
}

#[test]
fn no_local_tail() {
    let text = format!(
        "{SMALL}\n[[ladder.deep-state]]\nbackend = \"gemini\"\nmodel = \"gemini-2.5-pro\"\nfamily = \"google\"\n"
    );
    assert_refused(
        &text,
        "no_local_tail",
        &["ladder deep-state", "gemini-2.5-pro", "local"],
    );
}

#[test]
fn cli_family_mismatch() {
    let text = SMALL.replace(
        "model = \"gpt-5-codex\"\nfamily = \"openai\"",
        "model = \"gpt-5-codex\"\nfamily = \"anthropic\"",
    );
    assert_refused(
        &text,
        "family_mismatch",
        &["ladder deep-state rung 2", "codex", "family = \"openai\""],
    );
}

#[test]
fn duplicate_lens() {
    let text = format!(
        "{SMALL}\n[[lens]]\nname = \"defect\"\ncharter = \"Again.\"\ntier = \"deep-state\"\n"
    );
    assert_refused(&text, "duplicate_lens", &["lens 2 (defect)", "twice"]);
}

#[test]
fn too_many_lenses() {
    let mut text = SMALL.to_string();
    for i in 0..8 {
        text.push_str(&format!(
            "\n[[lens]]\nname = \"l{i}\"\ncharter = \"c\"\ntier = \"deep-state\"\n"
        ));
    }
    assert_refused(&text, "too_many_lenses", &["9 lenses", "at most 8"]);
}

#[test]
fn unknown_tier() {
    let text = SMALL.replace("tier = \"deep-state\"", "tier = \"shallow\"");
    assert_refused(
        &text,
        "unknown_tier",
        &["lens 1 (defect)", "shallow", "fast-structural"],
    );
    let text = SMALL.replace("[[ladder.deep-state]]", "[[ladder.deep]]");
    assert_refused(&text, "unknown_ladder", &["ladder deep"]);
}

#[test]
fn a_lens_whose_tier_has_no_ladder() {
    let text = SMALL.replace("tier = \"deep-state\"", "tier = \"generalist\"");
    assert_refused(&text, "missing_ladder", &["ladder generalist"]);
    let text = SMALL
        .replace("tier = \"deep-state\"", "tier = \"fast-structural\"")
        .replace("ladder.deep-state", "ladder.fast-structural");
    assert_refused(&text, "missing_ladder", &["verifier"]);
}

#[test]
fn missing_base_url() {
    let text = SMALL.replace("base_url = \"https://api.x.ai/v1\"\n", "");
    assert_refused(
        &text,
        "base_url_missing",
        &["ladder deep-state rung 3", "openai rung needs a base_url"],
    );
    let text = SMALL.replace("base_url = \"http://127.0.0.1:11434\"\n", "");
    assert_refused(&text, "base_url_missing", &["rung 4", "11434"]);
    let text = SMALL.replace("https://api.x.ai/v1", "ftp://x");
    assert_refused(&text, "base_url", &["ftp://x"]);
}

#[test]
fn timeout_bounds() {
    for t in ["0", "3601"] {
        let text = SMALL.replace("timeout_secs = 600", &format!("timeout_secs = {t}"));
        assert_refused(&text, "timeout_bounds", &["rung 3", t, "1 and 3600"]);
    }
    for t in ["1", "3600"] {
        let text = SMALL.replace("timeout_secs = 600", &format!("timeout_secs = {t}"));
        assert_eq!(
            parse(&text, "x").unwrap().ladder(Tier::DeepState)[2]
                .timeout_secs
                .to_string(),
            t
        );
    }
}

#[test]
fn other_rung_refusals() {
    let cases = [
        (
            SMALL.replace("name = \"defect\"", "name = \"Defect\""),
            "lens_name",
        ),
        (SMALL.replace("Find defects.", "Find\\ndefects."), "charter"),
        (
            SMALL.replace("backend = \"claude\"", "backend = \"cursor\""),
            "unknown_backend",
        ),
        (
            SMALL.replace("family = \"meta\"", "family = \"Meta AI\""),
            "family_name",
        ),
        (
            SMALL.replace("family = \"meta\"", "family = \"meta\"\nlocal = false"),
            "ollama_local",
        ),
        (
            SMALL.replace(
                "family = \"anthropic\"",
                "family = \"anthropic\"\nlocal = true",
            ),
            "cli_local",
        ),
        (
            SMALL.replace(
                "family = \"anthropic\"",
                "family = \"anthropic\"\nbase_url = \"https://x\"",
            ),
            "cli_base_url",
        ),
        (
            SMALL.replace(
                "family = \"anthropic\"",
                "family = \"anthropic\"\nkey = {kind = \"env\", name = \"K\"}",
            ),
            "cli_key",
        ),
        (
            SMALL.replace("family = \"xai\"", "family = \"xai\"\nprofile = \"work\""),
            "http_profile",
        ),
        (
            SMALL.replace("name = \"XAI_API_KEY\"", "name = \"sk-live-123\""),
            "key",
        ),
        (
            SMALL.replace(
                "{kind = \"env\", name = \"XAI_API_KEY\"}",
                "{kind = \"file\", path = \"key.txt\"}",
            ),
            "key",
        ),
        (
            SMALL.replace("model = \"grok-4\"", "model = \"grok 4\""),
            "model",
        ),
        (
            SMALL.replace("family = \"xai\"", "family = \"xai\"\ncontext_tokens = 0"),
            "context_tokens",
        ),
    ];
    for (text, kind) in cases {
        assert_refused(&text, kind, &[]);
    }
}

#[test]
fn builder_families_by_prefix() {
    let r = default_registry();
    let cases = [
        ("claude-opus-4-1", "anthropic"),
        ("Claude-3.5-Sonnet", "anthropic"),
        ("gpt-4o", "openai"),
        ("o1-preview", "openai"),
        ("o3", "openai"),
        ("o4-mini", "openai"),
        ("codex-mini-latest", "openai"),
        ("gemini-1.5-flash", "google"),
        ("gemma3:27b", "google"),
        ("grok-3", "xai"),
        ("llama3.2", "meta"),
        ("qwen3-coder:30b", "alibaba"),
        ("mistral-large-latest", "mistral"),
        ("codestral-latest", "mistral"),
        ("devstral-small", "mistral"),
        ("deepseek-r1:70b", "deepseek"),
        ("anthropic/claude-sonnet-4", "anthropic"),
        ("meta-llama/Llama-3.3-70B-Instruct", "meta"),
        ("anthropic.claude-3-haiku-20240307-v1:0", "anthropic"),
    ];
    for (b, fam) in cases {
        assert_eq!(builder_families(&r, b).unwrap(), fam, "{b}");
    }
}

#[test]
fn builder_families_by_name_and_by_rung() {
    let r = default_registry();
    assert_eq!(builder_families(&r, "OpenAI").unwrap(), "openai");
    assert_eq!(builder_families(&r, " xai ").unwrap(), "xai");
    // A rung's model whose id has no known prefix: its rung says the family.
    let text = SMALL.replace("model = \"grok-4\"", "model = \"house-model-7\"");
    let r2 = parse(&text, "x").unwrap();
    assert_eq!(builder_families(&r2, "house-model-7").unwrap(), "xai");
    // A family only a rung names.
    let text = SMALL.replace("family = \"xai\"", "family = \"acme\"");
    let r3 = parse(&text, "x").unwrap();
    assert_eq!(builder_families(&r3, "acme").unwrap(), "acme");
}

#[test]
fn an_unknown_builder_is_an_error() {
    let r = default_registry();
    for b in ["", "my-agent", "olmo-2", "phind-codellama", "gpteacher"] {
        let e = builder_families(&r, b).unwrap_err();
        assert_eq!(e.code(), "unknown_builder", "{b}");
        assert!(e.to_string().contains("cannot be excluded"), "{e}");
        assert!(e.to_string().contains("anthropic"), "{e}");
    }
}

#[test]
fn the_family_of_a_tool() {
    assert_eq!(family_of_tool("claude"), Some("anthropic"));
    assert_eq!(family_of_tool("codex"), Some("openai"));
    assert_eq!(family_of_tool("gemini"), Some("google"));
    assert_eq!(family_of_tool("grok"), Some("xai"));
    assert_eq!(family_of_tool("opencode"), None);
}

#[test]
fn load_reads_the_file_or_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::resolve(Some(dir.path())).unwrap();
    home.ensure().unwrap();
    assert_eq!(load(&home).unwrap().source, "default");
    crate::files::ensure_private_dir(&home.config).unwrap();
    crate::files::write_atomic(&path(&home), SMALL.as_bytes()).unwrap();
    let r = load(&home).unwrap();
    assert_eq!(r.source, path(&home).display().to_string());
    assert_eq!(r.lenses.len(), 1);
    crate::files::write_atomic(&path(&home), b"[[lens]]\nname = 3\n").unwrap();
    let e = load(&home).unwrap_err();
    assert!(e.to_string().contains("tribunal.toml"), "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
}
